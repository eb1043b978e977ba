"""Checkpoints: a run cut short and resumed ends with the model an unbroken run makes."""

from __future__ import annotations

import json
import os
import re

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


def _saved(directory) -> list[int]:
    """The rounds of the checkpoints in a directory, all of one run (their names say which)."""
    names = sorted(os.listdir(directory))
    runs = {re.match(r"checkpoint-([0-9a-f]{16})-\d{8}\.json$", n).group(1) for n in names}
    assert len(runs) <= 1, names
    return sorted(int(n[-13:-5]) for n in names)


def _file(directory, rounds: int):
    """The checkpoint file of `rounds` rounds (of the one run in the directory)."""
    (path,) = directory.glob(f"checkpoint-*-{rounds:08d}.json")
    return path


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
    assert _saved(tmp_path) == [7, 14]

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
    assert _saved(tmp_path) == [28, 30]


def test_resume_without_a_checkpoint_starts_afresh(tmp_path):
    X, y = _data(seed=1)
    dtrain, dvalid = _matrices(X, y)
    whole = _train(PARAMS, dtrain, dvalid, 5)
    resumed = _train(PARAMS, dtrain, dvalid, 5, checkpoint_dir=tmp_path / "new", resume=True)
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())
    assert _saved(tmp_path / "new") == [5]  # the end of a run is always kept


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


def test_parallel_trees_resume(tmp_path):
    """Rounds of num_parallel_tree trees a class (each drawing its own rows and columns) are
    checkpointed and resumed whole."""
    X, y = _data(seed=7, classes=3)
    dtrain, dvalid = _matrices(X, y)
    params = {**PARAMS, "objective": "multi:softprob", "num_class": 3, "num_parallel_tree": 2}
    whole = _train(params, dtrain, dvalid, 6)
    assert len(whole.trees) == 6 * 3 * 2
    with pytest.raises(_Interrupt):
        _train(params, dtrain, dvalid, 6, callbacks=[_StopAt(4)], checkpoint_dir=tmp_path, checkpoint_every=2)
    rounds = _Rounds()
    resumed = _train(params, dtrain, dvalid, 6, callbacks=[rounds], checkpoint_dir=tmp_path, checkpoint_every=2,
                     resume=True)
    assert rounds.seen == [4, 5]
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


def test_a_checkpoint_from_a_newer_daskgb_is_refused(tmp_path):
    X, y = _data(seed=11)
    dtrain, dvalid = _matrices(X, y)
    _train(PARAMS, dtrain, dvalid, 2, checkpoint_dir=tmp_path, checkpoint_every=1)
    path = _file(tmp_path, 2)
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


def _rewrite(path, edit) -> None:
    """Edit a checkpoint's content and write it back with a checksum that matches (as a buggy
    writer would), or, with edit returning False, keep the old checksum (as a hand edit does)."""
    import hashlib

    state = json.loads(path.read_text())
    if edit(state) is not False:
        body = {k: v for k, v in state.items() if k != "checksum"}
        state["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    path.write_text(json.dumps(state))


def _leaf_edited(state):
    tree = state["model"]["trees"][-1]
    leaf = tree["left"].index(-1)
    tree["value"][leaf] += 0.25  # still valid JSON, still a tree
    return False


def _round_dropped(state):
    k = max(state["model"]["tree_info"]) + 1
    del state["model"]["trees"][-k:], state["model"]["tree_info"][-k:]


def _cut_short(path) -> None:
    path.write_text(path.read_text()[:100])  # as by a full disk


@pytest.mark.parametrize("damage, why", [
    (_cut_short, "it does not read"),
    (lambda path: _rewrite(path, _leaf_edited), "its checksum does not match its content"),
    (lambda path: _rewrite(path, _round_dropped),
     "it holds 5 trees, not the 6 rounds x 1 groups x 1 parallel trees its header says"),
], ids=["cut-short", "leaf-edited", "round-dropped"])
def test_a_damaged_or_lying_checkpoint_is_passed_over(tmp_path, damage, why):
    """A newest checkpoint cut short, edited by hand (valid JSON) or whose trees disagree with
    its round count is not resumed: it is passed over with a warning for the one before it."""
    X, y = _data(seed=12)
    dtrain, dvalid = _matrices(X, y)
    whole = _train(PARAMS, dtrain, dvalid, 9)
    with pytest.raises(_Interrupt):
        _train(PARAMS, dtrain, dvalid, 9, callbacks=[_StopAt(6)], checkpoint_dir=tmp_path, checkpoint_every=3)
    newest = _file(tmp_path, 6)
    damage(newest)
    rounds = _Rounds()
    with pytest.warns(UserWarning, match=f"skipping checkpoint {newest.name}: {re.escape(why)}"):
        resumed = _train(PARAMS, dtrain, dvalid, 9, callbacks=[rounds], checkpoint_dir=tmp_path, checkpoint_every=3,
                         resume=True)
    assert rounds.seen == list(range(3, 9))  # from the checkpoint before it
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())


