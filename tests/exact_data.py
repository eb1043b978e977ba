"""Data on which xgboost hist's cuts are exact, and xgboost's trees as dicts: for tree-for-tree parity tests."""

from __future__ import annotations

import json

import numpy as np


def make_data(seed: int, objective: str, with_nan: bool, n: int = 600, n_features: int = 6, score=None):
    """Features on a grid of quarter steps (at most ~60 distinct values each) and one 3-valued
    feature; a regression target, or for other objectives score > 1 as 0/1 labels.
    score(Z, rng): the signal from the NaN-zeroed features (default: a mix of all kinds)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, n_features)) * 4) / 4
    X[:, 1] = rng.integers(0, 3, n)
    if with_nan:
        X[rng.random((n, n_features)) < 0.15] = np.nan
    Z = np.nan_to_num(X)
    if score is None:
        s = 2 * Z[:, 0] + Z[:, 2] ** 2 - Z[:, 1] * Z[:, 3] + np.sin(2 * Z[:, 4]) + rng.normal(size=n)
    else:
        s = score(Z, rng)
    y = s if objective == "reg:squarederror" else (s > 1).astype(np.float32)
    return X.astype(np.float32), y.astype(np.float32)


def xgb_trees(booster):
    """An xgboost Booster's trees, as its JSON model holds them."""
    return json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
