"""The numpy and CUDA backends grow the same trees from the same data (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

pytestmark = pytest.mark.gpu

CASES = [
    dict(objective="reg:squarederror", max_depth=6, max_bin=64),
    dict(objective="binary:logistic", max_depth=8, max_bin=256, reg_alpha=0.5, min_child_weight=2),
    dict(objective="reg:logistic", max_depth=4, max_bin=16, gamma=0.2, reg_lambda=5),
    dict(objective="binary:logistic", max_depth=5, max_bin=128, max_delta_step=0.7),
    dict(objective="reg:squarederror", max_depth=5, max_bin=128, max_delta_step=0.3, reg_alpha=0.5),
    # Lossguide expands one node per step (one partition and one histogram per step on the GPU);
    # sampling and interaction constraints give every node its own feature mask.
    dict(objective="binary:logistic", grow_policy="lossguide", max_depth=0, max_leaves=40, max_bin=64),
    dict(objective="reg:squarederror", max_depth=7, max_leaves=24, colsample_bytree=0.8, colsample_bylevel=0.7,
         colsample_bynode=0.6, max_bin=64),
    dict(objective="binary:logistic", grow_policy="lossguide", max_leaves=20, colsample_bynode=0.8, max_bin=32,
         interaction_constraints=[[0, 1, 2], [2, 3, 4], [5, 6]]),
    # Monotone constraints: split evaluation runs split.evaluate_splits' array operations on the device.
    dict(objective="binary:logistic", max_depth=6, max_bin=64, monotone_constraints=(1, -1, 0, 1), max_delta_step=0.5,
         reg_alpha=0.3),
]


def make(seed, n=4000, f=10, nan=0.1, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3] * 2)
    if sparse:
        X[rng.random(X.shape) < 0.7] = 0.0
    else:
        X[rng.random(X.shape) < nan] = np.nan
    Z = np.nan_to_num(X)
    score = Z[:, 0] - Z[:, 1] * Z[:, 2] + np.sin(Z[:, 3]) + rng.normal(size=n) * 0.5
    return X, score


def assert_same_trees(a, b):
    assert a.num_boosted_rounds() == b.num_boosted_rounds()
    for i, (ta, tb) in enumerate(zip(a.trees, b.trees)):
        for name in ("left", "right", "feature", "bin", "default_left"):
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name), err_msg=f"tree {i} {name}")
        np.testing.assert_array_equal(ta.threshold, tb.threshold, err_msg=f"tree {i} threshold")
        np.testing.assert_allclose(ta.value, tb.value, rtol=0, atol=1e-5, err_msg=f"tree {i} leaf values")


@pytest.mark.parametrize("case", range(len(CASES)))
def test_dense_same_trees(case):
    params = CASES[case]
    X, score = make(case)
    y = (score > 0).astype(np.float32) if "logistic" in params["objective"] else score.astype(np.float32)
    if params["objective"] == "reg:logistic":
        y = 1 / (1 + np.exp(-score)).astype(np.float32)
    w = np.random.default_rng(9).uniform(0.5, 2, y.size).astype(np.float32)
    models = [daskgb.train({**params, "device": d}, daskgb.QuantileMatrix(X, y, weight=w, max_bin=params["max_bin"],
                                                                       device=d), 25, verbose_eval=False)
              for d in ("cpu", "cuda")]
    assert_same_trees(*models)
    np.testing.assert_allclose(models[0].predict(X), models[1].predict(X), atol=1e-5)


def test_sparse_same_trees():
    sp = pytest.importorskip("scipy.sparse")
    X, score = make(7, sparse=True)
    csr = sp.csr_matrix(X)
    y = (score > 0).astype(np.float32)
    models = [daskgb.train({"objective": "binary:logistic", "max_depth": 6, "device": d},
                           daskgb.QuantileMatrix(csr, y, device=d), 20, verbose_eval=False) for d in ("cpu", "cuda")]
    assert_same_trees(*models)
