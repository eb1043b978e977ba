"""colsample_bytree / colsample_bylevel / colsample_bynode.

The draws are ours, not XGBoost's random stream (see daskgb/feature_sets.py), so
models are compared with XGBoost only where the draw is deterministic: the count of
features a draw keeps, and rate 1 (no sampling). Otherwise: every split uses a
feature of its node's drawn set, the sets nest (node in level in tree), a seed
reproduces a model, and accuracy stays close to unsampled training.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb
from daskgb.feature_sets import ColumnSampler, sample_count
from daskgb.metric import auc_of

xgb = pytest.importorskip("xgboost")


def make(seed=0, n=3000, n_features=20):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    Z = np.nan_to_num(X)
    score = Z[:, :n_features // 2].sum(axis=1) * 0.5 + Z[:, 0] * Z[:, 1] + rng.normal(size=n)
    return X, (score > 0).astype(np.float32)


def test_count_per_draw_is_xgboosts_float32_rule():
    # float32(0.29) * 100 rounds to 29.0 in float32; in double it would truncate to 28.
    assert sample_count(100, 0.29) == 29 and int(0.29 * 100) == 28
    assert sample_count(10, 0.7) == 7 and sample_count(10, 0.05) == 1 and sample_count(3, 1.0) == 3
    # XGBoost itself: a large lossguide tree on 100 informative features uses every feature of its draw.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 100)).astype(np.float32)
    y = X.sum(axis=1) + rng.normal(size=3000)
    params = {"colsample_bytree": 0.29, "grow_policy": "lossguide", "max_depth": 0, "max_leaves": 300,
              "min_child_weight": 0, "lambda": 0.01}
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 2)
    for t in json.loads(bx.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]:
        used = np.asarray(t["split_indices"])[np.asarray(t["left_children"]) >= 0]
        assert len(set(used.tolist())) == sample_count(100, 0.29)
    ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 2, verbose_eval=False)
    for t in ours.trees:
        assert len(set(t.feature[~t.is_leaf].tolist())) == sample_count(100, 0.29)


def test_sets_nest_and_have_xgboosts_sizes():
    s = ColumnSampler(50, 0.5, 0.5, 0.5, seed=3, tree_index=4)
    assert s.tree_set.size == 25 and np.all(np.diff(s.tree_set) > 0)
    for depth in range(4):
        level = s.level_set(depth)
        assert level.size == 12 and np.isin(level, s.tree_set).all()
        for nid in range(2**depth - 1, 2 ** (depth + 1) - 1):
            node = s.node_set(nid, depth)
            assert node.size == 6 and np.isin(node, level).all()
            np.testing.assert_array_equal(node, s.node_set(nid, depth))  # a node draws the same set again
    other = ColumnSampler(50, 0.5, 0.5, 0.5, seed=3, tree_index=5)
    assert not np.array_equal(other.tree_set, s.tree_set)  # each tree draws its own


@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
@pytest.mark.parametrize("rates", [(0.5, 1.0, 1.0), (1.0, 0.4, 1.0), (1.0, 1.0, 0.3), (0.8, 0.7, 0.6)],
                         ids=["bytree", "bylevel", "bynode", "nested"])
def test_every_split_feature_is_in_its_drawn_set(policy, rates):
    X, y = make(1)
    params = {"objective": "binary:logistic", "grow_policy": policy, "max_depth": 6, "max_leaves": 24, "seed": 11,
              "colsample_bytree": rates[0], "colsample_bylevel": rates[1], "colsample_bynode": rates[2],
              "device": "cpu"}
    booster = daskgb.train(params, daskgb.QuantileMatrix(X, y), 12, verbose_eval=False)
    n_used = set()
    for i, t in enumerate(booster.trees):
        s = ColumnSampler(X.shape[1], *rates, seed=11, tree_index=i)
        for nid in np.flatnonzero(~t.is_leaf):
            assert t.feature[nid] in s.node_set(int(nid), int(t.depth[nid])), f"tree {i} node {nid}"
        n_used.add(len(set(t.feature[~t.is_leaf].tolist())))
    assert max(n_used) > 1


def test_rate_one_is_no_sampling_exactly():
    X, y = make(2)
    base = {"objective": "binary:logistic", "max_depth": 5, "device": "cpu"}
    m = daskgb.QuantileMatrix(X, y)
    plain = daskgb.train(base, m, 8, verbose_eval=False)
    ones = daskgb.train({**base, "colsample_bytree": 1, "colsample_bylevel": 1.0, "colsample_bynode": 1.0,
                         "seed": 5}, m, 8, verbose_eval=False)
    assert [t.to_dict() for t in plain.trees] == [t.to_dict() for t in ones.trees]
    # ... and equal to xgboost hist with the same rates (nothing is drawn there either).
    bx = xgb.train({**base, "tree_method": "hist", "nthread": 1, "colsample_bytree": 1.0, "base_score": 0.5},
                   xgb.DMatrix(np.round(X * 4) / 4, y), 8)
    ours = daskgb.train({**base, "colsample_bynode": 1.0, "base_score": 0.5},
                        daskgb.QuantileMatrix(np.round(X * 4) / 4, y), 8, verbose_eval=False)
    np.testing.assert_allclose(ours.predict(np.round(X * 4) / 4, output_margin=True),
                               bx.predict(xgb.DMatrix(np.round(X * 4) / 4), output_margin=True), atol=1e-5)


def test_seed_reproduces_and_changes_the_model():
    X, y = make(3)
    m = daskgb.QuantileMatrix(X, y)
    params = {"objective": "binary:logistic", "colsample_bynode": 0.5, "colsample_bytree": 0.8, "device": "cpu"}
    a = daskgb.train({**params, "seed": 1}, m, 5, verbose_eval=False)
    b = daskgb.train({**params, "seed": 1}, m, 5, verbose_eval=False)
    c = daskgb.train({**params, "seed": 2}, m, 5, verbose_eval=False)
    assert [t.to_dict() for t in a.trees] == [t.to_dict() for t in b.trees]
    assert [t.to_dict() for t in a.trees] != [t.to_dict() for t in c.trees]


def test_accuracy_stays_close_to_unsampled():
    X, y = make(4, n=6000)
    Xt, yt = make(5, n=4000)
    m = daskgb.QuantileMatrix(X, y)
    base = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.1, "device": "cpu"}
    auc = {}
    for name, extra in {"none": {}, "sampled": {"colsample_bytree": 0.7, "colsample_bylevel": 0.8,
                                                "colsample_bynode": 0.6}}.items():
        auc[name] = auc_of(yt, daskgb.train({**base, **extra}, m, 60, verbose_eval=False).predict(Xt))
    assert auc["none"] > 0.85
    assert abs(auc["sampled"] - auc["none"]) < 0.02, auc


@pytest.mark.parametrize("name", ["colsample_bytree", "colsample_bylevel", "colsample_bynode"])
@pytest.mark.parametrize("value", [0, -0.5, 1.5, "half", float("nan")])
def test_bad_rates(name, value):
    X, y = make(6, n=50)
    with pytest.raises(ValueError, match=name):
        daskgb.train({name: value}, daskgb.QuantileMatrix(X, y), 1)


def test_multiclass_trees_draw_their_own_sets():
    X, _ = make(9)
    y = np.digitize(np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]), [-1, 0, 1]).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 4, "colsample_bytree": 0.3, "seed": 2, "max_depth": 4,
              "device": "cpu"}
    b = daskgb.train(params, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    assert len(b.trees) == 12
    sets = []
    for i, t in enumerate(b.trees):
        s = ColumnSampler(X.shape[1], 0.3, 1.0, 1.0, seed=2, tree_index=i)
        assert np.isin(t.feature[~t.is_leaf], s.tree_set).all(), f"tree {i}"
        sets.append(tuple(s.tree_set))
    assert len(set(sets[:4])) > 1  # the classes of one round sample apart


def test_feature_weights_draw_in_proportion_to_the_weights():
    # XGBoost's WeightedSamplingWithoutReplacement: a one-feature draw picks feature i with
    # probability w_i / sum(w); features of weight 0 come only after all the others.
    w = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    picks = np.zeros(5)
    for i in range(4000):
        s = ColumnSampler(5, 0.2, 1.0, 1.0, seed=1, tree_index=i, weights=w)
        assert s.tree_set.size == 1
        picks[s.tree_set[0]] += 1
    np.testing.assert_allclose(picks / picks.sum(), w / w.sum(), atol=0.03)
    for i in range(50):
        s = ColumnSampler(5, 0.8, 1.0, 1.0, seed=2, tree_index=i, weights=w)
        np.testing.assert_array_equal(s.tree_set, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="feature_weights has 4 weights for data with 5 features"):
        ColumnSampler(5, 0.5, 1.0, 1.0, seed=0, tree_index=0, weights=w[:4])
