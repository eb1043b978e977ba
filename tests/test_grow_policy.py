"""grow_policy="lossguide" and max_leaves (under both policies) against xgboost `hist` on exact-cut data.

Trees must equal XGBoost's node for node (same node ids, so the same expansion
order; same split features) and predictions agree to 1e-5. The driver's order
and limits are tested on their own in tests/stages/test_growth.py.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from exact_data import make_data, xgb_trees

import daskgb

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
