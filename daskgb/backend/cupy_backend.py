"""CUDA backend: numpy_backend.py's hot loops as CUDA kernels (kernels/*.cu) on CuPy arrays.

Same module-level names, signatures and results as numpy_backend.py, the reference;
tests/test_backend_parity.py runs both on the same input and compares. This module
sizes and launches kernels; the algorithms are in the kernels and in numpy_backend.
Arrays come and go as cupy arrays, except the small per-level split arrays of
apply_splits and the packed trees of predict_margin, which are host numpy arrays.
A tree level makes one host wait: the split records of evaluate_splits. apply_splits
and build_histograms queue their work without waiting (RowPartition says how the
children's row counts reach the host behind the launches).

Fixed-point gradients
---------------------
Atomic adds on a GPU land in no fixed order and float sums depend on the order, so
histograms are summed in int64 fixed point, as XGBoost does (XGBOOST_GPU_NOTES §3).
prepare_gradients sizes the quantisation of each column c (gradient, hessian) once per
tree, and the histogram kernel applies it to each row as it loads it (FixedGradients):

    S        = sum over rows of |gpair[:, c]|, in float64 (or abs_sum[c]: the sum
               over all workers, so that every worker uses the same scale)
    R        = 2 ** ceil(log2(S))          (R = 1 when S == 0)
    scale[c] = R / 2**62
    fixed    = trunc(float64(g) / scale[c]) as int64

scale is a power of two, so g / scale is exact and only the truncation loses
anything, less than scale per row. Every row has |fixed| <= 2**62 and all rows
together sum to at most S / scale <= 2**62 in absolute value (up to the rounding of
S, far below the 2**63 limit), so any sum of rows -- a bin, a node, parent minus
child, the same over all workers -- fits int64. Integer adds are associative:
histograms are exact and identical whatever order the adds happen in. Multiplying
by scale turns an int64 sum back into a double (split.evaluate_splits does).
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections import OrderedDict

import cupy
import numpy as np

from .. import split as _split
from ..layouts import PREDICT_NODE_DTYPE, SPLIT_DTYPE
from ..arrays import array_module, to_host
from . import kernels as _kernels

xp = cupy
name = "cuda"

# Shared memory a histogram block may use for its private copy of a feature group's
# bins (_BIN_BYTES per bin, and 4 bytes per feature of the group for its bin offsets).
# None: as much as lets two blocks share an SM (half an SM's shared memory, less the
# per-block reservation; 113 KiB on an H100 or H200). More than 48 KiB needs
# max_dynamic_shared_size_bytes (set below). A larger budget means fewer feature groups
# (each re-reads its rows' ids and gradients) but fewer blocks per SM: measured with
# ci/setting_sweep.py (H200, ms a round), two blocks per SM against one (227 KiB): Year
# 1.77 against 2.03, ranking 10.38 against 11.93, Bosch 8.95 against 9.14, Higgs 6.44
# against 6.43 (one group either way); three or four blocks per SM were slower on all four.
SHARED_BUDGET_BYTES = None
# Two 32-bit planes per int64 value, two values per bin (kernels/histogram.cu).
_BIN_BYTES = 16
# Rows of a histogram tile, at most: on the largest inputs more, smaller tiles than
# _BLOCKS_PER_SM asks for, so that the last wave of blocks is short.
_MAX_TILE_ROWS = 2**16 - 1
# Histogram launches aim at this many blocks per SM in all (tiles x feature groups),
# enough to keep every SM busy while each block amortises clearing and flushing its
# shared histogram over at least _MIN_TILE_ROWS rows.
_BLOCKS_PER_SM = 4
_MIN_TILE_ROWS = 256
_HIST_THREADS = 1024
# Dense rows: each histogram thread reads its run of a row's slots from one window of
# three words, when its run fits (kernels/histogram.cu, `window`), instead of a load per
# slot. _WINDOW_SLOTS: kWindowSlots there.
HIST_WINDOW = True
_WINDOW_SLOTS = 8
# Sparse rows whose bins need several shared-memory groups: one pass with global atomics
# (True) or a pass per group over the group's run of each row (False).
SPARSE_ONE_PASS = True
# Slots of a row one histogram thread adds, at most: rows with more slots in a feature
# group are shared by several threads (a power of two of them, up to a warp).
_SLOTS_PER_THREAD = 8
_THREADS = 256

_ELLPACK = ("pack_dense", "pack_symbols", "bin_entries", "pack_dense_sparse", "gather_rows")
_PARTITION = ("partition_count<true>", "partition_count<false>", "partition_scatter", "label_rows")
_PARTITION_TILE_ROWS = 4096  # kTileRows in kernels/partition.cu
_PARTITION_THREADS = 512
_HISTOGRAM = tuple(f"build_histogram<{d}, {s}>" for d in ("true", "false") for s in ("true", "false"))
_PREDICT = ("predict_margin", "add_leaf_values<true>", "add_leaf_values<false>")
_SPLIT = ("evaluate_splits",)
_SAMPLING = ("mvs_extremes", "mvs_candidate_stats", "mvs_sample")
_CHILDREN = ("children_histograms",)
_SKETCH = ("segmented_search_right", "segmented_search_left")
_SPLIT_THREADS = 256  # kSplitThreads in kernels/split.cu
_CANDIDATE_BYTES = 48  # sizeof(Candidate) in kernels/split.cu


_functions: dict = {}


def _kernel(filename: str, names: tuple[str, ...], name: str):
    """A compiled kernel, looked up once per device."""
    key = (cupy.cuda.runtime.getDevice(), filename, name)
    fn = _functions.get(key)
    if fn is None:
        fn = _functions[key] = _kernels.get_function(filename, names, name)
    return fn


def _launch_1d(fn, n: int, args, threads: int = _THREADS) -> None:
    """Launch a grid-stride kernel over n items (nothing when n == 0)."""
    if n > 0:
        fn((min((n + threads - 1) // threads, 2**31 - 1),), (threads,), args)


@functools.lru_cache(maxsize=None)
def _sm_count(device: int) -> int:
    return int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])


@functools.lru_cache(maxsize=None)
def _two_blocks_per_sm(device: int) -> int:
    """Shared memory a block may use with two blocks on an SM (at most the opt-in limit)."""
    a = cupy.cuda.Device(device).attributes
    per_sm = int(a.get("MaxSharedMemoryPerMultiprocessor", 0)) or 2 * int(a["MaxSharedMemoryPerBlock"])
    reserved = int(a.get("ReservedSharedMemoryPerBlock", 1024))
    return max(int(a["MaxSharedMemoryPerBlock"]), min(int(a["MaxSharedMemoryPerBlockOptin"]), per_sm // 2 - reserved))


def _shared_budget() -> int:
    """Bytes of shared memory a histogram block may use (SHARED_BUDGET_BYTES, or the device's)."""
    if SHARED_BUDGET_BYTES is not None:
        return int(SHARED_BUDGET_BYTES)
    return _two_blocks_per_sm(cupy.cuda.runtime.getDevice())


def _tf(flag: bool) -> str:
    return "true" if flag else "false"


# --------------------------------------------------------------------------- host -> device
def to_device(a):
    """A host array on the device. (Staging through a ring of pinned buffers, to make these small
    per-level copies asynchronous, was measured and gained nothing: see docs/performance_notes.md.)"""
    return cupy.asarray(a)


# --------------------------------------------------------------------------- cuts
class _CutsArrays:
    """Host copies of a Cuts object's arrays, and device copies made on first use."""

    def __init__(self, cuts):
        self.host = (
            np.asarray(to_host(cuts.ptrs), dtype=np.int64),
            np.asarray(to_host(cuts.values), dtype=np.float32),
            np.asarray(to_host(cuts.min_values), dtype=np.float32),
        )
        self._device = None

    @property
    def device(self):
        """(ptrs int32, values float32, min_values float32) on the current device."""
        if self._device is None:
            ptrs, values, min_values = self.host
            self._device = (cupy.asarray(ptrs.astype(np.int32)), cupy.asarray(values), cupy.asarray(min_values))
        return self._device


_CUTS_CACHE: OrderedDict = OrderedDict()


def _cuts_arrays(cuts) -> _CutsArrays:
    """The arrays of the last few Cuts objects split evaluation has seen.

    Split evaluation reads the cuts every level; copying them from the device each
    time would cost a device sync per array. An entry holds its Cuts object, so an
    id is never reused while the entry lives.
    """
    key = (cupy.cuda.runtime.getDevice(), id(cuts))
    hit = _CUTS_CACHE.get(key)
    if hit is not None and hit[0] is cuts:
        _CUTS_CACHE.move_to_end(key)
        return hit[1]
    arrays = _CutsArrays(cuts)
    _CUTS_CACHE[key] = (cuts, arrays)
    while len(_CUTS_CACHE) > 8:
        _CUTS_CACHE.popitem(last=False)
    return arrays


def _device_cuts(cuts):
    """(ptrs int32, values float32) on the current device (no copy when already there)."""
    return cupy.asarray(cuts.ptrs, dtype=cupy.int32), cupy.asarray(cuts.values, dtype=cupy.float32)


class _Plan:
    """What the level kernels need of one ELLPACK matrix, computed once and cached on it."""

    def __init__(self, ell):
        if array_module(ell.words) is not cupy:
            raise TypeError("the CUDA backend needs the ELLPACK matrix on the GPU; call ell.to(cupy) first")
        self.ptrs, _ = _device_cuts(ell.cuts)
        self.ptrs_host = np.asarray(to_host(ell.cuts.ptrs), dtype=np.int64)
        self._groups: dict = {}
        self.all_features = cupy.asarray(np.array([[0, len(self.ptrs_host) - 1]], dtype=np.int32))

    def groups(self, budget_bytes: int):
        """Feature groups for a shared-memory budget, cached (see _feature_groups)."""
        g = self._groups.get(budget_bytes)
        if g is None:
            shared, single, smem = _feature_groups(self.ptrs_host, budget_bytes)
            g = self._groups[budget_bytes] = (
                cupy.asarray(np.asarray(shared, dtype=np.int32).reshape(-1, 2)),
                cupy.asarray(np.asarray(single, dtype=np.int32).reshape(-1, 2)),
                smem,
                max((b - a for a, b in shared), default=0),
            )
        return g


def _plan(ell) -> _Plan:
    # Cached on the matrix as numpy_backend.symbols caches its unpacked symbols.
    plan = ell.__dict__.get("_cuda_plan")
    if plan is None:
        plan = ell.__dict__["_cuda_plan"] = _Plan(ell)
    return plan


def _group_smem(n_bins: int, n_features: int) -> int:
    """Shared memory of a histogram block for a group: its bins, then its features' bin offsets."""
    return n_bins * _BIN_BYTES + 4 * n_features


def _feature_groups(ptrs, budget_bytes: int):
    """Split the features into contiguous groups whose shared memory fits budget_bytes.

    Returns (shared, single, smem): shared lists (first, end) feature ranges that fit
    in shared memory, single lists the features that alone exceed the budget (their
    histograms are built with global atomics), smem is the most shared memory any
    shared group needs (see _group_smem).
    """
    n_features = len(ptrs) - 1
    shared, single = [], []
    smem = 0
    f = 0
    while f < n_features:
        if _group_smem(int(ptrs[f + 1] - ptrs[f]), 1) > budget_bytes:
            single.append((f, f + 1))
            f += 1
            continue
        end = f + 1
        while end < n_features and _group_smem(int(ptrs[end + 1] - ptrs[f]), end + 1 - f) <= budget_bytes:
            end += 1
        shared.append((f, end))
        smem = max(smem, _group_smem(int(ptrs[end] - ptrs[f]), end - f))
        f = end
    return shared, single, smem


# --------------------------------------------------------------------------- ELLPACK
def count_missing(X, missing: float) -> int:
    """Number of entries of a dense array that are NaN or equal to `missing`."""
    X = cupy.asarray(X)
    miss = cupy.isnan(X)
    if not np.isnan(missing):
        miss |= X == np.float32(missing)
    return int(cupy.count_nonzero(miss))


def pack_dense(X, cuts, missing: float, null_symbol: int, bits: int):
    """Quantise a dense (n_rows, n_features) array and pack it (dense layout)."""
    from ..ellpack import n_words

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    n_entries = n_rows * n_features
    ptrs, values = _device_cuts(cuts)
    size = n_words(n_entries, bits)
    words = cupy.empty(size, dtype=cupy.uint32)
    fn = _kernel("ellpack.cu", _ELLPACK, "pack_dense")
    args = (X, np.uint64(n_entries), np.int32(n_features), ptrs, values, np.float32(missing),
            np.uint32(null_symbol), np.int32(bits), words, np.uint64(size))
    _launch_1d(fn, size, args)
    return words


_present_counts = cupy.ReductionKernel(
    "float32 x, float32 missing", "int64 count", "(isnan(x) || x == missing) ? 0 : 1", "a + b", "count = a", "0",
    "daskgb_present_counts")


def present_counts(X, missing: float):
    """(n_rows,) int64: each row's entries that are not missing (NaN or `missing`)."""
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    return _present_counts(X, np.float32(missing), axis=1)


def pack_dense_sparse(X, cuts, missing: float, row_stride: int, null_symbol: int, bits: int):
    """Quantise a dense array into the sparse layout and pack it (numpy_backend.pack_dense_sparse)."""
    from ..ellpack import n_words

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    ptrs, values = _device_cuts(cuts)
    words = cupy.zeros(n_words(n_rows * row_stride, bits), dtype=cupy.uint32)
    if n_rows:
        fn = _kernel("ellpack.cu", _ELLPACK, "pack_dense_sparse")
        blocks = min(-(-n_rows // (_THREADS // 32)), 65535)
        fn((blocks,), (_THREADS,), (X, np.int64(n_rows), np.int32(n_features), ptrs, values, np.float32(missing),
                                    np.int32(row_stride), np.uint32(null_symbol), np.int32(bits), words))
    return words


def _pack_symbols(symbols, bits: int):
    """Bit-pack a flat uint32 array of symbols (see ellpack.py for the stream layout)."""
    from ..ellpack import n_words

    symbols = cupy.ascontiguousarray(symbols, dtype=cupy.uint32).ravel()
    size = n_words(symbols.size, bits)
    words = cupy.empty(size, dtype=cupy.uint32)
    fn = _kernel("ellpack.cu", _ELLPACK, "pack_symbols")
    _launch_1d(fn, size, (symbols, np.uint64(symbols.size), np.int32(bits), words, np.uint64(size)))
    return words


pack_symbols = _pack_symbols


def unpack_symbols(words, bits: int, n: int, start: int = 0):
    """Symbols start..start+n of a packed stream, as uint32."""
    pos = (cupy.arange(n, dtype=cupy.uint64) + np.uint64(start)) * np.uint64(bits)
    word = (pos >> np.uint64(5)).astype(cupy.int64)
    pair = words[word].astype(cupy.uint64) | (words[word + 1].astype(cupy.uint64) << np.uint64(32))
    return ((pair >> (pos & np.uint64(31))) & np.uint64((1 << bits) - 1)).astype(cupy.uint32)


def gather_rows(ell, rows, out, entry_offset: int) -> None:
    """OR the rows `rows` of ell (a device int64 array of indices into its rows, in the order
    given) into the zeroed packed stream `out` (ell's bits) from symbol entry_offset on, without
    unpacking ell: one page's share of a compacted matrix (external.compact_rows)."""
    rows = cupy.asarray(rows, dtype=cupy.int64)
    n = int(rows.size)
    if n == 0:
        return
    end = entry_offset + n * ell.row_stride
    n_out = (end * ell.bits - 1) // 32 - entry_offset * ell.bits // 32 + 1
    fn = _kernel("ellpack.cu", _ELLPACK, "gather_rows")
    _launch_1d(fn, n_out, (ell.words, np.int32(ell.bits), np.int32(ell.row_stride), rows, np.uint64(n),
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
    ptrs, values = _device_cuts(cuts)
    gbin = cupy.empty(rows.size, dtype=cupy.uint32)
    fn = _kernel("ellpack.cu", _ELLPACK, "bin_entries")
    _launch_1d(fn, rows.size, (cols, vals, np.uint64(rows.size), ptrs, values, gbin))
    counts = cupy.bincount(rows, minlength=n_rows)
    starts = cupy.cumsum(counts) - counts
    slot = cupy.arange(rows.size, dtype=cupy.int64) - starts[rows]
    out[rows, slot] = gbin
    return out


def pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits):
    """Quantise CSR arrays and pack them (sparse layout)."""
    symbols = csr_symbols(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol)
    return _pack_symbols(symbols.ravel(), bits)


# --------------------------------------------------------------------------- gradients
def _pow2_at_least(s: float) -> float:
    """Smallest power of two >= s; 1 for s == 0."""
    if s <= 0.0:
        return 1.0
    m, e = math.frexp(s)  # s = m * 2**e with 0.5 <= m < 1
    return math.ldexp(1.0, e - 1 if m == 0.5 else e)


def gradient_abs_sums(gpair):
    """(2,) float64 device array: sums of |gradient| and |hessian| over the rows.

    It stays on the device so that, across GPU workers, NCCL sums it (no host round trip).
    """
    g = cupy.asarray(gpair, dtype=cupy.float32)
    # Each column reduced as a contiguous vector (CUB device reduce): an axis-0 reduction
    # of the (n, 2) array walks it with a stride and is an order of magnitude slower.
    return cupy.stack([cupy.abs(g[:, c]).sum(dtype=cupy.float64) for c in range(2)])


_to_fixed = cupy.ElementwiseKernel(
    "float32 g, float64 inv_scale", "int64 fixed",
    # inv_scale is a power of two: the product is exact; the cast truncates toward zero.
    "fixed = (long long)((double)g * inv_scale)", "daskgb_to_fixed")


class FixedGradients:
    """Per-row gradient pairs in int64 fixed point, held as their float32 values and the
    scale: the kernels convert a row as they load it (8 bytes a row read and kept, not 16),
    exactly as _to_fixed converts. Row slices are views; get() and fixed() give the int64
    values themselves (on the host, on the device).

    The scale is on the device (inv_scale_d, scale_d: (2,) float64), which the kernels read,
    and on the host (inv_scale) unless prepare_gradients was asked not to wait for it; then
    abs_sum (the device sums it was sized by) is kept for check_finite()."""

    on_device = True  # for daskgb.arrays: its get() copies from the GPU, as an array's

    def __init__(self, values, inv_scale, inv_scale_d, scale_d, abs_sum=None):
        self.values = values  # (n, 2) float32, C-contiguous
        self.inv_scale = inv_scale  # (2,) float64 powers of two on the host, or None
        self.inv_scale_d = inv_scale_d
        self.scale_d = scale_d
        self.abs_sum = abs_sum

    @property
    def shape(self):
        return self.values.shape

    @property
    def dtype(self):
        return np.dtype(np.int64)

    def __len__(self):
        return self.values.shape[0]

    def __getitem__(self, rows: slice) -> "FixedGradients":
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("FixedGradients takes contiguous row slices only")
        return FixedGradients(self.values[rows], self.inv_scale, self.inv_scale_d, self.scale_d, self.abs_sum)

    def fixed(self):
        """The (n, 2) int64 values on the device."""
        return _to_fixed(self.values, self.inv_scale_d)

    def get(self) -> np.ndarray:
        return self.fixed().get()

    def check_finite(self) -> None:
        """Raise prepare_gradients' error if the sums the scale was sized by are not finite
        (a host wait: call it once the device has caught up anyway)."""
        if self.abs_sum is not None:
            _check_finite(to_host(self.abs_sum))


def _check_finite(total) -> None:
    if not np.all(np.isfinite(total)):
        raise ValueError("gradient pairs contain NaN or infinite values; check the labels and the objective")


_fixed_sum = cupy.ReductionKernel(
    "float32 g, float64 inv_scale", "int64 total", "(long long)((double)g * inv_scale)", "a + b", "total = a",
    "0", "daskgb_fixed_sum")

# _pow2_at_least(s) / 2**62 and its inverse, on the device (0, and a NaN, give 1 / 2**62:
# check_finite reports a NaN or infinite sum).
_device_scales = cupy.ElementwiseKernel(
    "float64 s", "float64 scale, float64 inv",
    """
    double r = 1.0;
    if (s > 0.0) {
      int e;
      const double m = frexp(s, &e);
      r = ldexp(1.0, m == 0.5 ? e - 1 : e);
    }
    scale = r / 4611686018427387904.0;
    inv = 1.0 / scale;
    """, "daskgb_device_scales")


def prepare_gradients(gpair, abs_sum=None, wait: bool = True):
    """Per-row gradient pairs as int64 fixed point (a FixedGradients), and the (2,) float64
    scale back to double: on the host, or with wait=False a device array made without
    waiting for the device (the caller then calls check_finite() once it has waited anyway).

    abs_sum: the (2,) sums of |gradient| and |hessian| to size the scale by; pass
    the sums over all workers so that every worker quantises alike. By default the
    sums over these rows. See the module docstring for the arithmetic.
    """
    g = cupy.ascontiguousarray(gpair, dtype=cupy.float32)
    if g.ndim != 2 or g.shape[1] != 2:
        raise ValueError(f"gradient pairs must have shape (n_rows, 2), got {g.shape}")
    if not wait:
        total = gradient_abs_sums(g) if abs_sum is None else cupy.asarray(abs_sum, dtype=cupy.float64).reshape(2)
        scale_d, inv_d = _device_scales(total)
        return FixedGradients(g, None, inv_d, scale_d, abs_sum=total), scale_d
    total = np.asarray(to_host(gradient_abs_sums(g) if abs_sum is None else abs_sum), dtype=np.float64).reshape(2)
    _check_finite(total)
    scale = np.array([_pow2_at_least(float(s)) for s in total], dtype=np.float64) / 2.0**62
    return FixedGradients(g, 1.0 / scale, to_device(1.0 / scale), to_device(scale)), scale


def sum_gradients(gpair_native):
    """Sum of all rows' fixed-point gradient pairs: (2,) int64, exact.

    Each column is reduced as a contiguous vector (see gradient_abs_sums)."""
    if isinstance(gpair_native, FixedGradients):
        v = gpair_native.values
        inv = gpair_native.inv_scale_d
        return cupy.stack([_fixed_sum(cupy.ascontiguousarray(v[:, c]), inv[c]) for c in range(2)])
    g = cupy.asarray(gpair_native)
    return cupy.stack([cupy.ascontiguousarray(g[:, c]).sum(dtype=cupy.int64) for c in range(2)])


# --------------------------------------------------------------------------- rows per node
class _PendingCounts:
    """The left-row counts of one apply_splits call, on their way to the host: copied into
    pinned memory behind the launches, read once the stream has passed the copy (by then
    the level's split evaluation has synchronised the host with the device anyway).

    One per partition, reused level after level: a level's counts are always read (the
    next apply_splits resolves them) before the next level's copy is queued."""

    def __init__(self):
        self._mem, self._host, self._size = None, None, 0
        self._event = cupy.cuda.Event(block=False, disable_timing=True)
        self._n_left_d = None
        self._ready = True

    def start(self, n_left_d) -> None:
        k = n_left_d.size
        if k > self._size:
            self._size = max(k, 2 * self._size, 256)
            self._mem = cupy.cuda.alloc_pinned_memory(8 * self._size)
            self._host = np.frombuffer(self._mem, dtype=np.int64, count=self._size)
        n_left_d.data.copy_to_host_async(ctypes.c_void_p(self._host.ctypes.data), 8 * k)
        self._event.record()
        self._n_left_d = n_left_d  # alive until the copy is done
        self._ready = False

    def n_left(self) -> np.ndarray:
        if not self._ready:
            self._event.synchronize()
            self._ready, self._n_left_d = True, None
        return self._host


class RowPartition:
    """Which node each row is in, and each node's rows as one contiguous run of ridx.

    ridx: row ids (uint32) grouped by node; node n owns ridx[start:start + count]
    with (start, count) = segments[n], its rows in increasing order.
    The device holds every node's (start, count) in a table indexed by node id, which
    apply_splits fills in for the children, so histogram launches need not wait for
    the host to learn the children's counts. The host learns them behind the
    launches (_PendingCounts); until then a child's count is bounded by its parent's,
    which is what build_histograms sizes its launch by.
    segments: host dict of the current leaves' (start, count), exact (resolving any
    pending counts); positions[r]: node id of row r (int32), as numpy_backend's
    partition, labelled on first use after the last split.

    The host's copy is arrays indexed by node id, so that a level's bookkeeping is a
    few array operations whatever the number of nodes.
    """

    def __init__(self, n_rows: int, n_trees: int = 1):
        if n_rows * n_trees >= 2**31:
            raise ValueError(f"a worker holds {n_rows} rows for {n_trees} trees; the CUDA backend takes fewer "
                             "than 2**31 rows times trees per worker")
        # A forest of n_trees trees grown together (see numpy_backend.RowPartition): virtual
        # row c * n_rows + r is row r in tree c; node id g belongs to tree g % n_trees.
        self.n_rows, self.n_trees = n_rows, n_trees
        self.ridx = cupy.arange(n_rows * n_trees, dtype=cupy.uint32)
        self._scratch = None
        cap = max(512, 4 * n_trees)
        self.start = np.zeros(cap, dtype=np.int64)
        self.count = np.zeros(cap, dtype=np.int64)  # exact, or the parent's count while pending
        self.leaf = np.zeros(cap, dtype=bool)
        # Children whose counts are on their way: (node ids, _PendingCounts) per apply_splits,
        # and each child's split index in it and side.
        self.split_index = np.zeros(cap, dtype=np.int64)
        self.is_right = np.zeros(cap, dtype=bool)
        self._pending: list = []
        self._counts = _PendingCounts()
        roots = np.arange(n_trees)
        self.start[roots], self.count[roots], self.leaf[roots] = roots * n_rows, n_rows, True
        self.segs_d = cupy.zeros((cap, 2), dtype=cupy.int64)
        self.segs_d[:n_trees] = to_device(np.stack([self.start[:n_trees], self.count[:n_trees]], axis=1))
        self._positions = None

    @property
    def scratch(self):
        """A ridx-sized buffer where apply_splits parks the rows it moves."""
        if self._scratch is None:
            self._scratch = cupy.empty_like(self.ridx)
        return self._scratch

    def row_offsets(self, nodes) -> np.ndarray:
        """(len(nodes),) int64: the first virtual row of each node's tree."""
        return (np.asarray(nodes, dtype=np.int64) % self.n_trees) * self.n_rows

    def _check_leaves(self, nodes: np.ndarray) -> None:
        try:
            ok = self.leaf[nodes].all() and (nodes.size == 0 or nodes.min() >= 0)
        except IndexError:
            ok = False
        if not ok:
            bad = [n for n in nodes.tolist() if not (0 <= n < self.leaf.size and self.leaf[n])]
            raise KeyError(f"node {bad[0]} has no rows in this partition (only current leaves do)")

    def exact(self, nodes) -> np.ndarray:
        """(len(nodes), 2) int64 (start, count) of the nodes' segments."""
        nodes = np.asarray(nodes, dtype=np.int64).ravel()
        self._check_leaves(nodes)
        while self._pending:  # all of them: usually the one level split last
            self._resolve()
        out = np.empty((nodes.size, 2), dtype=np.int64)
        out[:, 0], out[:, 1] = self.start[nodes], self.count[nodes]
        return out

    def _resolve(self) -> None:
        """Turn the children pending on the oldest _PendingCounts into exact segments."""
        nodes, pending = self._pending.pop(0)
        n_left = pending.n_left()[self.split_index[nodes]]
        right = self.is_right[nodes]
        self.start[nodes] += np.where(right, n_left, 0)
        self.count[nodes] = np.where(right, self.count[nodes] - n_left, n_left)

    def count_bounds(self, nodes) -> np.ndarray:
        """(len(nodes),) int64: each node's row count, or its parent's where not yet known."""
        nodes = np.asarray(nodes, dtype=np.int64).ravel()
        self._check_leaves(nodes)
        return self.count[nodes]

    @property
    def segments(self) -> dict:
        nodes = np.flatnonzero(self.leaf)
        seg = self.exact(nodes)
        return dict(zip(nodes.tolist(), map(tuple, seg.tolist())))

    def _ensure_capacity(self, max_node: int) -> None:
        cap = self.leaf.size
        if max_node < cap:
            return
        new = max(2 * cap, max_node + 1)
        for name, fill in (("start", 0), ("count", 0), ("leaf", False), ("split_index", 0), ("is_right", False)):
            a = getattr(self, name)
            b = np.full(new, fill, dtype=a.dtype)
            b[:cap] = a
            setattr(self, name, b)
        bigger = cupy.zeros((new, 2), dtype=cupy.int64)
        bigger[:cap] = self.segs_d
        self.segs_d = bigger

    @property
    def positions(self):
        if self._positions is None:
            self._positions = cupy.empty(self.ridx.size, dtype=cupy.int32)
            nodes = np.flatnonzero(self.leaf)
            _label_rows(self.ridx, self.exact(nodes), nodes, self._positions)
        return self._positions


def new_partition(n_rows: int, n_trees: int = 1) -> RowPartition:
    return RowPartition(n_rows, n_trees)


def _partition_tiles(counts: np.ndarray):
    """(first_tile (k+1,), tile owner (n_tiles,)) of segments cut into _PARTITION_TILE_ROWS runs."""
    tiles_per = -(-counts // _PARTITION_TILE_ROWS)
    first_tile = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(tiles_per, out=first_tile[1:])
    return first_tile, np.repeat(np.arange(counts.size, dtype=np.int64), tiles_per)


def _label_rows(ridx, seg: np.ndarray, nodes: np.ndarray, positions) -> None:
    first_tile, owner = _partition_tiles(seg[:, 1])
    if owner.size:
        info = to_device(np.concatenate([seg[:, 0], seg[:, 1], nodes, first_tile, owner]))
        fn = _kernel("partition.cu", _PARTITION, "label_rows")
        fn((owner.size,), (_PARTITION_THREADS,), (ridx, info, np.int32(nodes.size), positions))


def launch_partition(ell, ridx, scratch, info, stride: int, grid: int, segs, n_left) -> None:
    """partition_count and partition_scatter over `grid` tiles (at least info's n_tiles; see
    kernels/partition.cu for info, whose fields have `stride` entries)."""
    if grid <= 0:
        return
    plan = _plan(ell)
    tile_left = cupy.empty(grid, dtype=cupy.int32)
    count_fn = _kernel("partition.cu", _PARTITION, f"partition_count<{_tf(ell.is_dense)}>")
    count_fn((grid,), (_PARTITION_THREADS,), (
        ell.words, np.int32(ell.bits), np.int32(ell.row_stride), np.uint32(ell.null_symbol), plan.ptrs,
        ridx, info, np.int32(stride), scratch, tile_left))
    scatter_fn = _kernel("partition.cu", _PARTITION, "partition_scatter")
    scatter_fn((grid,), (_PARTITION_THREADS,), (scratch, tile_left, info, np.int32(stride), ridx, segs, n_left))


def apply_splits(ell, part: RowPartition, nids, features, bins, default_left, left_ids, right_ids):
    """Move the rows of each split node nids[i] to its left or right child.

    A row goes left when its bin of the split feature is <= bins[i], or when the
    value is missing and default_left[i] is set. Within a node's segment the left
    rows come first, then the right rows, each in their old order. Two launches
    (kernels/partition.cu) and no device sync: the children's row counts follow
    behind the launches (see RowPartition).
    """
    nids = np.asarray(to_host(nids), dtype=np.int64).ravel()
    k = nids.size
    if k == 0:
        return
    lids = np.asarray(to_host(left_ids), dtype=np.int64).ravel()
    rids = np.asarray(to_host(right_ids), dtype=np.int64).ravel()
    seg = part.exact(nids)
    starts, counts = seg[:, 0], seg[:, 1]
    first_tile, owner = _partition_tiles(counts)
    children = np.concatenate([lids, rids])
    top = int(children.max())
    if top >= part.leaf.size:
        part._ensure_capacity(top)
    part.leaf[nids] = False
    part.leaf[children] = True
    part.start[children] = np.concatenate([starts, starts])
    part.count[children] = np.concatenate([counts, counts])
    part._positions = None
    if owner.size:
        # One host-to-device copy for all of the level's split parameters and tiles (layout in partition.cu).
        info = to_device(np.concatenate([
            [k, owner.size], starts, counts,
            *(np.asarray(to_host(a), dtype=np.int64).ravel() for a in (features, bins, default_left)),
            lids, rids, part.row_offsets(nids), first_tile, owner]))
        n_left_d = cupy.empty(k, dtype=cupy.int64)  # splits without rows have no tiles and stay unread
        launch_partition(ell, part.ridx, part.scratch, info, k, owner.size, part.segs_d, n_left_d)
        # Children of splits with rows wait for their counts; those of empty splits are known (empty).
        has_rows = np.concatenate([counts > 0, counts > 0])
        index = np.arange(k)
        part.split_index[lids], part.split_index[rids] = index, index
        part.is_right[lids], part.is_right[rids] = False, True
        part._counts.start(n_left_d)
        part._pending.append((children[has_rows], part._counts))
    else:
        part.count[children] = 0


# --------------------------------------------------------------------------- sketch
def segmented_searchsorted(a, lo, hi, v, right: bool):
    """sketch._segmented_searchsorted in one launch (kernels/sketch.cu): for each query, the
    place of v[q] in the sorted run a[lo[q]:hi[q]] (searchsorted's side "right" or "left"),
    as an index into a. a, v: float64; lo, hi: int64."""
    a = cupy.ascontiguousarray(a, dtype=cupy.float64)
    v = cupy.ascontiguousarray(v, dtype=cupy.float64)
    lo = cupy.ascontiguousarray(lo, dtype=cupy.int64)
    hi = cupy.ascontiguousarray(hi, dtype=cupy.int64)
    out = cupy.empty(v.size, dtype=cupy.int64)
    fn = _kernel("sketch.cu", _SKETCH, "segmented_search_right" if right else "segmented_search_left")
    _launch_1d(fn, v.size, (a, lo, hi, v, np.int64(v.size), out))
    return out


# --------------------------------------------------------------------------- histograms
def _threads_per_row(width: int) -> int:
    """Histogram threads sharing a row of `width` slots: a power of two, at most a warp."""
    want = -(-max(1, width) // _SLOTS_PER_THREAD)
    return min(32, _HIST_THREADS, 1 << (want - 1).bit_length())


class HistogramSetup:
    """How an ELLPACK matrix's histograms are launched: its feature groups (shared-memory ones,
    and ones too large for shared memory), the threads sharing a row, rows per block pass."""

    def __init__(self, ell):
        plan = _plan(ell)
        self.budget = _shared_budget()
        self.shared, self.single, self.smem, max_width = plan.groups(self.budget)
        self.n_groups = self.shared.shape[0] + self.single.shape[0]
        if not ell.is_dense and self.n_groups > 1 and SPARSE_ONE_PASS:
            # A sparse row's entries in one pass with global atomics, rather than a binary search
            # for each group's run of them (XGBoost's choice when the bins overflow shared memory).
            self.shared, self.single, self.n_groups = self.shared[:0], plan.all_features, 1
        # Slots a row has in a group: the group's features (dense), or about the row's share (sparse).
        width = max(max_width, 1) if ell.is_dense else -(-ell.row_stride // self.n_groups)
        self.threads_per_row = _threads_per_row(width)
        self.rows_per_pass = _HIST_THREADS // self.threads_per_row
        # A thread's run: at most _WINDOW_SLOTS slots, starting anywhere in a word, within three words.
        run = -(-width // self.threads_per_row)
        self.window_fits = ell.is_dense and run <= _WINDOW_SLOTS and 31 + run * ell.bits <= 96

    def tile_rows(self, total_rows: int) -> int:
        """Rows of a tile when a launch covers about total_rows rows: about _BLOCKS_PER_SM blocks
        per SM in all, each at least one pass of the block where the rows allow."""
        target = _BLOCKS_PER_SM * _sm_count(cupy.cuda.runtime.getDevice())
        tiles_wanted = max(1, -(-target // max(1, self.n_groups)))
        tile_rows = max(_MIN_TILE_ROWS, self.rows_per_pass, -(-int(total_rows) // tiles_wanted))
        return min(_MAX_TILE_ROWS, tile_rows)


def histogram_setup(ell) -> HistogramSetup:
    setup = ell.__dict__.get("_cuda_hist_setup")
    if setup is None or setup.budget != _shared_budget():
        setup = ell.__dict__["_cuda_hist_setup"] = HistogramSetup(ell)
    return setup


def _tiles(bounds: np.ndarray, nodes, row_offsets: np.ndarray, tile_rows: int):
    """histogram.cu's tiles: a header row (n_tiles, 0, 0, 0), then rows of (build-node slot,
    node id, tile index, row offset): each node's rows (at most bounds[i]) cut into runs of
    tile_rows; the row offset is the node's tree's first virtual row."""
    per_node = -(-bounds // tile_rows)
    slot = np.repeat(np.arange(len(bounds), dtype=np.int64), per_node)
    out = np.zeros((slot.size + 1, 4), dtype=np.int64)
    out[0, 0] = slot.size
    out[1:, 0] = slot
    out[1:, 1] = np.asarray(nodes, dtype=np.int64)[slot]
    out[1:, 2] = np.arange(slot.size, dtype=np.int64) - (np.cumsum(per_node) - per_node)[slot]
    out[1:, 3] = row_offsets[slot]
    return out


def launch_histograms(ell, gpair_native, ridx, segs, tiles, grid: int, tile_rows: int, hist,
                      setup: HistogramSetup) -> None:
    """Add the tiles' rows into hist ((slots, total_bins, 2) int64, zeroed): the build_histogram
    launches over `grid` tiles (at least the n_tiles of the device array tiles)."""
    if grid <= 0 or ell.n_features == 0:
        return
    if not isinstance(gpair_native, FixedGradients):
        raise TypeError("build_histograms takes the FixedGradients of prepare_gradients")
    plan = _plan(ell)
    dense = _tf(ell.is_dense)
    total_bins = int(ell.cuts.total_bins)
    common = (ell.words, np.int32(ell.bits), np.int32(ell.row_stride), np.uint32(ell.null_symbol), plan.ptrs,
              ridx, gpair_native.values, gpair_native.inv_scale_d, tiles, segs,
              np.int64(tile_rows))
    rest = (np.int32(total_bins), np.int32(setup.threads_per_row), np.int32(HIST_WINDOW and setup.window_fits),
            np.uint64(ell.words.size), hist)
    if setup.shared.shape[0]:
        fn = _kernel("histogram.cu", _HISTOGRAM, f"build_histogram<{dense}, true>")
        if setup.smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = setup.smem
        fn((grid, setup.shared.shape[0]), (_HIST_THREADS,), common + (setup.shared,) + rest, shared_mem=setup.smem)
    if setup.single.shape[0]:
        fn = _kernel("histogram.cu", _HISTOGRAM, f"build_histogram<{dense}, false>")
        fn((grid, setup.single.shape[0]), (_HIST_THREADS,), common + (setup.single,) + rest,
           shared_mem=_group_smem(0, 1))


def build_histograms(ell, gpair_native, part: RowPartition, build_nodes):
    """(len(build_nodes), total_bins, 2) int64 fixed-point gradient sums per bin of each node.

    No device sync: the launch is sized from the host's bounds on the nodes' row counts.
    """
    k = len(build_nodes)
    total_bins = int(ell.cuts.total_bins)
    hist = cupy.zeros((k, total_bins, 2), dtype=cupy.int64)
    if k == 0 or ell.n_features == 0:
        return hist
    if not isinstance(gpair_native, FixedGradients):
        raise TypeError("build_histograms takes the FixedGradients of prepare_gradients")
    setup = histogram_setup(ell)
    bounds = part.count_bounds(build_nodes)
    tile_rows = setup.tile_rows(bounds.sum())
    tiles = _tiles(bounds, build_nodes, part.row_offsets(build_nodes), tile_rows)
    n_tiles = tiles.shape[0] - 1
    if n_tiles == 0:
        return hist
    launch_histograms(ell, gpair_native, part.ridx, part.segs_d, to_device(tiles), n_tiles, tile_rows, hist, setup)
    return hist


def children_histograms(parents, parent_rows, built, build_right, parent_left, parent_right):
    """numpy_backend.children_histograms in one launch (kernels/children.cu)."""
    k = len(parent_rows)
    if not all(a.dtype == cupy.int64 for a in (parents, built, parent_left, parent_right)):
        from . import numpy_backend  # the kernel takes int64 fixed point only

        return numpy_backend.children_histograms(parents, parent_rows, built, build_right, parent_left,
                                                 parent_right)
    row_shape = built.shape[1:]
    hist = cupy.empty((2 * k, *row_shape), dtype=cupy.int64)
    sums = cupy.empty((2 * k, 2), dtype=cupy.int64)
    if k == 0:
        return hist, sums
    info = to_device(np.concatenate([[k], np.asarray(parent_rows, dtype=np.int64),
                                     np.asarray(build_right, dtype=np.int64)]))
    launch_children(parents, built, parent_left, parent_right, info, k, k, hist, sums)
    return hist, sums


def launch_children(parents, built, parent_left, parent_right, info, stride: int, k_bound: int, hist, sums) -> None:
    """children_histograms for at most k_bound splits (kernels/children.cu reads k from info)."""
    row_len = math.prod(built.shape[1:])
    fn = _kernel("children.cu", _CHILDREN, "children_histograms")
    _launch_1d(fn, max(k_bound * row_len, 4 * k_bound), (
        cupy.ascontiguousarray(parents), cupy.ascontiguousarray(built), cupy.ascontiguousarray(parent_left),
        cupy.ascontiguousarray(parent_right), info, np.int32(stride), np.int64(row_len), hist, sums))


_COUNTERS: dict = {}


def _split_counters(k: int):
    """Per-node block counters of the split kernel: zero between launches (its last block per
    node resets its counter), so one array serves every launch on a stream (launches on one
    stream run one after another; another stream gets its own array)."""
    key = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)
    c = _COUNTERS.get(key)
    if c is None or c.size < k:
        c = _COUNTERS[key] = cupy.zeros(max(k, 1024), dtype=cupy.uint32)
    return c


def _forget_split_counters(stream) -> None:
    """Drop a stream's counters (a CUDA graph's capture stream, when the graph goes)."""
    _COUNTERS.pop((cupy.cuda.runtime.getDevice(), stream.ptr), None)


@functools.lru_cache(maxsize=16)
def _all_features_on(device: int, n_features: int):
    return cupy.ones(n_features, dtype=cupy.uint8)


def _all_features(n_features: int):
    """A mask letting every feature split (cached: made once per device and width)."""
    return _all_features_on(cupy.cuda.runtime.getDevice(), n_features)


def evaluate_splits(cuts, hist, parent, scale, params, feature_mask=None, monotone=None, bounds=None):
    """Best split of each node (see split.evaluate_splits), from int64 histograms.

    feature_mask: None, (n_features,) for all nodes or (k, n_features) per node.
    monotone / bounds: monotone constraints; the kernel does not implement them, so
    with constraints set the array-operation reference runs on the device instead.

    kernels/split.cu computes exactly what split.evaluate_splits computes, with
    one device sync (the records) instead of several; the setting
    daskgb.training.split-kernel off selects the array-operation reference on the device.
    """
    from .. import config

    arrays = _cuts_arrays(cuts)
    k = hist.shape[0]
    n_features = len(arrays.host[0]) - 1
    if (not config.get("training.split-kernel") or k == 0 or n_features == 0 or hist.dtype != cupy.int64
            or monotone is not None):
        ptrs, values, min_values = arrays.host
        return _split.evaluate_splits(cupy, hist, parent, scale, ptrs, values, min_values, params, feature_mask,
                                      monotone, bounds)
    if feature_mask is None:
        mask = None
    else:
        mask = to_device(np.asarray(to_host(feature_mask)).astype(np.uint8))
        if mask.shape not in ((n_features,), (k, n_features)):
            raise ValueError(f"feature_mask must have shape ({n_features},) or ({k}, {n_features}), got {mask.shape}")
    records, left, right = launch_evaluate(cuts, hist, parent, scale, params, mask, k, k_live=None)
    return to_host(records).view(SPLIT_DTYPE), left, right


_NO_LIVE_COUNT: dict = {}
_SCALES: OrderedDict = OrderedDict()


def _device_scale(scale):
    """The (2,) float64 scale on the device: itself if it is there, else a copy, cached by
    value (a tree's levels share one scale: one upload a tree, not one a level)."""
    if isinstance(scale, cupy.ndarray):
        return scale
    host = np.ascontiguousarray(scale, dtype=np.float64).reshape(2)
    key = (cupy.cuda.runtime.getDevice(), host.tobytes())
    hit = _SCALES.get(key)
    if hit is None:
        hit = _SCALES[key] = to_device(host)
        while len(_SCALES) > 8:
            _SCALES.popitem(last=False)
    return hit


def launch_evaluate(cuts, hist, parent, scale, params, mask, k_bound: int, k_live=None):
    """kernels/split.cu over k_bound nodes: (records as SplitRecord bytes, left, right) on the
    device. mask: None, a (n_features,) uint8 mask for all nodes, or (k_bound, n_features).
    k_live: None (k_bound nodes), or a device int64 holding the number of nodes (<= k_bound)."""
    arrays = _cuts_arrays(cuts)
    n_features = len(arrays.host[0]) - 1
    ptrs, values, min_values = arrays.device
    hist = cupy.ascontiguousarray(hist)
    parent = cupy.ascontiguousarray(parent, dtype=cupy.int64)
    # The kernel reads node i's mask at mask[i * mask_stride]: stride 0 shares one row.
    if mask is None:
        mask, mask_stride = _all_features(n_features), 0
    else:
        mask_stride = 0 if mask.ndim == 1 else n_features
    device = cupy.cuda.runtime.getDevice()
    if k_live is None:
        k_static = k_bound
        k_live = _NO_LIVE_COUNT.get(device)
        if k_live is None:
            k_live = _NO_LIVE_COUNT[device] = cupy.zeros(1, dtype=cupy.int64)  # never read
    else:
        k_static = -1
    records = cupy.empty(k_bound * SPLIT_DTYPE.itemsize, dtype=cupy.uint8)  # SplitRecord bytes
    # Enough blocks to fill the device: a node's features are split among n_chunks blocks.
    n_chunks = min(-(-n_features // (_SPLIT_THREADS // 32)), max(1, -(-2 * _sm_count(device) // k_bound)))
    partial = cupy.empty(k_bound * n_chunks * _CANDIDATE_BYTES, dtype=cupy.uint8) if n_chunks > 1 else records
    left = cupy.empty((k_bound, 2), dtype=cupy.int64)
    right = cupy.empty((k_bound, 2), dtype=cupy.int64)
    scale = _device_scale(scale)
    fn = _kernel("split.cu", _SPLIT, "evaluate_splits")
    fn((k_bound, n_chunks), (_SPLIT_THREADS,), (
        hist, parent, np.int32(hist.shape[1]), ptrs, np.int32(n_features), values, np.int32(values.size), min_values,
        mask, np.int32(mask_stride), scale, np.float64(params.reg_lambda),
        np.float64(params.reg_alpha), np.float64(params.min_child_weight), np.float64(params.max_delta_step),
        partial, _split_counters(k_bound), records, left, right, np.int32(k_static), k_live,
    ))
    return records, left, right


# --------------------------------------------------------------------------- prediction
def predict_margin(X, nodes, tree_offsets, out, missing: float = np.nan):
    """Add the leaf values of every tree to out (float32), tree after tree.

    X: (n_rows, n_features) float32; nodes: PREDICT_NODE_DTYPE of all trees
    concatenated (host), tree t owning nodes[tree_offsets[t]:tree_offsets[t+1]].
    A value goes left when it is < threshold; a missing one takes default_left.
    """
    if out.dtype != cupy.float32:
        raise TypeError(f"predict_margin adds into a float32 array, got {out.dtype}")
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    offsets = np.asarray(to_host(tree_offsets), dtype=np.int32).ravel()
    n_trees = offsets.size - 1
    if n_rows == 0 or n_trees <= 0:
        return out
    # cupy has no structured dtypes: the records travel as bytes and the kernel
    # reads them as PredictNode (kernels/common.cuh).
    node_bytes = cupy.asarray(np.ascontiguousarray(to_host(nodes), dtype=PREDICT_NODE_DTYPE).view(np.uint8))
    acc = out if out.flags.c_contiguous else cupy.ascontiguousarray(out)
    fn = _kernel("predict.cu", _PREDICT, "predict_margin")
    _launch_1d(fn, n_rows, (X, np.int64(n_rows), np.int32(n_features), node_bytes, cupy.asarray(offsets),
                            np.int32(n_trees), np.float32(missing), acc))
    if acc is not out:
        out[...] = acc
    return out


def add_leaf_values(ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row of ell (binned with the training cuts),
    each row routed by its bins in one launch (kernels/predict.cu add_leaf_values; the
    reference is numpy_backend.add_leaf_values). margin: float32, one value a row, any stride."""
    n = int(ell.n_rows)
    if n == 0 or tree.n_nodes == 0:
        return
    if margin.dtype != cupy.float32 or margin.shape != (n,):
        raise TypeError(f"add_leaf_values adds into a float32 array of {n} rows, got {margin.dtype} {margin.shape}")
    m = tree.n_nodes
    # One host-to-device copy: the (left, right, feature, bin) int4 records, then the leaf
    # values, then default_left.
    host = np.empty(20 * m + m, dtype=np.uint8)
    host[: 16 * m].view(np.int32).reshape(m, 4)[...] = np.stack(
        [tree.left, tree.right, tree.feature, tree.bin], axis=1)
    host[16 * m : 20 * m].view(np.float32)[...] = tree.value
    host[20 * m :] = tree.default_left.astype(np.int8).view(np.uint8)
    table = cupy.asarray(host)
    plan = _plan(ell)
    fn = _kernel("predict.cu", _PREDICT, f"add_leaf_values<{_tf(ell.is_dense)}>")
    _launch_1d(fn, n, (ell.words, np.int32(ell.bits), np.int32(ell.row_stride), np.uint32(ell.null_symbol),
                       plan.ptrs, np.int64(n), table[: 16 * m], table[20 * m :], table[16 * m : 20 * m],
                       margin, np.int64(margin.strides[0] // 4)))


# --------------------------------------------------------------------------- host pages
def host_copy(a) -> np.ndarray:
    """A host copy of device array a in page-locked memory, so that copying it back to the
    device runs asynchronously at full bus bandwidth (external.PagedEllpack's pages); in
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
    """Host pages to this device, each next page's copy started ahead on a stream of its own.

    get(key, host, next_key, next_host) returns host's words on the device (the copy made
    ahead if it was of `key`, else a copy now) and starts the copy of next_host. The
    destination is allocated in the current stream's order and the copy stream waits for
    that point, so memory the pool hands back is never overwritten under queued kernels;
    the current stream waits for the copy before it uses the words."""

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


# --------------------------------------------------------------------------- gradient-based sampling
def contiguous_pairs(gpair):
    """(n, 2) gradient pairs as the sampling kernels read them: contiguous float32."""
    return cupy.ascontiguousarray(gpair, dtype=cupy.float32)


def mvs_extremes(gpair, mvs_lambda: float) -> tuple[int, float, float]:
    """(rows with r > 0, smallest positive r, largest r) of the rows' regularised gradients
    r = sqrt(g^2 + lambda h^2) (kernels/sampling.cu; one launch, one copy back)."""
    g = contiguous_pairs(gpair)
    out = cupy.asarray(np.array([0, np.float64(np.inf).view(np.uint64), 0], dtype=np.uint64))
    fn = _kernel("sampling.cu", _SAMPLING, "mvs_extremes")
    _launch_1d(fn, g.shape[0], (g, np.int64(g.shape[0]), np.float64(mvs_lambda), out))
    count, lo, hi = to_host(out)
    return int(count), float(np.uint64(lo).view(np.float64)), float(np.uint64(hi).view(np.float64))


def mvs_candidate_stats(gpair, mvs_lambda: float, cands: np.ndarray, scale: float) -> np.ndarray:
    """(4, m) int64 for ascending candidates c_j: #{r < c_j}, #{r <= c_j} and the sums of
    trunc(r / scale) over those rows, over the rows with r > 0 (sampling.mvs_threshold's
    evaluate; kernels/sampling.cu, one launch, no sort)."""
    g = contiguous_pairs(gpair)
    m = int(cands.size)
    stats = cupy.zeros(4 * (m + 1), dtype=cupy.uint64)
    fn = _kernel("sampling.cu", _SAMPLING, "mvs_candidate_stats")
    n = g.shape[0]
    blocks = max(1, min(-(-n // _THREADS), 4 * _sm_count(cupy.cuda.runtime.getDevice())))
    fn((blocks,), (_THREADS,), (g, np.int64(n), np.float64(mvs_lambda), cupy.asarray(cands, dtype=cupy.float64),
                                np.int32(m), np.float64(scale), stats))
    per_k = to_host(stats).astype(np.int64).reshape(4, m + 1)
    return np.cumsum(per_k, axis=1)[:, :m]


def mvs_sample(gpair, mvs_lambda: float, mu: float, key: int, first_row: int, inplace: bool = False):
    """The sampled gradient pairs: each row's pair times 1 / p if kept, else 0 (sampling.mvs_sample);
    inplace: into gpair itself where it is a contiguous float32 array (a row is read, then written)."""
    g = contiguous_pairs(gpair)
    out = g if inplace else cupy.empty_like(g)
    fn = _kernel("sampling.cu", _SAMPLING, "mvs_sample")
    _launch_1d(fn, g.shape[0], (g, np.int64(g.shape[0]), np.float64(mvs_lambda), np.float64(mu), np.uint64(key),
                                np.uint64(first_row), out))
    return out
