"""Callbacks and row subsampling on a 2-worker LocalCluster: the same models as in process."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb
from daskgb.callback import LearningRateScheduler, TrainingCallback
from daskgb.dask.watch import live_workers

distributed = pytest.importorskip("distributed")

from placement import on_workers  # noqa: E402


def exact_data(n=1600, seed=0):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 6)) * 4) / 4).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=n) > 0).astype(np.float32)
    return X, y


PARAMS = {"objective": "binary:logistic", "max_depth": 4, "device": "cpu"}


class StopOnWorker(TrainingCallback):
    """Asks to stop after round `epoch` on one worker only: the collective must stop every worker."""

    def __init__(self, address, epoch):
        self.address, self.epoch = address, epoch

    def after_iteration(self, model, epoch, evals_log):
        from distributed import get_worker

        return get_worker().address == self.address and epoch == self.epoch


def test_a_stop_on_one_worker_stops_all(client):
    X, y = exact_data()
    chunks, placement = [800, 800], [0, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    second = sorted(live_workers(client))[1]
    out = dgb.train(client, PARAMS, dtrain, 10, callbacks=[StopOnWorker(second, 3)], verbose_eval=False)
    assert out["booster"].num_boosted_rounds() == 4


def test_scheduler_and_subsample_equal_in_process(client):
    X, y = exact_data(seed=3)
    # Blocks in row order over the ranks: global row indices match the in-process ones.
    chunks, placement = [500, 300, 800], [0, 0, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    assert dtrain.workers == sorted(live_workers(client))
    params = {**PARAMS, "subsample": 0.7, "seed": 5}
    sched = [LearningRateScheduler(lambda e: 0.5 / (1 + e))]
    out = dgb.train(client, params, dtrain, 8, callbacks=sched, verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y), 8, callbacks=sched)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)
