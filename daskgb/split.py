"""Split rules: leaf weight, gain, validity, and the best split of many nodes at once.

The arithmetic mirrors XGBoost's `hist` updater type for type, because models are
tested against it tree for tree: gradient sums are double; each child's gain is
computed in double and rounded to float; the loss change is float; parameters are
float32 (XGBoost stores them as float) promoted to double where they meet sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layouts import SPLIT_DTYPE
from .arrays import to_host

# A split must improve the loss by more than this to be applied (XGBoost's kRtEps).
RT_EPS = 1e-6


@dataclass(frozen=True)
class SplitParams:
    """The training parameters that split evaluation reads, as float32 values."""

    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    min_child_weight: float = 1.0
    max_delta_step: float = 0.0
    min_split_loss: float = 0.0

    def __post_init__(self):
        for name in ("reg_lambda", "reg_alpha", "min_child_weight", "max_delta_step", "min_split_loss"):
            object.__setattr__(self, name, float(np.float32(getattr(self, name))))


def threshold_l1(xp, g, alpha: float):
    """sign(g) * max(|g| - alpha, 0)."""
    return xp.where(g > alpha, g - alpha, xp.where(g < -alpha, g + alpha, 0.0))


def calc_weight(xp, G, H, p: SplitParams, bounds=None):
    """Optimal leaf weight for gradient sums (G, H), as float32 (XGBoost's CalcWeight).

    bounds: optional (lower, upper) float32 arrays broadcasting against G: the node's
    monotone-constraint bounds (monotone.py), which the weight is clipped to.
    """
    G = xp.asarray(G, dtype=xp.float64)
    H = xp.asarray(H, dtype=xp.float64)
    ok = (H >= p.min_child_weight) & (H > 0.0)
    denom = xp.where(ok, H + p.reg_lambda, 1.0)
    w = -threshold_l1(xp, G, p.reg_alpha) / denom
    if p.max_delta_step != 0.0:
        w = xp.where(xp.abs(w) > p.max_delta_step, xp.copysign(p.max_delta_step, w), w)
    w = xp.where(ok, w, 0.0).astype(xp.float32)
    if bounds is not None:
        lower, upper = bounds
        w = xp.where(w < lower, lower, xp.where(w > upper, upper, w)).astype(xp.float32)
    return w


def child_gain(xp, G, H, p: SplitParams, bounds=None):
    """Gain of one side of a split, as float32 (XGBoost's CalcGainGivenWeight).

    bounds: as calc_weight's; given (monotone constraints are on), the gain is taken
    at the bounded weight, as XGBoost does whenever the constraints are set.
    """
    G = xp.asarray(G, dtype=xp.float64)
    H = xp.asarray(H, dtype=xp.float64)
    positive = H > 0.0
    if p.max_delta_step == 0.0 and bounds is None:
        # At alpha 0 the threshold is G itself but for NaN (0 there); squared below, so the sign
        # of a zero is moot: two passes over the candidates instead of six.
        t = xp.where(xp.isnan(G), 0.0, G) if p.reg_alpha == 0.0 else threshold_l1(xp, G, p.reg_alpha)
        gain = (t * t / xp.where(positive, H + p.reg_lambda, 1.0)).astype(xp.float32)
    else:
        # With a clipped weight the closed form no longer holds: evaluate the
        # objective at the weight, in float as xgboost 3.2's CalcGainGivenWeight does:
        # no alpha term (reg_alpha acts through the weight only), and (H + lambda)
        # times (w * w). Saturated weights make neighbouring thresholds tie exactly in
        # real arithmetic, so the association decides which wins.
        w = calc_weight(xp, G, H, p, bounds)
        g32, h32 = G.astype(xp.float32), H.astype(xp.float32)
        lam = xp.float32(p.reg_lambda)
        gain = -(xp.float32(2.0) * g32 * w + (h32 + lam) * (w * w))
    return xp.where(positive, gain, xp.float32(0.0)).astype(xp.float32)


def splits_applied(recs, depth: int, max_depth: int, p: SplitParams) -> np.ndarray:
    """Which nodes' best splits are applied (XGBoost driver's IsValid), for host records."""
    ok = (recs["feature"] >= 0) & (recs["gain"] > RT_EPS)
    ok &= (recs["left_hess"] != 0.0) & (recs["right_hess"] != 0.0)
    ok &= recs["gain"] >= np.float32(p.min_split_loss)
    return ok & (not (max_depth > 0 and depth >= max_depth))


def evaluate_splits(xp, hist, parent, scale, cut_ptrs, cut_values, min_values, p: SplitParams, feature_mask=None,
                    monotone=None, bounds=None):
    """Best split of each node, from its histogram. The reference implementation.

    hist:   (k, total_bins, 2) sums per bin, float64 or int64 fixed point
    parent: (k, 2) node sums in the same type
    scale:  (2,) float64 multipliers from the histogram's type to double (ones for float64)
    feature_mask: None, or bool (n_features,) for all nodes or (k, n_features) per node:
            the features a node may split on (column sampling, interaction constraints)
    monotone: None, or (n_features,) -1 / 0 / 1 monotone constraints, with
    bounds: (k, 2) float32 [lower, upper] weight bounds of each node (monotone.py).
            Weights are clipped to the bounds, gains taken at the clipped weights, and a
            split on a constrained feature is rejected where its weights break the order.
    Returns (records (k,) SPLIT_DTYPE on the host, left (k, 2), right (k, 2)) where
    left / right are the chosen children's sums in the histogram's type.

    Candidates are ordered as XGBoost's CPU evaluator visits them: features in
    order; within a feature the forward scan (missing goes right) over bins in
    increasing order, then, only if the node has missing values for the feature,
    the backward scan (missing goes left) over bins in decreasing order. The
    first candidate with the largest loss change wins, and it must beat 0.
    """
    k, total_bins, _ = hist.shape
    ptrs = np.asarray(to_host(cut_ptrs), dtype=np.int64)
    feats = np.arange(ptrs.size - 1)  # the features scanned; arrays below index them 0..n_features-1
    mask = None
    if feature_mask is not None:
        # (F,): one mask for every node; (k, F): a mask per node.
        mask = xp.asarray(feature_mask, dtype=bool)
        mask = mask[None] if mask.ndim == 1 else mask
        # Scan only the features some node may use (column sampling leaves few), in the
        # same order. Feature 0 always: a node allowed nothing then reports feature 0's
        # fields, as it does without the restriction (and as kernels/split.cu does).
        used = to_host(mask.any(axis=0)).copy()
        used[:1] = True
        feats = np.flatnonzero(used)
        mask = mask[:, xp.asarray(feats)]
    n_features = feats.size
    lo = ptrs[feats]
    n_bins = ptrs[feats + 1] - lo
    width = int(n_bins.max()) if n_features else 1
    # Pad every feature to `width` bins with a zero bin (index total_bins), so the
    # scans are plain cumulative sums along one axis.
    j = np.arange(width)
    gather = np.where(j[None, :] < n_bins[:, None], lo[:, None] + j[None, :], total_bins)
    padded = xp.concatenate([hist, xp.zeros((k, 1, 2), dtype=hist.dtype)], axis=1)
    h = padded[:, xp.asarray(gather)]  # (k, F, width, 2)
    fwd = xp.cumsum(h, axis=2)  # bins 0..b
    par = parent[:, None, None, :]
    last = xp.asarray(n_bins - 1)
    total = fwd[:, xp.arange(n_features), last]  # (k, F, 2)
    has_missing = xp.any(total != parent[:, None, :], axis=2)  # (k, F)

    scale = xp.asarray(scale, dtype=xp.float64)
    node_bounds = None
    if monotone is not None:
        b = xp.asarray(bounds, dtype=xp.float32).reshape(k, 2)
        node_bounds = (b[:, 0, None, None], b[:, 1, None, None])
        direction = xp.asarray(np.asarray(to_host(monotone))[feats])[None, :, None]

    def loss_change(left, right):
        lg, lh = left[..., 0] * scale[0], left[..., 1] * scale[1]
        rg, rh = right[..., 0] * scale[0], right[..., 1] * scale[1]
        valid = (lh >= p.min_child_weight) & (rh >= p.min_child_weight)
        gain = child_gain(xp, lg, lh, p, node_bounds) + child_gain(xp, rg, rh, p, node_bounds)
        if monotone is not None:
            wl, wr = calc_weight(xp, lg, lh, p, node_bounds), calc_weight(xp, rg, rh, p, node_bounds)
            valid &= xp.where(direction > 0, wl <= wr, xp.where(direction < 0, wl >= wr, True))
        return gain, valid

    root_bounds = None if node_bounds is None else (node_bounds[0][:, 0, 0], node_bounds[1][:, 0, 0])
    root_gain = child_gain(xp, parent[:, 0] * scale[0], parent[:, 1] * scale[1], p, root_bounds)[:, None, None]
    in_feature = xp.asarray(j[None, :] < n_bins[:, None])[None]
    allowed = in_feature if mask is None else in_feature & mask[:, :, None]

    gain_f, valid_f = loss_change(fwd, par - fwd)
    loss_f = (gain_f - root_gain).astype(xp.float32)
    ok_f = valid_f & allowed & xp.isfinite(loss_f)
    neg = xp.float32(-np.inf)
    cand_f = xp.where(ok_f, loss_f, neg)
    rev = np.where(j[None, :] < n_bins[:, None], n_bins[:, None] - 1 - j[None, :], 0)
    if bool(has_missing.any()):
        # Backward scan: the accumulated bins b..last form the right child.
        bwd = xp.cumsum(h[:, :, ::-1], axis=2)[:, :, ::-1]  # bins b..last (zeros pad first: exact)
        gain_b, valid_b = loss_change(par - bwd, bwd)
        loss_b = (gain_b - root_gain).astype(xp.float32)
        ok_b = valid_b & allowed & has_missing[:, :, None] & xp.isfinite(loss_b)
        # Visit the backward candidates of each feature from its last bin down.
        f_idx = xp.arange(n_features)[:, None]
        cand_b = xp.where(ok_b, loss_b, neg)[:, f_idx, xp.asarray(rev)]
        cand_b = xp.where(xp.asarray(j[None, :] < n_bins[:, None])[None], cand_b, neg)
    else:  # no node misses a value of any feature: no backward candidate may win (half the work)
        bwd = None
        cand_b = xp.full(cand_f.shape, neg, dtype=xp.float32)
    cand = xp.stack([cand_f, cand_b], axis=2).reshape(k, -1)  # (k, F*2*width) in visiting order
    best = xp.argmax(cand, axis=1)
    best_loss = cand[xp.arange(k), best]

    best_h = to_host(best)
    fi = best_h // (2 * width)  # index among the scanned features
    f = feats[fi]
    backward = (best_h // width) % 2 == 1
    pos = best_h % width
    b = np.where(backward, rev[fi, pos], pos)  # bin index the candidate was scored at
    kk = xp.arange(k)
    fx, bx = xp.asarray(fi), xp.asarray(b)
    # As XGBoost records them: the scanned sum on its side, the parent minus it on the other.
    back_x = xp.asarray(backward)[:, None]
    acc_f = fwd[kk, fx, bx]
    acc_b = acc_f if bwd is None else bwd[kk, fx, bx]  # read only where backward, so never then
    left = xp.where(back_x, parent - acc_b, acc_f)
    right = xp.where(back_x, acc_b, parent - acc_f)

    rec = np.zeros(k, dtype=SPLIT_DTYPE)
    found = to_host(best_loss > 0)
    left_d = to_host(left.astype(xp.float64) * scale)
    right_d = to_host(right.astype(xp.float64) * scale)
    last_left_bin = np.where(backward, b - 1, b)
    cv = to_host(cut_values)
    mv = to_host(min_values)
    thr = np.where(last_left_bin >= 0, cv[np.minimum(ptrs[f] + np.maximum(last_left_bin, 0), cv.size - 1)], mv[f])
    rec["left_grad"], rec["left_hess"] = left_d[:, 0], left_d[:, 1]
    rec["right_grad"], rec["right_hess"] = right_d[:, 0], right_d[:, 1]
    rec["gain"] = np.where(found, to_host(best_loss), 0.0)
    rec["threshold"] = thr
    rec["feature"] = np.where(found, f, -1)
    rec["bin"] = last_left_bin
    rec["default_left"] = backward.astype(np.int32)
    no = ~found
    for name in ("left_grad", "left_hess", "right_grad", "right_hess"):
        rec[name][no] = 0.0
    zero = xp.zeros_like(left)
    found_x = xp.asarray(found)[:, None]
    return rec, xp.where(found_x, left, zero), xp.where(found_x, right, zero)
