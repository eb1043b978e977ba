"""daskgb's page on the scheduler's dashboard: each worker's rounds reported to the scheduler, kept there.

    import daskgb.dask.dashboard
    daskgb.dask.dashboard.register(client)   # -> "http://127.0.0.1:8787/daskgb"

daskgb.dask.train registers it itself, so a user only opens the dashboard: the page is at
/daskgb, listed in the dashboard's menu ("Daskgb", and drawn in the dashboard's frame, whose
menu leads back to the status page), and at /individual-daskgb, which JupyterLab's Dask
extension lists (and the menu's "More...").
It shows the latest fit's learning curves, each round's time split into histogram /
allreduce / split / other (phases.py), and each worker's rows and memory (dask/dashboard_page.py
draws it with Bokeh, as distributed draws its own pages).

The path of the numbers:

  every worker (RoundBoard, the training loop's after-round hook): the round's phase times,
      rank 0's eval metrics, the worker's rows and memory; sent at most every REPORT_EVERY
      seconds as an event on the one topic TOPIC (Worker.log_event)
  scheduler (DashboardPlugin, a SchedulerPlugin): its log_event hook files them in a
      TrainingStore, which keeps the last MAX_FITS fits, MAX_ROUNDS rounds each
  the page (a Bokeh document per browser tab) reads the store twice a second

One topic for all fits: the scheduler keeps a topic's last events too (its
distributed.admin.low-level-log-length, 1,000 by default), so the reports' memory there is
bounded however many fits run. Workers report only where the page is served (register()
returned an address): without bokeh on the scheduler (a dependency of daskgb's install,
as distributed's dashboard needs it), or with its dashboard off, there is no page, no phase
clock runs, and training is unchanged. Setting the Dask config value
``daskgb.dashboard`` to False skips it all (no phase clock runs on the workers).
"""

from __future__ import annotations

import logging
import sys
import time

import numpy as np

from .. import phases

logger = logging.getLogger(__name__)

PLUGIN_NAME = "daskgb-dashboard"
TOPIC = "daskgb-dashboard"
ROUTES = ("/daskgb", "/individual-daskgb")
# A worker's reports leave at most this often (seconds), whatever the round time: a
# scheduler with many workers and millisecond rounds gets a few messages a second each.
REPORT_EVERY = 0.25
MAX_FITS = 4
MAX_ROUNDS = 20_000


# ---------------------------------------------------------------- client

def register(client) -> str | None:
    """Serve daskgb's page on the dashboard of the client's scheduler (idempotent).

    Returns the page's address, or None where there is none: the scheduler runs no
    dashboard, cannot import bokeh or daskgb, or the Dask config says daskgb.dashboard: False.
    Works on a scheduler that is already running (the page joins its dashboard).
    """
    import dask

    if not dask.config.get("daskgb.dashboard", True):
        return None
    try:
        served = client.run_on_scheduler(_served)
        if not served:
            client.register_plugin(DashboardPlugin(), name=PLUGIN_NAME)  # idempotent (the class says so)
            served = client.run_on_scheduler(_served)
    except Exception as e:  # a scheduler without daskgb, pickled functions refused, ...
        logger.debug("no daskgb dashboard page: %s", e)
        return None
    if not served:
        return None
    link = client.dashboard_link or ""
    base = link[: -len("status")] if link.endswith("status") else link.rstrip("/") + "/"
    return base + ROUTES[0].lstrip("/")


def _served(dask_scheduler=None) -> bool:
    """On the scheduler: is the page up?"""
    plugin = dask_scheduler.plugins.get(PLUGIN_NAME)
    return bool(getattr(plugin, "served", False))


# ---------------------------------------------------------------- worker

