"""Training progress from the workers to the client: a progress bar with the latest eval
metrics, and the eval log printed where the user is (not in a worker's log).

Rank 0 reports the rounds as events on a topic of its own (distributed's Worker.log_event),
one for the rounds of each REPORT_EVERY seconds; the client subscribes to the topic for the
length of the fit (Client.subscribe_topic) and draws a tqdm bar (tqdm.auto: a widget in a
notebook, a line in a terminal), writing the eval lines above it at verbose_eval's cadence.
Events travel worker -> scheduler -> client beside the task results, so the last rounds' lines
are printed from the returned history when their events have not arrived by the end. The
scheduler keeps a topic's events (Client.get_events(topic)); rank 0 reports only while a
client shows the progress.
"""

from __future__ import annotations

import sys
import threading
import time

TOPIC_PREFIX = "daskgb-progress-"


def topic_of(job: str) -> str:
    return TOPIC_PREFIX + job


def eval_line(round_index: int, history: dict) -> str:
    """A round's eval log line, as daskgb.train prints it ("[3]\tvalid-auc:0.81234")."""
    parts = [f"[{round_index}]"]
    for name, metrics in history.items():
        for metric, values in metrics.items():
            if len(values) > round_index:
                parts.append(f"{name}-{metric}:{values[round_index]:.5f}")
    return "\t".join(parts)


# Rank 0 sends an event at most this often (the first round's and the last's at once): the
# rounds between travel together, their eval lines in one event. An event a round cost a
# quickstart fit (2 CPU workers, ~25 rounds a second) ~0.8 s of its ~5: each one wakes rank
# 0's event loop, the scheduler and the client, which share the workers' cores. tqdm redraws
# a terminal's bar at most every 0.1 s anyway.
REPORT_EVERY = 0.25


class RoundReporter:
    """On rank 0: the rounds' metrics and eval lines as events (booster.train calls it after a
    round), one event for the rounds of each REPORT_EVERY seconds."""

    def __init__(self, topic: str, num_boost_round: int):
        self.topic, self.rounds = topic, int(num_boost_round)
        self._start = time.perf_counter()
        self._sent = None  # when the last event went
        self._lines: list = []  # (round, eval line) of the rounds not sent yet

    def __call__(self, round_index: int, history: dict) -> None:
        from distributed import get_worker

        self._lines.append((int(round_index), eval_line(round_index, history)))
        now = time.perf_counter()
        if self._sent is not None and now - self._sent < REPORT_EVERY and round_index + 1 < self.rounds:
            return
        self._sent = now
        metrics = {f"{name}-{metric}": float(values[-1]) for name, m in history.items() for metric, values in m.items()
                   if values}
        lines, self._lines = self._lines, []
        get_worker().log_event(self.topic, {"round": int(round_index), "rounds": self.rounds,
                                            "elapsed": now - self._start, "metrics": metrics, "lines": lines})


class ProgressDisplay:
    """On the client: the bar and the eval lines of one fit (see the module docstring).

    every: print the eval line of every n-th round (and of the last); 0 prints none."""

    def __init__(self, num_boost_round: int, every: int, file=None):
        self.rounds, self.every = int(num_boost_round), int(every)
        self.file = file if file is not None else sys.stderr
        self._lock = threading.Lock()
        self._printed: set[int] = set()
        self._done = 0
        self._bar = _make_bar(self.rounds, self.file)

    def _write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=self.file)
        else:
            print(text, file=self.file, flush=True)

    def _wants(self, r: int) -> bool:
        return self.every > 0 and (r % self.every == 0 or r == self.rounds - 1)

    def on_event(self, event) -> None:
        """Client.subscribe_topic's handler: event = (timestamp, message)."""
        _, msg = event
        with self._lock:
            r = int(msg["round"])
            for i, line in msg.get("lines", ()):  # the rounds since the last event, in order
                i = int(i)
                if self._wants(i) and line and i not in self._printed and "]\t" in line:
                    self._printed.add(i)
                    self._write(line)
            if self._bar is not None and r + 1 > self._done:
                if msg.get("metrics"):  # before the update, which draws it
                    self._bar.set_postfix({k: f"{v:.5f}" for k, v in msg["metrics"].items()}, refresh=False)
                self._bar.update(r + 1 - self._done)
            self._done = max(self._done, r + 1)

    def close(self, history: dict | None, best_iteration=None, stopped_early: bool = False) -> None:
        """The fit is over: the lines whose events have not come yet (from the returned history),
        the bar closed, and early stopping's message as daskgb.train prints it."""
        with self._lock:
            rounds_run = max((len(v) for m in (history or {}).values() for v in m.values()), default=self._done)
            if history:
                for r in range(rounds_run):
                    if r not in self._printed and self._wants(r):
                        self._printed.add(r)
                        self._write(eval_line(r, history))
            if self._bar is not None:
                if rounds_run > self._done:
                    self._bar.update(rounds_run - self._done)
                self._bar.close()
                self._bar = None
            if stopped_early and best_iteration is not None and self.every > 0 and history:
                name, metrics = list(history.items())[-1]
                metric, values = list(metrics.items())[-1]
                print(f"Stopping. Best iteration: [{best_iteration}] {name}-{metric}:{values[best_iteration]:.5f}",
                      file=self.file, flush=True)


def _make_bar(total: int, file):
    """A tqdm bar (tqdm.auto: a widget in a notebook), or None without tqdm (lines only)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="daskgb", unit="round", file=file, dynamic_ncols=True, leave=True)
