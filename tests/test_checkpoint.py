"""Checkpoints: a run cut short and resumed ends with the model an unbroken run makes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import daskgb
from daskgb.callback import TrainingCallback


def _data(seed=0, n=600, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    score = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2])
    if classes == 2:
        y = (score + rng.normal(scale=0.5, size=n) > 0).astype(np.float32)
    else:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])).astype(np.float32)
    return X, y


# Row and column sampling on: both are keyed by the round, which a resumed run must continue.
PARAMS = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "subsample": 0.8,
          "colsample_bytree": 0.7, "colsample_bynode": 0.8, "seed": 3, "device": "cpu"}


class _Interrupt(Exception):
    pass


class _StopAt(TrainingCallback):
    """Raises after round `at`, as a killed process would stop there."""

    def __init__(self, at: int):
        self.at = at

    def after_iteration(self, model, epoch, evals_log):
        if epoch == self.at:
            raise _Interrupt(f"interrupted in round {epoch}")
        return False


class _Rounds(TrainingCallback):
    """The rounds a run trained."""

    def __init__(self):
        self.seen = []

    def after_iteration(self, model, epoch, evals_log):
        self.seen.append(epoch)
        return False


_SEEN: list = []


class _RoundsSeen(TrainingCallback):
    """The rounds a run trained, kept outside the object: an estimator fits with copies of its
    callbacks."""

    def after_iteration(self, model, epoch, evals_log):
        _SEEN.append(epoch)
        return False


def _matrices(X, y, device="cpu"):
    xp = np
    if device == "cuda":
        import cupy as xp
    dtrain = daskgb.QuantileMatrix(xp.asarray(X[:450]), xp.asarray(y[:450]), device=device)
    dvalid = daskgb.QuantileMatrix(xp.asarray(X[450:]), xp.asarray(y[450:]), ref=dtrain, device=device)
    return dtrain, dvalid


def _train(params, dtrain, dvalid, rounds, history=None, callbacks=(), **kw):
    return daskgb.train(params, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, "valid")], verbose_eval=False,
                        evals_result=history, callbacks=list(callbacks), **kw)


@pytest.mark.parametrize("sampling", ["uniform", "gradient_based"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_resumed_run_equals_an_unbroken_one(tmp_path, device, sampling):
    X, y = _data()
    params = {**PARAMS, "device": device, "sampling_method": sampling}
    dtrain, dvalid = _matrices(X, y, device)
    whole_history: dict = {}
    whole = _train(params, dtrain, dvalid, 30, whole_history)

    with pytest.raises(_Interrupt):
        _train(params, dtrain, dvalid, 30, callbacks=[_StopAt(17)], checkpoint_dir=tmp_path, checkpoint_every=7)
    names = sorted(os.listdir(tmp_path))
    assert names == ["checkpoint-00000007.json", "checkpoint-00000014.json"], names

    # A fresh process would rebuild its matrices from the same data.
    dtrain2, dvalid2 = _matrices(X, y, device)
    history: dict = {}
    rounds = _Rounds()
    resumed = _train(params, dtrain2, dvalid2, 30, history, callbacks=[rounds], checkpoint_dir=tmp_path,
                     checkpoint_every=7, resume=True)
    assert rounds.seen == list(range(14, 30))  # only the rounds after the newest checkpoint
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())
    assert history == whole_history
    assert resumed.num_boosted_rounds() == 30
    # The last two checkpoints are kept, the final round's among them; no temporary file is left.
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-00000028.json", "checkpoint-00000030.json"]


def test_resume_without_a_checkpoint_starts_afresh(tmp_path):
    X, y = _data(seed=1)
    dtrain, dvalid = _matrices(X, y)
    whole = _train(PARAMS, dtrain, dvalid, 5)
    resumed = _train(PARAMS, dtrain, dvalid, 5, checkpoint_dir=tmp_path / "new", resume=True)
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())
    assert os.listdir(tmp_path / "new") == ["checkpoint-00000005.json"]  # the end of a run is always kept


def test_resume_of_a_finished_run_returns_its_model(tmp_path):
    X, y = _data(seed=2)
    dtrain, dvalid = _matrices(X, y)
    whole = _train(PARAMS, dtrain, dvalid, 6, checkpoint_dir=tmp_path, checkpoint_every=4)
    rounds = _Rounds()
    again = _train(PARAMS, dtrain, dvalid, 6, callbacks=[rounds], checkpoint_dir=tmp_path, checkpoint_every=4,
                   resume=True)
    assert rounds.seen == []
    assert json.dumps(again.to_dict()) == json.dumps(whole.to_dict())


def test_early_stopping_state_survives_a_resume(tmp_path):
    X, y = _data(seed=4)
    dtrain, dvalid = _matrices(X, y)
    params = {**PARAMS, "eta": 0.8, "max_depth": 6}
    whole = _train(params, dtrain, dvalid, 200, early_stopping_rounds=4)
    assert whole.num_boosted_rounds() < 200, "the data must make early stopping stop"
    stop_at = whole.num_boosted_rounds() - 2
    with pytest.raises(_Interrupt):
        _train(params, dtrain, dvalid, 200, callbacks=[_StopAt(stop_at)], early_stopping_rounds=4,
               checkpoint_dir=tmp_path, checkpoint_every=1)
    rounds = _Rounds()
    resumed = _train(params, dtrain, dvalid, 200, callbacks=[rounds], early_stopping_rounds=4,
                     checkpoint_dir=tmp_path, checkpoint_every=1, resume=True)
    assert rounds.seen[0] == stop_at
    assert (resumed.best_iteration, resumed.best_score) == (whole.best_iteration, whole.best_score)
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())


def test_multiclass_resume(tmp_path):
    X, y = _data(seed=5, classes=3)
    dtrain, dvalid = _matrices(X, y)
    params = {**PARAMS, "objective": "multi:softprob", "num_class": 3}
    whole = _train(params, dtrain, dvalid, 8)
    with pytest.raises(_Interrupt):
        _train(params, dtrain, dvalid, 8, callbacks=[_StopAt(5)], checkpoint_dir=tmp_path, checkpoint_every=3)
    rounds = _Rounds()
    resumed = _train(params, dtrain, dvalid, 8, callbacks=[rounds], checkpoint_dir=tmp_path, checkpoint_every=3,
                     resume=True)
    assert rounds.seen == [3, 4, 5, 6, 7]
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())


def test_resume_with_other_parameters_is_an_error(tmp_path):
    X, y = _data(seed=6)
    dtrain, dvalid = _matrices(X, y)
    _train(PARAMS, dtrain, dvalid, 4, checkpoint_dir=tmp_path, checkpoint_every=2)
    with pytest.raises(ValueError, match="written by a run with other the parameters"):
        _train({**PARAMS, "max_depth": 3}, dtrain, dvalid, 8, checkpoint_dir=tmp_path, resume=True)


def test_resume_with_other_data_is_an_error(tmp_path):
    X, y = _data(seed=7)
    dtrain, dvalid = _matrices(X, y)
    _train(PARAMS, dtrain, dvalid, 4, checkpoint_dir=tmp_path, checkpoint_every=2)
    X2, y2 = _data(seed=8)
    dtrain2, dvalid2 = _matrices(X2, y2)
    with pytest.raises(ValueError, match="quantile cuts"):
        _train(PARAMS, dtrain2, dvalid2, 8, checkpoint_dir=tmp_path, resume=True)


def test_resume_past_num_boost_round_is_an_error(tmp_path):
    X, y = _data(seed=9)
    dtrain, dvalid = _matrices(X, y)
    _train(PARAMS, dtrain, dvalid, 6, checkpoint_dir=tmp_path, checkpoint_every=3)
    with pytest.raises(ValueError, match="holds 6 rounds, more than num_boost_round=4"):
        _train(PARAMS, dtrain, dvalid, 4, checkpoint_dir=tmp_path, resume=True)


def test_a_corrupted_newest_checkpoint_is_passed_over(tmp_path):
    X, y = _data(seed=10)
    dtrain, dvalid = _matrices(X, y)
    whole = _train(PARAMS, dtrain, dvalid, 9)
    with pytest.raises(_Interrupt):
        _train(PARAMS, dtrain, dvalid, 9, callbacks=[_StopAt(6)], checkpoint_dir=tmp_path, checkpoint_every=3)
    newest = tmp_path / "checkpoint-00000006.json"
    newest.write_text(newest.read_text()[:100])  # cut short, as by a full disk
    with pytest.warns(UserWarning, match="skipping checkpoint checkpoint-00000006.json"):
        resumed = _train(PARAMS, dtrain, dvalid, 9, checkpoint_dir=tmp_path, checkpoint_every=3, resume=True)
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())


def test_a_checkpoint_from_a_newer_daskgb_is_refused(tmp_path):
    X, y = _data(seed=11)
    dtrain, dvalid = _matrices(X, y)
    _train(PARAMS, dtrain, dvalid, 2, checkpoint_dir=tmp_path, checkpoint_every=1)
    path = tmp_path / "checkpoint-00000002.json"
    state = json.loads(path.read_text())
    state["version"] = 99
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="written by a newer daskgb"):
        _train(PARAMS, dtrain, dvalid, 4, checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize("kw, message", [
    ({"resume": True}, "resume=True needs checkpoint_dir"),
    ({"checkpoint_every": 5}, "checkpoint_every needs checkpoint_dir"),
    ({"checkpoint_dir": "x", "checkpoint_every": 0}, r"checkpoint_every must be an integer >= 1"),
    ({"checkpoint_dir": "x", "checkpoint_every": 2.5}, r"checkpoint_every must be an integer >= 1"),
    ({"checkpoint_dir": "x", "resume": "yes"}, "resume must be True or False"),
    ({"checkpoint_dir": ""}, "checkpoint_dir must be a path"),
])
def test_bad_checkpoint_options(kw, message):
    X, y = _data(seed=12)
    dtrain, dvalid = _matrices(X, y)
    with pytest.raises(ValueError, match=message):
        _train(PARAMS, dtrain, dvalid, 2, **kw)


def test_an_unwritable_checkpoint_dir_fails_before_training(tmp_path):
    X, y = _data(seed=13)
    dtrain, dvalid = _matrices(X, y)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    seen = []

    class Count(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            seen.append(epoch)
            return False

    with pytest.raises(ValueError, match="is not a writable directory"):
        _train(PARAMS, dtrain, dvalid, 3, callbacks=[Count()], checkpoint_dir=blocker / "sub", checkpoint_every=1)
    assert seen == []


def test_estimators_fit_with_checkpoints_and_resume(tmp_path):
    X, y = _data(seed=14)
    common = dict(n_estimators=12, max_depth=3, subsample=0.8, random_state=2, device="cpu")
    whole = daskgb.GBClassifier(**common).fit(X, y)
    with pytest.raises(_Interrupt):
        daskgb.GBClassifier(**common, callbacks=[_StopAt(8)]).fit(X, y, checkpoint_dir=tmp_path, checkpoint_every=4)
    _SEEN.clear()
    resumed = daskgb.GBClassifier(**common, callbacks=[_RoundsSeen()]).fit(X, y, checkpoint_dir=tmp_path,
                                                                           checkpoint_every=4, resume=True)
    assert _SEEN == [8, 9, 10, 11]
    assert json.dumps(resumed.get_booster().to_dict()) == json.dumps(whole.get_booster().to_dict())
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        daskgb.GBRegressor(**common).fit(X, y, resume=True)
