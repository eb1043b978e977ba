"""Tree growth with the host deciding every step (the HOST_LEVELS path, and the reference of growth/device.py).

driver.py picks the nodes, the backend does the hot work.

Each step: apply the chosen splits to the tree and to the rows -> build the histograms
of the smaller child of each split and sum them across workers -> the sibling is the
parent minus the child -> evaluate all children's splits at once, each with the
features it may use (feature_sets.py) and within its weight bounds (monotone.py) ->
queue the children. A depthwise step takes a whole level, a lossguide step one node;
the steps themselves are the same.
"""

from __future__ import annotations

import numpy as np

from ..arrays import to_host
from ..ellpack.pages import PagedEllpack
from ..feature_sets import NodeFeatures
from ..monotone import NodeBounds
from ..phases import ALLREDUCE, HISTOGRAM, OTHER, SPLIT, mark
from ..category_sets import categories_of
from ..split import calc_weight
from ..tree import Tree, TreeBuilder
from .driver import Candidate, Driver, records


class _Evaluation:
    """Nodes evaluated together: their best splits (host SPLIT_DTYPE records), histograms and
    the sums of their best splits' children (backend arrays); row i for the i-th node.
    Candidates point into it by row."""

    __slots__ = ("recs", "hist", "left", "right", "categories")

    def __init__(self, recs, hist, left, right, categories=None):
        self.recs, self.hist, self.left, self.right = recs, hist, left, right
        # Per row: None, or the categories a categorical best split sends right.
        self.categories = categories


