"""Quantiles of grouped rows over all workers, exactly: the leaf refresh of reg:absoluteerror and
reg:quantileerror (XGBoost's UpdateTreeLeaf) and their intercepts.

After a tree is grown, XGBoost replaces each leaf's value by the alpha-quantile of the
residuals ``y - margin`` of the rows in the leaf (the margin before this tree), times the
learning rate. Its two quantile definitions (src/common/stats.h), matched here to the bit:

- unweighted, ``Quantile``: with n values sorted v[0..n-1], v[0] if alpha <= 1/(n+1), v[n-1] if
  alpha >= n/(n+1), else x = alpha (n+1), k = floor(x) - 1, d = x - 1 - k and
  v[k] + d (v[k+1] - v[k]) (the difference in float, the rest in double, the result a float);
- weighted, ``WeightedQuantile``: no interpolation; the first sorted value whose cumulative weight
  reaches float(total * alpha) (the lower bound on the weight CDF), the largest value if none does.

On several workers XGBoost averages the workers' own quantiles, an approximation. Here the
quantile is the one of all workers' rows, so a model trained on any partitioning equals the
model trained in one process. Rows never move: each worker sorts its rows once by (group,
value) and the workers agree on every group's answer by a search over the order-preserving
integer image of float32 values (:func:`order_keys`). Each step tests 15 pivots per query at once
with one allreduce of their cumulative weights (4 bits per step, so at most 9 steps for all
groups together); the answer is always a value that some row holds.

Weights are summed in float64. Those sums are exact, so the same on any partitioning, when the
weights are multiples of a common power of two with a total below 2**53 times it (true of float32
weights within a range of 2**29 of each other, with fewer than 2**24 rows, and of integer
weights); XGBoost accumulates the weight CDF in float, so where its sums round, it may take the
neighbouring value.

Every function is written once for numpy and cupy arrays (``xp``).
"""

from __future__ import annotations

import numpy as np

from .arrays import to_host
from .collective import LocalCommunicator

# Pivots tested per query and search step.
PIVOTS = 15


def order_keys(xp, values):
    """uint32 keys of float32 values, ordered as the values (-0.0 counts as +0.0)."""
    # Adding +0.0 turns -0.0 into +0.0 and leaves every other value as it is.
    bits = (values.astype(xp.float32) + xp.float32(0.0)).view(xp.uint32)
    negative = (bits >> xp.uint32(31)).astype(bool)
    return xp.where(negative, ~bits, bits | xp.uint32(0x80000000))


def keys_to_values(xp, keys):
    """The float32 values of order_keys."""
    keys = keys.astype(xp.uint32)
    positive = (keys >> xp.uint32(31)).astype(bool)
    return xp.where(positive, keys & xp.uint32(0x7FFFFFFF), ~keys).view(xp.float32)


