"""multi:softprob and multi:softmax: parity with xgboost hist, metrics, the intercept, save/load, estimators."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import daskgb

xgb = pytest.importorskip("xgboost")

OBJECTIVES = ["multi:softprob", "multi:softmax"]
METRICS = ["mlogloss", "merror", "auc", "aucpr"]


def make_data(seed: int, n: int = 600, k: int = 4, with_nan: bool = False):
    """Exact-cut features (quarter steps, <= ~60 values each) and k classes from a noisy score."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[:, 1] = rng.integers(0, 3, n)
    if with_nan:
        X[rng.random(X.shape) < 0.15] = np.nan
    Z = np.nan_to_num(X)
    s = Z[:, 0] + 0.5 * Z[:, 1] * Z[:, 2] + rng.normal(size=n)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1])).astype(np.float32)
    return X, y


# reg_lambda = reg_alpha = 0 is left out on purpose, as in test_parity_xgboost.py: there an
# unbounded leaf weight -G/H makes near-threshold splits depend on the last bit of sums.
GRID = list(itertools.product([1, 3, 6], [1.0, 5.0], [0.0, 0.5], [0.0, 1.0], [False, True], [False, True]))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_parity_with_xgboost_hist(objective):
    failures = []
    # A fixed random third of the grid for softprob and another twelfth for softmax (same trees).
    order = np.random.default_rng(0).permutation(len(GRID))
    picked = order[:32] if objective == "multi:softprob" else order[32:40]
    for depth, lam, alpha, mcw, with_nan, weighted in [GRID[i] for i in picked]:
        X, y = make_data(depth * 7 + int(lam) + with_nan, with_nan=with_nan)
        w = np.random.default_rng(1).uniform(0.2, 2.0, y.size).astype(np.float32) if weighted else None
        params = dict(objective=objective, num_class=4, max_depth=depth, reg_lambda=lam, reg_alpha=alpha,
                      min_child_weight=mcw, eta=0.3, eval_metric=METRICS)
        theirs_log: dict = {}
        dx = xgb.DMatrix(X, y, weight=w)
        theirs = xgb.train({**params, "tree_method": "hist"}, dx, 8, evals=[(dx, "t")], evals_result=theirs_log,
                           verbose_eval=False)
        ours_log: dict = {}
        d = daskgb.QuantileMatrix(X, y, weight=w)
        ours = daskgb.train({**params, "device": "cpu"}, d, 8, evals=[(d, "t")], evals_result=ours_log,
                            verbose_eval=False)
        case = (depth, lam, alpha, mcw, with_nan, weighted)
        margin_err = np.abs(theirs.predict(xgb.DMatrix(X), output_margin=True) - ours.predict(X, output_margin=True))
        if margin_err.max() > 1e-5:
            failures.append((case, "margin", float(margin_err.max())))
        np.testing.assert_allclose(ours.predict(X), theirs.predict(xgb.DMatrix(X)), atol=1e-5)
        for m in METRICS:
            # AUC ranks near-equal probabilities, which one-ulp differences can reorder.
            tol = 1e-4 if m.startswith("auc") else 1e-6
            if abs(theirs_log["t"][m][-1] - ours_log["t"][m][-1]) > tol:
                failures.append((case, m, theirs_log["t"][m][-1], ours_log["t"][m][-1]))
    assert not failures, failures


def test_intercept_is_xgboosts():
    """The default base margins: log of each class's weighted frequency (+1e-6), centred."""
    X, y = make_data(3, n=900, k=5)
    y[y == 4] = 3  # an empty class: its frequency is 0, its margin log(1e-6) minus the mean
    w = np.random.default_rng(2).uniform(0.1, 3.0, y.size).astype(np.float32)
    for weight in (None, w):
        params = {"objective": "multi:softprob", "num_class": 5, "eta": 1e-30, "max_depth": 1}
        theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, weight=weight), 1)
        ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y, weight=weight), 1)
        np.testing.assert_allclose(ours.predict(X[:1], output_margin=True)[0],
                                   theirs.predict(xgb.DMatrix(X[:1]), output_margin=True)[0], rtol=0, atol=5e-7)


