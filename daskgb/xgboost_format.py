"""XGBoost's JSON model format: a daskgb Booster written as XGBoost 3 writes its models, and
an XGBoost JSON model read into a daskgb Booster.

`Booster.save_model(path, format="xgboost")` writes what `xgboost.Booster(model_file=path)`
loads and predicts with; `Booster.load_model(path)` reads either format. Both libraries
send a value left when it is `< split_condition` and a missing value to `default_left`,
hold leaf values with the learning rate applied, and keep `base_score` in the same space
(a probability for the logistic objectives, the class margins for multiclass), so a model
predicts the same in both.

Categorical splits travel as XGBoost keeps them: per tree `split_type` (1 at a categorical
split), and for the categorical nodes in increasing order `categories_nodes`, the segments
(`categories_segments`, `categories_sizes`) of `categories`, each node's sorted codes that go
right; such a node's `split_condition` is float32's smallest subnormal, as XGBoost writes it.
The learner's `feature_types` says which features are categorical ("c"), and the gbtree's
`cats` holds the category names of a model trained on a dataframe (XGBoost 3.1's encoder:
string names as UTF-8 bytes with offsets, integer names with their type's id), with which
XGBoost, as daskgb, recodes a dataframe's categories at prediction.

What XGBoost's format cannot carry: the split bins of daskgb's trees (they belong to the
training cuts, which XGBoost does not save; a model read back has none and is for
prediction), the training parameters other than the objective's, and category names other
than strings and integers (XGBoost refuses float names; integer names are written as int64
unless they are numpy integers of another width, and XGBoost recodes a dataframe only when
its categories have that type).
Several trees a round per output (num_parallel_tree > 1, random forests) travel both ways
(gbtree_model_param.num_parallel_tree, and tree_info and iteration_indptr in XGBoost's order:
a round's trees of group 0, then group 1's, ...).
What daskgb cannot read: gblinear and dart boosters, vector leaves
(multi_strategy="multi_output_tree"), rounds of different numbers of trees (iteration_indptr),
and objectives daskgb does not have. (A model as UBJSON, .ubj files and save_raw's default, is
the same JSON encoded by daskgb/ubjson.py.)
"""

from __future__ import annotations

import warnings

import numpy as np

from .inputs import MAX_CATEGORY
from .tree import FIELDS, Tree

# XGBoost marks the root's parent with the largest int32.
_NO_PARENT = 2147483647
# The release whose layout this module writes (learner.version).
XGBOOST_VERSION = [3, 2, 0]
# A categorical split's split_condition (src/tree/io_utils.h DftBadValue: unused, so a value
# no threshold has).
_CATEGORICAL_CONDITION = np.finfo(np.float32).smallest_subnormal
# The type ids of integer category names (src/data/cat_container.cc CatIndexType; 7 and 8,
# float32 and float64, XGBoost refuses).
_NAME_TYPES = {np.dtype(np.int8): 9, np.dtype(np.uint8): 10, np.dtype(np.int16): 11, np.dtype(np.uint16): 12,
               np.dtype(np.int32): 13, np.dtype(np.uint32): 14, np.dtype(np.int64): 15, np.dtype(np.uint64): 16}
_TYPES_OF_IDS = {v: k for k, v in _NAME_TYPES.items()}
# XGBoost's feature types: numeric ones (float, int, indicator, quantitative) and "c".
_NUMERIC_TYPES = ("float", "int", "i", "q")


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


def _param_str(v) -> str:
    """A float parameter as XGBoost's configuration writes it (a float32, %.9g: "0.699999988")."""
    return f"{np.float32(v):.9g}"


