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


def _running_jobs(dask_worker=None):
    from daskgb.dask.plugin import PLUGIN_NAME

    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return 0 if plugin is None or plugin.state is None else len(plugin.state.running)


def test_a_fit_whose_client_is_gone_stops_at_its_next_round(client):
    """Closing the client mid-fit releases its task; the workers' threads stop training at
    their next round instead of running the orphaned fit to its end."""
    import threading
    import time

    import distributed

    X, y = exact_data(n=2000)
    clients, ended = [], []

    def fit_then_lose_the_client():
        other = distributed.Client(client.scheduler.address, set_as_default=False)
        clients.append(other)
        try:
            Xd, yd = on_workers(other, X, [1000, 1000], [0, 1]), on_workers(other, y, [1000, 1000], [0, 1])
            dgb.train(other, {"max_depth": 2, "device": "cpu"}, dgb.DaskQuantileMatrix(other, Xd, yd), 100_000,
                      verbose_eval=False)
        except Exception as exc:  # the closed client's own error; the workers are what matter here
            ended.append(exc)

    thread = threading.Thread(target=fit_then_lose_the_client, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while sum(client.run(_running_jobs).values()) < 2:  # both ranks training
        assert time.monotonic() < deadline, "the fit did not start"
        time.sleep(0.1)
    clients[0].close()  # the client goes mid-fit
    gone = time.monotonic()
    while sum(client.run(_running_jobs).values()) > 0:
        assert time.monotonic() - gone < 15, "the workers are still training the orphaned fit"
        time.sleep(0.1)
    thread.join(timeout=30)
    # (Its workers' fit locks are the closed client's until the scheduler's lease timeout, 30 s
    # by default, frees them: dask/fit_lock.py. Not waited for here.)
