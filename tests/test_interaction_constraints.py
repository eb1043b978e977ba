"""interaction_constraints against xgboost `hist` on exact-cut data, in every form XGBoost takes.

XGBoost's rule (daskgb/feature_sets.py): a child may split on the features of its
path and on the features of every constraint set holding all of them. So on every
path the features used lie in one constraint set, or the path uses one feature only
(a feature in no set); that is checked on our trees independently of XGBoost.
"""

from __future__ import annotations

import itertools
import json

import exact_data
import numpy as np
import pytest
from exact_data import xgb_trees

import daskgb
from daskgb.feature_sets import (
    InteractionConstraints,
    interaction_sets,
    parse_interaction_constraints,
)

xgb = pytest.importorskip("xgboost")

CONSTRAINTS = [
    [[0, 1], [2, 3, 4]],  # disjoint; feature 5 in no set
    [[0, 2], [1, 2, 3]],  # overlapping in feature 2
    [[4, 0], [0, 2], [2, 4]],  # pairs only: no path may use all three
    [[1], [0, 5]],  # a set of one
    [],  # XGBoost: constraints on, no sets: every branch keeps to one feature
]


def make_data(seed, objective, with_nan, n=600):
    """Exact-cut data whose signal is all interactions of feature pairs."""
    return exact_data.make_data(seed, objective, with_nan, n, score=lambda Z, rng: (
        2 * Z[:, 0] * Z[:, 1] + Z[:, 2] ** 2 - Z[:, 3] * Z[:, 4] + Z[:, 5] + rng.normal(size=n)))


def path_features(tree):
    """The set of split features on the path to every node."""
    out = {0: frozenset()}
    for nid in range(tree.n_nodes):  # parents come before their children
        if tree.left[nid] >= 0:
            used = out[nid] | {int(tree.feature[nid])}
            out[int(tree.left[nid])] = out[int(tree.right[nid])] = used
    return out


