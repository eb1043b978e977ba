"""The split stage compiled for CPUs (cpu/): reference.py's best split of each node, bit for bit, in one pass over its bins.

The oracle scans every feature padded to the widest one's bins, as cumulative sums over
(nodes x features x bins) arrays: at depth 8 most of a numpy round. Here each node's bins
are read once: a running sum per feature, forward then (where the node misses values of
the feature) backward, scoring each candidate with rules.py's arithmetic type for type
(double sums, each child's gain rounded to float, the loss change in float) and keeping the
first largest, in XGBoost's visiting order. The threads split the nodes.

Running sums start from 0.0 where numpy's cumsum starts from the first bin: the two differ
only for a bin holding -0.0, which no histogram holds (sums start from +0.0, and x - x is +0.0).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .. import cpu
from ..arrays import to_host
from ..layouts import SPLIT_DTYPE
from . import reference
from .rules import SplitParams


def _weight(G, H, mcw, lam, alpha, mds, has_bounds, lower, upper):
    """rules.calc_weight of one child (float32), clipped to [lower, upper] where has_bounds."""
    ok = H >= mcw and H > 0.0
    denom = H + lam if ok else 1.0
    t = G - alpha if G > alpha else (G + alpha if G < -alpha else 0.0)
    w = -t / denom
    if mds != 0.0 and abs(w) > mds:
        w = math.copysign(mds, w)
    wf = np.float32(w) if ok else np.float32(0.0)
    if has_bounds:
        if wf < lower:
            wf = lower
        elif wf > upper:
            wf = upper
    return wf


def _gain(G, H, mcw, lam, alpha, mds, weight_form, has_bounds, lower, upper):
    """rules.child_gain of one child (float32)."""
    if not H > 0.0:
        return np.float32(0.0)
    if not weight_form:
        if alpha == 0.0:
            t = 0.0 if math.isnan(G) else G
        else:
            t = G - alpha if G > alpha else (G + alpha if G < -alpha else 0.0)
        return np.float32(t * t / (H + lam))
    w = _weight(G, H, mcw, lam, alpha, mds, has_bounds, lower, upper)
    g32 = np.float32(G)
    h32 = np.float32(H)
    return -(np.float32(2.0) * g32 * w + (h32 + np.float32(lam)) * (w * w))


def _closed_losses(cg, ch, nb, pg, ph, forward, s0, s1, mcw, lam, root, out):
    """The loss changes (float32; -inf where invalid or not finite) of a scan's nb candidates, in
    rules.child_gain's closed form, from the scanned sums cg, ch: written without branches, so
    that the compiler does the candidates' divisions several at a time."""
    neg = np.float32(-np.inf)
    zero = np.float32(0.0)
    for j in range(nb):
        a = cg[j]
        c = ch[j]
        lg = a * s0 if forward else (pg - a) * s0
        lh = c * s1 if forward else (ph - c) * s1
        rg = (pg - a) * s0 if forward else a * s0
        rh = (ph - c) * s1 if forward else c * s1
        tl = 0.0 if math.isnan(lg) else lg
        tr = 0.0 if math.isnan(rg) else rg
        gl = np.float32(tl * tl / (lh + lam if lh > 0.0 else 1.0))
        gr = np.float32(tr * tr / (rh + lam if rh > 0.0 else 1.0))
        loss = ((gl if lh > 0.0 else zero) + (gr if rh > 0.0 else zero)) - root
        ok = (lh >= mcw) & (rh >= mcw) & (loss > neg) & (loss < np.float32(np.inf))
        out[j] = loss if ok else neg


