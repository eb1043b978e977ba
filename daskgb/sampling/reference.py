"""Gradient-based sampling in array operations: rows' regularised gradients, sorted; the sample (cuda.py's oracle)."""

from __future__ import annotations

import math

import numpy as np

from ..arrays import to_host

# MVS's regulariser of the hessian in r_i (XGBoost's CombineGradientPair::kLambda).
MVS_LAMBDA = 0.1


def mvs_key(seed: int, tree: int) -> int:
    """row_uniforms' per-tree key."""
    return (int(seed) * 0x9E3779B97F4A7C15 + (int(tree) + 1) * 0xD1B54A32D192ED03) & ((1 << 64) - 1)


def row_runs(n_rows: int, first_row) -> list[tuple[int, int]]:
    """A worker's rows as runs of consecutive global indices, [(first, count), ...] in local
    order: first_row is the index of its first row (one run), or its runs already (a Dask
    worker whose partitions are not neighbours in the collection)."""
    if isinstance(first_row, (int, np.integer)):
        return [(int(first_row), int(n_rows))]
    runs = [(int(f), int(c)) for f, c in first_row]
    if sum(c for _, c in runs) != n_rows:
        raise ValueError(f"row runs cover {sum(c for _, c in runs)} rows, not the {n_rows} given")
    return runs


def global_rows(xp, n_rows: int, first_row):
    """uint64 global index of each of a worker's rows (first_row as row_runs takes it)."""
    runs = row_runs(n_rows, first_row)
    if len(runs) == 1:
        return xp.arange(runs[0][0], runs[0][0] + n_rows, dtype=xp.uint64)
    return xp.concatenate([xp.arange(f, f + c, dtype=xp.uint64) for f, c in runs])


def keyed_uniforms(xp, n_rows: int, first_row, key: int):
    """float64 uniforms in [0, 1), one per row: a splitmix64 hash of (key, global row index).
    first_row: the global index of the first row, or the rows' runs (row_runs)."""
    z = global_rows(xp, n_rows, first_row) + xp.uint64(key)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
    z = z ^ (z >> xp.uint64(31))
    return (z >> xp.uint64(11)).astype(xp.float64) * (1.0 / (1 << 53))


def row_uniforms(xp, n_rows: int, first_row, seed: int, tree: int):
    """float64 uniforms in [0, 1), one per row: a splitmix64 hash of (seed, tree, global row index)."""
    return keyed_uniforms(xp, n_rows, first_row, mvs_key(seed, tree))


def regularised_abs_gradient(xp, gpair, mvs_lambda: float = MVS_LAMBDA):
    """(n,) float64 sqrt(g^2 + lambda * h^2) of (n, 2) gradient pairs."""
    g = gpair[:, 0].astype(xp.float64)
    h = gpair[:, 1].astype(xp.float64)
    return xp.sqrt(g * g + float(np.float32(mvs_lambda)) * (h * h))


class SortedRows:
    """The reference's view of this worker's r: the positive r_i sorted, with prefix sums of
    their fixed-point values, so a candidate's counts and sums are two binary searches."""

    def __init__(self, xp, r, gpair=None):
        self.xp, self.gpair = xp, gpair
        self.r = r = xp.asarray(r, dtype=xp.float64)
        self.pos = xp.sort(r[r > 0])
        self._prefix, self._scale = None, None

    def extremes(self) -> tuple[int, float, float]:
        n = int(self.pos.size)
        if n == 0:
            return 0, math.inf, 0.0
        return n, float(to_host(self.pos[0])), float(to_host(self.pos[-1]))

    def stats(self, cands: np.ndarray, scale: float) -> np.ndarray:
        """(4, m) int64: #{r < c}, #{r <= c}, fixed sums of r < c and of r <= c."""
        xp = self.xp
        if self._scale != scale:
            self._prefix = xp.concatenate([xp.zeros(1, dtype=xp.int64),
                                           xp.cumsum(xp.trunc(self.pos / scale).astype(xp.int64))])
            self._scale = scale
        c = xp.asarray(cands)
        below = xp.searchsorted(self.pos, c, side="left")
        upto = xp.searchsorted(self.pos, c, side="right")
        return to_host(xp.concatenate([below, upto, self._prefix[below], self._prefix[upto]]).astype(xp.int64)
                       ).reshape(4, -1)


def weights(xp, r, mu: float, key: int, first_row):
    """(n,) float32 multipliers of the pairs: 1 / p_i for a kept row, 0 for a dropped one, with
    p_i = min(1, r_i / mu) (every row with r_i > 0 where mu is 0)."""
    p = (r > 0).astype(xp.float64) if mu == 0.0 else xp.minimum(1.0, r / mu)
    u = keyed_uniforms(xp, r.size, first_row, key)
    keep = u < p
    return xp.where(keep, 1.0 / xp.where(keep, p, 1.0), 0.0).astype(xp.float32)


def mvs_rows(gpair, mvs_lambda: float) -> SortedRows:
    """The backend's view of a worker's rows for the threshold search (numpy_backend.mvs_rows)."""
    return SortedRows(np, regularised_abs_gradient(np, gpair, mvs_lambda), gpair)


def mvs_apply(rows: SortedRows, mvs_lambda: float, mu: float, key: int, first_row, inplace: bool = False):
    """The sampled pairs: rows.gpair times weights (numpy_backend.mvs_apply; inplace is moot)."""
    return rows.gpair * weights(rows.xp, rows.r, mu, key, first_row)[:, None]
