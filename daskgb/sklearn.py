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
    """Parameters, fit and the scikit-learn protocol shared by both estimators."""

    def __init__(
        self,
        *,
        n_estimators=100,
        max_depth=6,
        max_leaves=0,
        grow_policy="depthwise",
        learning_rate=0.3,
        min_child_weight=1,
        reg_lambda=1,
        reg_alpha=0,
        gamma=0,
        max_delta_step=0,
        max_bin=256,
        colsample_bytree=1.0,
        colsample_bylevel=1.0,
        colsample_bynode=1.0,
        num_parallel_tree=None,
        interaction_constraints=None,
        monotone_constraints=None,
        base_score=None,
        objective=None,
        eval_metric=None,
        device="auto",
        missing=np.nan,
        random_state=0,
        early_stopping_rounds=None,
        callbacks=None,
        enable_categorical=False,
        feature_types=None,
        max_cat_to_onehot=None,
        max_cat_threshold=None,
        **kwargs,
    ):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.max_delta_step = max_delta_step
        self.max_bin = max_bin
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.num_parallel_tree = num_parallel_tree
        self.interaction_constraints = interaction_constraints
        self.monotone_constraints = monotone_constraints
        self.base_score = base_score
        self.objective = objective
        self.eval_metric = eval_metric
        self.device = device
        self.missing = missing
        self.random_state = random_state
        # Training controls, not model parameters (XGBoost 2's estimators take them here too).
        self.early_stopping_rounds = early_stopping_rounds
        self.callbacks = callbacks
        # Categorical features (XGBoost's names): a dataframe's `category` columns need
        # enable_categorical; feature_types ("q" / "c" per feature) marks them in arrays.
        self.enable_categorical = enable_categorical
        self.feature_types = feature_types
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
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
        """The constructor arguments, extra XGBoost parameters (kwargs) included."""
        params = {name: getattr(self, name) for name in self._param_names()}
        params.update(self._kwargs)
        return params

    def set_params(self, **params):
        """Set constructor arguments; any other name becomes an extra XGBoost parameter."""
        names = set(self._param_names())
        for key, value in params.items():
            if key in names:
                setattr(self, key, value)
            else:
                self._kwargs[key] = value
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
        from .params import ALIASES

        params = {
            "objective": self.objective if self.objective is not None else self._default_objective,
            "learning_rate": self.learning_rate,
            "max_depth": self.max_depth,
            "max_leaves": self.max_leaves,
            "grow_policy": self.grow_policy,
            "min_child_weight": self.min_child_weight,
            "reg_lambda": self.reg_lambda,
            "reg_alpha": self.reg_alpha,
            "gamma": self.gamma,
            "max_delta_step": self.max_delta_step,
            "max_bin": self.max_bin,
            "colsample_bytree": self.colsample_bytree,
            "colsample_bylevel": self.colsample_bylevel,
            "colsample_bynode": self.colsample_bynode,
            "device": self.device,
            "seed": self.random_state,
        }
        if self.base_score is not None:
            params["base_score"] = self.base_score
        if self.num_parallel_tree is not None:
            params["num_parallel_tree"] = self.num_parallel_tree
        if self.eval_metric is not None:
            params["eval_metric"] = self.eval_metric
        if self.interaction_constraints is not None:
            params["interaction_constraints"] = self.interaction_constraints
        if self.monotone_constraints is not None:
            params["monotone_constraints"] = self.monotone_constraints
        for name in ("max_cat_to_onehot", "max_cat_threshold"):
            if getattr(self, name) is not None:
                params[name] = getattr(self, name)
        canonical = {ALIASES.get(k, k): k for k in params}
        for key, value in self._kwargs.items():
            name = ALIASES.get(key, key)
            if name in canonical:
                raise ValueError(
                    f"{key!r} is the same parameter as {canonical[name]!r}; "
                    f"pass {canonical[name]}= to {type(self).__name__} instead"
                )
            params[key] = value
        return params

    def fit(self, X, y, sample_weight=None, eval_set=None, sample_weight_eval_set=None, verbose=False, *,
            checkpoint_dir=None, checkpoint_every=None, resume=False, xgb_model=None, base_margin=None,
            base_margin_eval_set=None):
        """Train ``n_estimators`` rounds on (X, y); eval_set is a list of (X, y) pairs.
        checkpoint_dir / checkpoint_every / resume, and xgb_model (a model to go on from: a
        Booster, a fitted estimator or a saved model's path): as daskgb.train takes them.
        base_margin (and base_margin_eval_set, one per eval_set entry): each row's starting
        margin, instead of the base score (XGBoost's names)."""
        from .matrix import QuantileMatrix

        self._checkpointing = _checkpointing(checkpoint_dir, checkpoint_every, resume)
        self._continuing = {} if xgb_model is None else {"xgb_model": xgb_model}

        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y = _column_vector_y(y)
        y_train = self._fit_labels(y)
        params = self._train_params()  # after the labels: the class count picks the objective
        dtrain = QuantileMatrix(
            X, y_train, weight=sample_weight, base_margin=base_margin, missing=self.missing, max_bin=self.max_bin,
            device=self.device, feature_types=self.feature_types, enable_categorical=self.enable_categorical
        )
        eval_set = list(eval_set or ())
        for name, given in (("sample_weight_eval_set", sample_weight_eval_set),
                            ("base_margin_eval_set", base_margin_eval_set)):
            if given is not None and len(given) != len(eval_set):
                raise ValueError(f"{name} has {len(given)} entries, eval_set has {len(eval_set)}")
        evals = []
        for i, (X_eval, y_eval) in enumerate(eval_set):
            weight = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
            # ref= the training matrix: eval rows are binned with the training cuts.
            deval = QuantileMatrix(
                X_eval,
                self._eval_labels(y_eval),
                weight=weight,
                base_margin=None if base_margin_eval_set is None else base_margin_eval_set[i],
                missing=self.missing,
                max_bin=self.max_bin,
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
        """The boosting rounds fit trains (XGBModel's): n_estimators."""
        return self.n_estimators

    def _training_options(self, params, verbose, evals):
        """The fit's TrainingOptions: get_num_boosting_rounds() rounds, the training controls, printing as
        verbose says."""
        from .training import TrainingOptions

        return TrainingOptions.create(params, self.get_num_boosting_rounds(), verbose_eval=verbose,
                                      has_evals=bool(evals), **self._training_controls())

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
        """Gain importance per feature, normalised to sum to 1 (zeros if no tree splits)."""
        booster = self.get_booster()
        scores = booster.get_score(importance_type="gain")
        n = booster.n_features
        names = booster.feature_names or [f"f{i}" for i in range(n)]
        values = np.array([scores.get(name, 0.0) for name in names], dtype=np.float32)
        total = values.sum()
        return values / total if total > 0 else values

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

    def __init__(self, *, objective="reg:squarederror", **kwargs):
        super().__init__(objective=objective, **kwargs)

    def _fit_labels(self, y):
        return y

    def _eval_labels(self, y):
        return y

    def predict(self, X, output_margin=False, iteration_range=None):
        """Predicted values (numpy, or cupy for cupy input)."""
        return self._margin_or_value(X, output_margin, iteration_range)

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

    def __init__(self, *, objective="binary:logistic", **kwargs):
        super().__init__(objective=objective, **kwargs)

    def _fit_labels(self, y):
        objective = self.objective if self.objective is not None else self._default_objective
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
        if len(classes) > 2 and objective in ("binary:logistic", "reg:logistic"):
            if self.objective not in (None, self._default_objective):
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

    def predict_proba(self, X, iteration_range=None):
        """(n, n_classes_) array of class probabilities, columns in classes_ order."""
        if self._multiclass:
            margin = self._margin_or_value(X, True, iteration_range)
            return self.get_booster().objective.eval_transform(array_module(margin), margin)
        p = self._margin_or_value(X, False, iteration_range)
        xp = array_module(p)
        return xp.stack([1.0 - p, p], axis=1)

    def predict(self, X, output_margin=False, iteration_range=None):
        """Predicted labels (from classes_), or raw margins with output_margin=True."""
        p = self._margin_or_value(X, output_margin or self._multiclass, iteration_range)
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

    def __init__(self, *, learning_rate=1.0, subsample=0.8, colsample_bynode=0.8, reg_lambda=1e-5, **kwargs):
        super().__init__(learning_rate=learning_rate, colsample_bynode=colsample_bynode, reg_lambda=reg_lambda,
                         **kwargs)
        self.subsample = subsample  # a parameter of its own here (the other estimators take it in kwargs)

    def get_num_boosting_rounds(self) -> int:
        return 1

    def _train_params(self) -> dict:
        """fit's parameters, checked before any data is quantised."""
        if self.early_stopping_rounds is not None or self.callbacks is not None:
            raise ValueError(f"early_stopping_rounds and callbacks are not supported by {type(self).__name__} "
                             "(a random forest is one boosting round; as XGBoost's random forest estimators)")
        n = self.n_estimators
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n_estimators (the forest's trees) must be an integer >= 1, got {n!r}")
        # As XGBRFModel.get_xgb_params: the trees are the round's parallel trees, whatever
        # num_parallel_tree says.
        return {**super()._train_params(), "subsample": self.subsample, "num_parallel_tree": int(n)}


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

    def __init__(self, *, objective="rank:ndcg", **kwargs):
        # Checked in fit: scikit-learn's __init__ and set_params only store.
        super().__init__(objective=objective, **kwargs)

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=True))
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

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
            return QuantileMatrix(X, y, weight=weight, missing=self.missing, max_bin=self.max_bin, ref=ref,
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
                raise ValueError(f"eval_set[{i}] has no query groups: pass eval_group or eval_qid (or a qid column)")
            weight = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
            # ref= the training matrix: eval rows are binned with the training cuts.
            evals.append((matrix(X_eval, y_eval, weight, q, g, dtrain), f"validation_{i}"))
        return self._train(params, dtrain, evals, verbose, X)

    def predict(self, X, output_margin=False, iteration_range=None):
        """Ranking scores: higher ranks first (a qid column in X is ignored)."""
        X, _ = _split_qid(X, None)
        return self._margin_or_value(X, output_margin, iteration_range)

    def score(self, X, y):
        """The last evaluation metric (eval_metric, or the objective's default, e.g. ndcg@32) of predict(X)
        against y, over the query groups of X's qid column (all rows one query without it), as XGBRanker."""
        from .metric import evaluate
        from .ranking import groups_from_qid

        X, qid = _split_qid(X, None)
        y = _host_1d(y).astype(np.float32)
        pred = to_host(self.predict(X)).astype(np.float32)
        booster = self.get_booster()
        name, k = _score_metric(booster)
        groups = None if qid is None else groups_from_qid(qid, y.shape[0])
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


_CLASSIFIER_OBJECTIVES = ("binary:logistic", "reg:logistic", "multi:softprob", "multi:softmax")


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
