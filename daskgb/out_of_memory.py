"""Running out of memory, said in daskgb's terms.

CuPy's OutOfMemoryError names a byte count and nothing else: not which step ran, how large
the data is, or what to change. The public entry points that can run out (training and the
two QuantileMatrix constructors) turn any MemoryError into an OutOfMemoryError that says
what daskgb was doing, how much the quantised rows take and where, and the ways out. The
original error stays as its __cause__, and it is still a MemoryError.
"""

from __future__ import annotations

import functools
import inspect

# Out of core, the device still holds each row's training state (its label, margin and
# gradient pair, among others): the device peak grew by about 20 bytes a row from 2.6B to 3.7B
# Higgs-shaped rows with gradient-based sampling at 0.1 on the H100 (docs/performance_notes.md).
STATE_BYTES_PER_ROW = 20


class OutOfMemoryError(MemoryError):
    """The GPU (or, on a CPU worker, the host) ran out of memory in daskgb's work."""


def _on_gpu(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] == "cupy"


def explain(exc: MemoryError, doing: str, matrix=None) -> OutOfMemoryError:
    """An OutOfMemoryError for exc, raised while `doing` ("training" or "quantising"); matrix:
    the QuantileMatrix trained on, if any."""
    gpu = _on_gpu(exc)
    text = f"daskgb: the {'GPU' if gpu else 'host'} ran out of memory while {doing}"
    if matrix is not None:
        where = "in host memory as pages" if matrix.paged else "on the GPU" if gpu else "in host memory"
        text += (f" on {matrix.n_rows:,} rows x {matrix.n_features} features (their quantised rows take "
                 f"{matrix.ellpack.nbytes / 2**30:.2f} GiB {where})")
    if not gpu:
        text += ". Spread the rows over more workers (DaskQuantileMatrix on a Dask cluster), or train on fewer."
    elif matrix is not None and matrix.paged:
        text += (f". Out of core the GPU still holds every row's training state, about {STATE_BYTES_PER_ROW} "
                 f"bytes a row ({matrix.n_rows * STATE_BYTES_PER_ROW / 2**30:.1f} GiB here): spread the rows over "
                 "more GPUs (DaskQuantileMatrix), or give the pages a smaller device_memory_budget.")
    else:
        text += (". Pass device_memory_budget= (or a smaller one; and spill_dir=) to QuantileMatrix or QuantileMatrix.from_batches "
                 "to keep the quantised rows as pages in host memory, streamed to the GPU; train with "
                 "subsample < 1 and sampling_method='gradient_based' to make that fast; or spread the rows over "
                 "more GPUs (DaskQuantileMatrix).")
    return OutOfMemoryError(f"{text} ({type(exc).__name__}: {exc})")


def explained(doing: str, matrix_argument: str | None = None):
    """A decorator: the function's MemoryErrors come out explained (see explain); the
    argument named matrix_argument is the matrix it works on."""

    def decorate(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except OutOfMemoryError:
                raise
            except MemoryError as exc:
                matrix = None
                if matrix_argument is not None:
                    matrix = signature.bind_partial(*args, **kwargs).arguments.get(matrix_argument)
                raise explain(exc, doing, matrix if hasattr(matrix, "ellpack") else None) from exc

        return wrapper

    return decorate
