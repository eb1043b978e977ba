"""The ELLPACK stage (daskgb/ellpack/): values quantised to their bins, bit-packed, read back, gathered.

Tests taking `backend` check a backend against an independent expectation (bins found by
hand, a bit stream built in one Python integer, a round trip) and run on every backend;
tests taking `cb` (marked gpu) pack the same input with the oracle and the CUDA backend and
compare the words. The reference's own readers (feature_bins) are checked on their own.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import (MISSING_SENTINEL, LAYOUTS, assert_words_equal, bins_by_hand, both_ellpacks, csr_row_stride,
                      csr_to_dense, make_csr, make_cuts, make_X, mostly_missing, reference_pack, sparse_ellpack)
from daskgb import ellpack
from daskgb.arrays import to_host
from daskgb.ellpack import reference as ref


# --------------------------------------------------------------------------- every backend
@pytest.mark.parametrize("bits", [1, 2, 3, 5, 7, 8, 9, 12, 13, 16, 17, 31, 32])
def test_pack_unpack_round_trip(backend, xp, bits, monkeypatch):
    rng = np.random.default_rng(bits)
    # Chunks of 64 entries: 301 entries cross several chunk boundaries and end mid-chunk (numpy).
    monkeypatch.setattr(ref, "_PACK_CHUNK_ENTRIES", 64)
    symbols = rng.integers(0, 2**bits, 301, dtype=np.uint64).astype(np.uint32)
    symbols[:3] = 2**bits - 1  # all ones: catches a mask one bit short
    words = backend.pack_symbols(xp.asarray(symbols), bits)
    np.testing.assert_array_equal(to_host(words), reference_pack(symbols, bits))
    np.testing.assert_array_equal(to_host(backend.unpack_symbols(words, bits, symbols.size)), symbols)
    for start in (0, 1, 31, 63, 64, 65, 200):
        np.testing.assert_array_equal(to_host(backend.unpack_symbols(words, bits, 301 - start, start=start)),
                                      symbols[start:])


def test_unpack_symbols(backend, xp, oracle):
    """Symbols read from the middle of a stream the oracle packed."""
    rng = np.random.default_rng(5)
    for bits in (1, 5, 12, 32):
        symbols = rng.integers(0, 2**bits, 1000, dtype=np.uint64).astype(np.uint32)
        words = oracle.pack_symbols(symbols, bits)
        got = backend.unpack_symbols(xp.asarray(words), bits, 900, start=77)
        np.testing.assert_array_equal(to_host(got), symbols[77:977], err_msg=f"bits={bits}")


@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL], ids=["nan", "sentinel"])
@pytest.mark.parametrize("source", ["dense", "dense_missing", "mostly_missing", "csr"])
def test_packed_symbols_are_the_bins_by_hand(backend, xp, source, missing):
    """from_dense and from_csr, in whatever layout they choose, pack each value's bin (the
    first cut above it, the last bin past the last cut): dense layout, slot f holds feature
    f's bin or the null symbol; sparse layout, a row's present global bins in feature order,
    then null symbols."""
    rng = np.random.default_rng(61 + ["dense", "dense_missing", "mostly_missing", "csr"].index(source))
    sentinel = not np.isnan(missing)
    n_rows = 300
    cuts = make_cuts(rng, 120 if source == "mostly_missing" else 9, 30)
    if source == "csr":
        indptr, indices, data = make_csr(rng, cuts, n_rows, 0.4, sentinel=sentinel)
        X = csr_to_dense(indptr, indices, data, n_rows, cuts.n_features)
        ell = ellpack.from_csr(backend, xp.asarray(indptr), xp.asarray(indices), xp.asarray(data), n_rows,
                               cuts.to(xp), missing)
    else:
        if source == "mostly_missing":
            X = mostly_missing(rng, cuts, n_rows, sentinel)
        else:
            X = make_X(rng, cuts, n_rows, missing_frac=0.1 if source == "dense_missing" else 0.0,
                       sentinel=sentinel and source == "dense_missing")
        ell = ellpack.from_dense(backend, xp.asarray(X), cuts.to(xp), missing)
    assert ell.is_dense == (source in ("dense", "dense_missing"))
    bins = bins_by_hand(X, cuts, missing)
    assert ell.has_missing == (source != "dense") and (bins >= 0).any()
    got = to_host(backend.unpack_symbols(ell.words, ell.bits, ell.n_rows * ell.row_stride))
    got = got.reshape(ell.n_rows, ell.row_stride)
    if ell.is_dense:
        expected = np.where(bins < 0, ell.null_symbol, bins)
    else:
        present = bins >= 0
        assert ell.row_stride == max(1, int(present.sum(axis=1).max()))
        gbin = bins + np.asarray(cuts.ptrs[:-1], dtype=np.int64)[None, :]
        expected = np.full((n_rows, ell.row_stride), ell.null_symbol, dtype=np.int64)
        for r in range(n_rows):
            row = gbin[r, present[r]]
            expected[r, : row.size] = row
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("sentinel", [False, True])
def test_dense_mostly_missing_takes_the_sparse_layout(backend, xp, sentinel):
    """from_dense packs mostly-missing rows as from_csr packs the same entries."""
    import scipy.sparse as sp

    rng = np.random.default_rng(31)
    cuts = make_cuts(rng, 120, 30)
    X = mostly_missing(rng, cuts, 700, sentinel)
    missing = MISSING_SENTINEL if sentinel else np.nan
    ell = ellpack.from_dense(backend, xp.asarray(X), cuts.to(xp), missing)
    assert not ell.is_dense
    present = ~(np.isnan(X) | (X == np.float32(missing)))
    csr = sp.csr_matrix((X[present], np.nonzero(present)[1], np.concatenate([[0], np.cumsum(present.sum(1))])),
                        shape=X.shape)
    from_csr = ellpack.from_csr(backend, xp.asarray(csr.indptr), xp.asarray(csr.indices), xp.asarray(csr.data),
                                X.shape[0], cuts.to(xp), missing)
    assert (ell.row_stride, ell.bits, ell.null_symbol) == (from_csr.row_stride, from_csr.bits, from_csr.null_symbol)
    np.testing.assert_array_equal(to_host(ell.words), to_host(from_csr.words))
    # Few missing values: the dense layout stays the smaller.
    assert ellpack.from_dense(backend, xp.asarray(make_X(rng, cuts, 300, missing_frac=0.1)), cuts.to(xp),
                              np.nan).is_dense


@pytest.mark.parametrize("bits", [1, 3, 5, 8, 9, 13, 32])
def test_gather_rows_packs_the_rows_at_their_offsets(backend, xp, oracle, bits):
    """Pieces of rows gathered one after another into one stream, at offsets that start
    mid-word, give the stream packing all the rows' symbols at once would."""
    rng = np.random.default_rng(bits)
    stride, n = 3, 500
    symbols = rng.integers(0, 2**bits, (n, stride), dtype=np.uint64).astype(np.uint32)
    src = ellpack.Ellpack(backend.pack_symbols(xp.asarray(symbols.ravel()), bits), bits, n, stride, True, False,
                          2**bits - 1, None)
    pieces = [np.sort(rng.choice(n, size, replace=False)) for size in (0, 37, 1, 200)]
    out = xp.zeros(ellpack.n_words(sum(p.size for p in pieces) * stride, bits), dtype=np.uint32)
    offset = 0
    for rows in pieces:
        backend.gather_rows(src, xp.asarray(rows), out, offset * stride)
        offset += rows.size
    expected = oracle.pack_symbols(symbols[np.concatenate(pieces)].ravel(), bits)
    assert_words_equal(expected, out, bits, offset * stride, stride)


