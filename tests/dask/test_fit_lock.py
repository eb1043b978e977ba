"""Fits on the same workers run one at a time (daskgb.dask.fit_lock): a second fit waits, says so,
and gives up naming the busy workers after the setting dask.wait-for-busy-workers."""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np
import pytest

import daskgb.dask as dgb
from daskgb.callback import TrainingCallback
from daskgb.dask import fit_lock

distributed = pytest.importorskip("distributed")

from placement import on_workers  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Port 8787 is already in use:UserWarning")

PARAMS = {"objective": "binary:logistic", "max_depth": 4, "device": "cpu"}


@pytest.fixture(scope="module")
def client():
    # Two threads a worker: without the lock both fits' ranks would train side by side.
    import dask

    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                      dashboard_address=None) as c:
            with distributed.Client(c) as cl:
                yield cl


@pytest.fixture(scope="module")
def dtrain(client):
    rng = np.random.default_rng(0)
    X = (np.round(rng.normal(size=(3000, 6)) * 4) / 4).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=3000) > 0).astype(np.float32)
    chunks, placement = [1500, 1500], [0, 1]
    return dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                  on_workers(client, y, chunks, placement))


class Stamp(TrainingCallback):
    """Writes "<label> start|end <time> <worker>" lines to a file as training starts and ends on each worker."""

    def __init__(self, path, label):
        self.path, self.label = str(path), label

    def _stamp(self, what):
        from distributed import get_worker

        with open(self.path, "a") as f:
            f.write(f"{self.label} {what} {time.time()!r} {get_worker().address}\n")

    def before_training(self, model):
        self._stamp("start")
        return model

    def after_training(self, model):
        self._stamp("end")
        return model


class StopWhenFileExists(TrainingCallback):
    def __init__(self, path):
        self.path = str(path)

    def after_iteration(self, model, epoch, evals_log):
        return os.path.exists(self.path)


def _stamps(path) -> dict:
    """{label: (first start, last end)} over the workers."""
    spans: dict = {}
    for line in open(path):
        label, what, at, _ = line.split()
        first, last = spans.get(label, (float("inf"), float("-inf")))
        spans[label] = (min(first, float(at)), last) if what == "start" else (first, max(last, float(at)))
    return spans


def test_two_fits_on_the_same_workers_take_turns(client, dtrain, tmp_path):
    fits = {"a": {**PARAMS, "eta": 0.3}, "b": {**PARAMS, "eta": 0.1, "max_depth": 5}}
    stamps = tmp_path / "stamps.txt"
    results, errors = {}, []
    ready = threading.Barrier(2)

    def fit(label):
        try:
            ready.wait()
            results[label] = dgb.train(client, fits[label], dtrain, 60, callbacks=[Stamp(stamps, label)],
                                       verbose_eval=False)
        except BaseException as e:  # reported below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=fit, args=(label,)) for label in fits]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    spans = _stamps(stamps)
    (a0, a1), (b0, b1) = spans["a"], spans["b"]
    assert a1 <= b0 or b1 <= a0, f"the fits' training overlapped: a {spans['a']}, b {spans['b']}"
    for label, params in fits.items():
        alone = dgb.train(client, params, dtrain, 60, callbacks=[Stamp(tmp_path / "alone.txt", label)],
                          verbose_eval=False)
        assert results[label]["booster"].to_dict() == alone["booster"].to_dict(), label


