"""In-process scikit-learn style estimators: GBRegressor, GBClassifier and GBRanker, and the
random forests GBRFRegressor and GBRFClassifier.

Thin front ends: each translates its arguments into an XGBoost-style parameter
dict, builds QuantileMatrix objects and calls ``daskgb.train``; no algorithm
lives here. Parameter names follow XGBoost's XGBRegressor / XGBClassifier.
scikit-learn is not a runtime dependency: get_params / set_params introspect
``__init__`` as sklearn.base.BaseEstimator does, so ``sklearn.base.clone``,
grid search and pipelines work, but nothing here imports scikit-learn except
``__sklearn_tags__``, which only scikit-learn itself calls.
"""

from __future__ import annotations

import inspect
import json

import numpy as np

from .arrays import array_module, to_host

__all__ = ["GBRegressor", "GBClassifier", "GBRanker", "GBRFRegressor", "GBRFClassifier", "NotFittedError"]


class NotFittedError(ValueError, AttributeError):
    """The estimator is used before fit (the same bases as scikit-learn's NotFittedError)."""


def _not_fitted_error(message: str) -> NotFittedError:
    """A NotFittedError that is also scikit-learn's when scikit-learn is loaded (so that its
    checks and `except sklearn.exceptions.NotFittedError` see it), without daskgb importing
    scikit-learn itself."""
    import sys

    sk = sys.modules.get("sklearn.exceptions")
    if sk is None:
        return NotFittedError(message)
    both = _BOTH.get(sk.NotFittedError)
    if both is None:
        both = _BOTH[sk.NotFittedError] = type("NotFittedError", (NotFittedError, sk.NotFittedError),
                                                {"__module__": __name__, "__doc__": NotFittedError.__doc__})
    return both(message)


_BOTH: dict = {}


# XGBModel's: the rounds fit trains when n_estimators is unset.
_DEFAULT_N_ESTIMATORS = 100

# The estimator's own parameters, which do not go to training as parameters (XGBModel's
# _wrapper_params, with the Dask estimators' client).
_WRAPPER_PARAMS = frozenset({"importance_type", "kwargs", "missing", "n_estimators", "enable_categorical",
                             "early_stopping_rounds", "callbacks", "feature_types", "feature_weights", "client"})


def _split_eval_metric(eval_metric):
    """(the named metrics or None, the callable metric or None) of eval_metric, as XGBModel's
    _configure_fit splits a name, a callable, or a list of names with at most one callable."""
    if eval_metric is None:
        return None, None
    if callable(eval_metric):
        return None, eval_metric
    if isinstance(eval_metric, str):
        return eval_metric, None
    if not isinstance(eval_metric, (list, tuple)):
        raise TypeError(f"Invalid type for the `eval_metric`: {type(eval_metric)}")
    names, metric = [], None
    for m in eval_metric:
        if callable(m):
            if metric is not None:
                raise NotImplementedError("Using multiple custom metrics is not yet supported.")
            metric = m
        elif isinstance(m, str):
            names.append(m)
        else:
            raise TypeError(f"Invalid type for the `eval_metric`: {type(m)}")
    return (names or None), metric


class _SklearnObjective:
    """XGBoost's scikit-learn objective ``func(y_true, y_pred[, sample_weight]) -> (grad, hess)``
    as train()'s ``obj(margin, dtrain)`` (XGBoost's _objective_decorator): y_pred are the raw
    margins; sample_weight is passed where the rows have weights, which a function without that
    parameter refuses."""

    def __init__(self, func):
        self.func = func
        try:
            self.takes_weight = "sample_weight" in inspect.signature(func).parameters
        except (TypeError, ValueError):  # a builtin without a signature
            self.takes_weight = False

    def __call__(self, margin, dtrain):
        weight = dtrain.get_weight()
        if weight.size > 0:
            if not self.takes_weight:
                raise ValueError("Custom objective doesn't have the `sample_weight` parameter while sample_weight is "
                                 "used.")
            return self.func(dtrain.get_label(), margin, sample_weight=weight)
        return self.func(dtrain.get_label(), margin)


def _positional_args_warned(fn):
    """fn with XGBoost's _deprecate_positional_args: positional arguments past fn's positional
    parameters are taken as its keyword-only ones, in their order, with XGBoost's FutureWarning."""
    import functools

    params = list(inspect.signature(fn).parameters.values())
    n_positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    keyword_only = [p.name for p in params if p.kind == p.KEYWORD_ONLY]

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        extra = args[n_positional:]
        if not extra:
            return fn(*args, **kwargs)
        if len(extra) > len(keyword_only):
            raise TypeError(f"{fn.__qualname__} takes at most {n_positional + len(keyword_only) - 1} positional "
                            f"arguments, {len(args) - 1} were given")
        names = keyword_only[:len(extra)]
        import warnings

        warnings.warn(f"Pass `{', '.join(names)}` as keyword args.  Passing these as positional arguments will be "
                      "considered as error in future releases.", FutureWarning, stacklevel=2)
        for name, value in zip(names, extra):
            if name in kwargs:
                raise TypeError(f"{fn.__qualname__} got multiple values for argument {name!r}")
            kwargs[name] = value
        return fn(*args[:n_positional], **kwargs)

    return inner


