"""XGBoost's JSON model format: daskgb models that xgboost.Booster loads and predicts the same
with, and XGBoost models that daskgb reads and predicts the same with (xgboost is a test
dependency only)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
from daskgb.tree import FIELDS

xgb = pytest.importorskip("xgboost")

N, F = 600, 5
NAMES = [f"c{i}" for i in range(F)]


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, F)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    return rng, X


def labels(rng, objective):
    if objective in ("binary:logistic", "binary:logitraw"):
        return (rng.random(N) < 0.3).astype(np.float32)
    if objective.startswith("multi:") or objective.startswith("rank:") or objective == "count:poisson":
        return rng.integers(0, 3, N).astype(np.float32)
    if objective in ("reg:gamma", "reg:tweedie", "reg:logistic"):
        return (rng.random(N) * 0.9 + 0.05).astype(np.float32)
    return rng.normal(size=N).astype(np.float32)


CASES = {
    "binary:logistic": {},
    "reg:logistic": {},
    "reg:squarederror": {},
    "multi:softprob": {"num_class": 3},
    "multi:softmax": {"num_class": 3},
    "reg:quantileerror": {"quantile_alpha": [0.2, 0.8]},
    "count:poisson": {},
    "reg:gamma": {},
    "reg:tweedie": {"tweedie_variance_power": 1.3},
    "reg:pseudohubererror": {"huber_slope": 0.7},
    "reg:absoluteerror": {},
    "rank:ndcg": {},
    "rank:pairwise": {},
}
GROUPS = [200, 150, 250]


def xgb_predict(path, X, **kw):
    return xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X, feature_names=NAMES), **kw)


@pytest.mark.parametrize("objective", sorted(CASES))
def test_xgboost_loads_and_predicts_a_daskgb_model(objective, tmp_path):
    rng, X = data(1)
    y = labels(rng, objective)
    group = GROUPS if objective.startswith("rank:") else None
    params = {"objective": objective, "max_depth": 4, "eta": 0.3, "device": "cpu", **CASES[objective]}
    m = daskgb.QuantileMatrix(X, y, feature_names=NAMES, group=group, device="cpu")
    b = daskgb.train(params, m, 6, verbose_eval=False)
    path = tmp_path / "model.json"
    b.save_model(path, format="xgboost")
    for margin in (False, True):
        ours = b.predict(X, output_margin=margin)
        theirs = xgb_predict(path, X, output_margin=margin).reshape(ours.shape)
        np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)
    # And back: the same trees (but their training bins, which XGBoost's format has no room for).
    back = daskgb.Booster().load_model(path)
    assert back.params.objective == objective and back.tree_info == b.tree_info
    assert back.feature_names == NAMES and back.n_features == F
    for t, u in zip(b.trees, back.trees):
        for name in FIELDS:
            if name != "bin":
                np.testing.assert_array_equal(getattr(u, name), getattr(t, name), err_msg=name)
    np.testing.assert_array_equal(back.predict(X), b.predict(X))


@pytest.mark.parametrize("objective", sorted(CASES))
def test_daskgb_reads_and_predicts_an_xgboost_model(objective, tmp_path):
    rng, X = data(2)
    y = labels(rng, objective)
    kw = {"group": GROUPS} if objective.startswith("rank:") else {}
    d = xgb.DMatrix(X, y, feature_names=NAMES, **kw)
    params = {"objective": objective, "max_depth": 4, "tree_method": "hist", "eta": 0.3, **CASES[objective]}
    xb = xgb.train(params, d, 6)
    path = tmp_path / "xgb.json"
    xb.save_model(str(path))
    b = daskgb.Booster().load_model(path)
    assert b.num_boosted_rounds() == 6
    for margin in (False, True):
        ours = b.predict(X, output_margin=margin)
        theirs = xb.predict(xgb.DMatrix(X, feature_names=NAMES), output_margin=margin).reshape(ours.shape)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    assert b.get_score("gain") == pytest.approx(xb.get_score(importance_type="gain"), rel=1e-5)


def test_early_stopping_attributes_travel(tmp_path):
    rng, X = data(3)
    y = labels(rng, "binary:logistic")
    d = xgb.DMatrix(X[:400], y[:400])
    v = xgb.DMatrix(X[400:], y[400:])
    xb = xgb.train({"objective": "binary:logistic", "eta": 0.5}, d, 200, evals=[(v, "v")], early_stopping_rounds=3,
                   verbose_eval=False)
    xb.save_model(str(tmp_path / "xgb.json"))
    b = daskgb.Booster().load_model(tmp_path / "xgb.json")
    assert b.best_iteration == xb.best_iteration and b.best_score == pytest.approx(xb.best_score)
    b.save_model(tmp_path / "back.json", format="xgboost")
    attrs = json.loads((tmp_path / "back.json").read_text())["learner"]["attributes"]
    assert int(attrs["best_iteration"]) == xb.best_iteration


def _xgb_json(tmp_path, params, rounds=2, **kw):
    rng, X = data(4)
    xb = xgb.train({"max_depth": 2, **params}, xgb.DMatrix(X, labels(rng, "reg:squarederror"), **kw), rounds)
    path = tmp_path / "m.json"
    xb.save_model(str(path))
    return path


@pytest.mark.filterwarnings("ignore::UserWarning")  # gblinear ignores max_depth, and says so
@pytest.mark.parametrize("params, match", [
    ({"booster": "gblinear"}, "gbtree models only"),
    ({"booster": "dart"}, "gbtree models only"),
])
def test_what_daskgb_cannot_read_is_named(tmp_path, params, match):
    with pytest.raises(ValueError, match=match):
        daskgb.Booster().load_model(_xgb_json(tmp_path, params))


def test_ubj_is_read_and_unknown_formats_are_refused(tmp_path):
    """(Categorical splits are read: tests/test_categorical_format.py; UBJSON both ways:
    tests/test_booster_api.py.)"""
    rng, X = data(5)
    xb = xgb.train({"max_depth": 2, "tree_method": "hist"}, xgb.DMatrix(X, rng.normal(size=N)), 3)
    xb.save_model(str(tmp_path / "m.ubj"))
    np.testing.assert_allclose(daskgb.Booster().load_model(tmp_path / "m.ubj").predict(X), xb.predict(xgb.DMatrix(X)),
                               atol=1e-6)
    (tmp_path / "m.bin").write_bytes(b"\x00binary")
    with pytest.raises(ValueError, match="not valid JSON"):
        daskgb.Booster().load_model(tmp_path / "m.bin")
    with pytest.raises(ValueError, match="format must be"):
        daskgb.Booster().save_model(tmp_path / "x.json", format="lightgbm")


def test_an_unknown_objective_is_named(tmp_path):
    path = _xgb_json(tmp_path, {"objective": "reg:squarederror"})
    d = json.loads(path.read_text())
    d["learner"]["objective"] = {"name": "binary:hinge"}
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="objective cannot be read.*binary:hinge"):
        daskgb.Booster().load_model(path)
