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

A row's draw is a hash (splitmix64) of the seed, the tree and the row's global index (its
place in the collection: on Dask, its partition's first row plus its place in the partition),
so it is the same on any device, any partitioning and any placement of the partitions. So is the threshold: it is found from
exact integer sums over all workers (counts, and the r_i in int64 fixed point), which do
not depend on how the rows are split or in which order partial sums arrive.

The threshold search is here, written once; the per-row work it needs (the rows' r_i,
counts and sums at candidate thresholds, the sample) is the backend's: reference.py in
numpy (the oracle), cuda.py's kernels on a GPU, which compute r_i as they read the pairs.
"""

from __future__ import annotations

import math

import numpy as np

from ..layouts import MVS_CANDIDATES
from .reference import MVS_LAMBDA, SortedRows, mvs_key, regularised_abs_gradient, row_uniforms

SAMPLING_METHODS = ("uniform", "gradient_based")

# Candidate thresholds tried per collective while narrowing the bracket around mu (the kernels' kMaxCandidates).
_CANDIDATES = MVS_CANDIDATES
_MAX_STEPS = 64


def row_sample(xp, n_rows: int, first_row, seed: int, tree: int, rate: float):
    """float32 0/1 mask of the rows a tree trains on (XGBoost's uniform subsample: each row
    kept with probability `rate`). first_row: the global index of this worker's first row, or
    its rows' runs (reference.row_runs)."""
    return (row_uniforms(xp, n_rows, first_row, seed, tree) < rate).astype(xp.float32)


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
    return _threshold(SortedRows(xp, r), target, comm)


def _threshold(rows, target: float, comm) -> float:
    """mvs_threshold over a worker's rows seen through a backend's view of them (reference.py's
    SortedRows, cuda.py's KernelRows: the same exact integers either way, so the same mu)."""
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


def mvs_weights(xp, gpair, rate: float, n_rows_total: int, first_row, seed: int, tree: int, comm,
                mvs_lambda: float = MVS_LAMBDA):
    """(n,) float32 multipliers of a tree's gradient pairs under gradient-based sampling:
    1 / p_i for a kept row, 0 for a dropped one (see the module docstring). n_rows_total:
    the rows of all workers; first_row: this worker's first row among them, or its rows' runs
    (reference.row_runs). The reference
    every backend's mvs_sample equals."""
    r = regularised_abs_gradient(xp, gpair, mvs_lambda)
    mu = mvs_threshold(xp, r, float(rate) * n_rows_total, comm)
    from .reference import weights

    return weights(xp, r, mu, mvs_key(seed, tree), first_row)


def mvs_sample(backend, gpair, rate: float, n_rows_total: int, first_row, seed: int, tree: int, comm,
               mvs_lambda: float = MVS_LAMBDA, inplace: bool = False):
    """A tree's (n, 2) float32 gradient pairs under gradient-based sampling on backend's
    device: each kept row's pair divided by its p_i, each dropped row's zero (the pairs times
    mvs_weights, bit for bit). inplace: the result may overwrite gpair (the CUDA backend does,
    where gpair is a contiguous float32 array: no per-row temporaries beyond the result)."""
    lam = float(np.float32(mvs_lambda))  # as regularised_abs_gradient rounds it
    rows = backend.mvs_rows(gpair, lam)
    mu = _threshold(rows, float(rate) * n_rows_total, comm)
    return backend.mvs_apply(rows, lam, mu, mvs_key(seed, tree), first_row, inplace=inplace)
