"""The sketch stage (daskgb/sketch/): summaries, merge, prune, error bounds, the segmented search, cuts vs XGBoost.

Tests taking `xp` (tests/stages/conftest.py: the backend's array module) run on numpy
everywhere and on CuPy on a GPU; the kernel of the segmented search is compared with the
array steps on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from daskgb import sketch as sketch_mod
from daskgb.arrays import cuda_available, to_host
from daskgb.sketch import Cuts, Summary, make_cuts, merge, prune, sketch_budget, summarize, summarize_csr

# ----------------------------------------------------------------------------- oracles
def exact_reference(X, w=None, missing=np.nan):
    """Per feature, (values, rmin, rmax, wmin) by brute force over the distinct values."""
    X = np.asarray(X, dtype=np.float32)
    w = np.ones(X.shape[0]) if w is None else np.asarray(w, dtype=np.float32).astype(np.float64)
    out = []
    for f in range(X.shape[1]):
        col = X[:, f]
        ok = ~np.isnan(col) & (w > 0)
        if not np.isnan(missing):
            ok &= col != np.float32(missing)
        v, cw = col[ok], w[ok]
        uniq = np.unique(v)
        rmin = np.array([cw[v < u].sum() for u in uniq])
        wmin = np.array([cw[v == u].sum() for u in uniq])
        out.append((uniq, rmin, rmin + wmin, wmin))
    return out


def features(s: Summary):
    """Per feature, (values, rmin, rmax, wmin) as numpy arrays."""
    s = s.to(np)
    return [
        (s.value[lo:hi], s.rmin[lo:hi], s.rmax[lo:hi], s.wmin[lo:hi])
        for lo, hi in zip(s.ptrs[:-1], s.ptrs[1:])
    ]


def from_features(feats) -> Summary:
    ptrs = np.zeros(len(feats) + 1, dtype=np.int64)
    ptrs[1:] = np.cumsum([len(f[0]) for f in feats])
    cat = [np.concatenate([f[i] for f in feats]) if feats else np.empty(0) for i in range(4)]
    return Summary(ptrs, cat[0].astype(np.float32), *(c.astype(np.float64) for c in cat[1:]))


def ref_prune(entries, maxsize):
    """XGBoost's WQSummary::SetPrune, entry by entry (the readable oracle)."""
    value, rmin, rmax, wmin = entries
    size = len(value)
    if size <= maxsize:
        return entries
    begin = rmax[0]
    span = rmin[size - 1] - rmax[0]
    n = maxsize - 1
    picked = [0]
    i, last = 1, 0
    for k in range(1, n):
        dx2 = 2 * ((k * span) / n + begin)
        while i < size - 1 and dx2 >= rmax[i + 1] + rmin[i + 1]:
            i += 1
        if i == size - 1:
            break
        if dx2 < (rmin[i] + wmin[i]) + (rmax[i + 1] - wmin[i + 1]):
            if i != last:
                picked.append(i)
                last = i
        elif i + 1 != last:
            picked.append(i + 1)
            last = i + 1
    if last != size - 1:
        picked.append(size - 1)
    return tuple(a[picked] for a in entries)


def ref_merge(x, y):
    """XGBoost's WQSummary::SetCombine followed by FixError, entry by entry."""
    if len(x[0]) == 0:
        return y
    if len(y[0]) == 0:
        return x
    out = []
    a = b = 0
    a_prev = b_prev = 0.0
    na, nb = len(x[0]), len(y[0])
    while a < na and b < nb:
        if x[0][a] == y[0][b]:
            out.append((x[0][a], x[1][a] + y[1][b], x[2][a] + y[2][b], x[3][a] + y[3][b]))
            a_prev, b_prev = x[1][a] + x[3][a], y[1][b] + y[3][b]
            a, b = a + 1, b + 1
        elif x[0][a] < y[0][b]:
            out.append((x[0][a], x[1][a] + b_prev, x[2][a] + (y[2][b] - y[3][b]), x[3][a]))
            a_prev = x[1][a] + x[3][a]
            a += 1
        else:
            out.append((y[0][b], y[1][b] + a_prev, y[2][b] + (x[2][a] - x[3][a]), y[3][b]))
            b_prev = y[1][b] + y[3][b]
            b += 1
    for k in range(a, na):
        out.append((x[0][k], x[1][k] + b_prev, x[2][k] + y[2][nb - 1], x[3][k]))
    for k in range(b, nb):
        out.append((y[0][k], y[1][k] + a_prev, y[2][k] + x[2][na - 1], y[3][k]))
    value, rmin, rmax, wmin = (np.array(c) for c in zip(*out))
    prev_rmin = prev_rmax = 0.0
    for i in range(len(value)):
        if rmin[i] < prev_rmin:
            rmin[i] = prev_rmin
        else:
            prev_rmin = rmin[i]
        rmax[i] = max(rmax[i], prev_rmax, rmin[i] + wmin[i])
        prev_rmax = rmax[i]
    return value.astype(np.float32), rmin, rmax, wmin


