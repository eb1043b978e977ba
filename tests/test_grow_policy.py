"""grow_policy="lossguide" and max_leaves (under both policies) against xgboost `hist` on exact-cut data.

Trees must equal XGBoost's node for node (same node ids, so the same expansion
order; same split features) and predictions agree to 1e-5. The driver's order
and limits are also tested on their own.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from exact_data import make_data, xgb_trees

import daskgb
from daskgb.layouts import SPLIT_DTYPE
from daskgb.growth.driver import Candidate, Driver
from daskgb.split import SplitParams

xgb = pytest.importorskip("xgboost")

ROUNDS = 8
# (grow_policy, max_depth, max_leaves): lossguide with and without a depth limit,
# depthwise cut short by max_leaves, and a leaf limit that is never reached.
SHAPES = [("lossguide", 0, 7), ("lossguide", 3, 0), ("lossguide", 6, 12), ("lossguide", 0, 40),
          ("depthwise", 5, 6), ("depthwise", 0, 11), ("depthwise", 3, 64), ("lossguide", 2, 2)]
# (reg_lambda, reg_alpha, gamma, min_child_weight)
REGULARISATION = [(1.0, 0.0, 0.0, 1.0), (5.0, 0.5, 0.1, 0.0), (1.0, 0.0, 0.5, 5.0)]


def assert_same_structure(bx, ours, label):
    trees_x = xgb_trees(bx)
    assert len(trees_x) == len(ours.trees), label
    for i, (tx, to) in enumerate(zip(trees_x, ours.trees)):
        assert tx["left_children"] == to.left.tolist(), f"{label}: tree {i} differs in shape (node ids)"
        internal = to.left >= 0
        np.testing.assert_array_equal(np.asarray(tx["split_indices"])[internal], to.feature[internal],
                                      err_msg=f"{label}: tree {i} split features")


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
@pytest.mark.parametrize("with_nan", [False, True], ids=["dense", "nan"])
def test_parity_with_xgboost_hist(objective, with_nan):
    failures = []
    for k, ((policy, depth, leaves), (lam, alpha, gamma, mcw)) in enumerate(itertools.product(SHAPES,
                                                                                               REGULARISATION)):
        X, y = make_data(100 + k, objective, with_nan)
        params = dict(objective=objective, grow_policy=policy, max_depth=depth, max_leaves=leaves, reg_lambda=lam,
                      reg_alpha=alpha, gamma=gamma, min_child_weight=mcw, base_score=0.5, eta=0.3)
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), ROUNDS)
        ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), ROUNDS, verbose_eval=False)
        label = f"{policy} depth={depth} leaves={leaves} lambda={lam} alpha={alpha} gamma={gamma} mcw={mcw}"
        assert_same_structure(bx, ours, label)
        diff = float(np.max(np.abs(bx.predict(xgb.DMatrix(X), output_margin=True) - ours.predict(X, output_margin=True))))
        if diff > 1e-5:
            failures.append(f"{label}: max |margin diff| {diff:.3e}")
        for t in ours.trees:
            n_leaves = int(t.is_leaf.sum())
            assert leaves == 0 or n_leaves <= leaves, f"{label}: {n_leaves} leaves"
            assert depth == 0 or t.depth.max() <= depth, f"{label}: depth {t.depth.max()}"
    assert not failures, "\n".join(failures)


def test_lossguide_default_depth_is_six_as_in_xgboost():
    X, y = make_data(7, "reg:squarederror", False, n=2000)
    ours = daskgb.train({"grow_policy": "lossguide", "device": "cpu"}, daskgb.QuantileMatrix(X, y), 3,
                        verbose_eval=False)
    bx = xgb.train({"grow_policy": "lossguide", "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 3)
    assert max(int(t.depth.max()) for t in ours.trees) == 6
    assert_same_structure(bx, ours, "lossguide defaults")


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


def test_max_leaves_one_is_a_stump_of_one_leaf():
    X, y = make_data(1, "reg:squarederror", False)
    for policy in ("depthwise", "lossguide"):
        b = daskgb.train({"grow_policy": policy, "max_leaves": 1, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 2,
                         verbose_eval=False)
        assert [t.n_nodes for t in b.trees] == [1, 1]


@pytest.mark.parametrize("params, match", [
    ({"grow_policy": "bestfirst"}, "grow_policy"),
    ({"max_leaves": -1}, "max_leaves"),
    ({"max_leaves": 2.5}, "max_leaves"),
])
def test_bad_parameters(params, match):
    X, y = make_data(1, "reg:squarederror", False, n=50)
    with pytest.raises(ValueError, match=match):
        daskgb.train(params, daskgb.QuantileMatrix(X, y), 1)


@pytest.mark.parametrize("extra", [
    {"grow_policy": "lossguide", "max_leaves": 9, "max_depth": 0},
    {"max_leaves": 7},
    {"grow_policy": "lossguide", "max_leaves": 12, "monotone_constraints": (1, -1),
     "interaction_constraints": [[0, 1, 4], [2, 3]]},
], ids=["lossguide", "depthwise-max_leaves", "lossguide-constrained"])
def test_multiclass_matches_xgboost(extra):
    """K trees per round, each grown with the options (and its own constraints' state)."""
    rng = np.random.default_rng(0)
    n = 900
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    Z = np.nan_to_num(X)
    y = np.digitize(Z[:, 0] + 0.5 * Z[:, 1] * Z[:, 2] + rng.normal(size=n) * 0.5, [-1, 0.5, 1.5]).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 4, **extra}
    as_xgb = {k: json.dumps(v) if k == "interaction_constraints" else str(v) if k == "monotone_constraints" else v
              for k, v in params.items()}
    bx = xgb.train({**as_xgb, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 6)
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 6, verbose_eval=False)
    assert_same_structure(bx, ours, str(extra))
    np.testing.assert_allclose(ours.predict(X, output_margin=True), bx.predict(xgb.DMatrix(X), output_margin=True),
                               atol=1e-5)
