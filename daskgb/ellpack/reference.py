"""The ELLPACK stage in numpy: quantise, bit-pack and read rows (the oracle of ellpack/cuda.py, and the CPU path).

The layouts and the stream are ellpack/layout.py's; kernels/ellpack.cu packs the same bits
on a GPU, and tests/stages/test_ellpack.py compares the two on random input.
"""

from __future__ import annotations

import numpy as np

from .layout import n_words

# Rows are packed in chunks of a multiple of 32 entries, so a chunk starts on a
# word boundary whatever the bit width and chunks never share a word.
_PACK_CHUNK_ENTRIES = 32 * 65536

def count_missing(X, missing: float) -> int:
    """Number of entries of a dense array that are NaN or equal to `missing`."""
    miss = np.isnan(X)
    if not np.isnan(missing):
        miss |= X == np.float32(missing)
    return int(miss.sum())

def bin_dense(X, cuts, missing: float, null_symbol: int):
    """(n_rows, n_features) uint32 feature-local bins; null_symbol where missing.

    A value's bin is the first cut strictly greater than it (upper bound),
    clamped to the feature's last bin, as XGBoost's SearchBin.
    """
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    values = np.asarray(cuts.values)
    out = np.empty(X.shape, dtype=np.uint32)
    for f in range(X.shape[1]):
        col = X[:, f]
        lo, hi = ptrs[f], ptrs[f + 1]
        b = np.minimum(np.searchsorted(values[lo:hi], col, side="right"), hi - lo - 1)
        miss = np.isnan(col) if np.isnan(missing) else np.isnan(col) | (col == np.float32(missing))
        out[:, f] = np.where(miss, null_symbol, b)
    return out

def present_counts(X, missing: float) -> np.ndarray:
    """(n_rows,) int64: each row's entries that are not missing (NaN or `missing`)."""
    miss = np.isnan(X)
    if not np.isnan(missing):
        miss |= X == np.float32(missing)
    return X.shape[1] - miss.sum(axis=1, dtype=np.int64)

def longest_present_row(X, missing: float) -> int:
    """The most present entries of a row (present_counts' max; 0 without rows)."""
    return int(present_counts(X, missing).max()) if X.shape[0] else 0


def pack_dense_sparse(X, cuts, missing: float, row_stride: int, null_symbol: int, bits: int):
    """Quantise a dense array into the sparse layout and pack it: each row's global bins of
    its present entries in feature order, padded with null_symbol to row_stride slots."""
    local = bin_dense(X, cuts, missing, null_symbol)
    present = local != null_symbol
    gbin = local.astype(np.int64) + np.asarray(cuts.ptrs[:-1], dtype=np.int64)[None, :]
    # A stable sort of "absent" flags moves each row's present entries to its front, in order.
    order = np.argsort(~present, axis=1, kind="stable")[:, :row_stride]
    syms = np.take_along_axis(np.where(present, gbin, null_symbol), order, axis=1).astype(np.uint32)
    if syms.shape[1] < row_stride:
        syms = np.pad(syms, ((0, 0), (0, row_stride - syms.shape[1])), constant_values=null_symbol)
    return pack_symbols(syms, bits)

def pack_symbols(symbols, bits: int):
    """Bit-pack a flat array of symbols (see ellpack.py for the stream layout)."""
    symbols = np.asarray(symbols).ravel()
    n = symbols.size
    words = np.zeros(n_words(n, bits), dtype=np.uint32)
    for start in range(0, n, _PACK_CHUNK_ENTRIES):
        sym = symbols[start : start + _PACK_CHUNK_ENTRIES].astype(np.uint64)
        pos = (np.arange(sym.size, dtype=np.uint64) + np.uint64(start)) * np.uint64(bits)
        word = (pos >> np.uint64(5)).astype(np.int64)
        off = pos & np.uint64(31)
        lo = (sym << off) & np.uint64(0xFFFFFFFF)
        hi = np.where(off + np.uint64(bits) > 32, sym >> (np.uint64(32) - off), np.uint64(0))
        first = int(word[0])
        span = int(word[-1]) - first + 2
        # The bit fields of different entries never overlap, so OR equals ADD, and
        # float64 sums of values below 2**32 are exact.
        acc = np.bincount(word - first, weights=lo.astype(np.float64), minlength=span)
        acc += np.bincount(word - first + 1, weights=hi.astype(np.float64), minlength=span)
        words[first : first + span] |= acc.astype(np.uint64).astype(np.uint32)
    return words

def unpack_symbols(words, bits: int, n: int, start: int = 0):
    """Symbols start..start+n of a packed stream, as uint32."""
    pos = (np.arange(n, dtype=np.uint64) + np.uint64(start)) * np.uint64(bits)
    word = (pos >> np.uint64(5)).astype(np.int64)
    pair = words[word].astype(np.uint64) | (words[word + 1].astype(np.uint64) << np.uint64(32))
    return ((pair >> (pos & np.uint64(31))) & np.uint64((1 << bits) - 1)).astype(np.uint32)

