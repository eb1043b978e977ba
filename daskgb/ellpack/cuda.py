"""The ELLPACK stage on a GPU: quantising and packing as kernels/ellpack.cu launches, and host pages' copies.

Same names, arguments and results as ellpack/reference.py (the oracle), on CuPy arrays.
"""

from __future__ import annotations

import cupy
import numpy as np

from .. import device_arrays
from ..arrays import array_module, to_host
from ..backend import kernels
from ..layouts import ELLPACK_VIEW, kernel_args
from .layout import n_words

_KERNELS = kernels.declare("ellpack.cu", ("pack_dense", "pack_symbols", "bin_entries", "pack_dense_sparse", "gather_rows"))
# Threads of the launches that are not grid-stride (pack_dense_sparse: a warp a row).
_THREADS = kernels.THREADS


def count_missing(X, missing: float) -> int:
    """Number of entries of a dense array that are NaN or equal to `missing` (device_arrays'
    kernel: CuPy's count would be compiled at first use)."""
    return device_arrays.count_missing(cupy.asarray(X), missing)

def pack_dense(X, cuts, missing: float, null_symbol: int, bits: int):
    """Quantise a dense (n_rows, n_features) array and pack it (dense layout)."""
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    n_entries = n_rows * n_features
    ptrs, values = device_cuts(cuts)
    size = n_words(n_entries, bits)
    words = cupy.empty(size, dtype=cupy.uint32)
    fn = kernels.function("ellpack.cu", _KERNELS, "pack_dense")
    args = (X, np.uint64(n_entries), np.int32(n_features), ptrs, values, np.float32(missing),
            np.uint32(null_symbol), np.int32(bits), words, np.uint64(size))
    kernels.launch_1d(fn, size, args)
    return words

def longest_present_row(X, missing: float) -> int:
    """The most present entries of a row, in one kernel (no per-row array, no CuPy max to compile)."""
    return device_arrays.longest_present_row(cupy.asarray(X), missing)


def present_counts(X, missing: float):
    """(n_rows,) int64: each row's entries that are not missing (NaN or `missing`)."""
    return device_arrays.present_counts(cupy.asarray(X), missing)

