"""Forests of trees grown together over "virtual" rows (multiclass: one tree per class, one pass per level).

A forest of K trees has K * n virtual rows, c * n + r being row r in tree c, and
node g belonging to tree g % K. Its partitions and histograms must equal K single
trees' (numpy), and the CUDA kernels must agree with numpy on them exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from daskgb.arrays import to_host
from daskgb.backend import numpy_backend as nb

from test_backend_parity import (both_ellpacks, cb, check_segments, fixed_histogram,  # noqa: F401
                                 random_gpair, random_level)


def forest_levels(rng, cuts, n_trees: int, n_levels: int):
    """Random levels of splits for each tree, in local node ids: [level][tree] -> split arrays."""
    leaves = [[0] for _ in range(n_trees)]
    next_id = [1] * n_trees
    levels = []
    for _ in range(n_levels):
        level = []
        for c in range(n_trees):
            args = random_level(rng, cuts, leaves[c], next_id[c], frac=0.8)
            split = set(args[0].tolist())
            leaves[c] = [n for n in leaves[c] if n not in split] + [int(x) for p in zip(args[4], args[5]) for x in p]
            next_id[c] = int(args[5].max()) + 1
            level.append(args)
        levels.append(level)
    return levels


def to_global(args, c: int, n_trees: int):
    nids, features, bins, default_left, lids, rids = args
    g = lambda ids: (ids.astype(np.int64) * n_trees + c).astype(np.int32)  # noqa: E731
    return g(nids), features, bins, default_left, g(lids), g(rids)


def concat(level, n_trees):
    parts = [to_global(args, c, n_trees) for c, args in enumerate(level)]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(6))


@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_forest_equals_separate_trees(layout):
    from test_backend_parity import make_cuts, numpy_ellpack

    rng = np.random.default_rng(5)
    n, k = 3000, 3
    cuts = make_cuts(rng, 6, 30)
    ell = numpy_ellpack(rng, cuts, layout, n)
    gpair = random_gpair(rng, n * k)
    forest = nb.new_partition(n, k)
    trees = [nb.new_partition(n) for _ in range(k)]
    for level in forest_levels(rng, cuts, k, 3):
        nb.apply_splits(ell, forest, *concat(level, k))
        for c in range(k):
            nb.apply_splits(ell, trees[c], *level[c])
        for c in range(k):
            np.testing.assert_array_equal(forest.positions[c * n : (c + 1) * n], trees[c].positions * k + c)
    for c in range(k):
        nodes = np.unique(trees[c].positions)
        got = nb.build_histograms(ell, gpair, forest, (nodes * k + c).tolist())
        want = nb.build_histograms(ell, gpair[c * n : (c + 1) * n], trees[c], nodes.tolist())
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_forest_cuda_matches_numpy(cb, layout):  # noqa: F811
    import cupy

    rng = np.random.default_rng(11)
    n, k = 20_000, 4
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n)
    part_n, part_c = nb.new_partition(n, k), cb.new_partition(n, k)
    check_segments(part_c)
    for level in forest_levels(rng, ell_n.cuts, k, 4):
        args = concat(level, k)
        nb.apply_splits(ell_n, part_n, *args)
        cb.apply_splits(ell_c, part_c, *args)
        np.testing.assert_array_equal(to_host(part_c.positions), part_n.positions)
        check_segments(part_c)
    fixed, _ = cb.prepare_gradients(cupy.asarray(random_gpair(rng, n * k)))
    leaves = sorted(part_c.segments)
    got = to_host(cb.build_histograms(ell_c, fixed, part_c, leaves))
    np.testing.assert_array_equal(got, fixed_histogram(ell_n, to_host(fixed), part_n.positions, leaves))
