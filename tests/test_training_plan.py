"""The planner (daskgb/training/plan.py): one test per decision, and the path every fit names.

plan_rounds reads a fit's facts and the settings, never the data, so every decision is
tested here for either device, on any machine; the GPU suites check that the CUDA paths
named are the ones taken (tests/stages/test_growth.py).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import daskgb
from daskgb.collective import Communicator, LocalCommunicator
from daskgb.params import TrainParams
from daskgb.training.plan import Path, PlanFacts, RoundPlan, plan_rounds


def facts(device="cuda", paged=False, comm=None, n_trees=1, custom_objective=False, refits_leaves=False,
          custom_metric=False, writing_callbacks=False, interaction=None, monotone=None, widest_categorical=0,
          **params):
    """The facts of a fit that nothing keeps off the fastest path, but what is given."""
    p = TrainParams.from_dict({"max_depth": 6, **params})
    return PlanFacts.of(p, device=device, paged=paged, n_trees_per_round=n_trees, custom_objective=custom_objective,
                        refits_leaves=refits_leaves, custom_metric=custom_metric, writing_callbacks=writing_callbacks,
                        interaction=interaction, monotone=monotone,
                        comm=comm or LocalCommunicator(), widest_categorical=widest_categorical)


class _HostComm(Communicator):
    """Two workers summing through the host (Dask comms between CPU workers)."""

    rank, world_size = 0, 2


class _DeviceComm(_HostComm):
    """Two GPUs summing with NCCL."""

    reduces_on_device = True


def test_nothing_in_the_way_takes_cuda_graphs():
    plan = plan_rounds(facts())
    assert plan == RoundPlan(Path.CUDA_GRAPHS, True, {})
    assert plan.describe() == "cuda-graphs" and plan.refusals() == ""


@pytest.mark.parametrize("n_trees", [1, 3])
def test_a_tree_per_class_or_two_gpus_keep_the_fastest_path(n_trees):
    assert plan_rounds(facts(n_trees=n_trees, comm=_DeviceComm())).path is Path.CUDA_GRAPHS


@pytest.mark.parametrize("sampling", [{}, {"subsample": 0.8}])
def test_parallel_trees_keep_the_fastest_path(sampling):
    """A round's parallel trees grow layer by layer through the path's own growth (one CUDA
    graph replayed per layer): num_parallel_tree refuses no path, but its forest's per-node
    column sampling does, as for any fit."""
    assert plan_rounds(facts(n_trees=6, num_parallel_tree=2, **sampling)).path is Path.CUDA_GRAPHS
    forest = plan_rounds(facts(n_trees=100, num_parallel_tree=100, subsample=0.8, colsample_bynode=0.8))
    assert forest.path is Path.HOST_LEVELS
    assert forest.refused[Path.DEVICE_LEVELS] == "colsample_bynode=0.8 (features drawn per node)"


def test_a_fit_plans_for_all_of_a_rounds_trees(monkeypatch):
    from daskgb.training import fit as _fit

    seen = []
    monkeypatch.setattr(_fit, "plan_rounds", lambda f: seen.append(f) or plan_rounds(f))
    X, y = _data(300)
    daskgb.train({"device": "cpu", "max_depth": 2, "objective": "multi:softprob", "num_class": 2,
                  "num_parallel_tree": 3}, daskgb.QuantileMatrix(X, y), 1)
    assert [f.n_trees_per_round for f in seen] == [6]


def test_the_cpu_backend_grows_by_host_levels():
    plan = plan_rounds(facts(device="cpu"))
    assert plan.path is Path.HOST_LEVELS and not plan.device_levels
    assert list(plan.refused) == [Path.CUDA_GRAPHS, Path.QUEUED_ROUNDS, Path.DEVICE_LEVELS]
    assert set(plan.refused.values()) == {"the CPU backend trains (device='cpu')"}


@pytest.mark.parametrize("change, why", [
    (dict(max_depth=0, grow_policy="lossguide"), "grow_policy='lossguide' without max_leaves"),
    (dict(grow_policy="lossguide", max_leaves=5000), "max_leaves=5000 > 4096 (lossguide on the device)"),
    (dict(grow_policy="lossguide", max_leaves=16, colsample_bylevel=0.5),
     "colsample_bytree or colsample_bylevel < 1 with grow_policy='lossguide'"),
    (dict(max_depth=0), "max_depth=0 (no depth limit)"),
    (dict(max_depth=13), "max_depth=13 > 12"),
    (dict(max_leaves=8), "max_leaves=8 with grow_policy='depthwise' (a leaf limit on a level)"),
    (dict(interaction=np.ones((1, 4), bool)), "interaction_constraints are set"),
    (dict(monotone=np.ones(4)), "monotone_constraints are set"),
    (dict(colsample_bynode=0.5), "colsample_bynode=0.5 (features drawn per node)"),
    (dict(comm=_HostComm()), "the workers sum histograms through the host (Dask comms between CPU workers)"),
    (dict(widest_categorical=20000), "a categorical feature has 20000 categories (the device sorts at most 16384"),
], ids=["lossguide-unlimited", "lossguide-too-many-leaves", "lossguide-bylevel", "max_depth-0", "too-deep",
        "max_leaves", "interaction", "monotone", "bynode", "host-allreduce", "too-many-categories"])
def test_each_refusal_of_device_levels_grows_by_host_levels(change, why):
    plan = plan_rounds(facts(**change))
    assert plan.path is Path.HOST_LEVELS and not plan.device_levels
    assert plan.refused[Path.DEVICE_LEVELS].startswith(why)
    assert plan.refused[Path.CUDA_GRAPHS] == plan.refused[Path.QUEUED_ROUNDS] == plan.refused[Path.DEVICE_LEVELS]


@pytest.mark.parametrize("setting", ["training.device-growth", "training.split-kernel"])
def test_settings_turn_device_levels_off(setting, settings):
    settings({setting: False})
    plan = plan_rounds(facts())
    assert plan.path is Path.HOST_LEVELS and setting in plan.refused[Path.DEVICE_LEVELS]


@pytest.mark.parametrize("change, why", [
    (dict(custom_objective=True), "a custom objective (obj=)"),
    (dict(refits_leaves=True), "the objective refits each tree's leaves"),
    (dict(custom_metric=True), "a custom metric (custom_metric=) reads each round's predictions on the host"),
    (dict(writing_callbacks=True), "a callback may change the training between rounds"),
], ids=["obj", "refit", "custom-metric", "callbacks"])
def test_each_refusal_of_queued_rounds_grows_by_device_levels(change, why):
    plan = plan_rounds(facts(**change))
    assert plan.path is Path.DEVICE_LEVELS and plan.device_levels
    assert plan.refused[Path.QUEUED_ROUNDS].startswith(why)
    assert plan.refused[Path.CUDA_GRAPHS] == plan.refused[Path.QUEUED_ROUNDS]
    assert Path.DEVICE_LEVELS not in plan.refused


def test_callbacks_that_only_read_are_told_from_those_that_may_write():
    from daskgb.callback import EarlyStopping, EvaluationMonitor, LearningRateScheduler, TrainingCallback, only_read

    class Logs(TrainingCallback):
        reads_only = True

        def after_iteration(self, model, epoch, evals_log):
            return False

    class LooksBeforeEachRound(Logs):
        def before_iteration(self, model, epoch, evals_log):  # would see the model a round behind
            return False

    assert only_read([]) and only_read([EarlyStopping(3), EvaluationMonitor(), Logs()])
    assert not only_read([EarlyStopping(3), LearningRateScheduler([0.1] * 5)])
    assert not only_read([TrainingCallback()]) and not only_read([LooksBeforeEachRound()])


def test_eval_sets_and_early_stopping_keep_the_fastest_path():
    """Facts as Fit.plan reads them for train(..., evals=..., early_stopping_rounds=...) on a GPU:
    the eval sets are scored on the device, early stopping only reads."""
    from daskgb.callback import EarlyStopping, EvaluationMonitor, only_read

    plan = plan_rounds(facts(writing_callbacks=not only_read([EvaluationMonitor(), EarlyStopping(10)])))
    assert plan == RoundPlan(Path.CUDA_GRAPHS, True, {})


def test_queued_rounds_turned_off(settings):
    settings({"training.queue-rounds": False})
    plan = plan_rounds(facts())
    assert plan.path is Path.DEVICE_LEVELS
    assert plan.refused[Path.QUEUED_ROUNDS] == "turned off (daskgb.training.queue-rounds)"


@pytest.mark.parametrize("change", [dict(colsample_bytree=0.8), dict(colsample_bylevel=0.5)], ids=["bytree", "bylevel"])
def test_columns_drawn_per_tree_or_level_queue_rounds_without_graphs(change):
    plan = plan_rounds(facts(**change))
    assert plan.path is Path.QUEUED_ROUNDS
    assert list(plan.refused) == [Path.CUDA_GRAPHS]
    assert plan.refused[Path.CUDA_GRAPHS].startswith("colsample_bytree or colsample_bylevel < 1")


def test_cuda_graphs_turned_off(settings):
    settings({"training.cuda-graphs": False})
    plan = plan_rounds(facts())
    assert plan.path is Path.QUEUED_ROUNDS and "daskgb.training.cuda-graphs" in plan.refused[Path.CUDA_GRAPHS]


@pytest.mark.parametrize("max_depth", [0, 6, 20])
def test_lossguide_with_a_leaf_limit_grows_on_the_device(max_depth):
    plan = plan_rounds(facts(grow_policy="lossguide", max_leaves=255, max_depth=max_depth))
    assert plan == RoundPlan(Path.CUDA_GRAPHS, True, {})


def test_a_paged_matrix_without_sampling_streams_its_pages():
    plan = plan_rounds(facts(paged=True))
    assert plan.path is Path.STREAMED_PAGES and not plan.device_levels
    assert all(plan.refused[p].startswith("the matrix is paged") for p in
               (Path.CUDA_GRAPHS, Path.QUEUED_ROUNDS, Path.DEVICE_LEVELS, Path.HOST_LEVELS))
    assert plan.refused[Path.COMPACTED_PAGES].startswith("subsample=1")


@pytest.mark.parametrize("device, change, device_levels", [
    ("cuda", {}, True),
    ("cuda", dict(grow_policy="lossguide", max_leaves=8), True),
    ("cuda", dict(grow_policy="lossguide", max_depth=0), False),
    ("cpu", {}, False),
])
def test_a_paged_matrix_with_sampling_compacts_each_trees_rows(device, change, device_levels):
    plan = plan_rounds(facts(device=device, paged=True, subsample=0.5, **change))
    assert plan.path is Path.COMPACTED_PAGES and plan.device_levels is device_levels
    assert plan.describe().startswith(f"compacted-pages (trees by {'device' if device_levels else 'host'} levels)")


def test_refitted_leaves_or_the_setting_stream_sampled_pages(settings):
    plan = plan_rounds(facts(paged=True, subsample=0.5, refits_leaves=True))
    assert plan.path is Path.STREAMED_PAGES and "refits each tree's leaves" in plan.refused[Path.COMPACTED_PAGES]
    settings({"training.compact-sampled-pages": False})
    plan = plan_rounds(facts(paged=True, subsample=0.5))
    assert plan.path is Path.STREAMED_PAGES and "compact-sampled-pages" in plan.refused[Path.COMPACTED_PAGES]


def test_facts_read_the_params_and_the_communicator():
    f = facts(colsample_bytree=0.5, comm=_DeviceComm(), interaction=np.ones((1, 2), bool))
    assert f.colsample_bytree == 0.5 and f.allreduce_on_device and f.interaction_constraints
    assert not facts(comm=_HostComm()).allreduce_on_device
    assert dataclasses.replace(f, grow_policy="lossguide").grow_policy == "lossguide"


# --------------------------------------------------------------------------- fits name their path
def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.float32)
    return X, y


@pytest.mark.parametrize("budget, params, path", [
    (None, {}, "host-levels"),
    (2048, {}, "streamed-pages"),
    (2048, {"subsample": 0.5}, "compacted-pages"),
])
def test_a_cpu_fit_names_its_path_in_the_model(budget, params, path, tmp_path):
    X, y = _data()
    m = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=budget)
    assert m.paged is (budget is not None)
    b = daskgb.train({"device": "cpu", "max_depth": 3, **params}, m, 3)
    assert b.attr("training_path") == path
    assert b.attributes()["training_path"] == path
    refused = b.attr("training_path_refused")
    assert "device-levels: " in refused and ("the CPU backend trains" in refused or "paged" in refused)
    # The attributes travel with the model.
    b.save_model(tmp_path / "m.json")
    again = daskgb.Booster().load_model(tmp_path / "m.json")
    assert again.attributes() == b.attributes()


def test_the_path_is_logged_at_debug_level(caplog):
    X, y = _data()
    m = daskgb.QuantileMatrix(X, y, device="cpu")
    with caplog.at_level("DEBUG", logger="daskgb.training"):
        daskgb.train({"device": "cpu", "max_depth": 2}, m, 1)
    assert any("daskgb training path: host-levels; not cuda-graphs: the CPU backend trains" in r.getMessage()
               for r in caplog.records)


def test_a_callback_that_changes_the_path_mid_fit_is_recorded():
    """A callback's set_param changes a fact of the plan (subsample on a paged matrix): the
    rounds from there take the new path, the model names both, and it is the model of the
    same fit in core."""
    from daskgb.callback import TrainingCallback

    class SampleFromRound2(TrainingCallback):
        def before_iteration(self, model, epoch, evals_log):
            if epoch == 2:
                model.set_param("subsample", 0.5)
            return False

    X, y = _data()
    params = {"device": "cpu", "max_depth": 3, "seed": 5}
    paged = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=2048)
    in_core = daskgb.QuantileMatrix(X, y, device="cpu")
    assert paged.paged
    a = daskgb.train(params, paged, 4, callbacks=[SampleFromRound2()])
    b = daskgb.train(params, in_core, 4, callbacks=[SampleFromRound2()])
    assert a.attr("training_path") == "streamed-pages (rounds 0-1), compacted-pages (rounds 2-)"
    assert b.attr("training_path") == "host-levels"
    assert [t.to_dict() for t in a.trees] == [t.to_dict() for t in b.trees]


def test_set_attr_and_attributes_as_xgboost():
    X, y = _data(200)
    b = daskgb.train({"max_depth": 2}, daskgb.QuantileMatrix(X, y), 5, verbose_eval=False)
    b._attributes.clear()  # training's own (the path) are tested above
    assert b.attributes() == {}
    b.set_attr(owner="me", note="x")
    assert b.attr("owner") == "me" and b.attributes() == {"owner": "me", "note": "x"}
    b.set_attr(note=None)
    assert b.attributes() == {"owner": "me"} and b.attr("note") is None
    with pytest.raises(ValueError, match="attribute 'n' must be a string"):
        b.set_attr(n=3)
    b.best_iteration, b.best_score = 4, 0.25
    assert b.attributes() == {"owner": "me", "best_iteration": "4", "best_score": "0.25"}
    d = b.to_dict()
    assert d["attributes"] == {"owner": "me"}
    assert daskgb.Booster.from_dict(json.loads(json.dumps(d))).attributes() == b.attributes()


def test_a_model_without_attributes_still_loads():
    b = daskgb.Booster({"max_depth": 2})
    d = b.to_dict()
    del d["attributes"]  # written before attributes existed
    assert daskgb.Booster.from_dict(d).attributes() == {}
    d["attributes"] = {"a": 1}
    with pytest.raises(ValueError, match="attributes is not an object of strings"):
        daskgb.Booster.from_dict(d)


@pytest.mark.gpu
@pytest.mark.parametrize("objective", ["binary:logistic", "reg:squarederror"])
def test_a_captured_round_reads_the_gradients_where_the_objective_writes_them(objective, monkeypatch):
    """From the round after its capture, the CUDA graph's gradient pairs are the array the
    objective writes into (no (n, 2) copy beside them); the model is the one the copy gives."""
    import cupy

    from daskgb import objective as objectives
    from daskgb import objective_cuda

    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 5)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=4000) > 0).astype(np.float32)
    params = {"objective": objective, "device": "cuda", "max_depth": 4}
    written = []
    for name in ("logistic_gradient", "squared_error_gradient"):
        inner = getattr(objective_cuda, name)

        def logged(margin, y, weight, out=None, inner=inner):
            written.append(None if out is None else out.data.ptr)
            return inner(margin, y, weight, out=out)

        monkeypatch.setattr(objective_cuda, name, logged)

    def fit():
        written.clear()
        return daskgb.train(params, daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y)), 6), list(written)

    booster, into = fit()
    assert booster.attr("training_path") == "cuda-graphs"
    # Rounds 0 and 1 write arrays of their own (round 1's is captured), every later round the captured one.
    assert into[:2] == [None, None] and None not in into[2:] and len(set(into[2:])) == 1
    for cls in (objectives._Logistic, objectives.SquaredError):
        monkeypatch.setattr(cls, "writes_gradients_into", False)
    copied, into = fit()
    assert into == [None] * 6
    assert json.dumps(booster.to_dict(), sort_keys=True, default=str) == json.dumps(
        copied.to_dict(), sort_keys=True, default=str)