class _Growth:
    """K trees grown together (K = 1 for one tree; multiclass grows one per class at once):
    the trees so far, the rows' nodes, and the per-node steps.

    The trees share one row partition over K * n virtual rows (backend RowPartition):
    partition node g is node g // K of tree g % K, so each step evaluates, splits and
    builds histograms for the chosen nodes of every tree in one backend call. Node ids
    outside the partition (builders, feature sets, bounds) are the trees' own.
    """

    def __init__(self, backend, ell, gpair, scale, params, comm, tree_indices, interaction, monotone):
        self.backend, self.ell, self.gpair, self.scale, self.comm = backend, ell, gpair, scale, comm
        self.k = len(tree_indices)
        self.split_params = params.split_params()
        self.eta = np.float32(params.learning_rate)
        self.params = params
        self.features = [NodeFeatures(params, ell.n_features, t, interaction) for t in tree_indices]
        self.monotone = monotone
        self.bounds = [NodeBounds(monotone) for _ in tree_indices] if monotone is not None else None
        # A paged matrix (ellpack/pages.py) has a partition per page, stepped page after page.
        self.paged = isinstance(ell, PagedEllpack)
        if self.paged:
            self.parts = [backend.new_partition(b - a, self.k) for a, b in ell.row_ranges]
            self._page_gpairs: dict = {}
            # A step's splits, applied to each page when the step's histograms read it: one
            # copy of a page to the device a step, not two.
            self._pending_splits = None
        else:
            self.part = backend.new_partition(ell.n_rows, self.k)
        self.builders = [TreeBuilder() for _ in tree_indices]

    # -- the backend's row steps, on the whole matrix or page by page ----------------------------

    def _page_gpair(self, i: int):
        """Page i's gradient pairs in the forest's virtual-row order (tree c's rows, then c + 1's)."""
        g = self._page_gpairs.get(i)
        if g is None:
            a, b = self.ell.row_ranges[i]
            n = self.ell.n_rows
            if self.k == 1:
                g = self.gpair[a:b]
            else:
                g = _concat_rows(self.backend, [self.gpair[c * n + a : c * n + b] for c in range(self.k)])
            self._page_gpairs[i] = g
        return g

    def _histograms(self, nodes):
        """The nodes' histograms (summed over the pages of a paged matrix)."""
        backend = self.backend
        if not self.paged:
            return backend.build_histograms(self.ell, self.gpair, self.part, nodes)
        split, self._pending_splits = self._pending_splits, None
        total = None
        for i, part in enumerate(self.parts):
            page = self.ell.page(i, backend.xp)
            if split is not None:
                backend.apply_splits(page, part, *split)
            h = backend.build_histograms(page, self._page_gpair(i), part, nodes)
            total = h if total is None else total + h
        return total

    def _apply_splits(self, *split):
        if not self.paged:
            self.backend.apply_splits(self.ell, self.part, *split)
            return
        self._apply_pending()  # an earlier step's, whose children's histograms were not built
        self._pending_splits = split

    def _apply_pending(self) -> None:
        split, self._pending_splits = self._pending_splits, None
        if split is not None:
            for i, part in enumerate(self.parts):
                self.backend.apply_splits(self.ell.page(i, self.backend.xp), part, *split)

    def positions(self):
        """Every virtual row's node (see grow_forest)."""
        if not self.paged:
            return self.part.positions
        self._apply_pending()
        xp, n, k = self.backend.xp, self.ell.n_rows, self.k
        out = xp.empty(k * n, dtype=xp.int32)
        for (a, b), part in zip(self.ell.row_ranges, self.parts):
            pos, m = part.positions, b - a
            for c in range(k):
                out[c * n + a : c * n + b] = pos[c * m : (c + 1) * m]
        return out

    def _by_tree(self, nids):
        """(tree of each partition node, its id in that tree, and the positions of each tree's nodes)."""
        nids = np.asarray(nids, dtype=np.int64)
        trees, local = nids % self.k, nids // self.k
        return trees, local, [np.flatnonzero(trees == c) for c in range(self.k)]

    def root(self, root_from_bins: bool) -> list[Candidate]:
        backend, k = self.backend, self.k
        mark(HISTOGRAM)
        hist = self._histograms(list(range(k)))
        mark(ALLREDUCE)
        hist = self.comm.allreduce(hist)
        mark(SPLIT)
        root_sums = _root_sums(backend, self.ell, self.gpair, hist, self.comm, root_from_bins, k)
        sums_d = to_host(root_sums.astype(backend.xp.float64)) * self.scale
        for c in range(k):
            w = float(calc_weight(np, sums_d[c, 0], sums_d[c, 1], self.split_params))
            self.builders[c].add_node(-1, 0, w, float(np.float32(w) * self.eta), float(sums_d[c, 1]))
        return self.evaluate(hist, root_sums, list(range(k)), [0] * k)

    def evaluate(self, hist, sums, nids, depths) -> list[Candidate]:
        """Best splits of the nodes (histograms and sums row by row), as candidates."""
        mark(SPLIT)
        _, local, rows = self._by_tree(nids)
        depths = np.asarray(depths)
        mask = None
        if self.features[0].restricts:
            mask = np.empty((len(local), self.ell.n_features), dtype=bool)
            for c, r in enumerate(rows):
                if r.size:
                    mask[r] = self.features[c].masks(local[r], depths[r])
        bounds = None if self.bounds is None else self._bounds_of(local, rows)
        cuts = self.ell.cuts
        numeric_mask = mask
        if cuts.has_categorical:  # numeric features here, categorical ones below
            numeric_mask = ~cuts.categorical if mask is None else mask & ~cuts.categorical
        recs, left, right = self.backend.evaluate_splits(cuts, hist, sums, self.scale,
                                                         self.split_params, numeric_mask, self.monotone, bounds)
        categories = None
        if cuts.has_categorical:
            left, right, categories = self._categorical(cuts, hist, sums, mask, recs, left, right)
        ev = _Evaluation(recs, hist, left, right, categories)
        return [Candidate(n, d, g, (ev, i))
                for i, (n, d, g) in enumerate(zip(np.asarray(nids).tolist(), depths.tolist(),
                                                  recs["gain"].tolist()))]

    def _categorical(self, cuts, hist, sums, mask, recs, left, right):
        """The best categorical splits merged into the numeric ones (recs, in place): the larger
        loss change wins, a tie the lower feature. Returns the children's sums and each node's
        categories going right (None for a numeric split)."""
        xp = self.backend.xp
        loss, feature, default_left, c_left, c_right, bits = self.backend.evaluate_categorical(
            cuts, hist, sums, self.scale, self.split_params, self.params.max_cat_to_onehot,
            self.params.max_cat_threshold, mask)
        found = feature >= 0
        wins = found & ((loss > recs["gain"]) | ((loss == recs["gain"]) & ((recs["feature"] < 0) |
                                                                        (feature < recs["feature"]))))
        categories = [None] * len(recs)
        if not wins.any():
            return left, right, categories
        left_d = to_host(c_left.astype(xp.float64)) * self.scale
        right_d = to_host(c_right.astype(xp.float64)) * self.scale
        recs["feature"][wins] = feature[wins]
        recs["gain"][wins] = loss[wins]
        recs["default_left"][wins] = default_left[wins]
        recs["bin"][wins] = -1
        recs["threshold"][wins] = 0.0
        recs["categorical"][wins] = 1
        recs["left_grad"][wins], recs["left_hess"][wins] = left_d[wins, 0], left_d[wins, 1]
        recs["right_grad"][wins], recs["right_hess"][wins] = right_d[wins, 0], right_d[wins, 1]
        w_x = xp.asarray(wins)[:, None]
        for i in np.flatnonzero(wins).tolist():
            categories[i] = categories_of(bits[i])
        return xp.where(w_x, c_left, left), xp.where(w_x, c_right, right), categories

    def _bounds_of(self, local, rows) -> np.ndarray:
        out = np.empty((len(local), 2), dtype=np.float32)
        for c, r in enumerate(rows):
            if r.size:
                out[r] = self.bounds[c].of(local[r])
        return out

    def expand(self, batch: list[Candidate], recs):
        """Add the nodes' children to their trees and move the nodes' rows to the children
        (the backend's launches); recs: the batch's split records. Returns the children's
        partition ids and a closure that records the splits in the trees, feature sets and
        bounds, which the caller runs once the device has its next work queued."""
        mark(SPLIT)
        nids = np.array([c.nid for c in batch], dtype=np.int64)
        trees, local, rows_of = self._by_tree(nids)
        sp, eta, k = self.split_params, self.eta, self.k
        # The children's weights, within the split node's monotone bounds.
        bounds = None if self.bounds is None else tuple(self._bounds_of(local, rows_of).T)
        lw = calc_weight(np, recs["left_grad"], recs["left_hess"], sp, bounds)
        rw = calc_weight(np, recs["right_grad"], recs["right_hess"], sp, bounds)
        llocal = np.empty(len(batch), np.int64)
        rlocal = np.empty(len(batch), np.int64)
        depths = np.array([c.depth + 1 for c in batch])
        for c, r in enumerate(rows_of):
            if r.size:
                llocal[r], rlocal[r] = self.builders[c].add_children(
                    local[r], depths[r], lw[r], lw[r] * eta, recs["left_hess"][r], rw[r], rw[r] * eta,
                    recs["right_hess"][r])
        lids = (llocal * k + trees).astype(np.int32)
        rids = (rlocal * k + trees).astype(np.int32)
        cats = [c.source[0].categories[c.source[1]] if c.source[0].categories is not None else None
                for c in batch]
        cats = cats if any(c is not None for c in cats) else None
        split = (nids.astype(np.int32), recs["feature"], recs["bin"], recs["default_left"], lids, rids)
        self._apply_splits(*split, *(() if cats is None else (cats,)))

        def record():
            for c, r in enumerate(rows_of):
                if r.size:
                    self.builders[c].split(local[r], recs["feature"][r], recs["bin"][r], recs["threshold"][r],
                                           recs["default_left"][r], recs["gain"][r], llocal[r], rlocal[r],
                                           None if cats is None else [cats[j] for j in r.tolist()])
                    self.features[c].split(local[r], recs["feature"][r], llocal[r], rlocal[r])
                    if self.bounds is not None:
                        self.bounds[c].split(local[r], recs["feature"][r], lw[r], rw[r], llocal[r], rlocal[r])

        return lids, rids, record

    def children(self, parents: list[Candidate], recs, lids, rids):
        """Histograms and gradient sums of the expanded nodes' children (the smaller one built,
        the other by subtraction), left and right child of each parent in turn; recs: the
        parents' split records."""
        # Build the child with the smaller hessian sum; its sibling comes by subtraction.
        build_right = recs["right_hess"] < recs["left_hess"]
        build = np.where(build_right, rids, lids).tolist()
        mark(HISTOGRAM)
        built = self._histograms(build)
        mark(ALLREDUCE)
        built = self.comm.allreduce(built)
        mark(HISTOGRAM)
        ev, rows = _sources(self.backend, [c.source for c in parents])
        return self.backend.children_histograms(ev.hist, rows, built, build_right, ev.left, ev.right)