class _SklearnMetric:
    """XGBoost's scikit-learn metric ``func(y_true, y_pred[, sample_weight]) -> float`` (a
    scikit-learn metric, say) as train()'s ``custom_metric(predt, dmatrix) -> (name, value)``,
    named after the function (XGBoost's _metric_decorator). As in XGBoost, early stopping
    minimises it unless its name says otherwise (auc..., map..., ndcg..., pre...)."""

    def __init__(self, func):
        self.func = func

    def __call__(self, predt, dmatrix):
        y_true, weight = dmatrix.get_label(), dmatrix.get_weight()
        y_true, predt = to_host(y_true), to_host(predt)
        name = getattr(self.func, "__name__", type(self.func).__name__)
        if weight.size == 0:
            return name, self.func(y_true, predt)
        return name, self.func(y_true, predt, sample_weight=to_host(weight))


class _SklearnRankingMetric(_SklearnMetric):
    """XGBRanker's callable metric (XGBoost's ltr_metric_decorator): ``func(y_true, y_score)`` of
    each query group, a group of one row scoring 1.0, averaged with the groups' sizes as weights
    (what XGBoost weighs them by: DMatrix.get_group())."""

    def __call__(self, predt, dmatrix):
        name = getattr(self.func, "__name__", type(self.func).__name__)
        return name, self.score(to_host(dmatrix.get_label()), to_host(predt), to_host(dmatrix.get_group()))

    def score(self, y_true, predt, sizes) -> float:
        """The metric of predictions predt of labels y_true in query groups of the given sizes."""
        sizes = np.asarray(sizes, dtype=np.int64)
        if sizes.size == 0:
            raise ValueError("a ranker's eval_metric callable scores query groups, and the eval set has none")
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        scores = [1.0 if b - a <= 1 else float(self.func(y_true[a:b], predt[a:b])) for a, b in zip(ptr[:-1], ptr[1:])]
        return float(np.average(scores, weights=sizes))


def _fit_feature_weights(model, weights):
    """fit's feature_weights, which the constructor's must not also give."""
    if weights is not None and model.feature_weights is not None:
        raise ValueError("feature_weights are given to both the constructor and fit; give them once")
    return weights


def _one_target(y) -> None:
    """A clear error for y of several columns (several targets a row)."""
    shape = getattr(y, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] > 1:
        raise ValueError(f"y has {shape[1]} columns: multi-output regression and multi-label classification "
                         "(XGBoost's num_target > 1) are not supported by daskgb; fit a model per column")


def _column_vector_y(y):
    """y of shape (n, 1) as (n,), with scikit-learn's DataConversionWarning (a UserWarning
    when scikit-learn is not loaded), as its estimators warn."""
    import sys
    import warnings

    if getattr(y, "ndim", 1) == 2 and y.shape[1] == 1:
        sk = sys.modules.get("sklearn.exceptions")
        warnings.warn("A column-vector y was passed when a 1d array was expected; it is taken as y.ravel()",
                      UserWarning if sk is None else sk.DataConversionWarning, stacklevel=3)
        return y[:, 0] if not hasattr(y, "iloc") else y.iloc[:, 0]
    return y


