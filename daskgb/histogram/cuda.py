"""The histogram stage on a GPU: int64 fixed-point gradient sums per bin (kernels/histogram.cu, histogram_children.cu).

Same names and results as histogram/reference.py, the oracle: the fixed-point sums times the
scale are the float sums up to the quantisation (histogram/quantiser.py), and exact, so the
same whatever the order of the atomic adds. A launch is sized from the host's bounds on the
nodes' row counts: no device sync.
"""

from __future__ import annotations

import functools
import math

import cupy
import numpy as np

from .. import device_arrays
from ..arrays import to_host
from ..backend import kernels
from ..ellpack.cuda import device_plan, ellpack_view
from ..layouts import CHILDREN_INFO, HISTOGRAM_ARGS, HISTOGRAM_TILE_COLUMNS, WINDOW_SLOTS, kernel_args
from .quantiser import check_finite, fixed_point_scale

_HISTOGRAM = kernels.declare("histogram.cu", tuple(f"build_histogram<{d}, {s}>" for d in ("true", "false")
                                                    for s in ("true", "false")))
_CHILDREN = kernels.declare("histogram_children.cu", ("children_histograms",))

# Shared memory a histogram block may use for its private copy of a feature group's
# bins (_BIN_BYTES per bin, and 4 bytes per feature of the group for its bin offsets).
# None: as much as lets two blocks share an SM (half an SM's shared memory, less the
# per-block reservation; 113 KiB on an H100 or H200). More than 48 KiB needs
# max_dynamic_shared_size_bytes (set below). A larger budget means fewer feature groups
# (each re-reads its rows' ids and gradients) but fewer blocks per SM: measured with
# benchmarks/setting_sweep.py (H200, ms a round), two blocks per SM against one (227 KiB): Year
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
# slot (at most layouts.WINDOW_SLOTS of them).
HIST_WINDOW = True

# Sparse rows whose bins need several shared-memory groups: one pass with global atomics
# (True) or a pass per group over the group's run of each row (False).
SPARSE_ONE_PASS = True

# Slots of a row one histogram thread adds, at most: rows with more slots in a feature
# group are shared by several threads (a power of two of them, up to a warp).
_SLOTS_PER_THREAD = 8

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

def gradient_abs_sums(gpair):
    """(2,) float64 device array: sums of |gradient| and |hessian| over the rows, each the double
    nearest the exact sum (device_arrays.gradient_abs_sums: the same whatever the order the rows
    are added in, so the fixed-point scale is too).

    It stays on the device so that, across GPU workers, NCCL sums it (no host round trip).
    """
    return device_arrays.gradient_abs_sums(cupy.ascontiguousarray(gpair, dtype=cupy.float32))

class FixedGradients:
    """Per-row gradient pairs in int64 fixed point, held as their float32 values and the
    scale: the kernels convert a row as they load it (8 bytes a row read and kept, not 16),
    exactly as device_arrays.to_fixed converts. Row slices are views; get() and fixed() give the int64
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
        return device_arrays.to_fixed(self.values, self.inv_scale_d)

    def get(self) -> np.ndarray:
        return self.fixed().get()

    def check_finite(self) -> None:
        """Raise prepare_gradients' error if the sums the scale was sized by are not finite
        (a host wait: call it once the device has caught up anyway)."""
        if self.abs_sum is not None:
            check_finite(to_host(self.abs_sum))

def prepare_gradients(gpair, abs_sum=None, wait: bool = True):
    """Per-row gradient pairs as int64 fixed point (a FixedGradients), and the (2,) float64
    scale back to double: on the host, or with wait=False a device array made without
    waiting for the device (the caller then calls check_finite() once it has waited anyway).

    abs_sum: the (2,) sums of |gradient| and |hessian| to size the scale by; pass
    the sums over all workers so that every worker quantises alike. By default the
    sums over these rows. histogram/quantiser.py says the arithmetic.
    """
    g = cupy.ascontiguousarray(gpair, dtype=cupy.float32)
    if g.ndim != 2 or g.shape[1] != 2:
        raise ValueError(f"gradient pairs must have shape (n_rows, 2), got {g.shape}")
    if not wait:
        total = gradient_abs_sums(g) if abs_sum is None else cupy.asarray(abs_sum, dtype=cupy.float64).reshape(2)
        scale_d, inv_d = device_arrays.fixed_point_scales(total)
        return FixedGradients(g, None, inv_d, scale_d, abs_sum=total), scale_d
    scale = fixed_point_scale(to_host(gradient_abs_sums(g) if abs_sum is None else abs_sum))
    return FixedGradients(g, 1.0 / scale, cupy.asarray(1.0 / scale), cupy.asarray(scale)), scale

def sum_gradients(gpair_native):
    """Sum of all rows' fixed-point gradient pairs: (2,) int64, exact (integers add in any order)."""
    if isinstance(gpair_native, FixedGradients):
        return device_arrays.fixed_sums(gpair_native.values, gpair_native.inv_scale_d)
    g = cupy.ascontiguousarray(gpair_native, dtype=cupy.int64)
    return device_arrays.pair_sums(g, g.shape[0])