def grow_forest(backend, ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices=(0,),
                interaction=None, monotone=None) -> tuple[list[Tree], object]:
    """Grow K = len(tree_indices) trees together, tree c from the gradient pairs
    gpair[c * n:(c + 1) * n] (n = ell.n_rows); returns the trees and the leaf of every
    virtual row: tree c's leaf of row r is positions[c * n + r] // K.

    root_from_bins: every worker's data is dense without missing values (see _root_sums);
    the caller decides it once, for all workers alike.
    tree_indices: each tree's index in the model, which keys its column samples.
    interaction: the interaction constraint sets (feature_sets.interaction_sets), or None.
    monotone: the (n_features,) monotone constraints (monotone.monotone_vector), or None.
    Each tree has its own driver, so it grows exactly as it would alone; the trees only
    share the backend calls of each step.
    """
    growth = _Growth(backend, ell, gpair, scale, params, comm, list(tree_indices), interaction, monotone)
    k = growth.k
    drivers = [Driver(params.grow_policy, params.max_depth, params.max_leaves, growth.split_params)
               for _ in range(k)]

    def push(candidates):
        for c in candidates:
            drivers[c.nid % k].push([c])

    def pop():
        return [c for d in drivers for c in d.pop()]

    push(growth.root(root_from_bins))
    batch = pop()
    while batch:
        recs = records(batch)
        lids, rids, record = growth.expand(batch, recs)
        grow = [j for j, c in enumerate(batch) if drivers[c.nid % k].child_valid(c)]
        if grow:
            parents = [batch[j] for j in grow]
            hist, sums = growth.children(parents, recs[grow], lids[grow], rids[grow])
            # The host's bookkeeping while the device builds the histograms.
            record()
            nids = np.stack([lids[grow], rids[grow]], axis=1).ravel()
            push(growth.evaluate(hist, sums, nids, np.repeat([c.depth + 1 for c in parents], 2)))
        else:
            record()
        batch = pop()
    mark(OTHER)
    return [b.build() for b in growth.builders], growth.positions()


