"""The ELLPACK stage's quantising compiled for CPUs (cpu/): reference.bin_dense's bins, and the bit packing both ways.

A value's bin is the first cut above it (an upper bound in its feature's cuts), clamped to the
feature's last bin; missing values get the null symbol. The threads split the rows. The upper
bound is looked up, not searched from scratch: each feature's range of cuts is cut into
equal-width buckets (~8 a cut, search_tables), and a value's bucket (a subtraction and a
multiplication) names the few cuts it can lie among, which a binary search without branches
then settles. The bucket is a monotone function of the value, computed alike for values and
cuts, so every cut in an earlier bucket is below the value and every cut in a later one above
it: the bins are the oracle's whatever the rounding. (A plain binary search of 256 cuts, its
branches unpredictable, took ~70 ns a value on one thread; this takes ~6-13.)

Packing (reference.pack_symbols' words) shifts each symbol into a running 64-bit
accumulator and writes every word once; the threads split the entries in runs of 32, whose
bits start and end on word boundaries, so no word is written by two threads. Unpacking
(reference.unpack_symbols) reads each entry's two words, as the oracle does.
"""

from __future__ import annotations

import threading

import numpy as np

from .. import cpu
from .layout import n_words


def _bucket(v, low, scale, n_buckets):
    """Which of a feature's n_buckets equal-width buckets holds v (monotone in v; NaN excluded)."""
    if scale == 0.0:  # one bucket (a feature of one cut, or cuts too close or too far apart)
        return 0
    d = (np.float64(v) - low) * scale
    if d < 0.0:
        return 0
    if d >= n_buckets:
        return n_buckets - 1
    return np.int64(d)


def _bucket_starts(ptrs, values, bucket_ptrs, lows, scales, starts):
    """Each feature's table: starts[bucket_ptrs[f] + t] = the first of its cuts (global index)
    whose bucket is t or later, for t = 0 .. its bucket count (the last: its end)."""
    for f in range(ptrs.shape[0] - 1):
        base = bucket_ptrs[f]
        n_buckets = bucket_ptrs[f + 1] - base - 1
        j = ptrs[f]
        for t in range(n_buckets + 1):
            while j < ptrs[f + 1] and _bucket(values[j], lows[f], scales[f], n_buckets) < t:
                j += 1
            starts[base + t] = j


def _upper_bound(v, f, ptrs, values, bucket_ptrs, lows, scales, starts):
    """The first of feature f's cuts above v, as an index into its cuts (numpy's searchsorted,
    side="right"): a search of v's bucket's cuts only, without branches (values carries one
    padding entry past the last cut, read where a bucket holds none)."""
    base = bucket_ptrs[f]
    t = _bucket(v, lows[f], scales[f], bucket_ptrs[f + 1] - base - 1)
    first = starts[base + t]
    n = starts[base + t + 1] - first
    while n > 1:
        half = n >> 1
        first += half * np.int64(values[first + half] <= v)
        n -= half
    first += np.int64((n > 0) & (values[first] <= v))
    return first - ptrs[f]


def _bin_rows(lo, hi, X, ptrs, values, bucket_ptrs, lows, scales, starts, missing, is_nan_missing, null_symbol,
              out):
    """Rows lo..hi of X: each value's feature-local bin (reference.bin_dense)."""
    n_features = X.shape[1]
    for r in range(lo, hi):
        for f in range(n_features):
            v = X[r, f]
            if v != v or (not is_nan_missing and v == missing):
                out[r, f] = null_symbol
                continue
            bin_ = _upper_bound(v, f, ptrs, values, bucket_ptrs, lows, scales, starts)
            out[r, f] = min(bin_, ptrs[f + 1] - ptrs[f] - 1)


def _sparse_rows(lo, hi, X, ptrs, values, bucket_ptrs, lows, scales, starts, missing, is_nan_missing, null_symbol,
                 out):
    """Rows lo..hi of X in the sparse layout (reference.pack_dense_sparse's symbols): the global
    bins of a row's present values in feature order, then null_symbol to the row's end."""
    n_features = X.shape[1]
    row_stride = out.shape[1]
    for r in range(lo, hi):
        k = 0
        for f in range(n_features):
            v = X[r, f]
            if v != v or (not is_nan_missing and v == missing) or k == row_stride:
                continue
            bin_ = _upper_bound(v, f, ptrs, values, bucket_ptrs, lows, scales, starts)
            out[r, k] = ptrs[f] + min(bin_, ptrs[f + 1] - ptrs[f] - 1)
            k += 1
        for j in range(k, row_stride):
            out[r, j] = null_symbol