def assert_valid(s: Summary):
    """The summary invariants XGBoost's CheckValid asserts, plus strictly increasing values."""
    assert s.ptrs.dtype == np.int64 and isinstance(s.ptrs, np.ndarray)
    for value, rmin, rmax, wmin in features(s):
        assert value.dtype == np.float32 and rmin.dtype == np.float64
        assert np.all(np.diff(value) > 0)
        assert np.all(rmin >= 0) and np.all(wmin >= 0)
        assert np.all(rmax - rmin - wmin >= -1e-9 * max(1.0, rmax.max(initial=0)))
        assert np.all(rmin[1:] >= rmin[:-1] + wmin[:-1] - 1e-9 * max(1.0, rmax.max(initial=0)))


def assert_same(s: Summary, feats, exact=True):
    got = features(s)
    assert len(got) == len(feats)
    for g, r in zip(got, feats):
        np.testing.assert_array_equal(g[0], r[0])
        for a, b in zip(g[1:], r[1:]):
            if exact:
                np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


def tied_data(rng, n, n_features, n_distinct, nan_frac=0.15):
    """float32 data whose feature f takes at most n_distinct[f] distinct values, with NaN."""
    cols = []
    for d in n_distinct:
        pool = rng.normal(size=int(d)) * 10.0 ** rng.integers(-3, 4)
        cols.append(rng.choice(pool, n))
    X = np.stack(cols, axis=1).astype(np.float32) if n_features else np.empty((n, 0), np.float32)
    X[rng.random(X.shape) < nan_frac] = np.nan
    return X


# ----------------------------------------------------------------------------- budget
def test_sketch_budget_matches_notes():
    assert sketch_budget(10**6, 256) == 4097
    assert sketch_budget(10**8, 256) == 7169
    # Fewer rows than the budget: the exact summary fits.
    assert sketch_budget(100, 256) == 100
    assert sketch_budget(0, 256) == 0
    sizes = [sketch_budget(n, 64) for n in (10**3, 10**4, 10**5, 10**6, 10**7)]
    assert sizes == sorted(sizes) and sizes[-1] < 10**4


# ----------------------------------------------------------------------------- summarize
def test_summarize_exact_matches_brute_force(xp):
    rng = np.random.default_rng(0)
    X = tied_data(rng, 300, 5, [1, 7, 40, 300, 3])
    X[:, 2] = np.nan  # an empty feature
    X[:5, 4] = -0.0  # -0.0 and 0.0 are one value
    X[5:9, 4] = 0.0
    w = rng.random(300).astype(np.float32)
    w[rng.random(300) < 0.2] = 0.0  # zero weights contribute nothing, as in XGBoost
    for weight in (None, w):
        s = summarize(xp.asarray(X), None if weight is None else xp.asarray(weight))
        assert s.n_features == 5 and s.ptrs[3] == s.ptrs[2]
        assert_valid(s)
        assert_same(s, exact_reference(X, weight), exact=False)
    assert np.sum(features(summarize(X))[4][0] == 0) == 1


def test_summarize_missing_value_and_float64_input(xp):
    rng = np.random.default_rng(1)
    X = rng.integers(-3, 4, size=(200, 3)).astype(np.float64)
    s = summarize(xp.asarray(X), missing=0.0)
    assert_same(s, exact_reference(X, missing=0.0))
    assert not np.any(features(s)[0][0] == 0)


def test_summarize_column_blocks_agree(monkeypatch):
    rng = np.random.default_rng(2)
    X = tied_data(rng, 64, 9, [5, 60, 2, 64, 9, 1, 30, 30, 7])
    w = rng.random(64).astype(np.float32)
    whole = summarize(X, w, budget=8)
    monkeypatch.setattr(sketch_mod, "_BLOCK_ENTRIES", 100)  # one column per block
    blocked = summarize(X, w, budget=8)
    np.testing.assert_array_equal(whole.ptrs, blocked.ptrs)
    assert_same(blocked, features(whole))


def test_summarize_row_runs(monkeypatch):
    """Columns taller than a block are summarised in runs of rows, merged and pruned: exact
    while every feature's distinct values fit the budget, within the error bound beyond."""
    rng = np.random.default_rng(12)
    X = tied_data(rng, 600, 3, [7, 40, 600], nan_frac=0.1)
    w = rng.random(600).astype(np.float32)
    whole = summarize(X, w, budget=64)
    monkeypatch.setattr(sketch_mod, "_BLOCK_ENTRIES", 100)  # runs of 100 rows of one column
    runs = summarize(X, w, budget=64)
    for f in (0, 1):  # few distinct values: the merged exact summaries are the exact one
        for g, r in zip(features(runs)[f], features(whole)[f]):
            np.testing.assert_array_equal(g, r)
    assert np.diff(runs.ptrs)[2] <= 64
    # Each run's summary carries eps 1/63 (budget 64); merging keeps it, the prune adds 1/63.
    check_bounds(runs, X, w, 2 / 63)


