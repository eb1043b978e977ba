"""Large float64 buffers reused from level to level: the compiled CPU path's histograms.

A level's histograms are nodes x bins x 16 bytes: 116 MB for 32 nodes of a 968-feature
matrix (Bosch-shaped). numpy takes an array that large from fresh pages of the system (glibc
maps any allocation over 32 MB anew), and the first write to each page is a fault: touching
116 MB so took 74 ms on a 2-core machine, where the level's adds took ~2. XGBoost keeps its
histograms in a pool for the same reason. Here a buffer is handed out again only once no
array refers to it any more (its reference count says so: a numpy view keeps a reference to
the array that owns its memory), so a reused buffer can never alias a histogram still in use.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

# Smaller arrays come from malloc's own free lists, without fresh pages: not worth a lookup.
_MIN_BYTES = 1 << 22
# At most this many buffers are kept; a level in depthwise growth holds about three (its
# parents', its built nodes' and its children's histograms).
_MAX_KEPT = 6

_lock = threading.Lock()
_kept: list[np.ndarray] = []


def _free_count() -> int:
    """sys.getrefcount of a kept buffer that nothing else refers to (the list's reference and the call's)."""
    probe = [np.empty(1)]
    return sys.getrefcount(probe[0])


_FREE = _free_count()


def _is_free(i: int) -> bool:
    return sys.getrefcount(_kept[i]) <= _FREE


def float64_buffer(n: int, zero: bool) -> np.ndarray:
    """A float64 array of n elements (zeros where zero), in a kept buffer no array refers to
    where one is large enough, else new (and kept, while fewer than _MAX_KEPT are)."""
    if n * 8 < _MIN_BYTES:
        return np.zeros(n) if zero else np.empty(n)
    with _lock:
        free = [i for i in range(len(_kept)) if _kept[i].size >= n and _is_free(i)]
        if free:
            buf = _kept[min(free, key=lambda i: _kept[i].size)]
        else:
            buf = np.empty(n)
            if len(_kept) >= _MAX_KEPT:  # make room by a free buffer, if there is one
                idle = [i for i in range(len(_kept)) if _is_free(i)]
                if idle:
                    del _kept[min(idle, key=lambda i: _kept[i].size)]
            if len(_kept) < _MAX_KEPT:
                _kept.append(buf)
        out = buf[:n]
    if zero:
        out.fill(0.0)
    return out


def release() -> None:
    """Drop the kept buffers no array refers to (the end of a fit: their memory goes back)."""
    with _lock:
        used = [i for i in range(len(_kept)) if not _is_free(i)]
        _kept[:] = [_kept[i] for i in used]
