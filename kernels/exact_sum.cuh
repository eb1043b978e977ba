// Exact sums of doubles on the device: the double nearest the exact sum, the same whatever
// the order the terms are added in (so whatever the grid, the device, the atomics' order).
//
// A float sum's bits depend on the order of its additions, and a GPU reduction's order is
// its own (CuPy's CUB sums depend on the device's SM count). Summing exactly and rounding
// once gives one answer: the correctly rounded sum, which a sequential numpy sum also gives
// whenever its own additions are exact (integer-valued terms, labels, counts).
//
// Every finite double is an integer m < 2^53 times 2^(pos - 1074), 0 <= pos <= 2045, and so
// is every product of two floats (m < 2^48). Such a term is added, bit-aligned, into
// radix-2^24 digits: digit k holds multiples of 2^(24 k - 1074), in an int64 each, so a term
// spreads over four digits of at most 24 bits and a digit can take 2^39 terms before it
// could overflow. Integer adds commute: the digits are the same in any order. exact_round
// carries them and rounds the total to nearest, ties to even, once.
//
// One sum is kExactSlots int64 slots: the digits, then a flags word that records NaN and
// infinite terms (the sum is then NaN or +-inf, as IEEE addition gives). A thread keeps a
// window of kExactWindow digits in registers, placed by its first term (a thread's terms are
// mostly of one magnitude); terms outside it, and the window at the end, go to a block's
// copy in shared memory, and the block's digits to global memory, by integer atomics.
#pragma once

constexpr int kExactDigits = 89;                  // digits 0..88: bit 2097, the top of the largest double
constexpr int kExactFlags = kExactDigits;         // the slot after the digits
constexpr int kExactSlots = kExactDigits + 1;     // int64 slots of one sum
constexpr int kExactWindow = 6;                   // digits a thread keeps in registers
constexpr long long kExactDigitMask = (1ll << 24) - 1;
constexpr unsigned kExactNaN = 1u, kExactPosInf = 2u, kExactNegInf = 4u;

// The term m * 2^(pos - 1074) as pieces p[0..3] of digits d..d+3 (m < 2^53, 0 <= pos <= 2045).
// A float's m (< 2^24) fills two pieces at most, a product of floats' (< 2^48) three.
__device__ __forceinline__ void exact_pieces(unsigned long long m, int pos, int& d, long long (&p)[4]) {
  d = pos / 24;
  const int s = pos - 24 * d;
  const unsigned long long lo = m << s;                    // bits 0..63 of m * 2^s
  const unsigned long long hi = s ? m >> (64 - s) : 0ull;  // bits 64..75
  p[0] = (long long)(lo & kExactDigitMask);
  p[1] = (long long)((lo >> 24) & kExactDigitMask);
  p[2] = (long long)(((lo >> 48) | (hi << 16)) & kExactDigitMask);
  p[3] = (long long)((hi >> 8) & kExactDigitMask);
}

// A double's (m, pos, sign): read from its bits. False for zeros; NaN and inf are not asked.
__device__ __forceinline__ bool exact_split_double(double v, unsigned long long& m, int& pos, bool& neg) {
  const unsigned long long b = (unsigned long long)__double_as_longlong(v);
  const int e = (int)((b >> 52) & 0x7ffull);
  m = b & ((1ull << 52) - 1ull);
  if (e) m |= 1ull << 52;
  pos = e ? e - 1 : 0;
  neg = (b >> 63) != 0ull;
  return m != 0ull;
}

// A float's (m, pos, sign), from its bits: subnormal floats are kept whatever -ftz says.
__device__ __forceinline__ bool exact_split_float(unsigned bits, unsigned long long& m, int& pos, bool& neg) {
  const int e = (int)((bits >> 23) & 0xffu);
  m = bits & 0x7fffffu;
  if (e) m |= 0x800000ull;
  pos = (e ? e : 1) + 924;  // f = m * 2^(e - 150) = m * 2^(pos - 1074)
  neg = (bits >> 31) != 0u;
  return m != 0ull;
}

