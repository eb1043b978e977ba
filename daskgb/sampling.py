"""Which rows a tree trains on: XGBoost's subsample, uniform or gradient-based.

uniform: each row is kept with probability `subsample`, its gradients unchanged
    (XGBoost's uniform sampler; unsampled rows get zero gradients, as on XGBoost's GPU).
gradient_based: Minimal Variance Sampling, as in the 2020 out-of-core GPU paper and
    XGBoost's GradientBasedSampler. Row i has the regularised absolute gradient
    r_i = sqrt(g_i^2 + lambda * h_i^2), with MVS's lambda 0.1 as XGBoost sets it (not
    reg_lambda); a threshold mu is chosen so that
    sum_i min(1, r_i / mu) = subsample * N over the N rows of all workers, and row i is kept
    with probability p_i = min(1, r_i / mu) with its g and h divided by p_i, so that every
    histogram sum keeps its expected value. The expected sample is subsample * N rows, the
    rows with the largest gradients always among them.

A row's draw is a hash (splitmix64) of the seed, the tree and the row's global index, so
it is the same on any device and any partitioning. So is the threshold: it is found from
exact integer sums over all workers (counts, and the r_i in int64 fixed point), which do
not depend on how the rows are split or in which order partial sums arrive.
"""

from __future__ import annotations

import math

import numpy as np

from .arrays import to_host

SAMPLING_METHODS = ("uniform", "gradient_based")

# MVS's regulariser of the hessian in r_i (XGBoost's CombineGradientPair::kLambda).
MVS_LAMBDA = 0.1
# Candidate thresholds tried per collective while narrowing the bracket around mu.
_CANDIDATES = 64
_MAX_STEPS = 64


def row_uniforms(xp, n_rows: int, first_row: int, seed: int, tree: int):
    """float64 uniforms in [0, 1), one per row: a splitmix64 hash of (seed, tree, global row index)."""
    key = _mvs_key(seed, tree)
    z = xp.arange(first_row, first_row + n_rows, dtype=xp.uint64) + xp.uint64(key)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
    z = z ^ (z >> xp.uint64(31))
    return (z >> xp.uint64(11)).astype(xp.float64) * (1.0 / (1 << 53))


def row_sample(xp, n_rows: int, first_row: int, seed: int, tree: int, rate: float):
    """float32 0/1 mask of the rows a tree trains on (XGBoost's uniform subsample: each row
    kept with probability `rate`)."""
    return (row_uniforms(xp, n_rows, first_row, seed, tree) < rate).astype(xp.float32)


def regularised_abs_gradient(xp, gpair, mvs_lambda: float = MVS_LAMBDA):
    """(n,) float64 sqrt(g^2 + lambda * h^2) of (n, 2) gradient pairs."""
    g = gpair[:, 0].astype(xp.float64)
    h = gpair[:, 1].astype(xp.float64)
    return xp.sqrt(g * g + float(np.float32(mvs_lambda)) * (h * h))


class _SortedRows:
    """The reference's view of this worker's r: the positive r_i sorted, with prefix sums of
    their fixed-point values, so a candidate's counts and sums are two binary searches."""

    def __init__(self, xp, r):
        self.xp = xp
        r = xp.asarray(r, dtype=xp.float64)
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


class _KernelRows:
    """The CUDA backend's view of this worker's r: computed from the gradient pairs inside
    each kernel (cupy_backend.mvs_*), with no per-row array and no sort."""

    def __init__(self, gpair, mvs_lambda: float):
        from .backend import cupy_backend

        # Contiguous once (a multiclass column is a strided view), not at every bracket step.
        self._cb, self._lambda = cupy_backend, mvs_lambda
        self.gpair = cupy_backend.contiguous_pairs(gpair)

    def extremes(self) -> tuple[int, float, float]:
        return self._cb.mvs_extremes(self.gpair, self._lambda)

    def stats(self, cands: np.ndarray, scale: float) -> np.ndarray:
        return self._cb.mvs_candidate_stats(self.gpair, self._lambda, np.asarray(cands, dtype=np.float64), scale)


def mvs_threshold(xp, r, target: float, comm) -> float:
    """mu > 0 with sum over every worker's rows of min(1, r_i / mu) = target; 0.0 when every
    row with r_i > 0 can be kept (target >= their number). Every worker passes its own r
    (float64, r_i >= 0) and gets the same mu.

    S(mu) = #{r_i >= mu} + sum(r_i < mu) / mu falls continuously from #{r_i > 0} (at the
    smallest positive r) toward 0. Each step evaluates S at _CANDIDATES thresholds spaced
    geometrically over the bracket (one collective of exact integer counts and fixed-point
    sums) and keeps the pair around target; once no r_i lies strictly inside the bracket,
    S is C + B / mu there and mu = B / (target - C) exactly.
    """
    return _threshold(_SortedRows(xp, r), target, comm)