# --------------------------------------------------------------------------- the reference's readers
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL])
def test_feature_bins_sparse_layout(oracle, missing):
    rng = np.random.default_rng(7)
    cuts = make_cuts(rng, 9, 30)
    n_rows = 120
    indptr, indices, data = make_csr(rng, cuts, n_rows, 0.4, sentinel=not np.isnan(missing))
    ell = sparse_ellpack(oracle, indptr, indices, data, n_rows, cuts, missing)
    # The same matrix densified (absent = NaN), binned feature by feature.
    dense = csr_to_dense(indptr, indices, data, n_rows, cuts.n_features)
    bins = ref.bin_dense(dense, cuts, missing, null_symbol=10**6).astype(np.int64)
    expected = np.where(bins == 10**6, -1, bins)
    rows = np.repeat(np.arange(n_rows), cuts.n_features)
    features = np.tile(np.arange(cuts.n_features), n_rows)
    got = ref.feature_bins(ell, rows, features)
    np.testing.assert_array_equal(got.reshape(n_rows, -1), expected)
    assert (expected == -1).any() and (expected >= 0).any()


def test_feature_bins_dense_layout_matches_bin_dense(oracle):
    rng = np.random.default_rng(8)
    cuts = make_cuts(rng, 5, 20)
    X = make_X(rng, cuts, 50, missing_frac=0.2)
    ell = ellpack.from_dense(oracle, X, cuts, np.nan)
    bins = ref.bin_dense(X, cuts, np.nan, ell.null_symbol).astype(np.int64)
    rows = np.repeat(np.arange(50), 5)
    features = np.tile(np.arange(5), 50)
    got = ref.feature_bins(ell, rows, features).reshape(50, 5)
    np.testing.assert_array_equal(got, np.where(bins == ell.null_symbol, -1, bins))


