// Best splits on categorical features (split/cuda.py launches; split/categorical.py is the
// oracle, and tests/stages/test_split.py compares the two).
//
// A categorical feature's bins are its categories, so a node's histogram over the feature is
// its gradient sums per category. XGBoost's candidates, in their visiting order (split/
// categorical.py says why):
//   one-hot (fewer than max_cat_to_onehot bins): candidate 2c sends category c right and the
//     missing values left; 2c + 1 sends c and the missing values right;
//   partition: the categories sorted by their own leaf weight (stable: ties by category);
//     forward candidate t (t < m - 1) sends the first t + 1 sorted right, missing left;
//     backward candidate t sends the last t + 1 sorted left and missing right (its order is
//     m - 1 + t); m = min(max_cat_threshold, the feature's bins).
// The sums are exact int64 fixed point and the loss change is split.cu's loss_change, so
// the candidates score as the oracle's do.
//
// Two launches after split.cu's: categorical_candidates finds each (node, categorical
// feature)'s best candidate and the categories it sends right; merge_categorical picks each
// node's best over its categorical features (a tie to the lower feature) and puts it in the
// node's SplitRecord where it beats split.cu's numeric best (a larger loss change, or an
// equal one on a lower feature), with the node's set in a.node_sets (zero for a numeric split).
#include "common.cuh"
#include "split_math.cuh"

// A weight's sort key: ascending keys are ascending weights (-0 as +0, NaN last, as numpy's
// stable argsort orders them), ties by category; the category is the low word.
__device__ __forceinline__ unsigned long long weight_key(float w, int category) {
  unsigned u = __float_as_uint(w == 0.0f ? 0.0f : w);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  if (isnan(w)) u = 0xffffffffu;
  return ((unsigned long long)u << 32) | (unsigned)category;
}

// keys[0..n) sorted ascending in place (n a power of two; all threads of the block call it).
__device__ void bitonic_sort(unsigned long long* keys, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        // The i-th compared pair: a at the low end of its stride block, b stride above it.
        const int a = 2 * i - (i & (stride - 1));
        const int b = a + stride;
        const bool ascending = (a & size) == 0;
        const unsigned long long ka = keys[a], kb = keys[b];
        if ((ka > kb) == ascending) {
          keys[a] = kb;
          keys[b] = ka;
        }
      }
    }
  }
  __syncthreads();
}

// The block's best candidate (every thread passes its own; thread 0 gets the result).
// buf: 32 Candidates of shared memory.
__device__ Candidate block_best(Candidate c, Candidate* buf) {
  for (int d = 16; d > 0; d >>= 1) {
    const Candidate o = shfl_down(c, d);
    if (beats(o, c)) c = o;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // buf may still be read from an earlier call
  if (lane == 0) buf[warp] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < n_warps; ++w) {
      if (beats(buf[w], c)) c = buf[w];
    }
  }
  return c;
}

