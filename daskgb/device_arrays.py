"""Array steps on device arrays as daskgb's own kernels (kernels/arrays.cu, reduce.cu): nothing for NVRTC to compile.

CuPy compiles each element-wise operation, reduction and index operation with NVRTC the first
time a process uses it (a CUB sum takes seconds); a first fit would wait for dozens. These
kernels ship compiled with daskgb instead (backend/shipped.py). What they compute:

- fills, ranges and copies as CuPy's (fill, full, arange, tile_row, stack, contiguous_float32, copy_into);
- counts, and sums of integers (fixed-point gradients, histogram bins): exact in any order;
- float sums, exactly (kernels/exact_sum.cuh): the double nearest the exact sum, the same for
  any order of the terms, so for any grid and device; CuPy's sums round in CUB's order, which
  depends on the device.
"""

from __future__ import annotations

import cupy
import numpy as np

from .backend import kernels

_ARRAYS = kernels.declare("arrays.cu", tuple(f"fill<{t}>" for t in (
    "float", "double", "long long", "int", "unsigned int", "unsigned char")) + tuple(
    f"iota<{t}>" for t in ("unsigned int", "long long")) + ("tile_row", "copy_strided", "add_leaf_values_to"))
_REDUCE = kernels.declare("reduce.cu", tuple(f"checked_float32<{t}>" for t in (
    "float", "double", "bool", "signed char", "short", "int", "long long", "unsigned char", "unsigned short",
    "unsigned int", "unsigned long long")) + (
    "count_missing", "present_counts", "longest_present_row", "gradient_abs_sums", "fixed_point_scales", "to_fixed",
    "fixed_sums", "pair_sums"))

# kernels/exact_sum.cuh's kExactSlots: the int64 slots of one exact sum (89 digits and the
# flags); a launch's sums take k * EXACT_SLOTS + 1, zeroed (tests/test_device_kernels.py checks it).
EXACT_SLOTS = 90

# numpy dtype -> the C++ type of the kernels' templates.
C_TYPES = {np.dtype(t): c for t, c in (
    (np.float32, "float"), (np.float64, "double"), (np.bool_, "bool"), (np.int8, "signed char"),
    (np.int16, "short"), (np.int32, "int"), (np.int64, "long long"), (np.uint8, "unsigned char"),
    (np.uint16, "unsigned short"), (np.uint32, "unsigned int"), (np.uint64, "unsigned long long"))}

# A kernel's optional array left out: a null device pointer (8 zero bytes, as CuPy passes None).
NULL = np.uint64(0)


def optional(a):
    """a, or NULL for None: a kernel's optional array argument."""
    return NULL if a is None else a


# Blocks per SM of the grid-stride reductions: enough to fill the device, few enough that
# their per-warp (or per-block) atomics stay cheap.
_BLOCKS_PER_SM = 4


def _arrays(name: str):
    return kernels.function("arrays.cu", _ARRAYS, name)


def _reduce(name: str):
    return kernels.function("reduce.cu", _REDUCE, name)


