"""Booster: prediction paths, eval sets, save/load, feature importance, and the training margins."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
from daskgb.metric import rmse

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def data(n=1500, f=5, seed=0, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[rng.random((n, f)) < nan] = np.nan
    y = (np.nan_to_num(X[:, 0]) * 2 - np.nan_to_num(X[:, 1]) ** 2 + rng.normal(size=n) * 0.3).astype(np.float32)
    return X, y


@pytest.mark.parametrize("device", DEVICES)
def test_training_margins_equal_prediction(device):
    # Training margins come from leaf positions; they must equal a fresh prediction
    # (continuous data: inexact cuts, so rows are routed by bins in training and by values here).
    X, y = data()
    m = daskgb.QuantileMatrix(X, y, max_bin=64)
    res = {}
    b = daskgb.train({"max_depth": 4, "device": device, "max_bin": 64}, m, 15, evals=[(m, "train")],
                     evals_result=res, verbose_eval=False)
    assert res["train"]["rmse"][-1] == pytest.approx(rmse(np, y, b.predict(X)), rel=1e-5)
    assert res["train"]["rmse"][-1] < res["train"]["rmse"][0]


@pytest.mark.parametrize("device", DEVICES)
def test_eval_set_with_ref_matches_raw_prediction(device):
    X, y = data(seed=1)
    Xv, yv = data(n=700, seed=2)
    m = daskgb.QuantileMatrix(X, y, max_bin=32)
    v = daskgb.QuantileMatrix(Xv, yv, ref=m)
    res = {}
    b = daskgb.train({"max_depth": 5, "device": device, "max_bin": 32}, m, 10, evals=[(v, "valid")],
                     evals_result=res, verbose_eval=False)
    # Bin routing with the training cuts and value routing agree wherever a split
    # threshold is a cut value, which it always is.
    np.testing.assert_allclose(b.predict(v), b.predict(Xv), rtol=0, atol=1e-6)
    assert res["valid"]["rmse"][-1] == pytest.approx(rmse(np, yv, b.predict(Xv)), rel=1e-5)


def test_eval_set_without_ref_is_an_error():
    X, y = data()
    m = daskgb.QuantileMatrix(X, y)
    v = daskgb.QuantileMatrix(X[:100], y[:100])
    with pytest.raises(ValueError, match="ref=dtrain"):
        daskgb.train({"device": "cpu"}, m, 2, evals=[(v, "valid")])


def test_iteration_range_and_output_margin():
    X, y = data()
    b = daskgb.train({"device": "cpu", "max_depth": 3}, daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
    full = b.predict(X, output_margin=True)
    first = b.predict(X, output_margin=True, iteration_range=(0, 3))
    rest = b.predict(X, output_margin=True, iteration_range=(3, 8))
    np.testing.assert_allclose(first + rest - np.float32(b.base_score), full, atol=1e-5)
    with pytest.raises(ValueError, match="iteration_range"):
        b.predict(X, iteration_range=(0, 9))


def test_save_load_round_trip(tmp_path):
    X, y = data()
    yb = (y > 0).astype(np.float32)
    b = daskgb.train({"device": "cpu", "objective": "binary:logistic", "max_depth": 4},
                     daskgb.QuantileMatrix(X, yb, feature_names=list("abcde")), 6, verbose_eval=False)
    path = tmp_path / "model.json"
    b.save_model(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "daskgb-model" and doc["version"] == 1 and len(doc["trees"]) == 6
    b2 = daskgb.Booster().load_model(path)
    np.testing.assert_array_equal(b2.predict(X), b.predict(X))
    assert b2.feature_names == list("abcde")
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="version 99"):
        daskgb.Booster().load_model(path)


def test_feature_importance():
    X, y = data(nan=0.0)
    b = daskgb.train({"device": "cpu", "max_depth": 3}, daskgb.QuantileMatrix(X, y), 10, verbose_eval=False)
    w = b.get_score("weight")
    g = b.get_score("gain")
    c = b.get_score("cover")
    n_splits = sum(int((~t.is_leaf).sum()) for t in b.trees)
    assert sum(w.values()) == n_splits
    # y depends on features 0 and 1 only: they carry the gain
    top = sorted(g, key=g.get, reverse=True)[:2]
    assert set(top) == {"f0", "f1"}
    assert all(v > 0 for v in c.values())
    with pytest.raises(ValueError, match="importance_type"):
        b.get_score("bogus")


def test_predict_csr_equals_dense():
    sp = pytest.importorskip("scipy.sparse")
    X, y = data(nan=0.3)
    b = daskgb.train({"device": "cpu", "max_depth": 4}, daskgb.QuantileMatrix(X, y), 5, verbose_eval=False)
    dense_zeros = np.nan_to_num(X, nan=0.0)
    csr = sp.csr_matrix(dense_zeros)
    csr.data[:] = dense_zeros[dense_zeros != 0]
    # absent CSR entries are missing: equal to the dense array with NaN there
    expect = b.predict(np.where(dense_zeros == 0, np.nan, dense_zeros))
    np.testing.assert_allclose(b.predict(csr), expect, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_training_matches_dense_with_nan(device):
    sp = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(4)
    X = np.round(rng.normal(size=(800, 6)) * 3) / 3
    X[rng.random(X.shape) < 0.6] = 0.0
    y = (X[:, 0] + X[:, 1] + rng.normal(size=800) * 0.2).astype(np.float32)
    csr = sp.csr_matrix(X.astype(np.float32))
    dense_nan = np.where(X == 0, np.nan, X).astype(np.float32)
    p = {"device": device, "max_depth": 4}
    a = daskgb.train(p, daskgb.QuantileMatrix(csr, y), 10, verbose_eval=False)
    d = daskgb.train(p, daskgb.QuantileMatrix(dense_nan, y), 10, verbose_eval=False)
    assert not a.trees[0].n_nodes == 1
    np.testing.assert_allclose(a.predict(csr), d.predict(dense_nan), atol=1e-6)
