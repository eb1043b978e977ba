"""Determinism on a cluster: the same fit three times saves the same bytes, and where the cuts
are exact, one worker, two workers and one process all save the same model."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

pytest.importorskip("distributed")
pytest.importorskip("dask.array")

from placement import on_workers  # noqa: E402

PARAMS = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.3, "subsample": 0.8, "colsample_bynode": 0.8,
          "seed": 4, "base_score": 0.5, "device": "cpu"}


def _exact_data(n=4000, seed=0):
    """Every feature has at most 41 distinct values: the cuts are exact wherever they are made."""
    rng = np.random.default_rng(seed)
    X = (np.round(np.clip(rng.normal(size=(n, 6)), -2.5, 2.5) * 8) / 8).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    y = (Z[:, 0] - Z[:, 1] * Z[:, 2] + rng.normal(size=n) * 0.5 > 0).astype(np.float32)
    return X, y


def _digest(booster) -> str:
    """The model's digest, less nthread: a Dask fit records its workers' thread count there (as
    xgboost.dask's fits do), which sets host threads only."""
    d = booster.to_dict()
    d["params"] = {k: v for k, v in d["params"].items() if k not in ("nthread", "n_jobs")}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def _fit(client, X, y, chunks, placement, rounds=15):
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    out = dgb.train(client, PARAMS, dtrain, rounds, evals=[(dtrain, "train")], verbose_eval=False)
    return out["booster"], len(dtrain.workers)


def test_three_fits_give_the_same_bytes(client):
    X, y = _exact_data(seed=1)
    X = X + np.random.default_rng(2).normal(scale=1e-3, size=X.shape).astype(np.float32)  # sketched cuts too
    digests = {_digest(_fit(client, X, y, [1500, 2500], [0, 1])[0]) for _ in range(3)}
    assert len(digests) == 1


def test_one_worker_two_workers_and_one_process_give_the_same_model(client):
    """Row sampling is keyed by a row's place in the workers' rows taken in rank order, so the
    two-worker deal keeps the rows in their order (the first blocks on rank 0)."""
    X, y = _exact_data()
    chunks = [1000, 700, 1300, 1000]
    one, n1 = _fit(client, X, y, chunks, [0, 0, 0, 0])
    two, n2 = _fit(client, X, y, chunks, [0, 0, 1, 1])
    assert (n1, n2) == (1, 2)
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 15, verbose_eval=False)
    assert _digest(one) == _digest(two) == _digest(local)


def test_the_model_does_not_depend_on_the_workers_addresses(client):
    """The same partitions on two workers, dealt once to the worker of the lower address and
    once to the other: ranks follow the partitions (rank 0 holds the first), not the
    addresses a fresh cluster draws, so with row sampling both save the same bytes."""
    X, y = _exact_data(seed=3)
    chunks = [1200, 800, 1100, 900]
    a, _ = _fit(client, X, y, chunks, [0, 0, 1, 1])
    b, _ = _fit(client, X, y, chunks, [1, 1, 0, 0])
    assert _digest(a) == _digest(b)


def _cuts_bytes(m) -> bytes:
    c = m.cuts
    return b"".join(np.asarray(a).tobytes() for a in (c.ptrs, c.values, c.min_values))


def test_sketched_cuts_and_model_do_not_depend_on_the_placement():
    """The same collection on 1, 2 and 3 workers, its partitions dealt in blocks and interleaved:
    columns of far more distinct values than the sketch keeps (4,000 rows, max_bin 16: 161
    entries a feature), so each partition's summary is pruned before the merge, and row
    sampling, uniform and gradient-based, with colsample_bynode. Summaries merge in the
    collection's order and a row's sampling draws are keyed by its place in the collection, so
    every placement gives the same cuts and the same model bytes."""
    import dask
    import distributed

    rng = np.random.default_rng(5)
    X = rng.normal(size=(4000, 5)).astype(np.float32)
    X[:, 1] = rng.exponential(size=4000)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(size=4000) > 0).astype(np.float32)
    chunks = [1000, 700, 1300, 1000]
    placements = ([0, 0, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 2, 0], [2, 1, 0, 1])
    samplings = ({"subsample": 0.7}, {"subsample": 0.7, "sampling_method": "gradient_based"})
    cuts, models = set(), {i: set() for i in range(len(samplings))}
    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as cl:
            cl.wait_for_workers(3)
            for placement in placements:
                dtrain = dgb.DaskQuantileMatrix(cl, on_workers(cl, X, chunks, placement, fresh=True),
                                                on_workers(cl, y, chunks, placement, fresh=True), max_bin=16)
                assert len(dtrain.workers) == len(set(placement))
                cuts.add(_cuts_bytes(dtrain))
                for i, sampling in enumerate(samplings):
                    params = {**PARAMS, **sampling, "max_bin": 16, "colsample_bynode": 0.8}
                    models[i].add(_digest(dgb.train(cl, params, dtrain, 6, verbose_eval=False)["booster"]))
    assert len(cuts) == 1
    assert np.diff(np.asarray(dtrain.cuts.ptrs)).max() == 16  # sketched: every feature's bins filled
    assert all(len(m) == 1 for m in models.values()), models