def _threads_per_row(width: int) -> int:
    """Histogram threads sharing a row of `width` slots: a power of two, at most a warp."""
    want = -(-max(1, width) // _SLOTS_PER_THREAD)
    return min(32, _HIST_THREADS, 1 << (want - 1).bit_length())

class HistogramSetup:
    """How an ELLPACK matrix's histograms are launched: its feature groups (shared-memory ones,
    and ones too large for shared memory), the threads sharing a row, rows per block pass."""

    def __init__(self, ell):
        ptrs = device_plan(ell).ptrs_host
        self.budget = _shared_budget()
        shared, single, self.smem = _feature_groups(ptrs, self.budget)
        self.shared = cupy.asarray(np.asarray(shared, dtype=np.int32).reshape(-1, 2))
        self.single = cupy.asarray(np.asarray(single, dtype=np.int32).reshape(-1, 2))
        max_width = max((b - a for a, b in shared), default=0)
        self.n_groups = self.shared.shape[0] + self.single.shape[0]
        if not ell.is_dense and self.n_groups > 1 and SPARSE_ONE_PASS:
            # A sparse row's entries in one pass with global atomics, rather than a binary search
            # for each group's run of them (XGBoost's choice when the bins overflow shared memory).
            every_feature = cupy.asarray(np.array([[0, len(ptrs) - 1]], dtype=np.int32))
            self.shared, self.single, self.n_groups = self.shared[:0], every_feature, 1
        # Slots a row has in a group: the group's features (dense), or about the row's share (sparse).
        width = max(max_width, 1) if ell.is_dense else -(-ell.row_stride // self.n_groups)
        self.threads_per_row = _threads_per_row(width)
        self.rows_per_pass = _HIST_THREADS // self.threads_per_row
        # A thread's run: at most WINDOW_SLOTS slots, starting anywhere in a word, within three words.
        run = -(-width // self.threads_per_row)
        self.window_fits = ell.is_dense and run <= WINDOW_SLOTS and 31 + run * ell.bits <= 96

    def tile_rows(self, total_rows: int) -> int:
        """Rows of a tile when a launch covers about total_rows rows: about _BLOCKS_PER_SM blocks
        per SM in all, each at least one pass of the block where the rows allow."""
        target = _BLOCKS_PER_SM * kernels.sm_count()
        tiles_wanted = max(1, -(-target // max(1, self.n_groups)))
        tile_rows = max(_MIN_TILE_ROWS, self.rows_per_pass, -(-int(total_rows) // tiles_wanted))
        return min(_MAX_TILE_ROWS, tile_rows)

def histogram_setup(ell) -> HistogramSetup:
    setup = ell.__dict__.get("_cuda_hist_setup")
    if setup is None or setup.budget != _shared_budget():
        setup = ell.__dict__["_cuda_hist_setup"] = HistogramSetup(ell)
    return setup

_TILE_COLUMN = {name: i for i, name in enumerate(HISTOGRAM_TILE_COLUMNS)}

def tiles_of(bounds: np.ndarray, nodes, row_offsets: np.ndarray, tile_rows: int):
    """histogram.cu's tiles: a header row (n_tiles, 0, 0, 0), then rows of (build-node slot,
    node id, tile index, row offset) (layouts.HISTOGRAM_TILE_COLUMNS): each node's rows (at
    most bounds[i]) cut into runs of tile_rows; the row offset is the node's tree's first
    virtual row."""
    per_node = -(-bounds // tile_rows)
    slot = np.repeat(np.arange(len(bounds), dtype=np.int64), per_node)
    out = np.zeros((slot.size + 1, len(HISTOGRAM_TILE_COLUMNS)), dtype=np.int64)
    out[0, 0] = slot.size
    out[1:, _TILE_COLUMN["slot"]] = slot
    out[1:, _TILE_COLUMN["node"]] = np.asarray(nodes, dtype=np.int64)[slot]
    out[1:, _TILE_COLUMN["index"]] = np.arange(slot.size, dtype=np.int64) - (np.cumsum(per_node) - per_node)[slot]
    out[1:, _TILE_COLUMN["row_offset"]] = row_offsets[slot]
    return out

def launch_histograms(ell, gpair_native, ridx, segs, tiles, grid: int, tile_rows: int, hist,
                      setup: HistogramSetup) -> None:
    """Add the tiles' rows into hist ((slots, total_bins, 2) int64, zeroed): the build_histogram
    launches over `grid` tiles (at least the n_tiles of the device array tiles)."""
    if grid <= 0 or ell.n_features == 0:
        return
    if not isinstance(gpair_native, FixedGradients):
        raise TypeError("build_histograms takes the FixedGradients of prepare_gradients")
    dense = kernels.template_flag(ell.is_dense)
    view = ellpack_view(ell)
    args = dict(ridx=ridx, gpair=gpair_native.values, inv_scale=gpair_native.inv_scale_d, tiles=tiles, segs=segs,
                hist=hist, tile_rows=tile_rows, total_bins=int(ell.cuts.total_bins),
                threads_per_row=setup.threads_per_row, window=int(HIST_WINDOW and setup.window_fits))
    if setup.shared.shape[0]:
        fn = kernels.function("histogram.cu", _HISTOGRAM, f"build_histogram<{dense}, true>")
        if setup.smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = setup.smem
        fn((grid, setup.shared.shape[0]), (_HIST_THREADS,), (view, kernel_args(HISTOGRAM_ARGS, groups=setup.shared,
                                                                                 **args)), shared_mem=setup.smem)
    if setup.single.shape[0]:
        fn = kernels.function("histogram.cu", _HISTOGRAM, f"build_histogram<{dense}, false>")
        fn((grid, setup.single.shape[0]), (_HIST_THREADS,), (view, kernel_args(HISTOGRAM_ARGS, groups=setup.single,
                                                                                 **args)),
           shared_mem=_group_smem(0, 1))

def build_histograms(ell, gpair_native, part, build_nodes):
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
    tiles = tiles_of(bounds, build_nodes, part.row_offsets(build_nodes), tile_rows)
    n_tiles = tiles.shape[0] - 1
    if n_tiles == 0:
        return hist
    launch_histograms(ell, gpair_native, part.ridx, part.segs_d, cupy.asarray(tiles), n_tiles, tile_rows, hist, setup)
    return hist

def children_histograms(parents, parent_rows, built, build_right, parent_left, parent_right):
    """histogram/reference.py's children_histograms in one launch (kernels/histogram_children.cu)."""
    k = len(parent_rows)
    if not all(a.dtype == cupy.int64 for a in (parents, built, parent_left, parent_right)):
        from . import reference  # the kernel takes int64 fixed point only

        return reference.children_histograms(parents, parent_rows, built, build_right, parent_left,
                                                 parent_right)
    row_shape = built.shape[1:]
    hist = cupy.empty((2 * k, *row_shape), dtype=cupy.int64)
    sums = cupy.empty((2 * k, 2), dtype=cupy.int64)
    if k == 0:
        return hist, sums
    info = cupy.asarray(CHILDREN_INFO.build(k, k=[k], parent_row=parent_rows, build_right=build_right))
    launch_children(parents, built, parent_left, parent_right, info, k, k, hist, sums)
    return hist, sums

def launch_children(parents, built, parent_left, parent_right, info, stride: int, k_bound: int, hist, sums) -> None:
    """children_histograms for at most k_bound splits (kernels/histogram_children.cu reads k from info)."""
    row_len = math.prod(built.shape[1:])
    fn = kernels.function("histogram_children.cu", _CHILDREN, "children_histograms")
    kernels.launch_1d(fn, max(k_bound * row_len, 4 * k_bound), (
        cupy.ascontiguousarray(parents), cupy.ascontiguousarray(built), cupy.ascontiguousarray(parent_left),
        cupy.ascontiguousarray(parent_right), info, np.int32(stride), np.int64(row_len), hist, sums))
