"""NCCL collectives for GPU workers (the rest through a host communicator), and communicators kept from fit to fit.

NCCL communicators kept between fits, one per device: a fit on the same worker processes
and devices, in the same rank order, takes the communicator the last one left instead of
making its own. On 4 x H200 a fit otherwise paid ~75 ms of ncclCommInitRank, ~0.3 s of
connections made at its first collectives and ~0.45 s of ncclCommDestroy
(benchmarks/stamp_rounds.py), most of a short fit's multi-GPU overhead. A communicator is kept
only after a fit that ended cleanly; one that was interrupted or aborted is never
reused. The daskgb setting ``collective.keep-nccl`` false (or DASKGB_KEEP_NCCL=0) destroys
each fit's communicator at its end; release_kept_nccl() frees the kept ones (their buffers
hold device memory), and so does the teardown of the worker's daskgb plugin. They are kept
in the worker's collective state (collective/state.py).
"""

from __future__ import annotations

import collections
import json
import os
import socket
import threading
import time
import uuid

import numpy as np

from .. import config
from .base import Communicator, check_op, check_reducible, is_cupy, resolve_timeout, write_into
from .state import current_worker, drop, state_of

_NCCL_DTYPES = {  # numpy dtype -> name of the cupy.cuda.nccl constant
    np.dtype(np.int8): "NCCL_INT8",
    np.dtype(np.uint8): "NCCL_UINT8",
    np.dtype(np.int32): "NCCL_INT32",
    np.dtype(np.uint32): "NCCL_UINT32",
    np.dtype(np.int64): "NCCL_INT64",
    np.dtype(np.uint64): "NCCL_UINT64",
    np.dtype(np.float16): "NCCL_FLOAT16",
    np.dtype(np.float32): "NCCL_FLOAT32",
    np.dtype(np.float64): "NCCL_FLOAT64",
}
_NCCL_OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}


def release_kept_nccl(worker=None) -> int:
    """Free the NCCL communicators kept between fits in worker's collective state (None: the
    worker whose task calls this, else this process's); returns how many."""
    return state_of(worker if worker is not None else current_worker()).kept_nccl.release()