class _Part:
    """A stand-in for a partition's future: _balanced reads its key only."""

    def __init__(self, key):
        self.key = key


def _loads(holder, rows):
    return sorted(sum(rows[f.key] for f in fs) for fs in holder.values())


def test_balanced_moves_whole_partitions_until_the_busiest_is_near_the_mean():
    from daskgb.dask.data import _balanced

    # The quickstart's deal seen on a 2-worker LocalCluster: six 30K-row partitions and a 20K one, 6 to 1.
    rows = {k: 30_000 for k in range(6)} | {6: 20_000}
    parts = {k: _Part(k) for k in rows}
    position = {k: k for k in rows}
    holder = {"a": [parts[k] for k in (0, 1, 2, 3, 5, 6)], "b": [parts[4]]}
    out = _balanced(holder, rows, position, 1.1)
    assert _loads(out, rows) == [90_000, 110_000]  # the best whole partitions allow (mean 100K)
    assert sorted(f.key for fs in out.values() for f in fs) == list(range(7))
    for fs in out.values():  # each worker's partitions stay in collection order
        assert [f.key for f in fs] == sorted(f.key for f in fs)
    # Within the tolerance, or off, or one partition too large to move: as they were.
    assert _loads(_balanced(holder, rows, position, 0), rows) == [30_000, 170_000]
    assert _loads(_balanced(holder, rows, position, 2.0), rows) == [30_000, 170_000]
    big = {0: 100, 1: 900}
    one = {"a": [_Part(1)], "b": [_Part(0)]}
    assert _loads(_balanced(one, big, {0: 0, 1: 1}, 1.1), big) == [100, 900]


def test_balanced_never_raises_the_busiest_and_ends_on_random_deals():
    from daskgb.dask.data import _balanced

    rng = np.random.default_rng(0)
    for _ in range(200):
        n_parts, n_workers = int(rng.integers(1, 12)), int(rng.integers(1, 5))
        rows = {k: int(r) for k, r in enumerate(rng.integers(0, 1000, size=n_parts))}
        holder = {w: [] for w in range(n_workers)}
        for k in rows:
            holder[int(rng.integers(n_workers))].append(_Part(k))
        out = _balanced(holder, rows, {k: k for k in rows}, 1.05)
        before, after = _loads(holder, rows), _loads(out, rows)
        assert sum(before) == sum(after) and max(after) <= max(before)
        assert sorted(f.key for fs in out.values() for f in fs) == sorted(rows)


def _covered(plan, rows, first_row):
    """Every row of every partition in exactly one piece, and each worker's pieces in collection order."""
    seen = []
    for pieces in plan.values():
        starts = [first_row[f.key] + lo for f, lo, hi in pieces]
        assert starts == sorted(starts)
        seen += [r for f, lo, hi in pieces for r in range(first_row[f.key] + lo, first_row[f.key] + hi)]
    return sorted(seen) == list(range(sum(rows.values())))


