"""XGBoost's JSON model format: a daskgb Booster written as XGBoost 3 writes its models, and
an XGBoost JSON model read into a daskgb Booster.

`Booster.save_model(path, format="xgboost")` writes what `xgboost.Booster(model_file=path)`
loads and predicts with; `Booster.load_model(path)` reads either format. Both libraries
send a value left when it is `< split_condition` and a missing value to `default_left`,
hold leaf values with the learning rate applied, and keep `base_score` in the same space
(a probability for the logistic objectives, the class margins for multiclass), so a model
predicts the same in both.

What XGBoost's format cannot carry: the split bins of daskgb's trees (they belong to the
training cuts, which XGBoost does not save; a model read back has none and is for
prediction) and the training parameters other than the objective's.
Several trees a round per output (num_parallel_tree > 1, random forests) travel both ways
(gbtree_model_param.num_parallel_tree, and tree_info and iteration_indptr in XGBoost's order:
a round's trees of group 0, then group 1's, ...).
What daskgb cannot read: gblinear and dart boosters, categorical splits, vector leaves
(multi_strategy="multi_output_tree"), rounds of different numbers of trees (iteration_indptr),
UBJSON files, and objectives daskgb does not have.
"""

from __future__ import annotations

import numpy as np

from .tree import FIELDS, Tree

# XGBoost marks the root's parent with the largest int32.
_NO_PARENT = 2147483647
# The release whose layout this module writes (learner.version).
XGBOOST_VERSION = [3, 2, 0]


def is_xgboost_model(d: dict) -> bool:
    return isinstance(d, dict) and "learner" in d and "version" in d


def _float_str(v) -> str:
    """A float32 as XGBoost writes one: enough digits to read back the same float32."""
    return np.format_float_scientific(np.float32(v), unique=True, trim="-", exp_digits=1).upper().replace("+", "")


def _vector_str(values) -> str:
    return "[" + ",".join(_float_str(v) for v in values) + "]"


def _parse_floats(s) -> list[float]:
    """'[5E-1,2E-1]' (XGBoost 3) or '5E-1' (earlier releases) as float32 values."""
    s = str(s).strip()
    if s.startswith("["):
        s = s[1:-1]
    return [float(np.float32(x)) for x in s.split(",") if x.strip()]


def _objective_block(booster) -> dict:
    """learner.objective: the name and the parameter block XGBoost's objective reads."""
    p = booster.params
    name = p.objective
    if name in ("binary:logistic", "reg:logistic", "binary:logitraw"):
        return {"name": name, "reg_loss_param": {"scale_pos_weight": "1"}}
    if name in ("multi:softprob", "multi:softmax"):
        return {"name": name, "softmax_multiclass_param": {"num_class": str(int(p.num_class))}}
    if name == "reg:quantileerror":
        alpha = np.atleast_1d(np.asarray(p.quantile_alpha, dtype=np.float32))
        return {"name": name, "quantile_loss_param": {"quantile_alpha": _vector_str(alpha)}}
    if name == "reg:tweedie":
        return {"name": name, "tweedie_regression_param": {"tweedie_variance_power": repr(float(
            p.tweedie_variance_power))}}
    if name == "reg:pseudohubererror":
        return {"name": name, "pseudo_huber_param": {"huber_slope": repr(float(p.huber_slope))}}
    if name == "survival:aft":
        return {"name": name, "aft_loss_param": {"aft_loss_distribution": p.aft_loss_distribution,
                                                 "aft_loss_distribution_scale": repr(float(
                                                     p.aft_loss_distribution_scale))}}
    if name == "count:poisson":
        step = p.max_delta_step if getattr(p, "max_delta_step_set", False) else 0.7
        return {"name": name, "poisson_regression_param": {"max_delta_step": repr(float(step))}}
    if name.startswith("rank:"):
        pairs = p.lambdarank_num_pair_per_sample
        return {"name": name, "lambdarank_param": {
            "lambdarank_pair_method": p.lambdarank_pair_method,
            "lambdarank_num_pair_per_sample": str(4294967295 if pairs is None else int(pairs)),
            "lambdarank_unbiased": str(int(bool(p.lambdarank_unbiased))),
            "lambdarank_bias_norm": repr(float(p.lambdarank_bias_norm)),
            "lambdarank_normalization": str(int(bool(p.lambdarank_normalization))),
            "lambdarank_score_normalization": str(int(bool(p.lambdarank_score_normalization))),
            "ndcg_exp_gain": str(int(bool(p.ndcg_exp_gain)))}}
    return {"name": name}