class NcclCommunicator(Communicator):
    """GPU collectives: cupy arrays through NCCL, everything else through ``host_comm``.

    Every rank builds it at the same point (it is itself a collective): rank 0 makes the NCCL
    unique id and broadcasts it over ``host_comm``; each rank joins on its *current* CUDA
    device, which must be set (``cupy.cuda.Device(i).use()``) before.

    ``allreduce`` of a cupy array returns a new array on that device, enqueued on the current
    stream (no host sync). NCCL's float sums are not in rank order, so they may differ in the
    last bits from run to run; integer sums are exact. That is why GPU histograms are int64
    fixed point: their allreduce is deterministic. NCCL environment variables are left as the
    machine sets them.

    Failures: host-side collectives fail fast as in :class:`DaskCommunicator`. An NCCL kernel
    whose peer died or hangs waits on the GPU, and the host with it, at its next wait for the
    device. Two things release it, both through ``ncclCommAbort``: ``interrupt(reason)``,
    which another thread may call (the Dask layer does, from the worker's event loop, when the
    client sees a rank's worker die), and a watchdog thread that interrupts when an NCCL call
    has not completed ``timeout`` seconds after it was enqueued (``timeout``: the host
    communicator's, i.e. the setting ``collective.timeout``, 600 s by default). After an interrupt every
    collective raises the reason. ``close()`` destroys the NCCL communicator and closes
    ``host_comm``.
    """

    reduces_on_device = True
    # How often the watchdog looks at the oldest NCCL call not yet done.
    WATCH_INTERVAL_S = 0.5

    def __init__(self, host_comm: Communicator, timeout: float | None = None):
        self.host_comm = host_comm
        self.rank = host_comm.rank
        self.world_size = host_comm.world_size
        self._comm = None
        self._device = None
        self._interrupted: str | None = None
        self._lock = threading.Lock()
        self._pending: collections.deque = collections.deque()  # (done event, enqueued at, description)
        self._stop = threading.Event()
        self._watchdog = None
        self.timeout = resolve_timeout(timeout if timeout is not None else getattr(host_comm, "timeout", None))
        # What went through NCCL, for reports: calls and bytes reduced.
        self.nccl_allreduce_calls = 0
        self.nccl_allreduce_bytes = 0
        self.nccl_gather_calls = 0
        self.reused = False  # the NCCL communicator is one an earlier fit kept
        self._key = self._generation = None
        # Read once, as the fit starts: a fit that offered a kept communicator also keeps its own.
        self._keeping = config.get("collective.keep-nccl")
        self._kept = state_of(current_worker()).kept_nccl
        if self.world_size == 1:
            return
        import cupy
        from cupy.cuda import nccl

        self._nccl = nccl
        self._device = cupy.cuda.runtime.getDevice()
        # Every rank offers the communicator it kept from an earlier fit (taken out of the
        # keep, so that no concurrent fit takes it too); it is used only if every rank offers
        # one of the same making, among the same processes and devices in the same order.
        offered = self._kept.take(self._device) if self._keeping else None
        me = [socket.gethostname(), os.getpid(), int(self._device)]
        try:
            views = host_comm.allgather([me, None if offered is None else [offered[0], offered[1]]])
        except BaseException:
            if offered is not None:
                drop(offered[2])
            raise
        # As text: the host collectives may hand tuples back as lists.
        self._key = json.dumps([list(v[0]) for v in views])
        if offered is not None and all(v[1] is not None and list(v[1]) == [self._key, offered[1]] for v in views):
            self._comm, self._generation, self.reused = offered[2], offered[1], True
        else:
            if offered is not None:
                drop(offered[2])
            if self.rank == 0:
                try:
                    uid = ("ok", (nccl.get_unique_id(), uuid.uuid4().hex))
                except Exception as exc:
                    uid = ("error", f"rank 0 could not make an NCCL unique id: {exc!r}")
            else:
                uid = None
            status, uid = host_comm.broadcast(uid, root=0)
            if status != "ok":
                raise RuntimeError(uid)
            uid, self._generation = uid
            try:
                self._comm = nccl.NcclCommunicator(self.world_size, uid, self.rank)
            except Exception as exc:
                raise RuntimeError(f"rank {self.rank}: NCCL communicator init failed on device "
                                   f"{self._device}: {exc}") from exc
        self._watchdog = threading.Thread(target=self._watch, name=f"daskgb-nccl-watchdog-{self.rank}", daemon=True)
        self._watchdog.start()

    def interrupt(self, reason: str) -> None:
        """Abort the NCCL communicator from any thread: a kernel waiting on a peer returns, and
        every later collective raises ``reason``. No host I/O (safe on the event loop)."""
        with self._lock:
            if self._interrupted is not None:
                return
            self._interrupted = f"rank {self.rank}: {reason}"
            comm, self._comm = self._comm, None
        if comm is not None:
            try:
                comm.abort()
            except Exception:
                pass
        self._stop.set()

    def _watch(self) -> None:
        """The watchdog thread: interrupt when the oldest NCCL call is not done after timeout."""
        import cupy

        with cupy.cuda.Device(self._device):
            while not self._stop.wait(self.WATCH_INTERVAL_S):
                while True:
                    with self._lock:
                        oldest = self._pending[0] if self._pending else None
                    if oldest is None:
                        break
                    event, enqueued, what = oldest
                    try:
                        done = event.done
                    except Exception:  # the context is going away with the worker
                        return
                    if done:
                        with self._lock:
                            if self._pending and self._pending[0] is oldest:
                                self._pending.popleft()
                        continue
                    waited = time.monotonic() - enqueued
                    if waited > self.timeout:
                        self.interrupt(f"{what} was not done {waited:.0f} s after it was enqueued (timeout "
                                       f"{self.timeout:g} s): another rank is stuck or gone")
                        return
                    break

    def _check_interrupted(self) -> None:
        if self._interrupted is not None:
            raise RuntimeError(self._interrupted)

    def allreduce(self, x, op: str = "sum", *, out=None):
        check_op(op)
        comm = self._comm  # once: interrupt() may clear it from another thread
        self._check_interrupted()
        if comm is None:
            check_reducible(x, op)
            return write_into(out, x)
        if not is_cupy(x):
            return self.host_comm.allreduce(x, op, out=out)
        import cupy

        if x.dtype not in _NCCL_DTYPES:
            raise TypeError(f"NCCL allreduce supports {sorted(str(d) for d in _NCCL_DTYPES)}, got {x.dtype}")
        if x.device.id != self._device:
            raise ValueError(f"rank {self.rank}: array on device {x.device.id}, NCCL communicator on "
                             f"device {self._device}")
        with cupy.cuda.Device(self._device):
            src = cupy.ascontiguousarray(x)
            if out is None:
                out = cupy.empty_like(src)
            elif not (is_cupy(out) and out.shape == src.shape and out.dtype == src.dtype
                      and out.flags.c_contiguous and out.device.id == self._device):
                raise ValueError(f"allreduce out= must be a C-contiguous array of shape {src.shape} and dtype "
                                 f"{src.dtype} on device {self._device}")
            if src.size:
                stream = cupy.cuda.get_current_stream()
                comm.allReduce(src.data.ptr, out.data.ptr, src.size, getattr(self._nccl, _NCCL_DTYPES[src.dtype]),
                               getattr(self._nccl, _NCCL_OPS[op]), stream.ptr)
                self.nccl_allreduce_calls += 1
                self.nccl_allreduce_bytes += src.nbytes
                if not stream.is_capturing():  # a captured call is watched as part of its graph's replay
                    self.track(f"NCCL allreduce #{self.nccl_allreduce_calls} ({src.nbytes} bytes)")
        return out

    def gather_to(self, root: int, rows, counts):
        """Every rank's rows in rank order on rank root: one grouped NCCL send per other rank and
        the root's matching receives, into one array of sum(counts) rows there (the root's own
        rows copied in on the device). The counts are every rank's, known to all (nothing is
        sized by a host sync); queued on the current stream."""
        comm = self._comm
        self._check_interrupted()
        if not 0 <= root < self.world_size:
            raise ValueError(f"gather root {root} is not in 0..{self.world_size - 1}")
        if len(counts) != self.world_size or int(counts[self.rank]) != rows.shape[0]:
            raise ValueError(f"rank {self.rank}: gather of {rows.shape[0]} rows, but the counts say {list(counts)}")
        if comm is None:
            return rows
        import cupy

        if rows.dtype not in _NCCL_DTYPES:
            raise TypeError(f"NCCL gather supports {sorted(str(d) for d in _NCCL_DTYPES)}, got {rows.dtype}")
        if not is_cupy(rows) or rows.device.id != self._device:
            raise ValueError(f"rank {self.rank}: gather of rows that are not on the communicator's device "
                             f"{self._device}")
        dtype = getattr(self._nccl, _NCCL_DTYPES[rows.dtype])
        per_row = int(np.prod(rows.shape[1:], dtype=np.int64))
        with cupy.cuda.Device(self._device):
            stream = cupy.cuda.get_current_stream()
            rows = cupy.ascontiguousarray(rows)
            out = None
            if self.rank == root:
                out = cupy.empty((int(sum(counts)),) + rows.shape[1:], dtype=rows.dtype)
            starts = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))])
            if out is not None:
                out[starts[root] : starts[root + 1]] = rows
            self._nccl.groupStart()
            try:
                if self.rank == root:
                    for peer in range(self.world_size):
                        n = int(counts[peer]) * per_row
                        if peer != root and n:
                            comm.recv(out.data.ptr + int(starts[peer]) * per_row * rows.itemsize, n, dtype, peer,
                                      stream.ptr)
                elif rows.size:
                    comm.send(rows.data.ptr, rows.size, dtype, root, stream.ptr)
            finally:
                self._nccl.groupEnd()
            self.nccl_gather_calls += 1
            if not stream.is_capturing():
                self.track(f"NCCL gather #{self.nccl_gather_calls} to rank {root} ({rows.nbytes} bytes from "
                           f"rank {self.rank})")
        return out

    def track(self, what: str) -> None:
        """Have the watchdog wait for the work queued so far on the current stream (an NCCL
        call, or a CUDA graph's replay holding some), described as `what` if it times out."""
        import cupy

        if self._comm is None:
            return
        with cupy.cuda.Device(self._device):
            done = cupy.cuda.Event(block=False, disable_timing=True)
            done.record(cupy.cuda.get_current_stream())
        with self._lock:
            self._pending.append((done, time.monotonic(), what))

    def allgather(self, obj) -> list:
        self._check_interrupted()
        return self.host_comm.allgather(obj)

    def broadcast(self, obj, root: int = 0):
        self._check_interrupted()
        return self.host_comm.broadcast(obj, root)

    def _stop_watchdog(self) -> None:
        self._stop.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=5)

    def close(self) -> None:
        """End the fit: the NCCL communicator is kept for the next fit on the same ranks (the
        module's docstring says when; the one kept before on this device is dropped), or destroyed."""
        self._stop_watchdog()
        with self._lock:
            comm, self._comm = self._comm, None
        if comm is not None:
            if self._keeping and self._key is not None and self._interrupted is None:
                self._kept.keep(self._device, (self._key, self._generation, comm))
            else:
                comm.destroy()
        self.host_comm.close()

    def abort(self, reason: str) -> None:
        self._stop_watchdog()
        with self._lock:
            comm, self._comm = self._comm, None
        if comm is not None:
            comm.abort()
        self.host_comm.abort(self._interrupted or reason)
