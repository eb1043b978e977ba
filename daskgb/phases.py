"""Per-round phase clock: where a boosting round's time goes (histogram, allreduce, split, other).

The tree growers mark phase boundaries (mark(HISTOGRAM) before building histograms,
mark(ALLREDUCE) before summing them across workers, mark(SPLIT) before evaluating or
applying splits, mark(OTHER) when the tree is done); everything between two marks belongs
to the earlier one, and whatever no grower marks (gradients, eval metrics, the margins'
update) is OTHER. The Dask dashboard (dask/dashboard.py) runs a clock on each worker and
reads it once a round with lap().

Off by default: while no clock runs in this context, mark() is a context variable lookup
and nothing else, so the hot loops keep it. On CPU a clock reads time.perf_counter at each
mark. On GPU the work is queued, so host time says little: a mark launches a one-thread
kernel that stamps the device's nanosecond timer on the current stream (where the kernels
and NCCL's allreduce run), and lap() waits once for the round's stamps to reach the host,
then reads the time between consecutive stamps. No host synchronisation is added inside a
round. A round replayed as a CUDA graph is timed the same way: the marks made while it was
captured are stamps the graph writes on each replay (recording(), splice()).

A path that queues round i + 1 before the host reads round i (training/rounds.py) calls
cut() where round i's work ends in stream order; the clock keeps that lap, and lap() hands
back the oldest kept one (waiting for its own stamps only), so the laps stay one per
round and the host still never waits for the round it has just queued.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar

import numpy as np

from .backend import kernels

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


def splice(recorded) -> None:
    """A CUDA graph captured with recording() was just launched: its stamps join the running
    clock's lap (a no-op while none runs, or where the graph recorded none)."""
    clock = _running.get()
    if clock is not None and recorded is not None:
        clock.splice(recorded)


@contextlib.contextmanager
def recording():
    """While a stream is captured into a CUDA graph: the marks made become stamps the graph
    writes on each replay; yields the recorder to splice() after each launch (None while no
    clock that stamps on the device runs: the graph then stamps nothing)."""
    clock = _running.get()
    if clock is None or not hasattr(clock, "recorder"):
        yield None
        return
    recorder = clock.recorder()
    token = _running.set(recorder)
    try:
        yield recorder
    finally:
        _running.reset(token)


def clock_running() -> bool:
    """Whether a clock runs in this context (its laps read a round's stamps as they come)."""
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


# Stamps per device block of a _Stamper (8 KiB): a depthwise round makes a few dozen.
_SLOTS = 1024


_CLOCK = kernels.declare("clock.cu", ("stamp_clock",))


class _Stamper:
    """Marks as stamps of the device's nanosecond timer, written in stream order by
    kernels/clock.cu into blocks of _SLOTS, and the pieces they make: (block, first slot,
    phases), one stamp a phase, in stream order. A block is never moved or grown, so a stamp
    captured into a CUDA graph keeps writing where the capture saw it."""

    def __init__(self):
        import cupy

        self._cupy = cupy
        self._kernel = kernels.function("clock.cu", _CLOCK, "stamp_clock")
        self._blocks: list = []
        self.used = 0
        self.pieces: list = []
        self._joined = False  # whether the next stamp may grow the last piece

    def mark(self, phase: int) -> None:
        block, slot = divmod(self.used, _SLOTS)
        if block == len(self._blocks):
            self._blocks.append(self._cupy.empty(_SLOTS, dtype=self._cupy.uint64))
        self._kernel((1,), (1,), (self._blocks[block], np.int32(slot)))
        self.used += 1
        last = self.pieces[-1] if self.pieces else None
        if self._joined and last[0] is self._blocks[block] and last[1] + len(last[2]) == slot:
            last[2].append(phase)
        else:
            self.pieces.append((self._blocks[block], slot, [phase]))
        self._joined = True

    def splice(self, recorded: "_Stamper") -> None:
        """Another stamper's pieces come next in stream order (a graph's, just launched): they
        join these, and the next stamp starts a piece of its own."""
        self.pieces.extend(recorded.pieces)
        self._joined = False

    def cut(self) -> None:
        raise RuntimeError("a phase clock's lap cannot end inside a CUDA graph's capture")

    def restart(self) -> None:
        """Write from the first slot again (once the stamps written are copied, in stream order)."""
        self.used, self.pieces, self._joined = 0, [], False


class CudaPhaseClock:
    """Device time per phase (see the module docstring): each mark stamps the device's
    nanosecond timer in stream order (_Stamper). A round replayed as a CUDA graph stamps too:
    the capture records the marks made while capturing (recording()), each replay writes them
    and splice() puts them into the lap where the replay runs. cut() copies the lap's stamps
    to page-locked memory in stream order; lap() waits for that copy only."""

    def __init__(self):
        import cupy

        self._cupy = cupy
        self._own = _Stamper()  # this lap's stamps in stream order: the clock's and replayed graphs'
        self._kept: list = []  # laps cut and not yet read: (phases, page-locked stamps, copy done)
        self._free: dict = {}  # page-locked buffers read, by length, to copy into again
        self._last = None  # the last lap read's end (ns): the next lap's start
        self.mark(OTHER)

    def mark(self, phase: int) -> None:
        self._own.mark(phase)

    def recorder(self) -> _Stamper:
        """A stamper for a CUDA graph's capture: its blocks belong to the graph, and the
        pieces it records are what each replay writes (splice() them)."""
        return _Stamper()

    def splice(self, recorded: _Stamper) -> None:
        """A graph that stamps with `recorded` was just launched on the current stream."""
        self._own.splice(recorded)

    def cut(self) -> None:
        import cupyx

        self.mark(OTHER)  # the lap's end, where the next one starts
        phases = [p for _, _, ps in self._own.pieces for p in ps]
        free = self._free.get(len(phases))
        host = free.pop() if free else cupyx.empty_pinned((len(phases),), dtype=np.uint64)
        stream = self._cupy.cuda.get_current_stream()
        offset = 0
        for block, first, ps in self._own.pieces:
            self._cupy.cuda.runtime.memcpyAsync(host.ctypes.data + 8 * offset, block.data.ptr + 8 * first,
                                                8 * len(ps), self._cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            offset += len(ps)
        done = self._cupy.cuda.Event(disable_timing=True)
        done.record(stream)
        self._kept.append((phases, host, done))
        # The copy is queued before anything stamps again: the blocks can be written anew.
        self._own.restart()

    def lap(self) -> list[float]:
        """As PhaseClock.lap, in device seconds: waits for the lap's stamps to reach the host
        (the work queued so far, or a kept lap's end), then adds the time between consecutive
        stamps to the earlier one's phase; the time from the previous lap's end to the first
        stamp is OTHER (the phase every lap ends in)."""
        if not self._kept:
            self.cut()
        phases, host, done = self._kept.pop(0)
        done.synchronize()
        stamps = host.astype(np.int64)
        self._free.setdefault(len(phases), []).append(host)
        spent = [0.0] * len(PHASES)
        if self._last is not None:
            spent[OTHER] += (int(stamps[0]) - self._last) / 1e9
        gaps = np.diff(stamps) / 1e9
        for phase, gap in zip(phases, gaps):
            spent[phase] += float(gap)
        self._last = int(stamps[-1])
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
