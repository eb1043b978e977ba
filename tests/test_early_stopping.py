"""Early stopping stops where XGBoost's does (exact cuts, held-out eval set)."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

xgb = pytest.importorskip("xgboost")


def data(seed, n):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 6)) * 4) / 4).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=n) * 1.5 > 0).astype(np.float32)
    return X, y


@pytest.mark.parametrize("metric", ["logloss", "auc", "error", "rmse"])
@pytest.mark.parametrize("rounds", [3, 10])
def test_stops_at_xgboosts_round(metric, rounds):
    X, y = data(1, 1500)
    Xv, yv = data(2, 600)
    params = {"objective": "binary:logistic", "eval_metric": metric, "max_depth": 6, "eta": 0.5,
              "base_score": 0.5}
    dtrain, dvalid = xgb.DMatrix(X, y), xgb.DMatrix(Xv, yv)
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dtrain, 300, evals=[(dtrain, "train"), (dvalid, "v")],
                   early_stopping_rounds=rounds, verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y)
    v = daskgb.QuantileMatrix(Xv, yv, ref=m)
    res = {}
    bo = daskgb.train({**params, "device": "cpu"}, m, 300, evals=[(m, "train"), (v, "v")], evals_result=res,
                      early_stopping_rounds=rounds, verbose_eval=False)
    assert bo.best_iteration == bx.best_iteration
    assert bo.num_boosted_rounds() == bx.num_boosted_rounds()
    assert bo.best_score == pytest.approx(bx.best_score, rel=1e-5)
    # predict uses the trees up to best_iteration by default
    best = bx.predict(dvalid, iteration_range=(0, bx.best_iteration + 1))
    np.testing.assert_allclose(bo.predict(Xv), best, atol=1e-5)
    assert len(res["v"][metric]) == bo.num_boosted_rounds()


def test_early_stopping_needs_an_eval_set():
    X, y = data(3, 200)
    with pytest.raises(ValueError, match="eval set"):
        daskgb.train({"device": "cpu"}, daskgb.QuantileMatrix(X, y), 10, early_stopping_rounds=2)
    with pytest.raises(ValueError, match="early_stopping_rounds"):
        m = daskgb.QuantileMatrix(X, y)
        daskgb.train({"device": "cpu"}, m, 10, evals=[(m, "t")], early_stopping_rounds=0)
