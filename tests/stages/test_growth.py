"""The growth stage (daskgb/growth/): the driver, device against host growth, queued rounds, CUDA graphs.

driver.py decides which nodes split (depthwise a level at a time in id order, lossguide the
largest loss change first, both within max_leaves); host.py grows trees by host-decided
levels (the reference); device.py grows depthwise trees with the device deciding what the
host's driver and grower decide, with the same arithmetic, so every field of every tree
and the rows' leaves (the training margins) must be equal bit for bit; the host may queue
round r + 1 before it reads round r's trees (device.py queue_forest), and graphs.py replays
a round's launches as a CUDA graph: either way the model is the one the host gets reading
every round's trees first, bit for bit. The driver's tests run everywhere, the rest on a
GPU (marked gpu). Whole trees against XGBoost's are tests/test_grow_policy.py's.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
from daskgb.growth.driver import Candidate, Driver
from daskgb.layouts import SPLIT_DTYPE
from daskgb.split import SplitParams


# --------------------------------------------------------------------------- the driver
class _Evaluation:
    """Stands in for the grower's evaluation: the driver reads only its split records."""

    def __init__(self, recs):
        self.recs = recs


def _cand(nid, depth, gain, feature=0):
    rec = np.zeros(1, dtype=SPLIT_DTYPE)
    rec["gain"], rec["feature"], rec["left_hess"], rec["right_hess"] = gain, feature, 1.0, 1.0
    return Candidate(nid, depth, float(rec["gain"][0]), (_Evaluation(rec), 0))


def test_lossguide_pops_the_largest_loss_change_first_ties_to_the_older_node():
    d = Driver("lossguide", 0, 0, SplitParams())
    d.push([_cand(3, 2, 0.5), _cand(1, 1, 2.0), _cand(4, 2, 2.0), _cand(2, 1, 1e-7)])  # 1e-7: below RT_EPS
    assert [d.pop()[0].nid for _ in range(3)] == [1, 4, 3]
    assert d.pop() == []
    assert d.num_leaves == 4


def test_lossguide_invalid_top_ends_the_tree():
    # gamma (min_split_loss) 1.0: the best candidate fails it, and so does everything behind it.
    d = Driver("lossguide", 0, 0, SplitParams(min_split_loss=1.0))
    d.push([_cand(1, 1, 0.9), _cand(2, 1, 0.5)])
    assert d.pop() == [] and d.pop() == []


def test_depthwise_pops_a_level_in_id_order_within_max_leaves():
    d = Driver("depthwise", 0, 4, SplitParams())
    d.push([_cand(6, 2, 1.0), _cand(3, 2, 3.0), _cand(5, 2, 0.0), _cand(4, 2, 2.0)])  # 5: no gain, not queued
    assert [c.nid for c in d.pop()] == [3, 4, 6]
    assert d.num_leaves == 4
    assert not d.child_valid(_cand(3, 2, 3.0))  # the leaf budget is spent
    d = Driver("depthwise", 3, 0, SplitParams())
    assert d.child_valid(_cand(1, 1, 1.0)) and not d.child_valid(_cand(3, 2, 1.0))


# --------------------------------------------------------------------------- device growth against host growth (GPU)
DEVICE_CASES = [
    dict(objective="reg:squarederror", max_depth=6, max_bin=64),
    dict(objective="binary:logistic", max_depth=8, max_bin=256, reg_alpha=0.5, min_child_weight=2),
    dict(objective="reg:logistic", max_depth=4, max_bin=16, gamma=0.2, reg_lambda=5),
    dict(objective="binary:logistic", max_depth=5, max_bin=128, max_delta_step=0.7),
    dict(objective="reg:squarederror", max_depth=1, max_bin=32),
    dict(objective="reg:squarederror", max_depth=10, max_bin=32, min_child_weight=0),
    # Few valid splits: whole levels end early, some nodes stay leaves at every depth.
    dict(objective="binary:logistic", max_depth=7, max_bin=64, min_child_weight=60, gamma=1.0),
    dict(objective="reg:squarederror", max_depth=6, max_bin=64, colsample_bytree=0.7, colsample_bylevel=0.6),
    dict(objective="reg:pseudohubererror", max_depth=6, max_bin=48, subsample=0.7),
    # A tree per class, grown one after another (the host grower grows them together).
    dict(objective="multi:softprob", num_class=3, max_depth=6, max_bin=64, colsample_bytree=0.8),
    # Lossguide: the leaf limit ends the tree; then a depth limit too, and gamma ending it early;
    # few valid splits; one split only; a tree per class.
    dict(objective="binary:logistic", grow_policy="lossguide", max_depth=0, max_leaves=31, max_bin=64),
    dict(objective="reg:squarederror", grow_policy="lossguide", max_depth=4, max_leaves=40, max_bin=32, gamma=0.3),
    dict(objective="reg:logistic", grow_policy="lossguide", max_depth=0, max_leaves=64, max_bin=128,
         min_child_weight=40, reg_alpha=0.5),
    dict(objective="reg:squarederror", grow_policy="lossguide", max_depth=0, max_leaves=2, max_bin=32),
    dict(objective="multi:softprob", num_class=3, grow_policy="lossguide", max_depth=0, max_leaves=12, max_bin=64),
]


