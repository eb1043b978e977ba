// Device helpers every kernel shares: reading the bit-packed ELLPACK stream (ellpack/layout.py).
#pragma once
#include "layouts.cuh"

// Symbol i of a bit-packed ELLPACK stream (see daskgb/ellpack/layout.py): bits
// [i*bits, (i+1)*bits) of a little-endian stream of uint32 words. The second word is
// loaded only for a symbol that straddles two words (never when bits divides 32).
__device__ __forceinline__ uint32_t ellpack_symbol(const uint32_t* __restrict__ words, int bits,
                                                   unsigned long long i) {
  const unsigned long long pos = i * (unsigned long long)bits;
  const unsigned long long w = pos >> 5;
  const unsigned off = (unsigned)(pos & 31);
  uint32_t v = words[w] >> off;
  if (off + (unsigned)bits > 32u) v |= words[w + 1] << (32u - off);
  return v & (uint32_t)((1ull << bits) - 1ull);
}

// First slot of the sparse ELLPACK row starting at row_begin whose global bin is not
// below `value` (row_stride if none): a row's bins ascend, padded with null_symbol
// (= total bins, above every bin).
__device__ __forceinline__ int ellpack_lower_bound(const uint32_t* __restrict__ words, int bits,
                                                   unsigned long long row_begin, int row_stride,
                                                   uint32_t value) {
  int a = 0, b = row_stride;
  while (a < b) {
    const int mid = (a + b) >> 1;
    if (ellpack_symbol(words, bits, row_begin + (unsigned long long)mid) < value) {
      a = mid + 1;
    } else {
      b = mid;
    }
  }
  return a;
}

// Feature-local bin of feature f in the ELLPACK row whose first entry is row_begin,
// or -1 when the value is missing (ellpack/reference.py feature_bins).
//   dense:  slot f holds the local bin, null_symbol marks a missing value;
//   sparse: the last entry below the feature's end is the feature's bin when it is
//           not below the feature's start.
template <bool kDense>
__device__ __forceinline__ int ellpack_feature_bin(const uint32_t* __restrict__ words, int bits,
                                                   unsigned long long row_begin, int row_stride,
                                                   uint32_t null_symbol, const int32_t* __restrict__ ptrs,
                                                   int f) {
  if constexpr (kDense) {
    uint32_t s = ellpack_symbol(words, bits, row_begin + (unsigned long long)f);
    return s == null_symbol ? -1 : (int)s;
  } else {
    const uint32_t lo = (uint32_t)ptrs[f], hi = (uint32_t)ptrs[f + 1];
    const int a = ellpack_lower_bound(words, bits, row_begin, row_stride, hi);  // entries below hi
    if (a == 0) return -1;
    uint32_t s = ellpack_symbol(words, bits, row_begin + (unsigned long long)(a - 1));
    return s >= lo ? (int)(s - lo) : -1;
  }
}

// Whether category c (>= 0) is in a category set of n_words words (category_sets.py: bit c % 32
// of word c / 32; a category beyond the words is in no set).
__device__ __forceinline__ bool in_category_set(const uint32_t* __restrict__ set, int n_words, int c) {
  const int w = c >> 5;
  return w < n_words && ((set[w] >> (c & 31)) & 1u) != 0u;
}
