"""The ELLPACK bin matrix: rows quantised to histogram bins, bit-packed, fixed row stride; its layouts and builders.

Layouts (as XGBoost's, see XGBOOST_GPU_NOTES.md §1):

* dense: ``row_stride == n_features``; slot f of a row holds the feature-local bin
  of feature f. ``null_symbol`` (= max bins of any feature) marks a missing value;
  ``has_missing`` says whether any entry is missing (if not, no symbol is spent on it).
* sparse (CSR input): ``row_stride`` = the largest number of non-missing entries in
  a row; a row holds the global bins of its non-missing entries in feature order,
  padded with ``null_symbol`` (= total bins).

Bit packing: entry i of the row-major entry stream occupies bits
``[i*bits, (i+1)*bits)`` of a little-endian stream of uint32 words (bit k of the
stream is bit k % 32 of word k // 32). A reader loads words ``k//32`` and
``k//32 + 1`` as one 64-bit value, shifts and masks; one zero word of padding at
the end makes that load always in bounds. A word is written by exactly one thread
on the GPU, so packing needs no atomics and is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..arrays import array_module, to_host
from ..sketch.cuts import Cuts


def bits_for(n_symbols: int) -> int:
    """Bits per entry: ceil(log2(n_symbols)), at least 1."""
    return max(1, int(n_symbols - 1).bit_length())


def n_words(n_entries: int, bits: int) -> int:
    """uint32 words holding n_entries symbols of `bits` bits, plus one padding word."""
    return (n_entries * bits + 31) // 32 + 1


@dataclass
class Ellpack:
    """A quantised, bit-packed matrix on one device (numpy or cupy arrays)."""

    words: object  # uint32 xp array
    bits: int
    n_rows: int
    row_stride: int
    is_dense: bool
    has_missing: bool
    null_symbol: int
    cuts: Cuts

    @property
    def n_features(self) -> int:
        return self.cuts.n_features

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes)

    def to(self, xp) -> "Ellpack":
        """The same matrix with its arrays on xp's device (a copy only where needed)."""
        if array_module(self.words) is xp:
            return self
        words = to_host(self.words) if xp is np else xp.asarray(self.words)
        return replace(self, words=words, cuts=self.cuts.to(xp))


def dense_layout(cuts: Cuts, has_missing: bool) -> tuple[int, int]:
    """(null_symbol, bits) of the dense layout for these cuts."""
    null_symbol = int(cuts.max_bins_per_feature)
    n_symbols = null_symbol + 1 if has_missing else null_symbol
    return null_symbol, bits_for(n_symbols)


def sparse_layout(cuts: Cuts) -> tuple[int, int]:
    """(null_symbol, bits) of the sparse layout for these cuts."""
    null_symbol = int(cuts.total_bins)
    return null_symbol, bits_for(null_symbol + 1)


# from_dense takes the sparse layout for data with missing values when its bits per row
# are below this multiple of the dense layout's.
SPARSE_BITS_RATIO = 1.0


def from_dense(backend, X, cuts: Cuts, missing: float) -> Ellpack:
    """Quantise and pack a dense (n_rows, n_features) float32 array on backend's device.

    Dense layout, unless values are missing and the sparse layout of the same rows (the
    longest row's present entries, global bins) takes fewer bits: then sparse, as XGBoost
    lays out mostly-missing data, and a histogram reads a row's present entries only.
    """
    n_rows, n_features = X.shape
    has_missing = bool(backend.count_missing(X, missing) > 0)
    longest = backend.longest_present_row(X, missing) if has_missing and n_rows else n_features
    return pack_dense_as(backend, X, cuts, missing, dense_input_layout(cuts, n_features, has_missing, longest))


def dense_input_layout(cuts: Cuts, n_features: int, has_missing: bool, longest_row: int) -> dict:
    """The layout from_dense packs dense input in (Ellpack's fields but words, n_rows and cuts),
    given whether any value is missing and the most present values in a row."""
    null_symbol, bits = dense_layout(cuts, has_missing)
    if has_missing:
        row_stride = max(1, int(longest_row))
        sparse_null, sparse_bits = sparse_layout(cuts)
        if row_stride * sparse_bits < SPARSE_BITS_RATIO * n_features * bits:
            return dict(bits=sparse_bits, row_stride=row_stride, is_dense=False, has_missing=True,
                        null_symbol=sparse_null)
    return dict(bits=bits, row_stride=n_features, is_dense=True, has_missing=has_missing, null_symbol=null_symbol)


def pack_dense_as(backend, X, cuts: Cuts, missing: float, layout: dict) -> Ellpack:
    """Quantise and pack dense rows in a given layout (dense_input_layout's)."""
    if layout["is_dense"]:
        words = backend.pack_dense(X, cuts, missing, layout["null_symbol"], layout["bits"])
    else:
        words = backend.pack_dense_sparse(X, cuts, missing, layout["row_stride"], layout["null_symbol"],
                                          layout["bits"])
    return Ellpack(words=words, n_rows=int(X.shape[0]), cuts=cuts, **layout)


def from_csr(backend, indptr, indices, data, n_rows: int, cuts: Cuts, missing: float) -> Ellpack:
    """Quantise and pack CSR arrays (absent entries are missing) on backend's device."""
    xp = backend.xp
    present = ~_is_missing(xp, data, missing)
    # Row stride counts only entries that are not missing, so it is computed after
    # dropping explicit NaN / `missing` values (prefix sums: empty rows anywhere are fine).
    cum = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(present.astype(xp.int64))])
    counts = cum[indptr[1:]] - cum[indptr[:-1]]
    row_stride = max(1, int(counts.max())) if n_rows else 1
    null_symbol, bits = sparse_layout(cuts)
    words = backend.pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits)
    return Ellpack(
        words=words,
        bits=bits,
        n_rows=n_rows,
        row_stride=row_stride,
        is_dense=False,
        has_missing=True,
        null_symbol=null_symbol,
        cuts=cuts,
    )


def _is_missing(xp, values, missing: float):
    if np.isnan(missing):
        return xp.isnan(values)
    return xp.isnan(values) | (values == xp.float32(missing))
