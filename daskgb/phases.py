"""Per-round phase clock: where a boosting round's time goes (histogram, allreduce, split, other).

The tree growers mark phase boundaries (mark(HISTOGRAM) before building histograms,
mark(ALLREDUCE) before summing them across workers, mark(SPLIT) before evaluating or
applying splits, mark(OTHER) when the tree is done); everything between two marks belongs
to the earlier one, and whatever no grower marks (gradients, eval metrics, the margins'
update) is OTHER. The Dask dashboard (dask/dashboard.py) runs a clock on each worker and
reads it once a round with lap().

Off by default: while no clock runs in this context, mark() is a context variable lookup
and nothing else, so the hot loops keep it. On CPU a clock reads time.perf_counter at each
mark. On GPU the work is queued, so host time says little: a mark records a CUDA event on
the current stream (where the kernels and NCCL's allreduce run) and lap() waits for the
round's last event once, then reads the device time between consecutive events. No host
synchronisation is added inside a round.

A path that queues round i + 1 before the host reads round i (training/rounds.py) calls
cut() where round i's work ends in stream order; the clock keeps that lap, and lap() hands
back the oldest kept one (waiting for its own last event only), so the laps stay one per
round and the host still never waits for the round it has just queued.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar

HISTOGRAM, ALLREDUCE, SPLIT, OTHER = range(4)
# Display names, in the order of the constants above.
PHASES = ("histogram", "allreduce", "split", "other")

# A context variable, not a global: a threaded Dask worker may train two fits at once.
_running: ContextVar = ContextVar("daskgb_phase_clock", default=None)


def mark(phase: int) -> None:
    """From now on, the running clock's time goes to phase (a no-op while none runs)."""
    clock = _running.get()
    if clock is not None:
        clock.mark(phase)


def cut() -> None:
    """The running clock's lap ends here (kept for lap() to hand back; a no-op while none runs)."""
    clock = _running.get()
    if clock is not None:
        clock.cut()


def clock_running() -> bool:
    """Whether a clock runs in this context (its laps read a round's events as they come)."""
    return _running.get() is not None


class PhaseClock:
    """Host time per phase, from time.perf_counter."""

    def __init__(self):
        self._spent = [0.0] * len(PHASES)
        self._phase = OTHER
        self._since = time.perf_counter()
        self._kept: list = []  # laps cut and not yet handed back, oldest first

    def mark(self, phase: int) -> None:
        now = time.perf_counter()
        self._spent[self._phase] += now - self._since
        self._phase, self._since = phase, now

    def cut(self) -> None:
        self.mark(OTHER)
        spent, self._spent = self._spent, [0.0] * len(PHASES)
        self._kept.append(spent)

    def lap(self) -> list[float]:
        """Seconds per phase (in PHASES order) since the last lap, or since the clock started;
        the next lap counts from here, in phase OTHER. A lap cut() kept comes first."""
        if not self._kept:
            self.cut()
        return self._kept.pop(0)


class CudaPhaseClock:
    """Device time per phase, from CUDA events recorded at each mark (see the module docstring)."""

    def __init__(self):
        import cupy

        self._cupy = cupy
        self._free: list = []  # events whose times were read, to be recorded again
        self._marks: list = []  # (phase, event) in the order recorded
        self._kept: list = []  # laps cut and not yet read: each its (phase, event) marks, the last its end
        self.mark(OTHER)

    def _event(self):
        return self._free.pop() if self._free else self._cupy.cuda.Event()

    def mark(self, phase: int) -> None:
        event = self._event()
        event.record()
        self._marks.append((phase, event))

    def cut(self) -> None:
        end = self._event()
        end.record()
        self._kept.append(self._marks + [(OTHER, end)])
        self._marks = [(OTHER, end)]

    def lap(self) -> list[float]:
        """As PhaseClock.lap, in device seconds: waits for the lap's last event (the work
        queued so far, or a kept lap's end), then reads the time between each pair of
        consecutive events."""
        if not self._kept:
            self.cut()
        marks = self._kept.pop(0)
        marks[-1][1].synchronize()
        spent = [0.0] * len(PHASES)
        elapsed = self._cupy.cuda.get_elapsed_time
        for (phase, start), (_, stop) in zip(marks, marks[1:]):
            spent[phase] += elapsed(start, stop) / 1e3
        self._free.extend(e for _, e in marks[:-1])  # the end starts the next lap: still in use
        return spent


@contextlib.contextmanager
def running(clock=None):
    """Run a clock in this context (a PhaseClock by default; the CUDA backend's phase_clock()
    gives a CudaPhaseClock); yields it."""
    clock = PhaseClock() if clock is None else clock
    token = _running.set(clock)
    try:
        yield clock
    finally:
        _running.reset(token)
