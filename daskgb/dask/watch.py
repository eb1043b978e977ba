"""Waiting on tasks pinned to workers without hanging when a worker dies: woken as a task ends or a worker leaves.

A task pinned to a worker that died never runs anywhere else, so waiting on it alone would
hang. The wait wakes when one of its futures ends (a done callback) or when the scheduler
publishes the removal of one of its workers (an event the client follows); it asks the
scheduler which workers it has only at a worker's first watch, after a failure, and every
BACKSTOP_S as a backstop for an event that did not arrive.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import weakref

from .session import session_of

# How often a wait asks the scheduler for its workers anyway: a removal event can be missed
# only when a worker leaves as the client starts following it.
BACKSTOP_S = 10.0
# How long a rank's report of a peer's failure waits for that peer's own error (which is
# raised as soon as the failing rank's task has unwound; on a loaded machine that took over 2 s).
ERROR_GRACE_S = 10.0
# How long the peers of a lost worker are given to report their own, more precise, error.
LOST_GRACE_S = 5.0
# A worker the scheduler has not heard from for this long (or four of its heartbeat intervals,
# if longer) is taken as stopped (SIGSTOP, a frozen host, an event loop blocked): healthy workers
# heartbeat every 0.5 s on clusters of up to 10 workers, every few seconds on large ones.
SILENT_AFTER_S = 3.0


def live_workers(client) -> set:
    """The addresses of the workers the scheduler has now, asked of the scheduler itself
    (Client.nthreads: one small answer; no code is sent to the scheduler).

    Not Client.scheduler_info()["workers"]: that returns the client's cached identity, which
    the client's periodic refresh (every couple of seconds, on its event loop) overwrites with
    one that lists no workers, so a read can see none even on a healthy cluster;
    scheduler_info(n_workers=-1) refreshes the cache first, but the periodic refresh can land
    between that and the read."""
    return set(client.nthreads())


def silent_workers(client, workers) -> dict:
    """{address: seconds since the scheduler last heard from it} for those of these workers that
    have not heartbeated for SILENT_AFTER_S (or 4 heartbeat intervals): alive as far as the
    scheduler knows (it removes them only after distributed.scheduler.worker-ttl, 5 minutes by
    default), but not answering. Asked once, after a failure, to name a stuck rank: NCCL's
    watchdog can only say that some peer did not arrive. {} if the scheduler cannot be asked."""
    workers = list(workers)
    if not workers:
        return {}

    # Defined here so that it travels by value: the scheduler need not import daskgb.
    def silent_on_scheduler(workers, silent_after, dask_scheduler=None) -> dict:
        from distributed.metrics import time as now
        from distributed.scheduler import heartbeat_interval

        limit = max(silent_after, 4 * heartbeat_interval(len(dask_scheduler.workers)))
        t = now()
        seen = {a: t - dask_scheduler.workers[a].last_seen for a in workers if a in dask_scheduler.workers}
        return {a: round(s, 1) for a, s in seen.items() if s > limit}

    try:
        return client.run_on_scheduler(silent_on_scheduler, workers, SILENT_AFTER_S)
    except Exception:  # a closing cluster: nothing to name
        return {}


class _Wait:
    """One gather_watching's view: the workers it watches, those seen to leave, and the event
    that wakes it (set by its futures' done callbacks and by the removal events)."""

    def __init__(self, workers):
        self.workers = frozenset(workers)
        self.removed: set[str] = set()
        self.wake = threading.Event()
        self.newly_followed = False  # some worker's events were not followed before this wait
        self.silent: dict | None = None  # pending ranks' workers not heard from, asked after the first error

    def lost(self, address: str) -> None:
        self.removed.add(address)
        self.wake.set()

    def future_done(self, _future) -> None:
        self.wake.set()


class WorkerWatch:
    """A client's one follower of the scheduler's removal events for the workers it waits on.

    The scheduler publishes a worker's removal on topic "all" and on the worker's own topic
    (its address). This follows the workers' own topics, not "all": a Client keeps one handler
    per topic (subscribe_topic replaces the one there, and no public call reads it), so
    subscribing "all" would replace a handler the user set on it; "all" also carries every
    gather, scatter and client of the cluster. A worker's topic is subscribed at its first
    wait and stays subscribed while the worker lives, so that back-to-back fits cost nothing
    here; it is unsubscribed when the worker leaves, so subscriptions follow the live workers
    and do not pile up. (A handler the user set on such a worker's own topic is replaced.)
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._followed: set[str] = set()
        self._waits: set[_Wait] = set()

    @contextlib.contextmanager
    def waiting(self, client, workers):
        """A _Wait for these workers, told of their removals while the context lasts."""
        wait = _Wait(workers)
        client_ref = weakref.ref(client)  # the client holds the handlers: no reference back
        with self._lock:
            # Under the lock: (un)subscribe messages leave in the order the followed set changes.
            for address in sorted(wait.workers - self._followed):
                client.subscribe_topic(address, functools.partial(self._on_event, client_ref, address))
                self._followed.add(address)
                wait.newly_followed = True
            self._waits.add(wait)
        try:
            yield wait
        finally:
            with self._lock:
                self._waits.discard(wait)

    def check(self, client, wait: _Wait) -> None:
        """Ask the scheduler which of wait's workers are gone (for a removal event that did not come)."""
        gone = wait.workers - live_workers(client)
        for address in gone:
            wait.lost(address)
        self._unfollow(client, gone)

    def _on_event(self, client_ref, address: str, event) -> None:
        """On the client's event loop: an event on a followed worker's topic."""
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        client = client_ref()
        if client is not None:
            self._unfollow(client, [address])
        with self._lock:
            waits = [w for w in self._waits if address in w.workers]
        for wait in waits:
            wait.lost(address)

    def _unfollow(self, client, addresses) -> None:
        with self._lock:
            for address in addresses:
                if address in self._followed:
                    self._followed.discard(address)
                    try:
                        client.unsubscribe_topic(address)
                    except Exception:  # a closing client: nothing left to unsubscribe from
                        pass


def _watch_of(client) -> WorkerWatch:
    session = session_of(client)
    with session.lock:
        if session.watch is None:
            session.watch = WorkerWatch()
        return session.watch


def gather_watching(client, futures, workers, what: str, on_error=None):
    """Results of futures[i], pinned to workers[i]; raises as soon as one fails or its worker leaves.

    When a worker dies during training its peers' collectives fail within milliseconds with
    an error naming it, so a failed future is reported first; a task lost or cancelled without
    any peer error is reported by rank and address. on_error(exception) is called once, at
    the first failed future (the training layer releases the other ranks' NCCL waits there,
    so that they report too).
    """
    watch = _watch_of(client)
    with watch.waiting(client, workers) as wait:
        for f in futures:
            f.add_done_callback(wait.future_done)
        if wait.newly_followed:  # a worker that left before its events were followed
            watch.check(client, wait)
        return _wait_for(client, watch, wait, futures, workers, what, on_error)


def _wait_for(client, watch: WorkerWatch, wait: _Wait, futures, workers, what: str, on_error):
    lost_since = erred_since = None
    next_check = time.monotonic() + BACKSTOP_S
    while True:
        wait.wake.clear()  # before looking: whatever changes from here on wakes the wait below
        erred = [f for f in futures if f.status == "error"]
        if erred and erred_since is None:
            erred_since = time.monotonic()
            if on_error is not None:
                on_error(erred[0].exception())
            watch.check(client, wait)  # a dead worker's own error never comes: know now whether one died
        if erred:
            # A rank whose peer raised (bad labels, say: a ValueError) fails in its collective with a
            # RuntimeError that only reports it; the peer's own error is the one to raise, so it is
            # given a moment to land. Without it (a worker died), the report is the error.
            # The statuses are read again, once: on_error asks the workers, which takes a while, and
            # the peer's error landing meanwhile must be seen as erred, not missed as no longer pending.
            statuses = [f.status for f in futures]
            erred = [f for f, s in zip(futures, statuses) if s == "error"]
            cause = next((f for f in erred if not isinstance(f.exception(), RuntimeError)), None)
            left = erred_since + ERROR_GRACE_S - time.monotonic()
            if wait.silent is None:  # a stopped peer never reports: waiting for it is no use
                wait.silent = silent_workers(client, [a for a, s in zip(workers, statuses) if s == "pending"])
            if cause is None and "pending" in statuses and left > 0 and not wait.removed and not wait.silent:
                next_check = _sleep(client, watch, wait, min(left, next_check - time.monotonic()), next_check)
                continue
            f = cause or erred[0]
            exc, tb = f.exception(), f.traceback()  # before cancelling, which would replace them
            client.cancel(futures)
            raise exc.with_traceback(tb)
        if all(f.status == "finished" for f in futures):
            return client.gather(futures)
        lost = [(rank, a) for rank, (a, f) in enumerate(zip(workers, futures))
                if a in wait.removed or f.status in ("cancelled", "lost")]
        if not lost:
            lost_since = None
            timeout = next_check - time.monotonic()
        else:
            # Give the surviving workers a moment to report their (more precise) error.
            lost_since = lost_since or time.monotonic()
            left = lost_since + LOST_GRACE_S - time.monotonic()
            if left < 0 or not any(f.status == "pending" for f in futures):
                client.cancel(futures)
                raise RuntimeError(
                    f"daskgb: worker(s) {', '.join(f'{a} (rank {r})' for r, a in lost)} died or left the cluster "
                    f"during {what}; the data they held is gone, so {what} stopped")
            timeout = min(left + 0.01, next_check - time.monotonic())
        next_check = _sleep(client, watch, wait, timeout, next_check)


def _sleep(client, watch: WorkerWatch, wait: _Wait, timeout: float, next_check: float) -> float:
    """Wait until woken or timeout; at the backstop's time, ask the scheduler. The next check's time."""
    wait.wake.wait(max(timeout, 0.0))
    if time.monotonic() >= next_check:
        watch.check(client, wait)
        return time.monotonic() + BACKSTOP_S
    return next_check
