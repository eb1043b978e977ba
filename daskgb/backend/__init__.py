"""The one numpy/CuPy switch: which backend (backend/contract.py) runs the hot loops for a device or an array module."""

from __future__ import annotations

import os

from .. import cpu
from ..arrays import cuda_available

DEVICES = ("auto", "cpu", "cuda")


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
    """The backend module for a resolved device ('cpu' or 'cuda').

    CPUs run the compiled backend where numba is installed, the numpy oracle otherwise or
    where DASKGB_CPU_KERNELS=numpy asks for it (the tests that compare the two set it).
    """
    if device == "cpu":
        if os.environ.get("DASKGB_CPU_KERNELS", "compiled") != "numpy" and cpu.available():
            from . import compiled_backend

            return compiled_backend
        from . import numpy_backend

        return numpy_backend
    if device == "cuda":
        from . import cupy_backend

        return cupy_backend
    raise ValueError(f"no backend for device {device!r}")


def backend_of(xp):
    """The backend whose arrays are xp's (numpy or cupy)."""
    import numpy as np

    return get_backend("cpu" if xp is np else "cuda")