def _pack(lo, hi, symbols, bits, words):
    """Entries 32 * lo .. 32 * hi (at most the last) packed into their words."""
    n = symbols.shape[0]
    a = lo * 32
    b = min(hi * 32, n)
    ubits = np.uint64(bits)
    w = (np.uint64(a) * ubits) >> np.uint64(5)
    acc = np.uint64(0)
    held = np.uint64(0)  # bits in acc
    for i in range(a, b):
        acc |= np.uint64(symbols[i]) << held
        held += ubits
        if held >= np.uint64(32):
            words[w] = np.uint32(acc & np.uint64(0xFFFFFFFF))
            w += np.uint64(1)
            acc >>= np.uint64(32)
            held -= np.uint64(32)
    if held > np.uint64(0):  # the stream's last, partial word (a run of 32 ends on a boundary)
        words[w] = np.uint32(acc)


def _unpack(lo, hi, words, bits, start, out):
    """Entries start + lo .. start + hi of the stream, into out[lo:hi]."""
    ubits = np.uint64(bits)
    mask = (np.uint64(1) << ubits) - np.uint64(1)
    for i in range(lo, hi):
        pos = np.uint64(start + i) * ubits
        w = pos >> np.uint64(5)
        pair = np.uint64(words[w]) | (np.uint64(words[w + np.uint64(1)]) << np.uint64(32))
        out[i] = np.uint32((pair >> (pos & np.uint64(31))) & mask)


def _unpack_columns(lo, hi, words, bits, cols):
    """Rows lo..hi of a dense layout's stream (row r's symbol of feature j at entry
    r * n_features + j), each symbol into its feature's column, cols[j, r]."""
    ubits = np.uint64(bits)
    mask = (np.uint64(1) << ubits) - np.uint64(1)
    n_features = np.uint64(cols.shape[0])
    for r in range(lo, hi):
        ur = np.uint64(r)
        j = np.uint64(0)
        while j < n_features:
            pos = (ur * n_features + j) * ubits
            w = pos >> np.uint64(5)
            pair = np.uint64(words[w]) | (np.uint64(words[w + np.uint64(1)]) << np.uint64(32))
            cols[j, ur] = (pair >> (pos & np.uint64(31))) & mask
            j += np.uint64(1)


_compiled = {}
_compiling = threading.Lock()


def _kernels():
    if not _compiled:
        # The loops call the helpers by their module names, which numba reads as it compiles
        # them: the helpers are compiled first, in their place, under a lock (two workers of
        # one process may get here together: split/compiled.py's _kernels says why).
        with _compiling:
            if not _compiled:
                g = globals()
                for name in ("_bucket", "_upper_bound"):
                    g[name] = cpu.jit(g[name])
                _compiled.update(starts=cpu.jit(_bucket_starts), bin=cpu.jit(_bin_rows),
                                 sparse=cpu.jit(_sparse_rows), pack=cpu.jit(_pack), unpack=cpu.jit(_unpack),
                                 unpack_columns=cpu.jit(_unpack_columns))
    return _compiled

# Buckets a feature's cuts are looked up through: ~8 a cut, at most this many (a 256-bin
# feature's table: 16 KB). They span the feature's cuts less its first and last 1/_TRIM
# (values beyond fall in the end buckets, with those cuts): a heavy tail's few far cuts
# (Higgs' momenta) would otherwise stretch the buckets so that most cuts crowd into a few.
# One thread, ns a value (4 a cut, untrimmed -> these): Higgs-shaped 17-20 -> 11-13,
# normal 9-13 -> 8-11, Covertype-shaped 7-9 -> 6-7; Bosch-shaped (80% missing) ~40 a present value either way.
_BUCKETS_PER_CUT = 8
_MAX_BUCKETS = 2048
_TRIM = 64


