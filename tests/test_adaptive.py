"""adaptive.py: grouped quantiles with XGBoost's two definitions, the same over any split of the rows
across workers, and the leaf refresh."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from daskgb.adaptive import group_quantiles, keys_to_values, order_keys, refresh_leaves
from daskgb.collective import Communicator, reduce_in_rank_order
from daskgb.tree import TreeBuilder

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def xgb_quantile(v, alpha):
    """XGBoost's common::Quantile (src/common/stats.h), written out for one group."""
    v = np.sort(np.asarray(v, np.float32), kind="stable")
    n, a = v.size, float(np.float32(alpha))
    if n == 0:
        return np.float32(np.nan)
    if a <= 1 / (n + 1):
        return v[0]
    if a >= n / (n + 1):
        return v[-1]
    x = a * (n + 1)
    k = int(np.floor(x)) - 1
    d = (x - 1) - k
    return np.float32(float(v[k]) + d * float(np.float32(v[k + 1] - v[k])))


def xgb_weighted_quantile(v, w, alpha):
    """XGBoost's common::WeightedQuantile: float weight CDF, float threshold, lower bound."""
    if len(v) == 0:
        return np.float32(np.nan)
    order = np.argsort(v, kind="stable")
    cdf = np.cumsum(np.asarray(w, np.float32)[order], dtype=np.float32)
    thresh = np.float32(float(cdf[-1]) * float(np.float32(alpha)))
    return np.asarray(v, np.float32)[order][min(np.searchsorted(cdf, thresh, "left"), len(v) - 1)]


def random_groups(seed):
    rng = np.random.default_rng(seed)
    n_groups, n = int(rng.integers(1, 7)), int(rng.integers(0, 80))
    values = np.round(rng.normal(size=n) * 3, int(rng.integers(0, 3))).astype(np.float32)  # with ties
    groups = rng.integers(0, n_groups, n)
    alpha = float(rng.choice([0.0, 0.05, 0.25, 0.5, 0.9, 1.0, rng.random()]))
    weight = [None, rng.uniform(0, 2, n), rng.integers(0, 3, n)][seed % 3]
    return values, groups, n_groups, alpha, None if weight is None else weight.astype(np.float32)


def test_order_keys_sort_as_the_values_and_invert():
    f32 = np.finfo(np.float32)
    v = np.array([-np.inf, -f32.max, -3.5, -f32.tiny, -1e-45, -0.0, 0.0, 1e-45, f32.tiny, 2.5, f32.max, np.inf],
                 np.float32)
    k = order_keys(np, v)
    assert k.dtype == np.uint32
    assert np.all(np.diff(k.astype(np.int64))[[i for i in range(v.size - 1) if i != 5]] > 0)
    assert k[5] == k[6]  # -0.0 and +0.0 are one value
    np.testing.assert_array_equal(keys_to_values(np, k), v + np.float32(0.0))


@pytest.mark.parametrize("seed", range(60))
def test_group_quantiles_are_xgboosts(seed):
    values, groups, n_groups, alpha, weight = random_groups(seed)
    q, has_rows = group_quantiles(np, values, groups, n_groups, alpha, weight)
    for g in range(n_groups):
        rows = groups == g
        ref = xgb_quantile(values[rows], alpha) if weight is None else \
            xgb_weighted_quantile(values[rows], weight[rows], alpha)
        assert has_rows[g] == rows.any()
        if rows.any():
            assert q[g] == ref, (g, alpha, np.sort(values[rows]))


class _ThreadComm(Communicator):
    """Ranks as threads of this process, reducing in rank order like the Dask communicator."""

    def __init__(self, rank, world_size, slots, barrier):
        self.rank, self.world_size = rank, world_size
        self._slots, self._barrier = slots, barrier

    def _exchange(self, x, combine):
        self._slots[self.rank] = x
        self._barrier.wait()
        out = combine(list(self._slots))
        self._barrier.wait()
        return out

    def allreduce(self, x, op="sum"):
        return self._exchange(x, lambda values: reduce_in_rank_order(values, op))

    def allgather(self, x):
        return self._exchange(x, list)


