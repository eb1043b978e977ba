"""The histogram stage (daskgb/histogram/): the quantiser, each node's gradient sums per bin, and children's histograms.

Each backend sums in its own type (contract: histogram_dtype): numpy float64 in row order,
as XGBoost's single-threaded CPU builder; CUDA int64 fixed point, which the quantiser
(histogram/quantiser.py) makes from the float32 pairs and which sums exactly in any order.
So the definition is the same for both: each node's pairs, in the backend's type, added
per global bin in row order.

Tests taking `backend` run on every backend against that definition (or the quantiser's, or
the sibling rule); tests taking `cb` (marked gpu) run the oracle and the CUDA backend on the
same input and compare.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from builders import (LAYOUTS, both_ellpacks, concat, fixed_histogram, forest_levels, grow_partitions, make_cuts,
                      next_leaves, random_ellpack, random_gpair, random_level, random_rows)
from daskgb.arrays import to_host
from daskgb.histogram import quantiser


def histograms_by_definition(X, cuts, native, positions, build_nodes, dtype):
    """Row by row, value by value, each present value's pair added to its global bin in the
    histogram's type, in row order; the bins found by searching the cuts (not the matrix)."""
    ptrs, values = np.asarray(cuts.ptrs), np.asarray(cuts.values)
    slot = {node: i for i, node in enumerate(build_nodes)}
    hist = np.zeros((len(build_nodes), int(ptrs[-1]), 2), dtype=dtype)
    for r in range(X.shape[0]):
        i = slot.get(int(positions[r]))
        if i is None:
            continue
        for f in range(X.shape[1]):
            v = X[r, f]
            if np.isnan(v):
                continue
            own = values[ptrs[f] : ptrs[f + 1]]
            b = ptrs[f] + min(int(np.searchsorted(own, v, side="right")), own.size - 1)
            hist[i, b] += native[r]
    return hist


def quantised_by_definition(gpair, scale):
    """The quantiser's int64 fixed point: trunc(float64(g) / scale), column by column."""
    return np.trunc(gpair.astype(np.float64) / scale).astype(np.int64)


# --------------------------------------------------------------------------- the quantiser
def test_pow2_at_least():
    for s in (0.0, -3.0, 1e-300, 5e-324, 0.3, 0.5, 1.0, 3.0, 4.0, 2.0**40 - 1, 2.0**40, 2.0**40 + 2**-12, 1e300):
        r = quantiser.pow2_at_least(s)
        if s <= 0:
            assert r == 1.0
            continue
        assert math.frexp(r)[0] == 0.5, f"{r} is not a power of two"
        assert r / 2 < s <= r, f"{r} is not the power of two at or above {s}"


def test_fixed_point_scale_and_its_errors():
    scale = quantiser.fixed_point_scale([1000.0, 0.0])
    assert scale.dtype == np.float64 and scale.shape == (2,)
    assert scale[0] == 1024.0 / 2.0**62 and scale[1] == 1.0 / 2.0**62
    for bad in ([np.nan, 1.0], [1.0, np.inf]):
        with pytest.raises(ValueError, match="NaN or infinite"):
            quantiser.fixed_point_scale(bad)


class _TwoWorkers:
    """A communicator of two workers where the other one's |g| and |h| sums are given."""

    world_size = 2

    def __init__(self, xp, other):
        self.xp, self.other = xp, other

    def allreduce(self, x, op="sum"):
        assert op == "sum"
        return x + self.xp.asarray(self.other)