class RoundBoard:
    """On every worker during a fit: runs the phase clock and reports each round (booster.train's
    after-round hook). Use as a context manager around training; the last reports leave on exit."""

    def __init__(self, job: str, rank: int, world: int, num_boost_round: int, n_rows: int, device: str):
        self.job, self.rank, self.world = job, int(rank), int(world)
        self.rounds, self.n_rows, self.device = int(num_boost_round), int(n_rows), device
        self._items: list = []
        self._metric_of: dict = {}
        self._sent = 0.0
        self._clock = None
        self._running = None

    def __enter__(self):
        from ..backend import get_backend

        self._running = phases.running(get_backend(self.device).phase_clock())
        self._clock = self._running.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            self.flush()
        finally:
            self._running.__exit__(*exc)
        return False

    def __call__(self, round_index: int, history: dict) -> None:
        spent = self._clock.lap()
        metrics = None
        if self.rank == 0:
            metrics = {f"{name}-{metric}": float(values[-1]) for name, m in history.items()
                       for metric, values in m.items() if values}
            # Which metric each series is (names may hold '-' themselves): the page gives each metric its axis.
            self._metric_of.update({f"{name}-{metric}": metric for name, m in history.items() for metric in m})
        self._items.append((int(round_index), spent, metrics))
        if time.monotonic() - self._sent >= REPORT_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self._items:
            return
        from distributed import get_worker

        items, self._items = self._items, []
        self._sent = time.monotonic()
        try:  # the page is an onlooker: a report that cannot leave never stops training
            memory, kind = _memory_in_use(self.device)
            get_worker().log_event(TOPIC, {"job": self.job, "rank": self.rank, "world": self.world,
                                           "rounds": self.rounds, "device": self.device, "rows": self.n_rows,
                                           "memory": memory, "memory_kind": kind, "items": items,
                                           "metric_of": dict(self._metric_of)})
        except Exception as e:
            logger.debug("daskgb dashboard report not sent: %s", e)


def _memory_in_use(device: str) -> tuple[int, str]:
    """(bytes, what they are): the CuPy pool's bytes in use on a GPU worker, the process's RSS otherwise."""
    if device == "cuda":
        import cupy

        return int(cupy.get_default_memory_pool().used_bytes()), "device memory (CuPy pool)"
    import psutil

    return int(psutil.Process().memory_info().rss), "process memory (RSS)"


# ---------------------------------------------------------------- scheduler

class Fit:
    """One training run as the scheduler has heard of it."""

    def __init__(self, job: str, world: int, rounds: int, device: str):
        self.job, self.world, self.rounds, self.device = job, int(world), int(rounds), device
        self.started = time.time()
        # Per rank: {"address", "rows", "memory", "memory_kind", "rounds" (reported), "spent" (4 phase totals)}.
        self.workers: dict[int, dict] = {}
        # Round first_round + i is _sums[i] (phase seconds summed over the ranks that reported it),
        # _counts[i] (how many did) and _metrics[i] (rank 0's, or None).
        self.first_round = 0
        self._sums: list = []
        self._counts: list = []
        self._metrics: list = []
        self.complete = -1  # the last round every rank has reported, and every one before it
        self.metric_of: dict[str, str] = {}  # series ("valid-logloss") -> its metric ("logloss")

    def add(self, worker: str, rank: int, rows: int, memory: int, memory_kind: str, items, metric_of=None) -> None:
        w = self.workers.setdefault(int(rank), {"address": worker, "rounds": 0,
                                                "spent": np.zeros(len(phases.PHASES))})
        w.update(address=worker, rows=int(rows), memory=int(memory), memory_kind=memory_kind)
        if isinstance(metric_of, dict):
            self.metric_of.update({str(k): str(v) for k, v in metric_of.items()})
        for round_index, spent, metrics in items:
            i = int(round_index) - self.first_round
            if i < 0:
                continue  # dropped for the cap already
            while len(self._sums) <= i:
                self._sums.append(np.zeros(len(phases.PHASES)))
                self._counts.append(0)
                self._metrics.append(None)
            spent = np.asarray(spent, dtype=np.float64)
            self._sums[i] += spent
            self._counts[i] += 1
            if metrics is not None:
                self._metrics[i] = metrics
            w["rounds"] += 1
            w["spent"] += spent
        while self.complete + 1 - self.first_round < len(self._counts) and \
                self._counts[self.complete + 1 - self.first_round] >= self.world:
            self.complete += 1
        drop = len(self._sums) - MAX_ROUNDS
        if drop > 0:
            del self._sums[:drop], self._counts[:drop], self._metrics[:drop]
            self.first_round += drop

    def rounds_after(self, after: int) -> dict:
        """Columns of the complete rounds after round `after`: "round", the mean seconds of each
        phase over the workers (PHASES names), and "metrics" ({series: [values]}, NaN where a
        round has none)."""
        lo = max(after + 1, self.first_round) - self.first_round
        hi = self.complete + 1 - self.first_round
        idx = range(lo, max(lo, hi))
        out = {"round": [self.first_round + i for i in idx]}
        means = [self._sums[i] / self._counts[i] for i in idx]
        for j, name in enumerate(phases.PHASES):
            out[name] = [float(m[j]) for m in means]
        names = list(dict.fromkeys(k for i in idx if self._metrics[i] for k in self._metrics[i]))
        out["metrics"] = {k: [float(self._metrics[i].get(k, np.nan)) if self._metrics[i] else float("nan")
                              for i in idx] for k in names}
        return out

    def metric_names(self) -> list[str]:
        return list(dict.fromkeys(k for m in self._metrics if m for k in m))

    def metric_of_series(self, series: str) -> str:
        """The metric a series ("valid-logloss") shows: as its worker said, else the text after its first '-'."""
        return self.metric_of.get(series) or series.partition("-")[2] or series

    def worker_rows(self) -> dict:
        """Columns per worker, in rank order: "worker" (rank and address), "rows", "memory",
        and the mean seconds a round of each phase."""
        ranks = sorted(self.workers)
        ws = [self.workers[r] for r in ranks]
        out = {"worker": [f"{r}: {w['address']}" for r, w in zip(ranks, ws)],
               "rows": [w["rows"] for w in ws], "memory": [w["memory"] for w in ws]}
        for j, name in enumerate(phases.PHASES):
            out[name] = [float(w["spent"][j] / max(1, w["rounds"])) for w in ws]
        return out


