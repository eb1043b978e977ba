"""num_parallel_tree and the random forest estimators (GBRFRegressor, GBRFClassifier) against XGBoost.

With sampling off, a round's num_parallel_tree trees of a group grow from the same gradient
pairs, each with the learning rate divided among them: on exact-cut data the model equals
XGBoost hist's tree for tree, in XGBoost's order (a round's trees of group 0, then group
1's, ...), and every reading of the model by rounds (iteration_range, best_iteration, pred_leaf,
SHAP, save and load, XGBoost's JSON) counts a round as all of its trees.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
from daskgb.callback import EarlyStopping
from exact_data import make_data, xgb_trees

xgb = pytest.importorskip("xgboost")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
KINDS = {"regression": {"objective": "reg:squarederror"},
         "binary": {"objective": "binary:logistic"},
         "multiclass": {"objective": "multi:softprob", "num_class": 3}}


def _xy(kind: str, seed: int = 0, n: int = 600):
    """Exact-cut features (<= ~60 values each, missing values) and the kind's labels."""
    X, y = make_data(seed, "binary:logistic" if kind == "binary" else "reg:squarederror", True, n=n)
    if kind == "multiclass":
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.float32)
    return X, y


def _on(device, *arrays):
    if device == "cuda":
        import cupy

        return [cupy.asarray(a) for a in arrays]
    return list(arrays)


def _margin(booster, X, **kw):
    return np.asarray(booster.predict(X, output_margin=True, **kw))


def assert_trees_equal_xgboosts(bx, ours, label=""):
    trees_x = xgb_trees(bx)
    assert len(trees_x) == len(ours.trees), label
    info = json.loads(bx.save_raw("json"))["learner"]["gradient_booster"]["model"]["tree_info"]
    assert ours.tree_info == info, label
    for i, (tx, to) in enumerate(zip(trees_x, ours.trees)):
        assert tx["left_children"] == to.left.tolist(), f"{label}: tree {i} differs in shape"
        internal = to.left >= 0
        np.testing.assert_array_equal(np.asarray(tx["split_indices"])[internal], to.feature[internal],
                                      err_msg=f"{label}: tree {i} split features")
        np.testing.assert_allclose(np.asarray(tx["split_conditions"], dtype=np.float32),
                                   np.where(internal, to.threshold, to.value), rtol=0, atol=1e-5,
                                   err_msg=f"{label}: tree {i} thresholds and leaf values")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("npt", [2, 3])
