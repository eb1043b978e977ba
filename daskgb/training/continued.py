"""Continued training (xgb_model=): the model a fit goes on from, and its trees routed by the new matrix's bins.

A fit's training margins move by bins (predict.add_tree_binned), so every tree of the model it
goes on from must route its rows by this matrix's bins exactly as its thresholds route raw
values. A daskgb model trained on these cuts already does. Any other model (daskgb's on other
cuts, or XGBoost's JSON) is re-expressed: a split ``x < t`` is the bin split "bin <= b" when t
is the upper bound of the feature's bin b, sends every present value right when t is at or
below the feature's smallest value, and every one left when t is above its last bound.
Otherwise no split of the bins routes the rows the same, and the fit is refused, naming the
split.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from ..arrays import to_host


def base_model(xgb_model):
    """The Booster a fit goes on from: a daskgb Booster (copied: the fit never changes the
    caller's), an estimator's, or a saved model file (daskgb's or XGBoost's JSON)."""
    from ..booster import Booster

    if xgb_model is None:
        return None
    if hasattr(xgb_model, "get_booster") and not isinstance(xgb_model, Booster):
        xgb_model = xgb_model.get_booster()
    if isinstance(xgb_model, Booster):
        return copy.deepcopy(xgb_model)
    if isinstance(xgb_model, (str, Path)):
        return Booster().load_model(xgb_model)
    raise ValueError(f"xgb_model must be a daskgb Booster, a fitted estimator or a model file's path, got "
                     f"{type(xgb_model).__name__}")


def check_base(base, n_groups: int, dtrain) -> None:
    """Raise ValueError unless the model can go on training on dtrain with this objective."""
    if base.n_features != dtrain.n_features:
        raise ValueError(f"xgb_model was trained on {base.n_features} features, the data has {dtrain.n_features}")
    if base.feature_names and dtrain.feature_names and list(base.feature_names) != list(dtrain.feature_names):
        raise ValueError(f"xgb_model's features {list(base.feature_names)} are not the data's "
                         f"{list(dtrain.feature_names)}")
    if base.n_groups != n_groups:
        raise ValueError(f"xgb_model has {base.n_groups} output(s) a round ({base.params.objective}); these "
                         f"parameters train {n_groups}")


def trees_in_bins(base, cuts, cuts_token, categories=None):
    """base's trees with their splits as bins of cuts (copies where re-expressed), their
    categorical splits' categories coded as the data codes them (categories: the data's
    {feature: category names in code order}; base codes by base.categories), as XGBoost
    recodes data for a model it goes on from."""
    if getattr(base, "_train_cuts_token", None) is not None and base._train_cuts_token == cuts_token:
        return list(base.trees)
    ptrs = to_host(cuts.ptrs).astype(np.int64)
    values = to_host(cuts.values)
    lows = to_host(cuts.min_values)
    recode = _category_recoding(base.categories, categories)
    out = []
    for i, tree in enumerate(base.trees):
        t = copy.deepcopy(tree)
        for node in np.flatnonzero(t.left >= 0):
            if int(node) in t.categories:
                # A categorical split routes by category, and a category is its own bin.
                f = int(t.feature[node])
                if f in recode:
                    to = recode[f]
                    t.categories[int(node)] = np.asarray(sorted(int(to[c]) for c in t.categories[int(node)]
                                                                if c < to.size and to[c] >= 0), dtype=np.int32)
                continue
            f = int(t.feature[node])
            bounds = values[ptrs[f] : ptrs[f + 1]]
            thr = np.float32(t.threshold[node])
            hit = np.flatnonzero(bounds == thr)
            if hit.size:
                t.bin[node] = int(hit[0])
            elif bounds.size == 0 or thr <= lows[f]:
                t.bin[node] = -1  # every present value goes right
            elif thr > bounds[-1]:
                t.bin[node] = bounds.size - 1  # every present value goes left
            else:
                raise ValueError(
                    f"xgb_model's tree {i}, node {node}: the split f{f} < {float(thr)!r} does not fall on a bin "
                    f"boundary of this matrix (feature {f}'s bounds near it: "
                    f"{[float(v) for v in bounds[max(0, np.searchsorted(bounds, thr) - 1):][:2]]}), so its rows "
                    "cannot be routed by their bins; build the matrix with the cuts the model was trained on "
                    "(ref=, or QuantileMatrix(..., cuts=)) or data whose values the model's thresholds separate")
        out.append(t)
    return out


def _category_recoding(model_categories, data_categories) -> dict:
    """{feature: array mapping the model's category codes to the data's (-1: a category the data
    lacks)} for the features whose categories the two code differently."""
    out = {}
    data = {int(k): v for k, v in (data_categories or {}).items()}
    for f, names in (model_categories or {}).items():
        theirs = data.get(int(f))
        if theirs is None or list(theirs) == list(names):
            continue
        position = {name: i for i, name in enumerate(theirs)}
        out[int(f)] = np.asarray([position.get(name, -1) for name in names], dtype=np.int64)
    return out

