"""The sampling stage (daskgb/sampling/): uniform and gradient-based (minimal variance) draws, and training with them.

Tests taking `xp` or `backend` (tests/stages/conftest.py) run on numpy everywhere and on
CuPy on a GPU, against what the draws must give (the target sample, unbiased sums, a
reproducible hash); tests marked gpu compare the CUDA kernels with the numpy reference.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import daskgb
from daskgb.arrays import to_host
from daskgb.collective import LocalCommunicator, reduce_in_rank_order
from daskgb.backend import numpy_backend
from daskgb.sampling import mvs_sample, mvs_threshold, mvs_weights, row_sample
from daskgb.sampling.reference import SortedRows, regularised_abs_gradient

LOCAL = LocalCommunicator()


def expected_sample(r, mu):
    return float(np.sum((r > 0) if mu == 0.0 else np.minimum(1.0, r / mu)))


def r_values(kind, n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "lognormal":
        return rng.lognormal(0, 2, n)
    if kind == "ties":  # few distinct values, many rows on each
        return rng.integers(0, 6, n).astype(np.float64) * 0.25
    if kind == "heavy_tail":
        return rng.pareto(1.1, n)
    if kind == "equal":
        return np.full(n, 3.0)
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["lognormal", "ties", "heavy_tail", "equal"])
@pytest.mark.parametrize("rate", [0.05, 0.3, 0.7])
def test_threshold_gives_the_target_sample(xp, kind, rate):
    r = r_values(kind)
    target = rate * r.size
    mu = mvs_threshold(xp, xp.asarray(r), target, LOCAL)
    assert mu > 0.0
    assert expected_sample(r, mu) == pytest.approx(target, rel=1e-9)


def test_row_sample_is_a_fair_deterministic_hash(xp):
    """The uniform draw (XGBoost's subsample): each row kept with the rate's probability, by a
    hash of the seed, the tree and the row's global index alone."""

    def sample(n, first, seed, tree):
        return to_host(row_sample(xp, n, first, seed=seed, tree=tree, rate=0.3))

    m = sample(200_000, 0, 7, 3)
    assert m.dtype == np.float32 and abs(m.mean() - 0.3) < 0.005
    np.testing.assert_array_equal(m, sample(200_000, 0, 7, 3))
    # a row's draw depends on its global index only, not on where a shard starts
    np.testing.assert_array_equal(m[1000:3000], sample(2000, 1000, 7, 3))
    other_tree = sample(200_000, 0, 7, 4)
    other_seed = sample(200_000, 0, 8, 3)
    for o in (other_tree, other_seed):  # independent draws: overlap ~ 0.3 * 0.3
        assert abs((m * o).mean() - 0.09) < 0.005


def test_a_rows_draw_follows_its_global_index_through_runs(backend, xp):
    """A worker whose rows are runs of the collection not next to each other (a Dask worker
    holding partitions 2 and 0, in that order) draws, uniform and gradient-based, what the
    rows draw at their global indices in one run."""
    n = 5000
    runs = ((3000, 1200), (0, 3000), (4200, 800))  # every row once, out of order
    order = np.concatenate([np.arange(f, f + c) for f, c in runs])
    whole = to_host(row_sample(xp, n, 0, seed=7, tree=3, rate=0.3))
    np.testing.assert_array_equal(to_host(row_sample(xp, order.size, runs, seed=7, tree=3, rate=0.3)), whole[order])
    gpair = gpair_values("spread", seed=4)[:n]
    every = to_host(mvs_sample(backend, xp.asarray(gpair), 0.3, n, 0, 2, 1, LOCAL))
    mine = to_host(mvs_sample(backend, xp.asarray(gpair[order]), 0.3, order.size, runs, 2, 1, LOCAL))
    # The same rows (the threshold's sums are exact, so their order does not move it), reordered.
    np.testing.assert_array_equal(mine, every[order])
    with pytest.raises(ValueError, match="runs cover"):
        row_sample(xp, n + 1, runs, seed=7, tree=3, rate=0.3)


def test_threshold_keeps_everything_it_can(xp):
    r = xp.asarray([0.0, 0.0, 1.0, 2.0, 0.0])
    assert mvs_threshold(xp, r, 3.0, LOCAL) == 0.0  # three rows asked for, two with any gradient
    assert mvs_threshold(xp, xp.zeros(10), 4.0, LOCAL) == 0.0


class _Ranks:
    """In-process ranks (threads) whose allreduce reduces in rank order, like the Dask one."""

    def __init__(self, n):
        self.n, self.barrier, self.slots = n, threading.Barrier(n), [None] * n

    def comm(self, rank):
        shared = self

        class Comm:
            world_size = shared.n

            def __init__(self):
                self.rank = rank

            def allreduce(self, x, op="sum"):
                shared.slots[rank] = np.asarray(x)
                shared.barrier.wait()
                out = reduce_in_rank_order(list(shared.slots), op)
                shared.barrier.wait()
                return out

        return Comm()


def run_ranks(n, fn):
    ranks, out, errors = _Ranks(n), [None] * n, []

    def one(rank):
        try:
            out[rank] = fn(rank, ranks.comm(rank))
        except Exception as exc:  # surfaced below, with the barrier released
            errors.append(exc)
            ranks.barrier.abort()

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize("kind", ["lognormal", "ties"])
def test_threshold_does_not_depend_on_the_partitioning(kind):
    r = r_values(kind, seed=4)
    target = 0.2 * r.size
    whole = mvs_threshold(np, r, target, LOCAL)
    cuts = [0, 3000, 3000, 14_500, r.size]  # one rank holds no rows
    parts = run_ranks(4, lambda k, comm: mvs_threshold(np, r[cuts[k]:cuts[k + 1]], target, comm))
    assert parts == [whole] * 4


def test_weights_keep_the_expected_rows_and_sums(xp):
    rng = np.random.default_rng(1)
    n = 50_000
    gpair = np.stack([rng.normal(size=n) * rng.lognormal(0, 1, n), rng.uniform(0.1, 1, n)], axis=1).astype(np.float32)
    r = regularised_abs_gradient(np, gpair)
    gpair_x = xp.asarray(gpair)

    def weights(rate, seed, tree):
        return to_host(mvs_weights(xp, gpair_x, rate, n, 0, seed, tree, LOCAL))

    kept, sums = [], []
    for seed in range(40):
        w = weights(0.2, seed, 0)
        assert w.dtype == np.float32 and w.shape == (n,)
        kept.append(np.count_nonzero(w))
        sums.append((gpair.astype(np.float64) * w[:, None]).sum(axis=0))
    # The sample is 20% of the rows in expectation; the rows with the largest gradients always stay.
    assert np.mean(kept) == pytest.approx(0.2 * n, rel=0.01)
    mu = mvs_threshold(np, r, 0.2 * n, LOCAL)
    w0 = weights(0.2, 0, 0)
    big = r >= mu
    assert big.any() and np.all(w0[big] == 1.0)
    # Unbiased: the weighted sums average to the full sums (within 4 standard errors).
    full = gpair.astype(np.float64).sum(axis=0)
    sums = np.array(sums)
    stderr = sums.std(axis=0, ddof=1) / np.sqrt(len(sums))
    assert np.all(np.abs(sums.mean(axis=0) - full) < 4 * stderr + 1e-9 * np.abs(full))
    # A row's draw depends on the seed, the tree and its global index only.
    np.testing.assert_array_equal(weights(0.2, 7, 3), weights(0.2, 7, 3))
    assert not np.array_equal(weights(0.2, 7, 3), weights(0.2, 7, 4))


def test_weights_are_the_same_on_any_partitioning():
    rng = np.random.default_rng(2)
    n = 9000
    gpair = np.stack([rng.normal(size=n), rng.uniform(0.1, 1, n)], axis=1).astype(np.float32)
    whole = mvs_weights(np, gpair, 0.3, n, 0, 5, 2, LOCAL)
    cuts = [0, 2500, 9000]
    parts = run_ranks(2, lambda k, comm: mvs_weights(np, gpair[cuts[k]:cuts[k + 1]], 0.3, n, cuts[k], 5, 2,
                                                     comm))
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def _regression(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = (X[:, 0] * 2 - X[:, 1] * X[:, 2] + np.sin(X[:, 3]) + rng.normal(size=n) * 0.3).astype(np.float32)
    return X, y


def test_training_with_gradient_based_sampling():
    X, y = _regression()
    m = daskgb.QuantileMatrix(X, y)
    base = {"max_depth": 4, "eta": 0.3, "device": "cpu", "seed": 1}
    res = {}
    b = daskgb.train({**base, "subsample": 0.3, "sampling_method": "gradient_based"}, m, 30,
                     evals=[(m, "train")], evals_result=res, verbose_eval=False)
    again = daskgb.train({**base, "subsample": 0.3, "sampling_method": "gradient_based"}, m, 30, verbose_eval=False)
    np.testing.assert_array_equal(b.predict(X), again.predict(X))  # seeded: reproducible
    uniform = daskgb.train({**base, "subsample": 0.3}, m, 30, verbose_eval=False)
    assert not np.array_equal(b.predict(X), uniform.predict(X))
    rmse = res["train"]["rmse"]
    assert rmse[-1] < 0.5 * rmse[0]
    full = daskgb.train(base, m, 30, verbose_eval=False)
    full_rmse = float(np.sqrt(np.mean((full.predict(X) - y) ** 2)))
    assert rmse[-1] < 1.5 * full_rmse
    # subsample 1.0 samples nothing, whatever the method.
    same = daskgb.train({**base, "sampling_method": "gradient_based"}, m, 5, verbose_eval=False)
    np.testing.assert_array_equal(same.predict(X), daskgb.train(base, m, 5, verbose_eval=False).predict(X))


def test_sampling_method_is_checked():
    X, y = _regression(200)
    with pytest.raises(ValueError, match="sampling_method"):
        daskgb.train({"sampling_method": "mvs", "device": "cpu"}, daskgb.QuantileMatrix(X, y), 1)


@pytest.mark.gpu
def test_the_gpu_draws_the_same_sample():
    import cupy

    rng = np.random.default_rng(3)
    n = 20_000
    gpair = np.stack([rng.normal(size=n) * rng.lognormal(0, 1, n), rng.uniform(0.1, 1, n)], axis=1).astype(np.float32)
    r = regularised_abs_gradient(np, gpair)
    assert mvs_threshold(cupy, cupy.asarray(r), 0.25 * n, LOCAL) == mvs_threshold(np, r, 0.25 * n, LOCAL)
    np.testing.assert_array_equal(cupy.asnumpy(mvs_weights(cupy, cupy.asarray(gpair), 0.25, n, 0, 4, 1, LOCAL)),
                                  mvs_weights(np, gpair, 0.25, n, 0, 4, 1, LOCAL))


def gpair_values(kind, n=20_000, seed=0):
    """Gradient pairs whose r spread widely, tie, or are zero for many rows."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=n) * rng.lognormal(0, 1, n)
    h = rng.uniform(0.1, 1, n)
    if kind == "ties":
        g, h = rng.integers(-3, 4, n) * 0.5, np.full(n, 0.25)
    if kind == "zeros":  # rows already dropped, or with nothing left to learn
        dead = rng.random(n) < 0.4
        g[dead], h[dead] = 0.0, 0.0
    return np.stack([g, h], axis=1).astype(np.float32)


def test_mvs_sample_is_the_pairs_times_the_weights(backend, xp):
    gpair = gpair_values("zeros", seed=5)
    weights = to_host(mvs_weights(xp, xp.asarray(gpair), 0.3, len(gpair), 0, 2, 1, LOCAL))
    np.testing.assert_array_equal(to_host(mvs_sample(backend, xp.asarray(gpair), 0.3, len(gpair), 0, 2, 1, LOCAL)),
                                  gpair * weights[:, None])


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["spread", "ties", "zeros"])
def test_the_sampling_kernels_equal_the_reference(kind):
    """sampling/cuda.py's kernels see the same r, count and sum them to the same integers at
    random candidates, find the same mu and draw the same sample as the sorted reference."""
    import cupy

    gpair = gpair_values(kind, seed=11)
    n = len(gpair)
    lam = float(np.float32(0.1))
    from daskgb.backend import cupy_backend
    from daskgb.sampling.cuda import KernelRows

    ref, ker = SortedRows(np, regularised_abs_gradient(np, gpair)), KernelRows(cupy.asarray(gpair), lam)
    assert ker.extremes() == ref.extremes()
    count, lo, hi = ref.extremes()
    scale = np.ldexp(1.0, np.frexp(hi * count)[1] - 62)
    rng = np.random.default_rng(12)
    cands = np.sort(np.concatenate([rng.uniform(lo, hi, 40), [lo, hi], regularised_abs_gradient(np, gpair)[:20]]))
    np.testing.assert_array_equal(ker.stats(cands, scale), ref.stats(cands, scale))
    for rate in (0.05, 0.3, 0.9):
        expected = mvs_sample(numpy_backend, gpair, rate, n, 0, 3, 7, LOCAL)
        # A column of multiclass pairs: not contiguous.
        wide = cupy.asarray(np.stack([gpair, gpair[::-1]], axis=1))
        got = mvs_sample(cupy_backend, wide[:, 0], rate, n, 0, 3, 7, LOCAL)
        np.testing.assert_array_equal(cupy.asnumpy(got), expected)
        mine = cupy.asarray(gpair)
        assert mvs_sample(cupy_backend, mine, rate, n, 0, 3, 7, LOCAL, inplace=True) is mine
        np.testing.assert_array_equal(cupy.asnumpy(mine), expected)