// in, p: split.cu's (its SplitInputs: histograms, sums, cut pointers, feature masks, scale, k).
// a.features: the categorical features, ascending; a.candidates: (k, n_categorical) the best
// candidate of each node and categorical feature (loss -inf where the feature is masked or
// has no candidate); a.sets: (k, n_categorical, set_words) the categories each sends right.
// Launch: grid (>= k, n_categorical), block a multiple of 32 of at least 64 threads, dynamic
// shared memory a.sort_size keys (8 bytes each; sort_size a power of two >= the bins of
// every partition-split feature, or 0 without one).
__global__ void categorical_candidates(const SplitInputs in, const SplitParams p, const CategoricalArgs a) {
  extern __shared__ unsigned long long keys[];
  __shared__ Candidate buf[32];
  __shared__ int chosen;
  const long long k = in.k_static >= 0 ? (long long)in.k_static : *in.k_live;
  if ((long long)blockIdx.x >= k) return;
  const int node = blockIdx.x, slot = blockIdx.y, n_cat = a.n_categorical, n_words = a.set_words;
  const int f = a.features[slot];
  const long long item = (long long)node * n_cat + slot;
  uint32_t* set = a.sets + item * n_words;
  for (int w = threadIdx.x; w < n_words; w += blockDim.x) set[w] = 0u;
  const double scale_g = in.scale[0], scale_h = in.scale[1];
  const long long pg = in.parent[2 * node], ph = in.parent[2 * node + 1];
  const float root_gain = child_gain((double)pg * scale_g, (double)ph * scale_h, p);
  const int lo = in.ptrs[f], n = in.ptrs[f + 1] - lo;
  const long long* h = in.hist + ((long long)node * in.total_bins + lo) * 2;
  // What the oracle's argmax returns when every candidate is -inf: the first (never a winner).
  Candidate best{neg_inf(), f, 0, 0, 0, 0, 0};
  if (!in.feature_mask[(long long)node * in.mask_stride + f]) {
    if (threadIdx.x == 0) a.candidates[item] = best;
    return;
  }
  if (n < a.max_cat_to_onehot) {
    // The missing values' sums: the parent's less the feature's bins.
    Candidate total{0.0f, 0, 0, 0, 0, 0, 0};
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
      total.left_g += h[2 * c];
      total.left_h += h[2 * c + 1];
    }
    for (int d = 16; d > 0; d >>= 1) {
      total.left_g += __shfl_xor_sync(0xffffffffu, total.left_g, d);
      total.left_h += __shfl_xor_sync(0xffffffffu, total.left_h, d);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    if (lane == 0) buf[warp] = total;
    __syncthreads();
    long long sg = 0, sh = 0;
    for (int w = 0; w < n_warps; ++w) {
      sg += buf[w].left_g;
      sh += buf[w].left_h;
    }
    const long long mg = pg - sg, mh = ph - sh;
    for (int j = threadIdx.x; j < 2 * n; j += blockDim.x) {
      const int c = j >> 1;
      const long long rg = h[2 * c] + ((j & 1) ? mg : 0), rh = h[2 * c + 1] + ((j & 1) ? mh : 0);
      const Candidate cand{loss_change(pg - rg, ph - rh, rg, rh, scale_g, scale_h, root_gain, p), f, j, pg - rg,
                           ph - rh, rg, rh};
      if (beats(cand, best)) best = cand;
    }
    best = block_best(best, buf);
    if (threadIdx.x == 0) {
      a.candidates[item] = best;
      const int c = best.order >> 1;
      if (c < n) set[c >> 5] = 1u << (c & 31);  // the block zeroed set before its barriers
    }
    return;
  }
  // Partition: the categories sorted by weight (padding keys sort last).
  int n_sorted = 1;
  while (n_sorted < n) n_sorted <<= 1;  // <= a.sort_size
  for (int i = threadIdx.x; i < n_sorted; i += blockDim.x) {
    keys[i] = i < n ? weight_key(calc_weight((double)h[2 * i] * scale_g, (double)h[2 * i + 1] * scale_h, p), i)
                    : ~0ull;
  }
  bitonic_sort(keys, n_sorted);
  const int m = min(a.max_cat_threshold, n);
  const int n_cand = m - 1;  // candidates each way
  if (n_cand <= 0) {
    if (threadIdx.x == 0) a.candidates[item] = best;
    return;
  }
  // Warp 0 scans forward over the first n_cand sorted categories, warp 1 backward over the
  // last n_cand, 32 at a time.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp < 2) {
    const bool forward = warp == 0;
    long long carry_g = 0, carry_h = 0;
    for (int base = 0; base < n_cand; base += 32) {
      const int t = base + lane;
      long long vg = 0, vh = 0;
      if (t < n_cand) {
        const int c = (int)(keys[forward ? t : n - 1 - t] & 0xffffffffull);
        vg = h[2 * c];
        vh = h[2 * c + 1];
      }
      long long sg = vg, sh = vh;  // inclusive scan across the warp
      for (int d = 1; d < 32; d <<= 1) {
        const long long ug = __shfl_up_sync(0xffffffffu, sg, d);
        const long long uh = __shfl_up_sync(0xffffffffu, sh, d);
        if (lane >= d) {
          sg += ug;
          sh += uh;
        }
      }
      const long long cg = carry_g + sg, ch = carry_h + sh;  // the first (last) t + 1 sorted
      carry_g += __shfl_sync(0xffffffffu, sg, 31);
      carry_h += __shfl_sync(0xffffffffu, sh, 31);
      if (t >= n_cand) continue;
      // Forward: the first t + 1 right. Backward: the last t + 1 left.
      const long long lg = forward ? pg - cg : cg, lh = forward ? ph - ch : ch;
      const Candidate cand{loss_change(lg, lh, pg - lg, ph - lh, scale_g, scale_h, root_gain, p), f,
                           forward ? t : n_cand + t, lg, lh, pg - lg, ph - lh};
      if (beats(cand, best)) best = cand;
    }
  }
  best = block_best(best, buf);
  if (threadIdx.x == 0) {
    a.candidates[item] = best;
    chosen = best.order;
  }
  __syncthreads();
  // The categories going right: the first t + 1 sorted (forward t), or all but the last
  // t + 1 (backward t).
  const int t = chosen;
  const int n_right = t < n_cand ? t + 1 : n - (t - n_cand + 1);
  for (int i = threadIdx.x; i < n_right; i += blockDim.x) {
    const int c = (int)(keys[i] & 0xffffffffull);
    atomicOr(set + (c >> 5), 1u << (c & 31));
  }
}

