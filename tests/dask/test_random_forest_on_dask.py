"""Random forests on a 2-worker LocalCluster: DaskGBRFRegressor / DaskGBRFClassifier train the
forest GBRFRegressor / GBRFClassifier train in process on the same rows (a row's sampling draws
are keyed by its place among all workers' rows, a tree's columns by its place in the model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")
xgb = pytest.importorskip("xgboost")

from placement import on_workers  # noqa: E402
from test_train import UNEVEN, exact_data  # noqa: E402


def _trees(booster):
    return [json.dumps({k: v for k, v in t.to_dict().items() if k != "bin"}) for t in booster.trees]


@pytest.mark.parametrize("sampling", [{"subsample": 1.0, "colsample_bynode": 1.0}, {}],
                         ids=["no-sampling", "rf-defaults"])
def test_dask_forest_equals_in_process(client, sampling):
    X, y = exact_data(seed=7)
    y = (X[:, 0] - X[:, 2] * 0.3 + y).astype(np.float32)  # a regression target
    placement = [0, 1, 0, 1, 1]
    Xd, yd = on_workers(client, X, UNEVEN, placement), on_workers(client, y, UNEVEN, placement)
    kw = {"n_estimators": 6, "max_depth": 4, "device": "cpu", "random_state": 2, **sampling}
    ours = daskgb.DaskGBRFRegressor(client=client, **kw).fit(Xd, yd)
    local = daskgb.GBRFRegressor(**kw).fit(X, y)
    b = ours.get_booster()
    assert b.num_boosted_rounds() == 1 and len(b.trees) == 6
    assert _trees(b) == _trees(local.get_booster())
    np.testing.assert_allclose(ours.predict(Xd).compute(), local.predict(X), atol=1e-6)
    if sampling:  # sampling turned off: XGBoost's forest too
        theirs = xgb.XGBRFRegressor(tree_method="hist", **{k: v for k, v in kw.items() if k != "device"}).fit(X, y)
        np.testing.assert_allclose(local.predict(X), theirs.predict(X), atol=1e-5)
        assert len(set(_trees(b))) == 1  # every tree the same, each with 1/6 of the leaf values
    else:
        assert len(set(_trees(b))) == 6  # each tree drew its own rows and columns


def test_dask_forest_classifier_and_parallel_trees_through_train(client):
    X, y = exact_data(seed=8)
    placement = [1, 0, 1, 0, 0]
    Xd, yd = on_workers(client, X, UNEVEN, placement), on_workers(client, y, UNEVEN, placement)
    kw = {"n_estimators": 4, "max_depth": 3, "device": "cpu"}
    clf = daskgb.DaskGBRFClassifier(client=client, **kw).fit(Xd, yd)
    local = daskgb.GBRFClassifier(**kw).fit(X, y)
    assert _trees(clf.get_booster()) == _trees(local.get_booster())
    np.testing.assert_allclose(clf.predict_proba(Xd).compute(), local.predict_proba(X), atol=1e-6)
    with pytest.raises(NotImplementedError, match="early_stopping_rounds and callbacks are not supported by "
                                         "DaskGBRFClassifier"):
        daskgb.DaskGBRFClassifier(client=client, early_stopping_rounds=2, **kw).fit(Xd, yd, eval_set=[(Xd, yd)])
    # num_parallel_tree through daskgb.dask.train: rounds of several trees, an eval set scored by rounds.
    params = {"objective": "binary:logistic", "max_depth": 3, "num_parallel_tree": 3, "subsample": 0.7,
              "device": "cpu", "seed": 1}
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    out = dgb.train(client, params, dtrain, 3, evals=[(dtrain, "t")], verbose_eval=False)
    res: dict = {}
    m = daskgb.QuantileMatrix(X, y)
    whole = daskgb.train(params, m, 3, evals=[(m, "t")], evals_result=res, verbose_eval=False)
    assert _trees(out["booster"]) == _trees(whole)
    np.testing.assert_allclose(out["history"]["t"]["logloss"], res["t"]["logloss"], rtol=1e-6)
    part = dgb.predict(client, out["booster"], Xd, iteration_range=(1, 2)).compute()
    np.testing.assert_allclose(part, whole.predict(X, iteration_range=(1, 2)), atol=1e-6)
