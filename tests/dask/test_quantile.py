"""reg:absoluteerror, reg:quantileerror and aucpr on a 2-worker LocalCluster: the same model and metrics
as in process, whatever the partitioning (XGBoost itself averages the workers' own quantiles)."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb
from daskgb.metric import aucpr_of

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from placement import on_workers  # noqa: E402


def features(n, seed):
    """Exact-cut features: quarter steps, one 5-valued column."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 6)) * 4) / 4).astype(np.float32)
    X[:, 2] = rng.integers(0, 5, n)
    return X


def _leaf_of(tree, X):
    """Each row's leaf in a daskgb Tree, routed by thresholds (missing values by default_left)."""
    node = np.zeros(X.shape[0], dtype=np.int64)
    for _ in range(int(tree.depth.max()) + 1):
        inner = ~tree.is_leaf[node]
        f = np.where(inner, tree.feature[node], 0)
        x = X[np.arange(X.shape[0]), f]
        left = np.where(np.isnan(x), tree.default_left[node].astype(bool), x < tree.threshold[node])
        node = np.where(inner, np.where(left, tree.left[node], tree.right[node]), node)
    return node


@pytest.mark.parametrize("objective,alpha,weighted,subsample", [("reg:absoluteerror", None, False, 1.0),
                                                                ("reg:quantileerror", 0.2, True, 1.0),
                                                                ("reg:quantileerror", 0.9, False, 0.7)])
def test_quantile_objectives_equal_in_process(client, objective, alpha, weighted, subsample):
    # The leaf quantiles are taken over both workers' rows, exactly, so the Dask model is the
    # in-process model (XGBoost would average the workers' own quantiles here).
    rng = np.random.default_rng(51)
    X = features(1500, 51)
    # Rows sorted by feature 0 and cut unevenly: once a tree splits on feature 0, some leaves
    # hold rows of one worker only.
    X = X[np.argsort(X[:, 0], kind="stable")]
    y = (2 * X[:, 0] + rng.standard_t(2, X.shape[0])).astype(np.float32)
    w = rng.uniform(0.5, 2, X.shape[0]).astype(np.float32) if weighted else None
    # Rows left out by subsample have zero hessians: they take no part in the leaf quantiles either.
    params = {"objective": objective, "max_depth": 3, "subsample": subsample, "device": "cpu"}
    if alpha is not None:
        params["quantile_alpha"] = alpha
    chunks, placement = [400, 1100], [0, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement),
                                    weight=None if w is None else on_workers(client, w, chunks, placement))
    out = dgb.train(client, params, dtrain, 8, evals=[(dtrain, "t")], verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y, weight=w)
    history: dict = {}
    local = daskgb.train(params, m, 8, evals=[(m, "t")], evals_result=history, verbose_eval=False)
    b = out["booster"]
    assert b.base_score == local.base_score
    one_sided = [leaf for leaf in np.unique(_leaf_of(b.trees[0], X))
                 if len(set(np.repeat(placement, chunks)[_leaf_of(b.trees[0], X) == leaf])) == 1]
    assert one_sided, "the test data should leave some leaf without rows on a worker"
    for t_dist, t_local in zip(b.trees, local.trees):
        np.testing.assert_array_equal(t_dist.value, t_local.value)
    np.testing.assert_allclose(b.predict(X), local.predict(X), atol=1e-6)
    metric = "mae" if objective == "reg:absoluteerror" else "quantile"
    np.testing.assert_allclose(out["history"]["t"][metric], history["t"][metric], rtol=1e-12)


def test_aucpr_on_dask_is_the_metric_of_all_rows(client):
    X, Xv = features(2000, 52), features(700, 53)
    y = (X[:, 0] - 0.3 * X[:, 2] + np.random.default_rng(52).normal(size=2000) > 0).astype(np.float32)
    yv = (Xv[:, 0] - 0.3 * Xv[:, 2] > 0).astype(np.float32)
    chunks, placement = [50, 731, 7, 412, 800], [0, 1, 0, 1, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    dvalid = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [100, 600], [0, 1]),
                                    on_workers(client, yv, [100, 600], [0, 1]), ref=dtrain)
    params = {"objective": "binary:logistic", "max_depth": 5, "eval_metric": "aucpr", "device": "cpu"}
    out = dgb.train(client, params, dtrain, 5, evals=[(dvalid, "v")], verbose_eval=False)
    assert out["history"]["v"]["aucpr"][-1] == pytest.approx(aucpr_of(yv, out["booster"].predict(Xv)), abs=1e-12)


def test_several_alphas_on_dask_equal_in_process(client):
    rng = np.random.default_rng(54)
    X = features(1200, 54)
    X = X[np.argsort(X[:, 2], kind="stable")]  # rank 0 holds the low values of feature 2
    y = (X[:, 0] + X[:, 2] + rng.standard_t(2, X.shape[0])).astype(np.float32)
    chunks, placement = [300, 900], [0, 1]
    Xd = on_workers(client, X, chunks, placement)
    params = {"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9], "max_depth": 3, "device": "cpu"}
    out = dgb.train(client, params, dgb.DaskQuantileMatrix(client, Xd, on_workers(client, y, chunks, placement)), 6,
                    verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y), 6, verbose_eval=False)
    assert out["booster"].base_score == local.base_score
    for t_dist, t_local in zip(out["booster"].trees, local.trees):
        np.testing.assert_array_equal(t_dist.value, t_local.value)
    pred = dgb.predict(client, out["booster"], Xd)
    assert pred.shape == (X.shape[0], 3)
    np.testing.assert_allclose(pred.compute(), local.predict(X), atol=1e-6)

    reg = daskgb.DaskGBRegressor(objective="reg:quantileerror", quantile_alpha=[0.2, 0.8], n_estimators=5,
                                 max_depth=3, client=client).fit(Xd, on_workers(client, y, chunks, placement))
    ref = daskgb.GBRegressor(objective="reg:quantileerror", quantile_alpha=[0.2, 0.8], n_estimators=5,
                             max_depth=3, device="cpu").fit(X, y)
    np.testing.assert_allclose(reg.predict(Xd).compute(), ref.predict(X), atol=1e-6)
