"""XGBoost's learner configuration JSON (Booster.save_config / load_config) for daskgb's parameters.

The layout is XGBoost 3.2's (`learner`: generic_param, gradient_booster, learner_model_param,
learner_train_param, metrics, objective; `version`), its values strings as XGBoost writes them.
Only parameters daskgb has are written; XGBoost's internal knobs daskgb accepts without effect
(updater names, process_type, max_cached_hist_node, ...) are written with XGBoost's values, so
that code reading the config finds them where XGBoost puts them.
"""

from __future__ import annotations

import json

import numpy as np

from .xgboost_format import XGBOOST_VERSION, _objective_block, _param_str, _params_of, _vector_str

# XGBoost's tree_train_param: its name -> daskgb's TrainParams field (None: XGBoost's value, no
# daskgb field). Aliases are written under both names, as XGBoost does.
_TREE_PARAMS = {
    "alpha": "reg_alpha", "reg_alpha": "reg_alpha", "lambda": "reg_lambda", "reg_lambda": "reg_lambda",
    "eta": "learning_rate", "learning_rate": "learning_rate", "gamma": "min_split_loss",
    "min_split_loss": "min_split_loss", "colsample_bylevel": "colsample_bylevel",
    "colsample_bynode": "colsample_bynode", "colsample_bytree": "colsample_bytree", "grow_policy": "grow_policy",
    "max_bin": "max_bin", "max_cat_threshold": "max_cat_threshold", "max_cat_to_onehot": "max_cat_to_onehot",
    "max_delta_step": "max_delta_step", "max_depth": "max_depth", "max_leaves": "max_leaves",
    "min_child_weight": "min_child_weight", "sampling_method": "sampling_method", "subsample": "subsample",
}
_INTEGERS = {"max_bin", "max_cat_threshold", "max_cat_to_onehot", "max_depth", "max_leaves"}
_TEXT = {"grow_policy", "sampling_method"}


def _number(v, integer: bool) -> str:
    """A parameter's value as XGBoost writes it: integers plainly, floats as float32 in %.9g."""
    return str(int(v)) if integer else _param_str(v)


def _constraints(raw, default: str) -> str:
    """interaction / monotone constraints as given (XGBoost keeps the string it was given)."""
    if raw is None:
        return default
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):  # by feature name: XGBoost turns it into a string by position
        return json.dumps(raw)
    return "(" + ",".join(str(int(v)) for v in raw) + ")" if default == "()" else json.dumps(
        [list(c) for c in raw]).replace(" ", "")


def save_config(booster) -> str:
    """The booster's configuration as XGBoost's Booster.save_config gives it (a JSON string)."""
    p, raw = booster.params, booster._raw_params
    tree = {name: (getattr(p, field) if field in _TEXT else _number(getattr(p, field), field in _INTEGERS))
            for name, field in _TREE_PARAMS.items()}
    tree["interaction_constraints"] = _constraints(raw.get("interaction_constraints"), "")
    tree["monotone_constraints"] = _constraints(raw.get("monotone_constraints"), "()")
    tree["refresh_leaf"] = "1"
    tree["sparse_threshold"] = "0.20000000000000001"
    tree_method = str(raw.get("tree_method", "auto"))  # unset: XGBoost keeps "auto"
    k = booster.n_groups
    multiclass = p.objective in ("multi:softprob", "multi:softmax")
    margins = np.atleast_1d(np.asarray(booster.base_score, dtype=np.float32))
    if margins.size == 1 and k > 1:
        margins = np.full(k, margins[0], dtype=np.float32)
    metrics = list(p.eval_metric) or [booster.objective.default_metric]
    nthread = p.nthread or 0
    config = {
        "learner": {
            "generic_param": {
                "device": str(p.device), "fail_on_invalid_gpu_id": "0", "n_jobs": str(nthread),
                "nthread": str(nthread), "random_state": str(p.seed), "seed": str(p.seed), "seed_per_iteration": "0",
                "validate_parameters": "1",
            },
            "gradient_booster": {
                "gbtree_model_param": {"num_parallel_tree": str(p.num_parallel_tree),
                                       "num_trees": str(len(booster.trees))},
                "gbtree_train_param": {"process_type": "default", "tree_method": tree_method,
                                       "updater": "grow_quantile_histmaker",
                                       "updater_seq": "grow_quantile_histmaker"},
                "name": "gbtree",
                "specified_updater": False,
                "tree_train_param": dict(sorted(tree.items())),
                "updater": [{"hist_train_param": {"debug_synchronize": "0",
                                                  "max_cached_hist_node": "18446744073709551615"},
                             "name": "grow_quantile_histmaker"}],
            },
            "learner_model_param": {
                "base_score": _vector_str(margins), "boost_from_average": "1",
                "num_class": str(k if multiclass else 0), "num_feature": str(booster.n_features),
                "num_target": "1" if multiclass else str(k),
            },
            "learner_train_param": {
                "booster": "gbtree", "disable_default_eval_metric": "0",
                "multi_strategy": p.multi_strategy, "objective": p.objective,
            },
            "metrics": [{"name": str(m)} for m in metrics if m],
            "objective": _objective_block(booster),
        },
        "version": list(XGBOOST_VERSION),
    }
    return json.dumps(config)