def _tree_json(tree: Tree, index: int, n_features: int) -> dict:
    leaf = tree.is_leaf
    n = tree.n_nodes
    return {
        "base_weights": tree.base_weight.astype(np.float32).tolist(),
        "categories": [], "categories_nodes": [], "categories_segments": [], "categories_sizes": [],
        "default_left": tree.default_left.astype(int).tolist(),
        "id": index,
        "left_children": tree.left.astype(int).tolist(),
        "loss_changes": np.where(leaf, 0.0, tree.gain).astype(np.float32).tolist(),
        "parents": np.where(tree.parent < 0, _NO_PARENT, tree.parent).astype(int).tolist(),
        "right_children": tree.right.astype(int).tolist(),
        "split_conditions": np.where(leaf, tree.value, tree.threshold).astype(np.float32).tolist(),
        "split_indices": np.where(leaf, 0, tree.feature).astype(int).tolist(),
        "split_type": [0] * n,
        "sum_hessian": tree.cover.astype(np.float32).tolist(),
        "tree_param": {"num_deleted": "0", "num_feature": str(n_features), "num_nodes": str(n),
                       "size_leaf_vector": "1"},
    }


def to_xgboost_json(booster) -> dict:
    """The booster as XGBoost's JSON model (the layout of XGBoost 3.2)."""
    k = booster.n_groups
    per_round = booster.trees_per_round
    margins = np.atleast_1d(np.asarray(booster.base_score, dtype=np.float32))
    if margins.size == 1 and k > 1:
        margins = np.full(k, margins[0], dtype=np.float32)
    multiclass = booster.params.objective in ("multi:softprob", "multi:softmax")
    attributes = booster.attributes()  # XGBoost keeps string attributes, best_iteration among them
    if booster.best_iteration is not None:
        attributes["best_iteration"] = str(int(booster.best_iteration))
    if booster.best_score is not None:
        attributes["best_score"] = repr(float(booster.best_score))
    n_rounds = booster.num_boosted_rounds()
    return {
        "learner": {
            "attributes": attributes,
            "feature_names": list(booster.feature_names or []),
            "feature_types": ["float"] * booster.n_features if booster.feature_names else [],
            "gradient_booster": {
                "model": {
                    "cats": {"enc": [], "feature_segments": [], "sorted_idx": []},
                    "gbtree_model_param": {"num_parallel_tree": str(booster.params.num_parallel_tree),
                                           "num_trees": str(len(booster.trees))},
                    "iteration_indptr": [r * per_round for r in range(n_rounds + 1)],
                    "tree_info": [int(g) for g in booster.tree_info],
                    "trees": [_tree_json(t, i, booster.n_features) for i, t in enumerate(booster.trees)],
                },
                "name": "gbtree",
            },
            "learner_model_param": {
                "base_score": _vector_str(margins),
                "boost_from_average": "1",
                "num_class": str(k if multiclass else 0),
                "num_feature": str(booster.n_features),
                "num_target": "1" if multiclass else str(k),
            },
            "objective": _objective_block(booster),
        },
        "version": list(XGBOOST_VERSION),
    }


def _params_of(objective: dict, n_class: int) -> dict:
    """daskgb training parameters for an XGBoost objective block."""
    name = objective.get("name")
    params = {"objective": name}
    if name in ("multi:softprob", "multi:softmax"):
        params["num_class"] = int(objective.get("softmax_multiclass_param", {}).get("num_class", n_class))
    elif name == "reg:quantileerror":
        alpha = _parse_floats(objective["quantile_loss_param"]["quantile_alpha"])
        params["quantile_alpha"] = alpha[0] if len(alpha) == 1 else alpha
    elif name == "survival:aft":
        aft = objective.get("aft_loss_param", {})
        params["aft_loss_distribution"] = aft.get("aft_loss_distribution", "normal")
        params["aft_loss_distribution_scale"] = float(aft.get("aft_loss_distribution_scale", 1.0))
    elif name == "reg:tweedie":
        params["tweedie_variance_power"] = float(objective["tweedie_regression_param"]["tweedie_variance_power"])
    elif name == "reg:pseudohubererror":
        params["huber_slope"] = float(objective["pseudo_huber_param"]["huber_slope"])
    elif name == "count:poisson":
        params["max_delta_step"] = float(objective["poisson_regression_param"]["max_delta_step"])
    elif name is not None and name.startswith("rank:"):
        lp = objective.get("lambdarank_param", {})
        if "lambdarank_pair_method" in lp:
            params["lambdarank_pair_method"] = lp["lambdarank_pair_method"]
        if lp.get("lambdarank_num_pair_per_sample") not in (None, "4294967295"):
            params["lambdarank_num_pair_per_sample"] = int(lp["lambdarank_num_pair_per_sample"])
        if "ndcg_exp_gain" in lp:
            params["ndcg_exp_gain"] = lp["ndcg_exp_gain"] == "1"
    return params


