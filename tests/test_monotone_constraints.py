"""monotone_constraints against xgboost `hist` on exact-cut data, and the monotonicity it promises.

Trees must equal XGBoost's node for node and predictions agree to 1e-5, for both
grow policies, with reg_alpha and max_delta_step too. (With max_delta_step on
binary:logistic most weights sit at the clip, where neighbouring thresholds tie
exactly in real arithmetic; only the float association XGBoost uses for the gain,
split.child_gain, breaks the ties its way.)
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from exact_data import make_data, xgb_trees

import daskgb
from daskgb.monotone import monotone_vector, parse_monotone_constraints

xgb = pytest.importorskip("xgboost")

CONSTRAINTS = [(1, 0, -1, 0, 1, 0), (0, 0, 0, 0, 0, 0), (-1, 1), (1, 1, 1, 1, 1, 1)]
# (reg_lambda, reg_alpha, max_delta_step)
REGULARISATION = [(1.0, 0.0, 0.0), (5.0, 0.5, 0.0), (1.0, 0.0, 0.7)]


def same_structure(tx, to) -> bool:
    internal = to.left >= 0
    return tx["left_children"] == to.left.tolist() and np.array_equal(np.asarray(tx["split_indices"])[internal],
                                                                      to.feature[internal])


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_parity_with_xgboost_hist(objective, policy):
    failures = []
    combos = itertools.product(CONSTRAINTS, REGULARISATION, [False, True])
    for k, (constraints, (lam, alpha, mds), with_nan) in enumerate(combos):
        X, y = make_data(k, objective, with_nan)
        params = dict(objective=objective, grow_policy=policy, max_depth=5, max_leaves=14 if policy == "lossguide" else 0,
                      base_score=0.5, reg_lambda=lam, reg_alpha=alpha, max_delta_step=mds)
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1, "monotone_constraints": str(constraints)},
                       xgb.DMatrix(X, y), 8)
        ours = daskgb.train({**params, "device": "cpu", "monotone_constraints": constraints},
                            daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
        label = f"{constraints} lambda={lam} alpha={alpha} max_delta_step={mds} nan={with_nan}"
        trees_x = xgb_trees(bx)
        px, po = bx.predict(xgb.DMatrix(X), output_margin=True), ours.predict(X, output_margin=True)
        for i, (tx, to) in enumerate(zip(trees_x, ours.trees)):
            if not same_structure(tx, to):
                failures.append(f"{label}: tree {i} differs in shape or split features")
                break
        diff = float(np.max(np.abs(px - po)))
        if diff > 1e-5:
            failures.append(f"{label}: max |margin diff| {diff:.3e}")
    assert not failures, "\n".join(failures)


def test_max_delta_step_with_alpha_matches_xgboost():
    """The weight-form gain (max_delta_step, monotone constraints) has no alpha term in xgboost 3.2
    and takes (H + lambda) * (w * w); binary:logistic puts most weights at the clip, where the
    association decides exact ties between thresholds."""
    combos = itertools.product(["reg:squarederror", "binary:logistic"], [False, True], [(5.0, 0.5), (1.0, 0.0)])
    for k, (objective, with_nan, (lam, alpha)) in enumerate(combos):
        X, y = make_data(30 + k, objective, with_nan)
        params = dict(objective=objective, max_depth=5, base_score=0.5, reg_lambda=lam, reg_alpha=alpha,
                      max_delta_step=0.7)
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 8)
        ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
        np.testing.assert_allclose(ours.predict(X, output_margin=True),
                                   bx.predict(xgb.DMatrix(X), output_margin=True), atol=1e-5,
                                   err_msg=f"{objective} nan={with_nan} lambda={lam} alpha={alpha}")


@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_predictions_are_monotone_in_constrained_features(policy):
    rng = np.random.default_rng(4)
    n = 3000
    X = rng.normal(size=(n, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    Z = np.nan_to_num(X)
    # Non-monotone truth in every feature, so the constraints bind.
    y = (np.sin(2 * Z[:, 0]) - np.cos(2 * Z[:, 1]) + Z[:, 2] * Z[:, 3] + rng.normal(size=n) * 0.3).astype(np.float32)
    constraints = (1, -1, 0, 1)
    params = {"monotone_constraints": constraints, "grow_policy": policy, "max_depth": 6, "max_leaves": 32,
              "device": "cpu"}
    b = daskgb.train(params, daskgb.QuantileMatrix(X, y), 30, verbose_eval=False)
    free = daskgb.train({k: v for k, v in params.items() if k != "monotone_constraints"}, daskgb.QuantileMatrix(X, y),
                        30, verbose_eval=False)
    grid = np.linspace(-3, 3, 61, dtype=np.float32)
    base = X[rng.choice(n, 40, replace=False)]
    violated_free = False
    for f, c in enumerate(constraints):
        if c == 0:
            continue
        sweep = np.repeat(base, grid.size, axis=0)
        sweep[:, f] = np.tile(grid, base.shape[0])
        steps = np.diff(b.predict(sweep).reshape(base.shape[0], grid.size), axis=1) * c
        assert steps.min() >= -1e-6, f"feature {f}: prediction moves against its constraint by {steps.min()}"
        free_steps = np.diff(free.predict(sweep).reshape(base.shape[0], grid.size), axis=1) * c
        violated_free |= bool(free_steps.min() < -1e-3)
    assert violated_free, "the data does not need the constraints: the test could not fail"


def test_forms_give_the_same_model():
    pd = pytest.importorskip("pandas")
    X, y = make_data(8, "reg:squarederror", True)
    names = list("abcdef")
    plain, framed = daskgb.QuantileMatrix(X, y), daskgb.QuantileMatrix(pd.DataFrame(X, columns=names), y)
    forms = [((1, 0, -1), plain), ([1, 0, -1, 0, 0, 0], plain), ("(1,0,-1)", plain), (np.array([1, 0, -1]), plain),
             ({0: 1, 2: -1}, plain), ({"a": 1, "c": -1}, framed), ({"a": 1, 2: -1}, framed)]
    models = [daskgb.train({"device": "cpu", "monotone_constraints": c, "max_depth": 4}, m, 5, verbose_eval=False)
              for c, m in forms]
    for (c, _), b in zip(forms, models):
        assert [t.to_dict() for t in b.trees] == [t.to_dict() for t in models[0].trees], c


def test_vector_and_parse():
    assert monotone_vector(parse_monotone_constraints("(1, -1)"), 4).tolist() == [1, -1, 0, 0]
    assert monotone_vector(parse_monotone_constraints({"b": -1}), 3, ["a", "b", "c"]).tolist() == [0, -1, 0]
    assert parse_monotone_constraints(None) is None and parse_monotone_constraints("") is None


@pytest.mark.parametrize("constraints, match", [
    ((1, 0, 2), "must be -1, 0 or 1"),
    ((1, 0, 0, 0, 0, 0, 1), "7 entries for data with 6 features"),
    ("(1,0", "not a valid tuple"),
    ({"a": 1}, "'a', which the data does not have"),
    ({9: 1}, r"index 9, outside \[0, 6\)"),
    ((1.5,), "must be -1, 0 or 1"),
    (5, "tuple, list or dict"),
])
def test_bad_constraints_fail_before_training(constraints, match):
    X, y = make_data(1, "reg:squarederror", False, n=50)
    with pytest.raises(ValueError, match=match):
        daskgb.train({"monotone_constraints": constraints}, daskgb.QuantileMatrix(X, y), 1)