@pytest.mark.parametrize("workers", [1, 2])
def test_quantise_makes_the_pairs_the_histograms_sum(backend, xp, workers):
    """float64 histograms take the float32 pairs as they are (scale one); int64 ones take
    trunc(g / scale), scale the power of two above |g| summed over every worker's rows over
    2**62. The pairs sum to the rows' total, and the |.| sums are the rows'."""
    from daskgb.collective import LocalCommunicator

    rng = np.random.default_rng(90 + workers)
    gpair = random_gpair(rng, 3000)
    other = np.array([5000.0, 3000.0])
    comm = LocalCommunicator() if workers == 1 else _TwoWorkers(xp, other)
    native, scale = quantiser.quantise(backend, xp.asarray(gpair), comm, wait=True)
    scale = to_host(scale)
    abs_sums = np.abs(gpair.astype(np.float64)).sum(axis=0)
    np.testing.assert_allclose(to_host(backend.gradient_abs_sums(xp.asarray(gpair))), abs_sums, rtol=1e-12)
    got = to_host(native)
    if backend.histogram_dtype == np.float64:
        np.testing.assert_array_equal(scale, np.ones(2))
        np.testing.assert_array_equal(got, gpair)
        np.testing.assert_allclose(to_host(backend.sum_gradients(native)), gpair.astype(np.float64).sum(axis=0),
                                   rtol=1e-12)
    else:
        total = abs_sums + (other if workers == 2 else 0.0)
        np.testing.assert_array_equal(scale, [quantiser.pow2_at_least(s) / 2.0**62 for s in total])
        np.testing.assert_array_equal(got, quantised_by_definition(gpair, scale))
        np.testing.assert_array_equal(to_host(backend.sum_gradients(native)), got.sum(axis=0))


# --------------------------------------------------------------------------- histograms, every backend
@pytest.mark.parametrize("layout", LAYOUTS)
def test_histograms_equal_their_definition(backend, layout):
    """Some of each level's nodes (as the subtraction trick builds them) after random splits:
    exactly the definition in the backend's type, and the float64 sums up to the quantisation."""
    rng = np.random.default_rng(23)
    n = 400
    cuts = make_cuts(rng, 6, 30)
    X, ell = random_rows(backend, rng, cuts, layout, n)
    assert ell.is_dense == (layout != "sparse")
    gpair = random_gpair(rng, n)
    native, scale = backend.prepare_gradients(backend.xp.asarray(gpair))
    native_h, scale = to_host(native), to_host(scale)
    part = backend.new_partition(n)
    leaves, next_id = [0], 1
    for _ in range(3):
        args = random_level(rng, cuts, leaves, next_id)
        backend.apply_splits(ell, part, *args)
        leaves, next_id = next_leaves(leaves, args)
        build = leaves[::2]  # some of the level's nodes, as the subtraction trick builds
        positions = to_host(part.positions)
        got = to_host(backend.build_histograms(ell, native, part, build))
        assert got.dtype == backend.histogram_dtype
        np.testing.assert_array_equal(got, histograms_by_definition(X, cuts, native_h, positions, build,
                                                                    backend.histogram_dtype))
        in_double = histograms_by_definition(X, cuts, gpair, positions, build, np.float64)
        S = np.abs(gpair.astype(np.float64)).sum(axis=0)
        for c in range(2):
            np.testing.assert_allclose(got[..., c] * scale[c], in_double[..., c], rtol=1e-12, atol=1e-12 * S[c])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forest_histograms_equal_separate_trees(backend, layout):
    """A forest's histograms of tree c's nodes are a single tree's over its own rows and pairs."""
    rng = np.random.default_rng(5)
    n, k = 3000, 3
    cuts = make_cuts(rng, 6, 30)
    ell = random_ellpack(backend, rng, cuts, layout, n)
    gpair = random_gpair(rng, n * k)
    native, _ = backend.prepare_gradients(backend.xp.asarray(gpair))
    forest = backend.new_partition(n, k)
    trees = [backend.new_partition(n) for _ in range(k)]
    for level in forest_levels(rng, cuts, k, 3):
        backend.apply_splits(ell, forest, *concat(level, k))
        for c in range(k):
            backend.apply_splits(ell, trees[c], *level[c])
    for c in range(k):
        nodes = np.unique(to_host(trees[c].positions))
        got = backend.build_histograms(ell, native, forest, (nodes * k + c).tolist())
        want = backend.build_histograms(ell, native[c * n : (c + 1) * n], trees[c], nodes.tolist())
        np.testing.assert_array_equal(to_host(got), to_host(want))


