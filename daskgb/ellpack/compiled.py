"""The ELLPACK stage's quantising compiled for CPUs (cpu/): reference.bin_dense's bins, and the bit packing both ways.

A value's bin is the first cut above it (an upper-bound binary search in its feature's cuts),
clamped to the feature's last bin; missing values get the null symbol. The threads split the
rows. Packing (reference.pack_symbols' words) shifts each symbol into a running 64-bit
accumulator and writes every word once; the threads split the entries in runs of 32, whose
bits start and end on word boundaries, so no word is written by two threads. Unpacking
(reference.unpack_symbols) reads each entry's two words, as the oracle does.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from .layout import n_words


def _bin_rows(lo, hi, X, ptrs, values, missing, is_nan_missing, null_symbol, out):
    """Rows lo..hi of X: each value's feature-local bin (reference.bin_dense)."""
    n_features = X.shape[1]
    for r in range(lo, hi):
        for f in range(n_features):
            v = X[r, f]
            if v != v or (not is_nan_missing and v == missing):
                out[r, f] = null_symbol
                continue
            a = ptrs[f]
            b = ptrs[f + 1]
            first, count = a, b - a
            while count > 0:  # the first cut > v (numpy's searchsorted, side="right")
                half = count >> 1
                if values[first + half] <= v:
                    first += half + 1
                    count -= half + 1
                else:
                    count = half
            out[r, f] = min(first - a, b - a - 1)


def _sparse_rows(lo, hi, X, ptrs, values, missing, is_nan_missing, null_symbol, out):
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
            a = ptrs[f]
            b = ptrs[f + 1]
            first, count = a, b - a
            while count > 0:  # the first cut > v, as _bin_rows
                half = count >> 1
                if values[first + half] <= v:
                    first += half + 1
                    count -= half + 1
                else:
                    count = half
            out[r, k] = a + min(first - a, b - a - 1)
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


def _kernels():
    if not _compiled:
        _compiled.update(bin=cpu.jit(_bin_rows), sparse=cpu.jit(_sparse_rows), pack=cpu.jit(_pack),
                         unpack=cpu.jit(_unpack), unpack_columns=cpu.jit(_unpack_columns))
    return _compiled

_MIN_ROWS_PER_THREAD = 1 << 13


def bin_dense(X, cuts, missing: float, null_symbol: int):
    """(n_rows, n_features) uint32 feature-local bins; null_symbol where missing (reference.bin_dense)."""
    X = np.asarray(X, dtype=np.float32)
    out = np.empty(X.shape, dtype=np.uint32)
    is_nan_missing = bool(np.isnan(missing))
    cpu.run_chunks(_kernels()["bin"], X.shape[0], X, np.asarray(cuts.ptrs, dtype=np.int64),
                   np.asarray(cuts.values, dtype=np.float32), np.float32(0.0 if is_nan_missing else missing),
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
    cpu.run_chunks(_kernels()["sparse"], X.shape[0], X, np.asarray(cuts.ptrs, dtype=np.int64),
                   np.asarray(cuts.values, dtype=np.float32), np.float32(0.0 if is_nan_missing else missing),
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
