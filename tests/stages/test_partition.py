"""The partition stage (daskgb/partition/): which node each row is in, rows moved to the children of split nodes.

A row goes left when its bin of the split feature is <= the split's bin, or when the value
is missing and the split's default is left. Forests of trees grown together (multiclass: one
tree per class, one pass per level) have "virtual" rows: c * n + r is row r in tree c, and
node g belongs to tree g % K; a forest's partition must equal K single trees'.

Tests taking `backend` run on every backend against rows routed by hand or single trees;
tests taking `cb` (marked gpu) apply the same splits with the oracle and the CUDA backend
and compare, and check the CUDA partition's segments.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import (LAYOUTS, bins_by_hand, both_ellpacks, check_segments, concat, fixed_histogram, forest_levels,
                      grow_partitions, make_cuts, next_leaves, random_ellpack, random_gpair, random_level, random_rows)
from daskgb.arrays import to_host


# --------------------------------------------------------------------------- every backend
@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_splits_sends_rows_by_their_bins(backend, layout):
    """Levels of random splits (bins from -1, where only missing values may go left, to the
    last bin, where every present value goes left) against each row routed by hand."""
    rng = np.random.default_rng(70 + LAYOUTS.index(layout))
    n_rows = 1500
    cuts = make_cuts(rng, 7, 30)
    X, ell = random_rows(backend, rng, cuts, layout, n_rows)
    bins = bins_by_hand(X, cuts, np.nan)
    part = backend.new_partition(n_rows)
    expected = np.zeros(n_rows, dtype=np.int64)
    leaves, next_id = [0], 1
    for level in range(4):
        args = random_level(rng, cuts, leaves, next_id, frac=1.0 if level < 2 else 0.7)
        backend.apply_splits(ell, part, *args)
        for nid, f, b, dl, lid, rid in zip(*args):
            rows = np.flatnonzero(expected == nid)
            v = bins[rows, f]
            expected[rows] = np.where(np.where(v < 0, dl != 0, v <= b), lid, rid)
        got = to_host(part.positions)
        bad = np.flatnonzero(got != expected)
        assert bad.size == 0, (f"level {level}: {bad.size} rows in other nodes; first row {bad[0]}: expected node "
                               f"{expected[bad[0]]}, got {got[bad[0]]}")
        leaves, next_id = next_leaves(leaves, args)
    assert len(np.unique(expected)) > 4, "the splits must spread the rows"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forest_equals_separate_trees(backend, layout):
    """A forest of K trees partitions each tree's virtual rows as K separate trees do."""
    rng = np.random.default_rng(5)
    n, k = 3000, 3
    cuts = make_cuts(rng, 6, 30)
    ell = random_ellpack(backend, rng, cuts, layout, n)
    random_gpair(rng, n * k)  # the histogram test (test_histogram.py) draws these from the same stream
    forest = backend.new_partition(n, k)
    trees = [backend.new_partition(n) for _ in range(k)]
    for level in forest_levels(rng, cuts, k, 3):
        backend.apply_splits(ell, forest, *concat(level, k))
        for c in range(k):
            backend.apply_splits(ell, trees[c], *level[c])
        positions = to_host(forest.positions)
        for c in range(k):
            np.testing.assert_array_equal(positions[c * n : (c + 1) * n], to_host(trees[c].positions) * k + c)


# --------------------------------------------------------------------------- GPU: the oracle and CUDA compared
@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_splits(cb, layout):
    rng = np.random.default_rng(LAYOUTS.index(layout))
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n_rows=3001)
    grow_partitions(cb, ell_n, ell_c, rng, n_levels=4)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_forest_cuda_matches_numpy(oracle, cb, layout):
    """A forest's positions and segments after each level, and its leaves' histograms (exact
    int64 sums), on the CUDA backend against the oracle."""
    import cupy

    rng = np.random.default_rng(11)
    n, k = 20_000, 4
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n)
    part_n, part_c = oracle.new_partition(n, k), cb.new_partition(n, k)
    check_segments(part_c)
    for level in forest_levels(rng, ell_n.cuts, k, 4):
        args = concat(level, k)
        oracle.apply_splits(ell_n, part_n, *args)
        cb.apply_splits(ell_c, part_c, *args)
        np.testing.assert_array_equal(to_host(part_c.positions), part_n.positions)
        check_segments(part_c)
    fixed, _ = cb.prepare_gradients(cupy.asarray(random_gpair(rng, n * k)))
    leaves = sorted(part_c.segments)
    got = to_host(cb.build_histograms(ell_c, fixed, part_c, leaves))
    np.testing.assert_array_equal(got, fixed_histogram(ell_n, to_host(fixed), part_n.positions, leaves))
