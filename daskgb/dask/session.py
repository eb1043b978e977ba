"""What daskgb keeps on the client for each Dask client: its worker plugin's registration, its watch, its fit locks.

One ClientSession per Client, made on first use and dropped with the client (the sessions are
weakly keyed by it). Nothing in a session refers back to its client, so that a client nobody
holds still goes away. The modules that use a session keep their own parts in it:
dask/plugin.py the scheduler the worker plugin was registered with, dask/watch.py the
client's WorkerWatch, dask/fit_lock.py one distributed.Lock per worker.
"""

from __future__ import annotations

import threading
import weakref


class ClientSession:
    """daskgb's client-side state of one Client; ``lock`` guards its parts' creation."""

    def __init__(self):
        self.lock = threading.Lock()
        self.plugin_scheduler: str | None = None  # the scheduler address the worker plugin was registered with
        self.watch = None  # dask/watch.py WorkerWatch
        self.fit_locks: dict = {}  # worker address -> distributed.Lock (dask/fit_lock.py)


_SESSIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


def session_of(client) -> ClientSession:
    """The client's session (made on first use; two threads of one client share it)."""
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(client)
        if session is None:
            session = _SESSIONS[client] = ClientSession()
        return session