def test_even_rows_cuts_partitions_where_whole_ones_cannot_even_the_workers():
    from daskgb.dask.data import _balanced, _even_rows

    # The quickstart's deal after _balanced's whole moves: 90K and 110K rows; cut, 100K each.
    rows = {k: 30_000 for k in range(6)} | {6: 20_000}
    first_row = {k: 30_000 * k for k in rows}
    parts = {k: _Part(k) for k in rows}
    holder = _balanced({"a": [parts[k] for k in (0, 1, 2, 3, 5, 6)], "b": [parts[4]]}, rows, first_row, 1.02)
    plan = _even_rows(holder, rows, first_row, ["a", "b"], 1.02)
    assert sorted(sum(hi - lo for _, lo, hi in ps) for ps in plan.values()) == [100_000, 100_000]
    assert _covered(plan, rows, first_row)
    assert sum(hi - lo < rows[f.key] for ps in plan.values() for f, lo, hi in ps) == 2  # one partition, in two
    # Within the tolerance, or off: nothing cut.
    assert _even_rows(holder, rows, first_row, ["a", "b"], 1.2) is None
    assert _even_rows(holder, rows, first_row, ["a", "b"], 0) is None
    # One partition on one of three workers: a third each, within a row.
    one = _even_rows({"a": [_Part(0)], "b": [], "c": []}, {0: 1000}, {0: 0}, ["a", "b", "c"], 1.02)
    assert sorted(sum(hi - lo for _, lo, hi in ps) for ps in one.values()) == [333, 333, 334]
    assert _covered(one, {0: 1000}, {0: 0})


def test_even_rows_on_random_deals_leaves_every_worker_within_a_row_of_the_mean():
    from daskgb.dask.data import _even_rows

    rng = np.random.default_rng(1)
    for _ in range(200):
        n_parts, n_workers = int(rng.integers(1, 12)), int(rng.integers(2, 6))
        rows = {k: int(r) for k, r in enumerate(rng.integers(0, 1000, size=n_parts))}
        if not sum(rows.values()):
            continue
        first_row = dict(zip(rows, np.cumsum([0] + list(rows.values()))[:-1].tolist()))
        holder = {w: [] for w in range(n_workers)}
        for k in rows:
            holder[int(rng.integers(n_workers))].append(_Part(k))
        plan = _even_rows(holder, rows, first_row, list(range(n_workers)), 1.02)
        if plan is None:
            loads = [sum(rows[f.key] for f in fs) for fs in holder.values()]
            assert max(loads) <= 1.02 * sum(loads) / n_workers
            continue
        loads = [sum(hi - lo for _, lo, hi in ps) for ps in plan.values()]
        assert max(loads) - min(loads) <= 1 and _covered(plan, rows, first_row)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_cut_partition_keeps_each_pieces_rows(device):
    """_slice_part on a partition of every kind of piece: dense and CSR X, labels, weights, a
    base margin of one column per class, survival bounds; numpy and scipy, or cupy and cupyx."""
    from daskgb.dask.data import _slice_part

    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4)).astype(np.float32)
    X[X < 0] = 0
    vectors = [rng.normal(size=50).astype(np.float32) for _ in range(4)]
    margin = rng.normal(size=(50, 3)).astype(np.float32)
    if device == "cuda":
        cupy = pytest.importorskip("cupy")
        import cupyx.scipy.sparse as sparse

        xp, host = cupy, cupy.asnumpy
    else:
        import scipy.sparse as sparse

        xp, host = np, np.asarray
    for dense in (True, False):
        Xp = xp.asarray(X) if dense else sparse.csr_matrix(xp.asarray(X))
        part = (Xp, xp.asarray(vectors[0]), xp.asarray(vectors[1]), xp.asarray(margin), None,
                xp.asarray(vectors[2]), xp.asarray(vectors[3]))
        X_cut, y, w, m, q, lower, upper = _slice_part(part, 12, 31)
        np.testing.assert_array_equal(host(X_cut if dense else X_cut.toarray()), X[12:31])
        for got, want in zip((y, w, m, lower, upper), (vectors[0], vectors[1], margin, vectors[2], vectors[3])):
            np.testing.assert_array_equal(host(got), want[12:31])
        assert q is None
        assert _slice_part((Xp, None, None, None, None, None, None), 0, 5)[1:] == (None,) * 6


