"""Rounds queued ahead of the host (the queued-rounds and cuda-graphs paths, growth/device.py
queue_forest and growth/graphs.py): the host queues round r+1 before it reads round r's trees,
and the model is the one training gives when the host reads every round's trees first, bit
for bit (GPU only)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb

pytestmark = pytest.mark.gpu

CASES = [
    dict(objective="binary:logistic", max_depth=6),
    dict(objective="reg:squarederror", max_depth=4, subsample=0.7, colsample_bytree=0.8),
    dict(objective="binary:logistic", max_depth=5, subsample=0.3, sampling_method="gradient_based"),
    dict(objective="multi:softprob", num_class=3, max_depth=4),
]


def _matrix(objective, n=4000, f=8, seed=0):
    import cupy

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) + rng.normal(size=n) * 0.3
    if objective == "binary:logistic":
        y = (score > 0).astype(np.float32)
    elif objective.startswith("multi:"):
        y = np.digitize(score, [-0.5, 0.7]).astype(np.float32)
    else:
        y = score.astype(np.float32)
    return X, daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y), max_bin=64, device="cuda")


def assert_same_model(a, b):
    """The same trees, base score and best round: the models' JSON but for their attributes
    (which name the path each was trained by)."""
    da, db = a.to_dict(), b.to_dict()
    da.pop("attributes"), db.pop("attributes")
    assert json.dumps(da) == json.dumps(db)


def _order_of_calls(monkeypatch, settings):
    """Log ("queue", round index) and ("read", round index) as training makes the calls."""
    from daskgb.growth import device

    log = []
    real_queue, real_trees = device.queue_forest, device.QueuedForest.trees
    settings({"training.cuda-graphs": False})  # every round then takes queue_forest

    def queue(*a, **k):
        forest = real_queue(*a, **k)
        forest._index = sum(1 for e in log if e[0] == "queue")
        log.append(("queue", forest._index))
        return forest

    def trees(self):
        log.append(("read", getattr(self, "_index", None)))
        return real_trees(self)

    monkeypatch.setattr(device, "queue_forest", queue)
    monkeypatch.setattr(device.QueuedForest, "trees", trees)
    return log


@pytest.mark.parametrize("case", range(len(CASES)))
def test_queued_rounds_give_the_model_of_rounds_read_one_by_one(case, monkeypatch, settings):
    params = {**CASES[case], "device": "cuda", "seed": 7, "max_bin": 64}
    X, m = _matrix(params["objective"], seed=case)
    log = _order_of_calls(monkeypatch, settings)
    queued = daskgb.train(params, m, 8, verbose_eval=False)
    assert queued.attr("training_path") == "queued-rounds"
    # The host read round r's trees only once round r + 1 was queued.
    assert log[:4] == [("queue", 0), ("queue", 1), ("read", 0), ("queue", 2)]
    assert log[-2:] == [("read", 6), ("read", 7)]
    settings({"training.queue-rounds": False})
    log.clear()
    one_by_one = daskgb.train(params, m, 8, verbose_eval=False)
    assert one_by_one.attr("training_path") == "device-levels"
    assert "queued-rounds: turned off" in one_by_one.attr("training_path_refused")
    assert all(kind == "queue" for kind, _ in log[::2]) and all(
        a[1] == b[1] for a, b in zip(log[::2], log[1::2])), "with queuing off each round is read before the next"
    assert_same_model(queued, one_by_one)
    np.testing.assert_array_equal(np.asarray(queued.predict(X, output_margin=True)),
                                  np.asarray(one_by_one.predict(X, output_margin=True)))


def test_rounds_are_read_one_by_one_where_the_host_looks_at_each(monkeypatch, settings):
    """Eval sets, callbacks and custom objectives see each round before the next is queued."""
    X, m = _matrix("binary:logistic")
    log = _order_of_calls(monkeypatch, settings)
    res = {}
    b = daskgb.train({"device": "cuda", "max_depth": 3, "objective": "binary:logistic"}, m, 4, evals=[(m, "train")],
                 evals_result=res, verbose_eval=False)
    assert log == [("queue", 0), ("read", 0), ("queue", 1), ("read", 1), ("queue", 2), ("read", 2),
                   ("queue", 3), ("read", 3)]
    assert len(res["train"]["logloss"]) == 4
    assert b.attr("training_path") == "device-levels"
    assert "eval sets are watched every round" in b.attr("training_path_refused")


def test_queued_rounds_write_the_same_checkpoints(tmp_path, settings):
    from daskgb.checkpoint import Checkpoints

    params = {"device": "cuda", "max_depth": 4, "objective": "binary:logistic", "max_bin": 64}
    _, m = _matrix("binary:logistic", seed=3)
    daskgb.train(params, m, 9, verbose_eval=False, checkpoint_dir=tmp_path / "queued", checkpoint_every=4)
    settings({"training.queue-rounds": False})
    daskgb.train(params, m, 9, verbose_eval=False, checkpoint_dir=tmp_path / "one", checkpoint_every=4)
    a, b = Checkpoints(tmp_path / "queued", 4).latest(), Checkpoints(tmp_path / "one", 4).latest()
    assert a["rounds"] == b["rounds"] == 9
    a["model"].pop("attributes"), b["model"].pop("attributes")
    assert json.dumps(a["model"]) == json.dumps(b["model"])
    assert sorted(p.name for p in (tmp_path / "queued").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


def _graph_launches(monkeypatch):
    from daskgb.growth import graphs

    launches = []
    real = graphs._ForestGraph.launch

    def launch(self, gpair):
        launches.append(1)
        return real(self, gpair)

    monkeypatch.setattr(graphs._ForestGraph, "launch", launch)
    return launches


@pytest.mark.parametrize("case", range(len(CASES)))
def test_rounds_replayed_as_cuda_graphs_give_the_same_model(case, monkeypatch, settings):
    params = {**CASES[case], "device": "cuda", "seed": 11, "max_bin": 64}
    X, m = _matrix(params["objective"], seed=10 + case)
    launches = _graph_launches(monkeypatch)
    graphed = daskgb.train(params, m, 7, verbose_eval=False)
    # Round 0 runs launch by launch, round 1 is captured, and every round from there replays
    # it; column sampling draws other features each tree, so it never takes a graph.
    sampled = params.get("colsample_bytree", 1.0) < 1
    assert len(launches) == (0 if sampled else 6)
    assert graphed.attr("training_path") == ("queued-rounds" if sampled else "cuda-graphs")
    settings({"training.cuda-graphs": False})
    launches.clear()
    plain = daskgb.train(params, m, 7, verbose_eval=False)
    assert not launches and plain.attr("training_path") == "queued-rounds"
    assert_same_model(graphed, plain)
    np.testing.assert_array_equal(np.asarray(graphed.predict(X, output_margin=True)),
                                  np.asarray(plain.predict(X, output_margin=True)))


def test_a_failed_capture_warns_and_training_goes_on(monkeypatch):
    from daskgb.growth import graphs

    params = {"device": "cuda", "max_depth": 5, "objective": "binary:logistic", "max_bin": 64}
    _, m = _matrix("binary:logistic", seed=4)
    expected = daskgb.train(params, m, 5, verbose_eval=False)

    def refuse(*a, **k):
        raise RuntimeError("capture refused (test)")

    monkeypatch.setattr(graphs._ForestGraph, "__init__", refuse)
    with pytest.warns(RuntimeWarning, match="capture refused"):
        got = daskgb.train(params, m, 5, verbose_eval=False)
    assert expected.attr("training_path") == "cuda-graphs"
    assert got.attr("training_path").startswith("queued-rounds (the CUDA graph capture failed: RuntimeError: capture")
    assert_same_model(got, expected)


def test_graphs_follow_a_learning_rate_that_changes():
    """A callback that changes the learning rate each round: each rate is its own launches
    (no queuing with callbacks, so this drives ForestGraphs directly)."""
    import cupy

    from daskgb.backend import cupy_backend as cb
    from daskgb.collective import LocalCommunicator
    from daskgb.growth import device, graphs as graphs_module
    from daskgb.params import TrainParams

    X, m = _matrix("reg:squarederror", seed=5)
    rng = np.random.default_rng(0)
    g = cupy.asarray(np.stack([rng.normal(size=X.shape[0]), np.ones(X.shape[0])], axis=1).astype(np.float32))
    graphs = graphs_module.ForestGraphs(enabled=True)
    comm = LocalCommunicator()
    try:
        for eta in (0.3, 0.3, 0.3, 0.1, 0.1, 0.3):
            params = TrainParams.from_dict({"max_depth": 4, "learning_rate": eta})
            got = graphs.queue(m.ellpack, g, params, comm, True, [0]).trees()[0]
            fixed, scale = cb.prepare_gradients(g, wait=False)
            want = device.queue_forest(m.ellpack, fixed, scale, params, comm, True, [0]).trees()[0]
            for name in ("left", "right", "feature", "bin", "value", "gain", "cover"):
                np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"eta {eta} {name}")
        assert len(graphs._graphs) == 2 and graphs.failure is None
    finally:
        graphs.close()


def test_graph_memory_is_counted_while_training_and_freed_after(monkeypatch):
    """The graphs' blocks live outside CuPy's default pool: graph_memory_bytes() reports them
    (memory figures add it), and training's end frees them."""
    from daskgb.growth import graphs

    seen = []
    real = graphs._ForestGraph.launch

    def launch(self, gpair):
        seen.append(graphs.graph_memory_bytes())
        return real(self, gpair)

    monkeypatch.setattr(graphs._ForestGraph, "launch", launch)
    X, m = _matrix("binary:logistic", n=20_000, seed=6)
    daskgb.train({"device": "cuda", "max_depth": 6, "objective": "binary:logistic", "max_bin": 64}, m, 4,
                 verbose_eval=False)
    # At least the row index, scratch and leaves (4 bytes a row each) and the pairs (8 a row).
    assert seen and min(seen) >= 20 * X.shape[0]
    assert graphs.graph_memory_bytes() == 0
