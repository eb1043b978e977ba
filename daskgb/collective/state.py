"""What the collectives keep between calls on a worker: its jobs' rendezvous, NCCL communicators kept for the next fit.

A Dask worker's state is held by the worker plugin registered under ``PLUGIN_NAME`` (daskgb's
own, daskgb/dask/plugin.py), as its ``collective`` attribute; the plugin's teardown frees it
with the worker (CollectiveState.close). The collectives find it through the worker they run
on (``state_of``), not through an argument, so that one job's start_root, connect and
stop_root use the same state whoever calls them. Where there is no worker (collectives run
from a plain thread with ``loop=``) or the worker has no such plugin (tasks that call the
collectives themselves, as tests and benchmarks/ scripts do), the process's own state serves; it
lives as long as the process. This package never imports the Dask layer: the plugin is
found by name on the worker.
"""

from __future__ import annotations

import threading

PLUGIN_NAME = "daskgb"


class KeptNccl:
    """NCCL communicators kept between fits, one per device (collective/nccl.py says which fit
    may take one). Each entry is (key: the ranks' [host, pid, device] in rank order as JSON,
    generation: the id the communicator was made with, communicator). Any thread."""

    def __init__(self):
        self._kept: dict = {}  # device -> (key, generation, communicator)
        self._lock = threading.Lock()
        self._closed = False  # the worker is closing: a fit ending now keeps nothing

    def __len__(self) -> int:
        return len(self._kept)

    def take(self, device: int):
        """The entry kept for device, taken out (no concurrent fit takes it too), or None."""
        with self._lock:
            return self._kept.pop(device, None)

    def keep(self, device: int, entry) -> None:
        """Keep entry for device; the one kept there before is freed (entry itself, once closed)."""
        with self._lock:
            if self._closed:
                dropped = entry
            else:
                dropped = self._kept.pop(device, None)
                self._kept[device] = entry
        if dropped is not None:
            drop(dropped[2])

    def release(self) -> int:
        """Free every kept communicator; returns how many."""
        with self._lock:
            kept = list(self._kept.values())
            self._kept.clear()
        for entry in kept:
            drop(entry[2])
        return len(kept)

    def close(self) -> int:
        """release(), and keep nothing from now on; returns how many were kept."""
        with self._lock:
            self._closed = True
        return self.release()


def drop(comm) -> None:
    """Free an NCCL communicator that will not be used again. Abort, not destroy: destroy
    waits on the peers, which may have dropped theirs already or be gone."""
    try:
        comm.abort()
    except Exception:
        pass


class CollectiveState:
    """The collectives' state of one worker (or of the process: see the module's docstring)."""

    def __init__(self):
        # job id -> rank 0's rendezvous (collective/dask_comms.py) until rank 0 connects;
        # changed only on the worker's event loop.
        self.roots: dict = {}
        self.kept_nccl = KeptNccl()

    async def close(self, reason: str = "the worker is closing") -> int:
        """On the worker's event loop: stop the rendezvous still listening (their parked peers
        are told why) and free the kept NCCL communicators; returns how many were kept."""
        for rendezvous in list(self.roots.values()):
            await rendezvous.shutdown(error=f"collective root of job {rendezvous.job_id!r} stopped: {reason}")
        return self.kept_nccl.close()


_PROCESS = CollectiveState()


def current_worker():
    """The Dask worker whose task runs this code, or None (a plain thread; Client.run's functions,
    which are given their worker as dask_worker instead)."""
    try:
        from distributed import get_worker
    except ImportError:
        return None
    try:
        return get_worker()
    except ValueError:
        return None


def state_of(worker) -> CollectiveState:
    """The collective state of worker (the one its daskgb plugin holds); the process's where
    worker is None or has no such plugin."""
    plugin = worker.plugins.get(PLUGIN_NAME) if worker is not None else None
    state = getattr(plugin, "collective", None)
    return state if isinstance(state, CollectiveState) else _PROCESS
