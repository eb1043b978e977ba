"""daskgb.cv: k-fold cross-validation with xgboost.cv's semantics, quantising once.

The folds are row subsets of one QuantileMatrix (QuantileMatrix.take: the binned rows
gathered, the cuts shared), so nothing is sketched or quantised again. Every fold is a fit
(fit.py) watched on its training rows ("train") and its held-out rows ("test"); the folds
go round by round in lockstep, as XGBoost's, so that the callbacks (early stopping among
them) see each round's metrics as the folds' mean and standard deviation, and a stop ends
every fold at once.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from ..callback import EarlyStopping, EvaluationMonitor, TrainingCallback
from ..collective import LocalCommunicator
from ..cpu import buffers
from ..matrix import QuantileMatrix
from .fit import Fit
from .loop import _path_taken, _replan
from .options import TrainingOptions
from .rounds import make_rounds


class _EachRound(TrainingCallback):
    """A fold's rounds are read one at a time: the fold's metrics of round i are aggregated,
    and the callbacks may stop, before round i + 1 starts (so no path queues a round ahead)."""


class _Fold:
    """One fold's fit, stepped a round at a time (loop.run's round, one call each)."""

    def __init__(self, params: dict, dtrain, dtest, num_boost_round: int, obj, custom_metric):
        options = TrainingOptions.create(params, num_boost_round, verbose_eval=False, obj=obj,
                                         custom_metric=custom_metric, callbacks=[_EachRound()])
        self.options = options
        self.fit = Fit(options, dtrain, [(dtrain, "train"), (dtest, "test")], LocalCommunicator(), {})
        self.plan = self.fit.plan()
        self.rounds = make_rounds(self.plan, self.fit)
        self.taken = []

    @property
    def booster(self):
        return self.fit.booster

    def step(self, it: int) -> list[tuple[str, float]]:
        """Train round it; its metrics as ("set-metric", value) in XGBoost's eval order: the
        built-in metrics set by set, then the custom metric's set by set (its value to the 6
        decimals XGBoost's log line gives it)."""
        fit = self.fit
        fit.start_round(it)
        if fit.booster.params is not self.rounds.params:  # a callback changed them
            self.plan, self.rounds = _replan(fit, self.rounds, it)
        if not self.taken or self.taken[-1][1] is not self.rounds:
            self.taken.append((it, self.rounds))
        grads = fit.gradients(it, out=self.rounds.gradient_buffer())
        first_tree = len(fit.booster.trees) + self.rounds.pending * fit.booster.trees_per_round
        for done, trees, scores in self.rounds.submit(it, grads, first_tree):
            fit.finish_round(done, trees, None, scores)
        history = fit.evals.history
        builtin = [(f"{name}-{k}", history[name][k][-1]) for name in ("train", "test") for k in self.options.metrics]
        custom = [(f"{name}-{k}", float(f"{values[-1]:f}")) for name in ("train", "test")
                  for k, values in history[name].items() if k not in self.options.metrics]
        return builtin + custom

    def close(self) -> None:
        for done, trees, scores in self.rounds.drain():  # none: the rounds are read one at a time
            self.fit.finish_round(done, trees, None, scores)
        self.rounds.close()
        self.booster.set_attr(training_path=_path_taken(self.taken, self.rounds),
                              training_path_refused=self.plan.refusals())


class CVBoosters:
    """The folds' boosters, as the callbacks of daskgb.cv see the model (XGBoost's
    _PackedBooster): set_param, set_attr and attr reach every fold; best_iteration and
    best_score are the early stopping's, over the folds' mean."""

    def __init__(self, folds: list[_Fold]):
        self._folds = folds
        self.best_iteration: int | None = None
        self.best_score: float | None = None

    @property
    def boosters(self) -> list:
        return [f.booster for f in self._folds]

    def set_param(self, params, value=None) -> None:
        for b in self.boosters:
            b.set_param(params, value)

    def set_attr(self, **kwargs) -> None:
        for b in self.boosters:
            b.set_attr(**kwargs)

    def attr(self, key: str):
        return self.boosters[0].attr(key)

    def num_boosted_rounds(self) -> int:
        return self.boosters[0].num_boosted_rounds()