def _data(seed, n, f=10, layout="dense"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3] * 2)
    if layout == "missing":
        X[rng.random(X.shape) < 0.2] = np.nan
    elif layout == "sparse":
        X[rng.random(X.shape) < 0.7] = 0.0
    Z = np.nan_to_num(X)
    score = Z[:, 0] - Z[:, 1] * Z[:, 2] + np.sin(Z[:, 3]) + rng.normal(size=n) * 0.5
    return X, score


def _matrix(X, score, objective, layout, weight=None, max_bin=256):
    import cupy
    import scipy.sparse as sp

    y = (score > 0).astype(np.float32) if objective == "binary:logistic" else score.astype(np.float32)
    if objective == "multi:softprob":
        y = np.digitize(score, [-0.5, 0.7]).astype(np.float32)
    if objective == "reg:logistic":
        y = (1 / (1 + np.exp(-score))).astype(np.float32)
    data = sp.csr_matrix(X) if layout == "sparse" else cupy.asarray(X)
    return daskgb.QuantileMatrix(data, cupy.asarray(y), weight=None if weight is None else cupy.asarray(weight),
                                 max_bin=max_bin, device="cuda")


def _train_both(params, m, X, rounds):
    """(boosters, training-metric histories, predictions on X): device grower first, host second.
    The training metric comes from the margins training keeps, which the rows' leaves move."""
    import dask.config

    boosters, histories, preds = [], [], []
    # The training eval set is scored with the queued rounds (cuda-graphs where no tree draws columns).
    device_path = "queued-rounds" if min(params.get("colsample_bytree", 1), params.get("colsample_bylevel", 1)) < 1 \
        else "cuda-graphs"
    for enabled, path in ((True, device_path), (False, "host-levels")):
        res = {}
        with dask.config.set({"daskgb.training.device-growth": enabled}):
            b = daskgb.train({**params, "device": "cuda", "seed": 3}, m, rounds, evals=[(m, "train")],
                             evals_result=res, verbose_eval=False)
        assert b.attr("training_path") == path
        boosters.append(b)
        histories.append(res["train"])
        preds.append(np.asarray(b.predict(X, output_margin=True)))
    return boosters, histories, preds