def test_softmax_outputs_class_and_trains_like_softprob():
    X, y = make_data(11)
    d = daskgb.QuantileMatrix(X, y)
    prob = daskgb.train({"objective": "multi:softprob", "num_class": 4, "device": "cpu"}, d, 5)
    cls = daskgb.train({"objective": "multi:softmax", "num_class": 4, "device": "cpu"}, d, 5)
    p = prob.predict(X)
    assert p.shape == (X.shape[0], 4)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(cls.predict(X), p.argmax(axis=1).astype(np.float32))
    np.testing.assert_array_equal(cls.predict(X, output_margin=True), prob.predict(X, output_margin=True))


def test_iteration_range_save_load_and_binned_prediction(tmp_path):
    X, y = make_data(5, with_nan=True)
    d = daskgb.QuantileMatrix(X, y)
    b = daskgb.train({"objective": "multi:softprob", "num_class": 4, "max_depth": 4, "device": "cpu"}, d, 6)
    assert b.num_boosted_rounds() == 6 and len(b.trees) == 24
    assert b.tree_info == [0, 1, 2, 3] * 6
    X2 = X[:50]
    part = b.predict(X2, iteration_range=(0, 2), output_margin=True)
    theirs = xgb.train({"objective": "multi:softprob", "num_class": 4, "max_depth": 4, "tree_method": "hist"},
                       xgb.DMatrix(X, y), 6)
    np.testing.assert_allclose(part, theirs.predict(xgb.DMatrix(X2), iteration_range=(0, 2), output_margin=True),
                               atol=1e-5)
    np.testing.assert_allclose(b.predict(d), b.predict(X), atol=1e-6)
    b.save_model(tmp_path / "m.json")
    loaded = daskgb.Booster().load_model(tmp_path / "m.json")
    assert loaded.tree_info == b.tree_info and loaded.base_score == b.base_score
    np.testing.assert_array_equal(loaded.predict(X), b.predict(X))


def test_base_margin_per_class():
    X, y = make_data(8)
    bm = np.random.default_rng(0).normal(size=(y.size, 4)).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 3}
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, base_margin=bm), 5)
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y, base_margin=bm), 5)
    np.testing.assert_allclose(ours.predict(X, base_margin=bm),
                               theirs.predict(xgb.DMatrix(X, base_margin=bm)), atol=1e-5)


def test_early_stopping_stops_where_xgboost_does():
    X, y = make_data(21, n=1200)
    Xv, yv = make_data(22, n=400)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 6, "eta": 0.5, "eval_metric": "merror"}
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), 200,
                       evals=[(xgb.DMatrix(Xv, yv), "v")], early_stopping_rounds=5, verbose_eval=False)
    d = daskgb.QuantileMatrix(X, y)
    ours = daskgb.train({**params, "device": "cpu"}, d, 200, evals=[(daskgb.QuantileMatrix(Xv, yv, ref=d), "v")],
                        early_stopping_rounds=5, verbose_eval=False)
    assert ours.best_iteration == theirs.best_iteration
    assert ours.num_boosted_rounds() == theirs.num_boosted_rounds()
    # Our predict defaults to the best trees (as XGBoost's estimators do); its Booster needs the range.
    best = (0, theirs.best_iteration + 1)
    np.testing.assert_allclose(ours.predict(Xv), theirs.predict(xgb.DMatrix(Xv), iteration_range=best), atol=1e-5)


