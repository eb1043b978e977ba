"""The predict stage (daskgb/predict/): margins from trees, for raw features or rows binned with the training cuts.

predict_margin walks raw values down each tree (a value < the threshold goes left, a missing
one takes default_left; at a categorical split a value goes right when its category is in the
node's set); add_leaf_values routes binned rows as training's partition does.
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


def relabelled(nodes, offsets):
    """The same trees with each tree's nodes other than the root numbered backwards: children
    before their parents, a right child before its left one."""
    out = nodes.copy()
    for a, b in zip(offsets[:-1], offsets[1:]):
        n = b - a
        new_id = np.concatenate([[0], n - np.arange(1, n)])  # old id -> new id
        tree = nodes[a:b].copy()
        inner = tree["left"] >= 0
        tree["left"][inner] = new_id[tree["left"][inner]]
        tree["right"][inner] = new_id[tree["right"][inner]]
        out[a + new_id] = tree
    return out, offsets


def with_a_leaf_tree(nodes, offsets):
    """The trees and, after them, a tree that is one leaf."""
    leaf = np.zeros(1, dtype=nodes.dtype)
    leaf["left"] = leaf["right"] = -1
    leaf["value"] = 0.375
    return np.concatenate([nodes, leaf]), np.append(offsets, offsets[-1] + 1).astype(offsets.dtype)


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


@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL], ids=["nan", "sentinel"])
def test_compiled_predict_margin_equals_the_oracle(oracle, compiled, missing, monkeypatch):
    """The CPU's compiled walk (predict/compiled.py) adds the oracle's float32 leaf values bit for
    bit: numeric trees, and trees with categorical splits on rows of every odd category (unseen,
    non-integer, negative, >= 2^24, infinite, missing), rows split between threads, into a
    strided margin."""
    from daskgb.category_sets import pack
    from daskgb.predict import compiled as predict_compiled

    monkeypatch.setattr(predict_compiled, "_MIN_ROWS_PER_THREAD", 7)
    rng = np.random.default_rng(34)
    X = raw_rows(rng, 700, 6, missing)
    nodes, offsets = random_trees(rng, 9, 6, 6)
    base = rng.normal(size=(X.shape[0], 2)).astype(np.float32)
    expected, got = base.copy(), base.copy()
    oracle.predict_margin(X, nodes, offsets, expected[:, 0], missing)
    assert compiled.predict_margin(X, nodes, offsets, got[:, 0], missing) is not None
    np.testing.assert_array_equal(got, expected)
    # Two walks: trees whose right children follow their left ones, after the parent (as
    # random_trees and daskgb make them) go _BLOCK_ROWS rows at a time (a block cut short at
    # each thread's end); the same trees numbered otherwise (children before their parents,
    # right before left) and a lone leaf go one row at a time. Both are the oracle's bits.
    monkeypatch.setattr(predict_compiled, "_BLOCK_ROWS", 16)
    renumbered = relabelled(nodes, offsets)
    for trees in ((nodes, offsets), renumbered, with_a_leaf_tree(nodes, offsets), with_a_leaf_tree(*renumbered)):
        expected, got = base[:, 1].copy(), base[:, 1].copy()
        oracle.predict_margin(X, *trees, expected, missing)
        compiled.predict_margin(X, *trees, got, missing)
        np.testing.assert_array_equal(got, expected)
    booster, X, _, _, _ = categorical_model(48)
    X = odd_categories(rng, X, missing)
    nodes, offsets = booster._packed_trees(booster.trees)
    cats = pack(booster.trees, offsets)
    base = rng.normal(size=X.shape[0]).astype(np.float32)
    expected = oracle.predict_margin(X, nodes, offsets, base.copy(), missing, categories=cats)
    np.testing.assert_array_equal(compiled.predict_margin(X, nodes, offsets, base.copy(), missing, categories=cats),
                                  expected)


@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL], ids=["nan", "sentinel"])
def test_compiled_leaf_indices_equal_the_oracle(oracle, compiled, missing, monkeypatch):
    """The compiled leaf ids (predict/compiled.py: the block walk's leaves) are the oracle's:
    trees laid out as daskgb makes them, the same trees numbered otherwise and a lone leaf
    (the oracle's steps), trees with categorical splits, rows split between threads, and a
    strided output."""
    from daskgb.category_sets import pack
    from daskgb.predict import compiled as predict_compiled

    monkeypatch.setattr(predict_compiled, "_MIN_ROWS_PER_THREAD", 7)
    monkeypatch.setattr(predict_compiled, "_BLOCK_ROWS", 16)
    rng = np.random.default_rng(36)
    X = raw_rows(rng, 700, 6, missing)
    nodes, offsets = random_trees(rng, 9, 6, 6)
    cases = [(nodes, offsets, None), (*relabelled(nodes, offsets), None), (*with_a_leaf_tree(nodes, offsets), None)]
    booster, Xc, _, _, _ = categorical_model(48)
    cat_nodes, cat_offsets = booster._packed_trees(booster.trees)
    cases.append((cat_nodes, cat_offsets, pack(booster.trees, cat_offsets)))
    for case_nodes, case_offsets, cats in cases:
        rows = X if cats is None else odd_categories(rng, Xc, missing)
        n_trees = len(case_offsets) - 1
        expected = np.full((rows.shape[0], n_trees), -7, dtype=np.int32)
        oracle.leaf_indices(rows, case_nodes, case_offsets, expected, missing, categories=cats)
        wide = np.full((rows.shape[0], 2 * n_trees), -7, dtype=np.int32)
        compiled.leaf_indices(rows, case_nodes, case_offsets, wide[:, ::2], missing, categories=cats)
        np.testing.assert_array_equal(wide[:, ::2], expected)
        assert np.all(wide[:, 1::2] == -7)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_add_leaf_values_equals_the_oracle(oracle, compiled, layout):
    """The CPU's compiled binned walk (predict/compiled.py: the compiled partition's passes)
    gives the oracle's margins bit for bit: random trees in every layout, into a margin column
    of a two-output matrix (a stride), and a matrix of no rows."""
    rng = np.random.default_rng(44)
    cuts = make_cuts(rng, 7, 40)
    ell = random_ellpack(oracle, rng, cuts, layout, 1500)
    for depth in (0, 1, 7):
        tree = random_binned_tree(rng, cuts, depth)
        base = rng.normal(size=(ell.n_rows, 2)).astype(np.float32)
        expected, got = base.copy(), base.copy()
        oracle.add_leaf_values(ell, tree, expected[:, 1])
        compiled.add_leaf_values(ell, tree, got[:, 1])
        np.testing.assert_array_equal(got, expected)
    if layout != "sparse":
        empty = random_ellpack(oracle, rng, cuts, layout, 0)
        compiled.add_leaf_values(empty, tree, np.zeros(0, dtype=np.float32))


@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_compiled_add_leaf_values_with_categorical_splits_equals_the_oracle(oracle, compiled, layout):
    """Trees with categorical splits, rows of unseen and non-integer categories and missing
    values, dense or CSR: the compiled walk routes them as the oracle does."""
    booster, X, _, _, matrix = categorical_model(54)
    rng = np.random.default_rng(55)
    ell = categorical_matrix(matrix, X, layout, rng).ellpack
    assert ell.cuts.has_categorical and ell.is_dense == (layout != "sparse")
    for tree in booster.trees:
        base = rng.normal(size=ell.n_rows).astype(np.float32)
        expected, got = base.copy(), base.copy()
        oracle.add_leaf_values(ell, tree, expected)
        compiled.add_leaf_values(ell, tree, got)
        np.testing.assert_array_equal(got, expected)


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


# --------------------------------------------------------------------------- categorical splits
# Models trained on the host (the numpy backend routes categories) on categorical columns of
# 4, 40 and 150 categories (sets of 1 to 5 words) beside two numeric ones, and raw rows that
# hold every kind of value a categorical split must place: missing, unseen categories (within
# and past the sets' words), non-integers (truncated), negative ones and ones at or past 2**24
# (in no set).
CARDINALITIES = (4, 40, 150)


def categorical_data(rng, n_rows: int):
    """(X, y, feature_types): codes of CARDINALITIES' columns (some missing), two numeric columns."""
    cols = [rng.integers(0, c, n_rows).astype(np.float32) for c in CARDINALITIES]
    score = sum(rng.normal(size=c)[col.astype(int)] for c, col in zip(CARDINALITIES, cols))
    x1 = (rng.integers(0, 40, n_rows) * 0.5).astype(np.float32)
    x2 = rng.normal(size=n_rows).round(1).astype(np.float32)
    X = np.stack(cols + [x1, x2], axis=1)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (score + 0.1 * x1 - x2 + rng.normal(size=n_rows) * 0.3).astype(np.float32)
    return X, y, ["c"] * len(CARDINALITIES) + ["q", "q"]


def categorical_model(seed: int, n_rows: int = 1500, rounds: int = 6, **params):
    """(booster, X, y, types, matrix): a host-trained model with categorical splits, and its training data."""
    import daskgb

    rng = np.random.default_rng(seed)
    X, y, types = categorical_data(rng, n_rows)
    if params.get("objective") == "multi:softprob":
        y = np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(np.float32)
    m = daskgb.QuantileMatrix(X, y, feature_types=types, device="cpu")
    p = {"max_depth": 5, "learning_rate": 0.3, "max_cat_to_onehot": 8, "device": "cpu", **params}
    booster = daskgb.train(p, m, rounds, verbose_eval=False)
    assert booster.has_categorical_splits
    return booster, X, y, types, m


def odd_categories(rng, X, missing: float):
    """X's rows with categorical values of every kind: unseen (past every set's words, or
    within them), non-integer, negative, at or past 2**24, infinite, and missing."""
    X = X.copy()
    odd = np.array([151, 1000, 2.7, 39.99, 0.5, -0.5, -1, -40, 2 ** 24, 2 ** 24 - 1, 3e9, np.inf, -np.inf, np.nan],
                   dtype=np.float32)
    cat = X[:, : len(CARDINALITIES)]
    hit = rng.random(cat.shape) < 0.3
    cat[hit] = rng.choice(odd, int(hit.sum()))
    if not np.isnan(missing):
        cat[rng.random(cat.shape) < 0.05] = missing
    return X


def test_a_tree_and_its_device_layout_keep_its_category_sets():
    from daskgb.category_sets import bitset_of
    from daskgb.layouts import TREE_CATEGORY_ROW

    booster = categorical_model(46, n_rows=600, rounds=3)[0]
    for tree in booster.trees:
        fewest = max((bitset_of(c).size for c in tree.categories.values()), default=0)
        assert tree.words().shape == (TREE_CATEGORY_ROW + fewest, tree.n_nodes)
        assert tree.words(category_words=6).shape == (TREE_CATEGORY_ROW + 6, tree.n_nodes)
        for words in (tree.words(), tree.words(category_words=6)):
            numeric = np.setdiff1d(np.arange(tree.n_nodes), list(tree.categories))
            assert not words[TREE_CATEGORY_ROW:, numeric].any()  # layouts.py: other nodes' words are zero
            back = Tree.from_words(words)
            for name in FIELDS:
                np.testing.assert_array_equal(getattr(back, name), getattr(tree, name))
            assert sorted(back.categories) == sorted(tree.categories)
            for node, cats in tree.categories.items():
                np.testing.assert_array_equal(back.categories[node], cats)
                assert back.categories[node].dtype == np.int32
    assert any(tree.words().shape[0] > TREE_CATEGORY_ROW + 1 for tree in booster.trees)  # sets of several words
    with pytest.raises(ValueError, match="need"):
        next(t for t in booster.trees if t.words().shape[0] > TREE_CATEGORY_ROW + 1).words(category_words=1)


def test_a_numeric_tree_has_no_category_rows_unless_asked():
    from daskgb.layouts import TREE_CATEGORY_ROW

    rng = np.random.default_rng(47)
    tree = random_binned_tree(rng, make_cuts(rng, 5, 30), 5)
    assert tree.words().shape[0] == TREE_CATEGORY_ROW
    words = tree.words(category_words=2)
    assert words.shape[0] == TREE_CATEGORY_ROW + 2 and not words[TREE_CATEGORY_ROW:].any()
    assert Tree.from_words(words).categories == {}


@pytest.mark.gpu
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL], ids=["nan", "sentinel"])
def test_predict_margin_with_categorical_splits(oracle, cb, missing):
    import cupy

    from daskgb.category_sets import pack

    booster, X, _, _, _ = categorical_model(48)
    rng = np.random.default_rng(49)
    X = odd_categories(rng, X, missing)
    nodes, offsets = booster._packed_trees(booster.trees)
    cats = pack(booster.trees, offsets)
    base = rng.normal(size=X.shape[0]).astype(np.float32)
    expected = oracle.predict_margin(X, nodes, offsets, base.copy(), missing, categories=cats)
    for _ in range(2):  # the second call reads the cached device records and sets
        out = cupy.asarray(base)
        assert cb.predict_margin(cupy.asarray(X), nodes, offsets, out, missing, categories=cats) is out
        np.testing.assert_allclose(to_host(out), expected, rtol=1e-6, atol=1e-6)
    # The same nodes without their sets: the numeric walk (thresholds of 0 at categorical nodes).
    numeric = oracle.predict_margin(X, nodes, offsets, base.copy(), missing)
    out = cupy.asarray(base)
    cb.predict_margin(cupy.asarray(X), nodes, offsets, out, missing)
    np.testing.assert_allclose(to_host(out), numeric, rtol=1e-6, atol=1e-6)
    assert not np.allclose(numeric, expected, rtol=1e-6, atol=1e-6)


