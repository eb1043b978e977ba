"""The SPMD task each worker runs: join the collective, train on local rows in lock-step, return the model."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time

from .plugin import PLUGIN_NAME, RunningJob, worker_state


async def interrupt_job(job_id: str, reason: str, dask_worker=None):
    """Run on the worker's event loop by the client (Client.run) when training failed elsewhere:
    release this rank's NCCL waits so its task ends and the worker is free. Returns the round
    this rank was in (None where it runs no such job)."""
    state = getattr(dask_worker.plugins.get(PLUGIN_NAME), "state", None) if dask_worker is not None else None
    job = state.running.get(job_id) if state is not None else None
    if job is None:
        return None
    interrupt = getattr(job.comm, "interrupt", None)
    if interrupt is not None:
        interrupt(reason)
    return getattr(job.comm, "training_round", None)


def start_collective(job_id: str) -> str:
    """Run on rank 0's worker before training: open the rendezvous and return its address."""
    from ..collective import start_root

    return start_root(job_id)


def train_on_worker(job_id, root_address, rank, world_size, options, dtrain, evals, *, timeout=None,
                    progress_topic=None, dashboard=False):
    """One worker's share of training with the fit's TrainingOptions (its checkpoints: rank 0
    writes and reads the files). Every rank grows the same trees (the histograms are summed
    across ranks before any decision), so rank 0's booster is the model. dashboard: report each
    round to the scheduler's daskgb page (dask/dashboard.py)."""
    from ..collective import DaskCommunicator, NcclCommunicator

    state = worker_state()
    state.device_in_use()
    started = time.perf_counter()
    on_gpu = options.train_params.device == "cuda"
    # GPU fits reduce on the device (NCCL): their few host messages keep Dask's comms.
    comm = DaskCommunicator.connect(job_id, root_address, rank, world_size, timeout=timeout,
                                    direct=False if on_gpu else None)
    if on_gpu and world_size > 1:
        comm = NcclCommunicator(comm)
    setup_s = time.perf_counter() - started
    state.running[job_id] = RunningJob(comm, time.time())
    # As a context manager the communicator aborts on an exception, so the other
    # ranks fail at once with this rank's error rather than a bare lost connection.
    try:
        result = _train_ranked(comm, job_id, rank, world_size, options, dtrain, evals, progress_topic, dashboard)
    finally:
        state.running.pop(job_id, None)
        if on_gpu:
            state.give_back_device_memory_when_idle()
    result["collective"]["setup_s"] = setup_s
    return result


def device_in_use() -> None:
    """This worker's WorkerState.device_in_use (dask/plugin.py), for a task that starts using the device."""
    worker_state().device_in_use()


def give_back_device_memory_when_idle() -> None:
    """This worker's WorkerState.give_back_device_memory_when_idle (dask/plugin.py)."""
    worker_state().give_back_device_memory_when_idle()


def _train_ranked(comm, job_id, rank, world_size, options, dtrain, evals, progress_topic, dashboard):
    from ..training import run

    num_boost_round = options.num_boost_round
    with comm, heap_kept_while_training():
        history: dict = {}
        # With a progress topic, rank 0 reports each round to the client (dask/progress.py).
        reporter = None
        if progress_topic is not None and rank == 0:
            from .progress import RoundReporter

            reporter = RoundReporter(progress_topic, num_boost_round)
        board = None
        if dashboard:  # every rank: its phase times, rows and memory
            from .dashboard import RoundBoard

            board = RoundBoard(job_id, rank, world_size, num_boost_round, dtrain.n_rows, options.train_params.device)
        with board or contextlib.nullcontext():
            booster = run(options, dtrain, evals, comm=comm, evals_result=history,
                          after_round=_each_round(board, reporter, _stop_when_abandoned(job_id, rank)))
    stats = {"rank": rank, "communicator": type(comm).__name__, "nccl_reused": getattr(comm, "reused", False),
             "nccl_allreduce_calls": getattr(comm, "nccl_allreduce_calls", 0),
             "nccl_allreduce_bytes": getattr(comm, "nccl_allreduce_bytes", 0)}
    return {"booster": booster if rank == 0 else None, "history": history, "collective": stats}


def checkpoint_dir_ready(path: str) -> None:
    """On rank 0's worker before training: the checkpoint directory exists and takes files."""
    from pathlib import Path

    from ..checkpoint import check_writable

    check_writable(Path(path))


class FitAbandoned(RuntimeError):
    """The client that started the fit is gone (closed, or interrupted): its workers stop."""


def _stop_when_abandoned(job_id: str, rank: int):
    """An after-round hook raising FitAbandoned once the scheduler has cancelled this task: when
    the fit's client closes or is interrupted, the scheduler releases its keys and the workers
    mark the running task cancelled, but a thread cannot be stopped from outside; it stops here,
    at its next round (every rank does, each seeing its own task cancelled). None outside a task."""
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
    except (ImportError, ValueError, AttributeError):
        return None
    if key is None:
        return None

    def check(round_index, history):
        ts = worker.state.tasks.get(key)
        if ts is None or ts.state == "cancelled":
            raise FitAbandoned(f"daskgb fit {job_id[:8]}: its client is gone (closed or interrupted), so rank "
                               f"{rank} stopped after round {round_index}")

    return check


def _each_round(*hooks):
    """One after-round hook calling the given ones (None where none is given)."""
    hooks = [h for h in hooks if h is not None]
    if len(hooks) <= 1:
        return hooks[0] if hooks else None

    def each(round_index, history):
        for h in hooks:
            h(round_index, history)

    return each


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_DEFAULT_MMAP_THRESHOLD = 128 * 1024


@contextlib.contextmanager
def heap_kept_while_training():
    """Let freed heap memory be reused while this worker trains, then trim it as the worker asked.

    Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536 so that they hand freed
    memory back to the system. With it set, glibc also stops raising its mmap threshold, so
    every array over 128 KiB is a fresh mmap and every free of heap top above 64 KiB shrinks
    the heap: the many short-lived arrays of a training round then pay page faults each time.
    Measured on the CPU backend (2,000 rows, depth 4): 10.2-12.4 ms a round in a plain
    process, 14.5-17.3 ms with that variable set (docs/performance_notes.md). During training
    both thresholds are raised; afterwards the worker's trim threshold and glibc's default
    mmap threshold come back and the heap is trimmed once. Nothing changes where the variable
    is not set or the C library is not glibc.
    """
    trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    libc = _glibc() if trim is not None else None
    if libc is None:
        yield
        return
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    try:
        yield
    finally:
        try:
            libc.mallopt(_M_TRIM_THRESHOLD, int(trim))
        except ValueError:
            pass
        libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP_THRESHOLD)
        libc.malloc_trim(0)


def _glibc():
    """glibc through ctypes, or None on another C library or platform."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None
