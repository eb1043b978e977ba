"""The CPU's compiled loops (backend/compiled_backend.py) against the numpy oracle, on the same random input.

Each compiled loop sums and routes in the oracle's order, so its results must equal the
oracle's bit for bit: histograms over random levels of random trees (single trees and
forests, every layout, nodes with no rows), and the rows' nodes after random splits
(numeric and categorical). They run with 1 and 3 threads, so that a split of the work
between threads is seen not to change a bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import LAYOUTS, concat, forest_levels, make_cuts, next_leaves, random_gpair, random_level, random_rows
from daskgb import cpu


@pytest.fixture(params=[1, 3], ids=["1-thread", "3-threads"])
def threads(request):
    cpu.set_threads(request.param)
    yield request.param
    cpu.set_threads(None)


@pytest.fixture(autouse=True)
def small_work_split(monkeypatch):
    # The loops keep small work on one thread; here every size is split, so the tests see it.
    from daskgb.histogram import compiled as hist_compiled
    from daskgb.partition import compiled as part_compiled

    monkeypatch.setattr(hist_compiled, "_MIN_PAIRS_PER_THREAD", 1)
    monkeypatch.setattr(hist_compiled, "_MIN_ROWS_PER_THREAD", 1)
    # A dense level's features are walked in groups of ~200 bins x nodes: at the root a group
    # holds several features, deeper one, so both kinds of group meet the oracle.
    monkeypatch.setattr(hist_compiled, "_HIST_BUDGET", 200)
    # Features cut into more pieces than threads, taken by whichever thread is free (run_chunks'
    # shared pieces; the whole-model tests run the one-piece-a-thread split).
    monkeypatch.setattr(hist_compiled, "_pieces_per_thread", lambda group_end, min_chunk: 2)
    monkeypatch.setattr(part_compiled, "_MIN_ROWS_PER_THREAD", 1)



@pytest.fixture(params=["rows", "columns"])
def walks(monkeypatch, request):
    """A dense level's walks, and the partition, read the row-major symbols (the walks
    prefetching rows ahead) or the feature columns: every level one way, then the other."""
    from daskgb.histogram import compiled as hist_compiled
    from daskgb.partition import compiled as part_compiled

    lines = 10**6 if request.param == "rows" else 0
    monkeypatch.setattr(hist_compiled, "_MAX_LINES_BY_ROWS", lines)
    monkeypatch.setattr(part_compiled, "_MAX_LINES_BY_ROWS", lines)
    monkeypatch.setattr(hist_compiled, "_ROWS_AHEAD", 3)
    return request.param


def _assert_same_bits(expected, got, what):
    assert expected.shape == got.shape and expected.dtype == got.dtype, what
    bad = np.flatnonzero(expected.view(np.int64).ravel() != got.view(np.int64).ravel())
    assert bad.size == 0, f"{what}: {bad.size} values differ; first at {np.unravel_index(bad[0], got.shape)}: " \
                          f"oracle {expected.ravel()[bad[0]]!r}, compiled {got.ravel()[bad[0]]!r}"


def _grow_levels_as_the_oracle(oracle, compiled, rng, cuts, ell, n_rows, some_built):
    """4 levels of a random tree on both backends: each level's histograms (of every leaf, or of
    a random ~70% of them where some_built) the same bits, its random splits the same rows."""
    gpair = random_gpair(rng, n_rows)
    part_o, part_c = oracle.new_partition(n_rows), compiled.new_partition(n_rows)
    leaves, next_id = [0], 1
    for level in range(4):
        build = leaves
        if some_built and level > 0:
            build = [n for n in leaves if rng.random() < 0.7] or leaves[:1]
        _assert_same_bits(oracle.build_histograms(ell, gpair, part_o, build),
                          compiled.build_histograms(ell, gpair, part_c, build), f"level {level} histograms")
        args = random_level(rng, cuts, leaves, next_id, frac=0.8)
        oracle.apply_splits(ell, part_o, *args)
        compiled.apply_splits(ell, part_c, *args)
        assert np.array_equal(part_o.positions, part_c.positions), f"level {level}: rows in other nodes"
        leaves, next_id = next_leaves(leaves, args)


@pytest.mark.parametrize("rows", ["never-fall-searched", "never-fall-scanned", "repeated-columns"])
def test_sparse_rows_searched_or_scanned_equal_the_oracle(oracle, compiled, threads, rows):
    """A sparse matrix's rows are binary-searched where they never fall (what quantising makes),
    else scanned: both give the oracle's bits, the latter too where a CSR row repeats a column
    with a lower bin second (the oracle's bin of the feature is the larger)."""
    from builders import make_csr, sparse_ellpack
    from daskgb.histogram import compiled as hist_compiled

    rng = np.random.default_rng(11)
    cuts = make_cuts(rng, 8, 30)
    n_rows = 600
    indptr, indices, data = make_csr(rng, cuts, n_rows, 0.6)
    if rows == "repeated-columns":
        ptrs = np.asarray(cuts.ptrs)
        indptr2, indices2, data2 = [0], [], []
        for r in range(n_rows):
            cols, vals = list(indices[indptr[r]:indptr[r + 1]]), list(data[indptr[r]:indptr[r + 1]])
            if cols and rng.random() < 0.3:  # the row's first column again, at its feature's lowest values
                f = int(cols[0])
                cols.append(f)
                vals.append(float(cuts.values[ptrs[f]]) - 1.0)
            indices2 += cols
            data2 += vals
            indptr2.append(len(indices2))
        indptr, indices, data = (np.asarray(indptr2, dtype=np.int64), np.asarray(indices2, dtype=np.int32),
                                 np.asarray(data2, dtype=np.float32))
    ell = sparse_ellpack(oracle, indptr, indices, data, n_rows, cuts, np.nan)
    if rows == "never-fall-scanned":
        ell.__dict__["_rows_sorted"] = False
    assert hist_compiled.rows_sorted(ell) == (rows == "never-fall-searched")
    _grow_levels_as_the_oracle(oracle, compiled, rng, cuts, ell, n_rows, some_built=False)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("max_bins", [40, 300])
def test_histograms_and_partitions_equal_the_oracle(oracle, compiled, threads, layout, seed, max_bins, walks):
    """Random levels of a random tree; with 300 bins a dense matrix's symbols overflow a byte
    and its feature columns are 16-bit."""
    from daskgb.histogram import compiled as hist_compiled

    rng = np.random.default_rng(seed)
    cuts = make_cuts(rng, 9, max_bins)
    n_rows = 700
    _, ell = random_rows(oracle, rng, cuts, layout, n_rows)
    if ell.is_dense:
        assert hist_compiled.feature_columns(ell).dtype == (np.uint8 if max_bins < 256 else np.uint16)
    _grow_levels_as_the_oracle(oracle, compiled, rng, cuts, ell, n_rows, some_built=True)


@pytest.mark.parametrize("layout", ["dense", "dense_missing"])
@pytest.mark.parametrize("n_trees", [1, 3])
def test_a_matrix_of_no_rows_has_empty_histograms(oracle, compiled, threads, layout, n_trees, walks):
    """A Dask worker may hold no rows: its histograms are zeros, as the oracle's."""
    rng = np.random.default_rng(4)
    cuts = make_cuts(rng, 5, 30)
    _, ell = random_rows(oracle, rng, cuts, layout, 0)
    gpair = random_gpair(rng, 0)
    part_o, part_c = oracle.new_partition(0, n_trees), compiled.new_partition(0, n_trees)
    nodes = list(range(n_trees))
    _assert_same_bits(oracle.build_histograms(ell, gpair, part_o, nodes),
                      compiled.build_histograms(ell, gpair, part_c, nodes), "histograms of no rows")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forest_levels_equal_the_oracle(oracle, compiled, threads, layout, walks):
    """A forest of 3 trees grown together (multiclass): virtual rows c * n_rows + r."""
    rng = np.random.default_rng(5)
    cuts = make_cuts(rng, 6, 30)
    n_rows, n_trees = 400, 3
    _, ell = random_rows(oracle, rng, cuts, layout, n_rows)
    gpair = random_gpair(rng, n_rows * n_trees)
    part_o, part_c = oracle.new_partition(n_rows, n_trees), compiled.new_partition(n_rows, n_trees)
    for level in forest_levels(rng, cuts, n_trees, 3):
        args = concat(level, n_trees)
        build = sorted({int(x) for x in np.concatenate([args[4], args[0]])})
        _assert_same_bits(oracle.build_histograms(ell, gpair, part_o, build),
                          compiled.build_histograms(ell, gpair, part_c, build), "forest histograms")
        oracle.apply_splits(ell, part_o, *args)
        compiled.apply_splits(ell, part_c, *args)
        assert np.array_equal(part_o.positions, part_c.positions)


def _listed_rows(oracle, rng, cuts, n_rows, kind):
    """Rows whose features 1 and 3 hold one bin in ~90% of the rows (a middle bin of 1, the
    first of 3: a one-hot column's zeros) and no missing entry. kind "missing" adds: feature 0
    misses 10% and feature 2 holds one bin in ~90% of the rows and misses 5% (both read
    densely), feature 4 misses 60% and feature 5 95% (read by their present entries). kind
    "all_missing": every feature misses 50-95% (every feature listed)."""
    from daskgb import ellpack

    from builders import make_X

    ptrs = np.asarray(cuts.ptrs)
    X = make_X(rng, cuts, n_rows)
    if kind == "all_missing":
        for f in range(X.shape[1]):
            X[1:][rng.random(n_rows - 1) < rng.uniform(0.5, 0.95), f] = np.nan
        # (row 0 whole: the sparse layout of the rows, its longest row's width, would be no narrower)
        return ellpack.from_dense(oracle, oracle.xp.asarray(X), cuts, np.nan)
    for f, d in ((1, 2), (2, 1), (3, 0)):
        keep = rng.random(n_rows) < 0.9
        X[keep, f] = cuts.values[ptrs[f] + d] - 0.25  # below the cut: bin d (cuts are upper bounds)
    if kind == "missing":
        for f, share in ((0, 0.1), (2, 0.05), (4, 0.6), (5, 0.95)):
            X[rng.random(n_rows) < share, f] = np.nan
    return ellpack.from_dense(oracle, oracle.xp.asarray(X), cuts, np.nan)


def _assert_same_but_implicit(expected, got, implicit, what):
    """The same bits but in the skewed features' most common bins (implicit: global bins),
    which are the node's sum less its other bins: equal to rounding."""
    others = np.ones(got.shape[1], dtype=bool)
    others[implicit] = False
    _assert_same_bits(np.ascontiguousarray(expected[:, others]), np.ascontiguousarray(got[:, others]), what)
    np.testing.assert_allclose(got[:, implicit], expected[:, implicit], rtol=1e-12, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("kind", ["full", "missing", "all_missing"])
@pytest.mark.parametrize("n_trees", [1, 3])
def test_listed_features_equal_the_oracle(oracle, compiled, threads, walks, kind, n_trees, monkeypatch):
    """Features whose one bin holds most rows (and that miss none), and features missing in
    most rows, are read by their other entries (entry_layout), node by node in blocks of their
    bins; a skewed feature's most common bin is the node's sum less the others: the other bins
    the oracle's bits, the most common ones its sums to rounding, levels of one tree and of a
    forest; in one block, and in blocks cut by the budget and the threads (every feature listed: the
    blocks zero the histograms). A level's histograms go to a buffer used before (cpu/buffers.py)."""
    from daskgb.histogram import compiled as hist_compiled

    rng = np.random.default_rng(21 + n_trees)
    cuts = make_cuts(rng, 6, 30)
    ptrs = np.asarray(cuts.ptrs)
    assert (np.diff(ptrs)[1:4] >= 3).all()  # the seeds' cuts: a middle bin for the most common
    n_rows = 500
    ell = _listed_rows(oracle, rng, cuts, n_rows, kind)
    gpair = random_gpair(rng, n_rows * n_trees)
    monkeypatch.setattr(hist_compiled, "_MIN_ENTRIES_PER_BLOCK", 1e-9)  # rows of few entries cut too
    for budget, per_thread in ((10**9, 0), (40, 4)):
        monkeypatch.setattr(hist_compiled, "_HIST_BUDGET", budget)
        monkeypatch.setattr(hist_compiled, "_BLOCKS_PER_THREAD", per_thread)
        for cached in ("_entry_layout", "_dense_rows"):
            ell.__dict__.pop(cached, None)
        layout = hist_compiled.entry_layout(ell)
        n_blocks = layout.block_first.size - 1
        assert n_blocks == 1 if budget > 10**6 else n_blocks >= 2
        listed = sorted(set(range(6)) - set(layout.dense.tolist()))
        single = [f for f in range(6) if ptrs[f + 1] - ptrs[f] == 1]  # one bin: every row's
        expected = {"full": {1, 2, 3} | set(single), "missing": {1, 3, 4, 5} | set(single), "all_missing": set(range(6))}
        assert listed == sorted(expected[kind])
        if kind != "all_missing":
            assert set(layout.implicit.tolist()) >= {int(ptrs[1] + 2), int(ptrs[3])}
        part_o, part_c = oracle.new_partition(n_rows, n_trees), compiled.new_partition(n_rows, n_trees)
        for level in forest_levels(rng, cuts, n_trees, 3):
            args = concat(level, n_trees)
            build = sorted({int(x) for x in np.concatenate([args[4], args[0]])})
            stale = compiled.build_histograms(ell, gpair[::-1].copy(), part_c, build)  # freed: its buffer is reused
            del stale
            _assert_same_but_implicit(oracle.build_histograms(ell, gpair, part_o, build),
                                      compiled.build_histograms(ell, gpair, part_c, build), layout.implicit,
                                      f"budget {budget}: histograms")
            oracle.apply_splits(ell, part_o, *args)
            compiled.apply_splits(ell, part_c, *args)
            assert np.array_equal(part_o.positions, part_c.positions)


@pytest.mark.parametrize("layout", ["dense_missing", "sparse"])
def test_categorical_splits_route_as_the_oracle(oracle, compiled, threads, layout, walks):
    rng = np.random.default_rng(11)
    cuts = make_cuts(rng, 5, 70)
    n_rows = 600
    _, ell = random_rows(oracle, rng, cuts, layout, n_rows)
    args = random_level(rng, cuts, [0], 1)
    # The root splits by a random set of its feature's categories (some past the feature's bins,
    # some in a second word of the bitset).
    categories = [np.unique(rng.integers(0, 70, 12))]
    part_o, part_c = oracle.new_partition(n_rows), compiled.new_partition(n_rows)
    oracle.apply_splits(ell, part_o, *args, categories=categories)
    compiled.apply_splits(ell, part_c, *args, categories=categories)
    assert np.array_equal(part_o.positions, part_c.positions)
    assert len(np.unique(part_o.positions)) == 2, "the set sends rows both ways"


def _split_nodes(rng, widths, k):
    """(cuts, float64 hist, parent) of k nodes summed from random rows: pairs on a 1/16 grid
    (exact sums; ties between candidates), a signal on feature i % F of node i, feature 5 a copy
    of feature 1 (ties across features), missing values (none in node 2: no backward scan
    there), a single row in node 3 (no valid split)."""
    from daskgb.sketch import Cuts

    ptrs = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    values = np.concatenate([np.sort(rng.choice(np.arange(4 * w + 1), w, replace=False)) * 0.5
                             for w in widths]).astype(np.float32)
    cuts = Cuts(ptrs.astype(np.int32), values, (values[ptrs[:-1]] - 1.0).astype(np.float32))
    n_features = len(widths)
    hist = np.zeros((k, int(ptrs[-1]), 2))
    parent = np.zeros((k, 2))
    for i in range(k):
        n = 1 if i == 3 else int(rng.integers(30, 400))
        local = np.stack([rng.integers(0, w, n) for w in widths], axis=1)
        local[:, 5] = np.minimum(local[:, 1], widths[5] - 1)
        sig = i % n_features
        g = rng.normal(size=n) + 2.0 * (local[:, sig] > widths[sig] // 2)
        pair = np.round(np.stack([g, rng.uniform(0.05, 1.0, n)], axis=1) * 16) / 16
        pair[:, 1] = np.maximum(pair[:, 1], 1 / 16)
        parent[i] = pair.sum(axis=0)
        missing = rng.random(local.shape) < (0.0 if i == 2 else 0.15)
        for f in range(n_features):
            rows = ~missing[:, f]
            np.add.at(hist[i, :, 0], ptrs[f] + local[rows, f], pair[rows, 0])
            np.add.at(hist[i, :, 1], ptrs[f] + local[rows, f], pair[rows, 1])
    return cuts, hist, parent


@pytest.mark.parametrize("seed", range(8))
def test_split_evaluation_equals_the_oracle(oracle, compiled, threads, seed):
    """Every record field and the children's sums, bit for bit, across the rules (lambda,
    alpha, min_child_weight, max_delta_step), feature masks (one for all nodes, one per node,
    a node allowed nothing) and monotone constraints with bounds."""
    from daskgb.split import SplitParams
    from daskgb.split import compiled as split_compiled
    from daskgb.split import reference as split_reference

    rng = np.random.default_rng(100 + seed)
    widths = [2, 40, 2, 3, 256, 40, 7, 1, 130, 2, 256]
    k = 14
    cuts, hist, parent = _split_nodes(rng, widths, k)
    params = SplitParams(reg_lambda=[0.0, 1.0, 5.0][seed % 3], reg_alpha=0.5 * (seed % 2),
                         min_child_weight=[1.0, 0.0, 3.0][seed % 4 % 3], max_delta_step=0.7 if seed in (3, 6) else 0.0)
    mask = [None, rng.random(len(widths)) < 0.6, rng.random((k, len(widths))) < 0.5][seed % 3]
    if mask is not None and mask.ndim == 2:
        mask[0] = False
    monotone = rng.integers(-1, 2, len(widths)) if seed >= 5 else None
    bounds = None
    if monotone is not None:
        lo = rng.uniform(-1.0, 0.0, k).astype(np.float32)
        bounds = np.stack([lo, lo + rng.uniform(0.05, 1.0, k).astype(np.float32)], axis=1)
        bounds[1] = [-np.inf, np.inf]
    monkey_min = split_compiled._MIN_BINS_PER_THREAD
    split_compiled._MIN_BINS_PER_THREAD = 1  # every node count split between threads
    try:
        got = compiled.evaluate_splits(cuts, hist, parent, np.ones(2), params, mask, monotone, bounds)
    finally:
        split_compiled._MIN_BINS_PER_THREAD = monkey_min
    # The one scan of split/reference.py: numpy_backend's grouped scan gives the same records
    # but for the fields of a node with no split (test_split.py), which nothing reads.
    want = split_reference.evaluate_splits(np, hist, parent, np.ones(2), cuts.ptrs, cuts.values, cuts.min_values,
                                           params, mask, monotone, bounds)
    grouped = oracle.evaluate_splits(cuts, hist, parent, np.ones(2), params, mask, monotone, bounds)
    assert np.array_equal(grouped[0]["feature"], got[0]["feature"]) and np.array_equal(grouped[1], got[1])
    assert (want[0]["feature"] >= 0).sum() >= k // 2, "too few nodes split: the test would see little"
    assert (want[0]["default_left"][want[0]["feature"] >= 0] == 1).any(), "no backward winner"
    for name in want[0].dtype.names:
        _assert_same_bits(np.ascontiguousarray(want[0][name]).astype(np.float64),
                          np.ascontiguousarray(got[0][name]).astype(np.float64), f"record field {name}")
    _assert_same_bits(want[1], got[1], "left sums")
    _assert_same_bits(want[2], got[2], "right sums")


def test_children_histograms_equal_the_oracle(oracle, compiled, threads, monkeypatch):
    """Sibling subtraction on random float64 sums (rounded differences): parents out of order
    and some twice, either child built."""
    from daskgb.histogram import compiled as hist_compiled

    monkeypatch.setattr(hist_compiled, "_MIN_PAIRS_PER_THREAD", 1)
    monkeypatch.setattr(hist_compiled, "_MIN_ROWS_PER_THREAD", 1)
    # A dense level's features are walked in groups of ~200 bins x nodes: at the root a group
    # holds several features, deeper one, so both kinds of group meet the oracle.
    monkeypatch.setattr(hist_compiled, "_HIST_BUDGET", 200)
    # Features cut into more pieces than threads, taken by whichever thread is free (run_chunks'
    # shared pieces; the whole-model tests run the one-piece-a-thread split).
    monkeypatch.setattr(hist_compiled, "_pieces_per_thread", lambda group_end, min_chunk: 2)
    rng = np.random.default_rng(7)
    n_parents, k, bins = 6, 11, 53
    parents = rng.normal(size=(n_parents, bins, 2)) * 1e3
    built = rng.normal(size=(k, bins, 2))
    parent_rows = rng.integers(0, n_parents, k)
    build_right = rng.random(k) < 0.5
    left, right = rng.normal(size=(n_parents, 2)), rng.normal(size=(n_parents, 2))
    want = oracle.children_histograms(parents, parent_rows, built, build_right, left, right)
    got = compiled.children_histograms(parents, parent_rows, built, build_right, left, right)
    _assert_same_bits(want[0], got[0], "children's histograms")
    _assert_same_bits(want[1], got[1], "children's sums")


def test_gradient_sums_equal_the_oracle(oracle, compiled):
    """A node's sum row by row in double, on pairs whose sum depends on the order, and of no rows."""
    rng = np.random.default_rng(8)
    gpair = (rng.normal(size=(5000, 2)) * 10.0 ** rng.integers(-4, 5, (5000, 2))).astype(np.float32)
    for rows in (gpair, gpair[:0], gpair[::3]):
        _assert_same_bits(oracle.sum_gradients(rows), compiled.sum_gradients(rows), f"{rows.shape[0]} rows")


@pytest.mark.parametrize("missing", [np.nan, -999.0])
def test_dense_summaries_equal_the_oracle(oracle, compiled, threads, missing):
    """Columns of few and many distinct values, -0.0 beside 0.0, missing values (NaN and a
    sentinel), an all-missing column; pruned and unpruned."""
    rng = np.random.default_rng(3)
    n = 3000
    X = np.stack([rng.integers(-5, 6, n) * 0.5, rng.normal(size=n), np.round(rng.normal(size=n), 2),
                  rng.choice([0.0, -0.0, 1.0], n), np.full(n, np.nan)], axis=1).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[rng.random(X.shape) < 0.05] = -999.0
    for budget in (None, 40):
        want = oracle.summarize_dense(X, missing, budget)
        got = compiled.summarize_dense(X, missing, budget)
        assert np.array_equal(want.ptrs, got.ptrs)
        for name in ("value", "rmin", "rmax", "wmin"):
            _assert_same_bits(getattr(want, name).astype(np.float64), getattr(got, name).astype(np.float64),
                              f"budget {budget}: {name}")
    X[5, 1] = np.inf
    with pytest.raises(ValueError, match="inf"):
        compiled.summarize_dense(X, missing, 40)


@pytest.mark.parametrize("missing", [np.nan, -999.0])
def test_dense_bins_equal_the_oracle(compiled, threads, missing, monkeypatch):
    """Values on the cuts' grid (upper-bound ties), past the last cut (clamped), below the
    first, missing (NaN and a sentinel), a one-bin feature."""
    from builders import make_X
    from daskgb.ellpack import compiled as ell_compiled
    from daskgb.ellpack import reference as ell_reference

    monkeypatch.setattr(ell_compiled, "_MIN_ROWS_PER_THREAD", 1)
    rng = np.random.default_rng(4)
    cuts = make_cuts(rng, 7, 50)
    X = make_X(rng, cuts, 900, missing_frac=0.1, sentinel=not np.isnan(missing))
    want = ell_reference.bin_dense(X, cuts, missing, 50)
    got = ell_compiled.bin_dense(X, cuts, missing, 50)
    assert np.array_equal(want, got) and want.dtype == got.dtype
    bits = 6
    assert np.array_equal(ell_reference.pack_dense(X, cuts, missing, 50, bits), compiled.pack_dense(X, cuts, missing, 50, bits))
    # The sparse layout: each row's present bins first (global), then the null symbol.
    stride = int((ell_reference.bin_dense(X, cuts, missing, 50) != 50).sum(axis=1).max())
    null, bits = int(cuts.total_bins), 9
    assert np.array_equal(ell_reference.pack_dense_sparse(X, cuts, missing, stride, null, bits),
                          compiled.pack_dense_sparse(X, cuts, missing, stride, null, bits))


@pytest.mark.parametrize("missing", [np.nan, np.inf])
def test_bins_looked_up_through_buckets_equal_the_oracle(compiled, threads, missing, monkeypatch):
    """The compiled binning finds a value's cuts through its bucket (ellpack/compiled.py
    search_tables): cuts crowded into one bucket among empty ones (a skewed column's), the
    end buckets holding the cuts beyond the trimmed span, spans
    past float32's range (-3e38..3e38) or subnormal, one cut (one bucket), two adjacent floats as
    cuts, -0.0 against a cut at 0.0; values on every cut and beside it (nextafter both ways),
    +-inf, +-max float32, subnormals. The bins are the oracle's searchsorted's, every one."""
    from daskgb.ellpack import compiled as ell_compiled
    from daskgb.ellpack import reference as ell_reference
    from daskgb.sketch.cuts import Cuts

    monkeypatch.setattr(ell_compiled, "_MIN_ROWS_PER_THREAD", 1)
    rng = np.random.default_rng(21)
    big = np.finfo(np.float32).max
    tiny = np.finfo(np.float32).smallest_subnormal
    features = [
        np.concatenate([np.linspace(0, 1e-3, 200), np.geomspace(1.0, 1e6, 20)]),  # 200 cuts in one bucket's width
        np.array([-3e38, -1.0, 0.0, 1.0, 3e38]),  # a span past float32's range
        np.array([0.0, tiny, 2 * tiny, 5 * tiny]),  # a subnormal span
        np.array([7.5]),  # one cut: one bucket
        np.array([1.0, np.nextafter(np.float32(1.0), np.float32(2.0))]),
        np.array([-2.0, 0.0, 3.0]),
        np.sort(rng.lognormal(0, 5, 256)),  # skewed: most cuts near the first
    ]
    ptrs = np.concatenate([[0], np.cumsum([f.size for f in features])]).astype(np.int32)
    values = np.concatenate(features).astype(np.float32)
    assert all((np.diff(f.astype(np.float32)) > 0).all() for f in features)
    cuts = Cuts(ptrs, values, (values[ptrs[:-1]] - 1.0).astype(np.float32))
    _, _, bucket_ptrs, _, scales, starts = ell_compiled.search_tables(cuts)
    assert (np.diff(bucket_ptrs) == 2).any() and (scales == 0).any()  # the one-cut feature: one bucket
    assert np.diff(starts[bucket_ptrs[0]:bucket_ptrs[1]]).max() >= 200  # a bucket of 200 cuts, searched
    assert starts[bucket_ptrs[1] - 2] < ptrs[1] - 1  # the last bucket holds the trimmed top cuts, searched too
    specials = np.array([0.0, -0.0, np.inf, -np.inf, big, -big, tiny, -tiny, 3 * tiny], dtype=np.float32)
    cols = []
    for f in features:
        c = f.astype(np.float32)
        near = np.concatenate([c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf)),
                               specials, rng.choice(c, 50) * np.float32(1.0001)]).astype(np.float32)
        cols.append(rng.permutation(np.resize(near, 1500)))
    X = np.stack(cols, axis=1)
    X[rng.random(X.shape) < 0.05] = np.nan
    if np.isinf(missing):
        X[rng.random(X.shape) < 0.05] = np.inf
    want = ell_reference.bin_dense(X, cuts, missing, 300)
    got = ell_compiled.bin_dense(X, cuts, missing, 300)
    assert want.dtype == got.dtype and np.array_equal(want, got)
    stride = int((want != 300).sum(axis=1).max())
    null, bits = int(cuts.total_bins), 10
    assert np.array_equal(ell_reference.pack_dense_sparse(X, cuts, missing, stride, null, bits),
                          ell_compiled.pack_dense_sparse(X, cuts, missing, stride, null, bits))


@pytest.mark.parametrize("bits", [1, 5, 9, 16, 31, 32])
def test_packing_equals_the_oracle(threads, bits, monkeypatch):
    """Words of streams of every length around a run of 32 entries (where threads split),
    and symbols read back from any start."""
    from daskgb.ellpack import compiled as ell_compiled
    from daskgb.ellpack import reference as ell_reference

    monkeypatch.setattr(ell_compiled, "_MIN_ROWS_PER_THREAD", 1)
    rng = np.random.default_rng(bits)
    for n in (0, 1, 31, 32, 33, 95, 96, 1000):
        symbols = rng.integers(0, 1 << bits, n, dtype=np.uint64).astype(np.uint32)
        words = ell_reference.pack_symbols(symbols, bits)
        got = ell_compiled.pack_symbols(symbols, bits)
        assert got.dtype == words.dtype and np.array_equal(words, got), n
        for start in {0, n // 3}:
            assert np.array_equal(ell_reference.unpack_symbols(words, bits, n - start, start),
                                  ell_compiled.unpack_symbols(words, bits, n - start, start)), (n, start)


@pytest.mark.parametrize("budget", [2, 3, 17, 256])
def test_prune_equals_the_oracle(budget):
    """summary.prune_with and the compiled prune on summaries of repeated and distinct values,
    exact, weighted and merged, features below and above the budget: features of up to 16
    entries a query are pruned by one walk, larger ones by a search a query (both are seen)."""
    from daskgb import sketch
    from daskgb.sketch import compiled as sketch_compiled
    from daskgb.sketch import reference as sketch_reference
    from daskgb.sketch.summary import Summary, block_entries, exact_summary, prune_with

    rng = np.random.default_rng(budget)
    n = 5000
    X = np.stack([rng.integers(0, 10, n), rng.normal(size=n), np.round(rng.exponential(size=n), 1),
                  rng.integers(0, 300, n)], axis=1).astype(np.float32)
    exact = sketch_reference.summarize_dense(np, X, np.nan, None)
    # Ranks that are not whole numbers: weighted rows, and a merge of two summaries (what the
    # merge tree prunes).
    feature, values = block_entries(np, X)
    weighted = exact_summary(np, feature, values, np.tile(rng.random(n).astype(np.float32) * 3, X.shape[1]),
                             X.shape[1], np.nan)
    merged = sketch.merge(weighted, sketch_reference.summarize_dense(np, X[::3] + np.float32(0.05), np.nan, None))
    # Bounds no sketch makes, which the oracle still prunes: rmax inflated (rising, and past the
    # last entry's rmin: the queries fall), and rmax in no order (rmin + rmax not rising).
    inflated = exact.rmax + rng.random(exact.rmax.size) * 3 * exact.rmax.max()
    disordered = exact.rmax.copy()
    for lo, hi in zip(exact.ptrs[:-1], exact.ptrs[1:]):
        inflated[lo:hi] = np.maximum.accumulate(inflated[lo:hi])
        disordered[lo:hi] = rng.permutation(disordered[lo:hi])
    loose = [Summary(exact.ptrs, exact.value, exact.rmin, r, exact.wmin) for r in (inflated, disordered)]
    for s in (exact, weighted, merged, *loose):
        want = prune_with(s, budget, sketch_reference.segmented_searchsorted)
        got = sketch_compiled.prune(s, budget)
        assert np.array_equal(want.ptrs, got.ptrs)
        for name in ("value", "rmin", "rmax", "wmin"):
            assert np.array_equal(getattr(want, name), getattr(got, name)), name


def test_expf_loop_equals_the_array_steps(compiled, monkeypatch):
    """fmath.expf's compiled loop (what CPU fits run once the compiled backend is loaded) gives
    its array steps' bits: normal and uniform values over expf's range, its edges, inf and NaN."""
    from daskgb import fmath

    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0, 30, 50_000), rng.uniform(-105, 90, 50_000),
                        [np.nan, np.inf, -np.inf, 88.72283, 88.7229, -103.97, -103.98, 0.0, -0.0, 1e-30]])
    x = x.astype(np.float32)
    assert fmath._host_loop() is not None
    got = fmath.expf(np, x)
    monkeypatch.setattr(fmath, "_host_loop", lambda: None)
    want = fmath.expf(np, x)
    assert got.dtype == want.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _softmax_case(rng):
    """multi:softprob: margins of every size, rows all negative, equal margins, NaN in a row
    (the row's shift is NaN)."""
    from daskgb.objective import Softmax

    n, k = 4000, 7
    margin = (rng.normal(size=(n, k)) * 10.0 ** rng.integers(-3, 2, (n, 1))).astype(np.float32)
    margin[:50] = -np.abs(margin[:50])
    margin[50:60] = 0.5
    margin[60:63, [0, 3, 6]] = np.nan
    return Softmax(k), margin, rng.integers(0, k, n).astype(np.float32)