def categorical_matrix(matrix, X, layout: str, rng):
    """A CPU QuantileMatrix of X's rows binned with matrix's (categorical) cuts, with unseen and
    non-integer categories: as they are ("dense_missing"), missing values filled ("dense"), or
    as a CSR matrix ("sparse")."""
    import daskgb
    import scipy.sparse

    X = X.copy()
    cat = X[:, : len(CARDINALITIES)]
    hit = rng.random(cat.shape) < 0.2
    cat[hit] = rng.choice(np.array([151, 1000, 2.7, 39.99, 0.5], dtype=np.float32), int(hit.sum()))
    if layout != "dense_missing":
        X = np.where(np.isnan(X), rng.integers(0, 4, X.shape).astype(np.float32), X)
    if layout == "sparse":
        X[rng.random(X.shape) < 0.4] = 0.0
        X = scipy.sparse.csr_matrix(X)
    return daskgb.QuantileMatrix(X, ref=matrix, device="cpu")


def categorical_ellpacks(matrix, X, layout: str, rng):
    """(ell_numpy, ell_cupy) of categorical_matrix's rows."""
    m = categorical_matrix(matrix, X, layout, rng)
    ell_n, ell_c = m.ellpack, m.on("cuda").ellpack
    assert ell_n.cuts.has_categorical and ell_n.is_dense == (layout != "sparse")
    return ell_n, ell_c


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_leaf_values_with_categorical_splits(oracle, cb, layout):
    """Host trees, and the same trees in growth.cu's layout with category rows (wider than
    their sets need, a wider cap, as grown), against the oracle; a margin column of a
    two-output matrix (a stride)."""
    import copy

    import cupy

    from daskgb.layouts import TREE_CATEGORY_ROW

    booster, X, _, _, matrix = categorical_model(50)
    rng = np.random.default_rng(51)
    ell_n, ell_c = categorical_ellpacks(matrix, X, layout, rng)
    rows = max(t.words().shape[0] for t in booster.trees) - TREE_CATEGORY_ROW + 1
    for tree in booster.trees:
        base = rng.normal(size=(ell_n.n_rows, 2)).astype(np.float32)
        expected = base.copy()
        oracle.add_leaf_values(ell_n, tree, expected[:, 1])
        got = cupy.asarray(base)
        cb.add_leaf_values(ell_c, tree, got[:, 1])
        np.testing.assert_array_equal(to_host(got), expected)
        words = np.full((TREE_CATEGORY_ROW + rows, tree.n_nodes + 9), -7, dtype=np.int32)
        words[:, : tree.n_nodes] = tree.words(category_words=rows)
        got = cupy.asarray(base)
        cb.add_leaf_values(ell_c, cupy.asarray(words), got[:, 1])
        np.testing.assert_array_equal(to_host(got), expected)
    # A numeric split on a categorical feature (a model trained without the feature's type):
    # the host tree is routed by bin as the oracle routes it.
    tree = copy.deepcopy(next(t for t in booster.trees if t.categories))
    for node in list(tree.categories)[::2]:
        del tree.categories[node]
        f = int(tree.feature[node])
        tree.bin[node] = rng.integers(-1, int(ell_n.cuts.ptrs[f + 1] - ell_n.cuts.ptrs[f]))
    base = rng.normal(size=ell_n.n_rows).astype(np.float32)
    expected = base.copy()
    oracle.add_leaf_values(ell_n, tree, expected)
    got = cupy.asarray(base)
    cb.add_leaf_values(ell_c, tree, got)
    np.testing.assert_array_equal(to_host(got), expected)


