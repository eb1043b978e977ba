"""Splits on categorical features, as array operations: one-hot and partition-based, XGBoost's rules.

A categorical feature's bins are its categories (sketch/cuts.py: bin c holds category c), so
a node's histogram over the feature is its gradient sums per category. XGBoost's CPU
evaluator (src/tree/hist/evaluate_splits.h) defines the candidates and their visiting order:

  one-hot (the feature has fewer than max_cat_to_onehot bins): for each category c in
      increasing order, c goes right with missing values left, then c and the missing
      values go right;
  partition (otherwise): the categories sorted by their own leaf weight (stable, ties by
      category), then the forward scan: the first 1, 2, ..., n - 1 sorted categories go
      right, missing values left; then the backward scan: the last 1, 2, ..., n - 1 go
      left, missing values right; n = min(max_cat_threshold, the feature's bins).

The first candidate with the largest loss change wins within a feature; across features the
larger loss change, ties to the lower feature (split/reference.py's order). A split's
categories are the ones that go right, kept as a bitset over the feature's categories
(word c // 32, bit c % 32), as XGBoost's trees keep them.

Written against an array module (numpy for the CPU path and the oracle).
"""

from __future__ import annotations

import numpy as np

from ..arrays import to_host
from ..category_sets import WORD_BITS, n_words
from .rules import SplitParams, calc_weight, child_gain

