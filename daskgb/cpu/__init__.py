"""The compiled CPU path's tools: numba's jit as daskgb compiles its CPU loops, and the threads they run on.

The numpy backend is the readable oracle of every hot loop; on CPU workers the compiled
backend (backend/compiled_backend.py) runs loops compiled here beside it. Two choices:
- Loops are compiled `nogil` and run on daskgb's own thread pool (run_chunks), not with
  numba's `parallel=True`: numba's default threading layer may not be entered from two
  threads at once, and a Dask worker runs tasks on several; our pool also splits work
  deterministically (a chunk of features or rows per thread), so sums keep the oracle's order.
- `cache=True`: a compiled loop is written beside its module (or in numba's user cache when
  that is read-only), so only the first fit on a machine pays the compilation.
numba is imported here only, when a CPU fit first needs a compiled loop; GPU paths never import it.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_threads = 0  # 0: every core this process may run on


def available() -> bool:
    """Whether numba imports (the compiled backend's one requirement)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def compiled_loaded() -> bool:
    """Whether this process runs the compiled CPU backend (backend/compiled_backend.py is
    loaded: a CPU fit's, numba imported already); array code outside the backend (fmath's
    expf, the objectives) then takes its compiled loops too. A GPU fit never loads it."""
    return "daskgb.backend.compiled_backend" in sys.modules


def jit(fn):
    """fn compiled by numba: no Python objects, the GIL released, cached on disk."""
    import numba

    return numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")(fn)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def set_threads(n: int | None) -> None:
    """The threads compiled loops use from now on (XGBoost's nthread; None or <= 0: every core)."""
    global _threads
    _threads = int(n) if n and int(n) > 0 else 0


def threads() -> int:
    return _threads or cores()


def chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """range(n) cut into at most `parts` contiguous, nearly equal, non-empty pieces."""
    parts = max(1, min(parts, n))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


def run_chunks(fn, n: int, *args, min_chunk: int = 1, pieces_per_thread: int = 1) -> None:
    """fn(lo, hi, *args) over range(n) cut into pieces_per_thread pieces per thread; returns
    when all are done.

    fn is a compiled nogil loop, so the pieces run in parallel. The calling thread runs pieces
    too (no pool hop for small work). With one piece a thread each thread runs its own; with
    more, each thread takes the next piece not yet taken until none is left, so a thread whose
    pieces cost less does not wait for the others (pieces of unequal cost: features of a
    histogram, whose bins and skew differ)."""
    parts = chunks(n, min(threads() * max(1, pieces_per_thread), max(1, n // max(min_chunk, 1))))
    if not parts:
        return
    n_threads = min(threads(), len(parts))
    if n_threads == 1:  # one thread (nthread=1, or one piece): no pool, the pieces in order here
        for lo, hi in parts:
            fn(lo, hi, *args)
        return
    pool = _get_pool(n_threads - 1)
    if n_threads == len(parts):
        futures = [pool.submit(fn, lo, hi, *args) for lo, hi in parts[1:]]
        fn(parts[0][0], parts[0][1], *args)
    else:
        pending = iter(parts)
        taking = threading.Lock()

        def take_pieces():
            while True:
                with taking:
                    part = next(pending, None)
                if part is None:
                    return
                fn(part[0], part[1], *args)

        futures = [pool.submit(take_pieces) for _ in range(n_threads - 1)]
        take_pieces()
    for f in futures:
        f.result()


def _get_pool(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < size:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="daskgb-cpu")
            _pool_size = size
        return _pool