def _objective_block(booster) -> dict:
    """learner.objective: the name and the parameter block XGBoost's objective reads."""
    p = booster.params
    name = p.objective
    if name in ("binary:logistic", "reg:logistic", "binary:logitraw"):
        return {"name": name, "reg_loss_param": {"scale_pos_weight": _param_str(p.scale_pos_weight)}}
    if name in ("multi:softprob", "multi:softmax"):
        return {"name": name, "softmax_multiclass_param": {"num_class": str(int(p.num_class))}}
    if name == "reg:quantileerror":
        alpha = np.atleast_1d(np.asarray(p.quantile_alpha, dtype=np.float32))
        return {"name": name, "quantile_loss_param": {"quantile_alpha": _vector_str(alpha)}}
    if name == "reg:tweedie":
        return {"name": name, "tweedie_regression_param": {
            "tweedie_variance_power": _param_str(p.tweedie_variance_power)}}
    if name == "reg:pseudohubererror":
        return {"name": name, "pseudo_huber_param": {"huber_slope": _param_str(p.huber_slope)}}
    if name == "survival:aft":
        return {"name": name, "aft_loss_param": {"aft_loss_distribution": p.aft_loss_distribution,
                                                 "aft_loss_distribution_scale": _param_str(
                                                     p.aft_loss_distribution_scale)}}
    if name == "count:poisson":
        step = p.max_delta_step if getattr(p, "max_delta_step_set", False) else 0.7
        return {"name": name, "poisson_regression_param": {"max_delta_step": _param_str(step)}}
    if name.startswith("rank:"):
        pairs = p.lambdarank_num_pair_per_sample
        return {"name": name, "lambdarank_param": {
            "lambdarank_pair_method": p.lambdarank_pair_method,
            "lambdarank_num_pair_per_sample": str(4294967295 if pairs is None else int(pairs)),
            "lambdarank_unbiased": str(int(bool(p.lambdarank_unbiased))),
            "lambdarank_bias_norm": _param_str(p.lambdarank_bias_norm),
            "lambdarank_normalization": str(int(bool(p.lambdarank_normalization))),
            "lambdarank_score_normalization": str(int(bool(p.lambdarank_score_normalization))),
            "ndcg_exp_gain": str(int(bool(p.ndcg_exp_gain)))}}
    return {"name": name}