__device__ __forceinline__ bool exact_float_is_finite(unsigned bits) { return ((bits >> 23) & 0xffu) != 0xffu; }

__device__ __forceinline__ unsigned exact_nonfinite_flag(bool nan, bool neg) {
  return nan ? kExactNaN : (neg ? kExactNegInf : kExactPosInf);
}

__device__ __forceinline__ void exact_atomic_add(long long* slot, long long v) {
  if (v) atomicAdd(reinterpret_cast<unsigned long long*>(slot), (unsigned long long)v);  // two's complement
}

__device__ __forceinline__ void exact_atomic_flags(long long* sum, unsigned flags) {
  if (flags) atomicOr(reinterpret_cast<unsigned long long*>(sum + kExactFlags), (unsigned long long)flags);
}

// Add a term straight into a sum's slots (shared or global memory).
__device__ __forceinline__ void exact_add_to(long long* sum, unsigned long long m, int pos, bool neg) {
  int d;
  long long p[4];
  exact_pieces(m, pos, d, p);
#pragma unroll
  for (int k = 0; k < 4; ++k) exact_atomic_add(&sum[d + k], neg ? -p[k] : p[k]);
}

// A float term added straight into a sum's slots (no window: for sums picked per term).
__device__ __forceinline__ void exact_add_float_to(long long* sum, float v) {
  const unsigned bits = __float_as_uint(v);
  unsigned long long m;
  int pos;
  bool neg;
  if (!exact_float_is_finite(bits)) {
    exact_atomic_flags(sum, exact_nonfinite_flag((bits & 0x7fffffu) != 0u, (bits >> 31) != 0u));
  } else if (exact_split_float(bits, m, pos, neg)) {
    exact_add_to(sum, m, pos, neg);
  }
}

// A thread's running sum: digits base .. base + kExactWindow - 1 in registers.
struct ExactWindow {
  long long digit[kExactWindow];
  int base;  // -1 until the first term
  unsigned flags;
};

__device__ __forceinline__ void exact_window_start(ExactWindow& w) {
#pragma unroll
  for (int j = 0; j < kExactWindow; ++j) w.digit[j] = 0;
  w.base = -1;
  w.flags = 0u;
}

// Add a term of at most kPieces pieces (2: a float, 3: a product of floats, 4: a double).
template <int kPieces>
__device__ __forceinline__ void exact_window_add(ExactWindow& w, long long* sum, unsigned long long m, int pos,
                                                 bool neg) {
  int d;
  long long p[4];
  exact_pieces(m, pos, d, p);
#pragma unroll
  for (int k = 0; k < kPieces; ++k) p[k] = neg ? -p[k] : p[k];
  // One digit below the first term, so that a term up to 2^24 times smaller still fits.
  if (w.base < 0) w.base = min(max(d - 1, 0), kExactDigits - kExactWindow);
  const int o = d - w.base;
  if (o < 0 || o > kExactWindow - kPieces) {
#pragma unroll
    for (int k = 0; k < kPieces; ++k) exact_atomic_add(&sum[d + k], p[k]);
    return;
  }
  // Constant indices, so that the window stays in registers.
#pragma unroll
  for (int at = 0; at <= kExactWindow - kPieces; ++at) {
    if (o == at) {
#pragma unroll
      for (int k = 0; k < kPieces; ++k) w.digit[at + k] += p[k];
    }
  }
}

__device__ __forceinline__ void exact_window_flush(const ExactWindow& w, long long* sum) {
  if (w.base >= 0) {
#pragma unroll
    for (int j = 0; j < kExactWindow; ++j) exact_atomic_add(&sum[w.base + j], w.digit[j]);
  }
  exact_atomic_flags(sum, w.flags);
}

// kSums sums, each a thread's window over a block's slots (`shared`: kSums * kExactSlots).
// add_*<a>: a term of sum a.
template <int kSums>
struct ExactSums {
  ExactWindow w[kSums];
  long long* shared;

