"""Training parameters: XGBoost's names and aliases, defaults, and range checks.

Every check runs before any data is touched, so a bad parameter is an error that
names it, never a failure deep inside training.
"""

from __future__ import annotations

import difflib
import math
import numbers
from dataclasses import dataclass, field, fields, replace

import numpy as np

from .sampling import SAMPLING_METHODS

# XGBoost's aliases, mapped to the canonical name used here.
ALIASES = {
    "eta": "learning_rate",
    "lambda": "reg_lambda",
    "alpha": "reg_alpha",
    "gamma": "min_split_loss",
    "random_state": "seed",
    "n_jobs": "nthread",
}

OBJECTIVES = ("reg:squarederror", "reg:logistic", "binary:logistic", "binary:logitraw", "count:poisson", "reg:gamma",
              "reg:tweedie",
              "reg:pseudohubererror", "reg:absoluteerror", "reg:quantileerror", "multi:softprob", "multi:softmax",
              "rank:pairwise", "rank:ndcg", "rank:map", "survival:aft", "survival:cox")
METRICS = ("rmse", "mae", "logloss", "error", "auc", "aucpr", "poisson-nloglik", "gamma-nloglik", "gamma-deviance",
           "mphe", "quantile", "mlogloss", "merror", "aft-nloglik", "interval-regression-accuracy", "cox-nloglik")
GROW_POLICIES = ("depthwise", "lossguide")
TREE_METHODS = ("hist", "auto", "gpu_hist")

# Accepted and without effect here, so that XGBoost parameter dicts carry over: logging and
# threads, and knobs that only tune XGBoost's own internals (its histogram cache's size
# max_cached_hist_node, its dense/sparse kernel switch sparse_threshold, its check that workers
# grew the same trees debug_synchronize, the refresh updater's refresh_leaf, which hist never
# runs, and what to do with a GPU ordinal it cannot find, fail_on_invalid_gpu_id).
IGNORED = frozenset({"verbosity", "silent", "validate_parameters", "disable_default_eval_metric", "nthread",
                     "max_cached_hist_node", "sparse_threshold", "debug_synchronize", "refresh_leaf",
                     "fail_on_invalid_gpu_id"})


class UnsupportedBooster(NotImplementedError, ValueError):
    """booster='gblinear' or 'dart': an XGBoost booster daskgb does not have. A NotImplementedError,
    as xgboost.dask raises for gblinear, and a ValueError, as daskgb raises for parameters it
    refuses (so io.UnsupportedOperation is both an OSError and a ValueError)."""