def _tree_json(tree: Tree, index: int, n_features: int) -> dict:
    leaf = tree.is_leaf
    n = tree.n_nodes
    nodes = sorted(tree.categories)  # XGBoost's loader walks them in node order
    sets = [np.unique(np.asarray(tree.categories[node], dtype=np.int64)) for node in nodes]
    sizes = [int(s.size) for s in sets]
    split_type = np.zeros(n, dtype=np.int64)
    split_type[nodes] = 1
    condition = np.where(leaf, tree.value, tree.threshold).astype(np.float32)
    condition[nodes] = _CATEGORICAL_CONDITION
    return {
        "base_weights": tree.base_weight.astype(np.float32).tolist(),
        "categories": [int(c) for s in sets for c in s],
        "categories_nodes": nodes,
        "categories_segments": np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() if nodes else [],
        "categories_sizes": sizes,
        "default_left": tree.default_left.astype(int).tolist(),
        "id": index,
        "left_children": tree.left.astype(int).tolist(),
        "loss_changes": np.where(leaf, 0.0, tree.gain).astype(np.float32).tolist(),
        "parents": np.where(tree.parent < 0, _NO_PARENT, tree.parent).astype(int).tolist(),
        "right_children": tree.right.astype(int).tolist(),
        "split_conditions": condition.tolist(),
        "split_indices": np.where(leaf, 0, tree.feature).astype(int).tolist(),
        "split_type": split_type.tolist(),
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
            "feature_types": _feature_types_json(booster),
            "gradient_booster": {
                "model": {
                    "cats": _cats_json(booster),
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


def _feature_types_json(booster) -> list:
    """learner.feature_types: "q" / "c" as given at training (XGBoost writes the types it was
    given), "float" each for a named numeric model, [] for an unnamed one."""
    if booster.feature_types is not None:
        return list(booster.feature_types)
    return ["float"] * booster.n_features if booster.feature_names else []


def _cats_json(booster) -> dict:
    """gbtree.cats, XGBoost's encoder: per feature its category names (an empty column for a
    feature without), feature_segments (the names' CSR offsets by feature) and sorted_idx
    (each feature's names argsorted, as XGBoost's recoder searches them). Empty when the
    model has no names (trained on category codes)."""
    names = booster.categories or {}
    if not any(names.values()):
        return {"enc": [], "feature_segments": [], "sorted_idx": []}
    enc, segments, sorted_idx = [], [0], []
    for f in range(booster.n_features):
        column, order = _names_json(f, list(names.get(f) or []), booster)
        enc.append(column)
        segments.append(segments[-1] + len(order))
        sorted_idx.extend(order)
    return {"enc": enc, "feature_segments": segments, "sorted_idx": sorted_idx}


def _names_json(f: int, names: list, booster) -> tuple[dict, list]:
    """(one enc column, its names' local argsort) of a feature's category names."""
    if not names:
        return {"offsets": [], "values": []}, []
    if all(isinstance(v, str) for v in names):
        encoded = [v.encode("utf-8") for v in names]
        # XGBoost keeps the bytes as int8 and orders names by comparing those (signed) bytes.
        signed = [np.frombuffer(b, dtype=np.int8).tolist() for b in encoded]
        offsets = np.cumsum([0] + [len(b) for b in encoded]).tolist()
        return ({"offsets": offsets, "values": [c for b in signed for c in b]},
                sorted(range(len(names)), key=signed.__getitem__))
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in names):
        kinds = {v.dtype for v in names if isinstance(v, np.integer)}
        dtype = kinds.pop() if len(kinds) == 1 and all(isinstance(v, np.integer) for v in names) else np.dtype(np.int64)
        values = np.array([int(v) for v in names], dtype=object)
        info = np.iinfo(dtype)
        if any(v < info.min or v > info.max for v in values):
            raise ValueError(f"feature {_feature_name(booster, f)}'s category names do not fit {dtype.name}, the "
                             "type XGBoost's model keeps them in")
        values = values.astype(dtype)
        return ({"type": _NAME_TYPES[np.dtype(dtype)], "values": [int(v) for v in values]},
                np.argsort(values, kind="stable").tolist())
    kinds = sorted({type(v).__name__ for v in names})
    raise ValueError(f"feature {_feature_name(booster, f)}'s category names are {kinds}: XGBoost's model keeps "
                     "string or integer category names only (as XGBoost trains on those only); rename the "
                     "categories to strings or integers before training")


def _feature_name(booster, f: int) -> str:
    return repr(booster.feature_names[f]) if booster.feature_names else str(f)


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
    categories = _split_categories(t, left.size)
    categorical = np.zeros(left.size, dtype=bool)
    categorical[list(categories)] = True
    fields = {
        "left": left, "right": right, "parent": parent,
        "feature": np.where(leaf, -1, np.asarray(t["split_indices"], dtype=np.int32)),
        "bin": np.full(left.size, -1, dtype=np.int32),  # no training cuts: for prediction only
        # A categorical split has no threshold (daskgb keeps 0 there).
        "threshold": np.where(leaf | categorical, np.float32(0), cond),
        "default_left": np.asarray(t["default_left"], dtype=np.int8),
        "value": np.where(leaf, cond, np.float32(0)),
        "base_weight": np.asarray(t["base_weights"], dtype=np.float32),
        "gain": np.asarray(t["loss_changes"], dtype=np.float32),
        "cover": np.asarray(t["sum_hessian"], dtype=np.float32),
        "depth": depth,
    }
    return Tree(**{name: np.asarray(fields[name], dtype=dtype) for name, dtype in FIELDS.items()},
                categories=categories)


def _int_list(t: dict, key: str, default=None) -> list:
    values = t.get(key, default)
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"its {key} is not a list of integers")
    return values


def _split_categories(t: dict, n_nodes: int) -> dict:
    """A tree's categorical splits (node -> the sorted codes that go right) from split_type and
    the categories_* fields, checked as XGBoost's LoadCategoricalSplit reads them: the nodes
    whose split_type is 1, in increasing order, each with a non-empty segment of categories."""
    if "split_type" not in t:  # written before categorical splits: all numeric
        return {}
    split_type = _int_list(t, "split_type")
    if len(split_type) != n_nodes:
        raise ValueError(f"its node arrays differ in length: split_type has {len(split_type)} entries, "
                         f"left_children {n_nodes}")
    if any(v not in (0, 1) for v in split_type):
        raise ValueError("its split_type holds a value other than 0 (numerical) and 1 (categorical)")
    nodes = _int_list(t, "categories_nodes", [])
    segments = _int_list(t, "categories_segments", [])
    sizes = _int_list(t, "categories_sizes", [])
    codes = _int_list(t, "categories", [])
    if not len(nodes) == len(segments) == len(sizes):
        raise ValueError(f"its categories_nodes, categories_segments and categories_sizes differ in length "
                         f"({len(nodes)}, {len(segments)}, {len(sizes)})")
    expected = [i for i, v in enumerate(split_type) if v == 1]
    if nodes != expected:
        raise ValueError(f"its categories_nodes {nodes[:10]} are not the nodes whose split_type is 1 "
                         f"(categorical) in increasing order, {expected[:10]}")
    out = {}
    for node, begin, size in zip(nodes, segments, sizes):
        if size < 1 or begin < 0 or begin + size > len(codes):
            raise ValueError(f"the categories segment of node {node} ({begin}, size {size}) is empty or outside its "
                             f"{len(codes)} categories")
        cats = np.unique(np.asarray(codes[begin:begin + size], dtype=np.int64))
        if cats[0] < 0 or cats[-1] >= MAX_CATEGORY:
            raise ValueError(f"the categories of node {node} hold a category outside 0..{MAX_CATEGORY - 1}")
        out[node] = cats.astype(np.int32)
    return out


def _feature_types_of(learner: dict, n_features: int, trees) -> list | None:
    """daskgb's feature_types ("q" / "c", None when none is categorical) of the learner's
    feature_types; a model without them (older XGBoost) has its categorical splits' features
    categorical. Every categorical split must split a categorical feature."""
    given = learner.get("feature_types") or []
    if not isinstance(given, list) or not all(isinstance(v, str) for v in given):
        raise ValueError("corrupted XGBoost model: its feature_types is not a list of strings")
    if given and len(given) != n_features:
        raise ValueError(f"corrupted XGBoost model: its feature_types has {len(given)} entries for {n_features} "
                         "features")
    bad = [v for v in given if v not in _NUMERIC_TYPES + ("c",)]
    if bad:
        raise ValueError(f"corrupted XGBoost model: its feature_types holds {bad[0]!r}; XGBoost's types are "
                         f"{list(_NUMERIC_TYPES)} (numeric) and 'c' (categorical)")
    types = ["c" if v == "c" else "q" for v in given]
    for i, tree in enumerate(trees):
        for node in sorted(tree.categories):
            f = int(tree.feature[node])
            if not given:
                types = types or ["q"] * n_features
                types[f] = "c"
            elif types[f] != "c":
                raise ValueError(f"corrupted XGBoost model: tree {i} splits feature {f} by category, and its "
                                 f"feature_types says the feature is {given[f]!r}, not 'c'")
    return types if "c" in types else None


def _category_names(cats, n_features: int, types) -> dict | None:
    """{feature: category names in code order} of gbtree.cats (XGBoost's encoder), None when
    it holds none. String names arrive as UTF-8 bytes (int8) with offsets; integer names as
    numpy integers of their type, so that writing the model back keeps the type."""
    if cats is None:
        return None
    if not isinstance(cats, dict) or not isinstance(cats.get("enc", []), list):
        raise ValueError("corrupted XGBoost model: its cats is not an object with an enc list")
    enc = cats.get("enc", [])
    if not enc:
        return None
    if len(enc) != n_features:
        raise ValueError(f"corrupted XGBoost model: its cats.enc has {len(enc)} columns for {n_features} features")
    try:
        segments = _int_list(cats, "feature_segments")
    except ValueError as exc:
        raise ValueError(f"corrupted XGBoost model: cats: {exc}") from None
    if len(segments) != n_features + 1 or segments[0] != 0 or any(b < a for a, b in zip(segments, segments[1:])):
        raise ValueError("corrupted XGBoost model: its cats.feature_segments is not the offsets of each feature's "
                         "categories (n_features + 1 non-decreasing integers from 0)")
    out = {}
    for f, column in enumerate(enc):
        try:
            names = _column_names(column, f)
        except ValueError as exc:
            raise ValueError(f"corrupted XGBoost model: cats.enc column {f}: {exc}") from None
        if names is None:
            continue
        if len(names) != segments[f + 1] - segments[f]:
            raise ValueError(f"corrupted XGBoost model: cats.enc column {f} has {len(names)} categories, and "
                             f"feature_segments gives it {segments[f + 1] - segments[f]}")
        if len(set(names)) != len(names):
            raise ValueError(f"corrupted XGBoost model: cats.enc column {f} names a category twice")
        if names:
            if types is None or types[f] != "c":
                raise ValueError(f"corrupted XGBoost model: cats.enc names categories of feature {f}, which "
                                 "feature_types does not say is categorical")
            out[f] = names
    return out or None


def _column_names(column, f: int) -> list | None:
    """One enc column's names (None where XGBoost 3.2's Python package wrote names that are
    not UTF-8: it counts non-ASCII names in characters, not bytes, so their bytes are cut)."""
    if not isinstance(column, dict):
        raise ValueError("it is not an object")
    if "offsets" in column:
        offsets, values = _int_list(column, "offsets"), _int_list(column, "values")
        if not offsets and not values:
            return []
        if (not offsets or offsets[0] != 0 or offsets[-1] != len(values)
                or any(b < a for a, b in zip(offsets, offsets[1:]))):
            raise ValueError("its offsets are not the non-decreasing offsets of its names in values")
        if any(v < -128 or v > 255 for v in values):
            raise ValueError("its values hold a number that is not a byte")
        raw = bytes(v & 0xFF for v in values)
        try:
            return [raw[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:])]
        except UnicodeDecodeError:
            warnings.warn(f"the XGBoost model's category names of feature {f} are not UTF-8 (XGBoost 3.2 cuts "
                          "non-ASCII names); they are dropped: a dataframe's categories are then taken by "
                          "their codes, not recoded by name", UserWarning, stacklevel=5)
            return None
    kind = column.get("type")
    if kind in (7, 8):
        raise ValueError("its names are floats, which XGBoost does not support as categories")
    if kind not in _TYPES_OF_IDS:
        raise ValueError(f"its type {kind!r} is not one of XGBoost's integer types {sorted(_TYPES_OF_IDS)}")
    dtype = _TYPES_OF_IDS[kind]
    values = _int_list(column, "values")
    info = np.iinfo(dtype)
    if any(v < info.min or v > info.max for v in values):
        raise ValueError(f"its values do not fit its type, {dtype.name}")
    return list(np.asarray(values, dtype=dtype))


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
    types = _feature_types_of(learner, n_features, trees)
    categories = _category_names(model.get("cats"), n_features, types)
    names = learner.get("feature_names") or None
    attributes = dict(learner.get("attributes", {}))
    best_iteration = attributes.pop("best_iteration", None)
    best_score = attributes.pop("best_score", None)
    return {"params": params, "trees": trees, "base_score": base[0] if len(base) == 1 else base,
            "n_features": n_features, "feature_names": names, "tree_info": [int(g) for g in model["tree_info"]],
            "feature_types": types, "categories": categories,
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
