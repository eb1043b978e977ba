"""Waiting on tasks pinned to workers without hanging when a worker dies."""

from __future__ import annotations

import time

# How often the client checks that every worker it waits on is still there.
WATCH_INTERVAL_S = 1.0
# How long a rank's report of a peer's failure waits for that peer's own error (which is
# raised as soon as the failing rank's task has unwound; on a loaded machine that took over 2 s).
ERROR_GRACE_S = 10.0


def live_workers(client) -> set:
    """The addresses of the workers the scheduler has now, asked of the scheduler itself (its
    identity call; no code is sent to the scheduler).

    Not Client.scheduler_info()["workers"]: that returns the client's cached identity, which
    the client's periodic refresh (every couple of seconds, on its event loop) overwrites
    with one that lists no workers, so a read can see none even on a healthy cluster."""
    return set(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def gather_watching(client, futures, workers, what: str, on_error=None):
    """Results of futures[i], pinned to workers[i]; raises as soon as one fails or its worker leaves.

    A task pinned to a worker that died never runs anywhere else, so waiting on it
    alone would hang. When a worker dies during training its peers' collectives
    fail within milliseconds with an error naming it, so a failed future is
    reported first; a task lost or cancelled without any peer error is reported
    by rank and address. on_error(exception) is called once, at the first failed future
    (the training layer releases the other ranks' NCCL waits there, so that they report too).
    """
    from distributed import wait

    lost_since = erred_since = None
    while True:
        pending = [f for f in futures if f.status == "pending"]
        if pending:
            try:
                wait(pending, timeout=WATCH_INTERVAL_S, return_when="FIRST_COMPLETED")
            except Exception:  # timeout, or futures cancelled because their worker died: look below
                pass
        erred = [f for f in futures if f.status == "error"]
        if erred and erred_since is None:
            erred_since = time.monotonic()
            if on_error is not None:
                on_error(erred[0].exception())
        if erred:
            # A rank whose peer raised (bad labels, say: a ValueError) fails in its collective with a
            # RuntimeError that only reports it; the peer's own error is the one to raise, so it is
            # given a moment to land. Without it (a worker died), the report is the error.
            # The statuses are read again, once: on_error asks the workers, which takes a while, and
            # the peer's error landing meanwhile must be seen as erred, not missed as no longer pending.
            statuses = [f.status for f in futures]
            erred = [f for f, s in zip(futures, statuses) if s == "error"]
            cause = next((f for f in erred if not isinstance(f.exception(), RuntimeError)), None)
            if cause is None and "pending" in statuses and \
                    time.monotonic() - erred_since < ERROR_GRACE_S and \
                    set(workers) <= live_workers(client):  # a dead worker's own error never comes
                continue
            f = cause or erred[0]
            exc, tb = f.exception(), f.traceback()  # before cancelling, which would replace them
            client.cancel(futures)
            raise exc.with_traceback(tb)
        if all(f.status == "finished" for f in futures):
            return client.gather(futures)
        alive = live_workers(client)
        lost = [(rank, a) for rank, (a, f) in enumerate(zip(workers, futures))
                if a not in alive or f.status in ("cancelled", "lost")]
        if not lost:
            lost_since = None
        else:
            # Give the surviving workers a moment to report their (more precise) error.
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since > 5.0 or not any(f.status == "pending" for f in futures):
                client.cancel(futures)
                raise RuntimeError(
                    f"daskgb: worker(s) {', '.join(f'{a} (rank {r})' for r, a in lost)} died or left the cluster "
                    f"during {what}; the data they held is gone, so {what} stopped")