@dataclass
class TrainParams:
    """Validated training parameters (canonical names)."""

    objective: str = "reg:squarederror"
    learning_rate: float = 0.3
    max_depth: int = 6
    min_child_weight: float = 1.0
    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    min_split_loss: float = 0.0
    max_delta_step: float = 0.0
    max_bin: int = 256
    # Categorical splits (split/categorical.py): one-hot below this many categories, else
    # partitions of at most max_cat_threshold categories in the scans (XGBoost's defaults).
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 64
    tweedie_variance_power: float = 1.5
    huber_slope: float = 1.0
    # survival:aft (survival.py): the noise distribution of the log survival time, and its scale.
    aft_loss_distribution: str = "normal"
    aft_loss_distribution_scale: float = 1.0
    quantile_alpha: float | None = None
    num_class: int = 0
    subsample: float = 1.0
    # Trees grown per output group each round, from the same gradient pairs, each with its own
    # row and column sample and the learning rate divided among them (a random forest: one
    # round of many; XGBoost's gbtree BoostNewTrees).
    num_parallel_tree: int = 1
    # "uniform" or "gradient_based" (minimal variance sampling; sampling.py).
    sampling_method: str = "uniform"
    # Learning to rank (XGBoost's LambdaRankParam; defaults checked against xgboost 3.2's saved config).
    lambdarank_pair_method: str = "topk"
    lambdarank_num_pair_per_sample: int | None = None  # None: 32 for topk, 1 for mean
    lambdarank_unbiased: bool = False
    lambdarank_bias_norm: float = 1.0
    lambdarank_normalization: bool = True
    lambdarank_score_normalization: bool = True
    ndcg_exp_gain: bool = True
    base_score: float | None = None
    eval_metric: list = field(default_factory=list)
    device: str = "auto"
    tree_method: str = "hist"
    grow_policy: str = "depthwise"
    max_leaves: int = 0
    colsample_bytree: float = 1.0
    colsample_bylevel: float = 1.0
    colsample_bynode: float = 1.0
    # None, XGBoost's string form "[[0, 1], [2, 3]]", or a list of lists of feature
    # indices or names; indices are checked against the data in interaction_sets().
    interaction_constraints: object = None
    # None, XGBoost's string "(1,0,-1)", a list of -1/0/1 by position, or a dict by
    # feature name or index; checked against the data in monotone.monotone_vector().
    monotone_constraints: object = None
    seed: int = 0
    nthread: int | None = None
    # binary:logistic / reg:logistic: the weight of rows labelled 1 multiplied by this in the
    # gradient (and in the default base_score's estimate), as XGBoost's RegLossParam.
    scale_pos_weight: float = 1.0
    # One non-negative weight per feature: column sampling (colsample_by*) draws features with
    # probability proportional to it (XGBoost's DMatrix feature_weights; feature_sets.py).
    feature_weights: object = None
    booster: str = "gbtree"
    multi_strategy: str = "one_output_per_tree"

    @classmethod
    def from_dict(cls, params: dict | None) -> "TrainParams":
        """Validate an XGBoost-style parameter dict; raise ValueError naming any bad entry."""
        params = dict(params or {})
        known = {f.name for f in fields(cls)}
        values: dict = {}
        for key, value in params.items():
            name = ALIASES.get(key, key)
            if name not in known and name not in IGNORED:
                # XGBoost only warns and trains without it; a typo'd name would silently change nothing.
                close = difflib.get_close_matches(str(key), sorted(known | IGNORED | set(ALIASES)), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown parameter {key!r}{hint}")
            if name in values:
                raise ValueError(f"parameter {name!r} given twice (as {key!r} and an alias)")
            if name in known:
                values[name] = value
        p = cls(**values)
        # count:poisson's default max_delta_step (0.7) applies only when the user sets none.
        p.max_delta_step_set = "max_delta_step" in values
        p._check()
        return p

    def _check(self) -> None:
        _choice("objective", self.objective, OBJECTIVES)
        if self.booster != "gbtree":
            if self.booster in ("gblinear", "dart"):
                raise UnsupportedBooster(f"booster={self.booster!r} is not supported: daskgb grows trees "
                                         "(booster='gbtree'); gblinear and dart are XGBoost boosters it does not have")
            raise ValueError(f"booster must be 'gbtree' (or XGBoost's 'gblinear' / 'dart', which daskgb does not "
                             f"have), got {self.booster!r}")
        if self.multi_strategy != "one_output_per_tree":
            raise ValueError(f"multi_strategy={self.multi_strategy!r} is not supported: daskgb grows one output per "
                             "tree (multi_strategy='one_output_per_tree'); vector-leaf trees (multi_output_tree) "
                             "are not implemented")
        self.scale_pos_weight = _number("scale_pos_weight", self.scale_pos_weight, low=0.0)
        self.feature_weights = _feature_weights(self.feature_weights)
        _choice("tree_method", self.tree_method, TREE_METHODS)
        _choice("grow_policy", self.grow_policy, GROW_POLICIES)
        _choice("sampling_method", self.sampling_method, SAMPLING_METHODS)
        self.learning_rate = _number("learning_rate", self.learning_rate, low=0.0, low_open=True)
        self.max_depth = _integer("max_depth", self.max_depth, low=0)
        self.max_leaves = _integer("max_leaves", self.max_leaves, low=0)
        for name in ("colsample_bytree", "colsample_bylevel", "colsample_bynode"):
            v = _number(name, getattr(self, name), low=0.0, low_open=True)
            if v > 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)!r}")
            setattr(self, name, v)
        from .feature_sets import parse_interaction_constraints

        self.interaction_constraints = parse_interaction_constraints(self.interaction_constraints)
        from .monotone import parse_monotone_constraints

        self.monotone_constraints = parse_monotone_constraints(self.monotone_constraints)
        self.max_bin = _integer("max_bin", self.max_bin, low=2)
        self.max_cat_to_onehot = _integer("max_cat_to_onehot", self.max_cat_to_onehot, low=1)
        self.max_cat_threshold = _integer("max_cat_threshold", self.max_cat_threshold, low=1)
        self.min_child_weight = _number("min_child_weight", self.min_child_weight, low=0.0)
        self.reg_lambda = _number("reg_lambda", self.reg_lambda, low=0.0)
        self.reg_alpha = _number("reg_alpha", self.reg_alpha, low=0.0)
        self.min_split_loss = _number("min_split_loss", self.min_split_loss, low=0.0)
        self.max_delta_step = _number("max_delta_step", self.max_delta_step, low=0.0)
        if self.objective == "count:poisson" and not getattr(self, "max_delta_step_set", True):
            # XGBoost's default for Poisson regression, on the leaves and in the objective alike.
            self.max_delta_step = 0.7
        self.seed = _integer("seed", self.seed, low=None)
        self.tweedie_variance_power = _number("tweedie_variance_power", self.tweedie_variance_power, low=1.0)
        if self.tweedie_variance_power >= 2.0:
            raise ValueError(f"tweedie_variance_power must be in [1, 2), got {self.tweedie_variance_power}")
        self.huber_slope = _number("huber_slope", self.huber_slope, low=0.0, low_open=True)
        if self.aft_loss_distribution not in ("normal", "logistic", "extreme"):
            raise ValueError(f"aft_loss_distribution must be 'normal', 'logistic' or 'extreme', got "
                             f"{self.aft_loss_distribution!r}")
        self.aft_loss_distribution_scale = _number("aft_loss_distribution_scale", self.aft_loss_distribution_scale,
                                                   low=0.0, low_open=True)
        self.num_class = _integer("num_class", self.num_class, low=0)
        self.subsample = _number("subsample", self.subsample, low=0.0, low_open=True)
        if self.subsample > 1.0:
            raise ValueError(f"subsample must be in (0, 1], got {self.subsample}")
        self.num_parallel_tree = _integer("num_parallel_tree", self.num_parallel_tree, low=1)
        if self.objective.startswith("multi:"):
            if self.num_class < 2:
                raise ValueError(f"{self.objective} needs num_class >= 2 (the number of classes), got {self.num_class}")
        if self.base_score is not None:
            self.base_score = _number("base_score", self.base_score, low=None)
            if self.objective in ("binary:logistic", "reg:logistic") and not 0.0 < self.base_score < 1.0:
                raise ValueError(f"base_score must be in (0, 1) for {self.objective}, got {self.base_score}")
            if self.objective in ("count:poisson", "reg:gamma", "reg:tweedie") and not self.base_score > 0.0:
                raise ValueError(f"base_score must be > 0 for {self.objective}, got {self.base_score}")
        from .ranking import PAIR_METHODS, parse_metric

        _choice("lambdarank_pair_method", self.lambdarank_pair_method, PAIR_METHODS)
        if self.lambdarank_num_pair_per_sample is not None:
            self.lambdarank_num_pair_per_sample = _integer("lambdarank_num_pair_per_sample",
                                                           self.lambdarank_num_pair_per_sample, low=1)
        self.lambdarank_bias_norm = _number("lambdarank_bias_norm", self.lambdarank_bias_norm, low=0.0)
        for name in ("lambdarank_unbiased", "lambdarank_normalization", "lambdarank_score_normalization",
                     "ndcg_exp_gain"):
            setattr(self, name, _boolean(name, getattr(self, name)))
        if self.lambdarank_unbiased:
            raise ValueError("lambdarank_unbiased=True (position-debiased LambdaMART) is not supported; "
                             "leave it False")
        metrics = self.eval_metric
        if isinstance(metrics, str):
            metrics = [metrics]
        metrics = list(metrics or [])
        for m in metrics:
            if not (isinstance(m, str) and (m.startswith("tweedie-nloglik@") or parse_metric(m) is not None)):
                _choice("eval_metric", m, METRICS + ("ndcg[@k][-]", "map[@k][-]", "pre[@k][-]"))
        self.eval_metric = metrics
        self._check_quantile_alpha()
        if not isinstance(self.device, str):
            raise ValueError(f"device must be a string, got {self.device!r}")
        from .backend import DEVICES

        dev = self.device.lower()
        if not (dev in DEVICES or dev.startswith("cuda") or dev.startswith("gpu")):
            raise ValueError(f"device must be one of {DEVICES}, got {self.device!r}")
        if self.tree_method == "gpu_hist":
            self.device = "cuda"

    def _check_quantile_alpha(self) -> None:
        # XGBoost takes a number or a list (one output per alpha); reg:quantileerror and the quantile
        # metric need one. Kept as a float for one alpha and a list of floats for several.
        alpha = self.quantile_alpha
        if alpha is not None:
            many = isinstance(alpha, (list, tuple)) or getattr(alpha, "ndim", 0) == 1
            values = [_number("quantile_alpha", a, low=0.0) for a in (alpha if many else [alpha])]
            if not values:
                raise ValueError("quantile_alpha is empty; give a number in [0, 1] or a list of them")
            bad = [a for a in values if a > 1.0]
            if bad:
                raise ValueError(f"quantile_alpha must be in [0, 1], got {bad[0]!r}")
            alpha = values[0] if len(values) == 1 else values
        self.quantile_alpha = alpha
        needs = [what for what, used in (("objective reg:quantileerror", self.objective == "reg:quantileerror"),
                                         ("eval_metric 'quantile'", "quantile" in self.eval_metric))
                 if used]
        if alpha is None and needs:
            raise ValueError(f"{' and '.join(needs)} need(s) quantile_alpha (the quantile to fit, in [0, 1])")

    def parallel_tree_params(self) -> "TrainParams":
        """The parameters each of a round's parallel trees grows with: these, with XGBoost's
        learning rate divided among the num_parallel_tree trees of a group (in float32, as its
        BoostNewTrees divides it), so that a round's trees together move a margin by eta."""
        if self.num_parallel_tree == 1:
            return self
        eta = np.float32(self.learning_rate) / np.float32(self.num_parallel_tree)
        out = replace(self, learning_rate=float(eta))
        out.max_delta_step_set = getattr(self, "max_delta_step_set", True)  # not a field: replace drops it
        return out

    def split_params(self):
        from .split import SplitParams

        return SplitParams(
            reg_lambda=self.reg_lambda,
            reg_alpha=self.reg_alpha,
            min_child_weight=self.min_child_weight,
            max_delta_step=self.max_delta_step,
            min_split_loss=self.min_split_loss,
        )


def _feature_weights(value):
    """None, or the weights as a list of floats, each finite and >= 0 (their count is checked
    against the data where the columns are sampled)."""
    if value is None:
        return None
    w = np.asarray(value, dtype=object if isinstance(value, (list, tuple)) else None)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"feature_weights must be a non-empty 1-D sequence (one weight per feature), got shape "
                         f"{w.shape}")
    return [_number("feature_weights", v, low=0.0) for v in w.tolist()]


def _choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def _number(name, value, low, low_open=False):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (v < low or (low_open and v == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return v


def _boolean(name, value) -> bool:
    """XGBoost's boolean parameters: True/False, 0/1, or the strings "true"/"false"/"1"/"0"."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"{name} must be a boolean (True/False, 0/1), got {value!r}")


def _integer(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return v
