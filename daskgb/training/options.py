"""TrainingOptions: everything a fit is told beside its data, checked once, from the front ends down to the workers.

daskgb.train, daskgb.dask.train and the estimators build one TrainingOptions from their
arguments; it is what travels to every Dask worker. Its checks are written once: those
that need no data run as it is made (create), those against the matrices in check(),
which takes a QuantileMatrix (in process, and on each worker) and a DaskQuantileMatrix (on
the client, before any worker starts) alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import metric as _metric
from ..callback import EarlyStopping, TrainingCallback
from ..checkpoint import check_options
from ..feature_sets import interaction_sets
from ..monotone import monotone_vector
from ..objective import QuantileError, Softmax
from ..objectives import get_objective
from ..params import TrainParams
from ..ranking import DEFAULT_METRIC_K, RANKING_OBJECTIVES, parse_metric


@dataclass
class TrainingOptions:
    """A fit's options (see the module docstring). Build it with create()."""

    params: dict  # as the user gave them (XGBoost's names): what the Booster keeps
    train_params: TrainParams
    num_boost_round: int = 10
    verbose_eval: bool | int = True
    obj: object = None
    custom_metric: object = None
    early_stopping_rounds: int | None = None
    maximize: bool | None = None
    callbacks: list = field(default_factory=list)
    checkpoint_dir: Path | None = None
    checkpoint_every: int | None = None
    resume: bool = False
    xgb_model: object = None  # the Booster the fit goes on from (continued.base_model)
    base_rounds: int = 0  # its rounds: num_boost_round counts them too

    @classmethod
    def create(cls, params: dict | None, num_boost_round: int = 10, *, verbose_eval=True, obj=None,
               custom_metric=None, early_stopping_rounds: int | None = None, maximize: bool | None = None,
               callbacks=(), checkpoint_dir=None, checkpoint_every: int | None = None, resume: bool = False,
               has_evals: bool = True, xgb_model=None) -> "TrainingOptions":
        """The options, with every check that needs no data done (ValueError naming the problem).
        has_evals: whether the fit watches eval sets (early stopping needs one). xgb_model: a
        model to go on from (num_boost_round more rounds, as XGBoost counts them)."""
        checkpoint_path = check_options(checkpoint_dir, checkpoint_every, resume)
        if obj is not None and not callable(obj):
            raise ValueError("obj must be a callable obj(margin, dtrain) -> (grad, hess)")
        if custom_metric is not None and not callable(custom_metric):
            raise ValueError("custom_metric must be a callable custom_metric(predt, dmatrix) -> (name, value)")
        params = dict(params or {})
        p = TrainParams.from_dict(params)
        if early_stopping_rounds is not None:
            EarlyStopping(early_stopping_rounds)  # checks the value
            if not has_evals:
                raise ValueError("early stopping needs at least one eval set in evals")
        callbacks = list(callbacks or [])
        for cb in callbacks:
            if not isinstance(cb, TrainingCallback):
                raise ValueError(f"callbacks must be daskgb.callback.TrainingCallback objects, got {type(cb).__name__}")
            if isinstance(cb, EarlyStopping) and not has_evals:
                raise ValueError("early stopping needs at least one eval set in evals")
        if (isinstance(num_boost_round, bool) or not isinstance(num_boost_round, (int, np.integer))
                or num_boost_round < 0):
            raise ValueError(f"num_boost_round must be an integer >= 0, got {num_boost_round!r}")
        from .continued import base_model

        base = base_model(xgb_model)
        base_rounds = 0 if base is None else base.num_boosted_rounds()
        if base is not None and base.params.num_parallel_tree != p.num_parallel_tree:
            # A model's rounds all hold one number of trees (Booster.trees_per_round).
            raise ValueError(f"xgb_model grows num_parallel_tree={base.params.num_parallel_tree} trees a round per "
                             f"output; these parameters grow {p.num_parallel_tree}: pass the model's "
                             "num_parallel_tree to go on from it")
        if base is not None and resume:
            raise ValueError("resume=True and xgb_model=: a checkpoint holds the whole model already; resume "
                             "without xgb_model, or go on from the model without resume")
        options = cls(params, p, base_rounds + int(num_boost_round), verbose_eval, obj, custom_metric,
                      early_stopping_rounds, maximize, callbacks, checkpoint_path, checkpoint_every, bool(resume),
                      base, base_rounds)
        objective = options.objective
        if obj is None and p.num_class > 1 and not isinstance(objective, Softmax):
            raise ValueError(f"num_class={p.num_class} is for multi:softprob and multi:softmax (or a custom "
                             f"objective), not {p.objective}")
        for k in options.metrics:
            if objective.n_groups > 1 and isinstance(objective, QuantileError) and k != "quantile":
                raise ValueError(f"eval_metric {k!r} reads one output per row; a model of several quantile_alpha "
                                 "values takes 'quantile'")
            _metric.check_metric(k, objective.n_groups, p.quantile_alpha)
        return options

    def for_workers(self, device: str) -> "TrainingOptions":
        """These options as the Dask workers take them: on the given device ("cpu" or "cuda",
        the data's), printing nothing (the client shows the progress)."""
        params = {**self.params, "device": device}
        return replace(self, params=params, train_params=TrainParams.from_dict(params), verbose_eval=False)

    # ---------------------------------------------------------------- what the params imply
    @property
    def objective(self):
        """A fresh objective for these params: each fit prepares (and so changes) its own."""
        return get_objective(self.train_params.objective, self.train_params)

    # What follows depends on the params alone and is read every round: worked out once.
    @cached_property
    def metrics(self) -> list[str]:
        """The metrics evaluated on every eval set each round."""
        p = self.train_params
        if p.eval_metric:
            return list(p.eval_metric)
        if self.obj is not None:
            # A custom objective: the named objective's default metric reads one output per row,
            # so with several outputs none is taken; and none where the user turned it off.
            if self.objective.n_groups > 1:
                return []
        if self.custom_metric is not None and _truthy(self.params.get("disable_default_eval_metric")):
            return []
        return [self.objective.default_metric]

    @cached_property
    def rank_default_k(self) -> int:
        """The k an unsuffixed ranking metric is cut at: XGBoost's default, unless it is the
        objective's own default metric."""
        if self.train_params.eval_metric:
            return DEFAULT_METRIC_K
        return getattr(self.objective, "default_metric_k", DEFAULT_METRIC_K)

    @cached_property
    def refits_leaves(self) -> bool:
        """Whether the objective refits each tree's leaves to quantiles of its rows' residuals."""
        objective = self.objective
        return self.obj is None and any(objective.leaf_quantile_alpha(g) is not None
                                        for g in range(objective.n_groups))

    def callbacks_for_run(self) -> list:
        """The callbacks one run calls, in order: the user's, then early stopping's (as XGBoost)."""
        callbacks = list(self.callbacks)
        if self.early_stopping_rounds is not None:
            callbacks.append(EarlyStopping(self.early_stopping_rounds, maximize=self.maximize))
        return callbacks

    # ---------------------------------------------------------------- checks against the data
    def check(self, dtrain, evals, matrix_type) -> tuple:
        """Check the matrices against these options, before any work on them: dtrain and the
        eval sets' matrices must be matrix_type (QuantileMatrix, or DaskQuantileMatrix on the
        client). Returns (interaction sets, monotone vector) for dtrain's features."""
        kind = matrix_type.__name__
        if not isinstance(dtrain, matrix_type):
            raise ValueError(f"dtrain must be a {matrix_type.public_name}")
        if not dtrain.has_labels:
            raise ValueError("dtrain has no labels (y)")
        for item in evals:
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], matrix_type)):
                raise ValueError(f"evals must be a list of ({kind}, name) pairs")
        for m in [dtrain] + [m for m, _ in evals]:
            if getattr(m, "released", False):
                raise ValueError(f"a {kind} given to train was released (release() freed its rows)")
        if self.train_params.objective == "survival:aft" and self.obj is None:
            from ..survival import check_bounds_given

            for m, name in [(dtrain, "dtrain")] + [(m, f"eval set {n!r}") for m, n in evals]:
                check_bounds_given(m, name)
        for m, name in evals:
            if m.n_features != dtrain.n_features:
                raise ValueError(f"eval set {name!r} has {m.n_features} features, dtrain has {dtrain.n_features}")
            if not m.shares_cuts_with(dtrain):
                raise ValueError(f"eval set {name!r} was quantised with its own cuts; build it with "
                                 f"{kind}(..., ref=dtrain)")
            if not m.has_labels:
                raise ValueError(f"eval set {name!r} has no labels")
        p = self.train_params
        if dtrain.max_bin != p.max_bin and "max_bin" in self.params:
            raise ValueError(f"params max_bin={p.max_bin} differs from the {kind}'s max_bin={dtrain.max_bin}, and "
                             "daskgb holds no data to bin it again (build it with max_bin=, or keep its X)")
        if getattr(matrix_type, "ranks_only_with_groups", False):
            self._check_query_groups(dtrain, evals)
        # Constraints are checked against the data before any work: indices in range, names it has.
        interaction = interaction_sets(p.interaction_constraints, dtrain.n_features, dtrain.feature_names)
        monotone = monotone_vector(p.monotone_constraints, dtrain.n_features, dtrain.feature_names)
        types = getattr(dtrain, "feature_types", None)
        if types is not None and monotone is not None:
            bad = [f for f, t in enumerate(types) if t == "c" and monotone[f] != 0]
            if bad:
                raise ValueError(f"monotone_constraints constrain categorical feature {bad[0]}: categories have no "
                                 "order to be monotone in")
        n_groups = self.objective.n_groups
        for m in [dtrain] + [m for m, _ in evals]:
            margin = getattr(m, "base_margin", None)
            if margin is not None and (1 if margin.ndim == 1 else int(margin.shape[1])) != n_groups:
                raise ValueError(f"base_margin has shape {tuple(margin.shape)}; this model needs "
                                 f"{'one margin per row' if n_groups == 1 else f'(n_rows, {n_groups}) margins'}")
        return interaction, monotone

    def _check_query_groups(self, dtrain, evals) -> None:
        """Ranking spread over workers needs query groups on every matrix it ranks: in one process
        the rows without qid are one query (XGBoost's reading), but spread over workers they
        would silently be one query per worker."""
        p = self.train_params
        if self.obj is None and p.objective in RANKING_OBJECTIVES and not dtrain.has_groups:
            raise ValueError(f"objective {p.objective!r} on Dask needs query groups: build the DaskQuantileMatrix "
                             "with qid= (or group=)")
        ranking_metrics = [m for m in self.metrics if parse_metric(m) is not None]
        for m, name in evals:
            if ranking_metrics and not m.has_groups:
                raise ValueError(f"eval_metric {ranking_metrics[0]!r} on Dask needs query groups: build eval set "
                                 f"{name!r} with qid= (or group=)")


def _truthy(v) -> bool:
    return str(v).lower() in ("1", "true", "yes") if v is not None else False
