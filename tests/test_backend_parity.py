"""Backend parity: numpy_backend (the oracle) and cupy_backend on the same fresh random input.

Tests marked gpu run both backends and compare; they skip where CuPy sees no GPU.
Run them with:  python -m pytest tests/test_backend_parity.py -m gpu -v
The unmarked tests check numpy pieces the parity tests lean on (bit packing and
the sparse feature lookup) and run everywhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from daskgb import ellpack, split
from daskgb.layouts import PREDICT_NODE_DTYPE
from daskgb.arrays import cuda_available, to_host
from daskgb.backend import numpy_backend as nb
from daskgb.ellpack import reference as ref
from daskgb.sketch import Cuts

MISSING_SENTINEL = -999.0


# --------------------------------------------------------------------------- helpers
@pytest.fixture
def cb():
    """The CUDA backend (the gpu marker skips without a GPU; this guards runs without conftest)."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from daskgb.backend import cupy_backend

    return cupy_backend


def make_cuts(rng, n_features: int, max_bins: int) -> Cuts:
    """Random cuts on a half-integer grid; one feature has exactly max_bins bins."""
    n_bins = rng.integers(1, max_bins + 1, n_features)
    n_bins[rng.integers(n_features)] = max_bins
    ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int32)
    values = np.concatenate([np.sort(rng.choice(np.arange(-2 * b, 2 * b + 1), b, replace=False)) * 0.5 for b in n_bins])
    values = values.astype(np.float32)
    return Cuts(ptrs, values, (values[ptrs[:-1]] - 1.0).astype(np.float32))


def make_X(rng, cuts: Cuts, n_rows: int, missing_frac: float = 0.0, sentinel: bool = False):
    """Values on the cuts' grid, so many equal a cut exactly (upper-bound ties) and
    some lie past the last cut (clamping); NaN and the sentinel mark missing."""
    ptrs = np.asarray(cuts.ptrs)
    cols = []
    for f in range(len(ptrs) - 1):
        b = int(ptrs[f + 1] - ptrs[f])
        cols.append(rng.integers(-2 * b - 6, 2 * b + 7, n_rows) * 0.5)
    X = np.stack(cols, axis=1).astype(np.float32)
    if missing_frac:
        X[rng.random(X.shape) < missing_frac] = np.nan
    if sentinel:
        X[rng.random(X.shape) < missing_frac] = MISSING_SENTINEL
    return X


