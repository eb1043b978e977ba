"""The wait on pinned tasks (daskgb.dask.watch): woken by its futures and by its workers' removal
events, never by polling the scheduler every second; subscriptions that follow the live workers."""

from __future__ import annotations

import time

import numpy as np

import pytest

from daskgb.dask import watch
from daskgb.dask.watch import gather_watching, live_workers

distributed = pytest.importorskip("distributed")

# The scheduler's HTTP server wants port 8787 even without a dashboard; another cluster may hold it.
pytestmark = pytest.mark.filterwarnings("ignore:Port 8787 is already in use:UserWarning")


def _sleep(seconds):
    time.sleep(seconds)
    return seconds


async def _die():
    import os

    os._exit(1)


def _pinned(client, fn, *args, worker):
    return client.submit(fn, *args, workers=[worker], allow_other_workers=False, pure=False)


def _subscribers(topics, dask_scheduler=None):
    # The scheduler's topic registry is internal: read here only to see what the client follows.
    return {t: sorted(dask_scheduler._broker._topics[t].subscribers) for t in topics}


def test_a_wait_does_not_ask_the_scheduler_every_second(client, monkeypatch):
    """The scheduler is asked for the workers at a worker's first watch only; the wait ends as
    its futures do."""
    asked = []
    real = watch.live_workers
    monkeypatch.setattr(watch, "live_workers", lambda c: asked.append(1) or real(c))
    a, b = sorted(real(client))
    start = time.monotonic()
    futures = [_pinned(client, _sleep, 3.0, worker=w) for w in (a, b)]
    assert gather_watching(client, futures, [a, b], "test") == [3.0, 3.0]
    assert time.monotonic() - start < 3.0 + 2.0  # woken as they end, not at a poll
    assert len(asked) <= 1, f"asked the scheduler {len(asked)} times in 3 s"
    asked.clear()
    futures = [_pinned(client, _sleep, 1.0, worker=w) for w in (a, b)]
    assert gather_watching(client, futures, [a, b], "test") == [1.0, 1.0]
    assert asked == []  # the workers' events are followed already


def test_waits_leave_one_subscription_per_live_worker(client):
    """However many waits ran, the client follows each worker's own topic once, and a user's
    handler on "all" keeps receiving the cluster's events."""
    seen = []
    client.subscribe_topic("all", lambda event: seen.append(event[1].get("action")))
    try:
        a, b = sorted(live_workers(client))
        for _ in range(5):
            gather_watching(client, [_pinned(client, _sleep, 0.01, worker=w) for w in (a, b)], [a, b], "test")
        followed = watch._watch_of(client)
        assert followed._followed == {a, b} and followed._waits == set()
        subscribers = client.run_on_scheduler(_subscribers, [a, b, "all"])
        assert subscribers[a] == subscribers[b] == [client.id]
        assert subscribers["all"] == [client.id]  # the user's, not replaced
        client.scatter(1)  # the scheduler publishes "scatter" on "all"
        deadline = time.monotonic() + 10
        while "scatter" not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "scatter" in seen
    finally:
        client.unsubscribe_topic("all")


def test_a_dead_workers_removal_wakes_the_wait_at_once(monkeypatch):
    """A pinned task whose worker dies, with no peer to report it: the removal event ends the
    wait, long before the backstop would; the dead worker's topic is then unsubscribed."""
    monkeypatch.setattr(watch, "BACKSTOP_S", 120.0)
    monkeypatch.setattr(watch, "LOST_GRACE_S", 0.5)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            a, b = sorted(live_workers(cl))
            gather_watching(cl, [_pinned(cl, _sleep, 0.01, worker=w) for w in (a, b)], [a, b], "test")  # followed
            futures = [_pinned(cl, _sleep, 0.1, worker=a), _pinned(cl, _sleep, 120, worker=b)]
            time.sleep(1.0)
            killed = time.monotonic()
            cl.run(_die, workers=[b], wait=False)
            with pytest.raises(RuntimeError, match=rf"worker\(s\) {b} \(rank 1\) died or left the cluster during test"):
                gather_watching(cl, futures, [a, b], "test")
            assert time.monotonic() - killed < 5.0
            assert watch._watch_of(cl)._followed == {a}
            deadline = time.monotonic() + 10  # the unsubscription travels on the client's stream
            while cl.run_on_scheduler(_subscribers, [b])[b] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert cl.run_on_scheduler(_subscribers, [b])[b] == []