def _tree_of(t: dict, index: int) -> Tree:
    if any(int(s) != 0 for s in t.get("split_type", [])):
        raise ValueError(f"tree {index} of the XGBoost model has categorical splits; daskgb reads numerical "
                         "splits only")
    if int(t["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise ValueError("the XGBoost model has vector leaves (multi_strategy='multi_output_tree'); daskgb reads "
                         "one value a leaf")
    try:
        return _tree_arrays(t)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        what = f"it lacks {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"corrupted XGBoost model: tree {index}: {what}") from None


def _tree_arrays(t: dict) -> Tree:
    left = np.asarray(t["left_children"], dtype=np.int32)
    right = np.asarray(t["right_children"], dtype=np.int32)
    parent = np.asarray(t["parents"], dtype=np.int64)
    parent = np.where(parent == _NO_PARENT, -1, parent).astype(np.int32)
    cond = np.asarray(t["split_conditions"], dtype=np.float32)
    leaf = left < 0
    depth = np.zeros(left.size, dtype=np.int32)
    for node in range(left.size):  # a parent's id is below its children's in XGBoost's numbering
        if parent[node] >= 0:
            depth[node] = depth[parent[node]] + 1
    fields = {
        "left": left, "right": right, "parent": parent,
        "feature": np.where(leaf, -1, np.asarray(t["split_indices"], dtype=np.int32)),
        "bin": np.full(left.size, -1, dtype=np.int32),  # no training cuts: for prediction only
        "threshold": np.where(leaf, np.float32(0), cond),
        "default_left": np.asarray(t["default_left"], dtype=np.int8),
        "value": np.where(leaf, cond, np.float32(0)),
        "base_weight": np.asarray(t["base_weights"], dtype=np.float32),
        "gain": np.asarray(t["loss_changes"], dtype=np.float32),
        "cover": np.asarray(t["sum_hessian"], dtype=np.float32),
        "depth": depth,
    }
    return Tree(**{name: np.asarray(fields[name], dtype=dtype) for name, dtype in FIELDS.items()})


def booster_fields(d: dict) -> dict:
    """What a daskgb Booster is made of (its constructor's arguments, and best_iteration,
    best_score and attributes), read from XGBoost's JSON model (as xgboost.Booster.save_model
    writes a .json file); ValueError for what daskgb cannot read (see the module docstring)."""
    from .objectives import get_objective

    learner = d["learner"]
    gb = learner["gradient_booster"]
    if gb.get("name") != "gbtree":
        raise ValueError(f"the XGBoost model's booster is {gb.get('name')!r}; daskgb reads gbtree models only")
    model = gb["model"]
    mp = learner["learner_model_param"]
    n_class = int(mp.get("num_class", "0"))
    params = _params_of(learner["objective"], n_class)
    npt = _parallel_trees(model, len(model["trees"]))
    if npt != 1:
        params["num_parallel_tree"] = npt
    try:
        get_objective(params["objective"], _as_train_params(params))
    except ValueError as exc:
        raise ValueError(f"the XGBoost model's objective cannot be read: {exc}") from None
    base = _parse_floats(mp["base_score"])
    n_features = int(mp["num_feature"])
    trees = []
    for i, t in enumerate(model["trees"]):
        tree = _tree_of(t, i)
        try:
            trees.append(tree.checked(n_features))
        except ValueError as exc:
            raise ValueError(f"corrupted XGBoost model: tree {i}: {exc}") from None
    names = learner.get("feature_names") or None
    attributes = dict(learner.get("attributes", {}))
    best_iteration = attributes.pop("best_iteration", None)
    best_score = attributes.pop("best_score", None)
    return {"params": params, "trees": trees, "base_score": base[0] if len(base) == 1 else base,
            "n_features": n_features, "feature_names": names, "tree_info": [int(g) for g in model["tree_info"]],
            "best_iteration": None if best_iteration is None else int(best_iteration),
            "best_score": None if best_score is None else float(best_score),
            "attributes": {str(k): str(v) for k, v in attributes.items()}}


def _parallel_trees(model: dict, n_trees: int) -> int:
    """The model's num_parallel_tree, checked against its rounds (iteration_indptr, where the
    file has it): daskgb's rounds all hold one number of trees."""
    npt = int(model["gbtree_model_param"].get("num_parallel_tree", "1"))
    if npt < 1:
        raise ValueError(f"corrupted XGBoost model: num_parallel_tree is {npt}")
    indptr = model.get("iteration_indptr")
    if indptr:
        sizes = {int(b) - int(a) for a, b in zip(indptr[:-1], indptr[1:])}
        if len(sizes) > 1:
            raise ValueError(f"the XGBoost model's rounds hold different numbers of trees ({sorted(sizes)}); daskgb "
                             "reads models whose rounds are alike")
        if int(indptr[-1]) != n_trees:
            raise ValueError(f"corrupted XGBoost model: iteration_indptr ends at {indptr[-1]}, it has {n_trees} trees")
    return npt


def _as_train_params(params: dict):
    from .params import TrainParams

    return TrainParams.from_dict(params)