def _threshold(rows, target: float, comm) -> float:
    """mvs_threshold over a worker's rows seen through _SortedRows or _KernelRows (the same
    exact integers either way, so the same mu)."""
    n_local, lo_local, hi_local = rows.extremes()
    n_pos = int(comm.allreduce(np.array([n_local], dtype=np.int64), "sum")[0])
    if n_pos == 0 or target >= n_pos:
        return 0.0
    lo = float(comm.allreduce(np.array([lo_local]), "min")[0])
    hi = float(comm.allreduce(np.array([hi_local]), "max")[0])
    # Fixed point for exact sums: every partial sum of r / scale stays below 2**62.
    scale = math.ldexp(1.0, math.frexp(hi * n_pos)[1] - 62)

    def evaluate(cands: np.ndarray):
        """For each candidate c: #{r < c}, #{r <= c}, fixed sum of r < c, fixed sum of r <= c (all workers)."""
        out = comm.allreduce(rows.stats(cands, scale).ravel(), "sum").reshape(4, -1)
        return out[0], out[1], out[2], out[3]

    # From the largest r on, every row is below mu (or at it): S(mu) = total / mu.
    total = int(evaluate(np.array([hi]))[3][0])
    if total * scale / hi > target:
        return total * scale / target
    for _ in range(_MAX_STEPS):
        if not hi > lo:
            return hi
        cands = np.geomspace(lo, hi, _CANDIDATES)
        cands[0], cands[-1] = lo, hi
        lt, le, s_lt, s_le = evaluate(cands)
        S = (n_pos - lt) + s_lt * scale / cands
        # S falls with the candidate: the last candidate with S >= target and the one after it.
        j = min(max(int(np.searchsorted(-S, -target, side="right")) - 1, 0), cands.size - 2)
        if S[j] == target:
            return float(cands[j])
        a, b = float(cands[j]), float(cands[j + 1])
        inside = int(lt[j + 1] - le[j])  # rows with a < r < b
        if inside == 0:
            C, B = n_pos - int(lt[j + 1]), int(s_le[j])
            mu = B * scale / (target - C) if target > C else b
            return float(min(max(mu, a), b))
        if b <= np.nextafter(a, np.inf):
            return b
        lo, hi = a, b
    return hi


def _mvs_key(seed: int, tree: int) -> int:
    """row_uniforms' per-tree key."""
    return (int(seed) * 0x9E3779B97F4A7C15 + (int(tree) + 1) * 0xD1B54A32D192ED03) & ((1 << 64) - 1)


def mvs_weights(xp, gpair, rate: float, n_rows_total: int, first_row: int, seed: int, tree: int, comm,
                mvs_lambda: float = MVS_LAMBDA):
    """(n,) float32 multipliers of a tree's gradient pairs under gradient-based sampling:
    1 / p_i for a kept row, 0 for a dropped one (see the module docstring). n_rows_total:
    the rows of all workers; first_row: this worker's first row among them. The reference
    mvs_sample's CUDA path equals."""
    r = regularised_abs_gradient(xp, gpair, mvs_lambda)
    mu = mvs_threshold(xp, r, float(rate) * n_rows_total, comm)
    p = (r > 0).astype(xp.float64) if mu == 0.0 else xp.minimum(1.0, r / mu)
    u = row_uniforms(xp, r.size, first_row, seed, tree)
    keep = u < p
    return xp.where(keep, 1.0 / xp.where(keep, p, 1.0), 0.0).astype(xp.float32)


def mvs_sample(xp, gpair, rate: float, n_rows_total: int, first_row: int, seed: int, tree: int, comm,
               mvs_lambda: float = MVS_LAMBDA, inplace: bool = False):
    """A tree's (n, 2) float32 gradient pairs under gradient-based sampling: each kept row's
    pair divided by its p_i, each dropped row's zero (the pairs times mvs_weights). On a GPU
    the threshold's counts and the sample come from kernels that compute r_i as they read
    the pairs (cupy_backend.mvs_*): no per-row temporaries beyond the result (none with
    inplace, which may overwrite gpair), the same bits."""
    if xp is np:
        return gpair * mvs_weights(xp, gpair, rate, n_rows_total, first_row, seed, tree, comm, mvs_lambda)[:, None]
    from .backend import cupy_backend

    lam = float(np.float32(mvs_lambda))  # as regularised_abs_gradient rounds it
    rows = _KernelRows(gpair, lam)
    mu = _threshold(rows, float(rate) * n_rows_total, comm)
    return cupy_backend.mvs_sample(rows.gpair, lam, mu, _mvs_key(seed, tree), first_row, inplace=inplace)
