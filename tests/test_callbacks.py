"""Training callbacks (XGBoost's callback API) and uniform row subsampling."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb.callback import EarlyStopping, EvaluationMonitor, LearningRateScheduler, TrainingCallback

xgb = pytest.importorskip("xgboost")


def exact_data(seed, n=1500):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 6)) * 4) / 4).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=n) > 0).astype(np.float32)
    return X, y


PARAMS = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.5, "eval_metric": ["auc", "logloss"]}


def matrices(seed=0):
    X, y = exact_data(seed)
    Xv, yv = exact_data(seed + 100, n=600)
    d = daskgb.QuantileMatrix(X, y)
    return X, y, Xv, yv, d, daskgb.QuantileMatrix(Xv, yv, ref=d)


@pytest.mark.parametrize("kwargs", [{}, {"metric_name": "auc"}, {"metric_name": "logloss", "min_delta": 1e-3},
                                    {"data_name": "train", "metric_name": "logloss"}])
def test_early_stopping_callback_stops_where_xgboosts_does(kwargs):
    X, y, Xv, yv, d, dv = matrices()
    ours = daskgb.train({**PARAMS, "device": "cpu"}, d, 300, evals=[(d, "train"), (dv, "valid")],
                        callbacks=[EarlyStopping(4, **kwargs)], verbose_eval=False)
    dx, dvx = xgb.DMatrix(X, y), xgb.DMatrix(Xv, yv)
    theirs = xgb.train({**PARAMS, "tree_method": "hist"}, dx, 300, evals=[(dx, "train"), (dvx, "valid")],
                       callbacks=[xgb.callback.EarlyStopping(rounds=4, **kwargs)], verbose_eval=False)
    assert ours.best_iteration == theirs.best_iteration
    assert ours.num_boosted_rounds() == theirs.num_boosted_rounds()
    assert ours.best_score == pytest.approx(theirs.best_score, rel=1e-6)


def test_save_best_keeps_the_best_trees_only():
    X, y, Xv, yv, d, dv = matrices(1)
    full = daskgb.train({**PARAMS, "device": "cpu"}, d, 300, evals=[(dv, "valid")], early_stopping_rounds=3)
    best = daskgb.train({**PARAMS, "device": "cpu"}, d, 300, evals=[(dv, "valid")],
                        callbacks=[EarlyStopping(3, save_best=True)])
    assert best.num_boosted_rounds() == full.best_iteration + 1 < full.num_boosted_rounds()
    np.testing.assert_array_equal(best.predict(Xv), full.predict(Xv))


def test_learning_rate_scheduler_matches_xgboost():
    X, y, _, _, d, _ = matrices(2)
    rates = [0.5, 0.4, 0.3, 0.2, 0.1, 0.05]
    for schedule in (rates, lambda epoch: 0.6 * 0.7 ** epoch):
        ours = daskgb.train({**PARAMS, "device": "cpu"}, d, 6, callbacks=[LearningRateScheduler(schedule)])
        theirs = xgb.train({**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, y), 6,
                           callbacks=[xgb.callback.LearningRateScheduler(schedule)])
        np.testing.assert_allclose(ours.predict(X), theirs.predict(xgb.DMatrix(X)), atol=1e-5)


class _StopAt(TrainingCallback):
    def __init__(self, epoch, before=False):
        self.epoch, self.before, self.seen = epoch, before, []

    def before_training(self, model):
        self.seen.append("start")
        return model

    def before_iteration(self, model, epoch, evals_log):
        return self.before and epoch == self.epoch

    def after_iteration(self, model, epoch, evals_log):
        self.seen.append((epoch, {k: len(v["logloss"]) for k, v in evals_log.items()}))
        return not self.before and epoch == self.epoch

    def after_training(self, model):
        self.seen.append(("end", model.num_boosted_rounds()))
        return model


def test_custom_callbacks_see_the_log_and_stop():
    _, _, _, _, d, dv = matrices(3)
    cb = _StopAt(2)
    b = daskgb.train({**PARAMS, "device": "cpu"}, d, 10, evals=[(dv, "v")], callbacks=[cb])
    assert b.num_boosted_rounds() == 3
    assert cb.seen == ["start", (0, {"v": 1}), (1, {"v": 2}), (2, {"v": 3}), ("end", 3)]
    assert daskgb.train({**PARAMS, "device": "cpu"}, d, 10, callbacks=[_StopAt(4, before=True)]) \
        .num_boosted_rounds() == 4


def test_evaluation_monitor_prints_every_period(capsys):
    _, _, _, _, d, dv = matrices(4)
    daskgb.train({**PARAMS, "device": "cpu"}, d, 5, evals=[(dv, "v")], verbose_eval=False,
                 callbacks=[EvaluationMonitor(period=2)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["[0]", "[2]", "[4]"]
    assert lines[0].split("\t")[1].startswith("v-auc:")


def test_bad_callbacks_are_named():
    _, _, _, _, d, _ = matrices(5)
    with pytest.raises(ValueError, match="TrainingCallback"):
        daskgb.train({"device": "cpu"}, d, 2, callbacks=[lambda *a: None])
    with pytest.raises(ValueError, match="at least one eval set"):
        daskgb.train({"device": "cpu"}, d, 2, callbacks=[EarlyStopping(2)])
    with pytest.raises(ValueError, match="integer >= 1"):
        EarlyStopping(0)


def test_estimators_take_early_stopping_and_callbacks():
    X, y, Xv, yv, _, _ = matrices(6)
    clf = daskgb.GBClassifier(n_estimators=300, max_depth=5, learning_rate=0.5, early_stopping_rounds=4,
                              eval_metric="logloss", device="cpu")
    clf.fit(X, y, eval_set=[(Xv, yv)])
    theirs = xgb.XGBClassifier(n_estimators=300, max_depth=5, learning_rate=0.5, early_stopping_rounds=4,
                               eval_metric="logloss", tree_method="hist").fit(X, y, eval_set=[(Xv, yv)], verbose=False)
    assert clf.best_iteration == theirs.best_iteration
    np.testing.assert_allclose(clf.predict_proba(Xv), theirs.predict_proba(Xv), atol=1e-5)
    cb = _StopAt(1)
    reg = daskgb.GBRegressor(n_estimators=20, callbacks=[cb], device="cpu").fit(X, y)
    assert reg.get_booster().num_boosted_rounds() == 2 and cb.seen == []  # fit used a copy
    with pytest.raises(AttributeError):
        reg.best_iteration


# --------------------------------------------------------------------------- subsample
def test_subsample_trains_on_a_fraction_of_rows():
    X, y, Xv, yv, d, dv = matrices(7)
    full = daskgb.train({**PARAMS, "device": "cpu"}, d, 10)
    one = daskgb.train({**PARAMS, "subsample": 1.0, "device": "cpu"}, d, 10)
    np.testing.assert_array_equal(one.predict(X), full.predict(X))
    half = daskgb.train({**PARAMS, "subsample": 0.5, "device": "cpu"}, d, 10)
    # the root's cover is the hessian sum of the sampled rows only: about half the full cover
    ratio = half.trees[0].cover[0] / full.trees[0].cover[0]
    assert 0.4 < ratio < 0.6
    again = daskgb.train({**PARAMS, "subsample": 0.5, "device": "cpu"}, d, 10)
    np.testing.assert_array_equal(again.predict(X), half.predict(X))
    reseeded = daskgb.train({**PARAMS, "subsample": 0.5, "seed": 1, "device": "cpu"}, d, 10)
    assert not np.array_equal(reseeded.predict(X), half.predict(X))
    # it still learns: validation AUC close to XGBoost's with the same rate (different random rows)
    theirs = xgb.train({**PARAMS, "subsample": 0.5, "tree_method": "hist"}, xgb.DMatrix(X, y), 10)
    from daskgb.metric import auc_of

    assert abs(auc_of(yv, half.predict(Xv)) - auc_of(yv, theirs.predict(xgb.DMatrix(Xv)))) < 0.03
    with pytest.raises(ValueError, match="subsample"):
        daskgb.train({"subsample": 0.0}, d, 1)


@pytest.mark.gpu
def test_subsample_same_trees_on_cuda():
    from test_backends_same_trees import assert_same_trees

    X, y = exact_data(9, n=4000)
    models = [daskgb.train({**PARAMS, "subsample": 0.6, "device": dev}, daskgb.QuantileMatrix(X, y, device=dev), 10)
              for dev in ("cpu", "cuda")]
    assert_same_trees(*models)