def cv(params, dtrain, num_boost_round: int = 10, *, nfold: int = 3, stratified: bool = False, folds=None,
       metrics=(), obj=None, maximize: bool | None = None, early_stopping_rounds: int | None = None, fpreproc=None,
       as_pandas: bool = True, verbose_eval=None, show_stdv: bool = True, seed: int = 0, callbacks=None,
       shuffle: bool = True, custom_metric=None):
    """Cross-validation as xgboost.cv, on a daskgb.QuantileMatrix quantised once.

    Returns {"train-<metric>-mean": [...], "train-<metric>-std": [...], "test-...": ...}, a
    value per round (the mean and the standard deviation over the folds), as a pandas
    DataFrame when as_pandas (and pandas is installed). nfold folds of the rows, shuffled
    with seed unless shuffle=False (numpy's legacy RandomState(seed), as XGBoost's, so the
    folds are XGBoost's); stratified=True: scikit-learn's StratifiedKFold on the labels;
    folds: a list of (train indices, test indices) or a scikit-learn splitter (its
    split(labels, labels)). metrics: the eval metrics (default the params' eval_metric, else
    the objective's); obj / custom_metric as in train(); early_stopping_rounds: stop when the
    mean of the last metric on the test folds has not improved for that many rounds, and keep
    the rows up to the best round; fpreproc(dtrain, dtest, params) -> (dtrain, dtest, params)
    for each fold; callbacks: TrainingCallback objects, called with the folds as one model
    (CVBoosters) and the log of (mean, std) pairs; verbose_eval: print every round (True) or
    every n-th, with the standard deviations unless show_stdv=False.
    """
    if not isinstance(dtrain, QuantileMatrix):
        raise ValueError("dtrain must be a daskgb.QuantileMatrix")
    if not dtrain.has_labels:
        raise ValueError("dtrain has no labels (y)")
    if dtrain.paged:
        raise ValueError("daskgb.cv takes an in-core QuantileMatrix (XGBoost's cv refuses external memory too)")
    if (isinstance(num_boost_round, bool) or not isinstance(num_boost_round, numbers.Integral)
            or num_boost_round < 0):
        raise ValueError(f"num_boost_round must be an integer >= 0, got {num_boost_round!r}")
    params = _as_dict(params)
    if not metrics and "eval_metric" in params:
        given = params["eval_metric"]
        metrics = list(given) if isinstance(given, (list, tuple)) else [given]
    params.pop("eval_metric", None)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)

    if dtrain.groups is not None:
        # A ranking matrix's folds are of whole query groups (xgboost.training.mkgroupfold).
        train_groups, test_groups = _fold_groups(dtrain, nfold, stratified, folds, seed, shuffle)
        splits = [(dtrain.take_groups(a), dtrain.take_groups(b)) for a, b in zip(train_groups, test_groups)]
    else:
        train_rows, test_rows = _fold_rows(dtrain, nfold, stratified, folds, seed, shuffle)
        splits = [(dtrain.take(a), dtrain.take(b)) for a, b in zip(train_rows, test_rows)]
    packed = []
    for fold_train, fold_test in splits:
        fold_params = dict(params)
        if fpreproc is not None:
            fold_train, fold_test, fold_params = fpreproc(fold_train, fold_test, dict(params))
        if metrics:
            fold_params["eval_metric"] = list(metrics)
        packed.append(_Fold(fold_params, fold_train, fold_test, num_boost_round, obj, custom_metric))

    callbacks = list(callbacks or [])
    for cb in callbacks:
        if not isinstance(cb, TrainingCallback):
            raise ValueError(f"callbacks must be daskgb.callback.TrainingCallback objects, got {type(cb).__name__}")
        if isinstance(cb, EarlyStopping) and cb.save_best:
            raise ValueError("EarlyStopping's `save_best` does not apply to cv, which returns the folds' metrics, "
                             "not a model (as in xgboost.cv)")
    if verbose_eval:
        callbacks.append(EvaluationMonitor(period=1 if verbose_eval is True else int(verbose_eval),
                                           show_stdv=show_stdv))
    if early_stopping_rounds:
        callbacks.append(EarlyStopping(early_stopping_rounds, maximize=maximize))
    model = CVBoosters(packed)
    for cb in callbacks:
        model = cb.before_training(model) or model

    results: dict[str, list[float]] = {}
    log: dict[str, dict[str, list]] = {}
    try:
        for it in range(num_boost_round):
            if any([cb.before_iteration(model, it, log) for cb in callbacks]):
                break
            per_fold = [fold.step(it) for fold in packed]
            for i, (key, _) in enumerate(per_fold[0]):
                values = np.array([scores[i][1] for scores in per_fold], dtype=np.float64)
                mean, std = float(np.mean(values)), float(np.std(values))
                results.setdefault(key + "-mean", []).append(mean)
                results.setdefault(key + "-std", []).append(std)
                data, metric = key.split("-", 1)
                log.setdefault(data, {}).setdefault(metric, []).append((mean, std))
            if any([cb.after_iteration(model, it, log) for cb in callbacks]):
                best = model.best_iteration
                if best is not None:
                    results = {k: v[: best + 1] for k, v in results.items()}
                break
    finally:
        for fold in packed:
            fold.close()
        buffers.release()  # as train() does: the folds' histogram buffers go back
    for cb in callbacks:
        model = cb.after_training(model) or model
    if as_pandas:
        try:
            import pandas as pd
        except ImportError:
            return results
        return pd.DataFrame.from_dict(results)
    return results


