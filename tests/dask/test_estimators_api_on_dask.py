"""The Dask estimators' defects of issue 24 and their XGBoost names, on a 2-worker LocalCluster."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from daskgb.dask.estimators import DaskGBClassifier, DaskGBRegressor  # noqa: E402


def marked_data(n=400, seed=0):
    """Feature 0 missing (marked -999) where the label is high: the splits send missing rows
    right (their default), a -999 read as a number would go left."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, 3)), 1).astype(np.float32)
    y = X[:, 0].copy()
    miss = rng.random(n) < 0.3
    X[miss, 0], y[miss] = -999, 10
    return X, y


def test_missing_marker_is_missing_at_predict(client):
    X, y = marked_data()
    dX, dy = da.from_array(X, chunks=200), da.from_array(y, chunks=200)
    model = DaskGBRegressor(n_estimators=3, missing=-999, device="cpu").fit(dX, dy)
    expected = model.get_booster().predict(np.where(X == -999, np.nan, X))
    np.testing.assert_allclose(model.predict(dX).compute(), expected, atol=1e-6)
    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abc")), npartitions=2)
    np.testing.assert_allclose(model.predict(frame).compute(), expected, atol=1e-6)
    assert np.abs(model.predict(dX).compute()[X[:, 0] == -999] - 10).max() < 5


def test_pickled_estimator_predicts_numpy_and_scores_string_labels(client):
    X, _ = marked_data()
    labels = np.where(X[:, 1] > 0, "yes", "no")
    dX = da.from_array(X, chunks=200)
    clf = DaskGBClassifier(n_estimators=3, device="cpu").fit(dX, dd.from_pandas(pd.Series(labels), npartitions=2))
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(dX).compute())
    np.testing.assert_allclose(loaded.predict_proba(X), clf.predict_proba(dX).compute(), atol=1e-7)
    # Partitions of unknown length, split otherwise than X's.
    ys = dd.from_pandas(pd.Series(labels), npartitions=3)
    expected = float(np.mean(clf.predict(dX).compute() == labels))
    assert clf.score(dX, ys) == pytest.approx(expected)
    assert loaded.score(X, labels) == pytest.approx(expected)
    reg = DaskGBRegressor(n_estimators=2, device="cpu").fit(dX, da.from_array(X[:, 1], chunks=200))
    assert reg.score(dX, dd.from_pandas(pd.Series(X[:, 1]), npartitions=3)) == pytest.approx(
        pickle.loads(pickle.dumps(reg)).score(X, X[:, 1]), rel=1e-9)


def _fit_in_task(X, y):
    import dask.array as da

    from daskgb.dask.estimators import DaskGBRegressor

    model = DaskGBRegressor(n_estimators=2, device="cpu").fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200))
    return model.get_booster().num_boosted_rounds()


def test_fit_inside_a_task_finds_the_workers_client(client):
    X, y = marked_data()
    assert client.submit(_fit_in_task, X, y, pure=False).result(timeout=120) == 2


def test_named_model_refuses_other_width_or_names_on_dask(client):
    X, y = marked_data()
    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abc")), npartitions=2)
    model = DaskGBRegressor(n_estimators=2, device="cpu").fit(frame, da.from_array(y, chunks=200))
    np.testing.assert_allclose(model.predict(da.from_array(X, chunks=200)).compute(), model.predict(X), atol=1e-7)
    for bad in (da.from_array(X[:, :2], chunks=200), X[:, :2]):
        with pytest.raises(ValueError, match="features"):
            model.predict(bad)
    with pytest.raises(ValueError, match="feature_names mismatch"):
        model.predict(frame.rename(columns={"a": "z"}))


def test_estimator_names_on_dask(client, tmp_path):
    X, y = marked_data()
    dX, dy = da.from_array(X, chunks=200), da.from_array((y > 0).astype(np.float32), chunks=200)
    model = DaskGBClassifier(n_estimators=3, device="cpu", scale_pos_weight=2.0, colsample_bynode=0.5,
                             feature_weights=[0, 1, 1], importance_type="total_gain").fit(dX, dy)
    from daskgb import GBClassifier

    local = GBClassifier(n_estimators=3, device="cpu", scale_pos_weight=2.0, colsample_bynode=0.5,
                         feature_weights=[0, 1, 1], importance_type="total_gain").fit(X, (y > 0).astype(np.float32))
    np.testing.assert_allclose(model.predict_proba(X), local.predict_proba(X), atol=1e-5)
    np.testing.assert_allclose(model.feature_importances_, local.feature_importances_, rtol=1e-4)
    assert model.feature_importances_[0] == 0
    assert model.get_params()["learning_rate"] is None and "client" not in model.get_xgb_params()
    model.save_model(tmp_path / "m.json")
    loaded = DaskGBClassifier()
    loaded.load_model(tmp_path / "m.json")
    np.testing.assert_array_equal(loaded.predict(dX).compute(), model.predict(dX).compute())