def on_threads(world_size, fn):
    """fn(rank, comm) on world_size threads; their results by rank."""
    slots, barrier = [None] * world_size, threading.Barrier(world_size, timeout=60)
    results, errors = [None] * world_size, []

    def run(rank):
        try:
            results[rank] = fn(rank, _ThreadComm(rank, world_size, slots, barrier))
        except Exception as exc:  # reported below, with the others' results
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("seed", range(30))
def test_group_quantiles_the_same_on_any_split_across_workers(seed):
    values, groups, n_groups, alpha, weight = random_groups(seed)
    rng = np.random.default_rng(1000 + seed)
    world = 3
    # Rank 2 holds no rows of group 0, and rank 1 none at all when the seed is even.
    owner = rng.integers(0, world, values.size)
    owner[(owner == 2) & (groups == 0)] = 0
    if seed % 2 == 0:
        owner[owner == 1] = 0
    expected = group_quantiles(np, values, groups, n_groups, alpha, weight)

    def part(rank, comm):
        mine = owner == rank
        return group_quantiles(np, values[mine], groups[mine], n_groups, alpha,
                               None if weight is None else weight[mine], comm)

    for q, has_rows in on_threads(world, part):
        np.testing.assert_array_equal(q, expected[0])
        np.testing.assert_array_equal(has_rows, expected[1])


def stump(value_left=0.25, value_right=-0.5):
    b = TreeBuilder()
    b.add_node(-1, 0, 0.0, 0.0, 10.0)
    b.add_node(0, 1, 1.0, value_left, 5.0)
    b.add_node(0, 1, -2.0, value_right, 5.0)
    b.split(0, 0, 3, 0.5, True, 1.0, 1, 2)
    return b.build()


def test_refresh_leaves_sets_quantile_times_learning_rate_and_keeps_xgboosts_fallback():
    y = np.float32([1, 2, 3, 10, 4])
    margin = np.float32([0.5, 0.5, 0.5, 0.5, 0.5])
    tree = stump()
    # Every row is in leaf 1; leaf 2 has no rows on any worker.
    refresh_leaves(np, tree, np.full(5, 1, np.int32), margin, y, np.ones(5, np.float32), None, 0.5, 0.3)
    assert tree.value[1] == np.float32(np.median(y - margin)) * np.float32(0.3)
    # XGBoost: a leaf no worker has rows for keeps its value, times the learning rate once more.
    assert tree.value[2] == np.float32(-0.5) * np.float32(0.3)
    assert tree.value[0] == 0.0 and tree.base_weight[1] == 1.0  # inner nodes and base weights stay


def test_refresh_leaves_leaves_out_rows_of_zero_hessian():
    y = np.float32([-5, 1, 2, 3, 7])
    w = np.float32([0, 1, 1, 1, 0])
    tree = stump()
    positions = np.int32([1, 1, 1, 1, 2])
    # alpha 0 takes the smallest residual: -5 would be it if its zero-weight row counted.
    refresh_leaves(np, tree, positions, np.zeros(5, np.float32), y, w, w, 0.0, 1.0)
    assert tree.value[1] == 1.0
    assert tree.value[2] == np.float32(-0.5)  # its only row has zero weight: the fallback


@pytest.mark.parametrize("device", DEVICES)
def test_group_quantiles_cupy_equals_numpy(device):
    from daskgb.backend import get_backend

    xp = get_backend(device).xp
    for seed in range(12):
        values, groups, n_groups, alpha, weight = random_groups(seed)
        q, has_rows = group_quantiles(np, values, groups, n_groups, alpha, weight)
        qd, hd = group_quantiles(xp, xp.asarray(values), xp.asarray(groups), n_groups, alpha,
                                 None if weight is None else xp.asarray(weight))
        np.testing.assert_array_equal(np.asarray(qd.get() if hasattr(qd, "get") else qd), q)
        np.testing.assert_array_equal(np.asarray(hd.get() if hasattr(hd, "get") else hd), has_rows)