@pytest.mark.gpu
def test_add_leaf_values_refuses_a_categorical_split_on_a_feature_the_cuts_call_numeric(cb):
    import cupy

    booster = categorical_model(52, n_rows=400, rounds=2)[0]
    tree = next(t for t in booster.trees if t.categories)
    rng = np.random.default_rng(53)
    cuts = make_cuts(rng, 5, 30)
    ell = random_ellpack(cb, rng, cuts, "dense", 50)
    with pytest.raises(ValueError, match="by category"):
        cb.add_leaf_values(ell, tree, cupy.zeros(50, dtype=cupy.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_numeric_trees_on_categorical_cuts_take_the_numeric_walk(oracle, cb, layout):
    """A tree without categorical splits (its words have no category rows) on a matrix with
    categorical features: every split, on categorical features too, routes by bin, as the oracle's."""
    import cupy

    booster, X, _, _, matrix = categorical_model(54, n_rows=600, rounds=2)
    rng = np.random.default_rng(55)
    ell_n, ell_c = categorical_ellpacks(matrix, X, layout, rng)
    for _ in range(3):
        tree = random_binned_tree(rng, ell_n.cuts, 6)
        base = rng.normal(size=ell_n.n_rows).astype(np.float32)
        expected = base.copy()
        oracle.add_leaf_values(ell_n, tree, expected)
        got = cupy.asarray(base)
        cb.add_leaf_values(ell_c, tree, got)
        np.testing.assert_array_equal(to_host(got), expected)
