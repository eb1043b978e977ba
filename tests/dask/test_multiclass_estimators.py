"""Multiclass and the Dask estimators on a 2-worker LocalCluster: the same models as in process."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from placement import on_workers  # noqa: E402


def multiclass_data(n=1500, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    Z = np.nan_to_num(X)
    s = Z[:, 0] - 0.5 * Z[:, 1] * Z[:, 2] + rng.normal(size=n)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1])).astype(np.float32)
    return X, y


def test_multiclass_train_equals_in_process(client):
    X, y = multiclass_data(k=4)
    Xv, yv = multiclass_data(n=500, k=4, seed=1)
    w = np.random.default_rng(3).uniform(0.5, 2, y.size).astype(np.float32)
    chunks, placement = [300, 700, 500], [0, 1, 0]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement),
                                    weight=on_workers(client, w, chunks, placement))
    dvalid = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [500], [1]), on_workers(client, yv, [500], [1]),
                                    ref=dtrain)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 4, "device": "cpu",
              "eval_metric": ["mlogloss", "merror", "auc", "aucpr"]}
    out = dgb.train(client, params, dtrain, 8, evals=[(dvalid, "v")], verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y, weight=w)
    res: dict = {}
    local = daskgb.train(params, m, 8, evals=[(daskgb.QuantileMatrix(Xv, yv, ref=m), "v")], evals_result=res,
                         verbose_eval=False)
    b = out["booster"]
    assert b.tree_info == local.tree_info
    np.testing.assert_allclose(b.predict(X, output_margin=True), local.predict(X, output_margin=True), atol=1e-5)
    for metric in ("mlogloss", "merror", "auc", "aucpr"):  # exact over all rows, not an average of the workers'
        np.testing.assert_allclose(out["history"]["v"][metric], res["v"][metric], rtol=1e-6)
    proba = dgb.predict(client, b, on_workers(client, Xv, [200, 300], [0, 1]))
    assert proba.shape == (500, 4)
    np.testing.assert_allclose(proba.compute(), local.predict(Xv), atol=1e-5)
    classes = dgb.predict(client, daskgb.Booster.from_dict({**b.to_dict(), "params": {**params,
                                                            "objective": "multi:softmax"}}),
                          da.from_array(Xv, chunks=250))
    assert classes.shape == (500,)
    np.testing.assert_array_equal(classes.compute(), local.predict(Xv).argmax(axis=1))


def test_classifier_string_labels_equal_in_process(client):
    X, y = multiclass_data(k=3, seed=5)
    names = np.array(["high", "low", "mid"], dtype=object)[y.astype(int)]
    chunks, placement = [900, 600], [0, 1]
    Xd = on_workers(client, X, chunks, placement)
    yd = on_workers(client, names, chunks, placement)
    clf = daskgb.DaskGBClassifier(client=client, n_estimators=6, max_depth=3, device="cpu")
    clf.fit(Xd, yd, eval_set=[(Xd, yd)])
    local = daskgb.GBClassifier(n_estimators=6, max_depth=3, device="cpu").fit(X, names, eval_set=[(X, names)])
    assert list(clf.classes_) == ["high", "low", "mid"] == list(local.classes_)
    np.testing.assert_allclose(clf.predict_proba(Xd).compute(), local.predict_proba(X), atol=1e-5)
    np.testing.assert_array_equal(clf.predict(Xd).compute(), local.predict(X))
    np.testing.assert_allclose(clf.evals_result()["validation_0"]["mlogloss"],
                               local.evals_result()["validation_0"]["mlogloss"], rtol=1e-6)
    assert clf.score(Xd, yd) == pytest.approx(local.score(X, names))


def test_binary_classifier_and_regressor_equal_in_process(client):
    X, y = multiclass_data(k=2, seed=7)
    chunks, placement = [700, 800], [1, 0]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    clf = daskgb.DaskGBClassifier(client=client, n_estimators=5, max_depth=3, device="cpu").fit(Xd, yd)
    local = daskgb.GBClassifier(n_estimators=5, max_depth=3, device="cpu").fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(Xd).compute(), local.predict_proba(X), atol=1e-5)
    np.testing.assert_array_equal(clf.predict(Xd).compute(), local.predict(X))
    target = (np.nan_to_num(X[:, 0]) * 2 + y).astype(np.float32)
    td = on_workers(client, target, chunks, placement)
    reg = daskgb.DaskGBRegressor(client=client, n_estimators=5, max_depth=3, device="cpu").fit(Xd, td)
    local_reg = daskgb.GBRegressor(n_estimators=5, max_depth=3, device="cpu").fit(X, target)
    np.testing.assert_allclose(reg.predict(Xd).compute(), local_reg.predict(X), atol=1e-5)
    assert reg.score(Xd, td) == pytest.approx(local_reg.score(X, target), rel=1e-6)


def test_estimators_pickle_and_clone(client):
    """A fitted Dask estimator pickles without its client (it finds the default one where it is
    loaded) and predicts the same; clone gives an unfitted twin with the same parameters."""
    import pickle

    from sklearn.base import clone

    X, y = multiclass_data(k=3, seed=9)
    chunks, placement = [700, 800], [0, 1]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    clf = daskgb.DaskGBClassifier(client=client, n_estimators=4, max_depth=3, device="cpu").fit(Xd, yd,
                                                                                                 verbose=False)
    loaded = pickle.loads(pickle.dumps(clf))
    assert loaded.client is None and clf.client is client
    np.testing.assert_array_equal(loaded.predict_proba(Xd).compute(), clf.predict_proba(Xd).compute())
    twin = clone(clf)
    assert twin.get_params() == clf.get_params() and twin.client is client and not hasattr(twin, "_Booster")
    local = daskgb.GBClassifier(n_estimators=4, max_depth=3, device="cpu").fit(X, y)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(local)).predict_proba(X), local.predict_proba(X))


def test_a_parameter_search_on_a_matrix_quantised_once(client, monkeypatch):
    """DaskGB estimators fit on a DaskQuantileMatrix: a scikit-learn parameter search (clone,
    set_params, fit per setting) quantises the rows once, and each model is the one fitting
    the arrays would train."""
    from sklearn.base import clone
    from sklearn.model_selection import ParameterGrid

    X, y = multiclass_data(k=3, seed=11)
    chunks, placement = [700, 800], [0, 1]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    dvalid = dgb.DaskQuantileMatrix(client, Xd[:500], yd[:500], ref=dtrain)
    built = []
    real_init = dgb.DaskQuantileMatrix.__init__
    monkeypatch.setattr(dgb.DaskQuantileMatrix, "__init__",
                        lambda self, *a, **k: built.append(1) or real_init(self, *a, **k))
    base = daskgb.DaskGBClassifier(client=client, n_estimators=3, device="cpu")
    scores = {}
    for params in ParameterGrid({"max_depth": [2, 4], "learning_rate": [0.3, 0.1]}):
        model = clone(base).set_params(**params).fit(dtrain, eval_set=[(dvalid, None)], verbose=False)
        scores[tuple(sorted(params.items()))] = model.evals_result()["validation_0"]["mlogloss"][-1]
    assert built == [] and len(scores) == 4
    best = dict(min(scores, key=scores.get))
    model = clone(base).set_params(**best).fit(dtrain, verbose=False)
    monkeypatch.undo()
    direct = clone(base).set_params(**best).fit(Xd, yd, verbose=False)
    np.testing.assert_allclose(model.predict_proba(Xd).compute(), direct.predict_proba(Xd).compute(), atol=1e-6)
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    with pytest.raises(ValueError, match="carries its labels"):
        clone(base).fit(dtrain, yd)


def test_grid_search_cv_on_a_matrix_quantised_once(client, monkeypatch):
    """scikit-learn's GridSearchCV on a DaskQuantileMatrix: each fold's rows are taken from
    the quantised matrix on the workers (m[indices]), never quantised again; each fold's model
    equals one trained on a matrix built from those rows with the same cuts; the best model
    is refitted on the whole matrix."""
    from sklearn.model_selection import GridSearchCV, KFold

    X, y = multiclass_data(k=3, seed=12)
    chunks, placement = [700, 800], [0, 1]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    assert dtrain.shape == (1500, X.shape[1]) and len(dtrain) == 1500
    built = []
    real_init = dgb.DaskQuantileMatrix.__init__
    monkeypatch.setattr(dgb.DaskQuantileMatrix, "__init__",
                        lambda self, *a, **k: built.append(1) or real_init(self, *a, **k))
    base = daskgb.DaskGBClassifier(client=client, n_estimators=3, device="cpu")
    folds = KFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(base, {"max_depth": [2, 4], "learning_rate": [0.3, 0.1]}, cv=folds)
    search.fit(dtrain, verbose=False)
    assert built == [], "a fold quantised its rows again"
    monkeypatch.undo()
    assert len(search.cv_results_["mean_test_score"]) == 4
    assert 0.4 < search.best_score_ <= 1.0
    assert search.best_estimator_.get_booster().num_boosted_rounds() == 3

    # One fold by hand: the split's model equals one trained on the same rows quantised with
    # the same cuts, and its score is the accuracy of its predictions on the held-out rows.
    train_idx, test_idx = next(folds.split(np.zeros(1500)))
    params = dict(search.best_params_)
    sub = daskgb.DaskGBClassifier(client=client, n_estimators=3, device="cpu", **params).fit(dtrain[train_idx],
                                                                                             verbose=False)
    def in_matrix_order(idx):
        """take() keeps each worker's rows in the order given, workers in order (here: rank 0
        holds rows 0-699)."""
        return np.concatenate([idx[idx < 700], idx[idx >= 700]])

    rows = in_matrix_order(train_idx)
    split = [int((rows < 700).sum()), int((rows >= 700).sum())]
    same = dgb.DaskQuantileMatrix(client, on_workers(client, X[rows], split, [0, 1]),
                                  on_workers(client, y[rows], split, [0, 1]), ref=dtrain)
    again = daskgb.DaskGBClassifier(client=client, n_estimators=3, device="cpu", **params).fit(same, verbose=False)
    assert json.dumps(sub.get_booster().to_dict()) == json.dumps(again.get_booster().to_dict())
    held_out = dtrain[test_idx]
    accuracy = float((sub.predict(held_out).compute() == y[in_matrix_order(test_idx)]).mean())
    assert sub.score(held_out) == pytest.approx(accuracy)