// Whether a categorical feature's chosen candidate `order` sends missing values left.
__device__ __forceinline__ bool categorical_default_left(int order, int n_bins, const CategoricalArgs& a) {
  if (n_bins < a.max_cat_to_onehot) return (order & 1) == 0;
  return order < min(a.max_cat_threshold, n_bins) - 1;  // forward
}

// Each node's best categorical candidate merged into split.cu's records (o: its outputs, the
// records, left and right sums); a.node_sets[node] gets the node's set, zero for a numeric
// split. Launch: grid (>= k), any block size.
__global__ void merge_categorical(const SplitInputs in, const CategoricalArgs a, const SplitOutputs o) {
  __shared__ int chosen;
  const long long k = in.k_static >= 0 ? (long long)in.k_static : *in.k_live;
  if ((long long)blockIdx.x >= k) return;
  const int node = blockIdx.x, n_cat = a.n_categorical, n_words = a.set_words;
  if (threadIdx.x == 0) {
    const Candidate* c = a.candidates + (long long)node * n_cat;
    // The features in increasing order, a later one winning only with a larger loss change;
    // none wins without a positive one.
    float best_loss = 0.0f;
    int best = -1;
    for (int s = 0; s < n_cat; ++s) {
      if (c[s].loss > best_loss) {
        best_loss = c[s].loss;
        best = s;
      }
    }
    SplitRecord r = o.records[node];
    const bool wins = best >= 0 && (best_loss > r.gain || (best_loss == r.gain && (r.feature < 0 ||
                                                                                    c[best].feature < r.feature)));
    if (wins) {
      const Candidate& w = c[best];
      const double scale_g = in.scale[0], scale_h = in.scale[1];
      r.left_grad = (double)w.left_g * scale_g;
      r.left_hess = (double)w.left_h * scale_h;
      r.right_grad = (double)w.right_g * scale_g;
      r.right_hess = (double)w.right_h * scale_h;
      r.gain = w.loss;
      r.threshold = 0.0f;
      r.feature = w.feature;
      r.bin = -1;
      r.default_left = categorical_default_left(w.order, in.ptrs[w.feature + 1] - in.ptrs[w.feature], a) ? 1 : 0;
      r.categorical = 1;
      o.records[node] = r;
      o.left[2 * node] = w.left_g;
      o.left[2 * node + 1] = w.left_h;
      o.right[2 * node] = w.right_g;
      o.right[2 * node + 1] = w.right_h;
    }
    chosen = wins ? best : -1;
  }
  __syncthreads();
  const uint32_t* set = a.sets + ((long long)node * n_cat + (chosen < 0 ? 0 : chosen)) * n_words;
  uint32_t* out = a.node_sets + (long long)node * n_words;
  for (int w = threadIdx.x; w < n_words; w += blockDim.x) out[w] = chosen < 0 ? 0u : set[w];
}