@pytest.mark.parametrize("kind", list(KINDS))
def test_parity_with_xgboost_hist(kind, npt, device):
    X, y = _xy(kind, seed=npt)
    params = {**KINDS[kind], "max_depth": 4, "eta": 0.3, "num_parallel_tree": npt, "base_score": 0.5}
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 4)
    ours = daskgb.train({**params, "device": device}, daskgb.QuantileMatrix(*_on(device, X, y)), 4,
                        verbose_eval=False)
    assert ours.num_boosted_rounds() == bx.num_boosted_rounds() == 4
    assert len(ours.trees) == 4 * npt * (3 if kind == "multiclass" else 1)
    assert_trees_equal_xgboosts(bx, ours, f"{kind} npt={npt}")
    np.testing.assert_allclose(_margin(ours, X), bx.predict(xgb.DMatrix(X), output_margin=True), rtol=0, atol=1e-5)
    # Without sampling a group's parallel trees are one tree, each with eta / npt on its leaves.
    k = 3 if kind == "multiclass" else 1
    first, second = ours.trees[0], ours.trees[1]
    np.testing.assert_array_equal(first.value, second.value)
    single = daskgb.train({**params, "num_parallel_tree": 1, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 1,
                          verbose_eval=False)
    np.testing.assert_allclose(first.value * npt, single.trees[0].value, rtol=1e-6)
    assert ours.tree_info[: k * npt] == [g for g in range(k) for _ in range(npt)]


@pytest.mark.parametrize("objective", ["reg:absoluteerror", "reg:quantileerror"])
def test_refitted_leaves_are_xgboosts(objective):
    """Each parallel tree's leaves refitted to the residuals of the round's starting margins, times eta / npt."""
    X, y = _xy("regression", seed=4)
    params = {"objective": objective, "max_depth": 3, "eta": 0.5, "num_parallel_tree": 3}
    if objective == "reg:quantileerror":
        params["quantile_alpha"] = [0.3, 0.8]
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 3)
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    assert_trees_equal_xgboosts(bx, ours, objective)
    np.testing.assert_allclose(_margin(ours, X), bx.predict(xgb.DMatrix(X), output_margin=True), rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_eval_sets_rounds_and_early_stopping_as_xgboost(kind):
    X, y = _xy(kind, seed=7, n=900)
    Xt, yt, Xv, yv = X[:600], y[:600], X[600:], y[600:]
    params = {**KINDS[kind], "max_depth": 5, "eta": 0.6, "num_parallel_tree": 2, "min_child_weight": 0}
    dt, dv = xgb.DMatrix(Xt, yt), xgb.DMatrix(Xv, yv)
    theirs_log: dict = {}
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dt, 40, evals=[(dt, "t"), (dv, "v")],
                   evals_result=theirs_log, early_stopping_rounds=3, verbose_eval=False)
    mt = daskgb.QuantileMatrix(Xt, yt)
    mv = daskgb.QuantileMatrix(Xv, yv, ref=mt)
    ours_log: dict = {}
    ours = daskgb.train({**params, "device": "cpu"}, mt, 40, evals=[(mt, "t"), (mv, "v")], evals_result=ours_log,
                        early_stopping_rounds=3, verbose_eval=False)
    assert bx.best_iteration < 37, "early stopping must stop this fit"
    assert ours.best_iteration == bx.best_iteration
    assert ours.num_boosted_rounds() == bx.num_boosted_rounds()
    for name in ("t", "v"):
        for metric, values in theirs_log[name].items():
            np.testing.assert_allclose(ours_log[name][metric], values, rtol=1e-5, atol=1e-6)
    # Prediction stops at best_iteration, as XGBoost's estimators do; any range of rounds.
    best = bx.best_iteration + 1
    np.testing.assert_allclose(_margin(ours, Xv), bx.predict(dv, output_margin=True, iteration_range=(0, best)),
                               atol=1e-5)
    for rng in [(1, 3), (0, 1), (2, best)]:
        np.testing.assert_allclose(_margin(ours, Xv, iteration_range=rng),
                                   bx.predict(dv, output_margin=True, iteration_range=rng), atol=1e-5)
    # save_best keeps the rounds up to the best, all of each round's trees.
    kept = daskgb.train({**params, "device": "cpu"}, mt, 40, evals=[(mv, "v")], verbose_eval=False,
                        callbacks=[EarlyStopping(3, save_best=True)])
    assert kept.num_boosted_rounds() == best and len(kept.trees) == best * ours.trees_per_round
    np.testing.assert_allclose(_margin(kept, Xv), _margin(ours, Xv), rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["regression", "multiclass"])
def test_leaves_contributions_and_importance_as_xgboost(kind, tmp_path):
    X, y = _xy(kind, seed=9)
    params = {**KINDS[kind], "max_depth": 3, "num_parallel_tree": 3, "subsample": 0.7, "colsample_bynode": 0.6,
              "seed": 2}
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    assert ours.num_boosted_rounds() == 3
    ours.save_model(tmp_path / "m.json", format="xgboost")
    bx = xgb.Booster(model_file=str(tmp_path / "m.json"))
    dx = xgb.DMatrix(X)
    leaves = ours.predict(X, pred_leaf=True)
    assert leaves.shape == (X.shape[0], len(ours.trees))
    np.testing.assert_array_equal(leaves, bx.predict(dx, pred_leaf=True))
    per_round = ours.trees_per_round  # a round's columns (XGBoost's leaves take whole models only)
    np.testing.assert_array_equal(ours.predict(X, pred_leaf=True, iteration_range=(1, 2)),
                                  leaves[:, per_round : 2 * per_round])
    contribs = ours.predict(X, pred_contribs=True)
    np.testing.assert_allclose(contribs.sum(axis=-1), _margin(ours, X), atol=1e-4)
    np.testing.assert_allclose(contribs, bx.predict(dx, pred_contribs=True), atol=1e-4)
    part = ours.predict(X, pred_contribs=True, iteration_range=(0, 2))
    np.testing.assert_allclose(part.sum(axis=-1), _margin(ours, X, iteration_range=(0, 2)), atol=1e-4)
    for kind_ in ("weight", "gain", "total_gain", "cover"):
        theirs = bx.get_score(importance_type=kind_)
        mine = ours.get_score(importance_type=kind_)
        assert mine.keys() == theirs.keys()
        np.testing.assert_allclose([mine[f] for f in theirs], list(theirs.values()), rtol=1e-4)


