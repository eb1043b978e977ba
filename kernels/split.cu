// Best split of each node from its int64 fixed-point histogram (split/cuda.py evaluate_splits).
//
// The same candidates, arithmetic and choice as split/reference.py's evaluate_splits:
// gradient sums are exact int64 scans turned into double by one multiply; each
// child's gain is computed in double and rounded to float as split/rules.py's child_gain does;
// the loss change is float. Candidates are ranked as that function's argmax ranks
// them: the largest loss change, ties to the earliest in its visiting order
// (features in order; within a feature the forward scan over bins 0..n-1, then the
// backward scan over bins n-1..0).
#include "common.cuh"
#include "split_math.cuh"

constexpr int kSplitWarps = kSplitThreads / 32;

// A candidate parked in global memory for the node's last block, through L2 (L1 is not
// coherent between blocks).
__device__ __forceinline__ void store_candidate(Candidate* dst, const Candidate& c) {
  __stcg(&dst->loss, c.loss);
  __stcg(&dst->feature, c.feature);
  __stcg(&dst->order, c.order);
  __stcg(&dst->left_g, c.left_g);
  __stcg(&dst->left_h, c.left_h);
  __stcg(&dst->right_g, c.right_g);
  __stcg(&dst->right_h, c.right_h);
}

__device__ __forceinline__ Candidate load_candidate(const Candidate* src) {
  return Candidate{__ldcg(&src->loss),   __ldcg(&src->feature), __ldcg(&src->order),  __ldcg(&src->left_g),
                   __ldcg(&src->left_h), __ldcg(&src->right_g), __ldcg(&src->right_h)};
}