def evaluate_categorical(xp, hist, parent, scale, ptrs, features, p: SplitParams, max_cat_to_onehot: int,
                         max_cat_threshold: int, feature_mask=None):
    """Best categorical split of each node over the given categorical features.

    hist (k, total_bins, 2), parent (k, 2), scale (2,): as split/reference.py's evaluate_splits.
    ptrs: the cuts' (n_features + 1,) host pointers; features: the categorical feature indices,
    in increasing order; feature_mask: None or bool (n_features,) / (k, n_features).
    Returns (loss (k,) float32, feature (k,) int64 (-1: none beats 0), default_left (k,) bool,
    left (k, 2), right (k, 2) in the histogram's type, bits (k, W) uint32 host bitsets of the
    categories going right).
    """
    k = hist.shape[0]
    ptrs = np.asarray(ptrs, dtype=np.int64)
    widest = int(max((ptrs[f + 1] - ptrs[f] for f in features), default=1))
    best_loss = np.zeros(k, dtype=np.float32)  # a split must beat 0
    best_feature = np.full(k, -1, dtype=np.int64)
    best_default_left = np.zeros(k, dtype=bool)
    best_left = xp.zeros((k, 2), dtype=hist.dtype)
    best_right = xp.zeros((k, 2), dtype=hist.dtype)
    bits = np.zeros((k, n_words(widest)), dtype=np.uint32)
    if not len(features):
        return best_loss, best_feature, best_default_left, best_left, best_right, bits
    scale = xp.asarray(scale, dtype=xp.float64)
    root_gain = child_gain(xp, parent[:, 0] * scale[0], parent[:, 1] * scale[1], p)[:, None]
    mask = None if feature_mask is None else np.asarray(feature_mask, dtype=bool)
    rows = xp.arange(k)

    def loss_change(left, right):
        lg, lh = left[..., 0] * scale[0], left[..., 1] * scale[1]
        rg, rh = right[..., 0] * scale[0], right[..., 1] * scale[1]
        valid = (lh >= p.min_child_weight) & (rh >= p.min_child_weight)
        loss = ((child_gain(xp, lg, lh, p) + child_gain(xp, rg, rh, p)) - root_gain).astype(xp.float32)
        return xp.where(valid & xp.isfinite(loss), loss, xp.float32(-np.inf))

    for f in features:
        lo, hi = int(ptrs[f]), int(ptrs[f + 1])
        n = hi - lo
        h = hist[:, lo:hi]  # (k, n, 2): the node's sums per category
        par = parent[:, None, :]
        if n < max_cat_to_onehot:
            # Candidate 2c: c right, missing left; 2c + 1: c and the missing values right.
            missing = parent - h.sum(axis=1)
            right = xp.stack([h, h + missing[:, None, :]], axis=2).reshape(k, 2 * n, 2)
            loss = loss_change(par - right, right)
            at = xp.argmax(loss, axis=1)
            f_loss = loss[rows, at]
            f_right = right[rows, at]
            f_left = parent - f_right
            at_h = np.asarray(to_host(at))
            f_default_left = at_h % 2 == 0
            f_bits = np.zeros((k, bits.shape[1]), dtype=np.uint32)
            cat = at_h // 2
            f_bits[np.arange(k), cat // WORD_BITS] = np.uint32(1) << (cat % WORD_BITS).astype(np.uint32)
        else:
            g = h[..., 0] * scale[0]
            hs = h[..., 1] * scale[1]
            weight = calc_weight(xp, g, hs, p)  # float32, as XGBoost's CalcWeightCat
            order = xp.argsort(weight, axis=1, kind="stable")
            sorted_h = h[rows[:, None], order]  # (k, n, 2)
            m = min(int(max_cat_threshold), n)
            # Forward: the first t + 1 sorted categories right (t < m - 1), missing left.
            fwd = xp.cumsum(sorted_h[:, : max(m - 1, 0)], axis=1)
            loss_f = loss_change(par - fwd, fwd)
            # Backward: the sorted categories j..n-1 left (j from n - 1 down to n - m + 1),
            # missing right; its candidates in visiting order.
            tail = xp.cumsum(sorted_h[:, ::-1], axis=1)[:, : max(m - 1, 0)]  # j = n-1, n-2, ...
            loss_b = loss_change(tail, par - tail)
            loss = xp.concatenate([loss_f, loss_b], axis=1)
            if loss.shape[1] == 0:
                continue
            at = xp.argmax(loss, axis=1)
            f_loss = loss[rows, at]
            at_h = np.asarray(to_host(at))
            backward = at_h >= m - 1
            t = np.where(backward, at_h - (m - 1), at_h)
            t_x = xp.asarray(t)
            fwd_pick = fwd[rows, xp.minimum(t_x, max(m - 2, 0))]
            tail_pick = tail[rows, xp.minimum(t_x, max(m - 2, 0))]
            back_x = xp.asarray(backward)[:, None]
            f_right = xp.where(back_x, parent - tail_pick, fwd_pick)
            f_left = parent - f_right
            f_default_left = ~backward
            # The categories going right: the first t + 1 sorted (forward), or all but the
            # last t + 1 (backward).
            n_right = np.where(backward, n - (t + 1), t + 1)
            order_h = np.asarray(to_host(order))
            f_bits = np.zeros((k, bits.shape[1]), dtype=np.uint32)
            for i in range(k):
                c = order_h[i, : n_right[i]]
                np.bitwise_or.at(f_bits[i], c // WORD_BITS, np.uint32(1) << (c % WORD_BITS).astype(np.uint32))
        f_loss_h = np.asarray(to_host(f_loss), dtype=np.float32)
        if mask is not None:
            allowed = mask[f] if mask.ndim == 1 else mask[:, f]
            f_loss_h = np.where(allowed, f_loss_h, np.float32(-np.inf))
        wins = f_loss_h > best_loss  # features in increasing order: a tie keeps the lower one
        if not wins.any():
            continue
        best_loss = np.where(wins, f_loss_h, best_loss)
        best_feature[wins] = f
        best_default_left[wins] = f_default_left[wins]
        w_x = xp.asarray(wins)[:, None]
        best_left = xp.where(w_x, f_left, best_left)
        best_right = xp.where(w_x, f_right, best_right)
        bits[wins] = f_bits[wins]
    return best_loss, best_feature, best_default_left, best_left, best_right, bits

