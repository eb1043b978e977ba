"""SHAP contributions, Saabas's approximation and leaf indices (Booster.predict's pred_contribs,
approx_contribs and pred_leaf): they sum to the margin, equal XGBoost's on the same model
(exported to XGBoost's JSON), and the GPU kernels equal the numpy oracle."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb.explain import reference
from daskgb.explain.paths import tree_paths


def _data(n=600, f=6, seed=0, missing=0.15):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[:, 1] = np.round(X[:, 1] * 2)  # few distinct values: ties at the thresholds
    X[rng.random(X.shape) < missing] = np.nan
    X[:, 2] = np.where(np.isnan(X[:, 2]), 0.0, X[:, 2])  # a column without missing values
    signal = np.nan_to_num(X[:, 0]) - 0.7 * np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 3]) + 0.4 * X[:, 2]
    return X, signal + rng.normal(scale=0.5, size=n).astype(np.float32)


def _model(kind, device="cpu", rounds=12, depth=4, seed=0):
    X, s = _data(seed=seed)
    params = {"max_depth": depth, "eta": 0.3, "device": device, "seed": seed}
    kwargs = {}
    if kind == "binary":
        params["objective"] = "binary:logistic"
        y = (s > 0).astype(np.float32)
    elif kind == "regression":
        params["objective"] = "reg:squarederror"
        y = s.astype(np.float32)
    elif kind == "multiclass":
        params.update(objective="multi:softprob", num_class=3)
        y = np.digitize(s, np.quantile(s, [0.33, 0.66])).astype(np.float32)
    else:  # ranking
        params["objective"] = "rank:ndcg"
        y = np.digitize(s, np.quantile(s, [0.5, 0.8])).astype(np.float32)
        kwargs["qid"] = np.repeat(np.arange(X.shape[0] // 20), 20)
    if kind == "lossguide":
        params.update(objective="reg:squarederror", grow_policy="lossguide", max_leaves=24, max_depth=0)
        y = s.astype(np.float32)
    booster = daskgb.train(params, daskgb.QuantileMatrix(X, y, **kwargs), rounds, verbose_eval=False)
    return booster, X


KINDS = ["binary", "regression", "multiclass", "ranking", "lossguide"]


@pytest.mark.parametrize("kind", KINDS)
def test_contributions_sum_to_the_margin(kind):
    booster, X = _model(kind)
    margin = booster.predict(X, output_margin=True)
    for approx in (False, True):
        phi = booster.predict(X, pred_contribs=True, approx_contribs=approx)
        assert phi.dtype == np.float32
        assert phi.shape == margin.shape + (X.shape[1] + 1,)
        np.testing.assert_allclose(phi.sum(axis=-1), margin, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_contributions_and_leaves_equal_xgboosts(kind, tmp_path):
    xgb = pytest.importorskip("xgboost")
    booster, X = _model(kind)
    path = tmp_path / "model.json"
    booster.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path))
    d = xgb.DMatrix(X, missing=np.nan)
    for approx in (False, True):
        ours = booster.predict(X, pred_contribs=True, approx_contribs=approx)
        want = theirs.predict(d, pred_contribs=True, approx_contribs=approx)
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5, err_msg=f"approx_contribs={approx}")
    np.testing.assert_array_equal(booster.predict(X, pred_leaf=True), theirs.predict(d, pred_leaf=True))
    # A range of rounds (XGBoost takes it as a slice of the model for contributions).
    np.testing.assert_allclose(booster.predict(X, pred_contribs=True, iteration_range=(2, 7)),
                               theirs[2:7].predict(d, pred_contribs=True), rtol=1e-5, atol=1e-5)


def _brute_force_shap(tree, x):
    """A tree's SHAP values of one row by the definition: every subset of the features, the
    expected value conditioned on it as TreeSHAP defines it (cover-weighted over the splits on
    features outside the subset)."""
    from itertools import combinations
    from math import factorial

    f = x.size

    def expect(node, subset):
        if tree.left[node] < 0:
            return float(tree.value[node])
        a, b = tree.left[node], tree.right[node]
        feat = tree.feature[node]
        if feat in subset:
            v = x[feat]
            go_left = bool(tree.default_left[node]) if np.isnan(v) else v < tree.threshold[node]
            return expect(a if go_left else b, subset)
        ca, cb = float(tree.cover[a]), float(tree.cover[b])
        return (expect(a, subset) * ca + expect(b, subset) * cb) / float(tree.cover[node])

    phi = np.zeros(f + 1)
    for i in range(f):
        rest = [j for j in range(f) if j != i]
        for size in range(f):
            for s in combinations(rest, size):
                w = factorial(size) * factorial(f - size - 1) / factorial(f)
                phi[i] += w * (expect(0, set(s) | {i}) - expect(0, set(s)))
    phi[f] = expect(0, set())
    return phi


def test_path_shap_is_shapley_by_definition():
    """The path decomposition against the definition (every subset of features), with missing
    values and trees that split a feature more than once."""
    booster, X = _model("regression", rounds=3, depth=4, seed=3)
    X = X[:25].copy()
    assert all((np.bincount(t.feature[t.feature >= 0]) > 1).any() for t in booster.trees)
    got = booster.predict(X, pred_contribs=True)
    want = np.zeros((X.shape[0], booster.n_features + 1))
    for r in range(X.shape[0]):
        for t in booster.trees:
            want[r] += _brute_force_shap(t, X[r])
    np.testing.assert_allclose(got[:, :-1], want[:, :-1], rtol=1e-5, atol=1e-6)
    # The last column: the trees' expected value and the base margin (squared error: base_score).
    np.testing.assert_allclose(got[:, -1], want[:, -1] + np.float32(booster.base_score), rtol=1e-5, atol=1e-6)


def test_a_lone_root_and_empty_inputs():
    X, s = _data(n=50)
    booster = daskgb.train({"max_depth": 3, "min_child_weight": 1e6}, daskgb.QuantileMatrix(X, s), 2,
                           verbose_eval=False)
    assert all(t.n_nodes == 1 for t in booster.trees)
    phi = booster.predict(X, pred_contribs=True)
    np.testing.assert_allclose(phi[:, :-1], 0.0)
    np.testing.assert_allclose(phi[:, -1], booster.predict(X, output_margin=True), rtol=1e-6)
    assert booster.predict(X, pred_leaf=True).tolist() == [[0.0, 0.0]] * 50


def test_bad_requests_are_named():
    booster, X = _model("binary", rounds=2)
    with pytest.raises(ValueError, match="approx_contribs"):
        booster.predict(X, approx_contribs=True)
    with pytest.raises(ValueError, match="different outputs"):
        booster.predict(X, pred_leaf=True, pred_contribs=True)
    with pytest.raises(ValueError, match="different outputs"):
        booster.predict(X, pred_interactions=True, pred_contribs=True)
    y = np.zeros(X.shape[0], np.float32)
    with pytest.raises(ValueError, match="cuts the model was trained on"):  # its X gone: only its own bins left
        booster.predict(daskgb.QuantileMatrix(X.copy(), y), pred_contribs=True)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_the_kernels_equal_the_oracle(kind):
    cupy = pytest.importorskip("cupy")
    booster, X = _model(kind, rounds=8, depth=5, seed=4)
    for approx in (False, True):
        host = booster.predict(X, pred_contribs=True, approx_contribs=approx)
        device = booster.predict(cupy.asarray(X), pred_contribs=True, approx_contribs=approx)
        assert isinstance(device, cupy.ndarray)
        np.testing.assert_allclose(device.get(), host, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(booster.predict(cupy.asarray(X), pred_leaf=True).get(),
                                  booster.predict(X, pred_leaf=True))
    # The float64 sums themselves, path by path in one order: the same bits.
    trees = [t for t, g in zip(booster.trees, booster.tree_info) if g == 0]
    paths = tree_paths(trees)
    from daskgb.explain import cuda

    want = np.zeros((X.shape[0], X.shape[1] + 1))
    reference.shap_contributions(X, paths, want)
    got = cupy.zeros((X.shape[0], X.shape[1] + 1))
    cuda.shap_contributions(cupy.asarray(X), paths, got)
    np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_dask_predict_explains_block_by_block(kind):
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import daskgb.dask as dgb

    booster, X = _model(kind, rounds=6)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        Xd = da.from_array(X, chunks=(170, X.shape[1]))
        for kwargs in ({"pred_contribs": True}, {"pred_contribs": True, "approx_contribs": True},
                       {"pred_leaf": True}, {"pred_contribs": True, "iteration_range": (1, 4)},
                       {"pred_interactions": True}):
            got = dgb.predict(client, booster, Xd, **kwargs)
            want = booster.predict(X, **kwargs)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.compute(), want)
        with pytest.raises(ValueError, match="different outputs"):
            dgb.predict(client, booster, Xd, pred_leaf=True, pred_contribs=True)
        est = daskgb.DaskGBRegressor(n_estimators=3, max_depth=3, client=client).fit(Xd, da.from_array(
            np.nan_to_num(X[:, 0]), chunks=170))
        np.testing.assert_array_equal(est.apply(Xd).compute(), est.get_booster().predict(X, pred_leaf=True))


def test_the_estimators_apply_gives_the_leaves():
    X, s = _data(n=300)
    reg = daskgb.GBRegressor(n_estimators=4, max_depth=3).fit(X, s)
    leaves = reg.apply(X)
    assert leaves.shape == (300, 4)
    np.testing.assert_array_equal(leaves, reg.get_booster().predict(X, pred_leaf=True))
    np.testing.assert_array_equal(reg.apply(X, iteration_range=(1, 3)), leaves[:, 1:3])
    xgb = pytest.importorskip("xgboost")
    theirs = xgb.XGBRegressor()
    theirs.load_model(_saved(reg.get_booster()))
    np.testing.assert_array_equal(theirs.apply(X), leaves)


def _saved(booster):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "model.json"
    booster.save_model(path, format="xgboost")
    return str(path)


@pytest.mark.parametrize("kind", ["binary", "multiclass", "lossguide"])
def test_interactions_equal_xgboosts(kind, tmp_path):
    xgb = pytest.importorskip("xgboost")
    booster, X = _model(kind, rounds=6)
    X = X[:150]
    inter = booster.predict(X, pred_interactions=True)
    phi = booster.predict(X, pred_contribs=True)
    assert inter.shape == phi.shape + (phi.shape[-1],)
    np.testing.assert_allclose(inter.sum(axis=-1), phi, rtol=1e-5, atol=1e-5)  # a row of pairs sums to the value
    theirs = xgb.Booster(model_file=_saved(booster))
    d = xgb.DMatrix(X, missing=np.nan)
    np.testing.assert_allclose(inter, theirs.predict(d, pred_interactions=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(booster.predict(X, pred_interactions=True, approx_contribs=True),
                               theirs.predict(d, pred_interactions=True, approx_contribs=True), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_the_interaction_kernel_equals_the_oracle():
    cupy = pytest.importorskip("cupy")
    from daskgb.explain import cuda

    booster, X = _model("regression", rounds=5, depth=5, seed=6)
    X = X[:200]
    paths = tree_paths(booster.trees)
    want = np.zeros((X.shape[0], X.shape[1] + 1, X.shape[1] + 1))
    reference.shap_interactions(X, paths, want)
    got = cupy.zeros(want.shape)
    cuda.shap_interactions(cupy.asarray(X), paths, got)
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_allclose(booster.predict(cupy.asarray(X), pred_interactions=True).get(),
                               booster.predict(X, pred_interactions=True), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_a_quantile_matrix_explains_as_its_raw_features(kind):
    """Read off the training matrix's bins (each bin's lower edge), the outputs equal the raw
    features' where every feature has no more distinct values than max_bin, and the SHAP values
    still sum to the margins training's bins give everywhere."""
    X, s = _data(seed=9)
    y = (s > 0).astype(np.float32) if kind == "binary" else np.digitize(s, [-0.5, 0.5]).astype(np.float32)
    params = {"objective": "binary:logistic"} if kind == "binary" else {"objective": "multi:softprob", "num_class": 3}
    X = np.round(X * 4) / 4  # few distinct values: the bins are the values
    m = daskgb.QuantileMatrix(X, y)
    booster = daskgb.train({**params, "max_depth": 4, "device": "cpu"}, m, 5, verbose_eval=False)
    for kwargs in ({"pred_contribs": True}, {"pred_contribs": True, "approx_contribs": True}, {"pred_leaf": True},
                   {"pred_interactions": True}):
        np.testing.assert_allclose(booster.predict(m, **kwargs), booster.predict(X, **kwargs), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(booster.predict(m, pred_contribs=True).sum(axis=-1), booster.predict(m, output_margin=True),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_a_device_quantile_matrix_explains_as_its_raw_features():
    cupy = pytest.importorskip("cupy")
    X, s = _data(seed=10)
    X = np.round(X * 4) / 4
    y = (s > 0).astype(np.float32)
    m = daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y))
    booster = daskgb.train({"objective": "binary:logistic", "max_depth": 4, "device": "cuda"}, m, 5,
                           verbose_eval=False)
    got = booster.predict(m, pred_contribs=True)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(got.get(), booster.predict(cupy.asarray(X), pred_contribs=True).get(), rtol=1e-6,
                               atol=1e-6)