def test_sampling_draws_each_parallel_tree_its_own_rows_and_columns():
    X, y = _xy("regression", seed=3)
    params = {"max_depth": 4, "num_parallel_tree": 4, "subsample": 0.6, "colsample_bytree": 0.8, "seed": 1,
              "device": "cpu"}
    b = daskgb.train(params, daskgb.QuantileMatrix(X, y), 2, verbose_eval=False)
    trees = [json.dumps(t.to_dict()) for t in b.trees]
    assert len(set(trees)) == len(trees)  # every tree of a round is a tree of its own
    # And gradient-based sampling too.
    b = daskgb.train({**params, "sampling_method": "gradient_based"}, daskgb.QuantileMatrix(X, y), 2,
                     verbose_eval=False)
    assert len({json.dumps(t.to_dict()) for t in b.trees}) == len(b.trees)
    # One tree a round is the model it was before parallel trees: its draws are keyed as they were.
    one = daskgb.train({**params, "num_parallel_tree": 1}, daskgb.QuantileMatrix(X, y), 2, verbose_eval=False)
    again = daskgb.train({k: v for k, v in params.items() if k != "num_parallel_tree"}, daskgb.QuantileMatrix(X, y),
                         2, verbose_eval=False)
    assert [t.to_dict() for t in one.trees] == [t.to_dict() for t in again.trees]


def test_save_load_and_xgboost_json_both_ways(tmp_path):
    X, y = _xy("multiclass", seed=5)
    params = {**KINDS["multiclass"], "max_depth": 3, "num_parallel_tree": 2, "subsample": 0.8, "seed": 4}
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    ours.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["version"] == 2 and doc["num_parallel_tree"] == 2
    back = daskgb.Booster().load_model(tmp_path / "m.json")
    assert back.num_boosted_rounds() == 3 and back.tree_info == ours.tree_info
    np.testing.assert_array_equal(back.predict(X), ours.predict(X))
    # A model of one tree a round keeps the first layout, which earlier daskgb reads.
    plain = daskgb.train({"max_depth": 2}, daskgb.QuantileMatrix(X, y), 2, verbose_eval=False)
    assert plain.to_dict()["version"] == 1 and "num_parallel_tree" not in plain.to_dict()

    # Written as XGBoost's JSON, XGBoost reads it and predicts the same, by rounds too.
    ours.save_model(tmp_path / "x.json", format="xgboost")
    model = json.loads((tmp_path / "x.json").read_text())["learner"]["gradient_booster"]["model"]
    assert model["gbtree_model_param"]["num_parallel_tree"] == "2" and model["iteration_indptr"] == [0, 6, 12, 18]
    bx = xgb.Booster(model_file=str(tmp_path / "x.json"))
    assert bx.num_boosted_rounds() == 3
    dx = xgb.DMatrix(X)
    np.testing.assert_allclose(bx.predict(dx), ours.predict(X), atol=1e-6)
    np.testing.assert_allclose(bx.predict(dx, iteration_range=(1, 3)), ours.predict(X, iteration_range=(1, 3)),
                               atol=1e-6)

    # XGBoost's own forest read here.
    theirs = xgb.train({**params, "subsample": 0.7, "tree_method": "hist"}, xgb.DMatrix(X, y), 3)
    theirs.save_model(str(tmp_path / "t.json"))
    read = daskgb.Booster().load_model(tmp_path / "t.json")
    assert read.params.num_parallel_tree == 2 and read.num_boosted_rounds() == 3
    np.testing.assert_allclose(read.predict(X), theirs.predict(dx), atol=1e-6)
    np.testing.assert_allclose(read.predict(X, iteration_range=(2, 3)), theirs.predict(dx, iteration_range=(2, 3)),
                               atol=1e-6)


