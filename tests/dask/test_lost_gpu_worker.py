"""A GPU worker lost during a fit or a prediction, on one GPU (LocalCUDACluster of one worker):
an error naming it within seconds, never a hang, and a resume from the checkpoints that ends
with the unbroken run's model. The two-GPU cases (a surviving NCCL peer) are in
test_checkpoint_on_dask.py."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import pytest

import daskgb.dask as dgb
from daskgb.callback import TrainingCallback

distributed = pytest.importorskip("distributed")
pytest.importorskip("dask.array")

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:Port 8787 is already in use:UserWarning")]

# Worker processes cannot import this file by name: ship its functions and classes by value.
cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROUNDS, EVERY, KILL_AT = 120, 20, 30
PARAMS = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.1, "subsample": 0.8, "colsample_bytree": 0.8,
          "seed": 7, "device": "cuda"}


class KillWorkerAt(TrainingCallback):
    """SIGKILLs the worker running the fit after round `at`."""

    def __init__(self, at: int):
        self.at = at

    def after_iteration(self, model, epoch, evals_log):
        if epoch == self.at:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        return False


def _data(n=20_000, seed=31):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 6)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) - 0.5 * np.nan_to_num(X[:, 1] * X[:, 2]) + rng.normal(size=n) > 0)
    return X, y.astype(np.float32)


def _cluster():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("needs a GPU")
    dask_cuda = pytest.importorskip("dask_cuda")
    return dask_cuda.LocalCUDACluster(n_workers=1, CUDA_VISIBLE_DEVICES="0", dashboard_address=None)


def _matrix(client, X, y):
    """The rows under fresh keys: blocks lost with a killed worker keep their keys pinned to it."""
    import dask.array as da

    parts = [client.persist(da.from_array(a, chunks=(5_000,) + a.shape[1:], name=False)) for a in (X, y)]
    return dgb.DaskQuantileMatrix(client, *parts)


async def _die():
    os._exit(1)


def _slow_predict():
    """On the worker: its daskgb predict sleeps first, so that it can be killed during it."""
    import daskgb.dask.prediction as dask_module

    real = dask_module._predict_local

    def slow(*args, **kwargs):
        time.sleep(30)
        return real(*args, **kwargs)

    dask_module._predict_local = slow


def test_a_killed_gpu_worker_mid_fit_is_named_and_the_resume_gives_the_unbroken_model(tmp_path):
    X, y = _data()
    with _cluster() as cluster, distributed.Client(cluster) as client:
        dtrain = _matrix(client, X, y)
        unbroken = dgb.train(client, PARAMS, dtrain, ROUNDS, evals=[(dtrain, "train")], verbose_eval=False)

        victim = dtrain.workers[0]
        started = time.monotonic()
        with pytest.raises(dgb.WorkerLostError) as info:
            dgb.train(client, PARAMS, dtrain, ROUNDS, evals=[(dtrain, "train")], verbose_eval=False,
                      callbacks=[KillWorkerAt(KILL_AT)], checkpoint_dir=tmp_path, checkpoint_every=EVERY)
        elapsed = time.monotonic() - started
        message = str(info.value)
        assert elapsed < 60, f"the error took {elapsed:.1f} s"
        assert info.value.workers == [victim] and "rank 0" in message, message
        assert "holds 20 rounds" in message and "resume=True" in message, message

        client.wait_for_workers(1, timeout=120)  # the nanny restarts the worker, empty
        dtrain = _matrix(client, X, y)
        resumed = dgb.train(client, PARAMS, dtrain, ROUNDS, evals=[(dtrain, "train")], verbose_eval=False,
                            checkpoint_dir=tmp_path, checkpoint_every=EVERY, resume=True)
        assert json.dumps(resumed["booster"].to_dict()) == json.dumps(unbroken["booster"].to_dict())


@pytest.mark.parametrize("when", ["before", "during"])
def test_predict_on_a_matrix_whose_gpu_worker_died_fails_naming_it(monkeypatch, when):
    from daskgb.dask import watch

    monkeypatch.setattr(watch, "LOST_GRACE_S", 0.5)
    X, y = _data(n=4_000)
    with _cluster() as cluster, distributed.Client(cluster) as client:
        m = _matrix(client, X, y)
        booster = dgb.train(client, {"max_depth": 3, "device": "cuda"}, m, 3, verbose_eval=False)["booster"]
        victim = m.workers[0]
        if when == "during":
            client.run(_slow_predict, workers=[victim])
            import threading

            threading.Timer(1.0, lambda: client.run(_die, workers=[victim], wait=False)).start()
        else:
            client.run(_die, workers=[victim], wait=False)
            time.sleep(1.0)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=rf"worker\(s\) {victim} \(rank 0\) died or left the cluster "
                                               r"during prediction"):
            dgb.predict(client, booster, m)
        assert time.monotonic() - started < 15
