// Children of split nodes: the built child's histogram and its sibling's, the parent's
// minus the built one (the subtraction trick), written side by side for the next
// split evaluation, with the children's gradient sums (histogram/cuda.py children_histograms).
#include "common.cuh"

// parents: (n_parents, row_len) int64 histogram rows; built: (k, row_len), the built child
// of split i (its right child where build_right[i], else its left child).
// info: int64 k | parent_row[S] | build_right[S] (ChildrenInfo, S = info_stride >= k; the host
// writes k itself, growth.cu writes k on the device and the host launches for an upper bound).
// parent_left, parent_right: (n_parents, 2) sums of each parent's best split's children.
// out: (2k, row_len): left child of split i at row 2i, right child at 2i + 1; out_sums (2k, 2) alike.
// Launch: 1-D, any shape (grid-stride over k * row_len).
__global__ void children_histograms(const long long* __restrict__ parents, const long long* __restrict__ built,
                                    const long long* __restrict__ parent_left,
                                    const long long* __restrict__ parent_right,
                                    const long long* __restrict__ info, int info_stride, long long row_len,
                                    long long* __restrict__ out, long long* __restrict__ out_sums) {
  const ChildrenInfo at(info_stride);
  const long long k = info[at.k];
  const long long* parent_row = info + at.parent_row;
  const long long* build_right = info + at.build_right;
  const long long n = k * row_len;
  const long long step = (long long)gridDim.x * blockDim.x;
  const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (long long t = first; t < n; t += step) {
    const long long i = t / row_len, e = t - i * row_len;
    const long long b = built[t];
    const long long o = parents[parent_row[i] * row_len + e] - b;
    const bool right_built = build_right[i] != 0;
    out[2 * i * row_len + e] = right_built ? o : b;
    out[(2 * i + 1) * row_len + e] = right_built ? b : o;
  }
  if (first < 4 * k) {  // out_sums[child][component]
    const long long child = first >> 1, comp = first & 1, i = child >> 1;
    const long long* src = (child & 1) ? parent_right : parent_left;
    out_sums[first] = src[2 * parent_row[i] + comp];
  }
}