def reduction_grid(n: int) -> int:
    """Blocks of a grid-stride reduction over n items (THREADS threads each)."""
    return max(1, min(-(-int(n) // kernels.THREADS), _BLOCKS_PER_SM * kernels.sm_count()))


def launch_reduction(fn, n: int, args) -> None:
    """A grid-stride reduction over n items; launched even for n == 0 where the kernel writes a
    result (the exact sums' last block)."""
    fn((reduction_grid(n),), (kernels.THREADS,), args)


def exact_accumulator(k_sums: int):
    """Zeroed scratch of k_sums exact sums (and the count of blocks done)."""
    return cupy.zeros(k_sums * EXACT_SLOTS + 1, dtype=cupy.int64)


# ---------------------------------------------------------------------------- making arrays
def fill(out, value) -> None:
    """out[...] = value (out C-contiguous, of a dtype in C_TYPES but bool)."""
    if not out.flags.c_contiguous:
        raise ValueError("fill takes C-contiguous arrays")
    if out.dtype == np.bool_:
        raise TypeError("fill takes numeric arrays")
    fn = _arrays(f"fill<{C_TYPES[out.dtype]}>")
    kernels.launch_1d(fn, out.size, (out, np.int64(out.size), out.dtype.type(value)))


def full(shape, value, dtype):
    """cupy.full(shape, value, dtype)."""
    out = cupy.empty(shape, dtype=dtype)
    fill(out, value)
    return out


def arange(n: int, dtype):
    """cupy.arange(n, dtype=dtype) for uint32 and int64."""
    out = cupy.empty(int(n), dtype=dtype)
    kernels.launch_1d(_arrays(f"iota<{C_TYPES[out.dtype]}>"), out.size, (out, np.int64(out.size)))
    return out


def tile_row(row, n_rows: int):
    """(n_rows, k) float32 rows, each the k float32 values of the device vector row."""
    row = cupy.asarray(row, dtype=cupy.float32)
    k = int(row.size)
    out = cupy.empty((int(n_rows), k), dtype=cupy.float32)
    kernels.launch_1d(_arrays("tile_row"), out.size, (out, np.int64(out.size), row, np.int32(k)))
    return out


def copy_into(dst, src) -> None:
    """dst[...] = src for float32 1-D views of one length (a column of a margin, and back)."""
    if dst.dtype != np.float32 or src.dtype != np.float32 or dst.ndim != 1 or dst.shape != src.shape:
        raise ValueError("copy_into takes float32 vectors of one length")
    strides = [a.strides[0] // a.itemsize for a in (src, dst)]
    if any(a.strides[0] % a.itemsize for a in (src, dst)):
        raise ValueError("copy_into takes views with whole-element strides")
    n = int(dst.size)
    kernels.launch_1d(_arrays("copy_strided"), n, (src, np.int64(strides[0]), dst, np.int64(strides[1]), np.int64(n)))


def add_leaf_values(margin, column, leaf_values, positions, n_trees: int) -> None:
    """margin[r] (or margin[r, column]) += the float whose bits are leaf_values[positions[r] //
    n_trees] (positions[r] where n_trees == 1), for the rows of positions: a round's tree moves the
    margins (growth/device.py's QueuedForest.add_to). margin: C-contiguous float32 (n,) or (n, K)."""
    if margin.dtype != np.float32 or not margin.flags.c_contiguous:
        raise ValueError("add_leaf_values takes a C-contiguous float32 margin")
    stride = 1 if margin.ndim == 1 else margin.shape[1]
    target = margin if margin.ndim == 1 else margin[:, column]  # a view: the kernel writes through it
    n = int(positions.size)
    kernels.launch_1d(_arrays("add_leaf_values_to"), n, (target, np.int64(stride), leaf_values, positions,
                                                         np.int64(n), np.int32(n_trees)))


def stack(arrays):
    """cupy.stack of equal-shaped arrays, by device-to-device copies (no kernel to compile)."""
    first = arrays[0]
    out = cupy.empty((len(arrays),) + tuple(first.shape), dtype=first.dtype)
    for i, a in enumerate(arrays):
        if a.shape != first.shape:
            raise ValueError("stack takes arrays of one shape")
        if a.dtype != out.dtype or not a.flags.c_contiguous:
            a = cupy.ascontiguousarray(a, dtype=out.dtype)
        out[i].data.copy_from_device_async(a.data, a.nbytes)
    return out


# ---------------------------------------------------------------------------- checked copies
def _element_stride(a):
    """a's step between elements in elements, where a is 1-D, or C-contiguous (1): else None."""
    if a.flags.c_contiguous:
        return 1
    if a.ndim == 1 and a.strides[0] % a.itemsize == 0:
        return a.strides[0] // a.itemsize
    return None


def checked_float32(a, copy: bool):
    """(a as float32, the count of its non-finite values, the count of its negative ones), the
    float32 values as numpy's a.astype(float32, copy=copy) gives them and the counts of those
    (one host wait, for the counts). None where a's dtype or layout is not one the kernel reads
    (float16; N-D arrays that are not C-contiguous)."""
    stride = _element_stride(a)
    if stride is None or a.dtype not in C_TYPES:
        return None
    keep = a.dtype == np.float32 and not copy and stride == 1
    out = a if keep else cupy.empty(a.shape, dtype=cupy.float32)
    counts = cupy.zeros(2, dtype=cupy.uint64)
    n = int(a.size)
    launch_reduction(_reduce(f"checked_float32<{C_TYPES[a.dtype]}>"), n,
                     (a, np.int64(n), np.int64(stride), NULL if keep else out, counts))
    bad, negative = (int(v) for v in counts.get())
    return out, bad, negative


def contiguous_float32(a):
    """a as a C-contiguous float32 array: a itself where it is one, else a copy (by kernel for
    1-D views and for the C-contiguous arrays of C_TYPES, else cupy.ascontiguousarray)."""
    if a.dtype == np.float32 and a.flags.c_contiguous:
        return a
    stride = _element_stride(a)
    if stride is None or a.dtype not in C_TYPES:
        return cupy.ascontiguousarray(a, dtype=cupy.float32)
    out = cupy.empty(a.shape, dtype=cupy.float32)
    counts = cupy.zeros(2, dtype=cupy.uint64)  # not read: no wait
    n = int(a.size)
    launch_reduction(_reduce(f"checked_float32<{C_TYPES[a.dtype]}>"), n, (a, np.int64(n), np.int64(stride), out,
                                                                          counts))
    return out


# ---------------------------------------------------------------------------- counts
def count_missing(X, missing: float) -> int:
    """Entries of the float32 array X that are NaN or equal to `missing` (one host wait)."""
    X = contiguous_float32(X)
    count = cupy.zeros(1, dtype=cupy.uint64)
    n = int(X.size)
    if n:
        launch_reduction(_reduce("count_missing"), n, (X, np.int64(n), np.float32(missing), count))
    return int(count.get()[0])


def present_counts(X, missing: float):
    """(n_rows,) int64: the entries of each row of the 2-D X that are neither NaN nor `missing`."""
    X = contiguous_float32(X)
    n_rows, n_features = X.shape
    out = cupy.empty(n_rows, dtype=cupy.int64)
    warps_per_block = kernels.THREADS // 32
    if n_rows:
        blocks = max(1, min(-(-n_rows // warps_per_block), 2**31 - 1))
        _reduce("present_counts")((blocks,), (kernels.THREADS,), (X, np.int64(n_rows), np.int32(n_features),
                                                                  np.float32(missing), out))
    return out


def longest_present_row(X, missing: float) -> int:
    """The most entries of a row of the 2-D X that are neither NaN nor `missing`: present_counts'
    max, without the per-row array or a CuPy max (one host wait)."""
    X = contiguous_float32(X)
    n_rows, n_features = X.shape
    longest = cupy.zeros(1, dtype=cupy.uint64)
    if n_rows:
        blocks = reduction_grid(n_rows * 32)
        _reduce("longest_present_row")((blocks,), (kernels.THREADS,), (X, np.int64(n_rows), np.int32(n_features),
                                                                       np.float32(missing), longest))
    return int(longest.get()[0])


# ---------------------------------------------------------------------------- gradient sums
def gradient_abs_sums(gpair):
    """(2,) float64 device array: the sums of |gradient| and |hessian| of the (n, 2) float32
    C-contiguous pairs, each the double nearest the exact sum."""
    n = int(gpair.shape[0])
    if n == 0:
        return cupy.zeros(2, dtype=cupy.float64)
    out = cupy.empty(2, dtype=cupy.float64)
    launch_reduction(_reduce("gradient_abs_sums"), n, (gpair, np.int64(n), exact_accumulator(2), out))
    return out


def fixed_point_scales(sums):
    """(scale, 1 / scale), (2,) float64 each, from the (2,) |.| sums on the device
    (histogram/quantiser.py's fixed_point_scale, without a host wait)."""
    sums = cupy.asarray(sums, dtype=cupy.float64)
    scale, inv = cupy.empty(2, dtype=cupy.float64), cupy.empty(2, dtype=cupy.float64)
    _reduce("fixed_point_scales")((1,), (32,), (sums, scale, inv))
    return scale, inv


def to_fixed(values, inv_scale):
    """(n, 2) int64: trunc(float64(values[i, c]) * inv_scale[c]) of the (n, 2) float32 pairs."""
    out = cupy.empty(values.shape, dtype=cupy.int64)
    n = int(values.size)
    kernels.launch_1d(_reduce("to_fixed"), n, (values, np.int64(n), inv_scale, out))
    return out


def fixed_sums(values, inv_scale):
    """(2,) int64: each column's sum of to_fixed's values (exact, without the int64 array)."""
    out = cupy.zeros(2, dtype=cupy.int64)
    n = int(values.shape[0])
    if n:
        launch_reduction(_reduce("fixed_sums"), n, (values, np.int64(n), inv_scale, out))
    return out


def pair_sums(pairs, n_pairs: int):
    """(2,) int64: the column sums of the first n_pairs int64 pairs of the C-contiguous `pairs`."""
    if not pairs.flags.c_contiguous or pairs.dtype != np.int64:
        raise ValueError("pair_sums takes C-contiguous int64 pairs")
    out = cupy.zeros(2, dtype=cupy.int64)
    if n_pairs:
        launch_reduction(_reduce("pair_sums"), n_pairs, (pairs, np.int64(n_pairs), out))
    return out