def _logistic_case(rng):
    """binary:logistic: margins of every size, past expf's cap (88.7) both ways, zeros, NaN."""
    from daskgb.objective import _Logistic

    n = 5000
    margin = (rng.normal(size=n) * 10.0 ** rng.integers(-4, 3, n)).astype(np.float32)
    margin[:4] = [-200.0, 200.0, 0.0, -0.0]
    margin[4:6] = np.nan
    return _Logistic(), margin, rng.integers(0, 2, n).astype(np.float32)


@pytest.mark.parametrize("case", [_softmax_case, _logistic_case], ids=["softmax", "logistic"])
@pytest.mark.parametrize("weighted", [False, True])
def test_objective_gradients_equal_the_array_steps(compiled, monkeypatch, case, weighted):
    """The objectives' compiled gradient pairs (CPU fits) are their numpy steps' bits (NaN where
    those give NaN), with and without weights."""
    from daskgb import cpu

    rng = np.random.default_rng(9)
    obj, margin, y = case(rng)
    weight = rng.uniform(0, 3, y.shape[0]).astype(np.float32) if weighted else None
    assert cpu.compiled_loaded()
    got = obj.gradient(np, margin, y, weight)
    monkeypatch.setattr(cpu, "compiled_loaded", lambda: False)
    want = obj.gradient(np, margin, y, weight)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    numbers = ~np.isnan(want)
    assert np.array_equal(got[numbers].view(np.uint32), want[numbers].view(np.uint32))


