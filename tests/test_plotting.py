"""Plots (daskgb/plotting.py) on matplotlib's Agg backend: what is drawn, checked on the Axes."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")

NAMES = ["age", "income", "score", "noise"]


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(np.float32)
    import pandas as pd

    df = pd.DataFrame(X, columns=NAMES)
    clf = daskgb.GBClassifier(n_estimators=12, max_depth=3, device="cpu", eval_metric=["logloss", "error"],
                              early_stopping_rounds=50)
    clf.fit(df[:600], y[:600], eval_set=[(df[:600], y[:600]), (df[600:], y[600:])])
    return clf


def test_plot_importance(fitted):
    ax = daskgb.plot_importance(fitted, importance_type="gain", max_num_features=3)
    scores = fitted.get_booster().get_score("gain")
    top = sorted(scores, key=scores.get)[-3:]
    assert [t.get_text() for t in ax.get_yticklabels()] == top  # largest at the top
    widths = [p.get_width() for p in ax.patches]
    np.testing.assert_allclose(widths, [scores[n] for n in top])
    assert ax.get_xlabel() == "gain"
    weights = daskgb.plot_importance(fitted.get_booster())  # a Booster too; weight: split counts
    assert sum(p.get_width() for p in weights.patches) == sum(fitted.get_booster().get_score("weight").values())
    plt.close("all")


def test_plot_metric(fitted):
    with pytest.raises(ValueError, match="pass metric="):
        daskgb.plot_metric(fitted)
    ax = daskgb.plot_metric(fitted, metric="logloss")
    history = fitted.evals_result()
    lines = {line.get_label(): line for line in ax.get_lines()}
    for name in ("validation_0", "validation_1"):
        np.testing.assert_allclose(lines[name].get_ydata(), history[name]["logloss"])
    assert any(label.startswith("best iteration") for label in lines)
    ax = daskgb.plot_metric(history, metric="error")
    assert len(ax.get_lines()) == 2 and ax.get_ylabel() == "error"
    with pytest.raises(ValueError, match="not in the evals_result"):
        daskgb.plot_metric(history, metric="auc")
    plt.close("all")


def test_plot_tree(fitted):
    booster = fitted.get_booster()
    tree = booster.trees[1]
    ax = daskgb.plot_tree(fitted, num_trees=1)
    texts = [t.get_text() for t in ax.texts]
    splits = np.flatnonzero(tree.left >= 0)
    leaves = np.flatnonzero(tree.left < 0)
    for node in splits:  # a box per split, named, and a yes and a no edge for each
        assert f"{NAMES[tree.feature[node]]}<{tree.threshold[node]:.4g}" in texts
    assert sum(t.startswith("leaf=") for t in texts) == leaves.size
    assert sum(t.startswith("yes") for t in texts) == sum(t.startswith("no") for t in texts) == splits.size
    assert sum(t.endswith("missing") for t in texts) == splits.size  # one branch of each split takes missing
    daskgb.plot_tree(booster, num_trees=0, rankdir="LR")
    with pytest.raises(ValueError, match="outside the model"):
        daskgb.plot_tree(booster, num_trees=len(booster.trees))
    plt.close("all")


def test_plot_tree_of_a_very_deep_tree():
    """A valid tree more levels deep than Python recurses (each split's right child a leaf) is drawn: the
    layout walks it without recursion. The leaves sit left to right in the tree's order."""
    from daskgb.tree import TreeBuilder

    depth = 1500  # past Python's recursion limit (1000), which the old recursive layout hit
    b = TreeBuilder()
    b.add_node(-1, 0, 0.0, 0.0, 1.0)
    node = 0
    for d in range(depth):
        (left,), (right,) = b.add_children(np.array([node]), np.array([d + 1]), np.array([0.1]), np.array([0.1]),
                                           np.array([1.0]), np.array([0.2]), np.array([0.2]), np.array([1.0]))
        b.split(np.array([node]), np.array([0]), np.array([0]), np.array([0.5], np.float32), np.array([1]),
                np.array([1.0], np.float32), np.array([left]), np.array([right]))
        node = left
    tree = b.build()
    booster = daskgb.Booster({}, [tree], 0.5, 1)
    ax = daskgb.plot_tree(booster)
    assert sum(t.get_text().startswith("leaf=") for t in ax.texts) == depth + 1
    plt.close("all")


def test_plot_tree_draws_categorical_splits_as_xgboost_dumps_them(tmp_path):
    """A categorical split's box reads as XGBoost's dump writes the node ("color:{0,2,5}", the
    codes that go right); its "yes" edge goes to the right child, its "no" edge to the left."""
    import re

    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(1)
    n = 600
    X = np.c_[rng.integers(0, 12, n), rng.normal(size=n), rng.integers(0, 4, n)].astype(np.float32)
    X[rng.random(n) < 0.1, 0] = np.nan
    y = np.isin(X[:, 0], [0, 2, 5, 7]) * 2.0 + (X[:, 2] == 1) + 0.3 * X[:, 1] + rng.normal(size=n) * 0.1
    names = ["color", "x", "size"]
    m = daskgb.QuantileMatrix(X, y, feature_names=names, feature_types=["c", "q", "c"], enable_categorical=True,
                              device="cpu")
    booster = daskgb.train({"max_depth": 3, "device": "cpu", "max_cat_to_onehot": 4}, m, 2)
    tree = booster.trees[0]
    assert 0 in tree.categories and tree.categories[0].size > 1  # the root splits color by a set
    booster.save_model(tmp_path / "m.json", format="xgboost")
    dump = xgb.Booster(model_file=str(tmp_path / "m.json")).get_dump()[0]
    theirs = dict(re.findall(r"(\d+):\[([^\]]+)\]", dump))
    ax = daskgb.plot_tree(booster, num_trees=0)
    texts = [t.get_text() for t in ax.texts]
    for node in tree.categories:
        assert theirs[str(node)] in texts
    assert theirs["0"] == "color:{" + ",".join(map(str, tree.categories[0])) + "}"
    # The root's edges: labels sit half way down to the children; the left one says "no".
    root = next(t for t in ax.texts if t.get_text() == theirs["0"])
    x0 = root.get_position()[0]
    edges = {("left" if t.get_position()[0] < x0 else "right"): t.get_text() for t in ax.texts
             if t.get_position()[1] == -0.5}
    missing = ", missing"
    assert edges == {"left": "no" + (missing if tree.default_left[0] else ""),
                     "right": "yes" + ("" if tree.default_left[0] else missing)}
    plt.close("all")