def _scan(lo, hi, hist, parent, scale, ptrs, mask, monotone, bounds, has_bounds, mcw, lam, alpha, mds,
          weight_form, out_pick, out_loss, out_acc):
    """Nodes lo..hi: the first best candidate's (feature, bin scored at, backward), its loss change
    and its scanned sums (the left child's going forward, the right child's going backward).
    A feature's scan in three passes: its running sums, every candidate's loss, the first largest."""
    n_features = ptrs.shape[0] - 1
    s0 = scale[0]
    s1 = scale[1]
    neg = np.float32(-np.inf)
    width = 1
    for f in range(n_features):
        width = max(width, ptrs[f + 1] - ptrs[f])
    cg = np.empty(width, np.float64)
    ch = np.empty(width, np.float64)
    losses = np.empty(width, np.float32)
    for n in range(lo, hi):
        pg = parent[n, 0]
        ph = parent[n, 1]
        lower = bounds[n, 0]
        upper = bounds[n, 1]
        root = _gain(pg * s0, ph * s1, mcw, lam, alpha, mds, weight_form, has_bounds, lower, upper)
        mrow = n if mask.shape[0] > 1 else 0
        sums = hist[n].ravel()  # the node's (g, h) pairs, bin after bin
        best = neg
        best_f = 0
        best_b = 0
        best_back = 0
        best_ag = 0.0
        best_ah = 0.0
        for f in range(n_features):
            base = ptrs[f]
            nb = ptrs[f + 1] - base
            if nb <= 0 or not mask[mrow, f]:
                continue
            direction = monotone[f]
            closed = not weight_form and direction == 0 and alpha == 0.0
            unb = np.uint64(nb)
            first = np.uint64(2) * np.uint64(base)  # the feature's first bin's g in the node's row
            last = first + np.uint64(2) * (unb - np.uint64(1))
            for side in range(2):
                ag = 0.0
                ah = 0.0
                # Unsigned indices: numba checks a signed one for wrap-around on every read.
                if side == 0:
                    for j in range(unb):
                        ag += sums[first + np.uint64(2) * j]
                        ah += sums[first + np.uint64(2) * j + np.uint64(1)]
                        cg[j] = ag
                        ch[j] = ah
                else:
                    for j in range(unb):
                        ag += sums[last - np.uint64(2) * j]
                        ah += sums[last - np.uint64(2) * j + np.uint64(1)]
                        cg[j] = ag
                        ch[j] = ah
                if closed:
                    _closed_losses(cg, ch, unb, pg, ph, side == 0, s0, s1, mcw, lam, root, losses)
                else:
                    for j in range(unb):
                        if side == 0:
                            lg, lh, rg, rh = cg[j] * s0, ch[j] * s1, (pg - cg[j]) * s0, (ph - ch[j]) * s1
                        else:
                            lg, lh, rg, rh = (pg - cg[j]) * s0, (ph - ch[j]) * s1, cg[j] * s0, ch[j] * s1
                        losses[j] = neg
                        if not (lh >= mcw and rh >= mcw):
                            continue
                        if direction != 0:
                            wl = _weight(lg, lh, mcw, lam, alpha, mds, has_bounds, lower, upper)
                            wr = _weight(rg, rh, mcw, lam, alpha, mds, has_bounds, lower, upper)
                            if (direction > 0 and not wl <= wr) or (direction < 0 and not wl >= wr):
                                continue
                        loss = _gain(lg, lh, mcw, lam, alpha, mds, weight_form, has_bounds, lower, upper) + \
                            _gain(rg, rh, mcw, lam, alpha, mds, weight_form, has_bounds, lower, upper) - root
                        if not (math.isinf(loss) or math.isnan(loss)):
                            losses[j] = loss
                for j in range(unb):
                    if losses[j] > best:  # the first of equals stays
                        best = losses[j]
                        best_f = f
                        best_b = np.int64(j) if side == 0 else nb - 1 - np.int64(j)
                        best_back = side
                        best_ag = cg[j]
                        best_ah = ch[j]
                # The backward scan only where the node misses values of the feature.
                if side == 0 and ag == pg and ah == ph:
                    break
        out_pick[n, 0] = best_f
        out_pick[n, 1] = best_b
        out_pick[n, 2] = best_back
        out_loss[n] = best
        out_acc[n, 0] = best_ag
        out_acc[n, 1] = best_ah


_compiled = {}
_compiling = threading.Lock()


def _kernels():
    if not _compiled:
        # _scan calls the rules by their module names, which numba reads when it compiles _scan:
        # they are compiled first, in their place. Under a lock: two workers in one process (a
        # LocalCluster of threads) training at once both found the table empty, and the second
        # compiled an already compiled rule (numba's TypeError).
        with _compiling:
            if not _compiled:
                g = globals()
                for name in ("_weight", "_gain", "_closed_losses"):
                    g[name] = cpu.jit(g[name])
                _compiled["scan"] = cpu.jit(_scan)
    return _compiled

