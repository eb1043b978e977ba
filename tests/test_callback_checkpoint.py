"""daskgb.callback.TrainingCheckPoint: XGBoost's callback of that name (its files, their names and
rounds), which never writes over a file unless told."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import daskgb
from daskgb.callback import TrainingCheckPoint, ranked

xgb = pytest.importorskip("xgboost")

PARAMS = {"objective": "binary:logistic", "max_depth": 3, "device": "cpu"}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 30, size=(800, 4)).astype(np.float32)
    y = (X[:, 0] + rng.normal(scale=5, size=800) > 15).astype(np.float32)
    return X, y


def _written(folder, ext):
    return sorted(int(f[len("model_"):-len(ext) - 1]) for f in os.listdir(folder) if f.endswith("." + ext))


@pytest.mark.parametrize("interval, rounds", [(1, 10), (3, 10), (100, 10)])
def test_files_as_xgboosts(data, tmp_path, interval, rounds):
    X, y = data
    theirs, ours = tmp_path / "xgb", tmp_path / "ours"
    theirs.mkdir()  # XGBoost's needs it made; ours makes it
    xgb.train({**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, y), rounds, verbose_eval=False,
              callbacks=[xgb.callback.TrainingCheckPoint(theirs, interval=interval)])
    final = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), rounds, verbose_eval=False,
                         callbacks=[TrainingCheckPoint(ours, interval=interval)])
    expected = _written(theirs, xgb.callback.TrainingCheckPoint.default_format)
    assert _written(ours, "ubj") == expected  # model_1 ... model_9 for interval 1; none for 100
    for i in expected:
        saved = daskgb.Booster().load_model(ours / f"model_{i}.ubj")
        assert saved.num_boosted_rounds() == i + 1
        np.testing.assert_array_equal(saved.predict(X), final.predict(X, iteration_range=(0, i + 1)))


def test_continued_training_counts_the_models_rounds(data, tmp_path):
    X, y = data
    base_xgb = xgb.train({**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, y), 4)
    (tmp_path / "xgb").mkdir()
    xgb.train({**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, y), 7, xgb_model=base_xgb, verbose_eval=False,
              callbacks=[xgb.callback.TrainingCheckPoint(tmp_path / "xgb", interval=2)])
    dtrain = daskgb.QuantileMatrix(X, y)
    base = daskgb.train(PARAMS, dtrain, 4, verbose_eval=False)
    daskgb.train(PARAMS, dtrain, 7, xgb_model=base, verbose_eval=False,
                 callbacks=[TrainingCheckPoint(tmp_path / "ours", interval=2)])
    expected = _written(tmp_path / "xgb", "ubj")
    assert _written(tmp_path / "ours", "ubj") == expected and expected
    for i in expected:
        assert daskgb.Booster().load_model(tmp_path / "ours" / f"model_{i}.ubj").num_boosted_rounds() == i + 1


def test_as_pickle(data, tmp_path):
    X, y = data
    final = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 5, verbose_eval=False,
                         callbacks=[TrainingCheckPoint(tmp_path, name="clf", as_pickle=True, interval=2)])
    assert sorted(os.listdir(tmp_path)) == ["clf_2.pkl", "clf_4.pkl"]  # nothing else: no temporary file left
    with open(tmp_path / "clf_4.pkl", "rb") as f:
        saved = pickle.load(f)
    assert isinstance(saved, daskgb.Booster) and saved.num_boosted_rounds() == 5
    np.testing.assert_array_equal(saved.predict(X), final.predict(X))


def test_never_writes_over_a_file_unless_told(data, tmp_path):
    X, y = data
    dtrain = daskgb.QuantileMatrix(X, y)
    mine = tmp_path / "model_2.ubj"
    mine.write_text("the user's file")
    (tmp_path / "model_2.pkl").write_text("another format: not in the way")
    trained = []

    class Count(daskgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            trained.append(epoch)
            return False

    with pytest.raises(ValueError, match=r"TrainingCheckPoint would write over model_2\.ubj in .*overwrite=True"):
        daskgb.train(PARAMS, dtrain, 4, verbose_eval=False, callbacks=[TrainingCheckPoint(tmp_path, interval=2),
                                                                        Count()])
    assert trained == [] and mine.read_text() == "the user's file"  # refused before any round
    daskgb.train(PARAMS, dtrain, 4, verbose_eval=False,
                 callbacks=[TrainingCheckPoint(tmp_path, interval=2, overwrite=True)])
    assert daskgb.Booster().load_model(mine).num_boosted_rounds() == 3
    # Going on from a 4-round model writes rounds 4 and up: the files of rounds before are not in its way.
    base = daskgb.train(PARAMS, dtrain, 4, verbose_eval=False)
    daskgb.train(PARAMS, dtrain, 3, xgb_model=base, verbose_eval=False,
                 callbacks=[TrainingCheckPoint(tmp_path, interval=2)])
    assert (tmp_path / "model_6.ubj").exists()


def test_only_rank_0_writes(data, tmp_path):
    X, y = data
    cb = TrainingCheckPoint(tmp_path / "out", interval=1)
    model = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    with ranked(1):  # as a Dask worker of rank 1 calls it
        cb.before_training(model)
        for epoch in range(3):
            cb.after_iteration(model, epoch, {})
    assert not (tmp_path / "out").exists()
    with ranked(0):
        cb.before_training(model)
        for epoch in range(3):
            cb.after_iteration(model, epoch, {})
    assert os.listdir(tmp_path / "out") == ["model_2.ubj"]  # the model given has 3 rounds


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="interval must be an integer >= 1, got 0"):
        TrainingCheckPoint(tmp_path, interval=0)
    with pytest.raises(ValueError, match="name must be a file name's start"):
        TrainingCheckPoint(tmp_path, name="a/b")


class RecordRank(daskgb.callback.TrainingCallback):
    """Leaves a file named after the rank training says it runs as."""

    reads_only = True

    def __init__(self, folder):
        self.folder = str(folder)

    def before_training(self, model):
        open(os.path.join(self.folder, f"rank-{daskgb.callback.training_rank()}"), "w").close()
        return model


def test_on_dask_rank_0_writes_the_files(data, tmp_path):
    """Each Dask worker's training says its rank to the callbacks; the files are rank 0's, named
    as in one process."""
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import daskgb.dask as dgb

    X, y = data
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        client.wait_for_workers(2)
        dtrain = dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=400), da.from_array(y, chunks=400))
        out = dgb.train(client, PARAMS, dtrain, 5, verbose_eval=False,
                        callbacks=[TrainingCheckPoint(tmp_path / "ckpt", interval=2), RecordRank(ranks)])
    assert sorted(os.listdir(ranks)) == ["rank-0", "rank-1"]
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["model_2.ubj", "model_4.ubj"]
    saved = daskgb.Booster().load_model(tmp_path / "ckpt" / "model_4.ubj")
    np.testing.assert_array_equal(saved.predict(X), out["booster"].predict(X))