class TrainingStore:
    """On the scheduler: the latest fits' reports (at most MAX_FITS fits, MAX_ROUNDS rounds each)."""

    def __init__(self):
        self.fits: dict[str, Fit] = {}  # in the order they started

    @property
    def max_rounds(self) -> int:
        """The rounds a fit keeps (the page's sources keep as many)."""
        return MAX_ROUNDS

    def report(self, worker: str | None = None, job: str = "", rank: int = 0, world: int = 1, rounds: int = 0,
               device: str = "cpu", rows: int = 0, memory: int = 0, memory_kind: str = "", items=(),
               metric_of=None, **_) -> None:
        """A worker's report (RoundBoard.flush's message; worker: its address, which the scheduler adds)."""
        fit = self.fits.get(job)
        if fit is None:
            fit = self.fits[job] = Fit(job, world, rounds, device)
            while len(self.fits) > MAX_FITS:
                del self.fits[next(iter(self.fits))]
        fit.add(worker or "", rank, rows, memory, memory_kind, items, metric_of)

    def latest(self) -> Fit | None:
        return next(reversed(self.fits.values()), None)


try:
    from distributed.diagnostics.plugin import SchedulerPlugin
except ImportError:  # pragma: no cover - distributed is a dependency
    SchedulerPlugin = object


class DashboardPlugin(SchedulerPlugin):
    """On the scheduler: files the workers' reports and serves the page (register() installs it)."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self):
        self.store = None
        self.served = False

    async def start(self, scheduler) -> None:
        self.store = TrainingStore()
        if "bokeh.server.tornado" not in sys.modules:
            # A scheduler serving a dashboard imported Bokeh's server as it started; one that did not
            # has none to join, and importing Bokeh here would cost a first fit ~0.5 s for nothing.
            logger.info("daskgb dashboard page off: the scheduler serves no dashboard")
            return
        try:
            from .dashboard_page import add_pages
        except ImportError as e:  # no bokeh: no dashboard on this scheduler either
            logger.info("daskgb dashboard page off: %s", e)
            return
        self.served = add_pages(scheduler, ROUTES, lambda: store_of(scheduler))

    def log_event(self, topic: str, msg) -> None:
        if topic == TOPIC and self.store is not None and isinstance(msg, dict):
            self.store.report(**msg)


def store_of(scheduler) -> TrainingStore | None:
    """The scheduler's TrainingStore (the registered plugin's), or None."""
    return getattr(scheduler.plugins.get(PLUGIN_NAME), "store", None)
