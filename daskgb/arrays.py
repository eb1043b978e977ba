"""Array helpers every module may use: which array module holds an array, host copies, whether a GPU is there.

A leaf: it imports nothing of daskgb, so any stage can use it without depending on the
backends (which import the stages).
"""

from __future__ import annotations

import functools

import numpy as np


def _on_device(a) -> bool:
    """CuPy's arrays, and daskgb's own device objects (they say so with `on_device = True`,
    e.g. the fixed-point gradients, whose get() copies to the host like an array's)."""
    return type(a).__module__.split(".")[0] == "cupy" or getattr(type(a), "on_device", False) is True


def array_module(*arrays):
    """numpy, or cupy if any of the arrays lives on a GPU."""
    for a in arrays:
        if _on_device(a):
            import cupy

            return cupy
    return np


def to_host(a):
    """A numpy copy of a device array (or device object); anything else as numpy (no copy for
    numpy). Device objects are told by their type: a pandas Series has a get() too."""
    if _on_device(a):
        import cupy

        # Wait for the device with the GIL released first: CuPy's copy keeps the GIL while it
        # waits, and the NCCL watchdog thread must be able to run during a wait on a peer.
        cupy.cuda.get_current_stream().synchronize()
        return a.get()
    return np.asarray(a)


class HostCopy:
    """A device array's copy to page-locked host memory, queued in stream order: get() waits
    for that copy only, not for the work queued after it (a numpy array is kept as it is)."""

    def __init__(self, a):
        if not _on_device(a):
            self._host, self._done = np.asarray(a), None
            return
        import cupy
        import cupyx

        self._host = cupy.asnumpy(a, out=cupyx.empty_pinned(a.shape, a.dtype), blocking=False)
        self._done = cupy.cuda.Event(disable_timing=True)
        self._done.record()

    def get(self) -> np.ndarray:
        if self._done is not None:
            self._done.synchronize()
            self._done = None
        return self._host


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, or no device: all mean "no GPU here"
        return False
