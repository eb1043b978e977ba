// Quantisation and bit packing of ELLPACK pages (ellpack/cuda.py; ellpack/reference.py's pack_dense / pack_csr are the reference).
//
// One thread builds one uint32 output word: it bins every entry whose bit field
// overlaps the word and ORs the fields in. An entry straddling two words is binned
// by both threads, so no word is written twice and packing needs no atomics.
#include "common.cuh"

// First index of values[0:n] strictly greater than v (upper bound), clamped to the
// feature's last bin: ellpack/reference.py's bin_dense / XGBoost's SearchBin.
__device__ __forceinline__ uint32_t search_bin(const float* __restrict__ values, int n, float v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (values[mid] > v) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return (uint32_t)(lo < n - 1 ? lo : n - 1);
}

// Word w of the packed stream of n_entries symbols, symbol i given by symbol_at(i).
template <class SymbolAt>
__device__ __forceinline__ uint32_t pack_word(unsigned long long w, unsigned long long n_entries, int bits,
                                              SymbolAt symbol_at) {
  const unsigned long long word_begin = w * 32ull;
  if (n_entries == 0) return 0u;
  unsigned long long first = word_begin / (unsigned long long)bits;
  unsigned long long last = (word_begin + 31ull) / (unsigned long long)bits;
  if (last >= n_entries) last = n_entries - 1;
  uint32_t word = 0u;
  for (unsigned long long i = first; i <= last && i < n_entries; ++i) {
    unsigned long long sym = symbol_at(i);
    long long shift = (long long)(i * (unsigned long long)bits) - (long long)word_begin;
    // shift lies in (-bits, 32): a field that begins in the previous word
    // contributes its high bits, one that begins here its low bits.
    word |= (uint32_t)(shift >= 0 ? (sym << shift) : (sym >> (-shift)));
  }
  return word;
}

struct DenseBins {
  const float* X;
  int n_features;
  const int32_t* ptrs;
  const float* values;
  float missing;
  uint32_t null_symbol;

  __device__ __forceinline__ uint32_t operator()(unsigned long long i) const {
    float v = X[i];
    // With missing == NaN the equality is always false, so one test covers both cases.
    if (isnan(v) || v == missing) return null_symbol;
    int f = (int)(i % (unsigned long long)n_features);
    int lo = ptrs[f];
    return search_bin(values + lo, ptrs[f + 1] - lo, v);
  }
};

struct SymbolArray {
  const uint32_t* symbols;
  __device__ __forceinline__ uint32_t operator()(unsigned long long i) const { return symbols[i]; }
};

// Quantise a row-major (n_rows, n_features) float32 matrix and pack it (dense layout).
// Launch: one thread per output word, any 1-D shape.
__global__ void pack_dense(const float* __restrict__ X, unsigned long long n_entries, int n_features,
                           const int32_t* __restrict__ ptrs, const float* __restrict__ values, float missing,
                           uint32_t null_symbol, int bits, uint32_t* __restrict__ words,
                           unsigned long long n_words) {
  DenseBins bins{X, n_features, ptrs, values, missing, null_symbol};
  for (unsigned long long w = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; w < n_words;
       w += (unsigned long long)gridDim.x * blockDim.x) {
    words[w] = pack_word(w, n_entries, bits, bins);
  }
}

// Pack a flat array of symbols already computed (sparse layout).
// Launch: one thread per output word, any 1-D shape.
__global__ void pack_symbols(const uint32_t* __restrict__ symbols, unsigned long long n_entries, int bits,
                             uint32_t* __restrict__ words, unsigned long long n_words) {
  SymbolArray src{symbols};
  for (unsigned long long w = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; w < n_words;
       w += (unsigned long long)gridDim.x * blockDim.x) {
    words[w] = pack_word(w, n_entries, bits, src);
  }
}