def make_csr(rng, cuts: Cuts, n_rows: int, density: float, sentinel: bool = False):
    """CSR arrays with unsorted column indices, empty rows (the last one included),
    and explicit NaN (and sentinel) values that count as missing."""
    X = make_X(rng, cuts, n_rows)
    present = rng.random(X.shape) < density
    present[rng.integers(n_rows, size=max(1, n_rows // 10))] = False
    present[-1] = False
    indptr, indices, data = [0], [], []
    for r in range(n_rows):
        cols = rng.permutation(np.flatnonzero(present[r]))
        indices.extend(cols.tolist())
        data.extend(X[r, cols].tolist())
        indptr.append(len(indices))
    data = np.asarray(data, dtype=np.float32)
    data[rng.random(data.size) < 0.05] = np.nan
    if sentinel:
        data[rng.random(data.size) < 0.05] = MISSING_SENTINEL
    return np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64), data


def csr_row_stride(indptr, data, missing: float) -> int:
    keep = ~np.isnan(data) if np.isnan(missing) else ~np.isnan(data) & (data != np.float32(missing))
    c = np.concatenate([[0], np.cumsum(keep)])
    return max(1, int((c[indptr[1:]] - c[indptr[:-1]]).max(initial=0)))


def sparse_ellpack(backend, indptr, indices, data, n_rows: int, cuts: Cuts, missing: float):
    """A sparse-layout Ellpack built with backend.pack_csr (ellpack.from_csr's layout)."""
    xp = backend.xp
    row_stride = csr_row_stride(indptr, data, missing)
    null_symbol, bits = ellpack.sparse_layout(cuts)
    words = backend.pack_csr(xp.asarray(indptr), xp.asarray(indices), xp.asarray(data), n_rows, row_stride,
                             cuts.to(xp), missing, null_symbol, bits)
    return ellpack.Ellpack(words, bits, n_rows, row_stride, False, True, null_symbol, cuts.to(xp))


def numpy_ellpack(rng, cuts, layout: str, n_rows: int):
    """A numpy matrix of n_rows random rows in a layout: "dense", "dense_missing" or "sparse"."""
    if layout == "sparse":
        indptr, indices, data = make_csr(rng, cuts, n_rows, 0.6)
        return sparse_ellpack(nb, indptr, indices, data, n_rows, cuts, np.nan)
    return ellpack.from_dense(nb, make_X(rng, cuts, n_rows, 0.1 if layout == "dense_missing" else 0.0), cuts, np.nan)


def both_ellpacks(cb, rng, layout: str, n_rows: int, n_features: int = 7, max_bins: int = 40):
    """The same matrix packed by both backends: (ell_numpy, ell_cupy, X_or_None)."""
    import cupy

    cuts = make_cuts(rng, n_features, max_bins)
    if layout == "sparse":
        indptr, indices, data = make_csr(rng, cuts, n_rows, 0.6)
        return (sparse_ellpack(nb, indptr, indices, data, n_rows, cuts, np.nan),
                sparse_ellpack(cb, indptr, indices, data, n_rows, cuts, np.nan))
    X = make_X(rng, cuts, n_rows, missing_frac=0.1 if layout == "dense_missing" else 0.0)
    ell_n = ellpack.from_dense(nb, X, cuts, np.nan)
    ell_c = ellpack.from_dense(cb, cupy.asarray(X), cuts.to(cupy), np.nan)
    assert ell_n.has_missing == (layout == "dense_missing")
    return ell_n, ell_c


def assert_words_equal(expected, got, bits: int, n_entries: int, row_stride: int):
    """Equal packed words; on a mismatch, name the first entry whose symbol differs."""
    expected, got = to_host(expected), to_host(got)
    assert got.shape == expected.shape, f"word count: expected {expected.shape}, got {got.shape}"
    if np.array_equal(expected, got):
        return
    se = nb.unpack_symbols(expected, bits, n_entries)
    sg = nb.unpack_symbols(got, bits, n_entries)
    bad = np.flatnonzero(se != sg)
    w = np.flatnonzero(expected != got)
    if bad.size:
        i = int(bad[0])
        detail = (f"{bad.size} entries differ; first: entry {i} (row {i // row_stride}, slot {i % row_stride}) "
                  f"expected symbol {se[i]}, got {sg[i]}")
    else:
        detail = "all symbols equal: only padding bits differ"
    pytest.fail(f"{w.size} of {expected.size} words differ (first word {w[0]}); {detail}")


def random_level(rng, cuts: Cuts, leaves: list[int], next_id: int, frac: float = 1.0):
    """Random splits of a random subset of leaves (bins from -1, only missing goes left,
    to the feature's last bin, everything present goes left)."""
    ptrs = np.asarray(cuts.ptrs)
    nids = [n for n in leaves if rng.random() < frac] or leaves[:1]
    k = len(nids)
    features = rng.integers(0, len(ptrs) - 1, k)
    n_bins = ptrs[features + 1] - ptrs[features]
    bins = np.array([rng.integers(-1, nb_) for nb_ in n_bins], dtype=np.int32)
    default_left = rng.integers(0, 2, k).astype(np.int32)
    left_ids = np.arange(next_id, next_id + 2 * k, 2, dtype=np.int32)
    right_ids = left_ids + 1
    return (np.asarray(nids, dtype=np.int32), features.astype(np.int32), bins, default_left, left_ids, right_ids)


def grow_partitions(cb, ell_n, ell_c, rng, n_levels: int = 3):
    """Apply the same random levels of splits on both backends; check positions after each.

    The first level sends every row of the root left (an empty right child), so
    later levels split a node that has no rows.
    """
    part_n, part_c = nb.new_partition(ell_n.n_rows), cb.new_partition(ell_c.n_rows)
    ptrs = np.asarray(ell_n.cuts.ptrs)
    leaves, next_id = [0], 1
    for level in range(n_levels):
        if level == 0:
            f = 0
            args = (np.array([0], np.int32), np.array([f], np.int32), np.array([ptrs[f + 1] - ptrs[f] - 1], np.int32),
                    np.array([1], np.int32), np.array([1], np.int32), np.array([2], np.int32))
        else:
            args = random_level(rng, ell_n.cuts, leaves, next_id, frac=1.0 if level == 1 else 0.8)
        nb.apply_splits(ell_n, part_n, *args)
        cb.apply_splits(ell_c, part_c, *args)
        got = to_host(part_c.positions)
        bad = np.flatnonzero(got != part_n.positions)
        assert bad.size == 0, (f"level {level}: {bad.size} rows in different nodes; first row {bad[0]}: "
                               f"numpy node {part_n.positions[bad[0]]}, cuda node {got[bad[0]]}; splits {args}")
        check_segments(part_c)
        split_nodes = set(args[0].tolist())
        leaves = [n for n in leaves if n not in split_nodes] + [int(x) for p in zip(args[4], args[5]) for x in p]
        next_id = int(args[5].max()) + 1
    return part_n, part_c


def check_segments(part_c):
    """Each segment holds exactly its node's rows, in increasing order, and the segments tile ridx."""
    pos, ridx = to_host(part_c.positions), to_host(part_c.ridx)
    covered = 0
    for node, (start, count) in sorted(part_c.segments.items(), key=lambda kv: kv[1]):
        assert start == covered, f"segments do not tile ridx: node {node} starts at {start}, expected {covered}"
        expected = np.flatnonzero(pos == node)
        got = ridx[start : start + count]
        assert np.array_equal(got, expected), (f"node {node}: segment ({start}, {count}) holds rows {got[:10]}..., "
                                                f"positions say {expected[:10]}... ({expected.size} rows)")
        covered += count
    assert covered == pos.size, f"segments cover {covered} of {pos.size} rows"


def random_gpair(rng, n_rows: int):
    g = rng.normal(size=n_rows)
    g[rng.random(n_rows) < 0.05] = 0.0
    return np.stack([g, rng.uniform(0.1, 1.0, n_rows)], axis=1).astype(np.float32)


def fixed_histogram(ell_n, fixed, positions, build_nodes):
    """The int64 histogram, added row by row with np.add.at: what the kernel must equal exactly.

    positions may cover a forest's virtual rows (a multiple of the matrix's rows): virtual row
    v reads matrix row v % n_rows and gradient pair v."""
    sym = ref.symbols(ell_n).astype(np.int64)
    total_bins = int(ell_n.cuts.total_bins)
    hist = np.zeros((len(build_nodes), total_bins, 2), dtype=np.int64)
    for s, node in enumerate(build_nodes):
        rows = np.flatnonzero(positions == node)
        rs = sym[rows % ell_n.n_rows]
        present = rs != ell_n.null_symbol
        gbin = rs + np.asarray(ell_n.cuts.ptrs[:-1], dtype=np.int64)[None, :] if ell_n.is_dense else rs
        for c in range(2):
            v = np.broadcast_to(fixed[rows, c : c + 1], rs.shape)
            np.add.at(hist[s, :, c], gbin[present], v[present])
    return hist


# --------------------------------------------------------------------------- CPU: numpy pieces
def _reference_pack(symbols, bits: int) -> np.ndarray:
    """Bit packing with one Python integer as the bit stream: obviously right, slow."""
    stream = 0
    for i, s in enumerate(symbols.tolist()):
        stream |= int(s) << (i * bits)
    n = ellpack.n_words(len(symbols), bits)
    return np.array([(stream >> (32 * w)) & 0xFFFFFFFF for w in range(n)], dtype=np.uint32)


@pytest.mark.parametrize("bits", [1, 2, 3, 5, 7, 8, 9, 12, 13, 16, 17, 31, 32])
def test_pack_unpack_round_trip(bits, monkeypatch):
    rng = np.random.default_rng(bits)
    # Chunks of 64 entries: 301 entries cross several chunk boundaries and end mid-chunk.
    monkeypatch.setattr(ref, "_PACK_CHUNK_ENTRIES", 64)
    symbols = rng.integers(0, 2**bits, 301, dtype=np.uint64).astype(np.uint32)
    symbols[:3] = 2**bits - 1  # all ones: catches a mask one bit short
    words = nb.pack_symbols(symbols, bits)
    np.testing.assert_array_equal(words, _reference_pack(symbols, bits))
    np.testing.assert_array_equal(nb.unpack_symbols(words, bits, symbols.size), symbols)
    for start in (0, 1, 31, 63, 64, 65, 200):
        np.testing.assert_array_equal(nb.unpack_symbols(words, bits, 301 - start, start=start), symbols[start:])


@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL])
def test_feature_bins_sparse_layout(missing):
    rng = np.random.default_rng(7)
    cuts = make_cuts(rng, 9, 30)
    n_rows = 120
    indptr, indices, data = make_csr(rng, cuts, n_rows, 0.4, sentinel=not np.isnan(missing))
    ell = sparse_ellpack(nb, indptr, indices, data, n_rows, cuts, missing)
    # The same matrix densified (absent = NaN), binned feature by feature.
    dense = np.full((n_rows, cuts.n_features), np.nan, dtype=np.float32)
    for r in range(n_rows):
        dense[r, indices[indptr[r] : indptr[r + 1]]] = data[indptr[r] : indptr[r + 1]]
    bins = ref.bin_dense(dense, cuts, missing, null_symbol=10**6).astype(np.int64)
    expected = np.where(bins == 10**6, -1, bins)
    rows = np.repeat(np.arange(n_rows), cuts.n_features)
    features = np.tile(np.arange(cuts.n_features), n_rows)
    got = ref.feature_bins(ell, rows, features)
    np.testing.assert_array_equal(got.reshape(n_rows, -1), expected)
    assert (expected == -1).any() and (expected >= 0).any()


