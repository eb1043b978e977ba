"""TrainParams.from_dict: XGBoost names and aliases, defaults, range checks."""

from __future__ import annotations

import numpy as np
import pytest

from daskgb.params import TrainParams


def test_defaults_match_xgboost():
    p = TrainParams.from_dict({})
    assert p.objective == "reg:squarederror"
    assert p.learning_rate == 0.3
    assert p.max_depth == 6
    assert p.min_child_weight == 1.0
    assert p.reg_lambda == 1.0
    assert p.reg_alpha == 0.0
    assert p.min_split_loss == 0.0
    assert p.max_bin == 256
    assert p.base_score is None
    assert p.device == "auto"
    assert p.eval_metric == []
    assert (p.grow_policy, p.max_leaves) == ("depthwise", 0)
    assert (p.colsample_bytree, p.colsample_bylevel, p.colsample_bynode) == (1.0, 1.0, 1.0)
    assert p.interaction_constraints is None and p.monotone_constraints is None


def test_none_is_empty_dict():
    assert TrainParams.from_dict(None) == TrainParams.from_dict({})


@pytest.mark.parametrize(
    "alias, canonical, value",
    [
        ("eta", "learning_rate", 0.1),
        ("lambda", "reg_lambda", 2.0),
        ("alpha", "reg_alpha", 0.5),
        ("gamma", "min_split_loss", 0.25),
        ("random_state", "seed", 7),
    ],
)
def test_alias(alias, canonical, value):
    p = TrainParams.from_dict({alias: value})
    assert getattr(p, canonical) == value


def test_canonical_names_accepted():
    p = TrainParams.from_dict(
        {"learning_rate": 0.05, "reg_lambda": 3, "reg_alpha": 1, "min_split_loss": 0.1, "seed": 3}
    )
    assert (p.learning_rate, p.reg_lambda, p.reg_alpha, p.min_split_loss, p.seed) == (0.05, 3.0, 1.0, 0.1, 3)


def test_alias_and_canonical_together_is_an_error():
    with pytest.raises(ValueError, match="learning_rate"):
        TrainParams.from_dict({"eta": 0.1, "learning_rate": 0.2})


def test_ignored_xgboost_parameters_are_accepted():
    TrainParams.from_dict({"verbosity": 0, "nthread": 4, "validate_parameters": True})


def test_unknown_parameter():
    with pytest.raises(ValueError, match="unknown parameter 'colsample_bytreee'"):
        TrainParams.from_dict({"colsample_bytreee": 0.5})


@pytest.mark.parametrize(
    "params, name",
    [
        ({"max_bin": 1}, "max_bin"),
        ({"max_bin": 0}, "max_bin"),
        ({"max_depth": -1}, "max_depth"),
        ({"max_depth": 2.5}, "max_depth"),
        ({"reg_lambda": -0.1}, "reg_lambda"),
        ({"lambda": -1}, "reg_lambda"),
        ({"reg_alpha": -1}, "reg_alpha"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": -0.1}, "learning_rate"),
        ({"eta": 0}, "learning_rate"),
        ({"min_child_weight": -1}, "min_child_weight"),
        ({"gamma": -1}, "min_split_loss"),
        ({"max_delta_step": -1}, "max_delta_step"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"learning_rate": float("inf")}, "learning_rate"),
        ({"learning_rate": "fast"}, "learning_rate"),
        ({"max_depth": "6"}, "max_depth"),
        ({"max_depth": True}, "max_depth"),
        ({"max_leaves": -1}, "max_leaves"),
        ({"grow_policy": "leafwise"}, "grow_policy"),
        ({"colsample_bytree": 0.0}, "colsample_bytree"),
        ({"colsample_bylevel": 1.01}, "colsample_bylevel"),
        ({"colsample_bynode": "all"}, "colsample_bynode"),
        ({"interaction_constraints": "[[0, 1"}, "interaction_constraints"),
        ({"monotone_constraints": (1, 3)}, "monotone_constraints"),
    ],
)
def test_out_of_range(params, name):
    with pytest.raises(ValueError, match=name):
        TrainParams.from_dict(params)