// The rows `rows` of a packed stream src (row_stride symbols a row), in the order given,
// ORed into a zeroed packed stream `out` from symbol entry_offset on, without unpacking
// src: the rows a tree samples from one page, at their place in the compacted matrix
// (ellpack/pages.py compact_rows). A thread builds one output word from the gathered symbols that
// overlap it; the first and last words may hold other launches' symbols too, so words are
// ORed in (launches on one stream run one after another).
// Launch: one thread per output word from entry_offset's word on, any 1-D shape.
__global__ void gather_rows(const uint32_t* __restrict__ src, int bits, int row_stride,
                            const long long* __restrict__ rows, unsigned long long n_rows,
                            unsigned long long entry_offset, uint32_t* __restrict__ out) {
  const unsigned long long stride = (unsigned long long)row_stride;
  const unsigned long long end = entry_offset + n_rows * stride;
  if (end == entry_offset) return;
  const unsigned long long w0 = entry_offset * bits / 32ull, w1 = (end * bits - 1ull) / 32ull;
  for (unsigned long long w = w0 + blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; w <= w1;
       w += (unsigned long long)gridDim.x * blockDim.x) {
    const unsigned long long word_begin = w * 32ull;
    unsigned long long first = word_begin / (unsigned long long)bits;
    unsigned long long last = (word_begin + 31ull) / (unsigned long long)bits;
    if (first < entry_offset) first = entry_offset;
    if (last >= end) last = end - 1ull;
    uint32_t word = 0u;
    for (unsigned long long i = first; i <= last; ++i) {
      const unsigned long long k = i - entry_offset, r = k / stride;
      const unsigned long long sym = ellpack_symbol(src, bits, (unsigned long long)rows[r] * stride + (k - r * stride));
      const long long shift = (long long)(i * (unsigned long long)bits) - (long long)word_begin;
      word |= (uint32_t)(shift >= 0 ? (sym << shift) : (sym >> (-shift)));
    }
    out[w] |= word;
  }
}

// Global bin of each (feature, value) entry of a CSR matrix; values are not missing.
// Launch: one thread per entry, any 1-D shape.
__global__ void bin_entries(const int32_t* __restrict__ features, const float* __restrict__ vals,
                            unsigned long long n, const int32_t* __restrict__ ptrs,
                            const float* __restrict__ values, uint32_t* __restrict__ out) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    int f = features[i];
    int lo = ptrs[f];
    out[i] = (uint32_t)lo + search_bin(values + lo, ptrs[f + 1] - lo, vals[i]);
  }
}

// OR symbol i of a bit-packed stream into zeroed words (a field may span two words, and a
// word may hold fields of two rows: atomics).
__device__ __forceinline__ void or_symbol(uint32_t* words, int bits, unsigned long long i, uint32_t sym) {
  const unsigned long long pos = i * (unsigned long long)bits;
  const unsigned off = (unsigned)(pos & 31);
  atomicOr(&words[pos >> 5], sym << off);
  if (off + (unsigned)bits > 32u) atomicOr(&words[(pos >> 5) + 1], sym >> (32u - off));
}

// Quantise a row-major (n_rows, n_features) float32 matrix into the sparse layout: row r's
// slots hold the global bins of its present entries in feature order, then null_symbol up
// to row_stride (ellpack/reference.py pack_dense_sparse). words: zeroed. One warp per row: lanes
// read 32 neighbouring features, and a ballot gives each present one its slot.
// Launch: 1-D, blocks of a multiple of 32 threads, any number.
__global__ void pack_dense_sparse(const float* __restrict__ X, long long n_rows, int n_features,
                                  const int32_t* __restrict__ ptrs, const float* __restrict__ values,
                                  float missing, int row_stride, uint32_t null_symbol, int bits,
                                  uint32_t* __restrict__ words) {
  const int lane = threadIdx.x & 31;
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const long long n_warps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long r = warp; r < n_rows; r += n_warps) {
    const float* x = X + r * (long long)n_features;
    const unsigned long long base = (unsigned long long)r * (unsigned long long)row_stride;
    int slot = 0;
    for (int f0 = 0; f0 < n_features; f0 += 32) {
      const int f = f0 + lane;
      const float v = f < n_features ? x[f] : 0.0f;
      const bool present = f < n_features && !(isnan(v) || v == missing);
      const unsigned ballot = __ballot_sync(0xffffffffu, present);
      if (present) {
        const int lo = ptrs[f];
        const uint32_t sym = (uint32_t)lo + search_bin(values + lo, ptrs[f + 1] - lo, v);
        or_symbol(words, bits, base + (unsigned long long)(slot + __popc(ballot & ((1u << lane) - 1u))), sym);
      }
      slot += __popc(ballot);
    }
    for (int s = slot + lane; s < row_stride; s += 32) or_symbol(words, bits, base + (unsigned long long)s, null_symbol);
  }
}
