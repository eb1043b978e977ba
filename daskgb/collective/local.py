"""The communicator of a single process: every collective returns its input."""

from __future__ import annotations

from .base import Communicator, check_op, write_into


class LocalCommunicator(Communicator):
    """The communicator of a single process: every collective returns its input."""

    rank = 0
    world_size = 1

    def allreduce(self, x, op: str = "sum", *, out=None):
        check_op(op)
        return write_into(out, x)

    def allgather(self, x):
        return [x]

    def gather_apply(self, obj, fn):
        return fn([obj])

    def gather_to(self, root: int, rows, counts):
        if root != 0:
            raise ValueError(f"gather root {root} is not a rank of a world of size 1")
        return rows

    def broadcast(self, x, root: int = 0):
        if root != 0:
            raise ValueError(f"broadcast root {root} is not a rank of a world of size 1")
        return x