def search_tables(cuts):
    """What _upper_bound reads of the cuts: (ptrs, values padded by one, bucket_ptrs, lows,
    scales, starts). A feature's buckets span its cuts but the first and last 1/_TRIM of them;
    one whose cuts are fewer than 2, or whose span gives no finite positive scale, has one
    bucket (a plain search)."""
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    values = np.asarray(cuts.values, dtype=np.float32)
    counts = np.diff(ptrs)
    spread = np.flatnonzero(counts >= 2)
    trim = counts[spread] // _TRIM
    first = values[ptrs[spread] + trim].astype(np.float64)
    last = values[ptrs[spread + 1] - 1 - trim].astype(np.float64)
    n_buckets = np.minimum(_MAX_BUCKETS, _BUCKETS_PER_CUT * counts)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scale = n_buckets[spread] / (last - first)
    usable = np.isfinite(scale) & (scale > 0) & np.isfinite(first)
    lows, scales = np.zeros(counts.size), np.zeros(counts.size)
    lows[spread[usable]], scales[spread[usable]] = first[usable], scale[usable]
    n_buckets = np.where(scales > 0, n_buckets, 1)
    bucket_ptrs = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(n_buckets + 1, out=bucket_ptrs[1:])
    starts = np.empty(int(bucket_ptrs[-1]), dtype=np.int64)
    _kernels()["starts"](ptrs, values, bucket_ptrs, lows, scales, starts)
    padded = np.append(values, np.float32(np.inf))
    return ptrs, padded, bucket_ptrs, lows, scales, starts

_MIN_ROWS_PER_THREAD = 1 << 13


def bin_dense(X, cuts, missing: float, null_symbol: int):
    """(n_rows, n_features) uint32 feature-local bins; null_symbol where missing (reference.bin_dense)."""
    X = np.asarray(X, dtype=np.float32)
    out = np.empty(X.shape, dtype=np.uint32)
    is_nan_missing = bool(np.isnan(missing))
    cpu.run_chunks(_kernels()["bin"], X.shape[0], X, *search_tables(cuts),
                   np.float32(0.0 if is_nan_missing else missing),
                   is_nan_missing, np.uint32(null_symbol), out, min_chunk=_MIN_ROWS_PER_THREAD)
    return out


def pack_dense(X, cuts, missing: float, null_symbol: int, bits: int):
    """Quantise a dense (n_rows, n_features) array and pack it (dense layout): reference.pack_dense."""
    return pack_symbols(bin_dense(X, cuts, missing, null_symbol), bits)


def pack_dense_sparse(X, cuts, missing: float, row_stride: int, null_symbol: int, bits: int):
    """Quantise a dense array into the sparse layout and pack it: reference.pack_dense_sparse."""
    X = np.asarray(X, dtype=np.float32)
    out = np.empty((X.shape[0], row_stride), dtype=np.uint32)
    is_nan_missing = bool(np.isnan(missing))
    cpu.run_chunks(_kernels()["sparse"], X.shape[0], X, *search_tables(cuts),
                   np.float32(0.0 if is_nan_missing else missing),
                   is_nan_missing, np.uint32(null_symbol), out, min_chunk=_MIN_ROWS_PER_THREAD)
    return pack_symbols(out, bits)


def pack_symbols(symbols, bits: int):
    """Bit-pack a flat array of symbols: reference.pack_symbols' words."""
    symbols = np.ascontiguousarray(np.asarray(symbols).ravel())
    if symbols.dtype.kind not in "ui":
        symbols = symbols.astype(np.uint32)
    n = symbols.size
    words = np.zeros(n_words(n, bits), dtype=np.uint32)
    cpu.run_chunks(_kernels()["pack"], -(-n // 32), symbols, np.int64(bits), words,
                   min_chunk=_MIN_ROWS_PER_THREAD)
    return words


def unpack_symbols(words, bits: int, n: int, start: int = 0):
    """Symbols start..start+n of a packed stream, as uint32: reference.unpack_symbols."""
    out = np.empty(n, dtype=np.uint32)
    cpu.run_chunks(_kernels()["unpack"], n, np.ascontiguousarray(words, dtype=np.uint32), np.int64(bits),
                   np.int64(start), out, min_chunk=_MIN_ROWS_PER_THREAD * 8)
    return out


def unpack_columns(words, bits: int, n_rows: int, n_features: int, dtype):
    """A dense layout's symbols as (n_features, n_rows) columns of dtype (wide enough for every
    symbol): a feature's symbols side by side, what the histograms read (histogram/compiled.py)."""
    cols = np.empty((n_features, n_rows), dtype=dtype)
    cpu.run_chunks(_kernels()["unpack_columns"], n_rows, np.ascontiguousarray(words, dtype=np.uint32), np.int64(bits),
                   cols, min_chunk=_MIN_ROWS_PER_THREAD)
    return cols