def assert_identical(a, b):
    assert a.num_boosted_rounds() == b.num_boosted_rounds()
    for i, (ta, tb) in enumerate(zip(a.trees, b.trees)):
        for name in ("left", "right", "parent", "feature", "bin", "threshold", "default_left", "value",
                     "base_weight", "gain", "cover", "depth"):
            x, y = getattr(ta, name), getattr(tb, name)
            assert x.dtype == y.dtype, f"tree {i} {name}: {x.dtype} != {y.dtype}"
            np.testing.assert_array_equal(x, y, err_msg=f"tree {i} {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["dense", "missing", "sparse"])
@pytest.mark.parametrize("case", range(len(DEVICE_CASES)))
def test_device_trees_equal_host_trees(case, layout):
    params = dict(DEVICE_CASES[case])
    max_bin = params.pop("max_bin")
    X, score = _data(case, 3000, layout=layout)
    w = np.random.default_rng(case).uniform(0.5, 2, X.shape[0]).astype(np.float32) if case % 2 else None
    m = _matrix(X, score, params["objective"], layout, w, max_bin)
    (dev, host), (h_dev, h_host), (p_dev, p_host) = _train_both(params, m, X, 6)
    assert_identical(dev, host)
    assert h_dev == h_host
    np.testing.assert_array_equal(p_dev, p_host)


@pytest.mark.gpu
def test_root_only_trees():
    """A tree whose root does not split: one leaf, every row on it."""
    X, score = _data(5, 2000)
    m = _matrix(X, score, "reg:squarederror", "dense")
    (dev, host), (h_dev, h_host), _ = _train_both({"max_depth": 4, "gamma": 1e9}, m, X, 2)
    assert dev.trees[0].n_nodes == 1
    assert_identical(dev, host)
    assert h_dev == h_host


@pytest.mark.gpu
def test_cases_outside_its_scope_take_the_host_grower():
    """The planner's refusals (tests/test_training_plan.py tests each) on a real fit."""
    X, score = _data(4, 1000)
    m = _matrix(X, score, "reg:squarederror", "dense")
    for change, why in ((dict(grow_policy="lossguide", max_depth=6), "grow_policy='lossguide' without max_leaves"),
                        (dict(colsample_bynode=0.5), "colsample_bynode=0.5"),
                        (dict(max_depth=13), "max_depth=13 > 12")):
        b = daskgb.train({"device": "cuda", "max_depth": 6, **change}, m, 2, verbose_eval=False)
        assert b.attr("training_path") == "host-levels", change
        assert f"device-levels: {why}" in b.attr("training_path_refused"), b.attr("training_path_refused")


@pytest.mark.gpu
def test_nan_gradients_are_an_error():
    """The device grower's scale is made on the device without a host wait; NaN gradients
    are still reported, once the round's trees are read back and before they are used."""
    import cupy

    from daskgb.backend import cupy_backend as cb
    from daskgb.collective import LocalCommunicator
    from daskgb.growth import device
    from daskgb.params import TrainParams

    X, score = _data(2, 1000)
    m = _matrix(X, score, "reg:squarederror", "dense")
    g = cupy.stack([cupy.asarray(score, dtype=cupy.float32), cupy.ones(1000, dtype=cupy.float32)], axis=1)
    g[5, 0] = cupy.nan
    fixed, scale = cb.prepare_gradients(g, wait=False)
    params = TrainParams.from_dict({"max_depth": 3})
    with pytest.raises(ValueError, match="NaN"):
        device.grow_forest(m.ellpack, fixed, scale, params, LocalCommunicator(), True)


@pytest.mark.gpu
@pytest.mark.parametrize("max_depth", range(1, 13))
def test_level_histograms_share_one_buffer_without_overlap(max_depth):
    """growth/device.py's _HistogramArena: at every level that builds, the parents' histograms, the
    built children's and all children's are disjoint views of one buffer; the children are
    the next level's parents; the buffer is no larger than what one level holds at once."""
    from daskgb.growth.device import _HistogramArena

    total_bins = 7
    arena = _HistogramArena(max_depth, total_bins)
    node = total_bins * 2 * 8
    base = arena.buf.data.ptr

    def span(view, nodes):
        assert view.shape == (nodes, total_bins, 2) and view.flags.c_contiguous
        lo = (view.data.ptr - base) // node
        assert 0 <= lo and lo + nodes <= arena.nodes
        return set(range(lo, lo + nodes))

    assert span(arena.hist(0), 1)
    most = 1
    for depth in range(max_depth - 1):  # the levels that build children
        k = 2**depth
        parents, built, children = span(arena.hist(depth), k), span(arena.built(depth), k), \
            span(arena.children(depth), 2 * k)
        assert not (parents & built) and not (parents & children) and not (built & children)
        assert arena.children(depth).data.ptr == arena.hist(depth + 1).data.ptr
        most = max(most, 4 * k)
    assert arena.nodes == most


# --------------------------------------------------------------------------- queued rounds and CUDA graphs (GPU)
QUEUED_CASES = [
    dict(objective="binary:logistic", max_depth=6),
    dict(objective="reg:squarederror", max_depth=4, subsample=0.7, colsample_bytree=0.8),
    dict(objective="binary:logistic", max_depth=5, subsample=0.3, sampling_method="gradient_based"),
    dict(objective="multi:softprob", num_class=3, max_depth=4),
]


def _queued_matrix(objective, n=4000, f=8, seed=0, ref=None):
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
    return X, daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y), max_bin=64, device="cuda", ref=ref)


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


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(QUEUED_CASES)))
def test_queued_rounds_give_the_model_of_rounds_read_one_by_one(case, monkeypatch, settings):
    params = {**QUEUED_CASES[case], "device": "cuda", "seed": 7, "max_bin": 64}
    X, m = _queued_matrix(params["objective"], seed=case)
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


@pytest.mark.gpu
@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_eval_sets_and_early_stopping_keep_the_queued_path_and_its_model(objective, settings):
    """Eval sets are scored on the device with the queued round and early stopping reads them a
    round later: the path stays cuda-graphs, and the model, the history and the round it stopped
    at are the ones of rounds read one by one."""
    X, m = _queued_matrix(objective, seed=11)
    _, mv = _queued_matrix(objective, n=1500, seed=12, ref=m)
    params = {"objective": objective, "device": "cuda", "max_depth": 6, "eta": 0.6, "max_bin": 64,
              "eval_metric": ["logloss" if objective == "binary:logistic" else "mlogloss", "auc"]}
    if objective == "multi:softprob":
        params["num_class"] = 3
    models, histories = [], []
    for queue in (True, False):
        settings({"training.queue-rounds": queue})
        res = {}
        b = daskgb.train(params, m, 200, evals=[(m, "train"), (mv, "valid")], evals_result=res, verbose_eval=False,
                         early_stopping_rounds=4)
        assert b.attr("training_path") == ("cuda-graphs" if queue else "device-levels")
        models.append(b)
        histories.append(res)
    queued, one_by_one = models
    assert queued.best_iteration == one_by_one.best_iteration < 190, "early stopping must stop these fits"
    assert queued.num_boosted_rounds() == queued.best_iteration + 5
    assert histories[0] == histories[1]
    assert_same_model(queued, one_by_one)