  __device__ explicit ExactSums(long long* block_slots) : shared(block_slots) {
#pragma unroll
    for (int a = 0; a < kSums; ++a) exact_window_start(w[a]);
  }

  template <int a>
  __device__ __forceinline__ void add_double(double v) {
    unsigned long long m;
    int pos;
    bool neg;
    if (isnan(v) || isinf(v)) {
      w[a].flags |= exact_nonfinite_flag(isnan(v), v < 0.0);
    } else if (exact_split_double(v, m, pos, neg)) {
      exact_window_add<4>(w[a], shared + a * kExactSlots, m, pos, neg);
    }
  }

  // A float, read from its bits (a subnormal one too, whatever -ftz says).
  template <int a>
  __device__ __forceinline__ void add_float(float v) {
    const unsigned bits = __float_as_uint(v);
    unsigned long long m;
    int pos;
    bool neg;
    if (!exact_float_is_finite(bits)) {
      w[a].flags |= exact_nonfinite_flag((bits & 0x7fffffu) != 0u, (bits >> 31) != 0u);
    } else if (exact_split_float(bits, m, pos, neg)) {
      exact_window_add<2>(w[a], shared + a * kExactSlots, m, pos, neg);
    }
  }

  // |v| of a float.
  template <int a>
  __device__ __forceinline__ void add_magnitude(float v) {
    add_float<a>(__uint_as_float(__float_as_uint(v) & 0x7fffffffu));
  }

  // The product x * y of two floats, exact as a double is (numpy's float64(x) * float64(y)).
  template <int a>
  __device__ __forceinline__ void add_product(float x, float y) {
    const unsigned bx = __float_as_uint(x), by = __float_as_uint(y);
    unsigned long long mx, my;
    int px, py;
    bool nx, ny;
    if (!exact_float_is_finite(bx) || !exact_float_is_finite(by)) {
      const double v = (double)x * (double)y;  // inf or NaN; only its class is kept
      w[a].flags |= exact_nonfinite_flag(isnan(v), v < 0.0);
    } else if (exact_split_float(bx, mx, px, nx) && exact_split_float(by, my, py, ny)) {
      exact_window_add<3>(w[a], shared + a * kExactSlots, mx * my, px + py - 1074, nx != ny);
    }
  }

  __device__ __forceinline__ void flush() {
#pragma unroll
    for (int a = 0; a < kSums; ++a) exact_window_flush(w[a], shared + a * kExactSlots);
  }
};

__device__ __forceinline__ long long exact_bit(const long long* g, int b) { return (g[b / 24] >> (b % 24)) & 1ll; }

constexpr int kExactCarried = kExactDigits + 3;  // exact_round's digits: three more for the carries