def test_summarize_budget_prunes_only_big_features():
    rng = np.random.default_rng(3)
    X = tied_data(rng, 500, 3, [6, 500, 12], nan_frac=0.0)
    exact = summarize(X)
    pruned = summarize(X, budget=10)
    counts = np.diff(pruned.ptrs)
    assert counts[0] == 6 and counts[1] <= 10 and counts[2] == 10
    assert_same(pruned, [ref_prune(f, 10) for f in features(exact)])


def test_summarize_csr_matches_dense(xp):
    rng = np.random.default_rng(4)
    dense = tied_data(rng, 150, 4, [5, 20, 150, 3], nan_frac=0.0)
    dense[rng.random(dense.shape) < 0.3] = 0.0
    A = sp.csr_matrix(dense)
    A.data[rng.random(A.data.size) < 0.1] = 0.0  # stored zeros are values
    A.data[rng.random(A.data.size) < 0.1] = np.nan  # stored NaN is missing
    A.data[rng.random(A.data.size) < 0.05] = -7.0  # stored `missing` is missing
    coo = A.tocoo()
    as_dense = np.full(A.shape, np.nan, dtype=np.float32)
    as_dense[coo.row, coo.col] = coo.data
    w = rng.random(150).astype(np.float32)
    got = summarize_csr(xp.asarray(A.indptr), xp.asarray(A.indices), xp.asarray(A.data), 4, xp.asarray(w), missing=-7.0)
    assert_same(got, features(summarize(as_dense, w, missing=-7.0)))
    assert np.any(features(got)[0][0] == 0)
    empty = summarize_csr(np.zeros(4, np.int64), np.empty(0, np.int32), np.empty(0, np.float32), 3)
    assert empty.n_features == 3 and not np.any(empty.ptrs)


def test_summarize_rejects_bad_input():
    X = np.ones((4, 2), np.float32)
    with pytest.raises(ValueError, match="inf"):
        summarize(np.array([[1.0], [np.inf]]))
    with pytest.raises(ValueError, match="non-negative"):
        summarize(X, weight=np.array([1, -1, 1, 1]))
    with pytest.raises(ValueError, match="entries"):
        summarize(X, weight=np.ones(3))
    with pytest.raises(ValueError, match="2-D"):
        summarize(np.ones(3))
    with pytest.raises(ValueError, match="column indices"):
        summarize_csr(np.array([0, 1]), np.array([5]), np.array([1.0]), 2)
    assert np.diff(summarize(np.array([[1.0], [np.inf]]), missing=np.inf).ptrs)[0] == 1


# ----------------------------------------------------------------------------- merge
def test_merge_of_exact_summaries_is_exact(xp):
    rng = np.random.default_rng(5)
    X = tied_data(rng, 400, 4, [3, 30, 400, 1])
    X[:200, 3] = np.nan  # feature 3 empty in the first half only
    X[200:, 0] = np.nan  # feature 0 empty in the second half only
    # Dyadic weights: every sum is exact, so the merge must be bit-exact too.
    w = rng.integers(1, 9, size=400).astype(np.float32) / 4
    for cut in (1, 200, 399):
        a = summarize(xp.asarray(X[:cut]), xp.asarray(w[:cut]))
        b = summarize(xp.asarray(X[cut:]), xp.asarray(w[cut:]))
        assert_same(merge(a, b), exact_reference(X, w))
        assert_same(merge(b, a), exact_reference(X, w))
    random_w = rng.random(400).astype(np.float32)
    m = merge(summarize(X[:150], random_w[:150]), summarize(X[150:], random_w[150:]))
    assert_same(m, exact_reference(X, random_w), exact=False)


def test_merge_matches_sequential_reference(xp):
    rng = np.random.default_rng(6)
    X = tied_data(rng, 600, 5, [4, 50, 600, 600, 2])
    w = rng.random(600).astype(np.float32)
    a = summarize(X[:250], w[:250], budget=9)
    b = summarize(X[250:], w[250:], budget=13)
    got = merge(a.to(xp), b.to(xp))
    assert_valid(got)
    assert_same(got, [ref_merge(fa, fb) for fa, fb in zip(features(a), features(b))])
    with pytest.raises(ValueError):
        merge(a, summarize(X[:, :2]))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("budget", [None, 15])
