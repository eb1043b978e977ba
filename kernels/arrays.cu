// Array-making and element-wise steps the stages take on device arrays, as daskgb's own
// kernels (daskgb/device_arrays.py launches them): CuPy's fill, arange, tile and fancy
// indexing would each be compiled by NVRTC at first use in a process.

// out[i] = value, i < n.
template <class T>
__global__ void fill(T* __restrict__ out, long long n, T value) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    out[i] = value;
  }
}

// out[i] = i, i < n.
template <class T>
__global__ void iota(T* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    out[i] = (T)i;
  }
}

// The k values of row repeated: out[i] = row[i % k], i < n (an (n / k, k) array of equal rows).
__global__ void tile_row(float* __restrict__ out, long long n, const float* __restrict__ row, int k) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    out[i] = row[i % k];
  }
}

// dst[i * dst_stride] = src[i * src_stride], i < n: a copy between 1-D views (a margin's column).
__global__ void copy_strided(const float* __restrict__ src, long long src_stride, float* __restrict__ dst,
                             long long dst_stride, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    dst[i * dst_stride] = src[i * src_stride];
  }
}

// margin[r * stride] += the value of row r's leaf, r < n: leaf_values holds a tree's node
// values as float bits (growth.cu's layout), positions[r] the leaf (times n_trees, when a
// round grows n_trees > 1 trees: growth/device.py's QueuedForest). One float add, as the host
// adds a leaf's value.
__global__ void add_leaf_values_to(float* __restrict__ margin, long long stride, const int* __restrict__ leaf_values,
                                   const int* __restrict__ positions, long long n, int n_trees) {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n; r += (long long)gridDim.x * blockDim.x) {
    const int leaf = n_trees > 1 ? positions[r] / n_trees : positions[r];
    margin[r * stride] += __int_as_float(leaf_values[leaf]);
  }
}
