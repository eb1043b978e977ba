"""Split evaluation on a GPU: the best split of every node of a level in one launch of kernels/split.cu.

It computes exactly what split/reference.py's evaluate_splits computes, with one device
sync (the records) instead of several; tests/stages/test_split.py compares the two.
"""

from __future__ import annotations

import functools
from collections import OrderedDict

import cupy
import numpy as np

from .. import config
from ..arrays import to_host
from ..backend import kernels
from ..category_sets import n_words
from ..layouts import (CANDIDATE, CATEGORICAL_ARGS, MAX_SORTED_CATEGORIES, SPLIT_DTYPE, SPLIT_INPUTS, SPLIT_OUTPUTS, SPLIT_PARAMS,
                       SPLIT_THREADS, kernel_args)
from . import reference

_KERNELS = kernels.declare("split.cu", ("evaluate_splits",))
_CATEGORICAL_KERNELS = kernels.declare("categorical.cu", ("categorical_candidates", "merge_categorical"))
_CATEGORICAL_THREADS = 512



class _CutsArrays:
    """Host copies of a Cuts object's arrays, and device copies made on first use."""

    def __init__(self, cuts):
        self.host = (
            np.asarray(to_host(cuts.ptrs), dtype=np.int64),
            np.asarray(to_host(cuts.values), dtype=np.float32),
            np.asarray(to_host(cuts.min_values), dtype=np.float32),
        )
        self._device = None
        flags = None if cuts.categorical is None else np.asarray(cuts.categorical, dtype=bool)
        self.categorical = flags if flags is not None and flags.any() else None
        self._categorical_device = None

    @property
    def categorical_device(self):
        """(uint8 (n_features,) flags, int32 categorical features) on the current device."""
        if self._categorical_device is None:
            self._categorical_device = (cupy.asarray(self.categorical.astype(np.uint8)),
                                        cupy.asarray(np.flatnonzero(self.categorical).astype(np.int32)))
        return self._categorical_device

    def bins(self, features) -> np.ndarray:
        ptrs = self.host[0]
        return ptrs[np.asarray(features) + 1] - ptrs[np.asarray(features)]

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

_COUNTERS: dict = {}

def split_counters(k: int):
    """Per-node block counters of the split kernel: zero between launches (its last block per
    node resets its counter), so one array serves every launch on a stream (launches on one
    stream run one after another; another stream gets its own array)."""
    key = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)
    c = _COUNTERS.get(key)
    if c is None or c.size < k:
        c = _COUNTERS[key] = cupy.zeros(max(k, 1024), dtype=cupy.uint32)
    return c

def forget_split_counters(stream) -> None:
    """Drop a stream's counters (a CUDA graph's capture stream, when the graph goes)."""
    _COUNTERS.pop((cupy.cuda.runtime.getDevice(), stream.ptr), None)

@functools.lru_cache(maxsize=16)
def _all_features_on(device: int, n_features: int):
    mask = cupy.empty(n_features, dtype=cupy.uint8)
    if n_features:
        mask.data.memset_async(1, n_features)  # bytes of 1: no fill kernel to compile
    return mask

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
    arrays = _cuts_arrays(cuts)
    k = hist.shape[0]
    n_features = len(arrays.host[0]) - 1
    if (not config.get("training.split-kernel") or k == 0 or n_features == 0 or hist.dtype != cupy.int64
            or monotone is not None):
        ptrs, values, min_values = arrays.host
        return reference.evaluate_splits(cupy, hist, parent, scale, ptrs, values, min_values, params, feature_mask,
                                      monotone, bounds)
    if feature_mask is None:
        mask = None
    else:
        mask = cupy.asarray(np.asarray(to_host(feature_mask)).astype(np.uint8))
        if mask.shape not in ((n_features,), (k, n_features)):
            raise ValueError(f"feature_mask must have shape ({n_features},) or ({k}, {n_features}), got {mask.shape}")
    records, left, right, _ = launch_evaluate(cuts, hist, parent, scale, params, mask, k, k_live=None)
    return to_host(records).view(SPLIT_DTYPE), left, right

_NO_LIVE_COUNT: dict = {}

_SCALES: OrderedDict = OrderedDict()

def device_scale(scale):
    """The (2,) float64 scale on the device: itself if it is there, else a copy, cached by
    value (a tree's levels share one scale: one upload a tree, not one a level)."""
    if isinstance(scale, cupy.ndarray):
        return scale
    host = np.ascontiguousarray(scale, dtype=np.float64).reshape(2)
    key = (cupy.cuda.runtime.getDevice(), host.tobytes())
    hit = _SCALES.get(key)
    if hit is None:
        hit = _SCALES[key] = cupy.asarray(host)
        while len(_SCALES) > 8:
            _SCALES.popitem(last=False)
    return hit