def _start_long_fit(client, dtrain, tmp_path):
    """A fit that trains until tmp_path/stop exists, started in a thread; returns once it trains."""
    stamps, stop = tmp_path / "long.txt", tmp_path / "stop"
    out = {}

    def fit():
        out["result"] = dgb.train(client, PARAMS, dtrain, 100_000, verbose_eval=False,
                                  callbacks=[Stamp(stamps, "long"), StopWhenFileExists(stop)])

    thread = threading.Thread(target=fit)
    thread.start()
    deadline = time.monotonic() + 60
    while not (stamps.exists() and stamps.read_text().count("start") == 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stamps.exists(), "the long fit did not start"
    return thread, stop, out


def test_a_fit_waiting_for_busy_workers_says_so_once_then_trains(client, dtrain, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(fit_lock, "WARN_AFTER_S", 0.5)
    thread, stop, out = _start_long_fit(client, dtrain, tmp_path)
    threading.Timer(2.5, stop.touch).start()
    with caplog.at_level(logging.WARNING, logger="daskgb.dask.fit_lock"):
        result = dgb.train(client, PARAMS, dtrain, 3, verbose_eval=False)
    thread.join(60)
    assert result["booster"].num_boosted_rounds() == 3 and out["result"]["booster"].num_boosted_rounds() > 0
    warnings = [r.getMessage() for r in caplog.records if r.name == "daskgb.dask.fit_lock"]
    assert len(warnings) == 1, warnings
    for address in dtrain.workers:  # both hold a rank of the long fit
        assert address in warnings[0]
    assert "waits for workers busy with another daskgb fit" in warnings[0] and "rank 0 of 2" in warnings[0]


def test_a_fit_gives_up_on_busy_workers_naming_them(client, dtrain, tmp_path, settings):
    settings({"dask.wait-for-busy-workers": 1.0})
    thread, stop, out = _start_long_fit(client, dtrain, tmp_path)
    try:
        start = time.monotonic()
        with pytest.raises(fit_lock.WorkersBusyError, match=r"waited 1 s for workers busy with another daskgb fit: "
                                                             r".*rank 0 of 2.*dask.wait-for-busy-workers") as info:
            dgb.train(client, PARAMS, dtrain, 3, verbose_eval=False)
        assert time.monotonic() - start < 10
        assert sorted(info.value.workers) == sorted(dtrain.workers)
    finally:
        stop.touch()
        thread.join(60)
    assert out["result"]["booster"].num_boosted_rounds() > 0
    # The locks are free again: the next fit trains at once.
    assert dgb.train(client, PARAMS, dtrain, 2, verbose_eval=False)["booster"].num_boosted_rounds() == 2


def test_a_grid_search_of_parallel_jobs_on_shared_workers(client, dtrain):
    """scikit-learn's GridSearchCV with more jobs than workers (each job a fit on every worker):
    every candidate is fitted and scored, none times out waiting for another's ranks."""
    pytest.importorskip("sklearn")
    from joblib import parallel_backend
    from sklearn.model_selection import GridSearchCV

    import daskgb

    est = daskgb.DaskGBRegressor(n_estimators=8, max_depth=2, device="cpu", client=client)
    search = GridSearchCV(est, {"max_depth": [2, 3], "learning_rate": [0.1, 0.3]}, cv=2, n_jobs=4,
                          error_score="raise")
    with parallel_backend("threading", n_jobs=4):
        search.fit(dtrain)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) == 4 and np.all(np.isfinite(scores)), scores


def test_a_matrix_pickles_without_its_client(client, dtrain):
    """A DaskQuantileMatrix travels to another process (scikit-learn's process-based search
    pickles it) as its futures' keys and its scheduler's address; unpickled, it attaches to a
    client of that scheduler and trains as the original."""
    import pickle

    again = pickle.loads(pickle.dumps(dtrain))
    assert again.client.scheduler.address == client.scheduler.address
    a = dgb.train(client, {"max_depth": 2, "device": "cpu"}, dtrain, 3, verbose_eval=False)["booster"]
    b = dgb.train(again.client, {"max_depth": 2, "device": "cpu"}, again, 3, verbose_eval=False)["booster"]
    assert a.to_dict()["trees"] == b.to_dict()["trees"]


def test_a_grid_search_in_processes(client, dtrain):
    """GridSearchCV's default (process) backend pickles the estimator and the matrix for each
    job: both travel without their client, and the jobs train on the same cluster."""
    pytest.importorskip("sklearn")
    from sklearn.model_selection import GridSearchCV

    import daskgb

    search = GridSearchCV(daskgb.DaskGBRegressor(n_estimators=4, max_depth=2, device="cpu"), {"max_depth": [2, 3]},
                          cv=2, n_jobs=2, error_score="raise")
    search.fit(dtrain)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
