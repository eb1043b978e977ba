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
    monkeypatch.setattr(part_compiled, "_MIN_ROWS_PER_THREAD", 1)


def _assert_same_bits(expected, got, what):
    assert expected.shape == got.shape and expected.dtype == got.dtype, what
    bad = np.flatnonzero(expected.view(np.int64).ravel() != got.view(np.int64).ravel())
    assert bad.size == 0, f"{what}: {bad.size} values differ; first at {np.unravel_index(bad[0], got.shape)}: " \
                          f"oracle {expected.ravel()[bad[0]]!r}, compiled {got.ravel()[bad[0]]!r}"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("seed", [0, 1])
def test_histograms_and_partitions_equal_the_oracle(oracle, compiled, threads, layout, seed):
    rng = np.random.default_rng(seed)
    cuts = make_cuts(rng, 9, 40)
    n_rows = 700
    _, ell = random_rows(oracle, rng, cuts, layout, n_rows)
    gpair = random_gpair(rng, n_rows)
    part_o, part_c = oracle.new_partition(n_rows), compiled.new_partition(n_rows)
    leaves, next_id = [0], 1
    for level in range(4):
        build = leaves if level == 0 else [n for n in leaves if rng.random() < 0.7] or leaves[:1]
        _assert_same_bits(oracle.build_histograms(ell, gpair, part_o, build),
                          compiled.build_histograms(ell, gpair, part_c, build), f"level {level} histograms")
        args = random_level(rng, cuts, leaves, next_id, frac=0.8)
        oracle.apply_splits(ell, part_o, *args)
        compiled.apply_splits(ell, part_c, *args)
        assert np.array_equal(part_o.positions, part_c.positions), f"level {level}: rows in other nodes"
        leaves, next_id = next_leaves(leaves, args)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forest_levels_equal_the_oracle(oracle, compiled, threads, layout):
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


@pytest.mark.parametrize("layout", ["dense_missing", "sparse"])
def test_categorical_splits_route_as_the_oracle(oracle, compiled, threads, layout):
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