def launch_evaluate(cuts, hist, parent, scale, params, mask, k_bound: int, k_live=None, categorical=None):
    """kernels/split.cu over k_bound nodes: (records as SplitRecord bytes, left, right, node_sets)
    on the device. mask: None, a (n_features,) uint8 mask for all nodes, or (k_bound, n_features).
    k_live: None (k_bound nodes), or a device int64 holding the number of nodes (<= k_bound).
    categorical: None, or (max_cat_to_onehot, max_cat_threshold) where the cuts have
    categorical features: their splits are categorical.cu's, merged into the records, and
    node_sets ((k_bound, set_words) uint32) holds each node's categories going right (zero for
    a numeric split); else node_sets is None."""
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
    n_chunks = min(-(-n_features // (SPLIT_THREADS // 32)), max(1, -(-2 * kernels.sm_count() // k_bound)))
    partial = cupy.empty(k_bound * n_chunks * CANDIDATE.dtype.itemsize, dtype=cupy.uint8) if n_chunks > 1 else records
    left = cupy.empty((k_bound, 2), dtype=cupy.int64)
    right = cupy.empty((k_bound, 2), dtype=cupy.int64)
    with_categories = categorical is not None and arrays.categorical is not None
    inputs = kernel_args(SPLIT_INPUTS, hist=hist, parent=parent, ptrs=ptrs, cut_values=values, min_values=min_values,
                         feature_mask=mask, categorical=arrays.categorical_device[0] if with_categories else None,
                         scale=device_scale(scale), k_live=k_live, total_bins=hist.shape[1],
                         n_features=n_features, n_cut_values=values.size, mask_stride=mask_stride, k_static=k_static)
    outputs = kernel_args(SPLIT_OUTPUTS, partial=partial, counters=split_counters(k_bound), records=records, left=left,
                          right=right)
    fn = kernels.function("split.cu", _KERNELS, "evaluate_splits")
    fn((k_bound, n_chunks), (SPLIT_THREADS,), (inputs, split_params_args(params), outputs))
    node_sets = None
    if with_categories:
        node_sets = _launch_categorical(arrays, inputs, outputs, params, k_bound, *categorical)
    return records, left, right, node_sets


def categorical_on_device(cuts) -> bool:
    """Whether categorical.cu evaluates these cuts' categorical features: each has at most
    MAX_SORTED_CATEGORIES categories."""
    arrays = _cuts_arrays(cuts)
    return arrays.categorical is None or int(arrays.bins(np.flatnonzero(arrays.categorical)).max()) <= \
        MAX_SORTED_CATEGORIES


def category_set_words(cuts) -> int:
    """Words of a category set of these cuts' widest categorical feature (0 without one)."""
    arrays = _cuts_arrays(cuts)
    if arrays.categorical is None:
        return 0
    return n_words(int(arrays.bins(np.flatnonzero(arrays.categorical)).max()))


def _launch_categorical(arrays, inputs, outputs, params, k_bound: int, max_cat_to_onehot: int,
                        max_cat_threshold: int):
    """categorical.cu after split.cu's launch (its inputs and outputs): the records merged, and
    the nodes' (k_bound, set_words) category sets."""
    features = np.flatnonzero(arrays.categorical)
    bins = arrays.bins(features)
    partition = bins[bins >= max_cat_to_onehot]
    sort_size = 0 if partition.size == 0 else 1 << int(partition.max() - 1).bit_length()
    if sort_size > MAX_SORTED_CATEGORIES:
        raise ValueError(f"a categorical feature has {int(partition.max())} categories; categorical.cu sorts at most "
                         f"{MAX_SORTED_CATEGORIES} (split/categorical.py evaluates wider ones)")
    words = n_words(int(bins.max()))
    flags, features_d = arrays.categorical_device
    n_cat = features.size
    candidates = cupy.empty(k_bound * n_cat * CANDIDATE.dtype.itemsize, dtype=cupy.uint8)
    sets = cupy.empty((k_bound, n_cat, words), dtype=cupy.uint32)
    node_sets = cupy.empty((k_bound, words), dtype=cupy.uint32)
    args = kernel_args(CATEGORICAL_ARGS, features=features_d, candidates=candidates, sets=sets, node_sets=node_sets,
                       n_categorical=n_cat, set_words=words, max_cat_to_onehot=int(max_cat_to_onehot),
                       max_cat_threshold=int(max_cat_threshold), sort_size=sort_size)
    find = kernels.function("categorical.cu", _CATEGORICAL_KERNELS, "categorical_candidates")
    smem = 8 * sort_size
    if smem > 48 * 1024:
        find.max_dynamic_shared_size_bytes = smem
    find((k_bound, n_cat), (_CATEGORICAL_THREADS,), (inputs, split_params_args(params), args), shared_mem=smem)
    merge = kernels.function("categorical.cu", _CATEGORICAL_KERNELS, "merge_categorical")
    merge((k_bound,), (128,), (inputs, args, outputs))
    return node_sets


def evaluate_categorical(cuts, hist, parent, scale, params, max_cat_to_onehot: int, max_cat_threshold: int,
                         feature_mask=None):
    """split/categorical.py's evaluate_categorical over all the cuts' categorical features, by
    categorical.cu where they fit it (else that array code, on the device). Returns (loss (k,)
    float32, feature (k,) int64 (-1: none beats 0), default_left (k,) bool, left (k, 2),
    right (k, 2) int64 on the device, bits (k, W) uint32 of the categories going right), the
    host's results as numpy arrays."""
    arrays = _cuts_arrays(cuts)
    k = hist.shape[0]
    features = np.flatnonzero(arrays.categorical) if arrays.categorical is not None else np.zeros(0, np.int64)
    if (not categorical_on_device(cuts) or hist.dtype != cupy.int64 or k == 0 or features.size == 0
            or not config.get("training.split-kernel")):
        from . import categorical

        return categorical.evaluate_categorical(cupy, hist, parent, scale, arrays.host[0], features, params,
                                                max_cat_to_onehot, max_cat_threshold, feature_mask)
    n_features = len(arrays.host[0]) - 1
    ptrs, values, min_values = arrays.device
    if feature_mask is None:
        mask, mask_stride = _all_features(n_features), 0
    else:
        host_mask = np.asarray(to_host(feature_mask)).astype(np.uint8)
        mask, mask_stride = cupy.asarray(host_mask), (0 if host_mask.ndim == 1 else n_features)
    device = cupy.cuda.runtime.getDevice()
    k_live = _NO_LIVE_COUNT.get(device)
    if k_live is None:
        k_live = _NO_LIVE_COUNT[device] = cupy.zeros(1, dtype=cupy.int64)  # never read
    hist = cupy.ascontiguousarray(hist)
    # Records with no split (gain 0): merge_categorical puts a categorical best in each where
    # one beats 0, as the array code's choice does.
    records = cupy.zeros(k * SPLIT_DTYPE.itemsize, dtype=cupy.uint8)
    left = cupy.zeros((k, 2), dtype=cupy.int64)
    right = cupy.zeros((k, 2), dtype=cupy.int64)
    inputs = kernel_args(SPLIT_INPUTS, hist=hist, parent=cupy.ascontiguousarray(parent, dtype=cupy.int64), ptrs=ptrs,
                         cut_values=values, min_values=min_values, feature_mask=mask, categorical=None,
                         scale=device_scale(scale), k_live=k_live, total_bins=hist.shape[1], n_features=n_features,
                         n_cut_values=values.size, mask_stride=mask_stride, k_static=k)
    outputs = kernel_args(SPLIT_OUTPUTS, partial=records, counters=split_counters(k), records=records, left=left,
                          right=right)
    node_sets = _launch_categorical(arrays, inputs, outputs, params, k, max_cat_to_onehot, max_cat_threshold)
    recs = to_host(records).view(SPLIT_DTYPE)
    found = recs["categorical"] == 1
    loss = np.where(found, recs["gain"], np.float32(0)).astype(np.float32)
    feature = np.where(found, recs["feature"], -1).astype(np.int64)
    return loss, feature, recs["default_left"] == 1, left, right, to_host(node_sets)


_PARAMS: OrderedDict = OrderedDict()


def split_params_args(params, eta: float = 0.0):
    """The SplitParams struct (layouts.py) of split/rules.py's SplitParams and a learning rate,
    cached by value (a fit's trees share one)."""
    key = (params.reg_lambda, params.reg_alpha, params.min_child_weight, params.max_delta_step,
           params.min_split_loss, float(np.float32(eta)))
    hit = _PARAMS.get(key)
    if hit is None:
        hit = _PARAMS[key] = kernel_args(SPLIT_PARAMS, reg_lambda=key[0], reg_alpha=key[1], min_child_weight=key[2],
                                         max_delta_step=key[3], min_split_loss=key[4], eta=key[5])
        while len(_PARAMS) > 16:
            _PARAMS.popitem(last=False)
    return hit