def test_the_backstop_finds_a_worker_whose_removal_was_missed(client, monkeypatch):
    """A removal event can be missed only as a worker starts being followed; the backstop's
    question to the scheduler finds the worker gone anyway."""
    monkeypatch.setattr(watch, "BACKSTOP_S", 0.5)
    monkeypatch.setattr(watch, "LOST_GRACE_S", 0.2)
    a, b = sorted(live_workers(client))
    gather_watching(client, [_pinned(client, _sleep, 0.01, worker=w) for w in (a, b)], [a, b], "test")
    real = watch.live_workers
    monkeypatch.setattr(watch, "live_workers", lambda c: real(c) - {b})  # b "left" without an event
    future = _pinned(client, _sleep, 4, worker=b)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"{b} \(rank 0\) died or left"):
        gather_watching(client, [future], [b], "test")
    assert time.monotonic() - start < 5.0


def _exact(n=600, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 4)) * 4) / 4).astype(np.float32)
    return X, (X[:, 0] + rng.normal(size=n) > 0).astype(np.float32)


@pytest.mark.parametrize("when", ["before", "during"])
def test_predict_on_a_matrix_whose_worker_died_fails_naming_it(monkeypatch, when):
    """daskgb.dask.predict on a DaskQuantileMatrix pins a task to each worker holding rows: a
    worker that died before the predict, or during it, is an error naming it within seconds
    (it hung: a task pinned to a gone worker waits for ever)."""
    import daskgb.dask as dgb

    monkeypatch.setattr(watch, "LOST_GRACE_S", 0.5)
    X, y = _exact()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            a, b = sorted(live_workers(cl))
            from placement import on_workers

            m = dgb.DaskQuantileMatrix(cl, on_workers(cl, X, [300, 300], [0, 1]), on_workers(cl, y, [300, 300], [0, 1]))
            booster = dgb.train(cl, {"max_depth": 3, "device": "cpu"}, m, 3, verbose_eval=False)["booster"]
            victim = m.workers[1]
            if when == "during":
                # The victim's predict takes long enough to kill the worker under it.
                cl.run(_slow_predict, workers=[victim])
                threading = __import__("threading")
                threading.Timer(1.0, lambda: cl.run(_die, workers=[victim], wait=False)).start()
            else:
                cl.run(_die, workers=[victim], wait=False)
                time.sleep(1.0)
            started = time.monotonic()
            with pytest.raises(RuntimeError, match=rf"worker\(s\) {victim} \(rank 1\) died or left the cluster "
                                                   r"during prediction"):
                dgb.predict(cl, booster, m)
            assert time.monotonic() - started < 15


@pytest.mark.parametrize("operation", ["take", "labels", "train", "eval"])
def test_every_operation_on_a_matrix_whose_worker_died_fails_naming_it(monkeypatch, operation):
    """take, labels, train, and training with it as an eval set: after a worker holding its rows
    died, each fails within seconds naming it (tasks pinned to a gone worker wait for ever)."""
    import daskgb.dask as dgb

    monkeypatch.setattr(watch, "LOST_GRACE_S", 0.5)
    X, y = _exact()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            from placement import on_workers

            m = dgb.DaskQuantileMatrix(cl, on_workers(cl, X, [300, 300], [0, 1]), on_workers(cl, y, [300, 300], [0, 1]))
            other = dgb.DaskQuantileMatrix(cl, on_workers(cl, X, [300, 300], [1, 0], fresh=True),
                                           on_workers(cl, y, [300, 300], [1, 0], fresh=True), ref=m)
            victim = m.workers[1]
            cl.run(_die, workers=[victim], wait=False)
            time.sleep(1.0)
            params = {"max_depth": 3, "device": "cpu"}
            run = {"take": lambda: m.take(np.arange(0, 600, 2)),
                   "labels": lambda: m.labels(),
                   "train": lambda: dgb.train(cl, params, m, 3, verbose_eval=False),
                   "eval": lambda: dgb.train(cl, params, other, 3, evals=[(m, "v")], verbose_eval=False)}[operation]
            started = time.monotonic()
            with pytest.raises(RuntimeError) as info:
                run()
            assert time.monotonic() - started < 15
            message = str(info.value)
            assert victim in message and any(w in message for w in ("died", "left", "lost")), message


def _slow_predict():
    """On a worker: its daskgb predict of a matrix sleeps first (so that it can be killed during it)."""
    import daskgb.dask.prediction as pred_module

    real = pred_module._predict_local

    def slow(*args, **kwargs):
        time.sleep(30)
        return real(*args, **kwargs)

    pred_module._predict_local = slow