def test_forest_pairs_are_the_softmax_buffer(compiled):
    """A compiled softmax's pairs lie class by class: the forest's (K n, 2) pairs are its buffer,
    not a copy, and equal the classes' pairs concatenated; pairs not back to back are copied."""
    from daskgb.objective import Softmax
    from daskgb.training.gradients import stacked_groups

    rng = np.random.default_rng(10)
    n, k = 3000, 5
    margin = rng.normal(size=(n, k)).astype(np.float32)
    gpair = Softmax(k).gradient(np, margin, rng.integers(0, k, n).astype(np.float32), None)
    groups = [gpair[:, c] for c in range(k)]
    stacked = stacked_groups(np, groups)
    assert np.shares_memory(stacked, gpair) and stacked.shape == (k * n, 2)
    assert np.array_equal(stacked, np.concatenate(groups))
    rows_major = np.ascontiguousarray(gpair)
    copied = stacked_groups(np, [rows_major[:, c] for c in range(k)])
    assert not np.shares_memory(copied, rows_major) and np.array_equal(copied, stacked)
    reordered = stacked_groups(np, groups[::-1])
    assert np.array_equal(reordered, np.concatenate(groups[::-1]))
    assert stacked_groups(np, groups[:1]) is groups[0]


def test_sketch_merges_equal_the_oracle(compiled, monkeypatch):
    """sketch.merge's compiled walk (CPU fits) gives its array steps' summaries, bit for bit:
    summaries of overlapping and disjoint values, pruned and exact, -0.0 on one side and 0.0 on
    the other, a feature empty on one side, merged in a chain as the Dask merge tree does."""
    from daskgb import cpu, sketch
    from daskgb.sketch import reference as sketch_reference

    rng = np.random.default_rng(12)

    def summary(seed_shift, n, budget):
        X = np.stack([rng.integers(-5, 6, n) * 0.5, rng.normal(size=n) + seed_shift, np.round(rng.normal(size=n), 1),
                      rng.choice([0.0, -0.0, 1.0], n), np.full(n, np.nan)], axis=1).astype(np.float32)
        X[rng.random(X.shape) < 0.1] = np.nan
        if seed_shift:
            X[:, 3] = np.where(X[:, 3] == 0.0, np.float32(-0.0), X[:, 3])
        s = sketch_reference.summarize_dense(np, X, np.nan, None)
        return s if budget is None else sketch.prune(s, budget)

    parts = [summary(i % 2, 400 + 300 * i, None if i % 3 == 0 else 40) for i in range(5)]

    def chain():
        out = parts[0]
        for p in parts[1:]:
            out = sketch.merge(out, p)
        return out

    assert cpu.compiled_loaded()
    got = chain()
    monkeypatch.setattr(cpu, "compiled_loaded", lambda: False)
    want = chain()
    assert np.array_equal(want.ptrs, got.ptrs)
    for name in ("value", "rmin", "rmax", "wmin"):
        w, g = getattr(want, name), getattr(got, name)
        assert w.dtype == g.dtype and np.array_equal(w.view(np.uint8), g.view(np.uint8)), name


