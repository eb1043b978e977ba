"""The one numpy/CuPy switch: which backend runs the hot loops for a device."""

from __future__ import annotations

import functools

import numpy as np

DEVICES = ("auto", "cpu", "cuda")


# The CuPy backend's own objects live on a GPU as CuPy's arrays do (its FixedGradients,
# whose get() copies to the host like an array's).
_CUPY_BACKEND = "daskgb.backend.cupy_backend"


def array_module(*arrays):
    """numpy, or cupy if any of the arrays lives on a GPU."""
    for a in arrays:
        module = type(a).__module__
        if module.split(".")[0] == "cupy" or module == _CUPY_BACKEND:
            import cupy

            return cupy
    return np


def to_host(a):
    """A numpy copy of a cupy array (or of the CuPy backend's FixedGradients); anything else as
    numpy (no copy for numpy). Device objects are told by their module: a pandas Series has a
    get() too."""
    if array_module(a) is not np:
        import cupy

        # Wait for the device with the GIL released first: CuPy's copy keeps the GIL while it
        # waits, and the NCCL watchdog thread must be able to run during a wait on a peer.
        cupy.cuda.get_current_stream().synchronize()
        return a.get()
    return np.asarray(a)


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, or no device: all mean "no GPU here"
        return False


def resolve_device(device: str | None) -> str:
    """'auto' (or None) picks 'cuda' when CuPy sees a GPU, else 'cpu'."""
    device = "auto" if device is None else str(device).lower()
    if device.startswith("gpu") or device.startswith("cuda"):
        device = "cuda"
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise RuntimeError(
            "device='cuda' was asked for, but CuPy is not installed or sees no GPU; "
            "install daskgb[cuda12] or daskgb[cuda13], or use device='cpu'"
        )
    return device


def get_backend(device: str):
    """The backend module for a resolved device ('cpu' or 'cuda')."""
    if device == "cpu":
        from . import numpy_backend

        return numpy_backend
    if device == "cuda":
        from . import cupy_backend

        return cupy_backend
    raise ValueError(f"no backend for device {device!r}")