def test_children_histograms_are_the_built_child_and_the_parent_minus_it(backend, xp):
    """Parents picked out of order and some twice, either child built: left child at 2i,
    right at 2i + 1, the built one as given, the other the parent minus it; the children's
    sums are the parent's split sums."""
    rng = np.random.default_rng(41)
    n_parents, k, bins = 7, 9, 37
    dtype = backend.histogram_dtype  # values below 2**41: exact in float64 too
    parents = rng.integers(-2**40, 2**40, (n_parents, bins, 2)).astype(dtype)
    parent_rows = rng.integers(0, n_parents, k)
    built = rng.integers(-2**40, 2**40, (k, bins, 2)).astype(dtype)
    build_right = rng.random(k) < 0.5
    left, right = (rng.integers(-2**40, 2**40, (n_parents, 2)).astype(dtype) for _ in range(2))
    hist, sums = backend.children_histograms(xp.asarray(parents), parent_rows, xp.asarray(built), build_right,
                                             xp.asarray(left), xp.asarray(right))
    hist, sums = to_host(hist), to_host(sums)
    assert hist.shape == (2 * k, bins, 2) and sums.shape == (2 * k, 2)
    for i in range(k):
        p, side = parent_rows[i], int(build_right[i])
        np.testing.assert_array_equal(hist[2 * i + side], built[i])
        np.testing.assert_array_equal(hist[2 * i + 1 - side], parents[p] - built[i])
        np.testing.assert_array_equal(sums[2 * i], left[p])
        np.testing.assert_array_equal(sums[2 * i + 1], right[p])


# --------------------------------------------------------------------------- GPU: the oracle and CUDA compared
@pytest.mark.gpu
def test_prepare_and_sum_gradients(cb):
    import cupy

    rng = np.random.default_rng(9)
    gpair = random_gpair(rng, 5000)
    fixed, scale = cb.prepare_gradients(cupy.asarray(gpair))
    assert isinstance(scale, np.ndarray) and scale.dtype == np.float64 and scale.shape == (2,)
    fixed_h = to_host(fixed)
    assert fixed_h.dtype == np.int64 and fixed_h.shape == (5000, 2)
    S = np.abs(gpair.astype(np.float64)).sum(axis=0)
    for c in range(2):
        R = scale[c] * 2.0**62
        assert np.frexp(R)[0] == 0.5, f"R = {R} is not a power of two"
        assert R / 2 < S[c] * (1 + 1e-9) and S[c] <= R * (1 + 1e-9), f"R = {R} is not the power of two above S = {S[c]}"
        expected = np.trunc(gpair[:, c].astype(np.float64) / scale[c]).astype(np.int64)
        np.testing.assert_array_equal(fixed_h[:, c], expected)
    np.testing.assert_array_equal(to_host(cb.sum_gradients(fixed)), fixed_h.sum(axis=0))
    for n in (700, 2048, 3000):  # whole rows of the sum's blocks, a tail, or only a tail
        part, _ = cb.prepare_gradients(cupy.asarray(gpair[:n]))
        np.testing.assert_array_equal(to_host(cb.sum_gradients(part)), to_host(part).sum(axis=0))
    # A global abs_sum sets the scale; zero gradients give R = 1.
    _, s2 = cb.prepare_gradients(cupy.asarray(gpair), abs_sum=np.array([1000.0, 2048.0]))
    assert s2[0] == 1024.0 / 2.0**62 and s2[1] == 2048.0 / 2.0**62
    _, s3 = cb.prepare_gradients(cupy.zeros((10, 2), dtype=cupy.float32))
    assert np.all(s3 == 2.0**-62)
    with pytest.raises(ValueError, match="NaN"):
        bad = gpair.copy()
        bad[3, 0] = np.nan
        cb.prepare_gradients(cupy.asarray(bad))
    # Without waiting: the same scale, made on the device; NaN is reported by check_finite.
    fixed_d, scale_d = cb.prepare_gradients(cupy.asarray(gpair), wait=False)
    assert isinstance(scale_d, cupy.ndarray)
    np.testing.assert_array_equal(scale_d.get(), scale)
    np.testing.assert_array_equal(to_host(fixed_d), fixed_h)
    np.testing.assert_array_equal(to_host(cb.sum_gradients(fixed_d)), fixed_h.sum(axis=0))
    fixed_d.check_finite()
    _, s4 = cb.prepare_gradients(cupy.asarray(gpair), abs_sum=cupy.asarray([1000.0, 2048.0]), wait=False)
    np.testing.assert_array_equal(s4.get(), s2)
    _, s5 = cb.prepare_gradients(cupy.zeros((10, 2), dtype=cupy.float32), wait=False)
    np.testing.assert_array_equal(s5.get(), s3)
    nan_fixed, _ = cb.prepare_gradients(cupy.asarray(bad), wait=False)
    with pytest.raises(ValueError, match="NaN"):
        nan_fixed.check_finite()


