"""The ELLPACK stage's quantising compiled for CPUs (cpu/): reference.bin_dense's bins, then its packing.

A value's bin is the first cut above it (an upper-bound binary search in its feature's cuts),
clamped to the feature's last bin; missing values get the null symbol. The threads split the
rows; the packing is the oracle's (reference.pack_symbols).
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from .reference import pack_symbols


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


_compiled = {}

_MIN_ROWS_PER_THREAD = 1 << 13


def bin_dense(X, cuts, missing: float, null_symbol: int):
    """(n_rows, n_features) uint32 feature-local bins; null_symbol where missing (reference.bin_dense)."""
    if not _compiled:
        _compiled["bin"] = cpu.jit(_bin_rows)
    X = np.asarray(X, dtype=np.float32)
    out = np.empty(X.shape, dtype=np.uint32)
    is_nan_missing = bool(np.isnan(missing))
    cpu.run_chunks(_compiled["bin"], X.shape[0], X, np.asarray(cuts.ptrs, dtype=np.int64),
                   np.asarray(cuts.values, dtype=np.float32), np.float32(0.0 if is_nan_missing else missing),
                   is_nan_missing, np.uint32(null_symbol), out, min_chunk=_MIN_ROWS_PER_THREAD)
    return out


def pack_dense(X, cuts, missing: float, null_symbol: int, bits: int):
    """Quantise a dense (n_rows, n_features) array and pack it (dense layout): reference.pack_dense."""
    return pack_symbols(bin_dense(X, cuts, missing, null_symbol), bits)