def _as_dict(params) -> dict:
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    out = {}
    for key, value in params:  # XGBoost's list of pairs: eval_metric may come more than once
        if key == "eval_metric" and key in out:
            before = out[key]
            value = (list(before) if isinstance(before, (list, tuple)) else [before]) + [value]
        out[key] = value
    return out


def _fold_groups(dtrain, nfold, stratified, folds, seed, shuffle):
    """(train groups, test groups) of each fold of a ranking matrix, as
    xgboost.training.mkgroupfold makes them: the query groups shuffled with seed (numpy's
    legacy RandomState, as XGBoost's np.random.seed) and split into nfold runs."""
    if stratified or folds is not None:
        raise ValueError("the folds of a matrix with query groups are of whole groups: give neither stratified=True "
                         "nor folds= (as xgboost.cv, which splits the groups itself)")
    n = dtrain.groups.n_groups
    if isinstance(nfold, bool) or not isinstance(nfold, numbers.Integral) or nfold < 2:
        raise ValueError(f"nfold must be an integer >= 2, got {nfold!r}")
    if nfold > n:
        raise ValueError(f"nfold={nfold} is more folds than dtrain's {n} query groups")
    idx = np.random.RandomState(seed).permutation(n) if shuffle else np.arange(n)
    out_groups = np.array_split(idx, nfold)
    in_groups = [np.concatenate([out_groups[i] for i in range(nfold) if i != k]) for k in range(nfold)]
    return in_groups, out_groups


def _fold_rows(dtrain, nfold, stratified, folds, seed, shuffle):
    """(train rows, test rows) of each fold, as xgboost.training.mknfold makes them."""
    n = dtrain.n_rows
    if folds is None:
        if isinstance(nfold, bool) or not isinstance(nfold, numbers.Integral) or nfold < 2:
            raise ValueError(f"nfold must be an integer >= 2, got {nfold!r}")
        if nfold > n:
            raise ValueError(f"nfold={nfold} is more folds than dtrain's {n} rows")
    label = np.asarray(dtrain.on("cpu").label)
    if not stratified and folds is None:
        idx = np.random.RandomState(seed).permutation(n) if shuffle else np.arange(n)
        out_rows = np.array_split(idx, nfold)
        in_rows = [np.concatenate([out_rows[i] for i in range(nfold) if i != k]) for k in range(nfold)]
        return in_rows, out_rows
    if folds is None:
        try:
            from sklearn.model_selection import StratifiedKFold
        except ImportError:
            raise ValueError("stratified=True uses scikit-learn's StratifiedKFold: install scikit-learn") from None
        folds = StratifiedKFold(n_splits=nfold, shuffle=True, random_state=seed)
    if hasattr(folds, "split"):
        splits = list(folds.split(X=label, y=label))
    else:
        try:
            splits = [(f[0], f[1]) for f in folds]
        except (TypeError, IndexError):
            raise ValueError("folds must be a list of (train indices, test indices) pairs or a scikit-learn splitter "
                             "(KFold, StratifiedKFold, ...)") from None
    if not splits:
        raise ValueError("folds holds no fold")
    return [np.asarray(s[0]) for s in splits], [np.asarray(s[1]) for s in splits]