@pytest.mark.gpu
@pytest.mark.parametrize("budget", ["default", "small", "small_grouped_sparse", "default_slot_loads"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_build_histograms(oracle, cb, layout, budget, monkeypatch):
    import cupy

    from daskgb.histogram import cuda as histogram_cuda

    # Dense rows: read through a window of words per thread (the default) or a load per slot.
    monkeypatch.setattr(histogram_cuda, "HIST_WINDOW", budget != "default_slot_loads")

    # Sparse rows over several groups take one global pass unless told to scan group by group.
    monkeypatch.setattr(histogram_cuda, "SPARSE_ONE_PASS", budget != "small_grouped_sparse")
    if budget.startswith("small"):
        # 40 bins per shared group: several groups, and features with more bins
        # take the global-atomic kernel.
        monkeypatch.setattr(histogram_cuda, "SHARED_BUDGET_BYTES", 40 * 16)
    rng = np.random.default_rng(10 + LAYOUTS.index(layout))
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n_rows=4003, n_features=9, max_bins=90)
    part_n, part_c = grow_partitions(cb, ell_n, ell_c, rng, n_levels=3)
    gpair = random_gpair(rng, ell_n.n_rows)
    fixed, scale = cb.prepare_gradients(cupy.asarray(gpair))
    build = sorted(part_c.segments, key=lambda n: -n)  # any order, empty nodes included
    got = to_host(cb.build_histograms(ell_c, fixed, part_c, build))
    assert got.dtype == np.int64 and got.shape == (len(build), ell_n.cuts.total_bins, 2)
    # Exact: the same quantised gradients summed with integer adds on the host.
    expected_fixed = fixed_histogram(ell_n, to_host(fixed), part_n.positions, build)
    bad = np.argwhere(got != expected_fixed)
    assert bad.size == 0, (f"{len(bad)} fixed-point sums differ; first (slot, bin, column) {tuple(bad[0])}: "
                           f"expected {expected_fixed[tuple(bad[0])]}, got {got[tuple(bad[0])]}")
    # Against the numpy backend's float64 sums: equal up to the quantisation (< scale per row).
    expected = oracle.build_histograms(ell_n, gpair, part_n, build)
    S = np.abs(gpair.astype(np.float64)).sum(axis=0)
    for c in range(2):
        np.testing.assert_allclose(got[..., c] * scale[c], expected[..., c], rtol=1e-12, atol=1e-12 * S[c])
    # The root: every row.
    root = to_host(cb.build_histograms(ell_c, fixed, cb.new_partition(ell_c.n_rows), [0]))
    np.testing.assert_array_equal(root, fixed_histogram(ell_n, to_host(fixed), np.zeros(ell_n.n_rows), [0]))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_children_histograms(oracle, cb, seed):
    """The fused sibling subtraction against the numpy reference, exactly (int64 fixed point);
    parents picked out of order and some twice, either child built."""
    import cupy

    rng = np.random.default_rng(40 + seed)
    n_parents, k, bins = 7, 5, 37
    parents = rng.integers(-2**40, 2**40, (n_parents, bins, 2))
    parent_rows = rng.integers(0, n_parents, k)
    built = rng.integers(-2**40, 2**40, (k, bins, 2))
    build_right = rng.random(k) < 0.5
    left, right = rng.integers(-2**40, 2**40, (n_parents, 2)), rng.integers(-2**40, 2**40, (n_parents, 2))
    want = oracle.children_histograms(parents, parent_rows, built, build_right, left, right)
    got = cb.children_histograms(cupy.asarray(parents), parent_rows, cupy.asarray(built), build_right,
                                 cupy.asarray(left), cupy.asarray(right))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(to_host(g), w)
    # Left child at 2i, right at 2i + 1: the built one as given, the other the parent minus it.
    i = 0
    side = 2 * i + int(build_right[i])
    np.testing.assert_array_equal(want[0][side], built[i])
    np.testing.assert_array_equal(want[0][2 * i + 1 - int(build_right[i])], parents[parent_rows[i]] - built[i])