def grow_tree(backend, ell, gpair, scale, params, comm, root_from_bins: bool, tree_index: int = 0,
              interaction=None, monotone=None) -> tuple[Tree, object]:
    """Grow one tree (grow_forest of one); returns it and the leaf node id of every row (a backend array)."""
    trees, positions = grow_forest(backend, ell, gpair, scale, params, comm, root_from_bins, (tree_index,),
                                   interaction, monotone)
    return trees[0], positions


def _concat_rows(backend, parts):
    """Row blocks of gradient pairs (arrays, or the CUDA backend's FixedGradients) as one."""
    first = parts[0]
    if hasattr(first, "inv_scale_d"):  # FixedGradients: the values joined, the scale shared
        return type(first)(backend.xp.concatenate([p.values for p in parts]), first.inv_scale, first.inv_scale_d,
                           first.scale_d, first.abs_sum)
    return backend.xp.concatenate(parts)


def _sources(backend, sources):
    """(evaluation, rows) holding the (evaluation, i) sources: their own evaluation when they
    share one (a depthwise level), else one stacked from theirs."""
    evs = {id(ev) for ev, _ in sources}
    if len(evs) == 1:
        return sources[0][0], np.array([i for _, i in sources], dtype=np.int64)
    xp = backend.xp
    stacked = _Evaluation(None, *(xp.stack([getattr(ev, name)[i] for ev, i in sources])
                                  for name in ("hist", "left", "right")))
    return stacked, np.arange(len(sources), dtype=np.int64)


def _root_sums(backend, ell, gpair, root_hist, comm, from_bins: bool, k: int):
    """(k, 2) gradient sums of the k trees' roots, summed as XGBoost sums them.

    With dense data and no missing values every row lands in exactly one bin of
    feature 0, so the sum of those bins (already summed across workers) is the
    total: XGBoost's choice there. Otherwise the rows are summed and the sums
    reduced across workers.
    """
    xp = backend.xp
    if from_bins:
        lo, hi = 0, int(np.diff(to_host(ell.cuts.ptrs[:2]))[0])
        if root_hist.dtype.kind == "i":  # exact integers: any order of adds gives the same sum
            return root_hist[:, lo:hi].sum(axis=1)
        return xp.cumsum(root_hist[:, lo:hi], axis=1)[:, -1]
    n = ell.n_rows
    sums = xp.stack([backend.sum_gradients(gpair[c * n : (c + 1) * n]) for c in range(k)])
    return comm.allreduce(sums)
