"""LambdaRank's pairs on a GPU as one kernel a round (kernels/ranking.cu): ranking.LambdaRank._gradient calls
this for CuPy arrays in place of its chunk loop (the numpy loop is the oracle).

A thread a pair: the pairs are never materialised, so the memory is O(rows) (the sampled
pairs of the mean method, num_pair a row, are given as arrays) and a round makes one launch
with no host wait (the topk kernel reads its pair count from ``ends`` on the device).
"""

from __future__ import annotations

import cupy
import numpy as np

from . import device_arrays as da
from .backend import kernels
from .fmath import device_table

# kernels/ranking.cu's RankObjective.
OBJECTIVES = {"rank:pairwise": 0, "rank:ndcg": 1, "rank:map": 2}

_KERNELS = kernels.declare("ranking.cu", (
    "lambda_pairs<0, true>", "lambda_pairs<0, false>", "lambda_pairs<1, true>", "lambda_pairs<1, false>",
    "lambda_pairs<2, true>", "lambda_pairs<2, false>"))

# Blocks per SM of a launch whose pair count the host does not know (topk): a grid-stride loop.
_BLOCKS_PER_SM = 32


def _fn(name: str):
    return kernels.function("ranking.cu", _KERNELS, name)


def _c(a, dtype):
    return cupy.ascontiguousarray(a, dtype=dtype)


def lambda_pairs(objective: str, *, ys, ss, group, rank, varied, score_normalization: bool, rnd: dict,
                 grad, hess, sum_lambda, topk=None, sampled=None) -> None:
    """Add every pair's lambda and hessian into grad / hess (float64, per ranked position) and -2 lambda
    into sum_lambda (float64, per query), as LambdaRank._gradient's loop does. The pairs: topk =
    (partners, ends) of ranking's topk enumeration, or sampled = (first, second) arrays of positions.
    rnd holds the objective's arrays (NDCG: gain, discount, inv_idcg; MAP: n_rel, acc, n_total)."""
    n_rows = int(ys.shape[0])
    if n_rows == 0:
        return
    null = da.NULL
    f64 = cupy.float64
    kind = OBJECTIVES[objective]
    ndcg = [_c(rnd[k], f64) for k in ("gain", "discount", "inv_idcg")] if kind == 1 else [null] * 3
    mapped = [_c(rnd[k], f64) for k in ("n_rel", "acc", "n_total")] if kind == 2 else [null] * 3
    if topk is not None:
        partners, ends = (_c(a, cupy.int64) for a in topk)
        pairs = (ends, partners, null, null, np.int64(0))
        # At most num_pair partners' worth a row; the grid strides over the rest.
        blocks = max(1, min(-(-n_rows // kernels.THREADS) * 4, _BLOCKS_PER_SM * kernels.sm_count()))
        name = f"lambda_pairs<{kind}, true>"
    else:
        first, second = (_c(a, cupy.int64) for a in sampled)
        n_pairs = int(first.shape[0])
        if n_pairs == 0:
            return
        pairs = (null, null, first, second, np.int64(n_pairs))
        blocks = min(-(-n_pairs // kernels.THREADS), 2**31 - 1)
        name = f"lambda_pairs<{kind}, false>"
    args = (*pairs, np.int64(n_rows), _c(ys, cupy.float32), _c(ss, cupy.float32), _c(group, cupy.int64),
            _c(rank, cupy.int64), _c(varied, cupy.bool_), np.int32(bool(score_normalization)), *ndcg, *mapped,
            device_table(cupy), grad, hess, sum_lambda)
    _fn(name)((blocks,), (kernels.THREADS,), args)