def params_of_config(config: str | dict) -> dict:
    """The training parameters (XGBoost's names) a configuration from save_config (daskgb's or
    XGBoost's) sets, for Booster.load_config. Internal entries daskgb has no parameter for are
    left out; a configuration of another booster (gblinear, dart) is an error."""
    if isinstance(config, (str, bytes, bytearray)):
        try:
            config = json.loads(config)
        except ValueError as e:
            raise ValueError(f"load_config takes the JSON string save_config gives: {e}") from None
    learner = config.get("learner") if isinstance(config, dict) else None
    if not isinstance(learner, dict):
        raise ValueError("load_config takes the JSON save_config gives: an object with a 'learner'")
    booster = learner.get("learner_train_param", {}).get("booster", learner.get("gradient_booster", {}).get("name"))
    if booster not in (None, "gbtree"):
        raise ValueError(f"the configuration is of booster={booster!r}; daskgb grows trees (booster='gbtree')")
    params: dict = {}
    gbm = learner.get("gradient_booster", {})
    tree = gbm.get("tree_train_param", {})
    for name, field in _TREE_PARAMS.items():
        if name in tree and name == field:  # each parameter once, under daskgb's name
            params[name] = tree[name] if field in _TEXT else (int(tree[name]) if field in _INTEGERS
                                                              else float(tree[name]))
    for name in ("interaction_constraints", "monotone_constraints"):
        if tree.get(name) not in (None, "", "()"):
            params[name] = tree[name]
    parallel = gbm.get("gbtree_model_param", {}).get("num_parallel_tree")
    if parallel is not None:
        params["num_parallel_tree"] = int(parallel)
    method = gbm.get("gbtree_train_param", {}).get("tree_method")
    if method not in (None, "auto"):
        params["tree_method"] = method
    generic = learner.get("generic_param", {})
    if "device" in generic:
        params["device"] = generic["device"]
    if int(generic.get("nthread", 0) or 0) > 0:
        params["nthread"] = int(generic["nthread"])
    if "seed" in generic:
        params["seed"] = int(generic["seed"])
    model = learner.get("learner_model_param", {})
    objective = learner.get("objective")
    if isinstance(objective, dict) and objective.get("name"):
        params.update(_params_of(objective, int(model.get("num_class", 0) or 0)))
    strategy = learner.get("learner_train_param", {}).get("multi_strategy")
    if strategy is not None:
        params["multi_strategy"] = strategy
    metrics = [m["name"] for m in learner.get("metrics", []) if isinstance(m, dict) and "name" in m]
    if metrics:
        params["eval_metric"] = metrics
    return params