// in (SplitInputs): hist: (k, total_bins, 2) int64; parent: (k, 2) int64; scale: (2,) float64
// on the device, the multipliers from fixed point to double; feature_mask: uint8, node i may
// split on feature f when feature_mask[i * mask_stride + f] is set (mask_stride 0: one
// (n_features,) mask for all nodes; n_features: a (k, n_features) mask, a row per node).
// categorical: null, or uint8 (n_features,), set for the categorical features, which this
// kernel skips (categorical.cu evaluates them and merges its best into the records).
// o (SplitOutputs): records: (k,) SplitRecord; left / right: (k, 2) int64 sums of the chosen
// children (zero where no split was found), as split/reference.py's evaluate_splits returns them.
// k: the number of nodes, k_static, or where k_static < 0, *k_live (written on the device by
// growth.cu; the host launches an upper bound of nodes and blocks past k return at once).
// Launch: grid (>= k, n_chunks), block (kSplitThreads,): a node's features are shared by
// n_chunks blocks, one warp per feature at a time; each block parks its best candidate in
// partial[node * n_chunks + chunk], and the node's last block to finish (counted in
// counters[node], which it resets to 0 for the next launch) picks the node's best and
// writes the outputs. Candidates rank by (loss, feature, order), not by which block saw
// them, so the result does not depend on n_chunks.
__global__ void evaluate_splits(const SplitInputs in, const SplitParams p, const SplitOutputs o) {
  const long long* __restrict__ hist = in.hist;
  const long long* __restrict__ parent = in.parent;
  const int32_t* __restrict__ ptrs = in.ptrs;
  const float* __restrict__ cut_values = in.cut_values;
  const float* __restrict__ min_values = in.min_values;
  const uint8_t* __restrict__ feature_mask = in.feature_mask;
  const uint8_t* __restrict__ categorical = in.categorical;
  const double* __restrict__ scale = in.scale;
  const int total_bins = in.total_bins, n_features = in.n_features, n_cut_values = in.n_cut_values;
  const int mask_stride = in.mask_stride;
  Candidate* __restrict__ partial = o.partial;
  unsigned* __restrict__ counters = o.counters;
  SplitRecord* __restrict__ out = o.records;
  long long* __restrict__ left_out = o.left;
  long long* __restrict__ right_out = o.right;
  const long long k = in.k_static >= 0 ? (long long)in.k_static : *in.k_live;
  if ((long long)blockIdx.x >= k) return;  // the whole block, before any barrier or counter
  const double scale_g = scale[0], scale_h = scale[1];
  const int node = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long long pg = parent[2 * node], ph = parent[2 * node + 1];
  const float root_gain = child_gain((double)pg * scale_g, (double)ph * scale_h, p);
  const long long* h = hist + (long long)node * total_bins * 2;
  const uint8_t* node_mask = feature_mask + (long long)node * mask_stride;

  // What argmax returns when every candidate is -inf: the first one.
  Candidate best{neg_inf(), 0, 0, 0, 0, 0, 0};
  for (int f = warp + kSplitWarps * blockIdx.y; f < n_features; f += kSplitWarps * gridDim.y) {
    // A masked feature's candidates are all -inf: none can win. A categorical feature's are
    // categorical.cu's.
    if (!node_mask[f] || (categorical != nullptr && categorical[f])) continue;
    const int lo = ptrs[f];
    const int n_bins = ptrs[f + 1] - lo;
    long long tg = 0, th = 0;
    for (int b = lane; b < n_bins; b += 32) {
      tg += h[2 * (lo + b)];
      th += h[2 * (lo + b) + 1];
    }
    for (int d = 16; d > 0; d >>= 1) {
      tg += __shfl_xor_sync(0xffffffffu, tg, d);
      th += __shfl_xor_sync(0xffffffffu, th, d);
    }
    const bool has_missing = tg != pg || th != ph;
    long long carry_g = 0, carry_h = 0;  // sums of the bins before this chunk
    for (int base = 0; base < n_bins; base += 32) {
      const int b = base + lane;
      const long long vg = b < n_bins ? h[2 * (lo + b)] : 0;
      const long long vh = b < n_bins ? h[2 * (lo + b) + 1] : 0;
      long long sg = vg, sh = vh;  // inclusive scan across the warp
      for (int d = 1; d < 32; d <<= 1) {
        const long long ug = __shfl_up_sync(0xffffffffu, sg, d);
        const long long uh = __shfl_up_sync(0xffffffffu, sh, d);
        if (lane >= d) {
          sg += ug;
          sh += uh;
        }
      }
      const long long fg = carry_g + sg, fh = carry_h + sh;  // bins 0..b
      carry_g += __shfl_sync(0xffffffffu, sg, 31);
      carry_h += __shfl_sync(0xffffffffu, sh, 31);
      if (b >= n_bins) continue;
      // Forward: missing goes right.
      Candidate c{loss_change(fg, fh, pg - fg, ph - fh, scale_g, scale_h, root_gain, p), f, b, fg, fh, pg - fg,
                  ph - fh};
      if (beats(c, best)) best = c;
      if (has_missing) {
        // Backward: bins b..n-1 (and no missing) go right, missing goes left.
        const long long bg = tg - fg + vg, bh = th - fh + vh;
        Candidate cb{loss_change(pg - bg, ph - bh, bg, bh, scale_g, scale_h, root_gain, p), f,
                     n_bins + (n_bins - 1 - b), pg - bg, ph - bh, bg, bh};
        if (beats(cb, best)) best = cb;
      }
    }
  }

  for (int d = 16; d > 0; d >>= 1) {
    const Candidate other = shfl_down(best, d);
    if (beats(other, best)) best = other;
  }
  __shared__ Candidate per_warp[kSplitWarps];
  if (lane == 0) per_warp[warp] = best;
  __syncthreads();
  if (threadIdx.x != 0) return;
  best = per_warp[0];
  for (int w = 1; w < kSplitWarps; ++w) {
    if (beats(per_warp[w], best)) best = per_warp[w];
  }
  if (gridDim.y > 1) {
    Candidate* mine = partial + (long long)node * gridDim.y;
    store_candidate(mine + blockIdx.y, best);
    __threadfence();
    if (atomicAdd(&counters[node], 1u) != gridDim.y - 1) return;
    __threadfence();
    counters[node] = 0u;
    best = load_candidate(mine);
    for (unsigned c = 1; c < gridDim.y; ++c) {
      const Candidate other = load_candidate(mine + c);
      if (beats(other, best)) best = other;
    }
  }

  const int f = best.feature;
  const int n_bins = ptrs[f + 1] - ptrs[f];
  const bool backward = best.order >= n_bins;
  const int b = backward ? n_bins - 1 - (best.order - n_bins) : best.order;
  const int last_left_bin = backward ? b - 1 : b;
  const bool found = best.loss > 0.0f;
  SplitRecord r;
  r.left_grad = found ? (double)best.left_g * scale_g : 0.0;
  r.left_hess = found ? (double)best.left_h * scale_h : 0.0;
  r.right_grad = found ? (double)best.right_g * scale_g : 0.0;
  r.right_hess = found ? (double)best.right_h * scale_h : 0.0;
  r.gain = found ? best.loss : 0.0f;
  if (last_left_bin >= 0) {
    const int i = ptrs[f] + last_left_bin;
    r.threshold = cut_values[i < n_cut_values - 1 ? i : n_cut_values - 1];
  } else {
    r.threshold = min_values[f];
  }
  r.feature = found ? f : -1;
  r.bin = last_left_bin;
  r.default_left = backward ? 1 : 0;
  r.categorical = 0;
  out[node] = r;
  left_out[2 * node] = found ? best.left_g : 0;
  left_out[2 * node + 1] = found ? best.left_h : 0;
  right_out[2 * node] = found ? best.right_g : 0;
  right_out[2 * node + 1] = found ? best.right_h : 0;
}