def _placed_fits(client, X, y, chunks, placement, tolerances):
    """For each setting of daskgb.dask.balance-rows: a training matrix and an eval set of the
    same rows placed as given (fresh partitions), 8 rounds; {tolerance: (training rows a
    worker, eval rows a worker, the model's digest, the eval history, the two matrices)}."""
    import dask

    results = {}
    for tolerance in tolerances:
        with dask.config.set({"daskgb.dask.balance-rows": tolerance}):
            dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement, fresh=True),
                                            on_workers(client, y, chunks, placement, fresh=True))
            deval = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement, fresh=True),
                                           on_workers(client, y, chunks, placement, fresh=True), ref=dtrain)
            out = dgb.train(client, PARAMS, dtrain, 8, evals=[(deval, "eval")], verbose_eval=False)
            results[tolerance] = (sorted(dtrain.rows_per_worker.values()), sorted(deval.rows_per_worker.values()),
                                  _digest(out["booster"]), out["history"]["eval"]["logloss"], dtrain, deval)
    return results


def test_a_fit_on_partitions_cut_to_even_rows_gives_the_same_model_and_row_order(client):
    """Three equal partitions on two workers (2 to 1): no whole move evens them, so the last
    partition of the busier worker is cut and half of it moves. The matrices (training and eval
    set) hold 1,500 rows on each worker; the model, its eval history and the labels in row
    order are the ones of the fit that moves nothing (the setting at 0)."""
    X, y = _exact_data(n=3000, seed=7)
    results = _placed_fits(client, X, y, [1000] * 3, [0, 0, 1], (1.02, 0))
    for _, _, _, _, dtrain, deval in results.values():
        np.testing.assert_array_equal(deval.labels().compute(), y)
        rows = np.arange(2990, 1990, -7)
        np.testing.assert_array_equal(dtrain.take(rows).labels().compute(), y[rows])
    assert results[1.02][:2] == ([1500, 1500], [1500, 1500])
    assert results[0][:2] == ([1000, 2000], [1000, 2000])
    assert results[1.02][2] == results[0][2]
    np.testing.assert_allclose(results[1.02][3], results[0][3], rtol=1e-12)


@pytest.mark.gpu
def test_cupy_partitions_are_cut_to_even_rows_and_keep_their_row_order(client):
    """Cupy partitions placed 2 to 1 on the two workers (processes sharing one GPU; no training,
    since two workers on one GPU cannot join one NCCL communicator): the matrix is cut to 1,500
    rows a worker, a cut partition's tail moving between the workers, and its labels and a
    take() of it come back in X's row order."""
    cupy = pytest.importorskip("cupy")
    import dask
    import dask.array as da

    from daskgb.dask.watch import live_workers

    X, y = _exact_data(n=3000, seed=8)
    addrs = sorted(live_workers(client))

    def placed(a):
        blocks = []
        for i, w in enumerate([0, 0, 1]):
            with dask.annotate(workers=[addrs[w]], allow_other_workers=False):
                block = da.from_array(a[1000 * i : 1000 * (i + 1)], chunks=-1, name=False).map_blocks(cupy.asarray)
                blocks.append(client.persist(block, optimize_graph=False))
        return da.concatenate(blocks, axis=0)

    def host(v):
        return cupy.asnumpy(v) if isinstance(v, cupy.ndarray) else np.asarray(v)

    m = dgb.DaskQuantileMatrix(client, placed(X), placed(y), device="cuda")
    assert sorted(m.rows_per_worker.values()) == [1500, 1500]
    np.testing.assert_array_equal(host(m.labels().compute()), y)
    rows = np.arange(2990, 1990, -7)
    np.testing.assert_array_equal(host(m.take(rows).labels().compute()), y[rows])
    m.release()


def test_a_fit_on_unevenly_placed_partitions_trains_on_even_rows_and_the_same_model(client):
    """Five partitions on worker 0 and one on worker 1: the matrices (training and eval set)
    move partitions until each worker holds 1,500 rows; the model and its eval history are the
    ones of the fit that moves nothing (the setting at 0)."""
    X, y = _exact_data(n=3000, seed=6)
    results = _placed_fits(client, X, y, [500] * 6, [0, 0, 0, 0, 0, 1], (1.1, 0))
    assert results[1.1][:2] == ([1500, 1500], [1500, 1500])
    assert results[0][:2] == ([500, 2500], [500, 2500])
    assert results[1.1][2] == results[0][2]
    np.testing.assert_allclose(results[1.1][3], results[0][3], rtol=1e-12)