def test_custom_multiclass_objective_matches_builtin():
    """A user's softmax gradient, returned as (n, K) arrays, grows the built-in objective's trees."""
    X, y = make_data(4)
    k = 4

    def softprob(margin, dtrain):
        labels = dtrain.get_label().astype(int)
        e = np.exp(margin - margin.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        grad = p - np.eye(k)[labels]
        return grad, np.maximum(2 * p * (1 - p), 1e-16)

    d = daskgb.QuantileMatrix(X, y)
    base = {"num_class": k, "max_depth": 3, "base_score": 0.0, "device": "cpu"}
    custom = daskgb.train(base, d, 5, obj=softprob)
    builtin = daskgb.train({**base, "objective": "multi:softprob"}, d, 5)
    assert custom.predict(X, output_margin=True).shape == (X.shape[0], k)
    np.testing.assert_allclose(custom.predict(X, output_margin=True), builtin.predict(X, output_margin=True),
                               atol=1e-4)


def test_bad_input_is_named():
    X, y = make_data(1)
    d = daskgb.QuantileMatrix(X, y)
    with pytest.raises(ValueError, match="num_class >= 2"):
        daskgb.train({"objective": "multi:softprob"}, d, 1)
    with pytest.raises(ValueError, match=r"labels in \[0, num_class=3\)"):
        daskgb.train({"objective": "multi:softprob", "num_class": 3}, d, 1)
    with pytest.raises(ValueError, match="num_class=4 is for multi"):
        daskgb.train({"objective": "reg:squarederror", "num_class": 4}, d, 1)
    with pytest.raises(ValueError, match="single-output"):
        daskgb.train({"objective": "multi:softprob", "num_class": 4, "eval_metric": "logloss"}, d, 1)
    with pytest.raises(ValueError, match="multiclass models"):
        daskgb.train({"objective": "binary:logistic", "eval_metric": "mlogloss"},
                     daskgb.QuantileMatrix(X, (y > 1).astype(np.float32)), 1)
    with pytest.raises(ValueError, match=r"needs \(n_rows, 4\) margins"):
        daskgb.train({"objective": "multi:softprob", "num_class": 4},
                     daskgb.QuantileMatrix(X, y, base_margin=np.zeros(600, np.float32)), 1)
    y_frac = y.copy()
    y_frac[0] = 0.5
    with pytest.raises(ValueError, match="integer labels"):
        daskgb.train({"objective": "multi:softmax", "num_class": 4}, daskgb.QuantileMatrix(X, y_frac), 1)


def test_classifier_string_labels_and_probabilities():
    X, y = make_data(9, n=800, k=3)
    names = np.array(["setosa", "versicolor", "virginica"])[y.astype(int)]
    clf = daskgb.GBClassifier(n_estimators=10, max_depth=4, device="cpu")
    clf.fit(X[:600], names[:600], eval_set=[(X[600:], names[600:])])
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"] and clf.n_classes_ == 3
    proba = clf.predict_proba(X[600:])
    assert proba.shape == (200, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(clf.predict(X[600:]), clf.classes_[proba.argmax(axis=1)])
    assert set(clf.evals_result()["validation_0"]) == {"mlogloss"}
    assert clf.score(X[600:], names[600:]) > 0.5
    theirs = xgb.XGBClassifier(n_estimators=10, max_depth=4, tree_method="hist").fit(X[:600], y[:600])
    np.testing.assert_allclose(proba, theirs.predict_proba(X[600:]), atol=1e-5)
    with pytest.raises(ValueError, match="not among the training classes"):
        clf.fit(X[:600], names[:600], eval_set=[(X[600:], np.full(200, "rose"))])


@pytest.mark.gpu
def test_cuda_grows_the_cpu_trees():
    from test_backends_same_trees import assert_same_trees

    X, y = make_data(13, n=3000, k=5, with_nan=True)
    w = np.random.default_rng(4).uniform(0.5, 2, y.size).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 5, "max_depth": 6, "eval_metric": METRICS}
    models, logs = [], []
    for device in ("cpu", "cuda"):
        d = daskgb.QuantileMatrix(X, y, weight=w, device=device)
        log: dict = {}
        models.append(daskgb.train({**params, "device": device}, d, 10, evals=[(d, "t")], evals_result=log))
        logs.append(log)
    assert_same_trees(*models)
    np.testing.assert_allclose(models[0].predict(X), models[1].predict(X), atol=1e-5)
    for m in METRICS:
        np.testing.assert_allclose(logs[0]["t"][m], logs[1]["t"][m], rtol=1e-5)