def test_feature_bins_dense_layout_matches_bin_dense():
    rng = np.random.default_rng(8)
    cuts = make_cuts(rng, 5, 20)
    X = make_X(rng, cuts, 50, missing_frac=0.2)
    ell = ellpack.from_dense(nb, X, cuts, np.nan)
    bins = ref.bin_dense(X, cuts, np.nan, ell.null_symbol).astype(np.int64)
    rows = np.repeat(np.arange(50), 5)
    features = np.tile(np.arange(5), 50)
    got = ref.feature_bins(ell, rows, features).reshape(50, 5)
    np.testing.assert_array_equal(got, np.where(bins == ell.null_symbol, -1, bins))


# --------------------------------------------------------------------------- GPU: parity
@pytest.mark.gpu
@pytest.mark.parametrize("has_missing", [False, True])
@pytest.mark.parametrize("bits", [1, 3, 5, 8, 9, 12])
def test_pack_dense(cb, bits, has_missing):
    import cupy

    rng = np.random.default_rng(100 * bits + has_missing)
    # n_symbols = max_bins (+1 for the null symbol) must need exactly `bits` bits.
    max_bins = 2**bits - 1 if has_missing else 2**bits
    cuts = make_cuts(rng, 5, max_bins)
    X = make_X(rng, cuts, 997, missing_frac=0.1 if has_missing else 0.0)
    null_symbol, b = ellpack.dense_layout(cuts, has_missing)
    assert b == bits
    assert cb.count_missing(cupy.asarray(X), np.nan) == nb.count_missing(X, np.nan)
    expected = nb.pack_dense(X, cuts, np.nan, null_symbol, bits)
    got = cb.pack_dense(cupy.asarray(X), cuts.to(cupy), np.nan, null_symbol, bits)
    assert_words_equal(expected, got, bits, X.size, X.shape[1])