def pack_dense(X, cuts, missing: float, null_symbol: int, bits: int):
    """Quantise a dense (n_rows, n_features) array and pack it (dense layout)."""
    return pack_symbols(bin_dense(X, cuts, missing, null_symbol), bits)

def csr_symbols(indptr, indices, data, n_rows: int, row_stride: int, cuts, missing: float, null_symbol: int):
    """(n_rows, row_stride) global bins of each row's non-missing entries, in feature order."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    data = np.asarray(data, dtype=np.float32)
    rows = np.repeat(np.arange(n_rows), np.diff(indptr))
    keep = ~np.isnan(data)
    if not np.isnan(missing):
        keep &= data != np.float32(missing)
    rows, cols, vals = rows[keep], indices[keep], data[keep]
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    values = np.asarray(cuts.values)
    gbin = np.empty(vals.size, dtype=np.int64)
    by_col = np.argsort(cols, kind="stable")
    bounds = np.searchsorted(cols[by_col], np.arange(ptrs.size))
    for f in range(ptrs.size - 1):
        seg = by_col[bounds[f] : bounds[f + 1]]
        lo, hi = ptrs[f], ptrs[f + 1]
        gbin[seg] = lo + np.minimum(np.searchsorted(values[lo:hi], vals[seg], side="right"), hi - lo - 1)
    counts = np.bincount(rows, minlength=n_rows)
    slot = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    out = np.full((n_rows, row_stride), null_symbol, dtype=np.uint32)
    out[rows, slot] = gbin
    return out

def pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits):
    """Quantise CSR arrays and pack them (sparse layout)."""
    return pack_symbols(csr_symbols(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol), bits)

def symbols(ell):
    """The unpacked (n_rows, row_stride) symbol matrix, cached on the matrix.

    The CPU path trades memory for speed here: unpacking every level would cost
    more than the histogram itself. The narrowest unsigned type holds it. A dense
    layout's is stored a feature after another (Fortran order), as the histograms
    read it: a feature's symbols of a node's rows are then gathered from one column.
    """
    cached = ell.__dict__.get("_symbols")
    if cached is None:
        dtype = np.uint8 if ell.null_symbol < 256 else np.uint16 if ell.null_symbol < 65536 else np.uint32
        cached = unpack_symbols(ell.words, ell.bits, ell.n_rows * ell.row_stride).astype(dtype)
        cached = cached.reshape(ell.n_rows, ell.row_stride)
        if ell.is_dense:
            cached = np.asfortranarray(cached)
        ell.__dict__["_symbols"] = cached
    return cached

def feature_bins(ell, rows, features):
    """Feature-local bin of (rows[i], features[i]), or -1 where missing."""
    sym = symbols(ell)
    if ell.is_dense:
        b = sym[rows, features].astype(np.int64)
        return np.where(b == ell.null_symbol, -1, b)
    ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
    lo, hi = ptrs[features][:, None], ptrs[features + 1][:, None]
    row_sym = sym[rows].astype(np.int64)
    inside = (row_sym >= lo) & (row_sym < hi)
    found = inside.any(axis=1)
    local = np.where(inside, row_sym - lo, 0).max(axis=1)
    return np.where(found, local, -1)

def gather_rows(ell, rows, out, entry_offset: int) -> None:
    """OR the rows `rows` of ell (indices into its rows, in the order given) into the zeroed
    packed stream `out` (ell's bits) from symbol entry_offset on: one page's share of a
    compacted matrix (ellpack/pages.py compact_rows). The rows are packed as a stream of their own,
    then ORed in shifted to the bit where they start (the bits past a stream's end are zero)."""
    sym = symbols(ell)[np.asarray(rows, dtype=np.int64)].ravel()
    if sym.size == 0:
        return
    n_bits = sym.size * ell.bits
    m = (n_bits + 31) // 32
    w = pack_symbols(sym, ell.bits)[:m].astype(np.uint64)
    first, r = divmod(int(entry_offset) * ell.bits, 32)
    out[first : first + m] |= ((w << np.uint64(r)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if r:
        out[first + 1 : first + m + 1] |= (w >> np.uint64(32 - r)).astype(np.uint32)

def host_copy(a) -> np.ndarray:
    """A host copy of a (a page's words: the numpy backend's pages are host arrays)."""
    return np.asarray(a)


class HostPages:
    """Host pages read in place (numpy_backend.page_copies; the CUDA backend's PageCopies moves
    them to the device, the next one ahead): get() gives host's words as an array of their own."""

    def get(self, key, host, next_key=None, next_host=None):
        return np.array(host)
