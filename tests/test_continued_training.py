"""Continued training (xgb_model=): the model goes on from another's trees and margins, as
XGBoost's does, from a daskgb Booster, a saved file (daskgb's or XGBoost's JSON), in process, on
Dask and through the estimators."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

from exact_data import make_data

PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "device": "cpu"}


def _xy(seed=0, n=1500):
    """Few distinct values a feature (fewer than max_bin: exact cuts, XGBoost's too), missing values."""
    return make_data(seed, "binary:logistic", True, n=n)


def test_going_on_from_a_booster_gives_the_unbroken_model():
    """Without sampling, 6 rounds then 4 more are the 10-round model, tree for tree; the eval
    history holds the new rounds, numbered on."""
    X, y = _xy()
    m = daskgb.QuantileMatrix(X, y)
    whole = daskgb.train(PARAMS, m, 10, verbose_eval=False)
    first = daskgb.train(PARAMS, m, 6, verbose_eval=False)
    history: dict = {}
    more = daskgb.train(PARAMS, m, 4, evals=[(m, "t")], evals_result=history, verbose_eval=False, xgb_model=first)
    assert more.num_boosted_rounds() == 10 and first.num_boosted_rounds() == 6  # the caller's model is unchanged
    for a, b in zip(more.trees, whole.trees):
        np.testing.assert_array_equal(a.value, b.value)
        np.testing.assert_array_equal(a.feature, b.feature)
    np.testing.assert_allclose(more.predict(X), whole.predict(X), rtol=1e-6)
    assert len(history["t"]["logloss"]) == 4


@pytest.mark.parametrize("fmt", ["daskgb", "xgboost"])
def test_going_on_from_a_saved_model_on_another_matrix(fmt, tmp_path):
    """A model saved to a file and a fresh matrix of the same rows (its own cuts: the trees are
    re-expressed in its bins) continue as the in-memory model does."""
    X, y = _xy(seed=1)
    first = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 5, verbose_eval=False)
    path = tmp_path / "m.json"
    first.save_model(path, format=fmt)
    fresh = daskgb.QuantileMatrix(X, y)
    got = daskgb.train(PARAMS, fresh, 3, verbose_eval=False, xgb_model=str(path))
    want = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
    np.testing.assert_allclose(got.predict(X), want.predict(X), rtol=1e-5, atol=1e-6)


def test_going_on_from_xgboosts_model_equals_xgboosts_continuation(tmp_path):
    xgb = pytest.importorskip("xgboost")
    X, y = _xy(seed=2)
    params = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "tree_method": "hist"}
    theirs_first = xgb.train(params, xgb.DMatrix(X, y), 5)
    path = tmp_path / "xgb.json"
    theirs_first.save_model(str(path))
    theirs = xgb.train(params, xgb.DMatrix(X, y), 4, xgb_model=theirs_first)
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 4, verbose_eval=False,
                        xgb_model=str(path))
    assert ours.num_boosted_rounds() == 9
    np.testing.assert_allclose(ours.predict(X, output_margin=True), theirs.predict(xgb.DMatrix(X), output_margin=True),
                               rtol=1e-5, atol=1e-5)


