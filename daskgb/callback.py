"""Training callbacks, as XGBoost's xgboost.callback: hooks that can log, change parameters and stop.

A callback is called on every worker of a Dask training with the same arguments
(metrics are global, the same on every rank), so deterministic callbacks make the
same decisions everywhere; train() still agrees on "stop" through the collective.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import pickle
import re
import tempfile
import threading

_RANK = threading.local()


def training_rank() -> int:
    """The rank of the training this thread runs (0 in one process; on Dask the worker's rank),
    as XGBoost's collective.get_rank() within a callback: what writes a file writes it on rank 0."""
    return getattr(_RANK, "rank", 0)


@contextlib.contextmanager
def ranked(rank: int):
    """Training (training/loop.py run) says its rank to the callbacks it calls in this thread."""
    before = getattr(_RANK, "rank", None)
    _RANK.rank = int(rank)
    try:
        yield
    finally:
        if before is None:
            del _RANK.rank
        else:
            _RANK.rank = before


class TrainingCallback:
    """Base class. evals_log is {eval name: {metric: [value per round]}}; return True to stop.

    reads_only: a callback that only reads the model and the log (it may stop training, but
    changes no parameter and no tree) says so by setting this True and leaving
    before_iteration alone. Training may then queue round i + 1 on the device before it calls
    after_iteration for round i (a stop then drops the queued round), so the device never
    waits for the callback; the model is the same. A callback that writes (as
    LearningRateScheduler) must be called before the next round starts: the default.
    """

    reads_only: bool = False

    def before_training(self, model):
        return model

    def after_training(self, model):
        return model

    def before_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        return False

    def after_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        return False


class EarlyStopping(TrainingCallback):
    """Stop after `rounds` rounds without improvement of one metric on one eval set (XGBoost's rule).

    metric_name / data_name: which one; by default the last metric of the last eval
    set. maximize: defaults to True for auc, aucpr, map, ndcg and pre. min_delta: an
    improvement must exceed it. save_best: keep only the trees up to the best round.
    The model records best_iteration and best_score; predict then uses the trees up
    to best_iteration.
    """

    reads_only = True
    # XGBoost's list, matched as prefixes (so ndcg@10 and ndcg- maximise too).
    _MAXIMIZE = ("auc", "aucpr", "map", "ndcg", "pre")

    def __init__(self, rounds: int, metric_name: str | None = None, data_name: str | None = None,
                 maximize: bool | None = None, save_best: bool = False, min_delta: float = 0.0):
        if isinstance(rounds, bool) or not isinstance(rounds, numbers.Integral) or rounds < 1:
            raise ValueError(f"early_stopping_rounds must be an integer >= 1, got {rounds!r}")
        if not isinstance(min_delta, numbers.Real) or min_delta < 0:
            raise ValueError(f"min_delta must be a number >= 0, got {min_delta!r}")
        self.rounds = int(rounds)
        self.metric_name, self.data_name = metric_name, data_name
        self.maximize, self.save_best, self.min_delta = maximize, bool(save_best), float(min_delta)
        self.best = None
        self.best_round = None
        self.metric = None

    def before_training(self, model):
        self.best = self.best_round = None
        return model

    def after_iteration(self, model, epoch, evals_log):
        if not evals_log:
            raise ValueError("early stopping needs at least one eval set in evals")
        data = self.data_name if self.data_name is not None else list(evals_log)[-1]
        if data not in evals_log:
            raise ValueError(f"early stopping: no eval set named {data!r} (have {list(evals_log)})")
        log = evals_log[data]
        metric = self.metric_name if self.metric_name is not None else list(log)[-1]
        if metric not in log:
            raise ValueError(f"early stopping: eval set {data!r} has no metric {metric!r} (has {list(log)})")
        self.metric = f"{data}-{metric}"
        maximize = self.maximize
        if maximize is None:
            maximize = metric != "mape" and metric.startswith(self._MAXIMIZE)
        score = log[metric][-1]
        if isinstance(score, tuple):  # daskgb.cv's log: (mean, std) over the folds; the mean decides
            score = score[0]
        if self.best is None:
            better = True
        elif maximize:
            better = score - self.min_delta > self.best
        else:
            better = score + self.min_delta < self.best
        if better:
            self.best, self.best_round = score, epoch
        model.best_iteration, model.best_score = self.best_round, self.best
        return epoch - self.best_round >= self.rounds

    def after_training(self, model):
        if self.save_best and self.best_round is not None:
            model.keep_rounds(self.best_round + 1)
        return model


class EvaluationMonitor(TrainingCallback):
    """Print the round's metrics every `period` rounds (and the last round), as XGBoost's."""

    reads_only = True

    def __init__(self, period: int = 1, show_stdv: bool = True):
        if isinstance(period, bool) or not isinstance(period, numbers.Integral) or period < 1:
            raise ValueError(f"period must be an integer >= 1, got {period!r}")
        self.period = int(period)
        self.show_stdv = bool(show_stdv)
        self._last = None

    def _value(self, v) -> str:
        if isinstance(v, tuple):  # daskgb.cv's log: (mean, std) over the folds
            return f"{v[0]:.5f}+{v[1]:.5f}" if self.show_stdv else f"{v[0]:.5f}"
        return f"{v:.5f}"

    def after_iteration(self, model, epoch, evals_log):
        if not evals_log:
            return False
        line = [f"[{epoch}]"] + [f"{data}-{metric}:{self._value(values[-1])}" for data, log in evals_log.items()
                                 for metric, values in log.items()]
        if epoch % self.period == 0:
            print("\t".join(line), flush=True)
            self._last = None
        else:
            self._last = line
        return False

    def after_training(self, model):
        if self._last is not None:  # the last round, if the period skipped it
            print("\t".join(self._last), flush=True)
        return model


class LearningRateScheduler(TrainingCallback):
    """Change the learning rate as rounds go: learning_rates is a callable epoch -> rate or a sequence.

    As XGBoost's, it sets the rate after round `epoch`, so round 0 uses the
    parameters' learning rate and round e + 1 uses learning_rates(e)."""

    def __init__(self, learning_rates):
        if not callable(learning_rates) and not hasattr(learning_rates, "__getitem__"):
            raise ValueError("learning_rates must be a callable epoch -> rate or a sequence of rates")
        self.learning_rates = learning_rates

    def after_iteration(self, model, epoch, evals_log):
        rate = self.learning_rates(epoch) if callable(self.learning_rates) else self.learning_rates[epoch]
        model.set_param("learning_rate", rate)
        return False


class TrainingCheckPoint(TrainingCallback):
    """Save the model every `interval` rounds, as XGBoost's xgboost.callback.TrainingCheckPoint.

    The files are ``directory/name_{i}.ubj`` (Booster.save_model: daskgb's format as UBJSON, XGBoost's default) or, with
    as_pickle=True, ``name_{i}.pkl`` (the pickled Booster), where i is the round just trained,
    counted over the model's life (a model trained on from xgb_model counts its rounds first):
    as XGBoost's, the model in name_{i} has i + 1 rounds, and the files come every `interval`
    rounds of this training, the first after round `interval` (rounds 100, 200, ... by default:
    neither round 0 nor, unless it falls on the interval, the last). Only rank 0 writes (on Dask,
    on its worker: a directory that worker can write). It only reads the model (reads_only).

    XGBoost writes over files of those names; this never writes over a file unless told:
    before training, a file of this name and format whose round it may write (i at least the
    model's rounds so far) is a ValueError naming it, unless overwrite=True. The directory is
    made if missing, and each file is written under a temporary name and renamed into place,
    so a file of the pattern is a whole model. daskgb's own checkpoint_dir= (checkpoint.py)
    is the one to resume a run from; this callback is for XGBoost's code that uses it.
    """

    reads_only = True
    default_format = "ubj"

    def __init__(self, directory, name: str = "model", as_pickle: bool = False, interval: int = 100,
                 overwrite: bool = False):
        if isinstance(interval, bool) or not isinstance(interval, numbers.Integral) or interval < 1:
            raise ValueError(f"interval must be an integer >= 1, got {interval!r}")
        if not isinstance(name, str) or not name or os.sep in name or (os.altsep and os.altsep in name):
            raise ValueError(f"name must be a file name's start without a path separator, got {name!r}")
        self.directory = os.fspath(directory)
        self.name, self.as_pickle, self.interval, self.overwrite = name, bool(as_pickle), int(interval), overwrite
        self._calls = 0
        self._start = 0

    @property
    def extension(self) -> str:
        return "pkl" if self.as_pickle else self.default_format

    def path(self, i: int) -> str:
        """The file of round i."""
        return os.path.join(self.directory, f"{self.name}_{i}.{self.extension}")

    def before_training(self, model):
        self._calls = 0
        self._start = model.num_boosted_rounds()
        if training_rank() == 0:
            os.makedirs(self.directory, exist_ok=True)
            if not self.overwrite:
                self._refuse_existing()
        return model

    def _refuse_existing(self) -> None:
        pattern = re.compile(rf"^{re.escape(self.name)}_(\d+)\.{self.extension}$")
        taken = sorted((int(m.group(1)), f) for f in os.listdir(self.directory)
                       if (m := pattern.match(f)) and int(m.group(1)) >= self._start)
        if taken:
            files = ", ".join(f for _, f in taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
            raise ValueError(f"TrainingCheckPoint would write over {files} in {self.directory}: pass overwrite=True "
                             "to replace them, or another directory or name")

    def after_iteration(self, model, epoch, evals_log):
        if self._calls == self.interval:  # XGBoost's count: every interval-th call after the first
            self._calls = 0
            if training_rank() == 0:
                self._save(model, self.path(model.num_boosted_rounds() - 1))
        self._calls += 1
        return False

    def _save(self, model, path: str) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{self.name}_", suffix=".tmp")
        try:
            if self.as_pickle:
                with os.fdopen(fd, "wb") as f:
                    pickle.dump(model, f)
            else:
                os.close(fd)
                model.save_model(tmp)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def only_read(callbacks) -> bool:
    """Whether every callback says it only reads (TrainingCallback.reads_only) and has no
    before_iteration of its own (one would see the model without the round still queued)."""
    return all(getattr(cb, "reads_only", False) is True
               and getattr(type(cb), "before_iteration", TrainingCallback.before_iteration)
               is TrainingCallback.before_iteration for cb in callbacks)
