"""SHAP contributions and interactions, Saabas's approximation and leaf indices of models with
categorical splits: equal to XGBoost's (the model exported to XGBoost's JSON, and a model
XGBoost trained itself), Shapley values by their definition, and the CUDA kernels equal to
the numpy oracle (with a CPU emulation of the kernels' per-thread category tests)."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb import category_sets
from daskgb.explain import reference
from daskgb.explain.paths import REST_BIT, tree_paths

xgb = pytest.importorskip("xgboost")

from test_categorical import make_data  # noqa: E402

OBJECTIVES = {"reg": {"objective": "reg:squarederror"}, "binary": {"objective": "binary:logistic"},
              "multi": {"objective": "multi:softprob", "num_class": 3}}
EXPLAIN = ({"pred_contribs": True}, {"pred_contribs": True, "approx_contribs": True}, {"pred_leaf": True},
           {"pred_interactions": True}, {"pred_interactions": True, "approx_contribs": True})


def _model(kind="reg", rounds=6, depth=5, seed=3, n=1500, device="cpu", **params):
    X, y, types = make_data(seed, n=n, objective=kind)
    p = {**OBJECTIVES[kind], "max_depth": depth, "device": device, **params}
    booster = daskgb.train(p, daskgb.QuantileMatrix(X, y, feature_types=types), rounds, verbose_eval=False)
    assert booster.has_categorical_splits
    return booster, X, types


def _unusual_rows(X, n=300):
    """Rows of X with categories training never saw: above the largest, negative, not an
    integer (truncated), at and beyond 2**24 (XGBoost's invalid ones), and missing."""
    T = X[:n].copy()
    T[:30, 2] = 500.0
    T[30:60, 1] = -3.0
    T[60:90, 0] = 2.7
    T[90:100, 2] = 2.0**24
    T[100:110, 1] = 2.0**25
    T[110:130, 2] = -0.5
    T[130:150, :3] = np.nan
    return T


def _repeated_categorical_features(booster) -> bool:
    """Whether some path splits one categorical feature more than once, going both ways."""
    for t in booster.trees:
        for leaf in np.flatnonzero(t.left < 0):
            node, sides = int(leaf), {}
            while t.parent[node] >= 0:
                q = int(t.parent[node])
                if q in t.categories:
                    sides.setdefault(int(t.feature[q]), set()).add(bool(t.left[q] == node))
                node = q
            if any(len(s) == 2 for s in sides.values()):
                return True
    return False


@pytest.mark.parametrize("kind", ["reg", "binary", "multi"])
def test_explanations_of_categorical_splits_equal_xgboosts(kind, tmp_path):
    booster, X, types = _model(kind)
    assert _repeated_categorical_features(booster)  # merged categorical conditions are exercised
    path = tmp_path / "model.json"
    booster.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path))
    T = _unusual_rows(X)
    d = xgb.DMatrix(T, feature_types=types, enable_categorical=True, missing=np.nan)
    for kwargs in EXPLAIN:
        ours, want = booster.predict(T, **kwargs), theirs.predict(d, **kwargs)
        assert ours.shape == want.shape, kwargs
        if "pred_leaf" in kwargs:
            np.testing.assert_array_equal(ours, want)
        else:
            np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))
    margin = booster.predict(T, output_margin=True)
    phi = booster.predict(T, pred_contribs=True)
    np.testing.assert_allclose(phi.sum(axis=-1), margin, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(booster.predict(T, pred_contribs=True, approx_contribs=True).sum(axis=-1), margin,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(booster.predict(T, pred_interactions=True).sum(axis=-1), phi, rtol=1e-5, atol=1e-5)
    # A range of rounds, as a slice of XGBoost's model.
    np.testing.assert_allclose(booster.predict(T, pred_contribs=True, iteration_range=(1, 4)),
                               theirs[1:4].predict(d, pred_contribs=True), rtol=1e-5, atol=1e-5)


def test_a_model_xgboost_trained_explains_as_ours():
    """Both libraries train on data where their trees are equal (test_categorical's parity):
    the explanations read off XGBoost's covers and sets equal ours, the sentinel missing
    value included."""
    X, y, types = make_data(12, n=1500)
    p = {"max_depth": 5, "learning_rate": 0.3, "max_bin": 256, "max_cat_to_onehot": 4}
    bx = xgb.train({**p, "tree_method": "hist", "nthread": 1},
                   xgb.DMatrix(X, y, feature_types=types, enable_categorical=True), 6)
    bd = daskgb.train({**p, "device": "cpu"}, daskgb.QuantileMatrix(X, y, feature_types=types), 6,
                      verbose_eval=False)
    T = _unusual_rows(X)
    T[150:170, 1] = -999.0  # the missing sentinel below
    for missing in (np.nan, -999.0):
        d = xgb.DMatrix(T, feature_types=types, enable_categorical=True, missing=missing)
        for kwargs in EXPLAIN:
            ours, want = bd.predict(T, missing=missing, **kwargs), bx.predict(d, **kwargs)
            np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5, err_msg=f"{kwargs} missing={missing}")


def _brute_force_shap(tree, x):
    """A tree's SHAP values of one row by the definition (test_explain.py's), categorical
    splits routed by their sets."""
    from itertools import combinations
    from math import factorial

    f = x.size
    sets = category_sets.pack([tree], [0, tree.n_nodes])

    def goes_left(node):
        v = x[tree.feature[node]]
        if np.isnan(v):
            return bool(tree.default_left[node])
        if node in tree.categories:
            return not bool(category_sets.in_sets(np, sets[1], sets[0][node : node + 1],
                                                  np.diff(sets[0])[node : node + 1], np.array([v]))[0])
        return bool(v < tree.threshold[node])

    def expect(node, subset):
        if tree.left[node] < 0:
            return float(tree.value[node])
        a, b = tree.left[node], tree.right[node]
        if tree.feature[node] in subset:
            return expect(a if goes_left(node) else b, subset)
        return (expect(a, subset) * float(tree.cover[a]) + expect(b, subset) * float(tree.cover[b])) / float(
            tree.cover[node])

    phi = np.zeros(f + 1)
    for i in range(f):
        rest = [j for j in range(f) if j != i]
        for size in range(f):
            for s in combinations(rest, size):
                w = factorial(size) * factorial(f - size - 1) / factorial(f)
                phi[i] += w * (expect(0, set(s) | {i}) - expect(0, set(s)))
    phi[f] = expect(0, set())
    return phi


def test_categorical_path_shap_is_shapley_by_definition():
    booster, X, _ = _model(rounds=3, depth=5, seed=5, n=800)
    T = _unusual_rows(X, 160)[::8]
    got = booster.predict(T, pred_contribs=True)
    want = np.zeros((T.shape[0], booster.n_features + 1))
    for r in range(T.shape[0]):
        for t in booster.trees:
            want[r] += _brute_force_shap(t, T[r])
    np.testing.assert_allclose(got[:, :-1], want[:, :-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, -1], want[:, -1] + np.float32(booster.base_score), rtol=1e-5, atol=1e-6)


def test_numeric_trees_keep_the_numeric_paths():
    """Trees without categorical splits give paths without category conditions (the kernels'
    numeric walk); a categorical model's conditions are [header, words...] of a feature's width."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    numeric = daskgb.train({"max_depth": 3}, daskgb.QuantileMatrix(X, X[:, 0]), 2, verbose_eval=False)
    assert not tree_paths(numeric.trees).categorical
    booster, _, _ = _model(rounds=2)
    paths = tree_paths(booster.trees)
    assert paths.categorical
    at = paths.category_at[paths.category_at >= 0]
    width = paths.category_sets[at] & ~REST_BIT
    widest = {f: max(category_sets.bitset_of(t.categories[n]).size for t in booster.trees
                     for n in t.categories if t.feature[n] == f) for f in (0, 1, 2)}
    np.testing.assert_array_equal(width, [widest[f] for f in paths.feature[paths.category_at >= 0]])
    assert not np.isin(paths.feature[paths.category_at >= 0], [3, 4]).any()  # the numeric features have none


def test_a_quantile_matrix_explains_as_its_raw_features():
    X, y, types = make_data(4, n=1200, with_nan=True)
    m = daskgb.QuantileMatrix(X, y, feature_types=types)
    booster = daskgb.train({"max_depth": 4, "device": "cpu"}, m, 4, verbose_eval=False)
    for kwargs in EXPLAIN:
        np.testing.assert_allclose(booster.predict(m, **kwargs), booster.predict(X, **kwargs), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ the kernels' logic on the CPU
def _kernel_category_follows(cond, v: float) -> bool:
    """kernels/shap.cu category_follows, scalar by scalar."""
    header = int(cond[0])
    n_words = header & 0x7FFFFFFF
    if 0.0 <= v < 16777216.0:
        c = int(v)
        if (c >> 5) < n_words:
            return bool((int(cond[1 + (c >> 5)]) >> (c & 31)) & 1)
    return bool(header >> 31)


def _kernel_follows(paths, e: int, v: float, missing: float) -> bool:
    """kernels/shap.cu extend_path's test of element e, kCategorical."""
    if np.isnan(v) or v == missing:
        return bool(paths.missing_follows[e])
    f = bool(paths.lower[e] <= v < paths.upper[e])
    at = int(paths.category_at[e])
    if at >= 0:
        f = f and _kernel_category_follows(paths.category_sets[at:], v)
    return f


def _kernel_leaf(x, nodes, first: int, at, sets, missing: float) -> int:
    """kernels/shap.cu leaf_index's walk of one tree, kCategorical (category_sets.counted's
    layout: [n_words, words...] a set)."""
    node = 0
    while nodes["left"][first + node] >= 0:
        g = first + node
        v = float(x[nodes["feature"][g]])
        if np.isnan(v) or v == missing:
            left = bool(nodes["default_left"][g])
        elif at[g] >= 0:
            s = int(at[g])
            n_words, c = int(sets[s]), int(v) if 0.0 <= v < 16777216.0 else -1
            inside = c >= 0 and (c >> 5) < n_words and (int(sets[s + 1 + (c >> 5)]) >> (c & 31)) & 1
            left = not inside
        else:
            left = bool(v < nodes["threshold"][g])
        node = int(nodes["left"][g] if left else nodes["right"][g])
    return node


@pytest.mark.parametrize("missing", [np.nan, -999.0])
def test_the_kernels_category_tests_emulated_equal_the_oracle(missing):
    """The per-thread logic of shap.cu (extend_path's element test; leaf_index's walk) in Python
    on the arrays explain/cuda.py sends, row by row, against the oracle."""
    booster, X, _ = _model(rounds=3, depth=5, n=800)
    T = _unusual_rows(X, 120)
    T[::7, 1] = -999.0
    paths = tree_paths(booster.trees)
    for p in range(paths.n_paths):
        s, e = int(paths.offsets[p]), int(paths.offsets[p + 1])
        o, _ = reference._path_weights(T, paths, s, e - s, paths.zero_fraction[s:e], missing)
        want = np.array([[_kernel_follows(paths, s + d, float(T[r, paths.feature[s + d]]), missing)
                          for d in range(1, e - s)] for r in range(T.shape[0])], dtype=bool).reshape(T.shape[0], -1)
        np.testing.assert_array_equal(o[:, 1:], want, err_msg=f"path {p}")
    nodes, offsets = booster._packed_trees(booster.trees)
    cats = category_sets.pack(booster.trees, offsets)
    at, sets = category_sets.counted(cats)
    got = np.zeros((T.shape[0], len(booster.trees)), dtype=np.int32)
    reference.leaf_indices(T, nodes, offsets, got, missing, categories=cats)
    want = [[_kernel_leaf(T[r], nodes, int(offsets[t]), at, sets, missing) for t in range(len(booster.trees))]
            for r in range(T.shape[0])]
    np.testing.assert_array_equal(got, want)


def test_counted_sets_hold_each_set_after_its_word_count():
    cats = category_sets.pack_sets([None, [1, 40], None, [3], [70]])
    begin, size, words = cats
    node_ptr = np.concatenate([begin, [begin[-1] + size[-1]]])
    at, sets = category_sets.counted((node_ptr, words))
    assert at.tolist() == [-1, 0, -1, 3, 5]
    assert sets.tolist() == [2, 1 << 1, 1 << 8, 1, 1 << 3, 3, 0, 0, 1 << 6]


# ----------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["reg", "binary", "multi"])
def test_the_categorical_kernels_equal_the_oracle(kind):
    cupy = pytest.importorskip("cupy")
    from daskgb.explain import cuda

    booster, X, _ = _model(kind, rounds=5)
    T = _unusual_rows(X)
    for kwargs in EXPLAIN:
        host = booster.predict(T, **kwargs)
        device = booster.predict(cupy.asarray(T), **kwargs)
        assert isinstance(device, cupy.ndarray)
        if "pred_leaf" in kwargs:
            np.testing.assert_array_equal(device.get(), host)
        else:
            np.testing.assert_allclose(device.get(), host, rtol=1e-6, atol=1e-6, err_msg=str(kwargs))
    # The float64 sums themselves, path by path in one order: the same bits.
    trees = [t for t, g in zip(booster.trees, booster.tree_info) if g == 0]
    paths = tree_paths(trees)
    assert paths.categorical
    for missing in (np.nan, -999.0):
        want = np.zeros((T.shape[0], T.shape[1] + 1))
        reference.shap_contributions(T, paths, want, missing)
        got = cupy.zeros(want.shape)
        cuda.shap_contributions(cupy.asarray(T), paths, got, missing)
        np.testing.assert_array_equal(got.get(), want)
        want = np.zeros((150, T.shape[1] + 1, T.shape[1] + 1))
        reference.shap_interactions(T[:150], paths, want, missing)
        got = cupy.zeros(want.shape)
        cuda.shap_interactions(cupy.asarray(T[:150]), paths, got, missing)
        np.testing.assert_array_equal(got.get(), want)
        nodes, offsets = booster._packed_trees(trees)
        cats = category_sets.pack(trees, offsets)
        ids = np.zeros((T.shape[0], len(trees)), dtype=np.int32)
        reference.leaf_indices(T, nodes, offsets, ids, missing, categories=cats)
        got_ids = cupy.zeros(ids.shape, dtype=cupy.int32)
        cuda.leaf_indices(cupy.asarray(T), nodes, offsets, got_ids, missing, categories=cats)
        np.testing.assert_array_equal(got_ids.get(), ids)


@pytest.mark.gpu
def test_a_device_grown_categorical_model_explains_on_the_device_as_on_the_host():
    cupy = pytest.importorskip("cupy")
    X, y, types = make_data(7, n=1500)
    m = daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y), feature_types=types)
    booster = daskgb.train({"max_depth": 5, "device": "cuda"}, m, 5, verbose_eval=False)
    assert booster.has_categorical_splits
    T = _unusual_rows(X)
    device = {str(k): booster.predict(cupy.asarray(T), **k).get() for k in EXPLAIN}
    from_matrix = booster.predict(m, pred_contribs=True)
    assert isinstance(from_matrix, cupy.ndarray)
    booster.set_param("device", "cpu")  # the numpy oracle
    for kwargs in EXPLAIN:
        np.testing.assert_allclose(device[str(kwargs)], booster.predict(T, **kwargs), rtol=1e-6, atol=1e-6,
                                   err_msg=str(kwargs))
    np.testing.assert_allclose(from_matrix.get(), booster.predict(X, pred_contribs=True), rtol=1e-6, atol=1e-6)
