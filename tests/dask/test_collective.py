"""Tests of daskgb.collective: communicators over a real cluster of Dask worker processes (CPU)."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
import uuid

import cloudpickle
import numpy as np
import pytest
from distributed import Client, LocalCluster

from daskgb.collective import (
    DaskCommunicator,
    LocalCommunicator,
    NcclCommunicator,
    reduce_in_rank_order,
    resolve_timeout,
    start_root,
)
from daskgb.dask.watch import live_workers

# The scheduler's HTTP server wants port 8787 even without a dashboard; another cluster may hold it.
pytestmark = pytest.mark.filterwarnings("ignore:Port 8787 is already in use:UserWarning")

# pytest imports this file by path, so worker processes cannot import it by name: ship the
# task functions below by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

N_WORKERS = 3
BIG = 2_500_000  # float64 elements: a 20 MB message, larger than one comm frame shard


# --- data every rank makes from its rank alone, and the test makes again --------------------


def _order_probe(rank: int) -> np.ndarray:
    """Floats whose sum depends on the order of addition."""
    rng = np.random.default_rng(100 + rank)
    x = rng.standard_normal(1000) * 10.0 ** rng.integers(-3, 17, 1000)
    x[0] = (1e16, 1.0, -1e16)[rank]  # in rank order: (1e16 + 1) - 1e16 == 0; 1e16 - 1e16 + 1 == 1
    return x


def _big(rank: int) -> np.ndarray:
    return np.random.default_rng(200 + rank).standard_normal(BIG)


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _rank_order_sum(arrays):
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = out + a
    return out


# --- task bodies: each runs as one pinned task per worker ------------------------------------


def _exercise(job_id, root, rank, world_size, direct=None):
    with DaskCommunicator.connect(job_id, root, rank, world_size, timeout=60, direct=direct) as comm:
        assert (comm.rank, comm.world_size) == (rank, world_size)
        ints = np.array([rank, -rank, 10 * rank, 7], dtype=np.int64)
        out = {
            "fsum": comm.allreduce(_order_probe(rank)),
            "imax": comm.allreduce(ints, op="max"),
            "imin": comm.allreduce(ints, op="min"),
            "np_scalar": comm.allreduce(np.float64(0.1) * (rank + 1)),
            "py_int": comm.allreduce(rank + 1),
            "py_float_max": comm.allreduce(float(rank), op="max"),
            "gather": comm.allgather({"rank": rank, "a": np.arange(rank + 1)}),
            "bcast0": comm.broadcast({"root": rank} if rank == 0 else None, root=0),
            "bcast2": comm.broadcast(f"from rank {rank}", root=2),
            # fn runs once, on rank 0, and every rank gets its result (not the gathered values).
            "gather_apply": comm.gather_apply(10 * rank, lambda values: (os.getpid(), sum(values))),
            "pid": os.getpid(),
            "direct": comm._links is not None,
        }
        big = comm.allreduce(_big(rank))
        out["big"] = (big.shape, big.dtype.str, _digest(big))
        # out=: the result written into the given array, the input itself included.
        mine = np.array([rank, 2 * rank], dtype=np.int64)
        into = np.empty(2, dtype=np.int64)
        out["into"] = (comm.allreduce(mine, out=into) is into, into.copy())
        out["in_place"] = (comm.allreduce(mine, op="max", out=mine) is mine, mine.copy())
    return out


def _die_midway(job_id, root, rank, world_size, dead_rank):
    comm = DaskCommunicator.connect(job_id, root, rank, world_size, timeout=60)
    comm.allreduce(np.ones(4))
    if rank == dead_rank:
        os._exit(1)  # the whole worker process, sockets and all
    start = time.perf_counter()
    try:
        comm.allreduce(np.ones(4))
    except RuntimeError as exc:
        return str(exc), time.perf_counter() - start
    finally:
        comm.close()
    return None, time.perf_counter() - start


def _hang(job_id, root, rank, world_size, slow_rank, timeout, nap):
    comm = DaskCommunicator.connect(job_id, root, rank, world_size, timeout=timeout, connect_timeout=30)
    if rank == slow_rank:
        time.sleep(nap)
    start = time.perf_counter()
    try:
        comm.allreduce(np.ones(4))
    except RuntimeError as exc:
        return str(exc), time.perf_counter() - start
    finally:
        comm.close()
    return None, time.perf_counter() - start


def _mismatch(job_id, root, rank, world_size):
    with DaskCommunicator.connect(job_id, root, rank, world_size, timeout=60) as comm:
        try:
            if rank == 1:
                comm.allgather(rank)
            else:
                comm.allreduce(np.ones(3))
        except RuntimeError as exc:
            return str(exc)
    return None


def _raise_inside(job_id, root, rank, world_size, failing_rank):
    try:
        with DaskCommunicator.connect(job_id, root, rank, world_size, timeout=60) as comm:
            comm.allreduce(np.ones(2))
            if rank == failing_rank:
                raise ValueError("no rows on this worker")
            comm.allreduce(np.ones(2))
    except (ValueError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _gather_apply_fails(job_id, root, rank, world_size):
    """fn raises on rank 0: every rank's gather_apply raises, naming it."""
    with DaskCommunicator.connect(job_id, root, rank, world_size, timeout=60) as comm:
        try:
            comm.gather_apply(rank, lambda values: 1 / 0)
        except (RuntimeError, ZeroDivisionError) as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


