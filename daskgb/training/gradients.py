"""A round's gradient pairs: the objective's (or the user's obj's), one column per output group, sampled for each tree."""

from __future__ import annotations

import numpy as np

from ..sampling import mvs_sample, row_sample


def round_gradients(backend, objective, obj, margin, dtrain, it: int, n_groups: int, p, n_rows_total: int,
                    row_offset, comm, out=None) -> "RoundGradients":
    """Round it's gradient pairs, one (n_rows, 2) array per output group, to be sampled for each
    of the round's trees as p says (RoundGradients). n_rows_total: the rows of all workers;
    row_offset: this worker's first row among them, or its rows' runs of global indices (a
    row's sampling draws are keyed by its global index, so they do not depend on the partitioning).
    out: an (n_rows, 2) device array the pairs of a one-output built-in objective may be
    written into (training's CUDA graph reads them there); other pairs are arrays of their own."""
    xp = backend.xp
    if obj is None and out is not None and n_groups == 1 and objective.writes_gradients_into:
        gpair_all = objective.gradient_of(xp, margin, dtrain, it, out=out)
    elif obj is None:
        gpair_all = objective.gradient_of(xp, margin, dtrain, it)
    else:
        gpair_all = custom_gradient(xp, obj, margin, dtrain)
    groups = [gpair_all] if n_groups == 1 else [gpair_all[:, group] for group in range(n_groups)]
    return RoundGradients(backend, groups, it, p, n_rows_total, dtrain.n_rows, row_offset, comm)


class RoundGradients:
    """A round's gradient pairs as its trees take them, layer by layer: layer j holds the j-th
    of each output group's num_parallel_tree trees (one layer without parallel trees), and
    next_layer() hands over its pairs, one (n_rows, 2) array per group, each sampled for its
    tree. The groups' trees of a layer grow together, sharing each step's backend calls
    (growth/host.py); the layers one after another, so that a round of many parallel trees
    holds one layer's sampled pairs at a time. The round's pairs are let go with the last layer."""

    def __init__(self, backend, groups: list, it: int, p, n_rows_total: int, n_rows: int, row_offset, comm):
        self.backend, self._groups, self.it, self.p = backend, groups, it, p
        self.n_rows_total, self.n_rows, self.row_offset, self.comm = n_rows_total, n_rows, row_offset, comm
        self.n_groups, self.n_layers, self._next = len(groups), p.num_parallel_tree, 0

    def __len__(self) -> int:
        return self.n_layers

    def next_layer(self) -> list:
        """The next layer's pairs, one array per output group."""
        j, groups = self._next, self._groups
        self._next += 1
        if self._next == self.n_layers:
            self._groups = None  # the caller's arrays are the last ones made from them
        return [self._sampled(gpair, group, j) for group, gpair in enumerate(groups)]

    def _sampled(self, gpair, group: int, layer: int):
        """Tree (group, layer)'s pairs: keyed by the tree's place among all rounds' trees, so
        that without parallel trees the key is it * K + group."""
        p, xp = self.p, self.backend.xp
        tree = (self.it * self.n_groups + group) * self.n_layers + layer
        if p.subsample < 1.0 and p.sampling_method == "gradient_based":
            # One tree a round: the pairs are this round's own, sampled where they lie (device memory).
            return mvs_sample(self.backend, gpair, p.subsample, self.n_rows_total, self.row_offset, p.seed, tree,
                              self.comm, inplace=self.n_groups == 1 and self.n_layers == 1)
        if p.subsample < 1.0:
            return gpair * row_sample(xp, self.n_rows, self.row_offset, p.seed, tree, p.subsample)[:, None]
        return gpair


def stacked_groups(xp, gpairs: list):
    """The output groups' (n, 2) pairs as one (K n, 2) array, group after group (a forest's
    virtual rows): the buffer they lie in where they lie back to back in one (the compiled CPU
    softmax writes them so), else a copy."""
    if len(gpairs) == 1:
        return gpairs[0]
    base = gpairs[0].base
    if (xp is np and isinstance(base, np.ndarray) and base.flags.c_contiguous
            and base.shape == (len(gpairs),) + gpairs[0].shape
            and all(g.flags.c_contiguous and g.__array_interface__["data"][0] == base[k].__array_interface__["data"][0]
                    for k, g in enumerate(gpairs))):
        return base.reshape(-1, gpairs[0].shape[1])
    return xp.concatenate(gpairs)


def custom_gradient(xp, obj, margin, dtrain):
    """(n, 2) float32 gradient pairs from a user's objective, checked; (n, K, 2) for K outputs."""
    grad, hess = obj(margin.copy(), dtrain)
    n = margin.shape[0]
    out = xp.empty(margin.shape + (2,), dtype=xp.float32)
    for j, (v, what) in enumerate(((grad, "gradient"), (hess, "hessian"))):
        v = xp.asarray(v, dtype=xp.float32)
        if v.size != margin.size:
            raise ValueError(f"the custom objective returned {v.size} {what} values for {n} rows"
                             + (f" x {margin.shape[1]} outputs" if margin.ndim == 2 else ""))
        out[..., j] = v.reshape(margin.shape)
    if not bool(xp.isfinite(out).all()):
        raise ValueError("the custom objective returned NaN or infinite gradients or hessians")
    return out