def pack_dense_sparse(X, cuts, missing: float, row_stride: int, null_symbol: int, bits: int):
    """Quantise a dense array into the sparse layout and pack it (numpy_backend.pack_dense_sparse)."""
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    ptrs, values = device_cuts(cuts)
    words = cupy.zeros(n_words(n_rows * row_stride, bits), dtype=cupy.uint32)
    if n_rows:
        fn = kernels.function("ellpack.cu", _KERNELS, "pack_dense_sparse")
        blocks = min(-(-n_rows // (_THREADS // 32)), 65535)
        fn((blocks,), (_THREADS,), (X, np.int64(n_rows), np.int32(n_features), ptrs, values, np.float32(missing),
                                    np.int32(row_stride), np.uint32(null_symbol), np.int32(bits), words))
    return words

def pack_symbols(symbols, bits: int):
    """Bit-pack a flat uint32 array of symbols (see ellpack.py for the stream layout)."""
    symbols = cupy.ascontiguousarray(symbols, dtype=cupy.uint32).ravel()
    size = n_words(symbols.size, bits)
    words = cupy.empty(size, dtype=cupy.uint32)
    fn = kernels.function("ellpack.cu", _KERNELS, "pack_symbols")
    kernels.launch_1d(fn, size, (symbols, np.uint64(symbols.size), np.int32(bits), words, np.uint64(size)))
    return words

def unpack_symbols(words, bits: int, n: int, start: int = 0):
    """Symbols start..start+n of a packed stream, as uint32."""
    pos = (cupy.arange(n, dtype=cupy.uint64) + np.uint64(start)) * np.uint64(bits)
    word = (pos >> np.uint64(5)).astype(cupy.int64)
    pair = words[word].astype(cupy.uint64) | (words[word + 1].astype(cupy.uint64) << np.uint64(32))
    return ((pair >> (pos & np.uint64(31))) & np.uint64((1 << bits) - 1)).astype(cupy.uint32)

def gather_rows(ell, rows, out, entry_offset: int) -> None:
    """OR the rows `rows` of ell (a device int64 array of indices into its rows, in the order
    given) into the zeroed packed stream `out` (ell's bits) from symbol entry_offset on, without
    unpacking ell: one page's share of a compacted matrix (ellpack/pages.py compact_rows)."""
    rows = cupy.asarray(rows, dtype=cupy.int64)
    n = int(rows.size)
    if n == 0:
        return
    end = entry_offset + n * ell.row_stride
    n_out = (end * ell.bits - 1) // 32 - entry_offset * ell.bits // 32 + 1
    fn = kernels.function("ellpack.cu", _KERNELS, "gather_rows")
    kernels.launch_1d(fn, n_out, (ell.words, np.int32(ell.bits), np.int32(ell.row_stride), rows, np.uint64(n),
                           np.uint64(entry_offset), out))

def csr_symbols(indptr, indices, data, n_rows: int, row_stride: int, cuts, missing: float, null_symbol: int):
    """(n_rows, row_stride) global bins of each row's non-missing entries, in feature order.

    Array operations, as numpy_backend.csr_symbols; it runs once per matrix.
    """
    indptr = cupy.asarray(indptr, dtype=cupy.int64)
    indices = cupy.asarray(indices, dtype=cupy.int64)
    data = cupy.asarray(data, dtype=cupy.float32)
    out = cupy.full((n_rows, row_stride), null_symbol, dtype=cupy.uint32)
    # Entry e belongs to the row r with indptr[r] <= e < indptr[r + 1].
    rows = cupy.searchsorted(indptr[1:], cupy.arange(data.size, dtype=cupy.int64), side="right")
    keep = ~cupy.isnan(data)
    if not np.isnan(missing):
        keep &= data != np.float32(missing)
    rows, cols, vals = rows[keep], indices[keep], data[keep]
    if rows.size == 0:
        return out
    # Stable sort by (row, feature): rows keep their order, features ascend within a row.
    order = cupy.argsort(rows * np.int64(max(1, cuts.n_features)) + cols)
    rows, cols, vals = rows[order], cols[order].astype(cupy.int32), vals[order]
    ptrs, values = device_cuts(cuts)
    gbin = cupy.empty(rows.size, dtype=cupy.uint32)
    fn = kernels.function("ellpack.cu", _KERNELS, "bin_entries")
    kernels.launch_1d(fn, rows.size, (cols, vals, np.uint64(rows.size), ptrs, values, gbin))
    counts = cupy.bincount(rows, minlength=n_rows)
    starts = cupy.cumsum(counts) - counts
    slot = cupy.arange(rows.size, dtype=cupy.int64) - starts[rows]
    out[rows, slot] = gbin
    return out

def pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits):
    """Quantise CSR arrays and pack them (sparse layout)."""
    symbols = csr_symbols(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol)
    return pack_symbols(symbols.ravel(), bits)

def device_cuts(cuts):
    """(ptrs int32, values float32) on the current device (no copy when already there)."""
    return cupy.asarray(cuts.ptrs, dtype=cupy.int32), cupy.asarray(cuts.values, dtype=cupy.float32)

class DevicePlan:
    """What every stage's kernels read of one ELLPACK matrix besides its words: its cut
    pointers, on the device and the host. Made once per matrix (device_plan); the other
    stages cache their own per-matrix set-ups beside it (histogram/cuda.py HistogramSetup)."""

    def __init__(self, ell):
        if array_module(ell.words) is not cupy:
            raise TypeError("the CUDA backend needs the ELLPACK matrix on the GPU; call ell.to(cupy) first")
        self.ptrs, _ = device_cuts(ell.cuts)
        self.ptrs_host = np.asarray(to_host(ell.cuts.ptrs), dtype=np.int64)
        # The matrix as the kernels take it (layouts.py ELLPACK_VIEW), made once.
        self.view = kernel_args(ELLPACK_VIEW, words=ell.words, ptrs=self.ptrs, n_words=ell.words.size, bits=ell.bits,
                                row_stride=ell.row_stride, null_symbol=ell.null_symbol, n_features=ell.n_features)

def ellpack_view(ell):
    """The matrix as the kernels take it: an EllpackView struct (layouts.py), made once per matrix."""
    return device_plan(ell).view


def device_plan(ell) -> DevicePlan:
    """The matrix's DevicePlan, made once and cached on it (as ellpack/reference.py's symbols)."""
    plan = ell.__dict__.get("_cuda_plan")
    if plan is None:
        plan = ell.__dict__["_cuda_plan"] = DevicePlan(ell)
    return plan

def host_copy(a) -> np.ndarray:
    """A host copy of device array a in page-locked memory, so that copying it back to the
    device runs asynchronously at full bus bandwidth (ellpack/pages.py PagedEllpack's pages); in
    pageable memory when the system will not lock that much. The memory is the array's own
    (no pool keeps it once the array is gone)."""
    a = cupy.ascontiguousarray(a)
    try:
        mem = cupy.cuda.PinnedMemoryPointer(cupy.cuda.PinnedMemory(max(1, a.nbytes)), 0)
    except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError):
        return a.get()
    out = np.ndarray(a.shape, dtype=a.dtype, buffer=mem)
    a.get(out=out)
    return out

class PageCopies:
    """Host pages to the current device, each next page's copy started ahead on a stream of its
    own (one per device).

    get(key, host, next_key, next_host) returns host's words on the device (the copy made
    ahead if it was of `key`, else a copy now) and starts the copy of next_host. The
    destination is allocated in the current stream's order and the copy stream waits for
    that point, so memory the pool hands back is never overwritten under queued kernels;
    the current stream waits for the copy before it uses the words."""

    def __init__(self):
        self._devices: dict = {}  # device id -> _DeviceCopies

    def get(self, key, host, next_key=None, next_host=None):
        device = cupy.cuda.runtime.getDevice()
        copies = self._devices.get(device)
        if copies is None:
            copies = self._devices[device] = _DeviceCopies()
        return copies.get(key, host, next_key, next_host)


class _DeviceCopies:
    """PageCopies on one device."""

    def __init__(self):
        self._stream = cupy.cuda.Stream(non_blocking=True)
        self._ahead = None  # (key, device words, copy done event)

    def get(self, key, host, next_key=None, next_host=None):
        ahead, self._ahead = self._ahead, None
        current = cupy.cuda.get_current_stream()
        if ahead is not None:
            # Also for a copy not wanted: its memory goes back to the pool only once it is done.
            current.wait_event(ahead[2])
        if ahead is not None and ahead[0] == key:
            words = ahead[1]
        else:
            words = cupy.asarray(host)
        if next_host is not None:
            nxt = cupy.empty(next_host.shape, dtype=next_host.dtype)
            self._stream.wait_event(current.record())
            nxt.set(np.ascontiguousarray(next_host), stream=self._stream)
            self._ahead = (next_key, nxt, self._stream.record())
        return words