def _join_only(job_id, root, rank, world_size):
    try:
        DaskCommunicator.connect(job_id, root, rank, world_size, timeout=60, connect_timeout=1.0).close()
    except RuntimeError as exc:
        return str(exc)
    return None


# --- the cluster -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=N_WORKERS, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _workers(client, n=N_WORKERS):
    client.wait_for_workers(n, timeout=60)
    return sorted(live_workers(client))[:n]


def _launch(client, fn, *args, world_size=N_WORKERS):
    """start_root on rank 0's worker, then one pinned task per rank; returns (futures, workers)."""
    workers = _workers(client, world_size)
    job_id = f"test-{uuid.uuid4().hex}"
    pin = dict(allow_other_workers=False, pure=False)
    root = client.submit(start_root, job_id, workers=[workers[0]], **pin).result(timeout=30)
    futures = [client.submit(fn, job_id, root, rank, world_size, *args, workers=[w], **pin)
               for rank, w in enumerate(workers)]
    return futures, workers


def _wait_replaced(client, dead_worker, timeout=30):
    """The nanny restarts a killed worker under a new address; wait until the cluster is whole."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = live_workers(client)
        if dead_worker not in workers and len(workers) >= N_WORKERS:
            return
        time.sleep(0.1)
    raise AssertionError(f"worker {dead_worker} was not replaced within {timeout} s")


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [None, False], ids=["direct-links", "dask-comms"])
def test_collectives_bit_identical_in_rank_order(client, direct):
    """Over the direct links (the default on a tcp:// cluster: rank 0 decides) and over Dask's comms."""
    futures, _ = _launch(client, _exercise, direct)
    results = client.gather(futures)
    assert [out["direct"] for out in results] == [direct is None] * N_WORKERS

    probes = [_order_probe(r) for r in range(N_WORKERS)]
    expected = _rank_order_sum(probes)
    assert expected[0] == 0.0
    # The probe tells orders apart: another order gives other bits.
    assert not np.array_equal(expected, _rank_order_sum(probes[::-1]))
    ints = [np.array([r, -r, 10 * r, 7], dtype=np.int64) for r in range(N_WORKERS)]
    big = _rank_order_sum([_big(r) for r in range(N_WORKERS)])

    for rank, out in enumerate(results):
        assert out["fsum"].dtype == np.float64 and out["fsum"].shape == (1000,)
        assert out["fsum"].tobytes() == expected.tobytes(), f"rank {rank}"
        np.testing.assert_array_equal(out["imax"], np.max(ints, axis=0))
        np.testing.assert_array_equal(out["imin"], np.min(ints, axis=0))
        assert out["imax"].dtype == np.int64
        assert type(out["np_scalar"]) is np.float64
        assert out["np_scalar"] == (np.float64(0.1) * 1 + np.float64(0.1) * 2) + np.float64(0.1) * 3
        assert type(out["py_int"]) is int and out["py_int"] == 6
        assert type(out["py_float_max"]) is float and out["py_float_max"] == 2.0
        assert [g["rank"] for g in out["gather"]] == [0, 1, 2]
        for r, g in enumerate(out["gather"]):
            np.testing.assert_array_equal(g["a"], np.arange(r + 1))
        assert out["bcast0"] == {"root": 0}
        assert out["bcast2"] == "from rank 2"
        assert tuple(out["gather_apply"]) == (results[0]["pid"], 10 * sum(range(N_WORKERS)))
        assert out["big"] == ((BIG,), big.dtype.str, _digest(big)), f"rank {rank}"
        ranks = np.arange(N_WORKERS)
        assert out["into"][0] and out["into"][1].tolist() == [ranks.sum(), 2 * ranks.sum()]
        assert out["in_place"][0] and out["in_place"][1].tolist() == [ranks.max(), 2 * ranks.max()]


def test_a_failing_gather_apply_fails_on_every_rank(client):
    futures, _ = _launch(client, _gather_apply_fails)
    for rank, message in enumerate(client.gather(futures)):
        assert message is not None and "gather_apply #1 failed on rank 0" in message, (rank, message)


def test_timeout_names_hung_rank(client):
    futures, _ = _launch(client, _hang, 2, 0.5, 2.0)
    results = client.gather(futures, errors="raise")
    for rank in (0, 1):
        message, elapsed = results[rank]
        assert message is not None and "timed out" in message and re.search(r"\brank 2\b", message), message
        assert elapsed < 0.5 + 4.0, elapsed
    assert results[2][0] is not None  # the slow rank learns of the failure when it wakes up


def test_mismatched_collectives_fail_on_every_rank(client):
    futures, _ = _launch(client, _mismatch)
    for message in client.gather(futures):
        assert message is not None and "mismatch" in message, message


def test_bootstrap_names_ranks_that_never_joined(client):
    workers = _workers(client)
    job_id = f"test-{uuid.uuid4().hex}"
    pin = dict(allow_other_workers=False, pure=False)
    root = client.submit(start_root, job_id, workers=[workers[0]], **pin).result(timeout=30)
    # A world of 3 where rank 2's task never starts.
    futures = [client.submit(_join_only, job_id, root, rank, 3, workers=[workers[rank]], **pin) for rank in (0, 1)]
    for message in client.gather(futures):
        assert message is not None and "waiting for ranks [2]" in message, message


@pytest.mark.parametrize("failing_rank", [1, 0])
def test_exception_in_one_rank_reaches_the_others(client, failing_rank):
    futures, _ = _launch(client, _raise_inside, failing_rank)
    for rank, message in enumerate(client.gather(futures)):
        if rank == failing_rank:
            assert message == "ValueError: no rows on this worker"
        else:
            assert message.startswith("RuntimeError") and "no rows on this worker" in message, message
            assert re.search(rf"\brank {failing_rank}\b", message), message


@pytest.mark.parametrize("dead_rank", [2, 0])
def test_dead_worker_fails_fast_naming_rank(client, dead_rank):
    futures, workers = _launch(client, _die_midway, dead_rank)
    live = [f for r, f in enumerate(futures) if r != dead_rank]
    start = time.perf_counter()
    results = client.gather(live, errors="raise")
    wall = time.perf_counter() - start
    client.cancel(futures[dead_rank])  # pinned to a worker address that no longer exists
    for message, elapsed in results:
        assert message is not None and re.search(rf"\brank {dead_rank}\b", message), message
        assert elapsed < 15, elapsed
    assert wall < 15, wall
    print(f"dead rank {dead_rank}: others raised after {max(e for _, e in results) * 1e3:.1f} ms")
    _wait_replaced(client, workers[dead_rank])


def test_world_size_one_needs_no_cluster():
    comm = DaskCommunicator.connect("solo", None, 0, 1)
    assert isinstance(comm, LocalCommunicator)
    x = np.arange(5.0)
    with comm:
        assert comm.allreduce(x) is x
        assert comm.allreduce(3, op="max") == 3
        into = np.zeros(5)
        assert comm.allreduce(x, out=into) is into and np.array_equal(into, x)
        assert comm.allreduce(x, out=x) is x
        with pytest.raises(ValueError, match="out="):
            comm.allreduce(x, out=np.zeros(4))
        assert comm.allgather({"a": 1}) == [{"a": 1}]
        assert comm.broadcast("b") == "b"
        assert comm.gather_apply(3, lambda values: values) == [3]
        assert comm.gather_to(0, x, (5,)) is x
        with pytest.raises(ValueError):
            comm.allreduce(x, op="prod")
    # NCCL over a world of one opens nothing and needs no GPU.
    nccl = NcclCommunicator(LocalCommunicator())
    assert (nccl.rank, nccl.world_size) == (0, 1)
    assert nccl.allreduce(x) is x
    assert nccl.allgather(1) == [1] and nccl.broadcast(2) == 2
    assert nccl.gather_apply(3, lambda values: values) == [3]
    assert nccl.gather_to(0, x, (5,)) is x
    with pytest.raises(ValueError, match="counts"):
        nccl.gather_to(0, x, (4,))
    nccl.close()


def test_reduce_in_rank_order_kinds():
    assert reduce_in_rank_order([2**62, 2**62, 2**62]) == 3 * 2**62  # Python ints stay exact
    assert type(reduce_in_rank_order([np.int32(1), np.int32(2)])) is np.int32
    assert np.isnan(reduce_in_rank_order([1.0, float("nan")], op="max"))
    with pytest.raises(TypeError, match="rank 1"):
        reduce_in_rank_order([np.zeros(3), np.zeros(4)])
    with pytest.raises(TypeError, match="rank 1"):
        reduce_in_rank_order([1, 1.0])


def test_timeout_setting(monkeypatch):
    monkeypatch.delenv("DASKGB_COLLECTIVE_TIMEOUT", raising=False)
    assert resolve_timeout() == 600.0
    monkeypatch.setenv("DASKGB_COLLECTIVE_TIMEOUT", "12.5")
    assert resolve_timeout() == 12.5
    assert resolve_timeout(3) == 3.0
    monkeypatch.setenv("DASKGB_COLLECTIVE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="DASKGB_COLLECTIVE_TIMEOUT"):
        resolve_timeout()


def test_timeout_setting_through_dask_config(monkeypatch):
    """The setting is read when used, from dask.config first (DASK_DASKGB__COLLECTIVE__TIMEOUT
    reaches it there), then from the variable daskgb read before."""
    import dask.config

    monkeypatch.setenv("DASKGB_COLLECTIVE_TIMEOUT", "12.5")
    with dask.config.set({"daskgb.collective.timeout": "2 minutes"}):
        assert resolve_timeout() == 120.0
        assert resolve_timeout(3) == 3.0
    assert resolve_timeout() == 12.5
    with dask.config.set({"daskgb.collective.timeout": "soon"}):
        with pytest.raises(ValueError, match="daskgb.collective.timeout"):
            resolve_timeout()


# --- GPU: NCCL between two worker processes, one GPU each -------------------------------------


def _nccl_exercise(job_id, root, rank, world_size):
    import cupy

    cupy.cuda.Device(rank).use()
    host = DaskCommunicator.connect(job_id, root, rank, world_size, timeout=120)
    with NcclCommunicator(host) as comm:
        hist = cupy.arange(1000, dtype=cupy.int64) * (rank + 1)
        out = {
            "int64": comm.allreduce(hist).get(),
            "int64_max": comm.allreduce(hist, op="max").get(),
            "float32": comm.allreduce(cupy.full(7, rank + 0.5, dtype=cupy.float32)).get(),
            "int32_min": comm.allreduce(cupy.full((2, 3), rank, dtype=cupy.int32), op="min").get(),
            "host": comm.allreduce(np.float64(rank)),
            "via_host": DaskCommunicator.allreduce(host, cupy.ones(3) * rank).get(),
            "gather": comm.allgather(rank),
        }
        # Rows of unequal counts (rank 1: none), to either root; the others get None.
        counts = (3, 0)
        rows = cupy.arange(counts[rank] * 4, dtype=cupy.float32).reshape(-1, 4) + 100 * rank
        out["gather_to"] = [None if (g := comm.gather_to(root_rank, rows, counts)) is None else g.get()
                            for root_rank in (0, 1)]
        wide = cupy.full((rank + 1, 2), rank, dtype=cupy.float64)
        out["gather_wide"] = [None if (g := comm.gather_to(r, wide, (1, 2))) is None else g.get() for r in (0, 1)]
        # In place, as the device grower reduces its histograms: no second buffer.
        mine = cupy.full(5, rank + 1, dtype=cupy.int64)
        out["in_place"] = (comm.allreduce(mine, out=mine) is mine, mine.get())
        with pytest.raises(ValueError, match="out="):
            comm.allreduce(mine, out=cupy.empty(4, dtype=cupy.int64))
    return out


@pytest.mark.gpu
def test_nccl_two_gpus():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        futures, _ = _launch(c, _nccl_exercise, world_size=2)
        results = c.gather(futures)
    base = np.arange(1000, dtype=np.int64)
    for rank, out in enumerate(results):
        mine = [None, None]
        mine[rank] = np.arange(12, dtype=np.float32).reshape(3, 4)
        for got, want in zip(out["gather_to"], mine):
            assert (got is None) == (want is None) and (want is None or np.array_equal(got, want))
        for r, got in enumerate(out["gather_wide"]):
            want = np.array([[0, 0], [1, 1], [1, 1]], dtype=np.float64)
            assert (got is None) == (r != rank) and (got is None or np.array_equal(got, want))
        np.testing.assert_array_equal(out["int64"], base * 3)
        np.testing.assert_array_equal(out["int64_max"], base * 2)
        np.testing.assert_allclose(out["float32"], np.full(7, 2.0, dtype=np.float32))
        np.testing.assert_array_equal(out["int32_min"], np.zeros((2, 3), dtype=np.int32))
        assert out["host"] == 1.0
        np.testing.assert_array_equal(out["via_host"], np.ones(3))
        assert out["gather"] == [0, 1]
        assert out["in_place"][0]
        np.testing.assert_array_equal(out["in_place"][1], np.full(5, 3))


@pytest.mark.gpu
def test_nccl_world_of_one_on_gpu():
    cupy = pytest.importorskip("cupy")
    comm = NcclCommunicator(LocalCommunicator())
    x = cupy.arange(4, dtype=cupy.int64)
    assert comm.allreduce(x) is x
    comm.close()


def _nccl_stuck_peer(job_id, root, rank, world_size, timeout, nap):
    """Rank 1 sleeps before its allreduce (a stuck peer); rank 0's NCCL kernel waits for it.
    Each rank's watchdog must release its own wait after `timeout` with a clear error."""
    import cupy

    from daskgb.arrays import to_host

    cupy.cuda.Device(rank).use()
    host = DaskCommunicator.connect(job_id, root, rank, world_size, timeout=120)
    comm = NcclCommunicator(host, timeout=timeout)
    start = time.monotonic()
    try:
        comm.allreduce(cupy.ones(4, dtype=cupy.int64)).get()  # warm: both ranks arrive
        if rank == 1:
            time.sleep(nap)
        out = comm.allreduce(cupy.ones(4, dtype=cupy.int64))
        to_host(out)  # rank 0 waits on the device here (as training reads) until its watchdog aborts NCCL
        comm.allreduce(cupy.ones(4, dtype=cupy.int64))  # an interrupted communicator raises
        return None, time.monotonic() - start
    except RuntimeError as exc:
        return str(exc), time.monotonic() - start
    finally:
        comm.abort("test over")


@pytest.mark.gpu
def test_nccl_watchdog_releases_a_wait_on_a_stuck_peer():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    timeout, nap = 2.0, 8.0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        futures, _ = _launch(c, _nccl_stuck_peer, timeout, nap, world_size=2)
        results = c.gather(futures)
    message, elapsed = results[0]
    assert message is not None and "NCCL allreduce" in message and "another rank is stuck or gone" in message, \
        message
    assert elapsed < timeout + nap, f"rank 0 waited {elapsed:.1f} s"  # released before the peer woke
    # The stuck rank must not hang once it wakes. Whether its late calls fail (its own watchdog)
    # or return is NCCL's business once the peer has aborted (on 4 x H200 they returned); in
    # training the Dask layer interrupts it as soon as rank 0's error reaches the client.
    assert results[1][1] < nap + timeout + 30, f"the stuck rank took {results[1][1]:.1f} s"


def test_release_nccl_frees_what_workers_keep(client):
    """daskgb.dask.release_nccl reaches every worker; CPU workers keep no NCCL communicator."""
    import daskgb.dask as dgb
    from daskgb.collective.state import KeptNccl

    freed = dgb.release_nccl(client)
    assert set(freed) == set(live_workers(client)) and set(freed.values()) == {0}

    class Fake:
        aborted = 0

        def abort(self):
            Fake.aborted += 1

    kept = KeptNccl()
    kept.keep(99, ("key", "gen", Fake()))
    kept.keep(99, ("other", "gen2", Fake()))  # a new keep on a device drops the old one
    assert Fake.aborted == 1 and len(kept) == 1
    assert kept.release() == 1 and Fake.aborted == 2
    assert kept.take(99) is None
