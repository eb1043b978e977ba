// The weighted quantile sketch's segmented binary search (sketch/cuda.py; sketch/reference.py is the reference):
// for each query q, the index of the first entry of a[lo[q]:hi[q]] (a sorted run) that is
// greater than v[q] (right) or not less than it (left), as an index into a; hi[q] where
// none is. One thread a query: the array-operation reference takes one pass per bit of the
// widest run (~130 small launches for runs of 4M entries), this one launch.
// Launch: 1-D, at least n threads.

template <bool kRight>
__device__ void search(const double* __restrict__ a, const long long* __restrict__ lo,
                       const long long* __restrict__ hi, const double* __restrict__ v, long long n,
                       long long* __restrict__ out) {
  const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (q >= n) return;
  long long l = lo[q], h = hi[q];
  const double x = v[q];
  while (l < h) {
    const long long mid = l + ((h - l) >> 1);
    const double am = a[mid];
    if (kRight ? (am <= x) : (am < x)) {
      l = mid + 1;
    } else {
      h = mid;
    }
  }
  out[q] = l;
}

__global__ void segmented_search_right(const double* a, const long long* lo, const long long* hi,
                                       const double* v, long long n, long long* out) {
  search<true>(a, lo, hi, v, n, out);
}

__global__ void segmented_search_left(const double* a, const long long* lo, const long long* hi,
                                      const double* v, long long n, long long* out) {
  search<false>(a, lo, hi, v, n, out);
}
