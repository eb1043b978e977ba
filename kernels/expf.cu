// fmath.expf of a device array: glibc's expf to the bit (expf.cuh), launched by daskgb/fmath.py.
#include "expf.cuh"

// out[i] = expf(x[i]), i < n; table: fmath.device_table.
__global__ void expf_values(const float* __restrict__ x, long long n, const unsigned long long* __restrict__ table,
                            float* __restrict__ out) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    out[i] = daskgb_expf(x[i], table);
  }
}