@pytest.mark.gpu
def test_pack_dense_sentinel_missing(cb):
    import cupy

    rng = np.random.default_rng(3)
    cuts = make_cuts(rng, 6, 50)
    X = make_X(rng, cuts, 513, missing_frac=0.1, sentinel=True)
    assert cb.count_missing(cupy.asarray(X), MISSING_SENTINEL) == nb.count_missing(X, MISSING_SENTINEL)
    null_symbol, bits = ellpack.dense_layout(cuts, True)
    expected = nb.pack_dense(X, cuts, MISSING_SENTINEL, null_symbol, bits)
    got = cb.pack_dense(cupy.asarray(X), cuts.to(cupy), MISSING_SENTINEL, null_symbol, bits)
    assert_words_equal(expected, got, bits, X.size, X.shape[1])


@pytest.mark.gpu
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL])
@pytest.mark.parametrize("max_bins", [3, 64, 700])
def test_pack_csr(cb, max_bins, missing):
    import cupy

    rng = np.random.default_rng(max_bins)
    cuts = make_cuts(rng, 11, max_bins)
    n_rows = 601
    indptr, indices, data = make_csr(rng, cuts, n_rows, 0.35, sentinel=not np.isnan(missing))
    row_stride = csr_row_stride(indptr, data, missing)
    null_symbol, bits = ellpack.sparse_layout(cuts)
    expected = nb.pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits)
    got = cb.pack_csr(cupy.asarray(indptr), cupy.asarray(indices), cupy.asarray(data), n_rows, row_stride,
                      cuts.to(cupy), missing, null_symbol, bits)
    assert_words_equal(expected, got, bits, n_rows * row_stride, row_stride)