def _runs(directory) -> dict:
    """{run id: [rounds of its checkpoints]} of a directory."""
    runs: dict = {}
    for name in sorted(os.listdir(directory)):
        run, rounds = re.match(r"checkpoint-([0-9a-f]{16})-(\d{8})\.json$", name).groups()
        runs.setdefault(run, []).append(int(rounds))
    return runs


def test_runs_sharing_a_directory_keep_their_own_checkpoints(tmp_path):
    """Another run's checkpoints are neither pruned nor resumed: a run keeps its newest two and
    resume finds them beside the other run's."""
    X, y = _data(seed=13)
    dtrain, dvalid = _matrices(X, y)
    other = {**PARAMS, "max_depth": 3}
    whole = _train(PARAMS, dtrain, dvalid, 10)
    with pytest.raises(_Interrupt):
        _train(PARAMS, dtrain, dvalid, 10, callbacks=[_StopAt(7)], checkpoint_dir=tmp_path, checkpoint_every=2)
    _train(other, dtrain, dvalid, 12, checkpoint_dir=tmp_path, checkpoint_every=2)
    assert sorted(_runs(tmp_path).values()) == [[4, 6], [10, 12]]
    rounds = _Rounds()
    resumed = _train(PARAMS, dtrain, dvalid, 10, callbacks=[rounds], checkpoint_dir=tmp_path, checkpoint_every=2,
                     resume=True)
    assert rounds.seen == [6, 7, 8, 9]
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())
    assert sorted(_runs(tmp_path).values()) == [[8, 10], [10, 12]]


def test_a_shorter_run_beside_a_longer_one_keeps_its_own(tmp_path):
    """The same parameters and data, a new 6-round run beside an old 10-round run: it writes and
    keeps its own checkpoints (the old rule, the two highest round numbers of the directory,
    deleted them as they were written) and resumes from them."""
    X, y = _data(seed=14)
    dtrain, dvalid = _matrices(X, y)
    _train(PARAMS, dtrain, dvalid, 10, checkpoint_dir=tmp_path, checkpoint_every=2)
    whole = _train(PARAMS, dtrain, dvalid, 6)
    with pytest.raises(_Interrupt):
        _train(PARAMS, dtrain, dvalid, 6, callbacks=[_StopAt(4)], checkpoint_dir=tmp_path, checkpoint_every=2)
    assert sorted(_runs(tmp_path).values()) == [[2, 4], [8, 10]]
    rounds = _Rounds()
    resumed = _train(PARAMS, dtrain, dvalid, 6, callbacks=[rounds], checkpoint_dir=tmp_path, resume=True)
    assert rounds.seen == [4, 5]
    assert json.dumps(resumed.to_dict()) == json.dumps(whole.to_dict())


def test_a_finished_run_trained_on_for_more_rounds_resumes_from_it(tmp_path):
    """Another run of the same parameters and data is the same trees: a longer run resumes from
    its newest checkpoint, and from a version-1 file (no run id, no checksum) too."""
    X, y = _data(seed=15)
    dtrain, dvalid = _matrices(X, y)
    whole = _train(PARAMS, dtrain, dvalid, 8)
    _train(PARAMS, dtrain, dvalid, 5, checkpoint_dir=tmp_path, checkpoint_every=5)
    rounds = _Rounds()
    longer = _train(PARAMS, dtrain, dvalid, 8, callbacks=[rounds], checkpoint_dir=tmp_path, resume=True)
    assert rounds.seen == [5, 6, 7]
    assert json.dumps(longer.to_dict()) == json.dumps(whole.to_dict())
    # The same from a checkpoint an older daskgb wrote.
    old = tmp_path / "v1"
    old.mkdir()
    state = json.loads(_file(tmp_path, 5).read_text())
    for key in ("run", "checksum"):
        state.pop(key)
    state["version"] = 1
    (old / "checkpoint-00000005.json").write_text(json.dumps(state))
    rounds = _Rounds()
    again = _train(PARAMS, dtrain, dvalid, 8, callbacks=[rounds], checkpoint_dir=old, resume=True)
    assert rounds.seen == [5, 6, 7]
    assert json.dumps(again.to_dict()) == json.dumps(whole.to_dict())