def test_boundaries_accepted():
    p = TrainParams.from_dict({"max_bin": 2, "max_depth": 0, "reg_lambda": 0, "min_child_weight": 0})
    assert (p.max_bin, p.max_depth, p.reg_lambda) == (2, 0, 0.0)
    p = TrainParams.from_dict({"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 0, "colsample_bytree": 1,
                               "colsample_bylevel": 1e-6, "colsample_bynode": np.float32(0.5)})
    assert (p.max_depth, p.max_leaves, p.colsample_bytree, p.colsample_bynode) == (0, 0, 1.0, 0.5)


def test_numpy_scalars_accepted():
    # Grid searches hand out numpy scalars (np.arange, np.linspace); XGBoost takes them.
    p = TrainParams.from_dict(
        {"max_depth": np.int64(4), "max_bin": np.int32(64), "learning_rate": np.float32(0.5), "seed": np.int64(1)}
    )
    assert (p.max_depth, p.max_bin, p.learning_rate, p.seed) == (4, 64, 0.5, 1)
    assert type(p.max_depth) is int


@pytest.mark.parametrize("objective", ["rank:foo", "reg:squaredlogerror", "binary:hinge", "", None])
def test_bad_objective(objective):
    with pytest.raises(ValueError, match="objective"):
        TrainParams.from_dict({"objective": objective})


@pytest.mark.parametrize("objective", ["reg:squarederror", "reg:logistic", "binary:logistic", "rank:pairwise",
                                       "rank:ndcg", "rank:map"])
def test_supported_objectives(objective):
    assert TrainParams.from_dict({"objective": objective}).objective == objective


@pytest.mark.parametrize("metric", ["mape", "ndcg@", "ndcg@k", "map@-1", "AUC", ["rmse", "mape"]])
def test_bad_metric(metric):
    with pytest.raises(ValueError, match="eval_metric"):
        TrainParams.from_dict({"eval_metric": metric})


@pytest.mark.parametrize("metric", ["ndcg", "ndcg@10", "ndcg-", "ndcg@3-", "map", "map@5-", "pre", "pre@2"])
def test_ranking_metric_names(metric):
    assert TrainParams.from_dict({"eval_metric": metric}).eval_metric == [metric]


def test_lambdarank_booleans_read_as_xgboost_reads_them():
    for value, expected in [(True, True), (0, False), ("true", True), ("False", False), ("1", True)]:
        assert TrainParams.from_dict({"ndcg_exp_gain": value}).ndcg_exp_gain is expected
    for value in ("yes", 2, 1.0, None):
        with pytest.raises(ValueError, match="lambdarank_normalization must be a boolean"):
            TrainParams.from_dict({"lambdarank_normalization": value})


def test_metric_string_becomes_list():
    assert TrainParams.from_dict({"eval_metric": "auc"}).eval_metric == ["auc"]
    assert TrainParams.from_dict({"eval_metric": ["logloss", "auc"]}).eval_metric == ["logloss", "auc"]


@pytest.mark.parametrize("objective", ["binary:logistic", "reg:logistic"])
@pytest.mark.parametrize("base_score", [0.0, 1.0, -0.5, 1.5])
def test_base_score_outside_unit_interval_for_logistic(objective, base_score):
    with pytest.raises(ValueError, match="base_score"):
        TrainParams.from_dict({"objective": objective, "base_score": base_score})


def test_base_score_inside_unit_interval_for_logistic():
    assert TrainParams.from_dict({"objective": "binary:logistic", "base_score": 0.3}).base_score == 0.3


def test_base_score_unrestricted_for_squarederror():
    assert TrainParams.from_dict({"base_score": 12.5}).base_score == 12.5


@pytest.mark.parametrize("device", ["tpu", "", 3])
def test_bad_device(device):
    with pytest.raises(ValueError, match="device"):
        TrainParams.from_dict({"device": device})


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "gpu"])
def test_device_names_accepted_without_a_gpu(device):
    # Naming a device is validated here; whether one exists is checked at train time.
    TrainParams.from_dict({"device": device})
