"""One fit at a time on a worker: a fit on workers another fit is training on waits for it, then trains.

Without it, two fits' tasks interleave on the workers: on a worker of one thread, rank 0 of
one fit can wait in its collective for a rank of its own queued behind a rank of the other
fit, which waits for a rank queued behind the first: both hang until the collective's timeout.

Each worker has a lock on the scheduler, a ``distributed.Lock`` named "daskgb-fit-<address>"
(a Semaphore of one lease). A fit takes its workers' locks one by one in address order, the
same order for every fit, so two fits sharing workers never each hold a lock the other waits
for; it releases them as it ends or fails. A lease is refreshed by the holding client's event
loop: if that client dies, the scheduler frees its leases after
``distributed.scheduler.locks.lease-timeout`` (30 s by default), and the waiting fit goes on.
(A ``distributed.MultiLock`` takes all the locks in one call, but nothing frees it when its
client dies.) Each Lock object is kept in the client's session (dask/session.py): its lease
refresh is a callback on the client's event loop, which would live on if each fit made one.

A fit that waits more than WARN_AFTER_S says so once (a logging warning naming the busy
workers and the jobs training there); after the daskgb setting ``dask.wait-for-busy-workers``
(3600 s by default) it gives up with WorkersBusyError, naming them too.
"""

from __future__ import annotations

import contextlib
import logging
import time

from .. import config
from .plugin import running_fits
from .session import session_of

logger = logging.getLogger(__name__)

# Seconds a fit waits for busy workers before it says that it waits.
WARN_AFTER_S = 5.0


class WorkersBusyError(RuntimeError):
    """A fit waited longer than the setting dask.wait-for-busy-workers for workers another fit
    trains on. workers: their addresses."""

    def __init__(self, message: str, workers=()):
        super().__init__(message)  # args = (message,): it pickles
        self.workers = list(workers)


def lock_name(address: str) -> str:
    """The scheduler's name of a worker's fit lock."""
    return f"daskgb-fit-{address}"


def _lock_of(client, address: str):
    from distributed import Lock

    session = session_of(client)
    with session.lock:
        lock = session.fit_locks.get(address)
        if lock is None:
            lock = session.fit_locks[address] = Lock(lock_name(address), scheduler_rpc=client.scheduler,
                                                     loop=client.loop)
        return lock


@contextlib.contextmanager
def workers_held(client, workers):
    """Hold the fit locks of these workers for the context: wait while another fit holds any."""
    addresses = sorted(set(workers))
    limit = config.get("dask.wait-for-busy-workers")
    started = time.monotonic()
    held, warned = [], False
    try:
        for i, address in enumerate(addresses):
            lock = _lock_of(client, address)
            while True:
                until = limit if warned else min(limit, WARN_AFTER_S)
                if lock.acquire(timeout=max(0.0, until - (time.monotonic() - started))):
                    held.append(lock)
                    break
                waited = time.monotonic() - started
                if waited >= limit:
                    busy, why = _busy(client, addresses[i:])
                    raise WorkersBusyError(
                        f"daskgb: waited {waited:.0f} s for workers busy with another daskgb fit: {why}. Raise the "
                        "daskgb setting dask.wait-for-busy-workers (seconds) to wait longer, or train on other "
                        "workers", busy)
                if not warned:
                    warned = True
                    _, why = _busy(client, addresses[i:])
                    logger.warning("daskgb: this fit waits for workers busy with another daskgb fit: %s. It starts "
                                   "when they are free (it gives up after %g s: daskgb setting "
                                   "dask.wait-for-busy-workers)", why, limit)
        yield
    finally:
        for lock in reversed(held):
            try:
                lock.release()
            except Exception as e:  # the scheduler is gone or unreachable: the lease runs out
                logger.warning("daskgb: could not release a worker's fit lock (%s); the scheduler frees it after "
                               "distributed.scheduler.locks.lease-timeout", e)


def _busy(client, addresses) -> tuple[list, str]:
    """Which of these workers (the first is the one waited for) train what: asked of them,
    within a few seconds at most."""
    try:
        jobs = client.run(running_fits, workers=list(addresses), on_error="return", callback_timeout=5)
    except Exception:  # the workers did not answer in time: name the one waited for
        jobs = {}
    busy = [a for a in addresses if isinstance(jobs.get(a), list) and jobs[a]]
    if not busy:  # its fit holds the lock but trains nothing there yet (setting up, or ending)
        return [addresses[0]], f"{addresses[0]} (held by a fit not training there at the moment)"
    return busy, ", ".join(f"{a} ({'; '.join(jobs[a])})" for a in busy)
