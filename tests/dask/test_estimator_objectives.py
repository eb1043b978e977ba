"""Every objective through the Dask estimators on a 2-worker LocalCluster: the same model as in process."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

distributed = pytest.importorskip("distributed")

from placement import on_workers  # noqa: E402

REGRESSION = [
    ("reg:squarederror", {}),
    ("reg:logistic", {}),
    ("count:poisson", {}),
    ("reg:gamma", {}),
    ("reg:tweedie", {"tweedie_variance_power": 1.3}),
    ("reg:pseudohubererror", {"huber_slope": 0.7}),
    ("reg:absoluteerror", {}),
    ("reg:quantileerror", {"quantile_alpha": 0.3}),
]
CLASSIFICATION = [("binary:logistic", 2), ("multi:softprob", 4), ("multi:softmax", 3)]


def data(seed=0, n=1400):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    score = np.nan_to_num(X[:, 0]) - 0.5 * np.nan_to_num(X[:, 1] * X[:, 2]) + rng.normal(size=n) * 0.5
    return X, score


def target(objective, score):
    if objective == "reg:logistic":
        return (1 / (1 + np.exp(-score))).astype(np.float32)
    if objective in ("count:poisson", "reg:tweedie"):
        return np.random.default_rng(1).poisson(np.exp(0.5 * score)).astype(np.float32)
    if objective == "reg:gamma":
        return np.random.default_rng(1).gamma(2.0, np.exp(0.3 * score) / 2.0).astype(np.float32) + 1e-3
    return score.astype(np.float32)


CHUNKS, PLACEMENT = [400, 700, 300], [0, 1, 0]


@pytest.mark.parametrize("objective,extra", REGRESSION, ids=[o for o, _ in REGRESSION])
def test_regressor(client, objective, extra):
    X, score = data()
    y = target(objective, score)
    w = np.random.default_rng(2).uniform(0.5, 2.0, y.size).astype(np.float32)
    kwargs = dict(objective=objective, n_estimators=6, max_depth=4, device="cpu", **extra)
    Xd, yd, wd = (on_workers(client, a, CHUNKS, PLACEMENT) for a in (X, y, w))
    dist = daskgb.DaskGBRegressor(client=client, **kwargs).fit(Xd, yd, sample_weight=wd, eval_set=[(Xd, yd)])
    local = daskgb.GBRegressor(**kwargs).fit(X, y, sample_weight=w, eval_set=[(X, y)])
    np.testing.assert_allclose(dist.predict(Xd).compute(), local.predict(X), rtol=1e-5, atol=1e-5)
    assert dist.get_booster().base_score == pytest.approx(local.get_booster().base_score, rel=1e-6)
    for metric, values in local.evals_result()["validation_0"].items():
        np.testing.assert_allclose(dist.evals_result()["validation_0"][metric], values, rtol=1e-6)


@pytest.mark.parametrize("objective,n_classes", CLASSIFICATION, ids=[o for o, _ in CLASSIFICATION])
def test_classifier(client, objective, n_classes):
    X, score = data(seed=3)
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    labels = np.array(["a", "b", "c", "d"])[np.digitize(score, edges)]
    kwargs = dict(objective=objective, n_estimators=5, max_depth=4, device="cpu")
    Xd, yd = on_workers(client, X, CHUNKS, PLACEMENT), on_workers(client, labels.astype(object), CHUNKS, PLACEMENT)
    dist = daskgb.DaskGBClassifier(client=client, **kwargs).fit(Xd, yd)
    local = daskgb.GBClassifier(**kwargs).fit(X, labels)
    assert dist.get_booster().params.objective == local.get_booster().params.objective == objective
    np.testing.assert_allclose(dist.predict_proba(Xd).compute(), local.predict_proba(X), atol=1e-5)
    np.testing.assert_array_equal(dist.predict(Xd).compute(), local.predict(X))


def test_dataframe_feature_names_reach_importance(client):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, score = data(seed=5)
    names = ["elevation", "slope", "aspect", "road", "fire"]
    df = dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=3)
    y = dd.from_pandas(pd.Series(score.astype(np.float32)), npartitions=3)
    reg = daskgb.DaskGBRegressor(client=client, n_estimators=4, max_depth=3, device="cpu").fit(df, y)
    assert list(reg.feature_names_in_) == names
    local = daskgb.GBRegressor(n_estimators=4, max_depth=3, device="cpu").fit(pd.DataFrame(X, columns=names), score)
    for kind in ("weight", "gain", "cover", "total_gain", "total_cover"):
        scores = reg.get_booster().get_score(importance_type=kind)
        assert set(scores) <= set(names) and "elevation" in scores
        expected = local.get_booster().get_score(importance_type=kind)
        assert scores.keys() == expected.keys()
        np.testing.assert_allclose([scores[k] for k in expected], list(expected.values()), rtol=1e-5)
    np.testing.assert_allclose(reg.feature_importances_, local.feature_importances_, rtol=1e-5)