def test_a_threshold_between_bins_is_named():
    X, y = _xy(seed=3)
    first = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    t = first.trees[0]
    node = int(np.flatnonzero(t.left >= 0)[0])
    f = int(t.feature[node])
    values = np.unique(X[:, f][~np.isnan(X[:, f])])
    t.threshold[node] = np.float32((values[len(values) // 2] + values[len(values) // 2 + 1]) / 2)
    first._train_cuts_token = None
    with pytest.raises(ValueError, match=rf"tree 0, node {node}: the split f{f} < .* does not fall on a bin boundary"):
        daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 2, verbose_eval=False, xgb_model=first)


def test_bad_base_models_are_refused():
    X, y = _xy(seed=4)
    m = daskgb.QuantileMatrix(X, y)
    first = daskgb.train(PARAMS, m, 2, verbose_eval=False)
    with pytest.raises(ValueError, match="xgb_model must be"):
        daskgb.train(PARAMS, m, 2, verbose_eval=False, xgb_model=3)
    with pytest.raises(ValueError, match="features"):
        daskgb.train(PARAMS, daskgb.QuantileMatrix(X[:, :3], y), 2, verbose_eval=False, xgb_model=first)
    with pytest.raises(ValueError, match="output"):
        daskgb.train({**PARAMS, "objective": "multi:softprob", "num_class": 3},
                     daskgb.QuantileMatrix(X, (y + (X[:, 2] > 0)).astype(np.float32)), 2, verbose_eval=False,
                     xgb_model=first)
    with pytest.raises(ValueError, match="resume"):
        daskgb.train(PARAMS, m, 2, verbose_eval=False, xgb_model=first, resume=True, checkpoint_dir="x")


def test_the_estimators_go_on_from_a_model():
    X, y = _xy(seed=5)
    first = daskgb.GBClassifier(n_estimators=4, max_depth=3, learning_rate=0.3).fit(X, y)
    more = daskgb.GBClassifier(n_estimators=3, max_depth=3, learning_rate=0.3).fit(X, y, xgb_model=first)
    assert more.get_booster().num_boosted_rounds() == 7
    whole = daskgb.GBClassifier(n_estimators=7, max_depth=3, learning_rate=0.3).fit(X, y)
    np.testing.assert_allclose(more.predict_proba(X), whole.predict_proba(X), rtol=1e-5)


def test_dask_train_goes_on_from_a_model():
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import daskgb.dask as dgb

    X, y = _xy(seed=6)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        dm = dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=(750, X.shape[1])), da.from_array(y, chunks=750))
        first = dgb.train(client, PARAMS, dm, 4, verbose_eval=False)["booster"]
        more = dgb.train(client, PARAMS, dm, 3, verbose_eval=False, xgb_model=first)["booster"]
        whole = dgb.train(client, PARAMS, dm, 7, verbose_eval=False)["booster"]
        assert more.num_boosted_rounds() == 7
        np.testing.assert_allclose(more.predict(X), whole.predict(X), rtol=1e-6)
        est = daskgb.DaskGBRegressor(n_estimators=2, max_depth=3, client=client)
        est.fit(da.from_array(X, chunks=(750, X.shape[1])), da.from_array(y, chunks=750), xgb_model=first)
        assert est.get_booster().num_boosted_rounds() == 6


def test_the_estimators_take_base_margins_as_xgboosts_do():
    xgb = pytest.importorskip("xgboost")
    X, y = _xy(seed=7)
    Xv, yv = _xy(seed=8, n=400)
    rng = np.random.default_rng(7)
    margin, margin_v = rng.normal(size=len(y)).astype(np.float32), rng.normal(size=len(yv)).astype(np.float32)
    kw = dict(n_estimators=5, max_depth=3, learning_rate=0.3)
    ours = daskgb.GBClassifier(**kw).fit(X, y, base_margin=margin, eval_set=[(Xv, yv)], base_margin_eval_set=[margin_v])
    theirs = xgb.XGBClassifier(**kw, tree_method="hist").fit(X, y, base_margin=margin, eval_set=[(Xv, yv)],
                                                              base_margin_eval_set=[margin_v], verbose=False)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["logloss"],
                               theirs.evals_result()["validation_0"]["logloss"], rtol=1e-5)
    with pytest.raises(ValueError, match="base_margin_eval_set has 2 entries"):
        daskgb.GBClassifier(**kw).fit(X, y, eval_set=[(Xv, yv)], base_margin_eval_set=[margin_v, margin_v])


def test_going_on_from_a_model_on_data_of_other_category_codes():
    """As XGBoost's run_recoding: going on from a model on data whose categories are coded in
    another order recodes the model's categorical splits to the data's codes, so the model equals
    the unbroken one and predicts the same on either coding."""
    pytest.importorskip("xgboost")
    from xgboost.testing.ordinal import make_recoded

    enc, reenc, y, _, _ = make_recoded("cpu", n_features=8)
    kw = dict(enable_categorical=True, device="cpu")
    first = daskgb.GBRegressor(n_estimators=2, **kw).fit(enc, y, eval_set=[(reenc, y)], verbose=False)
    then = daskgb.GBRegressor(n_estimators=2, **kw).fit(reenc, y, xgb_model=first.get_booster(), eval_set=[(enc, y)],
                                                        verbose=False)
    unbroken = daskgb.GBRegressor(n_estimators=4, **kw).fit(enc, y, eval_set=[(reenc, y)], verbose=False)
    np.testing.assert_allclose(first.evals_result()["validation_0"]["rmse"] + then.evals_result()["validation_0"]["rmse"],
                               unbroken.evals_result()["validation_0"]["rmse"], rtol=1e-6)
    np.testing.assert_allclose(then.predict(reenc), then.predict(enc), rtol=1e-6)
    np.testing.assert_allclose(then.predict(enc), unbroken.predict(enc), rtol=1e-6)