def assert_paths_obey(booster, sets):
    for t in booster.trees:
        for nid, used in path_features(t).items():
            assert len(used) <= 1 or any(used <= set(s) for s in sets), f"path to node {nid} uses {sorted(used)}"


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_parity_with_xgboost_hist(objective, policy):
    failures = []
    for k, (constraints, with_nan) in enumerate(itertools.product(CONSTRAINTS, [False, True])):
        X, y = make_data(k, objective, with_nan)
        params = dict(objective=objective, grow_policy=policy, max_depth=5, max_leaves=14 if policy == "lossguide" else 0,
                      base_score=0.5, reg_lambda=1.0)
        # XGBoost's Python layer takes index lists only as a string (a list must name features).
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1, "interaction_constraints": json.dumps(constraints)},
                       xgb.DMatrix(X, y), 8)
        ours = daskgb.train({**params, "device": "cpu", "interaction_constraints": constraints},
                            daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
        label = f"{constraints} nan={with_nan}"
        for i, (tx, to) in enumerate(zip(xgb_trees(bx), ours.trees)):
            assert tx["left_children"] == to.left.tolist(), f"{label}: tree {i} shape"
            np.testing.assert_array_equal(np.asarray(tx["split_indices"])[to.left >= 0], to.feature[to.left >= 0],
                                          err_msg=f"{label}: tree {i}")
        diff = float(np.max(np.abs(bx.predict(xgb.DMatrix(X), output_margin=True) - ours.predict(X, output_margin=True))))
        if diff > 1e-5:
            failures.append(f"{label}: max |margin diff| {diff:.3e}")
        assert_paths_obey(ours, constraints)
    assert not failures, "\n".join(failures)


def test_constraints_bind():
    """The data needs the forbidden interactions: the constrained model differs from the free one."""
    X, y = make_data(50, "reg:squarederror", False)
    m = daskgb.QuantileMatrix(X, y)
    free = daskgb.train({"device": "cpu"}, m, 5, verbose_eval=False)
    tied = daskgb.train({"device": "cpu", "interaction_constraints": [[0, 2], [1, 3], [4, 5]]}, m, 5,
                        verbose_eval=False)
    with pytest.raises(AssertionError):
        assert_paths_obey(free, [[0, 2], [1, 3], [4, 5]])
    assert_paths_obey(tied, [[0, 2], [1, 3], [4, 5]])


def test_string_list_and_name_forms_give_the_same_model():
    pd = pytest.importorskip("pandas")
    X, y = make_data(60, "binary:logistic", True)
    names = ["a", "b", "c", "d", "e", "f"]
    base = {"objective": "binary:logistic", "device": "cpu", "max_depth": 4}
    forms = {
        "list": ([[0, 1], [2, 3, 4]], daskgb.QuantileMatrix(X, y)),
        "string": ("[[0, 1], [2, 3, 4]]", daskgb.QuantileMatrix(X, y)),
        "tuples": (((0, 1), (2, 3, 4)), daskgb.QuantileMatrix(X, y)),
        "names": ([["a", "b"], ["c", "d", "e"]], daskgb.QuantileMatrix(pd.DataFrame(X, columns=names), y)),
        "mixed": ([["a", 1], [2, "d", "e"]], daskgb.QuantileMatrix(pd.DataFrame(X, columns=names), y)),
    }
    models = {k: daskgb.train({**base, "interaction_constraints": c}, m, 6, verbose_eval=False)
              for k, (c, m) in forms.items()}
    trees = {k: [t.to_dict() for t in b.trees] for k, b in models.items()}
    for k in forms:
        assert trees[k] == trees["list"], k
    # XGBoost with feature names: the same model.
    bx = xgb.train({**base, "tree_method": "hist", "nthread": 1, "base_score": models["names"].base_score,
                    "interaction_constraints": [["a", "b"], ["c", "d", "e"]]},
                   xgb.DMatrix(pd.DataFrame(X, columns=names), y), 6)
    np.testing.assert_allclose(models["names"].predict(pd.DataFrame(X, columns=names), output_margin=True),
                               bx.predict(xgb.DMatrix(pd.DataFrame(X, columns=names)), output_margin=True), atol=1e-5)


def test_allowed_sets_follow_xgboost_rule():
    sets = interaction_sets([[0, 1], [1, 2], [3]], 5)
    ic = InteractionConstraints(sets)
    assert ic.allowed(0).all()  # the root may use anything
    ic.split(0, 1, 1, 2)  # feature 1 is in two sets: both open
    assert np.flatnonzero(ic.allowed(1)).tolist() == [0, 1, 2]
    ic.split(1, 0, 3, 4)  # path {1, 0}: only the set {0, 1} holds both
    assert np.flatnonzero(ic.allowed(3)).tolist() == [0, 1]
    ic.split(2, 4, 5, 6)  # path {1, 4}: no set holds both; only the path's features stay
    assert np.flatnonzero(ic.allowed(6)).tolist() == [1, 4]


def test_with_column_sampling_a_node_keeps_both_restrictions():
    from daskgb.feature_sets import ColumnSampler

    X, y = make_data(70, "reg:squarederror", True, n=1500)
    sets = [[0, 1, 2], [2, 3, 4, 5]]
    params = {"device": "cpu", "interaction_constraints": sets, "colsample_bynode": 0.5, "colsample_bytree": 0.9,
              "seed": 4, "max_depth": 6}
    b = daskgb.train(params, daskgb.QuantileMatrix(X, y), 10, verbose_eval=False)
    assert_paths_obey(b, sets)
    for i, t in enumerate(b.trees):
        s = ColumnSampler(6, 0.9, 1.0, 0.5, seed=4, tree_index=i)
        for nid in np.flatnonzero(~t.is_leaf):
            assert t.feature[nid] in s.node_set(int(nid), int(t.depth[nid]))


@pytest.mark.parametrize("constraints, match", [
    ([[0, 6]], r"feature index 6, outside \[0, 6\)"),
    ([[-1, 2]], r"feature index -1"),
    ([["a", "b"]], "no feature names"),
    ("[[0, 1]", "not a valid list"),
    ("junk", "not a valid list"),
    ([[0.5, 1]], "feature indices or names"),
    ([[True, 1]], "feature indices or names"),
    ([0, 1], "list of lists"),
    ({"a": 1}, "list of lists"),
])
def test_bad_constraints_fail_before_training(constraints, match):
    X, y = make_data(1, "reg:squarederror", False, n=50)
    with pytest.raises(ValueError, match=match):
        daskgb.train({"interaction_constraints": constraints}, daskgb.QuantileMatrix(X, y), 1)


def test_unknown_name_is_named():
    pd = pytest.importorskip("pandas")
    X, y = make_data(1, "reg:squarederror", False, n=50)
    m = daskgb.QuantileMatrix(pd.DataFrame(X, columns=list("abcdef")), y)
    with pytest.raises(ValueError, match="'zz', which the data does not have"):
        daskgb.train({"interaction_constraints": [["a", "zz"]]}, m, 1)


def test_parse_forms():
    assert parse_interaction_constraints(None) is None and parse_interaction_constraints("") is None
    assert parse_interaction_constraints("[[0, 1], [2]]") == [[0, 1], [2]]
    assert parse_interaction_constraints("[[1.0, 2]]") == [[1, 2]]  # XGBoost's parser takes integral floats
    assert parse_interaction_constraints([{3, 1}]) in ([[1, 3]], [[3, 1]])
    assert parse_interaction_constraints("[]") == []
    assert parse_interaction_constraints(np.array([[0, 1], [2, 3]])) == [[0, 1], [2, 3]]
    assert parse_interaction_constraints([np.array([0, 1]), [2]]) == [[0, 1], [2]]