def test_an_xgboost_model_whose_rounds_differ_is_refused(tmp_path):
    X, y = _xy("regression", seed=6)
    xgb.train({"max_depth": 2, "tree_method": "hist"}, xgb.DMatrix(X, y), 3).save_model(str(tmp_path / "m.json"))
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["learner"]["gradient_booster"]["model"]["iteration_indptr"] = [0, 1, 3]  # a round of 1 tree, one of 2
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"rounds hold different numbers of trees \(\[1, 2\]\)"):
        daskgb.Booster().load_model(tmp_path / "m.json")


def test_continued_training_goes_on_with_the_same_forest():
    X, y = _xy("binary", seed=8)
    params = {**KINDS["binary"], "max_depth": 3, "num_parallel_tree": 3, "subsample": 0.7, "seed": 5,
              "device": "cpu"}
    m = daskgb.QuantileMatrix(X, y)
    whole = daskgb.train(params, m, 5, verbose_eval=False)
    first = daskgb.train(params, m, 2, verbose_eval=False)
    more = daskgb.train(params, m, 3, verbose_eval=False, xgb_model=first)
    assert more.num_boosted_rounds() == 5
    assert [t.to_dict() for t in more.trees] == [t.to_dict() for t in whole.trees]
    with pytest.raises(ValueError, match="xgb_model grows num_parallel_tree=3 trees a round"):
        daskgb.train({**params, "num_parallel_tree": 2}, m, 1, xgb_model=first)
    with pytest.raises(ValueError, match="num_parallel_tree cannot change once the model has trees"):
        first.set_param("num_parallel_tree", 2)


@pytest.mark.parametrize("value, match", [(0, "num_parallel_tree must be >= 1, got 0"),
                                          (1.5, "num_parallel_tree must be an integer, got 1.5"),
                                          (-2, "num_parallel_tree must be >= 1"),
                                          ("3", "num_parallel_tree must be an integer")])
def test_bad_num_parallel_tree(value, match):
    X, y = _xy("regression")
    with pytest.raises(ValueError, match=match):
        daskgb.train({"num_parallel_tree": value}, daskgb.QuantileMatrix(X, y), 1)
    with pytest.raises(ValueError, match=match):
        daskgb.GBRegressor(num_parallel_tree=value, n_estimators=1).fit(X, y)


# --------------------------------------------------------------------------- the estimators
def test_rf_estimators_have_xgboosts_defaults():
    for ours, theirs in ((daskgb.GBRFRegressor(), xgb.XGBRFRegressor()),
                         (daskgb.GBRFClassifier(), xgb.XGBRFClassifier())):
        mine, xp = ours.get_params(), theirs.get_params()
        for name in ("learning_rate", "subsample", "colsample_bynode", "reg_lambda"):
            assert mine[name] == xp[name], name
        assert mine["n_estimators"] is None and xp["n_estimators"] is None and ours.get_num_boosting_rounds() == theirs.get_num_boosting_rounds() == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_rf_estimators_equal_xgboosts_without_sampling(kind, device):
    X, y = _xy(kind, seed=11)
    kw = {"n_estimators": 5, "max_depth": 4, "subsample": 1.0, "colsample_bynode": 1.0}
    if kind == "regression":
        ours, theirs = daskgb.GBRFRegressor(device=device, **kw), xgb.XGBRFRegressor(tree_method="hist", **kw)
    else:
        ours, theirs = daskgb.GBRFClassifier(device=device, **kw), xgb.XGBRFClassifier(tree_method="hist", **kw)
    ours.fit(*_on(device, X, y))
    theirs.fit(X, y)
    b = ours.get_booster()
    assert b.num_boosted_rounds() == 1 and len(b.trees) == 5 * (3 if kind == "multiclass" else 1)
    assert_trees_equal_xgboosts(theirs.get_booster(), b, kind)
    if kind == "regression":
        np.testing.assert_allclose(np.asarray(ours.predict(X)), theirs.predict(X), atol=1e-5)
    else:
        np.testing.assert_allclose(np.asarray(ours.predict_proba(X)), theirs.predict_proba(X), atol=1e-5)
        np.testing.assert_array_equal(np.asarray(ours.predict(X)), theirs.predict(X))