class GroupedRows:
    """This worker's rows sorted by (group, value), with what a search step needs.

    groups: (n,) group id of each row in [0, n_groups); values: (n,) float32; weight: (n,) or
    None (every row counts 1).
    """

    def __init__(self, xp, values, groups, n_groups: int, weight=None, comm=None):
        self.xp = xp
        self.comm = comm or LocalCommunicator()
        self.n_groups = int(n_groups)
        self.weighted = weight is not None
        groups = groups.astype(xp.uint64)
        composite = (groups << xp.uint64(32)) | order_keys(xp, values).astype(xp.uint64)
        order = xp.argsort(composite)
        self.composite = composite[order]
        # cum[i]: the weight of the first i sorted rows (float64; counts are exact in it too).
        w = xp.ones(values.shape[0], dtype=xp.float64) if weight is None else weight.astype(xp.float64)[order]
        self.cum = xp.concatenate([xp.zeros(1, dtype=xp.float64), xp.cumsum(w)])
        bounds = xp.arange(self.n_groups + 1, dtype=xp.uint64) << xp.uint64(32)
        self.start = xp.searchsorted(self.composite, bounds, side="left")  # (n_groups + 1,)
        begin, end = self.start[:-1], self.start[1:]
        local = xp.stack([(end - begin).astype(xp.float64), self.cum[end] - self.cum[begin]])
        # Every group's row count and weight over all workers.
        self.count, self.total = self.comm.allreduce(local)
        # The smallest and largest key of each group over all workers, in one allreduce: min of
        # (min key, -max key). A worker without rows in a group offers 2**32 and -1 (no key).
        nonempty = end > begin
        n_local = self.composite.shape[0]
        if n_local:
            low32 = xp.uint64(0xFFFFFFFF)
            first = (self.composite[xp.minimum(begin, n_local - 1)] & low32).astype(xp.int64)
            last = (self.composite[xp.maximum(end.astype(xp.int64) - 1, 0)] & low32).astype(xp.int64)
        else:
            first = last = xp.zeros(self.n_groups, dtype=xp.int64)
        lo_hi = xp.stack([xp.where(nonempty, first, 1 << 32), -xp.where(nonempty, last, -1)])
        lo_hi = self.comm.allreduce(lo_hi, "min")
        self.lo, self.hi = lo_hi[0], -lo_hi[1]

    def weight_at_most(self, query_groups, keys):
        """Local weight of the rows of each query's group whose key is <= the query's key.

        query_groups: (Q,) int64; keys: (Q, P) int64 in [0, 2**32).
        """
        xp = self.xp
        g = query_groups.astype(xp.uint64)[:, None]
        probe = (g << xp.uint64(32)) | keys.astype(xp.uint64)
        idx = xp.searchsorted(self.composite, probe.ravel(), side="right").reshape(keys.shape)
        return self.cum[idx] - self.cum[self.start[query_groups]][:, None]

    def select(self, query_groups, targets):
        """For each query, the smallest value v of its group (over all workers) whose weight
        at most v, rounded to float32 for weighted rows, reaches the target; the group's
        largest value where none does; NaN for a group without rows on any worker.

        Every worker must pass the same queries; returns (Q,) float32.
        """
        xp = self.xp
        query_groups = query_groups.astype(xp.int64)
        lo, hi = self.lo[query_groups], self.hi[query_groups]
        empty = lo > hi
        lo, hi = xp.where(empty, 0, lo), xp.where(empty, 0, hi)
        total = self.total[query_groups]
        if self.weighted:
            # XGBoost compares float cumulative weights with a float threshold.
            targets = xp.minimum(targets.astype(xp.float32), total.astype(xp.float32))
        else:
            targets = xp.minimum(targets.astype(xp.float64), total)
        steps = xp.arange(1, PIVOTS + 1, dtype=xp.int64)
        rows = xp.arange(query_groups.shape[0])
        # Invariant: the answer lies in [lo, hi]. Every worker holds the same lo and hi (they
        # come from allreduced sums), so all run the same number of steps.
        while bool((lo < hi).any()):
            width = hi - lo + 1
            pivots = xp.maximum(lo[:, None] + (width[:, None] * steps) // (PIVOTS + 1) - 1, lo[:, None])
            below = self.comm.allreduce(self.weight_at_most(query_groups, pivots))
            if self.weighted:
                below = below.astype(xp.float32)
            short = (below < targets[:, None]).sum(axis=1)  # pivots whose weight falls short
            new_lo = xp.where(short > 0, pivots[rows, xp.maximum(short - 1, 0)] + 1, lo)
            new_hi = xp.where(short < PIVOTS, pivots[rows, xp.minimum(short, PIVOTS - 1)], hi)
            lo, hi = new_lo, new_hi
        return xp.where(empty, xp.float32(np.nan), keys_to_values(xp, lo))


def group_quantiles(xp, values, groups, n_groups: int, alpha: float, weight=None, comm=None):
    """XGBoost's Quantile (weight None) or WeightedQuantile of each group's values over all workers.

    Returns ((n_groups,) float32 quantiles, (n_groups,) bool: the group has rows on some worker).
    """
    rows = GroupedRows(xp, values, groups, n_groups, weight, comm)
    a = float(np.float32(alpha))  # XGBoost keeps alpha as a float
    ids = xp.arange(rows.n_groups, dtype=xp.int64)
    if weight is not None:
        # float(cdf.back() * alpha): the float total times the double alpha, rounded to float.
        thresh = (rows.total.astype(xp.float32).astype(xp.float64) * a).astype(xp.float32)
        q = rows.select(ids, thresh)
    else:
        n = rows.count
        first, last = a <= 1.0 / (n + 1.0), a >= n / (n + 1.0)
        x = a * (n + 1.0)
        k = xp.floor(x) - 1.0
        d = (x - 1.0) - k
        k = xp.where(first, 0.0, xp.where(last, n - 1.0, k))
        d = xp.where(first | last, 0.0, d)
        # Ranks k and k + 1 (0-based) are the smallest values with k + 1 and k + 2 rows at most them.
        vals = rows.select(xp.concatenate([ids, ids]), xp.concatenate([k + 1.0, xp.minimum(k + 2.0, n)]))
        v0, v1 = vals[:n_groups], vals[n_groups:]
        q = (v0.astype(xp.float64) + d * (v1 - v0).astype(xp.float64)).astype(xp.float32)
    return q, rows.count > 0


def refresh_leaves(xp, tree, positions, margin, y, hess, weight, alpha: float, learning_rate: float,
                   comm=None) -> None:
    """Set every leaf of ``tree`` to the alpha-quantile of its rows' residuals y - margin, times
    the learning rate (XGBoost's UpdateTreeLeaf), over the rows of all workers.

    positions: each row's leaf node id; margin: the margins before this tree; hess: the rows'
    hessians. Rows of zero hessian (zero weight) take no part, as XGBoost counts them as sampled
    out. A leaf without rows on any worker keeps XGBoost's fallback: its value times the learning
    rate once more.
    """
    leaves = np.flatnonzero(tree.is_leaf)
    leaf_index = np.zeros(tree.n_nodes, dtype=np.int64)
    leaf_index[leaves] = np.arange(leaves.size)
    groups = xp.asarray(leaf_index)[positions]
    residual = y.astype(xp.float32) - margin.astype(xp.float32)
    used = hess != 0
    if not bool(used.all()):
        groups, residual = groups[used], residual[used]
        weight = None if weight is None else weight[used]
    q, has_rows = group_quantiles(xp, residual, groups, leaves.size, alpha, weight, comm)
    q, has_rows = to_host(q), to_host(has_rows)
    eta = np.float32(learning_rate)
    tree.value[leaves] = np.where(has_rows, q * eta, tree.value[leaves] * eta).astype(np.float32)