@pytest.mark.gpu
def test_rounds_are_read_one_by_one_where_the_host_looks_at_each(monkeypatch, settings):
    """A custom metric and a callback that may write see each round before the next is queued."""
    from daskgb.callback import LearningRateScheduler

    X, m = _queued_matrix("binary:logistic")
    params = {"device": "cuda", "max_depth": 3, "objective": "binary:logistic"}
    log = _order_of_calls(monkeypatch, settings)
    res = {}
    b = daskgb.train(params, m, 4, evals=[(m, "train")], evals_result=res, verbose_eval=False,
                     custom_metric=lambda predt, d: ("zero", 0.0))
    assert log == [("queue", 0), ("read", 0), ("queue", 1), ("read", 1), ("queue", 2), ("read", 2),
                   ("queue", 3), ("read", 3)]
    assert len(res["train"]["logloss"]) == len(res["train"]["zero"]) == 4
    assert b.attr("training_path") == "device-levels"
    assert "a custom metric (custom_metric=)" in b.attr("training_path_refused")
    log.clear()
    b = daskgb.train(params, m, 3, verbose_eval=False, callbacks=[LearningRateScheduler([0.3, 0.2, 0.1])])
    assert log == [("queue", 0), ("read", 0), ("queue", 1), ("read", 1), ("queue", 2), ("read", 2)]
    assert "a callback may change the training" in b.attr("training_path_refused")
    log.clear()
    daskgb.train(params, m, 3, evals=[(m, "train")], verbose_eval=False, early_stopping_rounds=2)
    assert log[:3] == [("queue", 0), ("queue", 1), ("read", 0)], "early stopping only reads"


@pytest.mark.gpu
def test_queued_rounds_write_the_same_checkpoints(tmp_path, settings):
    from daskgb.checkpoint import Checkpoints

    params = {"device": "cuda", "max_depth": 4, "objective": "binary:logistic", "max_bin": 64}
    _, m = _queued_matrix("binary:logistic", seed=3)
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


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(QUEUED_CASES)))
def test_rounds_replayed_as_cuda_graphs_give_the_same_model(case, monkeypatch, settings):
    params = {**QUEUED_CASES[case], "device": "cuda", "seed": 11, "max_bin": 64}
    X, m = _queued_matrix(params["objective"], seed=10 + case)
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


@pytest.mark.gpu
def test_a_failed_capture_warns_and_training_goes_on(monkeypatch):
    from daskgb.growth import graphs

    params = {"device": "cuda", "max_depth": 5, "objective": "binary:logistic", "max_bin": 64}
    _, m = _queued_matrix("binary:logistic", seed=4)
    expected = daskgb.train(params, m, 5, verbose_eval=False)

    def refuse(*a, **k):
        raise RuntimeError("capture refused (test)")

    monkeypatch.setattr(graphs._ForestGraph, "__init__", refuse)
    with pytest.warns(RuntimeWarning, match="capture refused"):
        got = daskgb.train(params, m, 5, verbose_eval=False)
    assert expected.attr("training_path") == "cuda-graphs"
    assert got.attr("training_path").startswith("queued-rounds (the CUDA graph capture failed: RuntimeError: capture")
    assert_same_model(got, expected)


@pytest.mark.gpu
def test_graphs_follow_a_learning_rate_that_changes():
    """A callback that changes the learning rate each round: each rate is its own launches
    (no queuing with callbacks, so this drives ForestGraphs directly)."""
    import cupy

    from daskgb.backend import cupy_backend as cb
    from daskgb.collective import LocalCommunicator
    from daskgb.growth import device, graphs as graphs_module
    from daskgb.params import TrainParams

    X, m = _queued_matrix("reg:squarederror", seed=5)
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


@pytest.mark.gpu
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
    X, m = _queued_matrix("binary:logistic", n=20_000, seed=6)
    daskgb.train({"device": "cuda", "max_depth": 6, "objective": "binary:logistic", "max_bin": 64}, m, 4,
                 verbose_eval=False)
    # At least the row index, scratch and leaves (4 bytes a row each) and the pairs (8 a row).
    assert seen and min(seen) >= 20 * X.shape[0]
    assert graphs.graph_memory_bytes() == 0
