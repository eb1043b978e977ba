"""Custom objectives and metrics, as XGBoost takes them (obj=, custom_metric=)."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

xgb = pytest.importorskip("xgboost")


def data(seed=0, n=700):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(size=n) > 0).astype(np.float32)
    return X, y, rng.uniform(0.5, 2, n).astype(np.float32)


def logistic_obj(predt, dtrain):
    """Weighted logistic loss written by hand (float64 math, as a user would)."""
    y = dtrain.get_label()
    w = dtrain.get_weight()
    p = 1.0 / (1.0 + np.exp(-predt.astype(np.float64)))
    grad, hess = p - y, p * (1.0 - p)
    if len(w):
        grad, hess = grad * w, hess * w
    return grad, hess


def margin_error(predt, dmatrix):
    y = dmatrix.get_label()
    return "margin-error", float(np.mean((predt > 0) != (y > 0.5)))


@pytest.mark.parametrize("weighted", [False, True])
def test_custom_objective_matches_xgboost(weighted):
    X, y, w = data()
    weight = w if weighted else None
    params = {"max_depth": 5, "eta": 0.3, "reg_lambda": 1.0}
    rx, ro = {}, {}
    dm = xgb.DMatrix(X, y, weight=weight)
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dm, 15, obj=logistic_obj,
                   custom_metric=margin_error, evals=[(dm, "t")], evals_result=rx, verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y, weight=weight)
    bo = daskgb.train({**params, "device": "cpu"}, m, 15, evals=[(m, "t")], evals_result=ro, verbose_eval=False,
                      obj=logistic_obj, custom_metric=margin_error)
    assert bo.base_score == 0.5
    np.testing.assert_allclose(bo.predict(X), bx.predict(xgb.DMatrix(X)), atol=1e-5)
    assert set(ro["t"]) == set(rx["t"]) == {"rmse", "margin-error"}
    np.testing.assert_allclose(ro["t"]["margin-error"], rx["t"]["margin-error"], atol=1e-6)
    np.testing.assert_allclose(ro["t"]["rmse"], rx["t"]["rmse"], rtol=1e-5)


def test_custom_metric_alone_with_a_builtin_objective():
    X, y, _ = data(seed=2)
    m = daskgb.QuantileMatrix(X, y)
    seen = []

    def prob_error(predt, dmatrix):
        seen.append((float(predt.min()), float(predt.max())))
        return "perr", float(np.mean((predt > 0.5) != dmatrix.get_label()))

    res = {}
    daskgb.train({"objective": "binary:logistic", "disable_default_eval_metric": 1, "device": "cpu"}, m, 4,
                 evals=[(m, "t")], evals_result=res, verbose_eval=False, custom_metric=prob_error)
    assert list(res["t"]) == ["perr"] and len(res["t"]["perr"]) == 4
    assert all(0.0 <= lo <= hi <= 1.0 for lo, hi in seen)  # outputs, not margins, with a built-in objective


def test_bad_custom_objective_is_a_clear_error():
    X, y, _ = data(seed=3)
    m = daskgb.QuantileMatrix(X, y)
    with pytest.raises(ValueError, match="returned 3 gradient values"):
        daskgb.train({"device": "cpu"}, m, 1, obj=lambda p, d: (np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match="NaN or infinite"):
        daskgb.train({"device": "cpu"}, m, 1, obj=lambda p, d: (np.full(p.size, np.nan), np.ones(p.size)))
    with pytest.raises(ValueError, match="callable"):
        daskgb.train({"device": "cpu"}, m, 1, obj="not a function")


@pytest.mark.parametrize("objective", ["multi:softmax", "multi:softprob", "binary:logitraw"])
def test_a_custom_metric_reads_what_predict_gives_as_in_xgboost(objective):
    """XGBoost hands a custom metric predict's output: multi:softmax's classes (not the
    probabilities its built-in metrics read), softprob's probabilities, logitraw's margins."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(200, 4)), 1).astype(np.float32)
    y = (rng.integers(0, 3, 200) if objective.startswith("multi") else X[:, 0] > 0).astype(np.float32)
    params = {"objective": objective, "max_depth": 3, **({"num_class": 3} if objective.startswith("multi") else {})}

    def first_rows(predt, dmatrix):
        seen.append(np.array(predt, copy=True))
        return "first", float(np.asarray(predt).ravel()[0])

    seen = []
    xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), 2, evals=[(xgb.DMatrix(X, y), "t")],
              custom_metric=first_rows, verbose_eval=False)
    theirs, seen = seen, []
    m = daskgb.QuantileMatrix(X, y)
    daskgb.train({**params, "device": "cpu"}, m, 2, evals=[(m, "t")], custom_metric=first_rows, verbose_eval=False)
    assert [s.shape for s in seen] == [s.shape for s in theirs]
    for ours, want in zip(seen, theirs):
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-6)