// The double nearest the sum held in `sum`'s slots (ties to even), or NaN / +-inf as IEEE
// addition of its terms gives. One thread; g: kExactCarried int64 of scratch (shared memory:
// a local array would reserve its size for every thread of the grid).
__device__ __noinline__ double exact_round(const long long* sum, long long* g) {
  const unsigned flags = (unsigned)sum[kExactFlags];
  if ((flags & kExactNaN) || ((flags & kExactPosInf) && (flags & kExactNegInf))) {
    return __longlong_as_double(0x7ff8000000000000ll);
  }
  if (flags & kExactPosInf) return __longlong_as_double(0x7ff0000000000000ll);
  if (flags & kExactNegInf) return __longlong_as_double((long long)0xfff0000000000000ull);
  // Carry into digits of 0..2^24-1, three more digits for the carries out of the top one;
  // a negative total leaves a carry of -1 above them and is negated.
  constexpr int kN = kExactCarried;
  long long carry = 0;
  for (int k = 0; k < kN; ++k) {
    const long long t = (k < kExactDigits ? sum[k] : 0ll) + carry;
    g[k] = t & kExactDigitMask;
    carry = t >> 24;  // arithmetic shift: floor division
  }
  const bool neg = carry < 0;
  if (neg) {
    long long borrow = 0;
    for (int k = 0; k < kN; ++k) {
      long long t = -g[k] - borrow;
      borrow = t < 0 ? 1 : 0;
      g[k] = t < 0 ? t + (1ll << 24) : t;
    }
  }
  int top = kN - 1;
  while (top >= 0 && g[top] == 0) --top;
  if (top < 0) return 0.0;
  const int high = 24 * top + 63 - __clzll(g[top]);  // the highest set bit
  // The double's bits are (r << 52) + mantissa, for mantissa m < 2^53 at bit r: r = 0 holds
  // the subnormals and the first binade (exponent field 1 once bit 52 is set).
  int r = 0;
  unsigned long long mant;
  if (high < 53) {
    mant = (unsigned long long)g[0] | ((unsigned long long)g[1] << 24) | ((unsigned long long)g[2] << 48);
  } else {
    r = high - 52;
    mant = 0ull;
    for (int b = high; b >= r; --b) mant = (mant << 1) | (unsigned long long)exact_bit(g, b);
    const int guard_at = r - 1;
    const bool guard = exact_bit(g, guard_at) != 0;
    bool sticky = (g[guard_at / 24] & ((1ll << (guard_at % 24)) - 1)) != 0;
    for (int k = guard_at / 24 - 1; k >= 0 && !sticky; --k) sticky = g[k] != 0;
    if (guard && (sticky || (mant & 1ull))) {
      ++mant;
      if (mant >> 53) {
        mant >>= 1;
        ++r;
      }
    }
  }
  const unsigned long long sign = neg ? (1ull << 63) : 0ull;
  if (r >= 2046) return __longlong_as_double((long long)(sign | 0x7ff0000000000000ull));
  return __longlong_as_double((long long)(sign | (((unsigned long long)r << 52) + mant)));
}

// A block's part of the sums: its slots (shared, k_sums * kExactSlots, zeroed by
// exact_block_start) added into the global ones `acc` (k_sums * kExactSlots + 1 int64, zeroed
// before the launch; the last one counts the blocks done), and the last block to finish
// writes the rounded sums to out[0..k_sums), from a copy of `acc` in its shared slots (one
// thread rounds a sum). Every thread of the block calls these.
__device__ __forceinline__ void exact_block_start(long long* shared, int n_slots) {
  for (int j = threadIdx.x; j < n_slots; j += blockDim.x) shared[j] = 0;
  __syncthreads();
}

// Whether this block is the last of the grid to be done with `acc` (all threads get the answer).
__device__ __forceinline__ bool exact_last_block(long long* __restrict__ acc, int k_sums) {
  __shared__ bool last;
  __threadfence();  // this thread's adds are seen before the count says the block is done
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long done =
        atomicAdd(reinterpret_cast<unsigned long long*>(&acc[k_sums * kExactSlots]), 1ull);
    last = done == (unsigned long long)(gridDim.x - 1);
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

__device__ void exact_block_finish(long long* shared, int k_sums, long long* __restrict__ acc,
                                   double* __restrict__ out) {
  const int n_slots = k_sums * kExactSlots;
  __syncthreads();
  for (int j = threadIdx.x; j < n_slots; j += blockDim.x) {
    const long long v = shared[j];
    if (j % kExactSlots == kExactFlags) {
      exact_atomic_flags(acc + (j - kExactFlags), (unsigned)v);
    } else {
      exact_atomic_add(&acc[j], v);
    }
  }
  if (!exact_last_block(acc, k_sums)) return;
  __shared__ long long carried[kExactCarried];
  for (int j = threadIdx.x; j < n_slots; j += blockDim.x) shared[j] = __ldcg(&acc[j]);  // L2: the atomics' values
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int a = 0; a < k_sums; ++a) out[a] = exact_round(shared + a * kExactSlots, carried);
  }
}