# Below this many bins (nodes x bins of each) an evaluation is one thread's work.
_MIN_BINS_PER_THREAD = 1 << 16


def evaluate_splits(cuts, hist, parent, scale, params: SplitParams, feature_mask=None, monotone=None,
                    bounds=None):
    """Best split of each node: reference.evaluate_splits_grouped's records and children's sums."""
    if hist.dtype != np.float64:  # the CPU's histograms are float64; anything else, the oracle's way
        return reference.evaluate_splits_grouped(cuts, hist, parent, scale, params, feature_mask, monotone, bounds)
    k, total_bins, _ = hist.shape
    ptrs = np.asarray(to_host(cuts.ptrs), dtype=np.int64)
    n_features = ptrs.size - 1
    hist = np.ascontiguousarray(hist)
    parent = np.ascontiguousarray(parent, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    mask = np.ones((1, n_features), dtype=np.bool_) if feature_mask is None else \
        np.ascontiguousarray(np.atleast_2d(np.asarray(feature_mask, dtype=np.bool_)))
    mono = np.zeros(n_features, dtype=np.int8) if monotone is None else \
        np.ascontiguousarray(np.sign(np.asarray(monotone)), dtype=np.int8)
    has_bounds = monotone is not None  # the oracle reads the bounds only with the constraints
    node_bounds = np.zeros((k, 2), dtype=np.float32) if not has_bounds else \
        np.ascontiguousarray(np.asarray(bounds, dtype=np.float32).reshape(k, 2))
    # The closed form holds only where the weight is not clipped (rules.child_gain).
    weight_form = params.max_delta_step != 0.0 or has_bounds
    pick = np.empty((k, 3), dtype=np.int64)
    best = np.empty(k, dtype=np.float32)
    acc = np.empty((k, 2), dtype=np.float64)
    cpu.run_chunks(_kernels()["scan"], k, hist, parent, scale, ptrs, mask, mono, node_bounds, has_bounds,
                   params.min_child_weight, params.reg_lambda, params.reg_alpha, params.max_delta_step, weight_form,
                   pick, best, acc, min_chunk=max(1, _MIN_BINS_PER_THREAD // max(1, total_bins)))
    return _records(cuts, ptrs, parent, scale, pick, best, acc)


def _records(cuts, ptrs, parent, scale, pick, best, acc):
    """The SPLIT_DTYPE records and the children's sums, as reference.evaluate_splits writes them."""
    k = pick.shape[0]
    f, b, backward = pick[:, 0], pick[:, 1], pick[:, 2] == 1
    # As XGBoost records them: the scanned sum on its side, the parent minus it on the other.
    back_x = backward[:, None]
    left = np.where(back_x, parent - acc, acc)
    right = np.where(back_x, acc, parent - acc)
    rec = np.zeros(k, dtype=SPLIT_DTYPE)
    found = best > 0
    left_d = left * scale
    right_d = right * scale
    last_left_bin = np.where(backward, b - 1, b)
    cv = np.asarray(to_host(cuts.values))
    mv = np.asarray(to_host(cuts.min_values))
    thr = np.where(last_left_bin >= 0, cv[np.minimum(ptrs[f] + np.maximum(last_left_bin, 0), cv.size - 1)], mv[f])
    rec["left_grad"], rec["left_hess"] = left_d[:, 0], left_d[:, 1]
    rec["right_grad"], rec["right_hess"] = right_d[:, 0], right_d[:, 1]
    rec["gain"] = np.where(found, best, 0.0)
    rec["threshold"] = thr
    rec["feature"] = np.where(found, f, -1)
    rec["bin"] = last_left_bin
    rec["default_left"] = backward.astype(np.int32)
    no = ~found
    for name in ("left_grad", "left_hess", "right_grad", "right_hess"):
        rec[name][no] = 0.0
    zero = np.zeros_like(left)
    found_x = found[:, None]
    return rec, np.where(found_x, left, zero), np.where(found_x, right, zero)
