"""Tree growth: the loop over expansion steps; driver.py picks the nodes, the backend does the hot work.

Each step: apply the chosen splits to the tree and to the rows -> build the histograms
of the smaller child of each split and sum them across workers -> the sibling is the
parent minus the child -> evaluate all children's splits at once, each with the
features it may use (feature_sets.py) and within its weight bounds (monotone.py) ->
queue the children. A depthwise step takes a whole level, a lossguide step one node;
the steps themselves are the same.
"""

from __future__ import annotations

import numpy as np

from .backend import to_host
from .driver import Candidate, Driver, records
from .feature_sets import NodeFeatures
from .monotone import NodeBounds
from .split import calc_weight
from .tree import Tree, TreeBuilder


class _Evaluation:
    """Nodes evaluated together: their best splits (host SPLIT_DTYPE records), histograms and
    the sums of their best splits' children (backend arrays); row i for the i-th node.
    Candidates point into it by row."""

    __slots__ = ("recs", "hist", "left", "right")

    def __init__(self, recs, hist, left, right):
        self.recs, self.hist, self.left, self.right = recs, hist, left, right


class _Growth:
    """One tree being grown: the tree so far, the rows' nodes, and the per-node steps."""

    def __init__(self, backend, ell, gpair, scale, params, comm, tree_index: int, interaction, monotone):
        self.backend, self.ell, self.gpair, self.scale, self.comm = backend, ell, gpair, scale, comm
        self.split_params = params.split_params()
        self.eta = np.float32(params.learning_rate)
        self.features = NodeFeatures(params, ell.n_features, tree_index, interaction)
        self.monotone = monotone
        self.bounds = NodeBounds(monotone) if monotone is not None else None
        self.part = backend.new_partition(ell.n_rows)
        self.builder = TreeBuilder()

    def root(self, root_from_bins: bool) -> list[Candidate]:
        backend = self.backend
        hist = self.comm.allreduce(backend.build_histograms(self.ell, self.gpair, self.part, [0]))
        root_sum = _root_sum(backend, self.ell, self.gpair, hist, self.comm, root_from_bins)
        sums_d = to_host(root_sum.astype(backend.xp.float64)) * self.scale
        w = float(calc_weight(np, sums_d[0], sums_d[1], self.split_params))
        self.builder.add_node(-1, 0, w, float(np.float32(w) * self.eta), float(sums_d[1]))
        return self.evaluate(hist, root_sum[None, :], [0], [0])

    def evaluate(self, hist, sums, nids, depths) -> list[Candidate]:
        """Best splits of the nodes (histograms and sums row by row), as candidates."""
        mask = self.features.masks(nids, depths)
        bounds = None if self.bounds is None else self.bounds.of(nids)
        recs, left, right = self.backend.evaluate_splits(self.ell.cuts, hist, sums, self.scale,
                                                         self.split_params, mask, self.monotone, bounds)
        ev = _Evaluation(recs, hist, left, right)
        return [Candidate(n, d, g, (ev, i))
                for i, (n, d, g) in enumerate(zip(np.asarray(nids).tolist(), np.asarray(depths).tolist(),
                                                  recs["gain"].tolist()))]

    def expand(self, batch: list[Candidate]) -> tuple[np.ndarray, np.ndarray]:
        """Split the nodes in the tree and move their rows to the children; returns the children's ids."""
        recs = records(batch)
        nids = np.array([c.nid for c in batch], dtype=np.int32)
        sp, eta = self.split_params, self.eta
        # The children's weights, within the split node's monotone bounds.
        bounds = None if self.bounds is None else tuple(self.bounds.of(nids).T)
        lw = calc_weight(np, recs["left_grad"], recs["left_hess"], sp, bounds)
        rw = calc_weight(np, recs["right_grad"], recs["right_hess"], sp, bounds)
        lids = np.empty(len(batch), np.int32)
        rids = np.empty(len(batch), np.int32)
        add, split = self.builder.add_node, self.builder.split
        # Plain lists: per-node access to numpy scalars would cost more than the loop itself.
        rows = zip(nids.tolist(), [c.depth + 1 for c in batch], lw.tolist(), (lw * eta).tolist(), rw.tolist(),
                   (rw * eta).tolist(), recs["left_hess"].tolist(), recs["right_hess"].tolist(),
                   recs["feature"].tolist(), recs["bin"].tolist(), recs["threshold"].tolist(),
                   recs["default_left"].tolist(), recs["gain"].tolist())
        for j, (nid, depth, wl, vl, wr, vr, hl, hr, f, b, thr, dl, gain) in enumerate(rows):
            lids[j] = add(nid, depth, wl, vl, hl)
            rids[j] = add(nid, depth, wr, vr, hr)
            split(nid, f, b, thr, bool(dl), gain, int(lids[j]), int(rids[j]))
        self.features.split(nids, recs["feature"], lids, rids)
        if self.bounds is not None:
            self.bounds.split(nids, recs["feature"], lw, rw, lids, rids)
        self.backend.apply_splits(self.ell, self.part, nids, recs["feature"], recs["bin"], recs["default_left"],
                                  lids, rids)
        return lids, rids

    def evaluate_children(self, parents: list[Candidate], lids, rids) -> list[Candidate]:
        """Histograms of the expanded nodes' children (the smaller one built, the other by
        subtraction), then their best splits."""
        xp = self.backend.xp
        recs = records(parents)
        # Build the child with the smaller hessian sum; its sibling comes by subtraction.
        build_right = recs["right_hess"] < recs["left_hess"]
        build = np.where(build_right, rids, lids).tolist()
        built = self.comm.allreduce(self.backend.build_histograms(self.ell, self.gpair, self.part, build))
        sources = [c.source for c in parents]
        other = _rows(xp, sources, "hist") - built
        br = xp.asarray(build_right)[:, None, None]
        left_hist = xp.where(br, other, built)
        right_hist = xp.where(br, built, other)
        hist = xp.stack([left_hist, right_hist], axis=1).reshape(-1, *built.shape[1:])
        sums = xp.stack([_rows(xp, sources, "left"), _rows(xp, sources, "right")], axis=1).reshape(-1, 2)
        nids = np.stack([lids, rids], axis=1).ravel()
        depths = np.repeat([c.depth + 1 for c in parents], 2)
        return self.evaluate(hist, sums, nids, depths)