def mostly_missing(rng, cuts, n_rows, sentinel=False):
    """Dense values, ~90% missing in blocks of features: the sparse layout is the smaller one."""
    X = make_X(rng, cuts, n_rows)
    blocks = np.arange(X.shape[1]) // 4
    visit = rng.random((n_rows, blocks.max() + 1)) < 0.1
    X[~visit[:, blocks]] = MISSING_SENTINEL if sentinel else np.nan
    return X


@pytest.mark.parametrize("sentinel", [False, True])
def test_dense_mostly_missing_takes_the_sparse_layout(sentinel):
    """from_dense packs mostly-missing rows as from_csr packs the same entries."""
    import scipy.sparse as sp

    rng = np.random.default_rng(31)
    cuts = make_cuts(rng, 120, 30)
    X = mostly_missing(rng, cuts, 700, sentinel)
    missing = MISSING_SENTINEL if sentinel else np.nan
    ell = ellpack.from_dense(nb, X, cuts, missing)
    assert not ell.is_dense
    present = ~(np.isnan(X) | (X == np.float32(missing)))
    csr = sp.csr_matrix((X[present], np.nonzero(present)[1], np.concatenate([[0], np.cumsum(present.sum(1))])),
                        shape=X.shape)
    ref = ellpack.from_csr(nb, csr.indptr, csr.indices, csr.data, X.shape[0], cuts, missing)
    assert (ell.row_stride, ell.bits, ell.null_symbol) == (ref.row_stride, ref.bits, ref.null_symbol)
    np.testing.assert_array_equal(ell.words, ref.words)
    # Few missing values: the dense layout stays the smaller.
    assert ellpack.from_dense(nb, make_X(rng, cuts, 300, missing_frac=0.1), cuts, np.nan).is_dense


@pytest.mark.gpu
@pytest.mark.parametrize("sentinel", [False, True])
def test_pack_dense_sparse(cb, sentinel):
    import cupy

    rng = np.random.default_rng(32)
    cuts = make_cuts(rng, 150, 50)  # several warps' worth of features per row
    X = mostly_missing(rng, cuts, 3001, sentinel)
    missing = MISSING_SENTINEL if sentinel else np.nan
    want = ellpack.from_dense(nb, X, cuts, missing)
    got = ellpack.from_dense(cb, cupy.asarray(X), cuts.to(cupy), missing)
    assert not got.is_dense and got.row_stride == want.row_stride and got.bits == want.bits
    np.testing.assert_array_equal(to_host(got.words), want.words)


@pytest.mark.gpu
def test_unpack_symbols(cb):
    import cupy

    rng = np.random.default_rng(5)
    for bits in (1, 5, 12, 32):
        symbols = rng.integers(0, 2**bits, 1000, dtype=np.uint64).astype(np.uint32)
        words = nb.pack_symbols(symbols, bits)
        got = cb.unpack_symbols(cupy.asarray(words), bits, 900, start=77)
        np.testing.assert_array_equal(to_host(got), symbols[77:977], err_msg=f"bits={bits}")


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
@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_apply_splits(cb, layout):
    rng = np.random.default_rng(["dense", "dense_missing", "sparse"].index(layout))
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n_rows=3001)
    grow_partitions(cb, ell_n, ell_c, rng, n_levels=4)


