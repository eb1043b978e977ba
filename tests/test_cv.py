"""daskgb.cv against xgboost.cv on data where the models are equal (exact cuts): the same folds,
the same frame (columns, rows, values)."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb.callback import LearningRateScheduler, TrainingCallback
from exact_data import make_data

xgb = pytest.importorskip("xgboost")
pd = pytest.importorskip("pandas")

PARAMS = dict(max_depth=3, eta=0.3, base_score=0.5, max_bin=256)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def both(objective="reg:squarederror", params=None, rounds=6, device="cpu", seed=3, **kw):
    X, y = make_data(seed, objective, True)
    p = {**PARAMS, "objective": objective, **(params or {})}
    theirs = xgb.cv({**p, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), rounds, **kw)
    ours = daskgb.cv({**p, "device": device}, daskgb.QuantileMatrix(X, y), rounds, **kw)
    return ours, theirs


def same(ours, theirs, rtol=1e-5):
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for k in theirs:
            np.testing.assert_allclose(ours[k], theirs[k], rtol=rtol, atol=1e-6, err_msg=k)
        return
    assert isinstance(ours, pd.DataFrame)
    assert list(ours.columns) == list(theirs.columns)
    assert ours.shape == theirs.shape
    pd.testing.assert_frame_equal(ours, theirs, check_exact=False, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_cv_frame_as_xgboost(device):
    ours, theirs = both(device=device, nfold=4, seed=0)
    assert list(theirs.columns) == ["train-rmse-mean", "train-rmse-std", "test-rmse-mean", "test-rmse-std"]
    same(ours, theirs)


def test_cv_metrics_and_dict_output():
    ours, theirs = both("binary:logistic", metrics=["logloss", "error", "auc"], as_pandas=False, nfold=3)
    same(ours, theirs)
    ours, theirs = both("binary:logistic", params={"eval_metric": ["auc", "logloss"]})
    same(ours, theirs)
    ours, theirs = both("binary:logistic", metrics={"auc"})
    same(ours, theirs)


def test_cv_stratified_folds_and_splitters():
    from sklearn.model_selection import KFold

    same(*both("binary:logistic", stratified=True, nfold=3, seed=5))
    same(*both("binary:logistic", folds=KFold(n_splits=4, shuffle=True, random_state=2)))
    rows = np.arange(600)
    folds = [(rows[rows % 3 != k], rows[rows % 3 == k]) for k in range(3)]
    same(*both(folds=folds))
    same(*both(shuffle=False, nfold=5))


def test_cv_early_stopping_as_xgboost():
    ours, theirs = both(params={"eta": 1.0, "max_depth": 6}, rounds=60, early_stopping_rounds=3, nfold=3)
    assert len(theirs) < 60
    same(ours, theirs)
    ours, theirs = both("binary:logistic", params={"eta": 0.6, "max_depth": 2}, rounds=60, metrics=["auc"],
                        early_stopping_rounds=2)
    assert len(theirs) < 60
    same(ours, theirs)


def test_cv_custom_objective_and_metric():
    def squared(margin, m):
        return np.asarray(margin) - np.asarray(m.get_label()), np.ones(len(margin))

    def mean_abs(predt, m):
        return "mymae", float(np.mean(np.abs(np.asarray(predt) - np.asarray(m.get_label()))))

    ours, theirs = both(obj=squared, custom_metric=mean_abs)
    assert "test-mymae-mean" in theirs.columns
    same(ours, theirs)


def test_cv_verbose_eval_prints_as_xgboost(capsys):
    both(rounds=3, verbose_eval=True)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6
    ours, theirs = lines[3:], lines[:3]  # xgboost.cv runs first
    assert ours == theirs
    both(rounds=3, verbose_eval=2, show_stdv=False)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[: len(lines) // 2] == lines[len(lines) // 2 :]
    assert "+" not in lines[0]


def test_cv_callbacks_see_the_folds():
    seen = []

    class Watch(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            seen.append((epoch, model.num_boosted_rounds(), evals_log["test"]["rmse"][-1]))
            return epoch == 2

    X, y = make_data(3, "reg:squarederror", True)
    out = daskgb.cv(PARAMS, daskgb.QuantileMatrix(X, y), 10, callbacks=[Watch()], as_pandas=False)
    assert [s[:2] for s in seen] == [(0, 1), (1, 2), (2, 3)]
    assert all(isinstance(s[2], tuple) and len(s[2]) == 2 for s in seen)
    assert seen[-1][2][0] == pytest.approx(out["test-rmse-mean"][-1])
    # A callback that sets parameters reaches every fold, as XGBoost's.
    rates = [0.3, 0.1, 0.05, 0.05, 0.05, 0.05]
    ours = daskgb.cv(PARAMS, daskgb.QuantileMatrix(X, y), 6, callbacks=[LearningRateScheduler(rates)])
    theirs = xgb.cv({**PARAMS, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 6,
                    callbacks=[xgb.callback.LearningRateScheduler(rates)])
    same(ours, theirs)


def test_cv_fpreproc():
    def fpreproc(dtrain, dtest, param):  # each fold's params made from its rows
        label = np.asarray(dtrain.get_label())
        param["max_depth"] = 2 if label.mean() > 0.5 else 4
        return dtrain, dtest, param

    same(*both("binary:logistic", fpreproc=fpreproc, metrics=["logloss"]))


def test_cv_quantises_once(monkeypatch):
    """The folds are row subsets of the given matrix: nothing is sketched again."""
    import daskgb.matrix as matrix

    X, y = make_data(3, "reg:squarederror", True)
    dq = daskgb.QuantileMatrix(X, y)
    calls = []
    monkeypatch.setattr(matrix, "_make_cuts", lambda *a, **k: calls.append(1))
    daskgb.cv(PARAMS, dq, 2, nfold=3)
    assert calls == []


def test_cv_bad_input():
    X, y = make_data(3, "reg:squarederror", True)
    dq = daskgb.QuantileMatrix(X, y)
    with pytest.raises(ValueError, match="QuantileMatrix"):
        daskgb.cv(PARAMS, X, 2)
    with pytest.raises(ValueError, match="nfold"):
        daskgb.cv(PARAMS, dq, 2, nfold=1)
    with pytest.raises(ValueError, match="num_boost_round"):
        daskgb.cv(PARAMS, dq, -1)
    with pytest.raises(ValueError, match="no labels"):
        daskgb.cv(PARAMS, daskgb.QuantileMatrix(X), 2)
    with pytest.raises(ValueError, match="callbacks"):
        daskgb.cv(PARAMS, dq, 2, callbacks=[object()])
    with pytest.raises(ValueError, match="`save_best` does not apply to cv"):  # xgboost.cv refuses it too
        daskgb.cv(PARAMS, dq, 2, callbacks=[daskgb.callback.EarlyStopping(3, save_best=True)])
    groups = daskgb.QuantileMatrix(X, y, qid=np.repeat(np.arange(6), 100))
    with pytest.raises(ValueError, match="folds of a matrix with query groups are of whole groups"):
        daskgb.cv({"objective": "rank:ndcg"}, groups, 2, stratified=True)
    with pytest.raises(ValueError, match="more folds than dtrain's 6 query groups"):
        daskgb.cv({"objective": "rank:ndcg"}, groups, 2, nfold=7)


@pytest.mark.parametrize("shuffle", [True, False])
def test_cv_of_a_ranking_matrix_keeps_query_groups_whole_as_xgboost(shuffle):
    """xgboost.cv folds a ranking matrix by whole query groups (mkgroupfold): the same folds, and
    so the same means and deviations (features of few values, each in every fold's training
    rows, so that quantising once or per fold cuts alike)."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(3)
    sizes = rng.integers(2, 12, 40)
    n = int(sizes.sum())
    X = rng.integers(0, 5, size=(n, 4)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] / 2 + rng.normal(size=n)), 0, 3).astype(np.float32)
    params = {"objective": "rank:ndcg", "max_depth": 3, "eval_metric": ["ndcg@5", "ndcg"]}
    ours = daskgb.cv({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y, group=sizes), 4, nfold=3,
                     seed=7, shuffle=shuffle, as_pandas=False)
    theirs = xgb.cv({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, group=sizes), 4, nfold=3, seed=7,
                    shuffle=shuffle, as_pandas=False)
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_take_groups_keeps_groups_and_their_weights():
    """A fold of query groups keeps each group whole, in the order given, with its weight
    (xgboost.cv's folds drop ranking weights: DMatrix.slice does not carry per-group ones)."""
    rng = np.random.default_rng(4)
    sizes = np.array([3, 1, 4, 2])
    X = rng.normal(size=(10, 2)).astype(np.float32)
    y = rng.integers(0, 3, 10).astype(np.float32)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    m = daskgb.QuantileMatrix(X, y, group=sizes, weight=w)
    fold = m.take_groups(np.array([2, 0]))
    np.testing.assert_array_equal(fold.get_group(), [4, 3])
    np.testing.assert_array_equal(fold.get_label(), np.concatenate([y[4:8], y[0:3]]))
    np.testing.assert_array_equal(fold.groups.weight, [3.0, 1.0])
    np.testing.assert_array_equal(fold.get_weight(), [3.0] * 4 + [1.0] * 3)
    with pytest.raises(ValueError, match="out of range"):
        m.take_groups(np.array([4]))
    with pytest.raises(ValueError, match="without query groups"):
        daskgb.QuantileMatrix(X, y).take_groups(np.array([0]))
