"""Depthwise tree growth: the loop over levels; the backend does each level's hot work.

Per level: apply the chosen splits to the rows -> build the histograms of the
smaller child of each split -> sum them across workers -> the sibling is the
parent minus the child -> evaluate all children's splits at once.
"""

from __future__ import annotations

import numpy as np

from .backend import to_host
from .split import calc_weight, splits_applied
from .tree import Tree, TreeBuilder


def grow_tree(backend, ell, gpair, scale, params, comm, root_from_bins: bool) -> tuple[Tree, object]:
    """Grow one tree; returns it and the leaf node id of every row (a backend array).

    root_from_bins: every worker's data is dense without missing values (see _root_sum);
    the caller decides it once, for all workers alike.
    """
    xp = backend.xp
    sp = params.split_params()
    eta = np.float32(params.learning_rate)
    cuts = ell.cuts
    part = backend.new_partition(ell.n_rows)

    hist = comm.allreduce(backend.build_histograms(ell, gpair, part, [0]))
    root_sum = _root_sum(backend, ell, gpair, hist, comm, root_from_bins)
    sums_d = to_host(root_sum.astype(xp.float64)) * scale
    builder = TreeBuilder()
    w = float(calc_weight(np, sums_d[0], sums_d[1], sp))
    builder.add_node(-1, 0, w, float(np.float32(w) * eta), float(sums_d[1]))

    level = [0]
    level_hist = hist
    level_sums = root_sum[None, :]
    for depth in range(params.max_depth if params.max_depth > 0 else 1 << 30):
        recs, left_sums, right_sums = backend.evaluate_splits(cuts, level_hist, level_sums, scale, sp)
        chosen = np.flatnonzero(splits_applied(recs, depth, params.max_depth, sp))
        if chosen.size == 0:
            break
        sel = recs[chosen]
        nids = np.asarray(level, dtype=np.int32)[chosen]
        lw = calc_weight(np, sel["left_grad"], sel["left_hess"], sp)
        rw = calc_weight(np, sel["right_grad"], sel["right_hess"], sp)
        lids = np.empty(chosen.size, np.int32)
        rids = np.empty(chosen.size, np.int32)
        for j, nid in enumerate(nids.tolist()):
            lids[j] = builder.add_node(nid, depth + 1, float(lw[j]), float(lw[j] * eta), float(sel["left_hess"][j]))
            rids[j] = builder.add_node(nid, depth + 1, float(rw[j]), float(rw[j] * eta), float(sel["right_hess"][j]))
            builder.split(nid, int(sel["feature"][j]), int(sel["bin"][j]), float(sel["threshold"][j]),
                          bool(sel["default_left"][j]), float(sel["gain"][j]), int(lids[j]), int(rids[j]))
        backend.apply_splits(ell, part, nids, sel["feature"], sel["bin"], sel["default_left"], lids, rids)
        if params.max_depth > 0 and depth + 1 >= params.max_depth:
            break
        # Build the child with the smaller hessian sum; its sibling comes by subtraction.
        build_right = sel["right_hess"] < sel["left_hess"]
        build = np.where(build_right, rids, lids).tolist()
        built = comm.allreduce(backend.build_histograms(ell, gpair, part, build))
        chosen_x = xp.asarray(chosen)
        other = level_hist[chosen_x] - built
        br = xp.asarray(build_right)[:, None, None]
        left_hist = xp.where(br, other, built)
        right_hist = xp.where(br, built, other)
        level_hist = xp.stack([left_hist, right_hist], axis=1).reshape(-1, *built.shape[1:])
        level_sums = xp.stack([left_sums[chosen_x], right_sums[chosen_x]], axis=1).reshape(-1, 2)
        level = np.stack([lids, rids], axis=1).ravel().tolist()
    return builder.build(), part.positions


def _root_sum(backend, ell, gpair, root_hist, comm, from_bins: bool):
    """The root's gradient sums, summed as XGBoost sums them.

    With dense data and no missing values every row lands in exactly one bin of
    feature 0, so the sum of those bins (already summed across workers) is the
    total: XGBoost's choice there. Otherwise the rows are summed and the sums
    reduced across workers.
    """
    if from_bins:
        lo, hi = 0, int(np.diff(to_host(ell.cuts.ptrs[:2]))[0])
        return backend.xp.cumsum(root_hist[0, lo:hi], axis=0)[-1]
    return comm.allreduce(backend.sum_gradients(gpair))