@pytest.mark.gpu
@pytest.mark.parametrize("budget", ["default", "small", "small_grouped_sparse", "default_slot_loads"])
@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_build_histograms(cb, layout, budget, monkeypatch):
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
    rng = np.random.default_rng(10 + ["dense", "dense_missing", "sparse"].index(layout))
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
    expected = nb.build_histograms(ell_n, gpair, part_n, build)
    S = np.abs(gpair.astype(np.float64)).sum(axis=0)
    for c in range(2):
        np.testing.assert_allclose(got[..., c] * scale[c], expected[..., c], rtol=1e-12, atol=1e-12 * S[c])
    # The root: every row.
    root = to_host(cb.build_histograms(ell_c, fixed, cb.new_partition(ell_c.n_rows), [0]))
    np.testing.assert_array_equal(root, fixed_histogram(ell_n, to_host(fixed), np.zeros(ell_n.n_rows), [0]))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_children_histograms(cb, seed):
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
    want = nb.children_histograms(parents, parent_rows, built, build_right, left, right)
    got = cb.children_histograms(cupy.asarray(parents), parent_rows, cupy.asarray(built), build_right,
                                 cupy.asarray(left), cupy.asarray(right))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(to_host(g), w)
    # Left child at 2i, right at 2i + 1: the built one as given, the other the parent minus it.
    i = 0
    side = 2 * i + int(build_right[i])
    np.testing.assert_array_equal(want[0][side], built[i])
    np.testing.assert_array_equal(want[0][2 * i + 1 - int(build_right[i])], parents[parent_rows[i]] - built[i])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "params",
    [
        split.SplitParams(),
        split.SplitParams(reg_lambda=0.5, reg_alpha=0.3, min_child_weight=5.0),
        split.SplitParams(max_delta_step=0.7, min_child_weight=0.0),
    ],
    ids=["default", "alpha_mcw", "max_delta_step"],
)
@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
@pytest.mark.parametrize("use_kernel", [True, False], ids=["split_kernel", "array_ops"])
@pytest.mark.parametrize("n_features", [8, 45], ids=["one_block_per_node", "blocks_share_nodes"])
def test_evaluate_splits(cb, layout, params, use_kernel, n_features, settings):
    import cupy

    settings({"training.split-kernel": use_kernel})
    rng = np.random.default_rng(20 + ["dense", "dense_missing", "sparse"].index(layout) + n_features)
    # 45 features: the kernel splits a node's features among several blocks (cupy_backend n_chunks).
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n_rows=2000, n_features=n_features, max_bins=30)
    part_n, part_c = grow_partitions(cb, ell_n, ell_c, rng, n_levels=3)
    gpair = random_gpair(rng, ell_n.n_rows)
    fixed, scale = cb.prepare_gradients(cupy.asarray(gpair))
    nodes = sorted(part_c.segments)
    hist = cb.build_histograms(ell_c, fixed, part_c, nodes)
    fixed_h = to_host(fixed)
    parent = np.stack([fixed_h[part_n.positions == n].sum(axis=0) for n in nodes]).astype(np.int64)
    cuts = ell_n.cuts
    per_node = rng.random((len(nodes), cuts.n_features)) < 0.5  # column sampling / interaction constraints
    per_node[0] = False  # a node that may split on nothing
    per_node[1] = True
    masks = [None, rng.random(cuts.n_features) < 0.6, per_node]
    for mask in masks:
        rec_e, left_e, right_e = split.evaluate_splits(np, to_host(hist), parent, scale, cuts.ptrs, cuts.values,
                                                       cuts.min_values, params, mask)
        rec_g, left_g, right_g = cb.evaluate_splits(ell_c.cuts, hist, cupy.asarray(parent), scale, params,
                                                    None if mask is None else cupy.asarray(mask))
        for field in rec_e.dtype.names:
            if field == "_pad":
                continue
            bad = np.flatnonzero(~((rec_e[field] == rec_g[field]) | (np.isnan(rec_e[field]) & np.isnan(rec_g[field]))))
            assert bad.size == 0, (f"mask shape={getattr(mask, 'shape', None)}: field {field} differs for nodes {bad[:5]}: "
                                   f"expected {rec_e[field][bad[:5]]}, got {rec_g[field][bad[:5]]}")
        np.testing.assert_array_equal(to_host(left_g), left_e)
        np.testing.assert_array_equal(to_host(right_g), right_e)
        assert (rec_e["feature"] >= 0).any(), "no node found a split: the test data is too easy"