def test_rf_estimators_fit_a_forest():
    X, y = _xy("regression", seed=12, n=1000)
    rf = daskgb.GBRFRegressor(n_estimators=20, max_depth=6, random_state=3).fit(X, y)
    b = rf.get_booster()
    assert b.num_boosted_rounds() == 1 and len(b.trees) == 20
    assert len({json.dumps(t.to_dict()) for t in b.trees}) == 20  # rows and columns drawn per tree
    assert rf.score(X, y) > 0.7
    assert rf.feature_importances_.shape == (X.shape[1],)
    clf = daskgb.GBRFClassifier(n_estimators=10, max_depth=4).fit(X, (y > 1).astype(int), eval_set=[(X, y > 1)])
    assert clf.predict_proba(X).shape == (X.shape[0], 2) and len(clf.evals_result()["validation_0"]["logloss"]) == 1
    from sklearn.base import clone

    twin = clone(daskgb.GBRFClassifier(n_estimators=7, subsample=0.5))
    assert twin.get_params()["n_estimators"] == 7 and twin.get_params()["subsample"] == 0.5
    assert repr(twin) == "GBRFClassifier(n_estimators=7, subsample=0.5)"
    # The normal estimators take num_parallel_tree too: n_estimators rounds of that many trees.
    gb = daskgb.GBRegressor(n_estimators=3, num_parallel_tree=4, max_depth=2).fit(X, y)
    assert gb.get_booster().num_boosted_rounds() == 3 and len(gb.get_booster().trees) == 12


@pytest.mark.parametrize("kw, error, match", [  # the errors XGBoost's random forest estimators raise
    ({"early_stopping_rounds": 2}, NotImplementedError,
     "early_stopping_rounds and callbacks are not supported by GBRFRegressor"),
    ({"callbacks": []}, NotImplementedError, "early_stopping_rounds and callbacks are not supported"),
    ({"n_estimators": 0}, ValueError, r"n_estimators \(the forest's trees\) must be an integer >= 1, got 0"),
])
def test_rf_estimators_refuse(kw, error, match):
    X, y = _xy("regression")
    with pytest.raises(error, match=match):
        daskgb.GBRFRegressor(**kw).fit(X, y, eval_set=[(X, y)])


# --------------------------------------------------------------------------- every GPU path
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["regression", "multiclass"])
def test_every_gpu_path_grows_the_same_forest(kind, settings):
    """cuda-graphs (a layer's launches replayed for each parallel tree), queued-rounds,
    device-levels and host-levels: the same trees and eval history, with row sampling on."""
    import cupy

    X, y = _xy(kind, seed=13, n=3000)
    params = {**KINDS[kind], "max_depth": 5, "num_parallel_tree": 3, "subsample": 0.7, "seed": 6, "device": "cuda"}
    models, histories = [], []
    for path, turned_off in (("cuda-graphs", {}), ("queued-rounds", {"training.cuda-graphs": False}),
                             ("device-levels", {"training.queue-rounds": False}),
                             ("host-levels", {"training.device-growth": False})):
        settings({"training.cuda-graphs": True, "training.queue-rounds": True, "training.device-growth": True,
                  **turned_off})
        m = daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y))
        res: dict = {}
        b = daskgb.train(params, m, 4, evals=[(m, "t")], evals_result=res, verbose_eval=False)
        assert b.attr("training_path") == path
        models.append([t.to_dict() for t in b.trees])
        histories.append(res)
    for other, h in zip(models[1:], histories[1:]):
        assert other == models[0]
        assert h == histories[0]
