"""daskgb's state on each Dask worker, owned by a WorkerPlugin: its training jobs, collective state, memory give-back.

The client-side entry points (DaskQuantileMatrix, train, predict, release_nccl) call
``register(client)``, which installs the plugin once per client (later calls cost nothing;
the plugin is idempotent, so other clients of the cluster leave the installed one in place).
The scheduler installs it on every worker, those that join later included. Its setup makes the
worker's WorkerState; tasks reach it through ``worker_state()``, Client.run functions through
their ``dask_worker``; its teardown (the worker closing, or the plugin unregistered) frees
what the state holds: the collective's rendezvous and kept NCCL communicators, and the
give-back threads still waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time

from .. import config
from ..collective.state import PLUGIN_NAME, CollectiveState
from .session import session_of

try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - distributed is a dependency of daskgb.dask
    WorkerPlugin = object

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class RunningJob:
    """A training job's rank on this worker: its communicator (so that the client can release a
    rank whose NCCL kernels wait on a peer that is gone: dask/worker.py interrupt_job) and when
    it started (time.time(), for the message of a fit that waits for this worker)."""

    comm: object
    started: float


class WorkerState:
    """What daskgb keeps on one worker between tasks; the plugin's setup makes it, its teardown frees it."""

    def __init__(self):
        self.running: dict[str, RunningJob] = {}  # job id -> its rank here
        # Held here rather than in the collective package, so that it goes with the worker.
        self.collective = CollectiveState()
        # Bumped by every daskgb task that uses the device (device_in_use): a give-back waiting
        # for an idle worker sees it and skips.
        self._activity = 0
        # Held while memory is given back: a task that starts meanwhile waits (a cudaFree while a
        # training captures a CUDA graph would break the capture).
        self._giving_back = threading.Lock()
        self._closed = threading.Event()
        self._waiting: set[threading.Thread] = set()  # give-backs waiting for the worker to idle
        self._waiting_lock = threading.Lock()

    def device_in_use(self) -> None:
        """Called as a daskgb task that uses the device starts on a worker (building a matrix,
        training): a pending give-back of cached device memory is skipped, one under way waited for."""
        self._activity += 1
        with self._giving_back:
            pass

    def give_back_device_memory_when_idle(self) -> None:
        """_give_back_device_memory once no daskgb task has started on this worker for the
        setting worker.give-back-after (2 s by default; 0: at once), not as the fit ends: on Higgs
        10.5M (H100, benchmarks/dask_overhead.py) giving back took 0.08-0.14 s of each fit, and
        daskgb.dask.train went from 2.96-3.02 s to 2.91 s (a plain worker task training the same
        rows: 2.78-2.91 s). Back-to-back fits (a parameter search) keep the pool's blocks; an idle
        worker still returns what a fit cached."""
        wait = config.get("worker.give-back-after")
        device, seen = _current_device(), self._activity
        if wait <= 0:
            with self._giving_back:
                _give_back_device_memory(device)
            return
        thread = threading.Thread(target=self._give_back_if_idle, args=(device, seen, wait), name="daskgb-give-back",
                                  daemon=True)
        with self._waiting_lock:
            if self._closed.is_set():
                return  # the worker is closing: its memory goes with it
            self._waiting.add(thread)
        thread.start()

    def _give_back_if_idle(self, device: int, seen: int, wait: float) -> None:
        try:
            if self._closed.wait(wait):
                return
            with self._giving_back:
                if self._activity != seen or self.running:
                    return  # another task uses the device: it gives back when it ends
                try:
                    _give_back_device_memory(device)
                except Exception as e:  # a worker shutting down: nothing to give back to
                    logger.debug("giving back device memory failed: %s", e)
        finally:
            with self._waiting_lock:
                self._waiting.discard(threading.current_thread())

    def stop_giving_back(self, timeout: float = 5.0) -> None:
        """Wake the give-backs still waiting, so that they end without giving back; wait for them."""
        with self._waiting_lock:
            self._closed.set()
            waiting = list(self._waiting)
        for thread in waiting:
            thread.join(timeout)

    async def close(self) -> None:
        """On the worker's event loop, as the worker closes: release the NCCL waits of the jobs
        still running, free the collective's state, end the give-backs."""
        for job in list(self.running.values()):
            interrupt = getattr(job.comm, "interrupt", None)  # NCCL's: no host I/O, safe on the loop
            if interrupt is not None:
                interrupt("the worker is closing")
        await self.collective.close()
        await asyncio.to_thread(self.stop_giving_back)


class DaskgbWorkerPlugin(WorkerPlugin):
    """Installs a WorkerState on each worker (``state``) and frees it at teardown. ``collective``
    is how daskgb.collective finds the worker's collective state (collective/state.py)."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self):
        self.state: WorkerState | None = None

    @property
    def collective(self) -> CollectiveState | None:
        return None if self.state is None else self.state.collective

    def setup(self, worker) -> None:
        self.state = WorkerState()

    async def teardown(self, worker) -> None:
        if self.state is not None:
            await self.state.close()


def register(client) -> None:
    """Install daskgb's worker plugin on the client's cluster: a scheduler round trip the first
    time for this client (and again if it reconnects to another scheduler), nothing after."""
    if client is None:
        raise ValueError("no Dask client: pass client=, or make a distributed.Client first")
    if getattr(client, "status", None) in ("closing", "closed") or client.scheduler is None:
        raise ValueError(f"the Dask client was closed (its status is {client.status!r}): make a new "
                         "distributed.Client, and build the DaskQuantileMatrix again with it")
    session = session_of(client)
    scheduler = client.scheduler.address
    with session.lock:
        if session.plugin_scheduler == scheduler:
            return
        client.register_plugin(DaskgbWorkerPlugin())
        session.plugin_scheduler = scheduler


def worker_state() -> WorkerState:
    """The WorkerState of the worker running this task."""
    from distributed import get_worker

    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if getattr(plugin, "state", None) is None:
        raise RuntimeError(f"daskgb's worker plugin is not installed on worker {worker.address}: daskgb's Dask "
                           "entry points install it (DaskQuantileMatrix, train, predict); a task of daskgb's "
                           "run some other way needs daskgb.dask.plugin.register(client) first")
    return plugin.state


def running_fits(dask_worker) -> list[str]:
    """Client.run function: the training jobs running on this worker, described for a message."""
    state = getattr(dask_worker.plugins.get(PLUGIN_NAME), "state", None)
    if state is None:
        return []
    now = time.time()
    return [f"job {job[:8]}, rank {getattr(r.comm, 'rank', 0)} of {getattr(r.comm, 'world_size', 1)}, "
            f"for {now - r.started:.0f} s" for job, r in list(state.running.items())]


def _give_back_device_memory(device: int | None = None) -> None:
    """Return the blocks CuPy's pools cached (on device, default the current one) to the
    device: a worker holds the cluster's GPU between fits, and the cache would otherwise keep
    the training peak (and grow with fragmentation from fit to fit). Blocks in use (the
    worker's data, a matrix the user keeps) stay."""
    import gc

    import cupy

    gc.collect()  # arrays held only by reference cycles (a failed round's frames) go first
    with cupy.cuda.Device(device):
        cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


def _current_device() -> int:
    import cupy

    return cupy.cuda.Device().id
