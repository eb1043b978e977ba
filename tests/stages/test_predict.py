"""The predict stage (daskgb/predict/): margins from trees, for raw features or rows binned with the training cuts.

predict_margin walks raw values down each tree (a value < the threshold goes left, a missing
one takes default_left); add_leaf_values routes binned rows as training's partition does.
Tests taking `backend` run on every backend against rows walked by hand or routed by the
partition stage; tests taking `cb` (marked gpu) run the oracle and the CUDA backend on the
same input and compare.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import (MISSING_SENTINEL, LAYOUTS, both_ellpacks, make_cuts, random_binned_tree, random_ellpack,
                      random_trees, route_by_partition)
from daskgb.arrays import to_host
from daskgb.tree import FIELDS, Tree


def margins_by_hand(X, nodes, offsets, base, missing):
    """Each row walked down each tree in Python, its leaf values added in float32, tree after tree."""
    out = base.astype(np.float32).copy()
    for t in range(len(offsets) - 1):
        tree = nodes[offsets[t] : offsets[t + 1]]
        for r in range(X.shape[0]):
            nid = 0
            while tree["left"][nid] >= 0:
                v = X[r, tree["feature"][nid]]
                is_missing = bool(np.isnan(v)) or (not np.isnan(missing) and v == np.float32(missing))
                go_left = tree["default_left"][nid] != 0 if is_missing else v < tree["threshold"][nid]
                nid = tree["left"][nid] if go_left else tree["right"][nid]
            out[r] += tree["value"][nid]
    return out


def raw_rows(rng, n_rows, n_features, missing):
    """Values on a half-integer grid (many equal to a threshold), NaN and `missing` missing."""
    X = (rng.integers(-22, 23, (n_rows, n_features)) * 0.5).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    if not np.isnan(missing):
        X[rng.random(X.shape) < 0.1] = missing
    return X


# --------------------------------------------------------------------------- every backend
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL], ids=["nan", "sentinel"])
def test_predict_margin_walks_each_row_down_each_tree(backend, xp, missing):
    rng = np.random.default_rng(33)
    n_rows, n_features = 600, 6
    X = raw_rows(rng, n_rows, n_features, missing)
    nodes, offsets = random_trees(rng, 5, n_features, 6)
    base = rng.normal(size=n_rows).astype(np.float32)
    out = xp.asarray(base.copy())
    result = backend.predict_margin(xp.asarray(X), nodes, offsets, out, missing)
    assert result is out
    np.testing.assert_allclose(to_host(out), margins_by_hand(X, nodes, offsets, base, missing), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_leaf_values_routes_rows_as_training_partitions_them(backend, xp, layout):
    rng = np.random.default_rng(41)
    cuts = make_cuts(rng, 7, 40)
    ell = random_ellpack(backend, rng, cuts, layout, 900)
    for _ in range(3):
        tree = random_binned_tree(rng, cuts, 6)
        base = rng.normal(size=ell.n_rows).astype(np.float32)
        margin = xp.asarray(base.copy())
        backend.add_leaf_values(ell, tree, margin)
        np.testing.assert_array_equal(to_host(margin), base + tree.value[route_by_partition(backend, ell, tree)])


# --------------------------------------------------------------------------- GPU: the oracle and CUDA compared
@pytest.mark.gpu
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL])
def test_predict_margin(oracle, cb, missing):
    import cupy

    rng = np.random.default_rng(30)
    n_rows, n_features = 2500, 6
    X = raw_rows(rng, n_rows, n_features, missing)
    nodes, offsets = random_trees(rng, 9, n_features, 6)
    base = rng.normal(size=n_rows).astype(np.float32)
    expected = oracle.predict_margin(X, nodes, offsets, base.copy(), missing)
    out = cupy.asarray(base)
    result = cb.predict_margin(cupy.asarray(X), nodes, offsets, out, missing)
    assert result is out
    got = to_host(out)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_leaf_values(oracle, cb, layout):
    import cupy

    rng = np.random.default_rng(43)
    ell_n, ell_c = both_ellpacks(cb, rng, layout, 3000)
    for _ in range(3):
        tree = random_binned_tree(rng, ell_n.cuts, 7)
        # A margin column of a two-output matrix: the kernel adds with a stride.
        base = rng.normal(size=(ell_n.n_rows, 2)).astype(np.float32)
        expected = base.copy()
        oracle.add_leaf_values(ell_n, tree, expected[:, 1])
        got = cupy.asarray(base)
        cb.add_leaf_values(ell_c, tree, got[:, 1])
        np.testing.assert_array_equal(to_host(got), expected)


def test_a_tree_and_its_device_layout_are_the_same_tree():
    rng = np.random.default_rng(44)
    tree = random_binned_tree(rng, make_cuts(rng, 5, 30), 6)
    back = Tree.from_words(tree.words())
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(back, name), getattr(tree, name))
        assert getattr(back, name).dtype == getattr(tree, name).dtype


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_leaf_values_reads_a_tree_where_the_device_grew_it(oracle, cb, layout):
    """The eval sets of a queued round move by the trees' words on the device (growth.cu's
    layout, rows of `cap` words, unused words after the tree's nodes): same sums as the oracle's."""
    import cupy

    rng = np.random.default_rng(45)
    ell_n, ell_c = both_ellpacks(cb, rng, layout, 3000)
    for _ in range(3):
        tree = random_binned_tree(rng, ell_n.cuts, 7)
        words = np.full((len(FIELDS) + 1, tree.n_nodes + 9), -7, dtype=np.int32)  # a wider cap, as grown
        words[:, : tree.n_nodes] = tree.words()
        base = rng.normal(size=(ell_n.n_rows, 3)).astype(np.float32)
        expected = base.copy()
        oracle.add_leaf_values(ell_n, tree, expected[:, 2])
        got = cupy.asarray(base)
        cb.add_leaf_values(ell_c, cupy.asarray(words), got[:, 2])
        np.testing.assert_array_equal(to_host(got), expected)
