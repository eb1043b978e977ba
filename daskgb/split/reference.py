"""Split evaluation as array operations: the best split of many nodes at once (the oracle of split/cuda.py).

evaluate_splits is written against an array module: numpy's is the CPU path's (through
evaluate_splits_grouped, which scans features of similar bin counts together), CuPy's the
reference kernels/split.cu is tested against, and the GPU's way where the kernel does not
apply (monotone constraints).
"""

from __future__ import annotations

import numpy as np

from ..arrays import to_host
from ..layouts import SPLIT_DTYPE
from . import categorical
from .rules import SplitParams, calc_weight, child_gain

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


def evaluate_splits_grouped(cuts, hist, parent, scale, params, feature_mask=None, monotone=None, bounds=None):
    """Best split of each node (see split.evaluate_splits), the same records.

    The reference pads every feature it scans to the widest one's bins; where bin counts
    differ a lot (one-hot next to continuous features) that scans several times the real
    bins. So features are evaluated in groups of similar width (bin counts up to 2, 4, 8, ...)
    and each node keeps the best group's split: the largest loss change, ties to the lower
    feature, as the single scan's visiting order decides.
    """
    groups = _width_groups(cuts)
    if groups is None:
        return evaluate_splits(np, hist, parent, scale, cuts.ptrs, cuts.values, cuts.min_values, params,
                                      feature_mask, monotone, bounds)
    mask = None if feature_mask is None else np.asarray(feature_mask, dtype=bool)
    best = None
    # The group holding feature 0 comes first: a node with no split reports its fields, as the
    # reference does.
    for feats, bins, ptrs, values, min_values in groups:
        rec, left, right = evaluate_splits(
            np, hist[:, bins], parent, scale, ptrs, values, min_values, params,
            None if mask is None else mask[..., feats], None if monotone is None else np.asarray(monotone)[feats],
            bounds)
        rec["feature"] = np.where(rec["feature"] >= 0, feats[np.maximum(rec["feature"], 0)], -1)
        if best is None:
            best = [rec, left, right]
            continue
        brec = best[0]
        wins = (rec["feature"] >= 0) & ((rec["gain"] > brec["gain"]) | (
            (rec["gain"] == brec["gain"]) & (brec["feature"] >= 0) & (rec["feature"] < brec["feature"])))
        brec[wins] = rec[wins]
        best[1][wins] = left[wins]
        best[2][wins] = right[wins]
    return tuple(best)

def _width_groups(cuts):
    """Per group of features with similar bin counts: (features, their global bins, sub-cut ptrs,
    values, min_values); None when one scan wastes little. Cached on the cuts."""
    cached = cuts.__dict__.get("_width_groups", False)
    if cached is not False:
        return cached
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    n_bins = np.diff(ptrs)
    groups = None
    if n_bins.size > 1 and n_bins.max() * n_bins.size > 2 * max(1, int(n_bins.sum())):
        bucket = np.ceil(np.log2(np.maximum(n_bins, 1))).astype(np.int64)
        values, min_values = np.asarray(cuts.values), np.asarray(cuts.min_values)
        order = [bucket[0]] + sorted(set(bucket.tolist()) - {bucket[0]})
        groups = []
        for b in order:
            feats = np.flatnonzero(bucket == b)
            bins = np.concatenate([np.arange(ptrs[f], ptrs[f + 1]) for f in feats])
            sub_ptrs = np.concatenate([[0], np.cumsum(n_bins[feats])])
            groups.append((feats, bins, sub_ptrs, values[bins], min_values[feats]))
    cuts.__dict__["_width_groups"] = groups
    return groups


def evaluate_categorical(cuts, hist, parent, scale, params, max_cat_to_onehot: int, max_cat_threshold: int,
                         feature_mask=None):
    """The best categorical split of each node over all the cuts' categorical features
    (split/categorical.py's evaluate_categorical, whose results it returns)."""
    features = np.flatnonzero(cuts.categorical) if cuts.categorical is not None else np.zeros(0, np.int64)
    return categorical.evaluate_categorical(np, hist, parent, scale, to_host(cuts.ptrs), features, params,
                                            max_cat_to_onehot, max_cat_threshold, feature_mask)