@pytest.mark.gpu
@pytest.mark.parametrize("use_kernel", [True, False], ids=["split_kernel", "array_ops"])
def test_evaluate_splits_ties_and_no_split(cb, use_kernel, settings):
    """Hand-made histograms: exact ties (empty bins, a duplicated feature), a node
    with nothing, a node with only missing values, a node too light to split."""
    import cupy

    settings({"training.split-kernel": use_kernel})
    rng = np.random.default_rng(40)
    n_features, n_bins, k = 5, 12, 6
    ptrs = np.arange(0, n_features * n_bins + 1, n_bins, dtype=np.int32)
    values = np.concatenate([np.sort(rng.choice(100, n_bins, replace=False)) for _ in range(n_features)])
    cuts = Cuts(ptrs, values.astype(np.float32), (values[ptrs[:-1]] - 1).astype(np.float32))
    scale = np.array([2.0**-40, 2.0**-40])
    hist = np.zeros((k, ptrs[-1], 2), dtype=np.int64)
    g = rng.integers(-(2**43), 2**43, (k, ptrs[-1]))
    h = rng.integers(1, 2**43, (k, ptrs[-1]))
    empty = rng.random((k, ptrs[-1])) < 0.5  # empty bins: neighbouring candidates tie exactly
    hist[..., 0], hist[..., 1] = np.where(empty, 0, g), np.where(empty, 0, h)
    hist[:, 3 * n_bins : 4 * n_bins] = hist[:, 1 * n_bins : 2 * n_bins]  # feature 3 ties feature 1
    hist[1] = 0  # nothing at all
    hist[2] = 0  # only missing values (parent below is not zero)
    hist[3] //= 2**16  # hessians far below min_child_weight
    parent = hist[:, :n_bins].sum(axis=1)
    parent[2] = [2**42, 2**43]
    parent[4] += [2**41, 2**42]  # missing values on every feature
    for params in (split.SplitParams(), split.SplitParams(reg_alpha=2.0, max_delta_step=0.5)):
        rec_e, left_e, right_e = split.evaluate_splits(np, hist, parent, scale, cuts.ptrs, cuts.values,
                                                       cuts.min_values, params)
        rec_g, left_g, right_g = cb.evaluate_splits(cuts.to(cupy), cupy.asarray(hist), cupy.asarray(parent),
                                                    scale, params)
        for field in rec_e.dtype.names:
            np.testing.assert_array_equal(rec_g[field], rec_e[field], err_msg=f"{params}: field {field}")
        np.testing.assert_array_equal(to_host(left_g), left_e)
        np.testing.assert_array_equal(to_host(right_g), right_e)
        assert rec_e["feature"][1] == -1 and rec_e["feature"][3] == -1


def random_trees(rng, n_trees: int, n_features: int, max_depth: int):
    """PREDICT_NODE_DTYPE records of random trees (node 0 the root), and each tree's offset."""
    trees = []
    for _ in range(n_trees):
        rows = {}
        todo = [(0, 0)]
        n_nodes = 1
        while todo:
            nid, depth = todo.pop()
            if depth < max_depth and (depth == 0 or rng.random() < 0.75):
                left, right = n_nodes, n_nodes + 1
                n_nodes += 2
                rows[nid] = (left, right, rng.integers(n_features), rng.integers(2), rng.integers(-20, 21) * 0.5, 0.0)
                todo += [(left, depth + 1), (right, depth + 1)]
            else:
                rows[nid] = (-1, -1, 0, 0, 0.0, rng.normal() * 0.3)
        trees.append(np.array([rows[i] for i in range(n_nodes)], dtype=PREDICT_NODE_DTYPE))
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in trees])]).astype(np.int32)
    return np.concatenate(trees), offsets


@pytest.mark.gpu
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL])
def test_predict_margin(cb, missing):
    import cupy

    rng = np.random.default_rng(30)
    n_rows, n_features = 2500, 6
    X = (rng.integers(-22, 23, (n_rows, n_features)) * 0.5).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    if not np.isnan(missing):
        X[rng.random(X.shape) < 0.1] = missing
    nodes, offsets = random_trees(rng, 9, n_features, 6)
    base = rng.normal(size=n_rows).astype(np.float32)
    expected = nb.predict_margin(X, nodes, offsets, base.copy(), missing)
    out = cupy.asarray(base)
    result = cb.predict_margin(cupy.asarray(X), nodes, offsets, out, missing)
    assert result is out
    got = to_host(out)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- binned routing, row gathering
def random_binned_tree(rng, cuts: Cuts, max_depth: int):
    """A Tree of random splits on the cuts' bins (bins from -1: only missing goes left, to
    the feature's last bin: all present go left)."""
    from daskgb.tree import FIELDS, Tree

    ptrs = np.asarray(cuts.ptrs)
    nodes, todo = {}, [(0, 0)]
    n_nodes = 1
    while todo:
        nid, depth = todo.pop()
        if depth < max_depth and (depth == 0 or rng.random() < 0.75):
            f = int(rng.integers(len(ptrs) - 1))
            nodes[nid] = (n_nodes, n_nodes + 1, f, int(rng.integers(-1, ptrs[f + 1] - ptrs[f])), int(rng.integers(2)),
                          0.0, depth)
            todo += [(n_nodes, depth + 1), (n_nodes + 1, depth + 1)]
            n_nodes += 2
        else:
            nodes[nid] = (-1, -1, -1, -1, 0, float(rng.normal()), depth)
    cols = list(zip(*(nodes[i] for i in range(n_nodes))))
    given = dict(zip(("left", "right", "feature", "bin", "default_left", "value", "depth"), cols))
    return Tree(**{name: np.asarray(given.get(name, np.zeros(n_nodes)), dtype=dtype) for name, dtype in FIELDS.items()})