class _GBModel:
    """Parameters, fit and the scikit-learn protocol shared by both estimators. Used itself (as
    XGBoost's XGBModel is), it fits and predicts as a regressor does, with XGBoost's default
    objective."""

    _estimator_type = None
    _default_objective = "reg:squarederror"

    def _fit_labels(self, y):
        return y

    def _eval_labels(self, y):
        return y

    def predict(self, X, output_margin=False, iteration_range=None, *, base_margin=None):
        """Predicted values (numpy, or cupy for cupy input); base_margin: each row's starting
        margin (XGBoost's), instead of the base score."""
        return self._margin_or_value(X, output_margin, iteration_range, base_margin=base_margin)

    @_positional_args_warned
    def __init__(
        self,
        *,
        n_estimators=None,
        max_depth=None,
        max_leaves=None,
        max_bin=None,
        grow_policy=None,
        learning_rate=None,
        verbosity=None,
        objective=None,
        booster=None,
        tree_method=None,
        n_jobs=None,
        gamma=None,
        min_child_weight=None,
        max_delta_step=None,
        subsample=None,
        sampling_method=None,
        colsample_bytree=None,
        colsample_bylevel=None,
        colsample_bynode=None,
        reg_alpha=None,
        reg_lambda=None,
        scale_pos_weight=None,
        base_score=None,
        random_state=None,
        missing=np.nan,
        num_parallel_tree=None,
        monotone_constraints=None,
        interaction_constraints=None,
        importance_type=None,
        device=None,
        validate_parameters=None,
        enable_categorical=False,
        feature_types=None,
        feature_weights=None,
        max_cat_to_onehot=None,
        max_cat_threshold=None,
        multi_strategy=None,
        eval_metric=None,
        early_stopping_rounds=None,
        callbacks=None,
        **kwargs,
    ):
        # XGBModel's parameters, in its order. None: the training default (XGBoost's), so that
        # get_params() shows what the user set, as XGBoost's estimators do.
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.max_bin = max_bin
        self.grow_policy = grow_policy
        self.learning_rate = learning_rate
        self.verbosity = verbosity  # accepted; daskgb's logging is Python's
        self.objective = objective  # a name, or XGBoost's sklearn callable objective(y_true, y_pred)
        self.booster = booster  # "gbtree" only
        self.tree_method = tree_method
        self.n_jobs = n_jobs  # accepted; threads are the workers'
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.sampling_method = sampling_method
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.reg_alpha = reg_alpha
        self.reg_lambda = reg_lambda
        self.scale_pos_weight = scale_pos_weight
        self.base_score = base_score
        self.random_state = random_state
        self.missing = missing
        self.num_parallel_tree = num_parallel_tree
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.importance_type = importance_type  # feature_importances_'s (gain by default)
        self.device = device
        self.validate_parameters = validate_parameters  # accepted: unknown parameters are always errors here
        # Categorical features (XGBoost's names): a dataframe's `category` columns need
        # enable_categorical; feature_types ("q" / "c" per feature) marks them in arrays.
        self.enable_categorical = enable_categorical
        self.feature_types = feature_types
        self.feature_weights = feature_weights  # column sampling's weights, one per feature
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
        self.multi_strategy = multi_strategy  # "one_output_per_tree" only
        self.eval_metric = eval_metric  # names, or XGBoost's sklearn callable metric(y_true, y_pred)
        # Training controls, not model parameters (XGBoost 2's estimators take them here too).
        self.early_stopping_rounds = early_stopping_rounds
        self.callbacks = callbacks
        # Extra XGBoost parameters, passed to train() as they are (XGBoost's
        # sklearn wrapper does the same); train() rejects unknown ones. Private: an
        # estimator's __init__ sets nothing public but its parameters (scikit-learn).
        self._kwargs = kwargs

    @property
    def kwargs(self) -> dict:
        """The extra XGBoost parameters (as XGBModel.kwargs)."""
        return self._kwargs

    # -- scikit-learn parameter protocol ---------------------------------

    @classmethod
    def _param_names(cls) -> list[str]:
        # A subclass __init__ may name only what it changes (objective) and pass
        # the rest on through **kwargs, so collect names along the MRO.
        names: dict[str, None] = {}
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            for p in inspect.signature(init).parameters.values():
                if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                    names.setdefault(p.name)
        return sorted(names)

    def get_params(self, deep=True):
        """The constructor arguments (None where left unset), extra XGBoost parameters (kwargs)
        included; a random_state given as a numpy RandomState or Generator as the int it draws
        (XGBoost's get_params)."""
        params = {name: getattr(self, name) for name in self._param_names()}
        params.update(self._kwargs)
        rs = params.get("random_state")
        if isinstance(rs, np.random.RandomState):
            params["random_state"] = rs.randint(np.iinfo(np.int32).max)
        elif isinstance(rs, np.random.Generator):
            params["random_state"] = int(rs.integers(np.iinfo(np.int32).max))
        return params

    def get_xgb_params(self) -> dict:
        """The parameters that go to training (XGBModel.get_xgb_params): get_params() without the
        estimator's own (n_estimators, missing, importance_type, ...) and without callables."""
        return {k: v for k, v in self.get_params().items() if k not in _WRAPPER_PARAMS and not callable(v)}

    def set_params(self, **params):
        """Set constructor arguments; any other name becomes an extra XGBoost parameter."""
        names = set(self._param_names())
        for key, value in params.items():
            if key in names:
                setattr(self, key, value)
            else:
                self._kwargs[key] = value
        booster = getattr(self, "_Booster", None)
        if booster is not None:
            # As XGBModel.set_params: a fitted model's booster takes the new training parameters.
            from dataclasses import fields

            from .params import ALIASES, IGNORED, TrainParams

            known = {f.name for f in fields(TrainParams)} | IGNORED
            booster.set_param({k: v for k, v in params.items()
                               if ALIASES.get(k, k) in known and v is not None and not callable(v)})
        return self

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        tags = Tags(estimator_type=self._estimator_type, target_tags=TargetTags(required=True))
        if self._estimator_type == "classifier":
            tags.classifier_tags = ClassifierTags(multi_class=True)
        else:
            tags.regressor_tags = RegressorTags()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    def __repr__(self):
        defaults = {
            p.name: p.default
            for klass in reversed(type(self).__mro__)
            if "__init__" in klass.__dict__
            for p in inspect.signature(klass.__dict__["__init__"]).parameters.values()
            if p.default is not inspect.Parameter.empty
        }
        changed = []
        for key, value in self.get_params().items():
            default = defaults.get(key, inspect.Parameter.empty)
            if key in defaults and (value is default or _both_nan(value, default) or _equal(value, default)):
                continue
            changed.append(f"{key}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"

    # -- training ----------------------------------------------------------

    def _train_params(self) -> dict:
        """fit's training parameters: get_xgb_params() without the unset ones, the objective and
        the named eval metrics; the callables (objective, metric) go to training as obj= and
        custom_metric= (_custom_callables)."""
        from .params import ALIASES

        named = {k: v for k, v in self.get_xgb_params().items() if v is not None and k not in self._kwargs}
        named.pop("eval_metric", None)
        named["objective"] = self._objective_name()
        metrics, _ = _split_eval_metric(self.eval_metric)
        if metrics is not None:
            named["eval_metric"] = metrics
        weights = getattr(self, "_fit_feature_weights", None)
        weights = self.feature_weights if weights is None else weights
        if weights is not None:
            named["feature_weights"] = [float(w) for w in _host_1d(weights)]
        params = dict(named)
        canonical = {ALIASES.get(k, k): k for k in named}
        for key, value in self._kwargs.items():
            name = ALIASES.get(key, key)
            if name in canonical:
                raise ValueError(
                    f"{key!r} is the same parameter as {canonical[name]!r}; "
                    f"pass one of them to {type(self).__name__}, not both"
                )
            params[key] = value
        return params

    def _objective_name(self) -> str:
        """The objective training runs; for a callable objective, the named one whose output
        transform predictions take (XGBoost's choice: reg:squarederror, binary:logistic)."""
        if callable(self.objective):
            return self._default_objective
        return self.objective if self.objective is not None else self._default_objective

    def _custom_callables(self) -> dict:
        """obj= and custom_metric= for training: XGBoost's sklearn signatures wrapped as train()'s."""
        out = {}
        if callable(self.objective):
            out["obj"] = _SklearnObjective(self.objective)
        _, metric = _split_eval_metric(self.eval_metric)
        if metric is not None:
            out["custom_metric"] = _SklearnMetric(metric)
        return out

    def _matrix_max_bin(self) -> int:
        from .params import TrainParams

        return self.max_bin if self.max_bin is not None else TrainParams.max_bin

    @_positional_args_warned
    def fit(self, X, y, *, sample_weight=None, eval_set=None, sample_weight_eval_set=None, verbose=True,
            checkpoint_dir=None, checkpoint_every=None, resume=False, xgb_model=None, base_margin=None,
            base_margin_eval_set=None, feature_weights=None):
        """Train ``n_estimators`` rounds on (X, y); eval_set is a list of (X, y) pairs.
        checkpoint_dir / checkpoint_every / resume, and xgb_model (a model to go on from: a
        Booster, a fitted estimator or a saved model's path): as daskgb.train takes them.
        base_margin (and base_margin_eval_set, one per eval_set entry): each row's starting
        margin, instead of the base score (XGBoost's names). feature_weights: as the constructor's
        (XGBoost's fit takes them too), for this fit. verbose: print the eval sets' metrics every
        round (True, XGBoost's default), every n-th round (an int n) or not (False)."""
        from .matrix import QuantileMatrix

        self._fit_feature_weights = _fit_feature_weights(self, feature_weights)
        self._checkpointing = _checkpointing(checkpoint_dir, checkpoint_every, resume)
        self._continuing = {} if xgb_model is None else {"xgb_model": xgb_model}

        if X is None:  # XGBoost's type of error (scikit-learn's check_estimator asks for one that names y)
            raise TypeError(f"{type(self).__name__}.fit got X of type NoneType: no feature data given")
        if y is None:
            classes = "Invalid classes: " if self._estimator_type == "classifier" else ""
            raise ValueError(f"{classes}{type(self).__name__} requires y to be passed, but the target y is None "
                             "(y: the labels)")
        y_given = y
        y = _column_vector_y(y)
        _one_target(y)
        y_train = self._fit_labels(y)
        params = self._train_params()  # after the labels: the class count picks the objective
        # Matrices are built by keyword, as XGBoost's estimators build theirs.
        dtrain = QuantileMatrix(
            X=X, y=y_train, weight=sample_weight, base_margin=base_margin, missing=self.missing,
            max_bin=self._matrix_max_bin(), device=self.device, feature_types=self.feature_types,
            enable_categorical=self.enable_categorical
        )
        eval_set = list(eval_set or ())
        for name, given in (("sample_weight_eval_set", sample_weight_eval_set),
                            ("base_margin_eval_set", base_margin_eval_set)):
            if given is not None and len(given) != len(eval_set):
                raise ValueError(f"{name} has {len(given)} entries, eval_set has {len(eval_set)}")
        evals = []
        for i, (X_eval, y_eval) in enumerate(eval_set):
            weight = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
            margin = None if base_margin_eval_set is None else base_margin_eval_set[i]
            if X_eval is X and y_eval is y_given and weight is sample_weight and margin is base_margin:
                # The training data itself (the same objects): its matrix, not a second one, as XGBoost does.
                evals.append((dtrain, f"validation_{i}"))
                continue
            # ref= the training matrix: eval rows are binned with the training cuts.
            deval = QuantileMatrix(
                X=X_eval,
                y=self._eval_labels(y_eval),
                weight=weight,
                base_margin=margin,
                missing=self.missing,
                max_bin=self._matrix_max_bin(),
                ref=dtrain,
                device=self.device,
            )
            evals.append((deval, f"validation_{i}"))
        return self._train(params, dtrain, evals, verbose, X)

    def _train(self, params, dtrain, evals, verbose, X):
        from .training import run

        evals_result: dict = {}
        self._Booster = run(self._training_options(params, verbose, evals), dtrain, evals, evals_result=evals_result)
        self.evals_result_ = evals_result
        self.n_features_in_ = dtrain.n_features
        if hasattr(X, "columns") and dtrain.feature_names is not None:  # a dataframe
            self.feature_names_in_ = np.asarray(dtrain.feature_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    def get_num_boosting_rounds(self) -> int:
        """The boosting rounds fit trains (XGBModel's): n_estimators, 100 when unset."""
        return _DEFAULT_N_ESTIMATORS if self.n_estimators is None else self.n_estimators

    def _training_options(self, params, verbose, evals):
        """The fit's TrainingOptions: get_num_boosting_rounds() rounds, the training controls, printing as
        verbose says."""
        from .training import TrainingOptions

        return TrainingOptions.create(params, self.get_num_boosting_rounds(), verbose_eval=verbose,
                                      has_evals=bool(evals), **self._training_controls(), **self._custom_callables())

    def _training_controls(self) -> dict:
        """early_stopping_rounds and callbacks for train(); the callbacks are copied, so that a
        fit never changes the estimator's own callback objects (clone and refit stay clean)."""
        import copy

        return {"early_stopping_rounds": self.early_stopping_rounds,
                "callbacks": [copy.deepcopy(cb) for cb in (self.callbacks or [])],
                **getattr(self, "_checkpointing", {}), **getattr(self, "_continuing", {})}

    @property
    def best_iteration(self):
        """The best round found by early stopping (AttributeError without early stopping, as XGBoost)."""
        b = self.get_booster()
        if b.best_iteration is None:
            raise AttributeError("best_iteration is set only by early stopping")
        return b.best_iteration

    @property
    def best_score(self):
        b = self.get_booster()
        if b.best_score is None:
            raise AttributeError("best_score is set only by early stopping")
        return b.best_score

    # -- fitted state ------------------------------------------------------

    def _check_fitted(self):
        if getattr(self, "_Booster", None) is None:
            raise _not_fitted_error(f"this {type(self).__name__} is not fitted yet; call fit first")

    def __sklearn_is_fitted__(self):
        return getattr(self, "_Booster", None) is not None

    def get_booster(self):
        """The trained daskgb.Booster."""
        self._check_fitted()
        return self._Booster

    def evals_result(self) -> dict:
        """{'validation_<i>': {metric: [value per round]}} for each eval_set entry of fit."""
        self._check_fitted()
        return self.evals_result_

    @property
    def feature_importances_(self):
        """Each feature's importance of importance_type (gain when unset: weight, gain, cover,
        total_gain or total_cover, as Booster.get_score), normalised to sum to 1 (zeros if no
        tree splits), in the order of the model's features (XGBModel's)."""
        booster = self.get_booster()
        scores = booster.get_score(importance_type=self.importance_type if self.importance_type else "gain")
        n = booster.n_features
        names = booster.feature_names or [f"f{i}" for i in range(n)]
        values = np.array([scores.get(name, 0.0) for name in names], dtype=np.float32)
        total = values.sum()
        return values / total if total > 0 else values

    @property
    def coef_(self):
        """Linear models' coefficients: not defined for trees (AttributeError, as XGBModel's for
        booster='gbtree'), so that scikit-learn's feature selection reads feature_importances_."""
        raise AttributeError(f"Coefficients are not defined for Booster type {self.booster}")

    @property
    def intercept_(self) -> np.ndarray:
        """The model's base_score (XGBModel's for trees): shape (1,), or one per output."""
        return np.atleast_1d(np.asarray(self.get_booster().base_score, dtype=np.float32))

    def save_model(self, fname, format: str = "daskgb") -> None:
        """Booster.save_model's file, with the estimator's type (and a classifier's classes) in the
        model's "scikit_learn" attribute, as XGBModel.save_model writes it."""
        meta = {"_estimator_type": self._estimator_type}
        classes = getattr(self, "classes_", None)
        if classes is not None and classes.dtype.kind in "biuU":
            meta["classes_"] = classes.tolist()
        booster = self.get_booster()
        booster.set_attr(scikit_learn=json.dumps(meta))
        try:
            booster.save_model(fname, format=format)
        finally:
            booster.set_attr(scikit_learn=None)

    def load_model(self, fname) -> None:
        """Load a model saved by save_model, Booster.save_model or XGBoost (JSON): an estimator of
        another type is a TypeError (XGBModel.load_model's check); the objective, base_score,
        feature_types and a classifier's classes come with the model."""
        from .booster import Booster

        booster = Booster().load_model(fname)
        meta = json.loads(booster.attr("scikit_learn") or "{}")
        kind = meta.get("_estimator_type")
        if kind is not None and kind != self._estimator_type:
            raise TypeError(f"Loading an estimator with different type. Expecting: {self._estimator_type}, got: {kind}")
        booster.set_attr(scikit_learn=None)
        self._Booster = booster
        self.objective = booster.params.objective
        self.booster = "gbtree"
        self.base_score = booster.base_score
        self.feature_types = booster.feature_types
        self.enable_categorical = booster.feature_types is not None and "c" in booster.feature_types
        self.n_features_in_ = booster.n_features
        if booster.feature_names is not None:
            self.feature_names_in_ = np.asarray(booster.feature_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self._loaded_classes(booster, meta.get("classes_"))

    def _loaded_classes(self, booster, classes) -> None:
        """What a classifier learns of its classes from a loaded model."""

    def apply(self, X, iteration_range=None):
        """The leaf each tree sends each row to: (n_rows, n_trees) leaf ids (XGBoost's apply;
        Booster.predict with pred_leaf=True)."""
        return self._margin_or_value(X, iteration_range=iteration_range, pred_leaf=True)

    def _margin_or_value(self, X, output_margin=False, iteration_range=None, **explain):
        self._check_fitted()
        if not hasattr(X, "shape"):  # a list or another array-like
            X = np.asarray(X)
        shape = X.shape
        expected = getattr(self, "n_features_in_", None)
        if shape is not None and len(shape) == 2 and expected is not None and shape[1] != expected:
            raise ValueError(f"X has {shape[1]} features, but {type(self).__name__} is expecting {expected} features "
                             "as input")
        if hasattr(X, "dtypes") and hasattr(X, "columns"):
            from .inputs import category_columns

            # As XGBoost's estimators: category columns need enable_categorical at predict too.
            category_columns(X, bool(self.enable_categorical))
        kwargs = {"output_margin": output_margin}
        if not _both_nan(float(self.missing), np.nan):
            kwargs["missing"] = self.missing
        if iteration_range is not None:
            kwargs["iteration_range"] = iteration_range
        return self._Booster.predict(X, **kwargs, **explain)


class GBRegressor(_GBModel):
    """Gradient-boosted trees for regression (XGBoost's XGBRegressor parameters)."""

    _estimator_type = "regressor"
    _default_objective = "reg:squarederror"

    @_positional_args_warned
    def __init__(self, *, objective="reg:squarederror", **kwargs):
        super().__init__(objective=objective, **kwargs)

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R² of predict(X) against y."""
        y_true = _host_1d(y).astype(np.float64)
        y_pred = to_host(self.predict(X)).astype(np.float64)
        w = np.ones_like(y_true) if sample_weight is None else _host_1d(sample_weight).astype(np.float64)
        residual = np.sum(w * (y_true - y_pred) ** 2)
        total = np.sum(w * (y_true - np.average(y_true, weights=w)) ** 2)
        if total == 0.0:  # constant y: scikit-learn's r2_score convention
            return 1.0 if residual == 0.0 else 0.0
        return float(1.0 - residual / total)


class GBClassifier(_GBModel):
    """Gradient-boosted trees for classification (XGBoost's XGBClassifier parameters).

    Any labels (integers, floats, strings, ...) are accepted: they are encoded as
    0..n_classes-1 in sorted order (``classes_``) and predict returns the original
    labels. Two classes train binary:logistic; more train multi:softprob (one tree
    per class per round), as XGBClassifier does.
    """

    _estimator_type = "classifier"
    _default_objective = "binary:logistic"

    @_positional_args_warned
    def __init__(self, *, objective="binary:logistic", **kwargs):
        super().__init__(objective=objective, **kwargs)

    def _fit_labels(self, y):
        objective = self._objective_name()
        if objective not in _CLASSIFIER_OBJECTIVES:
            raise ValueError(f"{type(self).__name__} needs a classification objective (one of "
                             f"{list(_CLASSIFIER_OBJECTIVES)}), got {objective!r}")
        y_host = _host_1d(y)
        if y_host.dtype.kind == "f" and not np.all(np.isfinite(y_host)):
            raise ValueError("label y contains NaN or inf")
        classes = np.unique(y_host)
        if len(classes) == 0:
            raise ValueError("y is empty: no labels to train on")
        if y_host.dtype.kind == "f" and np.any(y_host != np.floor(y_host)):
            raise ValueError(f"Unknown label type: continuous (y has non-integer values); {type(self).__name__} "
                             "needs class labels")
        if len(classes) == 1:
            raise ValueError(f"y has one class ({classes.tolist()[0]!r}); {type(self).__name__} needs two or more")
        if len(classes) > 2 and objective in ("binary:logistic", "reg:logistic", "binary:logitraw"):
            if not callable(self.objective) and self.objective not in (None, self._default_objective):
                raise ValueError(f"y has {len(classes)} classes but objective={objective!r} is binary; use "
                                 "multi:softprob or multi:softmax")
        self.classes_ = classes
        self.n_classes_ = len(classes)
        return self._encode(y, y_host)

    def _train_params(self) -> dict:
        params = super()._train_params()
        if getattr(self, "n_classes_", 2) > 2:
            # As XGBClassifier: more than two classes switch the default objective to softprob.
            if params["objective"] not in ("multi:softprob", "multi:softmax"):
                params["objective"] = "multi:softprob"
            params["num_class"] = self.n_classes_
        elif params["objective"] in ("multi:softprob", "multi:softmax"):
            params["num_class"] = 2
        return params

    def _loaded_classes(self, booster, classes) -> None:
        k = booster.n_groups
        self.classes_ = np.asarray(classes) if classes is not None else np.arange(max(k, 2))
        self.n_classes_ = len(self.classes_)

    @property
    def _multiclass(self) -> bool:
        return self.get_booster().n_groups > 1

    def _eval_labels(self, y):
        y_host = _host_1d(y)
        unseen = np.setdiff1d(np.unique(y_host), self.classes_)
        if len(unseen):
            raise ValueError(f"eval_set labels {unseen.tolist()} are not among the training classes {self.classes_.tolist()}")
        return self._encode(y, y_host)

    def _encode(self, y, y_host):
        encoded = np.searchsorted(self.classes_, y_host).astype(np.float32)
        xp = array_module(y)
        return encoded if xp is np else xp.asarray(encoded)

    def predict_proba(self, X, iteration_range=None, *, base_margin=None):
        """(n, n_classes_) array of class probabilities, columns in classes_ order; base_margin as
        predict's."""
        if self._multiclass:
            margin = self._margin_or_value(X, True, iteration_range, base_margin=base_margin)
            return self.get_booster().objective.eval_transform(array_module(margin), margin)
        p = self._margin_or_value(X, False, iteration_range, base_margin=base_margin)
        xp = array_module(p)
        return xp.stack([1.0 - p, p], axis=1)

    def predict(self, X, output_margin=False, iteration_range=None, *, base_margin=None):
        """Predicted labels (from classes_), or raw margins with output_margin=True; base_margin:
        each row's starting margin (XGBoost's)."""
        p = self._margin_or_value(X, output_margin or self._multiclass, iteration_range, base_margin=base_margin)
        if output_margin:
            return p
        xp = array_module(p)
        index = xp.argmax(p, axis=1) if self._multiclass else (p > 0.5).astype(np.int64)
        if xp is not np and self.classes_.dtype.kind in "biuf":
            return xp.asarray(self.classes_)[index]
        return self.classes_[to_host(index)]

    def score(self, X, y, sample_weight=None):
        """Accuracy of predict(X) against y (weighted by sample_weight if given)."""
        correct = (to_host(self.predict(X)) == _host_1d(y)).astype(np.float64)
        if sample_weight is None:
            return float(correct.mean())
        return float(np.average(correct, weights=_host_1d(sample_weight)))


class _RandomForest:
    """XGBoost's XGBRFModel: one boosting round of n_estimators parallel trees (num_parallel_tree),
    with a random forest's defaults: learning_rate 1 (the leaves of the round's trees averaged),
    rows and each node's columns sampled (subsample, colsample_bynode 0.8), and almost no L2
    regularisation (reg_lambda 1e-5). Early stopping and callbacks are refused, as XGBoost
    refuses them: the forest is one round. Put before the estimator in the bases."""

    @_positional_args_warned
    def __init__(self, *, learning_rate=1.0, subsample=0.8, colsample_bynode=0.8, reg_lambda=1e-5, **kwargs):
        super().__init__(learning_rate=learning_rate, subsample=subsample, colsample_bynode=colsample_bynode,
                         reg_lambda=reg_lambda, **kwargs)

    def get_num_boosting_rounds(self) -> int:
        return 1

    def _train_params(self) -> dict:
        """fit's parameters, checked before any data is quantised."""
        if self.early_stopping_rounds is not None or self.callbacks is not None:
            # NotImplementedError: what XGBoost's random forest estimators raise here.
            raise NotImplementedError(f"early_stopping_rounds and callbacks are not supported by "
                                      f"{type(self).__name__} (a random forest is one boosting round; as XGBoost's "
                                      "random forest estimators)")
        n = _DEFAULT_N_ESTIMATORS if self.n_estimators is None else self.n_estimators
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n_estimators (the forest's trees) must be an integer >= 1, got {n!r}")
        # As XGBRFModel.get_xgb_params: the trees are the round's parallel trees, whatever
        # num_parallel_tree says.
        return {**super()._train_params(), "num_parallel_tree": int(n)}


class GBRFRegressor(_RandomForest, GBRegressor):
    """A random forest for regression (XGBoost's XGBRFRegressor): n_estimators trees grown in
    one round, each on its own sample of rows and columns, their predictions averaged."""


class GBRFClassifier(_RandomForest, GBClassifier):
    """A random forest for classification (XGBoost's XGBRFClassifier): n_estimators trees (per
    class, for more than two classes) grown in one round on their own samples of rows and columns."""


class GBRanker(_GBModel):
    """Learning to rank with LambdaMART (XGBoost's XGBRanker parameters and fit signature).

    Query groups come from ``qid=`` (a query id per row, non-decreasing) or
    ``group=`` (group sizes), or from a ``qid`` column of a pandas X, as with
    XGBRanker; sample weights are per query group. predict returns ranking scores
    (margins); score returns the last evaluation metric (ndcg@32 by default).
    """

    _estimator_type = "ranker"
    _default_objective = "rank:ndcg"

    @_positional_args_warned
    def __init__(self, *, objective="rank:ndcg", **kwargs):
        # Checked in fit: scikit-learn's __init__ and set_params only store.
        super().__init__(objective=objective, **kwargs)

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=True))
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    @_positional_args_warned
    def fit(self, X, y, *, group=None, qid=None, sample_weight=None, eval_set=None, eval_group=None, eval_qid=None,
            verbose=False, sample_weight_eval_set=None, checkpoint_dir=None, checkpoint_every=None, resume=False, xgb_model=None):
        """Train ``n_estimators`` rounds on (X, y) with its query groups (group= or qid=, or X's qid column;
        with none of them, all rows are one query).

        eval_set is a list of (X, y) pairs, with their groups in eval_group or
        eval_qid (lists like eval_set) or in their X's qid column;
        sample_weight and sample_weight_eval_set hold one weight per query group.
        checkpoint_dir / checkpoint_every / resume, and xgb_model (a model to go on from: a
        Booster, a fitted estimator or a saved model's path): as daskgb.train takes them."""
        from .matrix import QuantileMatrix

        self._checkpointing = _checkpointing(checkpoint_dir, checkpoint_every, resume)
        self._continuing = {} if xgb_model is None else {"xgb_model": xgb_model}

        def matrix(X, y, weight, qid, group, ref):
            return QuantileMatrix(X=X, y=y, weight=weight, missing=self.missing, max_bin=self._matrix_max_bin(), ref=ref,
                                  device=self.device, qid=qid, group=group,
                                  feature_types=self.feature_types if ref is None else None,
                                  enable_categorical=self.enable_categorical)

        X, qid = _split_qid(X, qid)
        if group is None and qid is None and y is not None:
            # No query groups given: the rows are one query, as score() takes them (XGBRanker
            # raises here; scikit-learn's fit(X, y) protocol needs an answer).
            group = [(X if hasattr(X, "shape") else np.asarray(X)).shape[0]]
        return self._fit_ranking(matrix, _split_qid, X, y, group, qid, sample_weight, eval_set, eval_group, eval_qid,
                                 verbose, sample_weight_eval_set)

    def _fit_ranking(self, matrix, split_qid, X, y, group, qid, sample_weight, eval_set, eval_group, eval_qid,
                     verbose, sample_weight_eval_set):
        """fit's checks and matrices, shared with DaskGBRanker: ``matrix(X, y, weight, qid, group, ref)``
        builds one matrix, ``split_qid(X, qid)`` takes a qid column out of X."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        _check_rank_objective(self.objective)
        X, qid = split_qid(X, qid)
        if group is None and qid is None:
            raise ValueError(f"{type(self).__name__} needs query groups: pass group= or qid= (or a qid column in X)")
        params = self._train_params()
        dtrain = matrix(X, y, sample_weight, qid, group, None)
        eval_set = list(eval_set or ())
        for what, v in (("eval_group", eval_group), ("eval_qid", eval_qid),
                        ("sample_weight_eval_set", sample_weight_eval_set)):
            if v is not None and len(v) != len(eval_set):
                raise ValueError(f"{what} has {len(v)} entries, eval_set has {len(eval_set)}")
        evals = []
        for i, (X_eval, y_eval) in enumerate(eval_set):
            X_eval, q = split_qid(X_eval, None if eval_qid is None else eval_qid[i])
            g = None if eval_group is None else eval_group[i]
            if g is None and q is None:
                raise ValueError(f"eval_set[{i}] has no query groups. Either `group` or `qid` is needed for ranking "
                                 "(XGBoost's words): pass eval_group or eval_qid (or a qid column)")
            weight = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
            # ref= the training matrix: eval rows are binned with the training cuts.
            evals.append((matrix(X_eval, y_eval, weight, q, g, dtrain), f"validation_{i}"))
        return self._train(params, dtrain, evals, verbose, X)

    def _custom_callables(self) -> dict:
        out = super()._custom_callables()
        if "custom_metric" in out:  # scored query group by query group, as XGBRanker scores it
            out["custom_metric"] = _SklearnRankingMetric(out["custom_metric"].func)
        return out

    def predict(self, X, output_margin=False, iteration_range=None, *, base_margin=None):
        """Ranking scores: higher ranks first (a qid column in X is ignored); base_margin as
        GBRegressor.predict's."""
        X, _ = _split_qid(X, None)
        return self._margin_or_value(X, output_margin, iteration_range, base_margin=base_margin)

    def score(self, X, y):
        """The last evaluation metric (eval_metric, or the objective's default, e.g. ndcg@32; a callable
        eval_metric's, query by query) of predict(X) against y, over the query groups of X's qid column (all
        rows one query without it), as XGBRanker."""
        from .metric import evaluate
        from .ranking import groups_from_qid

        X, qid = _split_qid(X, None)
        y = _host_1d(y).astype(np.float32)
        pred = to_host(self.predict(X)).astype(np.float32)
        booster = self.get_booster()
        name, k = _score_metric(booster)
        groups = None if qid is None else groups_from_qid(qid, y.shape[0])
        _, custom = _split_eval_metric(self.eval_metric)
        if custom is not None:  # the last metric XGBRanker reports: the callable one, query by query
            sizes = [y.shape[0]] if groups is None else np.diff(groups.ptr)
            return _SklearnRankingMetric(custom).score(y, pred, sizes)
        return evaluate(name, np, y, pred, groups=groups, ndcg_exp_gain=booster.params.ndcg_exp_gain,
                        rank_default_k=k)


def _checkpointing(checkpoint_dir, checkpoint_every, resume) -> dict:
    """fit's checkpoint arguments for train(), checked now (before any quantising); none
    given: nothing, so that a fit without them calls train as before."""
    from .checkpoint import check_options

    check_options(checkpoint_dir, checkpoint_every, resume)
    if checkpoint_dir is None:
        return {}
    return {"checkpoint_dir": checkpoint_dir, "checkpoint_every": checkpoint_every, "resume": resume}


def _score_metric(booster):
    """The metric XGBRanker.score reports: the last of eval_metric, else the objective's default (and the
    truncation its name implies when it has no @k)."""
    from .ranking import DEFAULT_METRIC_K

    if booster.params.eval_metric:
        return booster.params.eval_metric[-1], DEFAULT_METRIC_K
    objective = booster.objective
    return objective.default_metric, getattr(objective, "default_metric_k", DEFAULT_METRIC_K)


def _check_rank_objective(objective):
    if callable(objective):
        raise ValueError("a custom objective is not supported by GBRanker (as by XGBRanker)")
    if not (isinstance(objective, str) and objective.startswith("rank:")):
        raise ValueError(f"GBRanker needs a ranking objective (rank:ndcg, rank:pairwise, rank:map), got "
                         f"{objective!r}; use GBRegressor or GBClassifier otherwise")


def _split_qid(X, qid):
    """XGBRanker's convention: a dataframe X may carry the query ids as a column named qid."""
    if hasattr(X, "columns") and "qid" in list(X.columns):
        if qid is not None:
            raise ValueError("X has a qid column and qid= is given too; remove one of them")
        return X.drop(columns="qid"), X["qid"]
    return X, qid


_CLASSIFIER_OBJECTIVES = ("binary:logistic", "reg:logistic", "binary:logitraw", "multi:softprob", "multi:softmax")


def _host_1d(a) -> np.ndarray:
    """A 1-D numpy array from a list, numpy, pandas or cupy vector."""
    if hasattr(a, "to_numpy"):
        a = a.to_numpy()
    a = to_host(a)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"expected a 1-D label or weight vector, got shape {a.shape}")
    return a


def _both_nan(a, b) -> bool:
    return isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b)


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # arrays and odd types: treat as changed
        return False