# --------------------------------------------------------------------------- GPU: the oracle and CUDA compared
@pytest.mark.gpu
@pytest.mark.parametrize("has_missing", [False, True])
@pytest.mark.parametrize("bits", [1, 3, 5, 8, 9, 12])
def test_pack_dense(oracle, cb, bits, has_missing):
    import cupy

    rng = np.random.default_rng(100 * bits + has_missing)
    # n_symbols = max_bins (+1 for the null symbol) must need exactly `bits` bits.
    max_bins = 2**bits - 1 if has_missing else 2**bits
    cuts = make_cuts(rng, 5, max_bins)
    X = make_X(rng, cuts, 997, missing_frac=0.1 if has_missing else 0.0)
    null_symbol, b = ellpack.dense_layout(cuts, has_missing)
    assert b == bits
    assert cb.count_missing(cupy.asarray(X), np.nan) == oracle.count_missing(X, np.nan)
    expected = oracle.pack_dense(X, cuts, np.nan, null_symbol, bits)
    got = cb.pack_dense(cupy.asarray(X), cuts.to(cupy), np.nan, null_symbol, bits)
    assert_words_equal(expected, got, bits, X.size, X.shape[1])


@pytest.mark.gpu
def test_pack_dense_sentinel_missing(oracle, cb):
    import cupy

    rng = np.random.default_rng(3)
    cuts = make_cuts(rng, 6, 50)
    X = make_X(rng, cuts, 513, missing_frac=0.1, sentinel=True)
    assert cb.count_missing(cupy.asarray(X), MISSING_SENTINEL) == oracle.count_missing(X, MISSING_SENTINEL)
    null_symbol, bits = ellpack.dense_layout(cuts, True)
    expected = oracle.pack_dense(X, cuts, MISSING_SENTINEL, null_symbol, bits)
    got = cb.pack_dense(cupy.asarray(X), cuts.to(cupy), MISSING_SENTINEL, null_symbol, bits)
    assert_words_equal(expected, got, bits, X.size, X.shape[1])


@pytest.mark.gpu
@pytest.mark.parametrize("missing", [np.nan, MISSING_SENTINEL])
@pytest.mark.parametrize("max_bins", [3, 64, 700])
def test_pack_csr(oracle, cb, max_bins, missing):
    import cupy

    rng = np.random.default_rng(max_bins)
    cuts = make_cuts(rng, 11, max_bins)
    n_rows = 601
    indptr, indices, data = make_csr(rng, cuts, n_rows, 0.35, sentinel=not np.isnan(missing))
    row_stride = csr_row_stride(indptr, data, missing)
    null_symbol, bits = ellpack.sparse_layout(cuts)
    expected = oracle.pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits)
    got = cb.pack_csr(cupy.asarray(indptr), cupy.asarray(indices), cupy.asarray(data), n_rows, row_stride,
                      cuts.to(cupy), missing, null_symbol, bits)
    assert_words_equal(expected, got, bits, n_rows * row_stride, row_stride)


@pytest.mark.gpu
@pytest.mark.parametrize("sentinel", [False, True])
def test_pack_dense_sparse(oracle, cb, sentinel):
    import cupy

    rng = np.random.default_rng(32)
    cuts = make_cuts(rng, 150, 50)  # several warps' worth of features per row
    X = mostly_missing(rng, cuts, 3001, sentinel)
    missing = MISSING_SENTINEL if sentinel else np.nan
    want = ellpack.from_dense(oracle, X, cuts, missing)
    got = ellpack.from_dense(cb, cupy.asarray(X), cuts.to(cupy), missing)
    assert not got.is_dense and got.row_stride == want.row_stride and got.bits == want.bits
    np.testing.assert_array_equal(to_host(got.words), want.words)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_rows(oracle, cb, layout):
    import cupy

    rng = np.random.default_rng(47)
    ell_n, ell_c = both_ellpacks(cb, rng, layout, 4000)
    pieces = [np.sort(rng.choice(ell_n.n_rows, size, replace=False)) for size in (1, 999, 0, 2500, 7)]
    total = sum(p.size for p in pieces) * ell_n.row_stride
    out_n = np.zeros(ellpack.n_words(total, ell_n.bits), dtype=np.uint32)
    out_c = cupy.zeros(out_n.size, dtype=cupy.uint32)
    offset = 0
    for rows in pieces:
        oracle.gather_rows(ell_n, rows, out_n, offset * ell_n.row_stride)
        cb.gather_rows(ell_c, cupy.asarray(rows), out_c, offset * ell_n.row_stride)
        offset += rows.size
    assert_words_equal(out_n, out_c, ell_n.bits, total, ell_n.row_stride)
