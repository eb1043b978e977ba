"""The contract every communicator keeps (:class:`Communicator`), and what the communicators share:
the reduction in rank order, the timeout setting, the checks of what a collective is given."""

from __future__ import annotations

import functools
import operator

import numpy as np

from .. import config

OPS = ("sum", "max", "min")


def resolve_timeout(timeout: float | None = None) -> float:
    """The per-operation timeout in seconds: ``timeout`` if given, else the daskgb setting
    ``collective.timeout`` (daskgb/config.py: 600 s by default, $DASKGB_COLLECTIVE_TIMEOUT
    still works), read now, in the process that calls this (a worker reads its own)."""
    if timeout is None:
        timeout = config.get("collective.timeout")
    timeout = float(timeout)
    if not timeout > 0:
        raise ValueError(f"collective timeout must be a positive number of seconds, got {timeout!r}")
    return timeout


def check_op(op: str) -> None:
    """Raise unless op is a reduction of OPS."""
    if op not in OPS:
        raise ValueError(f"unknown reduction op {op!r}; expected one of {OPS}")


def is_cupy(x) -> bool:
    """Whether x is a CuPy object (told by its type's module, so CuPy need not be importable)."""
    return type(x).__module__.split(".", 1)[0] == "cupy"


class Communicator:
    """What training needs from a group of ranks; every rank calls the same methods in the same order.

    - ``allreduce(x, op)``: ``x`` a numpy array, a numpy or Python scalar (or, for NCCL, a cupy
      array); returns a value of the same kind, dtype and shape, equal on every rank.
    - ``allgather(obj)``: any picklable object; returns a list indexed by rank.
    - ``broadcast(obj, root)``: ``root``'s object, on every rank.
    - ``gather_apply(obj, fn)``: ``fn`` of every rank's object (a list in rank order), computed
      on one rank; its result on every rank.
    - ``gather_to(root, rows, counts)`` (communicators that reduce on the device): every rank's
      device rows, in rank order, on rank ``root`` alone.
    - ``close()``: release sockets and GPU resources; idempotent. ``abort(reason)`` does the same
      after telling the other ranks why (best effort). Used as a context manager, a
      communicator closes on success and aborts with the exception's text on failure.
    """

    rank: int = 0
    world_size: int = 1
    # Whether allreduce sums device arrays where they are (NCCL): the device grower needs it.
    reduces_on_device: bool = False

    def allreduce(self, x, op: str = "sum", *, out=None):
        """x reduced over the ranks by op. out (an array of x's shape and dtype; x itself for
        an in-place reduction, which NCCL does without a second buffer) receives the result
        and is returned."""
        raise NotImplementedError

    def allgather(self, obj) -> list:
        raise NotImplementedError

    def broadcast(self, obj, root: int = 0):
        raise NotImplementedError

    def gather_apply(self, obj, fn):
        """fn(every rank's obj, a list in rank order), the same on every rank. This fallback
        computes it on every rank; communicators whose ranks meet at one rank compute it there
        once and send only the result (a metric of all rows: the rows travel once, to one rank)."""
        return fn(self.allgather(obj))

    def gather_to(self, root: int, rows, counts):
        """Every rank's rows (a device array of counts[rank] rows) in rank order, as one array of
        sum(counts) rows on rank root, queued on the current stream (nothing waits); None on the
        other ranks. Only communicators whose collectives run on the device have it."""
        raise NotImplementedError(f"{type(self).__name__} gathers device rows only through the host")

    def track(self, what: str) -> None:
        """Watch the device work queued so far as one collective call (NCCL's watchdog: a CUDA
        graph's replay holding its allreduces); nothing to watch elsewhere."""

    def close(self) -> None:
        pass

    def abort(self, reason: str) -> None:
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort(f"{exc_type.__name__}: {exc}")
        return False


_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def write_into(out, result):
    """allreduce's result, written into out where one is given (out may be the input)."""
    if out is None or out is result:
        return result
    if getattr(out, "shape", None) != getattr(result, "shape", ()) or out.dtype != result.dtype:
        raise ValueError(f"allreduce out= must have the result's shape {getattr(result, 'shape', ())} and "
                         f"dtype {getattr(result, 'dtype', type(result))}")
    out[...] = result
    return out


def reduce_in_rank_order(values: list, op: str = "sum"):
    """Reduce one value per rank, rank 0 first: ``((v0 + v1) + v2) + ...``.

    The order is fixed so that float sums are the same on every run. Values must be all numpy
    arrays of one dtype and shape, or all scalars of one type; the result has that kind.
    """
    check_op(op)
    first = values[0]
    if isinstance(first, np.ndarray):
        for rank, v in enumerate(values):
            if not isinstance(v, np.ndarray) or v.dtype != first.dtype or v.shape != first.shape:
                raise TypeError(
                    f"allreduce({op}): rank 0 passed a {first.dtype} array of shape {first.shape}, "
                    f"rank {rank} passed {describe(v)}"
                )
        ufunc = _UFUNCS[op]
        if len(values) == 1:
            return np.array(first, copy=True, order="C")
        out = ufunc(first, values[1], order="C")  # one pass: no copy of v0 to add v1 to
        for v in values[2:]:
            ufunc(out, v, out=out)
        return out
    for rank, v in enumerate(values):
        if type(v) is not type(first):
            raise TypeError(f"allreduce({op}): rank 0 passed {describe(first)}, rank {rank} passed {describe(v)}")
    if type(first) is int:
        # Python ints stay exact (no int64 overflow).
        if op == "sum":
            return functools.reduce(operator.add, values)
        return max(values) if op == "max" else min(values)
    if not isinstance(first, (np.generic, float, bool, complex)):
        raise TypeError(f"allreduce needs numpy arrays or scalars, got {describe(first)}")
    # 0-d numpy arithmetic: NaN propagates through max/min as in the array case.
    out = np.array(first)
    for v in values[1:]:
        out = _UFUNCS[op](out, np.array(v))
    return out[()] if isinstance(first, np.generic) else out.item()


def describe(v) -> str:
    """What v is, for an error message: an array's dtype and shape, else its type."""
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} array of shape {v.shape}"
    return f"a {type(v).__module__}.{type(v).__qualname__}"


def check_reducible(x, op: str) -> None:
    """Raise unless x is something allreduce takes: a numpy or cupy array, or a scalar."""
    if isinstance(x, np.ndarray) or is_cupy(x):
        return
    if isinstance(x, (int, float, bool, complex, np.generic)):
        return
    raise TypeError(f"allreduce({op}) needs a numpy/cupy array or a scalar, got {describe(x)}")
