"""XGBoost's round-by-round Booster methods: Booster.update and Booster.boost (one more round),
and Booster.eval_set (the metrics as XGBoost's log line).

booster.py sits below training/, so it cannot call it: daskgb/__init__.py registers this
module with it (booster.register_training_api).

A round is continued training (continued.py): train() of one round from the booster's trees,
whose margins it recomputes from the trees (a loop of n update() calls moves n(n+1)/2 trees
through the rows; daskgb.train grows the same model in one fit).
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import metric as _metric
from ..arrays import array_module, to_host
from ..collective import LocalCommunicator
from ..matrix import QuantileMatrix
from .loop import train
from .options import TrainingOptions


def update(booster, dtrain, iteration: int, fobj=None) -> None:
    """One more round on dtrain with the booster's parameters (fobj: a custom objective)."""
    if not isinstance(dtrain, QuantileMatrix):
        raise TypeError(f"Invalid training matrix: {type(dtrain).__name__} (update takes a daskgb.QuantileMatrix)")
    _check_iteration(iteration)
    if fobj is not None and not callable(fobj):
        raise ValueError("fobj must be a callable fobj(margin, dtrain) -> (grad, hess)")
    _one_round(booster, dtrain, fobj)


def boost(booster, dtrain, iteration: int, grad=None, hess=None, fobj=None) -> None:
    """One more round from the given gradient pairs (grad, hess) or from a custom objective."""
    if not isinstance(dtrain, QuantileMatrix):
        raise TypeError(f"Invalid training matrix: {type(dtrain).__name__} (boost takes a daskgb.QuantileMatrix)")
    _check_iteration(iteration)
    if all(v is not None for v in (grad, hess, fobj)):
        raise ValueError("Provide either the objective, or the gradient and hessian, not both.")
    if grad is not None or hess is not None:
        if grad is None or hess is None:
            raise ValueError("boost takes grad and hess together")
        k = booster.n_groups
        given = []
        for name, v in (("grad", grad), ("hess", hess)):
            v = np.asarray(to_host(v), dtype=np.float32)
            if v.shape not in ((dtrain.n_rows,), (dtrain.n_rows, k)) and v.size != dtrain.n_rows * k:
                raise ValueError(f"{name} has shape {v.shape}; dtrain has {dtrain.n_rows} rows and the model "
                                 f"{k} output(s) a row")
            given.append(v.reshape(dtrain.n_rows) if k == 1 else v.reshape(dtrain.n_rows, k))

        def fobj(margin, _dtrain):  # the pairs on the training device
            xp = array_module(margin)
            return xp.asarray(given[0]), xp.asarray(given[1])
    elif fobj is None:
        raise ValueError("Invalid input for the boost function. Either the gradient or the objective should have a "
                         "valid value.")
    elif not callable(fobj):
        raise ValueError("fobj must be a callable fobj(margin, dtrain) -> (grad, hess)")
    _one_round(booster, dtrain, fobj)


def _check_iteration(iteration) -> None:
    if isinstance(iteration, bool) or not isinstance(iteration, numbers.Integral) or iteration < 0:
        raise ValueError(f"iteration must be an integer >= 0, got {iteration!r}")


def _one_round(booster, dtrain, obj) -> None:
    """booster gains one round, trained on dtrain from its trees; it keeps its attributes."""
    base = booster if booster.trees else None
    new = train(booster._raw_params, dtrain, 1, verbose_eval=False, obj=obj, xgb_model=base)
    if base is None:  # the first round: the model takes the data's features
        booster.n_features = new.n_features
        booster._feature_names = new.feature_names
        booster._feature_types, booster.categories = new.feature_types, new.categories
    booster.trees, booster.tree_info = new.trees, new.tree_info
    booster.base_score = new.base_score
    booster._train_cuts_token = new._train_cuts_token
    booster._packed = None
    booster.set_attr(**{k: new.attr(k) for k in ("training_path", "training_path_refused")})


def eval_set(booster, evals, iteration: int = 0, feval=None, output_margin: bool = True) -> str:
    """"[iteration]\\tname-metric:value..." for each (QuantileMatrix, name) of evals: the built-in
    metrics to 17 decimals, then feval's to 6, as XGBoost writes them."""
    for item in evals:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError("evals must be a list of (QuantileMatrix, name) pairs")
        if not isinstance(item[0], QuantileMatrix):
            raise TypeError(f"expected QuantileMatrix, got {type(item[0]).__name__}")
        if not isinstance(item[1], str):
            raise TypeError(f"expected string, got {type(item[1]).__name__}")
        if not item[0].has_labels:
            raise ValueError(f"eval set {item[1]!r} has no labels")
    options = TrainingOptions.create(booster._raw_params, 0)
    p = options.train_params
    objective = booster.objective
    rounds = (0, booster.num_boosted_rounds())
    line = [f"[{iteration}]"]
    comm = LocalCommunicator()
    for m, name in evals:
        margin = booster.predict(m, output_margin=True, iteration_range=rounds)
        out = objective.eval_transform(np, margin)
        host = m.on("cpu")
        for k in options.metrics:
            parts = _metric.metric_parts(k, np, host.label, out, host.weight, comm, quantile_alpha=p.quantile_alpha,
                                         groups=host.groups, ndcg_exp_gain=p.ndcg_exp_gain,
                                         rank_default_k=options.rank_default_k, span=(host.n_rows,), root=0,
                                         label_bounds=(host.label_lower_bound, host.label_upper_bound),
                                         aft=(p.aft_loss_distribution, p.aft_loss_distribution_scale))
            line.append(f"{name}-{k}:{_metric.finish(k, to_host(parts)):.17f}")
    if feval is not None:
        for m, name in evals:
            got = feval(booster.predict(m, output_margin=output_margin, iteration_range=rounds), m)
            for metric_name, value in (got if isinstance(got, list) else [got]):
                line.append(f"{name}-{metric_name}:{float(value):f}")
    return "\t".join(line)