def route_by_partition(ell, tree):
    """Every row's leaf, routed a level at a time by numpy_backend.apply_splits (training's
    partition): the reference for add_leaf_values."""
    part = nb.new_partition(ell.n_rows)
    internal = np.flatnonzero(~tree.is_leaf)
    for depth in range(int(tree.depth.max()) + 1):
        nids = internal[tree.depth[internal] == depth]
        if nids.size:
            nb.apply_splits(ell, part, nids.astype(np.int32), tree.feature[nids], tree.bin[nids],
                            tree.default_left[nids].astype(np.int32), tree.left[nids], tree.right[nids])
    return part.positions


@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_add_leaf_values_routes_rows_as_training_partitions_them(layout):
    rng = np.random.default_rng(41)
    cuts = make_cuts(rng, 7, 40)
    if layout == "sparse":
        indptr, indices, data = make_csr(rng, cuts, 900, 0.6)
        ell = sparse_ellpack(nb, indptr, indices, data, 900, cuts, np.nan)
    else:
        X = make_X(rng, cuts, 900, missing_frac=0.1 if layout == "dense_missing" else 0.0)
        ell = ellpack.from_dense(nb, X, cuts, np.nan)
    for _ in range(3):
        tree = random_binned_tree(rng, cuts, 6)
        base = rng.normal(size=ell.n_rows).astype(np.float32)
        margin = base.copy()
        nb.add_leaf_values(ell, tree, margin)
        np.testing.assert_array_equal(margin, base + tree.value[route_by_partition(ell, tree)])


@pytest.mark.parametrize("bits", [1, 3, 5, 8, 9, 13, 32])
def test_gather_rows_packs_the_rows_at_their_offsets(bits):
    """Pieces of rows gathered one after another into one stream, at offsets that start
    mid-word, give the stream packing all the rows' symbols at once would."""
    rng = np.random.default_rng(bits)
    stride, n = 3, 500
    symbols = rng.integers(0, 2**bits, (n, stride), dtype=np.uint64).astype(np.uint32)
    src = ellpack.Ellpack(nb.pack_symbols(symbols.ravel(), bits), bits, n, stride, True, False, 2**bits - 1, None)
    pieces = [np.sort(rng.choice(n, size, replace=False)) for size in (0, 37, 1, 200)]
    out = np.zeros(ellpack.n_words(sum(p.size for p in pieces) * stride, bits), dtype=np.uint32)
    offset = 0
    for rows in pieces:
        nb.gather_rows(src, rows, out, offset * stride)
        offset += rows.size
    expected = nb.pack_symbols(symbols[np.concatenate(pieces)].ravel(), bits)
    assert_words_equal(expected, out, bits, offset * stride, stride)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_add_leaf_values(cb, layout):
    import cupy

    rng = np.random.default_rng(43)
    ell_n, ell_c = both_ellpacks(cb, rng, layout, 3000)
    for _ in range(3):
        tree = random_binned_tree(rng, ell_n.cuts, 7)
        # A margin column of a two-output matrix: the kernel adds with a stride.
        base = rng.normal(size=(ell_n.n_rows, 2)).astype(np.float32)
        expected = base.copy()
        nb.add_leaf_values(ell_n, tree, expected[:, 1])
        got = cupy.asarray(base)
        cb.add_leaf_values(ell_c, tree, got[:, 1])
        np.testing.assert_array_equal(to_host(got), expected)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_gather_rows(cb, layout):
    import cupy

    rng = np.random.default_rng(47)
    ell_n, ell_c = both_ellpacks(cb, rng, layout, 4000)
    pieces = [np.sort(rng.choice(ell_n.n_rows, size, replace=False)) for size in (1, 999, 0, 2500, 7)]
    total = sum(p.size for p in pieces) * ell_n.row_stride
    out_n = np.zeros(ellpack.n_words(total, ell_n.bits), dtype=np.uint32)
    out_c = cupy.zeros(out_n.size, dtype=cupy.uint32)
    offset = 0
    for rows in pieces:
        nb.gather_rows(ell_n, rows, out_n, offset * ell_n.row_stride)
        cb.gather_rows(ell_c, cupy.asarray(rows), out_c, offset * ell_n.row_stride)
        offset += rows.size
    assert_words_equal(out_n, out_c, ell_n.bits, total, ell_n.row_stride)