def test_merge_tree_gives_the_pairwise_merges_bits_wherever_its_nodes_are_merged(xp, n, budget):
    """The merge tree of n weighted, pruned summaries (non-integer weights, so that another order
    of the float sums would show): computed from its leaves, or from the nodes any holder of a set
    of leaves merged (sketch.held_merge_nodes), it equals the level-by-level pairwise merge (each
    merge pruned to the budget, where one is given)."""
    rng = np.random.default_rng(n)
    X = tied_data(rng, 120 * n, 3, [5, 300, 120 * n])
    w = (rng.random(120 * n) + 0.1).astype(np.float32)
    leaves = [summarize(X[i * 120:(i + 1) * 120], w[i * 120:(i + 1) * 120], budget=11).to(xp) for i in range(n)]

    def pair(a, b):
        merged = merge(a, b)
        return merged if budget is None else sketch_mod.prune(merged, budget)

    level = list(leaves)
    while len(level) > 1:
        level = [pair(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    want = features(level[0])
    if budget is not None and n > 1:
        assert max(np.diff(level[0].ptrs)) <= budget < max(np.diff(merge(leaves[0], leaves[1]).ptrs))
    root = sketch_mod.merge_tree_root(n)
    got = sketch_mod.merge_tree_node({(0, i): s for i, s in enumerate(leaves)}, n, root, budget)
    for g, e in zip(features(got), want):
        for a, b in zip(g, e):
            np.testing.assert_array_equal(a, b)
    # Leaves dealt to 3 holders in blocks, round-robin and at random: each merges the nodes it holds whole.
    blocks = np.arange(n) * 3 // n
    for deal in (blocks, np.arange(n) % 3, rng.integers(0, 3, n)):
        nodes = {}
        for holder in range(3):
            held = [i for i in range(n) if deal[i] == holder]
            for node in sketch_mod.held_merge_nodes(held, n):
                lo, hi = node[1] << node[0], min((node[1] + 1) << node[0], n)
                assert set(range(lo, hi)) <= set(held)
                nodes[node] = sketch_mod.merge_tree_node({(0, i): leaves[i] for i in held}, n, node, budget)
        if deal is blocks and n >= 8:  # runs of leaves on one holder: merged there, sent as one
            assert any(level > 0 for level, _ in nodes), nodes
        got = sketch_mod.merge_tree_node(nodes, n, root, budget)
        for g, e in zip(features(got), want):
            for a, b in zip(g, e):
                np.testing.assert_array_equal(a, b)
    assert sketch_mod.held_merge_nodes(range(n), n) == [root]
    assert sketch_mod.held_merge_nodes([], n) == []


def test_merge_fixes_rank_order():
    # b's single entry claims less weight at or below 2 than a's, as rounding can make
    # happen: FixError must make rmin and rmax monotone again.
    a = from_features([(np.array([1.0, 3.0]), np.array([0.0, 5.0]), np.array([5.0, 6.0]), np.array([5.0, 1.0]))])
    b = from_features([(np.array([2.0]), np.array([0.0]), np.array([1.0]), np.array([1.0]))])
    c = from_features([(np.array([2.5]), np.array([0.0]), np.array([0.5]), np.array([1.0]))])
    for x, y in ((a, b), (a, c), (c, a)):
        got = merge(x, y)
        assert_valid(got)
        assert_same(got, [ref_merge(features(x)[0], features(y)[0])])
    # Many features with long runs out of order: the vectorised repair must equal the loop.
    rng = np.random.default_rng(8)
    X = tied_data(rng, 400, 4, [400, 30, 400, 5])
    x = summarize(X[:200], budget=40)
    y = summarize(X[200:], budget=40)
    x.rmin = x.rmin * rng.uniform(0.5, 1.5, x.rmin.size)
    x.rmax = x.rmax * rng.uniform(0.5, 1.5, x.rmax.size)
    got = merge(x, y)
    for _, rmin, rmax, wmin in features(got):  # what FixError promises, no more
        assert np.all(np.diff(rmin) >= 0) and np.all(np.diff(rmax) >= 0) and np.all(rmax >= rmin + wmin)
    assert_same(got, [ref_merge(fx, fy) for fx, fy in zip(features(x), features(y))])


# ----------------------------------------------------------------------------- prune
@pytest.mark.parametrize("budget", [2, 3, 5, 17, 64])
def test_prune_matches_sequential_reference(xp, budget):
    rng = np.random.default_rng(budget)
    X = tied_data(rng, 500, 4, [500, 40, 3, 500], nan_frac=0.05)
    w = rng.random(500).astype(np.float32) ** 3
    # A merged (not exact) summary too, where rmin + rmax are not spaced like an exact one's.
    merged = merge(summarize(X[:200], w[:200], budget=50), summarize(X[200:], w[200:], budget=70))
    # Unit weights make integer ranks, where queries land exactly on the tie-break.
    for s in (summarize(X, w), summarize(X), merged):
        got = prune(s.to(xp), budget)
        assert_valid(got)
        assert np.diff(got.ptrs).max() <= budget
        assert_same(got, [ref_prune(f, budget) for f in features(s)])


def test_prune_leaves_small_features_untouched():
    rng = np.random.default_rng(7)
    X = tied_data(rng, 300, 3, [5, 300, 9])
    s = summarize(X, rng.random(300))
    assert prune(s, 300) is s
    got = features(prune(s, 9))
    for f in (0, 2):
        for g, r in zip(got[f], features(s)[f]):
            assert g.tobytes() == r.tobytes()
    assert len(got[1][0]) <= 9 and got[1][0][0] == features(s)[1][0][0] and got[1][0][-1] == features(s)[1][0][-1]
    with pytest.raises(ValueError):
        prune(s, 1)


def max_gaps(s: Summary):
    """Each feature's widest gap: the weight that may lie strictly between two neighbours."""
    return np.array([np.max((rmax[1:] - wmin[1:]) - (rmin[:-1] + wmin[:-1]), initial=0)
                     for _, rmin, rmax, wmin in features(s)])


@pytest.mark.parametrize("budget", [5, 9, 33])
def test_prune_filled_spends_the_budget_without_widening_a_gap(xp, budget):
    """Heavy central values with light tails (rounded normals, rounded t, a zero half the rows hold) make prune's queries land
    on one entry several times: prune_filled keeps the budget's count there, every gap no wider
    than prune's; features prune fills, and features within the budget, are prune's bit for bit."""
    rng = np.random.default_rng(budget)
    n = 3000
    X = np.stack([np.round(rng.normal(size=n) * 4) / 4, np.round(rng.standard_t(2, size=n) * 8) / 8,
                  rng.integers(0, budget, n), rng.normal(size=n), np.round(rng.exponential(size=n) * 3),
                  np.where(rng.random(n) < 0.5, 0.0, rng.normal(size=n))],
                 axis=1).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    w = rng.random(n).astype(np.float32)
    for weight in (None, w):
        s = summarize(X, weight)
        pruned = prune(s, budget)
        got = sketch_mod.prune_filled(s.to(xp), budget).to(np)
        assert_valid(got)
        counts, kept, filled = np.diff(s.ptrs), np.diff(pruned.ptrs), np.diff(got.ptrs)
        short = (counts > budget) & (kept < budget)
        assert short.any()  # the data must make prune leave budget unused, or this tests nothing
        for f in np.flatnonzero(~short):
            for g, r in zip(features(got)[f], features(pruned)[f]):
                assert g.tobytes() == r.tobytes()
        np.testing.assert_array_equal(filled, np.minimum(counts, budget))
        assert np.all(max_gaps(got) <= max_gaps(pruned))
        check_bounds(got, X, np.ones(n, np.float32) if weight is None else w, 1 / (budget - 1))
        # A subset of the summary's entries, with their ranks unchanged.
        for g, e in zip(features(got), features(s)):
            at = np.searchsorted(e[0], g[0])
            for a, b in zip(g, e):
                assert a.tobytes() == b[at].tobytes()


# ----------------------------------------------------------------------------- error bounds
def check_bounds(s: Summary, X, w, eps):
    """Every entry's true ranks lie in [rmin, rmax]; the summary is eps-approximate (paper A.2)."""
    for f, (value, rmin, rmax, wmin) in enumerate(features(s)):
        col = X[:, f]
        ok = ~np.isnan(col) & (w > 0)
        v, cw = col[ok], w[ok].astype(np.float64)
        if v.size == 0:
            assert value.size == 0
            continue
        total = cw.sum()
        tol = 1e-9 * total
        assert value[0] == v.min() and value[-1] == v.max()
        below = np.array([cw[v < u].sum() for u in value])
        at = np.array([cw[v == u].sum() for u in value])
        assert np.all(rmin <= below + tol) and np.all(rmax >= below + at - tol) and np.all(wmin <= at + tol)
        assert np.max(rmax - rmin - wmin) <= eps * total + tol
        gaps = (rmax[1:] - wmin[1:]) - (rmin[:-1] + wmin[:-1])
        assert np.max(gaps, initial=0) <= eps * total + tol


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    n_chunks=st.integers(1, 4),
    b1=st.integers(3, 24),
    b2=st.integers(3, 24),
    ties=st.booleans(),
    integer_weights=st.booleans(),
)
def test_merge_prune_error_bounds(seed, n, n_chunks, b1, b2, ties, integer_weights):
    rng = np.random.default_rng(seed)
    if ties:
        X = rng.integers(0, 30, size=(n, 2)).astype(np.float32)
    else:
        X = rng.normal(size=(n, 2)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    w = (rng.integers(0, 5, n) if integer_weights else rng.exponential(size=n)).astype(np.float32)
    bounds = np.sort(rng.integers(0, n + 1, size=n_chunks - 1))
    chunks = np.split(np.arange(n), bounds)
    s = summarize(X[chunks[0]], w[chunks[0]], budget=b1)
    seen = chunks[0]
    for rows in chunks[1:]:
        s = merge(s, summarize(X[rows], w[rows], budget=b1))
        seen = np.concatenate([seen, rows])
        check_bounds(s, X[seen], w[seen], 1 / (b1 - 1))  # merging keeps the larger eps
    filled = sketch_mod.prune_filled(s, b2)
    s = prune(s, b2)
    check_bounds(s, X, w, 1 / (b1 - 1) + 1 / (b2 - 1))  # pruning to b2 = b + 1 entries adds 1/b
    assert np.diff(s.ptrs).max(initial=0) <= b2
    check_bounds(filled, X, w, 1 / (b1 - 1) + 1 / (b2 - 1))  # filling the budget adds nothing
    assert np.diff(filled.ptrs).max(initial=0) <= b2


# ----------------------------------------------------------------------------- cuts
def xgboost_layout(c: Cuts):
    """(indptr, values) as xgboost's get_quantile_cut returns them: min_value first per feature."""
    c = c.to(np)
    segs = [
        np.concatenate([[c.min_values[f]], c.values[c.ptrs[f] : c.ptrs[f + 1]]]).astype(np.float32)
        for f in range(c.n_features)
    ]
    return np.concatenate([[0], np.cumsum([len(x) for x in segs])]), np.concatenate(segs)


def assert_matches_xgboost(c: Cuts, xgb_cut):
    """Every real cut bit for bit; the two per-feature bounds as far as xgboost versions agree.

    xgboost >= 3.3 reports each feature's leading min value as -inf, and forms the
    closing sentinel (last + |last| + 1e-5 in 3.2, which we follow) differently: so
    the min is compared where reported, and the sentinel exactly against 3.2 only.
    """
    indptr, values = xgboost_layout(c)
    np.testing.assert_array_equal(np.asarray(xgb_cut[0], dtype=np.int64), indptr)
    expected = np.asarray(xgb_cut[1])
    first = indptr[:-1][np.diff(indptr) > 0]
    last = indptr[1:][np.diff(indptr) > 0] - 1
    exact = np.ones(expected.size, dtype=bool)
    exact[first[np.isneginf(expected[first])]] = False
    exact[last] = False
    np.testing.assert_array_equal(expected[exact], values[exact])
    import xgboost

    if tuple(int(v) for v in xgboost.__version__.split(".")[:2]) < (3, 3):
        np.testing.assert_array_equal(expected[last], values[last])
    else:
        # 3.3 forms the sentinel its own way; what matters is that it closes the last bin.
        below = np.where(np.diff(indptr)[np.diff(indptr) > 0] > 1, expected[np.maximum(last - 1, 0)], -np.inf)
        assert np.all(values[last] > below)


@pytest.mark.parametrize("seed", range(4))
def test_cuts_match_xgboost_quantile_dmatrix(xp, seed):
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(seed)
    max_bin = int(rng.integers(2, 40))
    n_features = int(rng.integers(2, 7))
    X = tied_data(rng, int(rng.integers(30, 400)), n_features, rng.integers(1, max_bin + 1, n_features))
    X[:, 1] = np.nan
    w = rng.random(X.shape[0]).astype(np.float32)
    w[rng.random(w.size) < 0.2] = 0
    for weight in (None, w):
        c = make_cuts(summarize(xp.asarray(X), None if weight is None else xp.asarray(weight)), max_bin)
        assert_matches_xgboost(c, xgb.QuantileDMatrix(X, weight=weight, max_bin=max_bin).get_quantile_cut())
    A = sp.csr_matrix(np.nan_to_num(X, nan=0.0))
    c = make_cuts(summarize_csr(A.indptr, A.indices, A.data, n_features, w), max_bin)
    assert_matches_xgboost(c, xgb.QuantileDMatrix(A, weight=w, max_bin=max_bin).get_quantile_cut())


def test_cuts_match_xgboost_dmatrix_after_hist_training():
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(11)
    X = tied_data(rng, 300, 4, [2, 16, 32, 9])
    w = rng.random(300).astype(np.float32)
    dm = xgb.DMatrix(X, label=rng.random(300), weight=w)
    xgb.train({"tree_method": "hist", "max_bin": 32}, dm, num_boost_round=1)
    assert_matches_xgboost(make_cuts(summarize(X, w), 32), dm.get_quantile_cut())


def test_cuts_give_each_distinct_value_its_bin(xp):
    rng = np.random.default_rng(12)
    max_bin = 16
    X = tied_data(rng, 500, 4, [1, 2, 15, 16])
    c = make_cuts(summarize(xp.asarray(X)), max_bin).to(np)
    assert c.ptrs.dtype == np.int32 and c.values.dtype == np.float32 and c.min_values.dtype == np.float32
    for f in range(4):
        col = X[:, f]
        distinct = np.unique(col[~np.isnan(col)])
        cuts_f = c.values[c.ptrs[f] : c.ptrs[f + 1]]
        assert len(cuts_f) == len(distinct)
        bins = np.minimum(np.searchsorted(cuts_f, distinct, side="right"), len(cuts_f) - 1)
        np.testing.assert_array_equal(bins, np.arange(len(distinct)))
        assert c.min_values[f] < distinct[0]
    assert c.n_features == 4 and c.total_bins == 1 + 2 + 15 + 16 and c.max_bins_per_feature == 16


def test_cuts_of_empty_and_constant_features():
    X = np.full((10, 3), np.nan, np.float32)
    X[:, 1] = -4.0
    X[:, 2] = 0.0
    c = make_cuts(summarize(X), 8)
    np.testing.assert_array_equal(c.ptrs, [0, 1, 2, 3])
    eps = np.float64(np.float32(1e-5))
    np.testing.assert_array_equal(c.min_values, np.float32([1e-5, -8.0 - eps, -eps]))
    np.testing.assert_array_equal(c.values, np.float32([1e-5 + 2 * eps, -4.0 + (4.0 + eps), eps]))
    # Rounded once from double, as XGBoost: in float32 steps -4 + (4 + 1e-5f) would be 9.5367e-06.
    assert c.values[1] == np.float32(1e-5)
    with pytest.raises(ValueError):
        make_cuts(summarize(X), 1)


def test_cuts_of_continuous_data_are_balanced(xp):
    rng = np.random.default_rng(13)
    n, max_bin = 20000, 64
    X = np.stack([rng.normal(size=n), rng.exponential(size=n), rng.integers(0, 1000, n)], axis=1).astype(np.float32)
    budget = sketch_budget(n, max_bin)
    parts = [summarize(xp.asarray(X[rows]), budget=budget) for rows in np.array_split(np.arange(n), 4)]
    s = parts[0]
    for p in parts[1:]:
        s = prune(merge(s, p), budget)
    c = make_cuts(s, max_bin).to(np)
    for f in range(3):
        cuts_f = c.values[c.ptrs[f] : c.ptrs[f + 1]]
        assert 0.9 * max_bin <= len(cuts_f) <= max_bin
        bins = np.minimum(np.searchsorted(cuts_f, X[:, f], side="right"), len(cuts_f) - 1)
        counts = np.bincount(bins, minlength=len(cuts_f))
        assert counts.max() <= 2 * n / max_bin + 1, (f, counts.max())
        assert counts.min() > 0


# ----------------------------------------------------------------------------- containers
def test_containers_move_between_modules(xp):
    rng = np.random.default_rng(14)
    s = summarize(rng.normal(size=(50, 3)).astype(np.float32), budget=20)
    moved = s.to(xp)
    assert isinstance(moved.ptrs, np.ndarray) and type(moved.value).__module__.split(".")[0] == xp.__name__
    assert_same(moved.to(np), features(s))
    c = make_cuts(s, 8)
    back = c.to(xp).to(np)
    for a, b in ((back.ptrs, c.ptrs), (back.values, c.values), (back.min_values, c.min_values)):
        np.testing.assert_array_equal(a, b)
    assert (back.n_features, back.total_bins, back.max_bins_per_feature) == (3, 24, 8)


def segmented_queries(rng, dtype):
    """Sorted runs (ties, empty runs) concatenated, and queries (run, lo, hi, value) some of
    which start past their run's beginning or lie outside its values."""
    sizes = rng.integers(0, 300, 60)
    sizes[[3, 7, 59]] = 0
    a = np.concatenate([np.sort(rng.integers(0, 40, s)) for s in sizes]).astype(dtype)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    seg = rng.integers(0, sizes.size, 5000)
    hi = starts[seg] + sizes[seg]
    lo = np.minimum(starts[seg] + rng.integers(0, 3, seg.size), hi)
    v = (rng.integers(-3, 44, seg.size) + rng.choice([0.0, 0.5], seg.size)).astype(dtype)
    return a, lo, hi, v, int(sizes.max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("right", [True, False], ids=["right", "left"])
def test_segmented_searchsorted_is_searchsorted_in_each_run(backend, xp, right, dtype):
    """backend.segmented_searchsorted (what prune's rank queries run) against np.searchsorted
    run by run: float64 ranks take the CUDA backend's kernel, other types the array steps."""
    a, lo, hi, v, width = segmented_queries(np.random.default_rng(21 + right), dtype)
    got = backend.segmented_searchsorted(xp.asarray(a), xp.asarray(lo), xp.asarray(hi), xp.asarray(v), width, right)
    side = "right" if right else "left"
    brute = np.array([start + np.searchsorted(a[start:end], x, side=side) for start, end, x in zip(lo, hi, v)])
    np.testing.assert_array_equal(to_host(got), brute)


@pytest.mark.gpu
@pytest.mark.parametrize("right", [True, False], ids=["right", "left"])
def test_segmented_search_kernel_equals_the_steps(right):
    """kernels/sketch.cu's search (what prune runs on a GPU) against the array-step
    reference and np.searchsorted, on runs with ties, empty runs and queries outside them."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    import cupy

    rng = np.random.default_rng(11 + right)
    sizes = rng.integers(0, 300, 60)
    sizes[[3, 7, 59]] = 0
    a = np.concatenate([np.sort(rng.integers(0, 40, s)).astype(np.float64) for s in sizes])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    seg = rng.integers(0, sizes.size, 5000)
    hi = starts[seg] + sizes[seg]
    lo = np.minimum(starts[seg] + rng.integers(0, 3, seg.size), hi)
    v = rng.integers(-3, 44, seg.size).astype(np.float64) + rng.choice([0.0, 0.5], seg.size)
    from daskgb.sketch import cuda as sketch_cuda, reference

    want = reference.segmented_searchsorted(np, a, lo, hi, v, int(sizes.max()), right)
    side = "right" if right else "left"
    brute = np.array([l + np.searchsorted(a[l:h], x, side=side) for l, h, x in zip(lo, hi, v)])
    np.testing.assert_array_equal(want, brute)
    got = sketch_cuda.segmented_searchsorted(cupy.asarray(a), cupy.asarray(lo), cupy.asarray(hi), cupy.asarray(v),
                                             right)
    np.testing.assert_array_equal(got.get(), want)
    via = sketch_mod._segmented_searchsorted(cupy, cupy.asarray(a), cupy.asarray(lo), cupy.asarray(hi),
                                             cupy.asarray(v), int(sizes.max()), right)
    np.testing.assert_array_equal(via.get(), want)


def _sketch_block(rng, rows, k, kind):
    """A (rows, k) float32 block of one kind of column: few values, many, heavy ties, all
    missing, a constant, with NaNs and a missing value of -1 scattered through."""
    if kind == "few":
        X = rng.integers(0, 7, (rows, k)).astype(np.float32)
    elif kind == "ties":
        X = np.round(rng.standard_t(3, (rows, k)), 1).astype(np.float32)
    elif kind == "many":
        X = rng.lognormal(0, 2, (rows, k)).astype(np.float32) * rng.choice([-1, 1], (rows, k))
    else:  # a mix, column by column, with an empty and a constant column
        X = rng.normal(size=(rows, k)).astype(np.float32)
        X[:, 1 % k] = np.round(X[:, 1 % k] * 4) / 4
        if k > 2:
            X[:, 2] = np.nan
        if k > 3:
            X[:, 3] = 0.5
    X[rng.random((rows, k)) < 0.15] = np.nan
    X[rng.random((rows, k)) < 0.05] = -1.0
    X[rng.random((rows, k)) < 0.02] = -0.0
    return X


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["few", "ties", "many", "mix"])
@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("budget", [None, 2, 3, 17, 300])
@pytest.mark.parametrize("missing", [np.nan, -1.0], ids=["nan", "minus1"])
def test_summarize_dense_kernels_equal_the_array_steps(oracle, cb, kind, k, budget, missing):
    """kernels/sketch.cu's block summaries (keys sorted once, exact runs kept or the pruned
    column's picks read off the runs) against sketch/reference.py's array steps, bit for bit:
    values, ranks and pointers, exact and pruned columns, with ties, NaN, the missing value,
    -0.0, an empty and a constant column; a strided view (a block of a wider matrix) too."""
    import cupy

    rng = np.random.default_rng([ord(kind[0]), k, budget or 0, int(np.isnan(missing))])
    X = _sketch_block(rng, 3000, k + 2, kind)
    Xd = cupy.asarray(X)
    for rows, cols in ((slice(None), slice(0, k)), (slice(100, 2900), slice(2, 2 + k))):
        want = oracle.summarize_dense(X[rows, cols], missing, budget)
        got = cb.summarize_dense(Xd[rows, cols], missing, budget)
        np.testing.assert_array_equal(got.ptrs, want.ptrs)
        for name in ("value", "rmin", "rmax", "wmin"):
            np.testing.assert_array_equal(to_host(getattr(got, name)), getattr(want, name), err_msg=name)


@pytest.mark.gpu
def test_summarize_dense_kernels_name_inf_and_take_float64(oracle, cb):
    import cupy

    X = np.random.default_rng(3).normal(size=(500, 3))
    want = oracle.summarize_dense(X, np.nan, 17)
    got = cb.summarize_dense(cupy.asarray(X), np.nan, 17)
    np.testing.assert_array_equal(to_host(got.value), want.value)
    np.testing.assert_array_equal(to_host(got.rmin), want.rmin)
    X[7, 1] = np.inf
    with pytest.raises(ValueError, match="input contains inf"):
        cb.summarize_dense(cupy.asarray(X), np.nan, 17)
    assert to_host(cb.summarize_dense(cupy.asarray(X), np.inf, 17).value).size  # inf as the missing value
    empty = cb.summarize_dense(cupy.full((40, 2), np.nan, dtype=cupy.float32), np.nan, 17)
    np.testing.assert_array_equal(empty.ptrs, [0, 0, 0])