def test_labels_of_every_dtype_that_are_class_indices_fit_alike(client):
    """Labels that already are the class indices (bool, int, float 0..K-1) go to the matrices
    as they are, with no encoding step; each fit gives the model of float32 labels, and labels
    that are not the indices (2 and 5) are still encoded (classes_ keeps them)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 4)).astype(np.float32)
    binary = X[:, 0] + 0.3 * rng.normal(size=600) > 0
    dX = da.from_array(X, chunks=150)

    def fit(y):
        return DaskGBClassifier(n_estimators=4, max_depth=3, device="cpu").fit(dX, da.from_array(y, chunks=150))

    want = fit(binary.astype(np.float32))
    for y in (binary, binary.astype(np.int64)):
        model = fit(y)
        assert list(model.classes_) == [0, 1]
        np.testing.assert_array_equal(model.predict_proba(dX).compute(), want.predict_proba(dX).compute())
    three = np.digitize(X[:, 1], [-0.5, 0.5])
    model = fit(three.astype(np.int32))
    assert list(model.classes_) == [0, 1, 2]
    shifted = fit(np.where(binary, 5, 2))
    assert list(shifted.classes_) == [2, 5]
    np.testing.assert_array_equal(shifted.predict_proba(dX).compute(), want.predict_proba(dX).compute())
    np.testing.assert_array_equal(shifted.predict(dX).compute(), np.where(want.predict(dX).compute() == 1, 5, 2))


def test_numeric_labels_get_their_classes_as_the_matrices_are_built(client, monkeypatch):
    """A classifier's numeric training labels make no pass of their own over the partitions
    (da.unique sees the eval set's labels only): each matrix finds their classes in its first
    pass and encodes them as it bins X. -1 / 1 labels (the training set's and an eval set's)
    give the model and eval history of 0 / 1 labels, and classes_ keeps -1 and 1. An eval label
    no training row has fails before the training matrix is sketched."""
    import dask.array

    rng = np.random.default_rng(4)
    X = rng.normal(size=(800, 4)).astype(np.float32)
    binary = X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=800) > 0
    dX, dXe = da.from_array(X[:600], chunks=150), da.from_array(X[600:], chunks=100)

    def fit(y):
        y = np.asarray(y)
        return DaskGBClassifier(n_estimators=4, max_depth=3, device="cpu").fit(
            dX, da.from_array(y[:600], chunks=150), eval_set=[(dXe, da.from_array(y[600:], chunks=100))],
            verbose=False)

    want = fit(binary.astype(np.float32))

    unique, passed = dask.array.unique, []

    def recorded(y, *args, **kwargs):
        passed.append(y.shape[0])
        return unique(y, *args, **kwargs)

    monkeypatch.setattr(dask.array, "unique", recorded)
    signed = fit(np.where(binary, 1, -1).astype(np.int64))
    assert list(signed.classes_) == [-1, 1] and signed.classes_.dtype == np.int64
    np.testing.assert_array_equal(signed.predict_proba(dX).compute(), want.predict_proba(dX).compute())
    assert signed.evals_result() == want.evals_result()
    np.testing.assert_array_equal(signed.predict(dX).compute(), np.where(want.predict(dX).compute() == 1, 1, -1))
    assert passed == [200]
    import daskgb.dask.data

    def no_sketch(*args, **kwargs):
        raise AssertionError("sketched before the eval labels were checked")

    # The client submits the sketch tasks by this name (the function then travels to the workers).
    monkeypatch.setattr(daskgb.dask.data, "_local_summary", no_sketch)
    with pytest.raises(ValueError, match=r"eval_set labels \[3\] are not among the training classes \[-1, 1\]"):
        DaskGBClassifier(n_estimators=1, device="cpu").fit(
            dX, da.from_array(np.where(binary[:600], 1, -1), chunks=150),
            eval_set=[(dXe, da.from_array(np.full(200, 3), chunks=100))], verbose=False)