def test_one_thread_runs_every_piece_without_a_pool(monkeypatch):
    """nthread=1 in a process whose pool was never made: pieces meant for several threads
    (a forest's trees as items) all run, in order, on the calling thread."""
    from daskgb import cpu

    monkeypatch.setattr(cpu, "_pool", None)
    monkeypatch.setattr(cpu, "_pool_size", 0)
    monkeypatch.setattr(cpu, "_threads", 1)
    seen = []
    cpu.run_chunks(lambda lo, hi: seen.append((lo, hi)), 10, pieces_per_thread=5)
    assert seen == cpu.chunks(10, 5) and cpu._pool is None


def test_split_loops_made_by_two_threads_at_once(monkeypatch):
    """Two Dask workers of one process (a LocalCluster of threads) may reach a stage's first
    compiled loop together: split/compiled.py compiles its rules in their module's place, and
    the second thread used to compile an already compiled rule (numba's TypeError). Each jit
    here waits 20 ms and the threads start 25 ms apart, so that each later one arrives while
    the first is between its rules."""
    import threading
    import time

    from daskgb import cpu
    from daskgb.split import compiled as split_compiled

    for name in ("_weight", "_gain", "_closed_losses"):
        f = getattr(split_compiled, name)
        monkeypatch.setattr(split_compiled, name, getattr(f, "py_func", f))
    monkeypatch.setattr(split_compiled, "_compiled", {})
    jit = cpu.jit

    def slow_jit(fn):
        compiled = jit(fn)
        time.sleep(0.02)
        return compiled

    monkeypatch.setattr(cpu, "jit", slow_jit)
    start, errors = threading.Barrier(4), []

    def first_call(i):
        start.wait()
        time.sleep(0.025 * i)
        try:
            split_compiled._kernels()
        except Exception as exc:  # noqa: BLE001 (any error is the failure)
            errors.append(exc)

    threads = [threading.Thread(target=first_call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert set(split_compiled._compiled) == {"scan"}