def grow_tree(backend, ell, gpair, scale, params, comm, root_from_bins: bool, tree_index: int = 0,
              interaction=None, monotone=None) -> tuple[Tree, object]:
    """Grow one tree; returns it and the leaf node id of every row (a backend array).

    root_from_bins: every worker's data is dense without missing values (see _root_sum);
    the caller decides it once, for all workers alike.
    tree_index: the tree's index in the model, which keys its column samples.
    interaction: the interaction constraint sets (feature_sets.interaction_sets), or None.
    monotone: the (n_features,) monotone constraints (monotone.monotone_vector), or None.
    """
    growth = _Growth(backend, ell, gpair, scale, params, comm, tree_index, interaction, monotone)
    driver = Driver(params.grow_policy, params.max_depth, params.max_leaves, growth.split_params)
    driver.push(growth.root(root_from_bins))
    batch = driver.pop()
    while batch:
        lids, rids = growth.expand(batch)
        grow = [j for j, c in enumerate(batch) if driver.child_valid(c)]
        if grow:
            driver.push(growth.evaluate_children([batch[j] for j in grow], lids[grow], rids[grow]))
        batch = driver.pop()
    return growth.builder.build(), growth.part.positions


def _rows(xp, sources, name: str):
    """Row i of each (evaluation, i) source's array `name`, stacked; one gather when all share one evaluation."""
    evs = {id(ev) for ev, _ in sources}
    if len(evs) == 1:
        a = getattr(sources[0][0], name)
        idx = [i for _, i in sources]
        return a if idx == list(range(a.shape[0])) else a[xp.asarray(idx)]
    return xp.stack([getattr(ev, name)[i] for ev, i in sources])


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
