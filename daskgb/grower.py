"""Depthwise tree growth: the loop over levels; the backend does each level's hot work.

Per level: apply the chosen splits to the rows -> build the histograms of the
smaller child of each split -> sum them across workers -> the sibling is the
parent minus the child -> evaluate all children's splits at once.
"""

from __future__ import annotations

import numpy as np

from .backend import to_host
from .split import calc_weight, split_is_applied
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
        chosen = [i for i in range(len(level)) if split_is_applied(recs[i], depth, params.max_depth, sp)]
        if not chosen:
            break
        nids, lids, rids = [], [], []
        for i in chosen:
            r = recs[i]
            nid = level[i]
            lw = float(calc_weight(np, r["left_grad"], r["left_hess"], sp))
            rw = float(calc_weight(np, r["right_grad"], r["right_hess"], sp))
            lid = builder.add_node(nid, depth + 1, lw, float(np.float32(lw) * eta), float(r["left_hess"]))
            rid = builder.add_node(nid, depth + 1, rw, float(np.float32(rw) * eta), float(r["right_hess"]))
            builder.split(nid, int(r["feature"]), int(r["bin"]), float(r["threshold"]), bool(r["default_left"]),
                          float(r["gain"]), lid, rid)
            nids.append(nid), lids.append(lid), rids.append(rid)
        sel = recs[chosen]
        backend.apply_splits(ell, part, np.asarray(nids, np.int32), sel["feature"], sel["bin"],
                             sel["default_left"], np.asarray(lids, np.int32), np.asarray(rids, np.int32))
        if params.max_depth > 0 and depth + 1 >= params.max_depth:
            break
        # Build the child with the smaller hessian sum; its sibling comes by subtraction.
        build_right = sel["right_hess"] < sel["left_hess"]
        build = [r if br else l for l, r, br in zip(lids, rids, build_right)]
        built = comm.allreduce(backend.build_histograms(ell, gpair, part, build))
        chosen_x = xp.asarray(np.asarray(chosen))
        other = level_hist[chosen_x] - built
        br = xp.asarray(build_right)[:, None, None]
        left_hist = xp.where(br, other, built)
        right_hist = xp.where(br, built, other)
        level_hist = xp.stack([left_hist, right_hist], axis=1).reshape(-1, *built.shape[1:])
        level_sums = xp.stack([left_sums[chosen_x], right_sums[chosen_x]], axis=1).reshape(-1, 2)
        level = [n for pair in zip(lids, rids) for n in pair]
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
