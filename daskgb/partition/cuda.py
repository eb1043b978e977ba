"""The partition stage on a GPU: rows grouped by node, moved to the split nodes' children by kernels/partition.cu.

Same names and results as partition/reference.py (the oracle). RowPartition keeps each
node's rows as one run of a row-index array, and learns the children's row counts behind
the launches, so a level's partition makes no host wait.
"""

from __future__ import annotations

import ctypes

import cupy
import numpy as np

from ..arrays import to_host
from ..backend import kernels
from ..category_sets import bitset_of
from ..ellpack.cuda import ellpack_view
from ..layouts import LABEL_INFO, PARTITION_INFO, PARTITION_TILE_ROWS

_KERNELS = kernels.declare("partition.cu", (
    "partition_count<true>", "partition_count<false>", "partition_scatter", "label_rows"))


_PARTITION_THREADS = 512

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
        self.segs_d[:n_trees] = cupy.asarray(np.stack([self.start[:n_trees], self.count[:n_trees]], axis=1))
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
    """(first_tile (k+1,), tile owner (n_tiles,)) of segments cut into PARTITION_TILE_ROWS runs."""
    tiles_per = -(-counts // PARTITION_TILE_ROWS)
    first_tile = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(tiles_per, out=first_tile[1:])
    return first_tile, np.repeat(np.arange(counts.size, dtype=np.int64), tiles_per)

def _label_rows(ridx, seg: np.ndarray, nodes: np.ndarray, positions) -> None:
    first_tile, owner = _partition_tiles(seg[:, 1])
    if owner.size:
        info = cupy.asarray(LABEL_INFO.build(nodes.size, tail=owner, start=seg[:, 0], count=seg[:, 1], node=nodes,
                                             first_tile=first_tile))
        fn = kernels.function("partition.cu", _KERNELS, "label_rows")
        fn((owner.size,), (_PARTITION_THREADS,), (ridx, info, np.int32(nodes.size), positions))

def launch_partition(ell, ridx, scratch, info, stride: int, grid: int, segs, n_left, category_sets=None) -> None:
    """partition_count and partition_scatter over `grid` tiles (at least info's n_tiles; see
    kernels/partition.cu for info, whose fields have `stride` entries). category_sets: None
    (every split numeric), or a (rows, words) uint32 device array whose rows the categorical
    splits' category_row name."""
    if grid <= 0:
        return
    tile_left = cupy.empty(grid, dtype=cupy.int32)
    if category_sets is None:
        sets, n_words = ridx, 0  # never read: every category_row is -1
    else:
        sets, n_words = category_sets, category_sets.shape[1]
    count_fn = kernels.function("partition.cu", _KERNELS, f"partition_count<{kernels.template_flag(ell.is_dense)}>")
    count_fn((grid,), (_PARTITION_THREADS,), (ellpack_view(ell), ridx, info, np.int32(stride), scratch, tile_left,
                                             sets, np.int32(n_words)))
    scatter_fn = kernels.function("partition.cu", _KERNELS, "partition_scatter")
    scatter_fn((grid,), (_PARTITION_THREADS,), (scratch, tile_left, info, np.int32(stride), ridx, segs, n_left))

def _category_rows(categories, k: int):
    """(category_row (k,) int64, sets (rows, words) uint32 or None) of a step's splits: split i's
    set in row i where it is categorical (category_sets.bitset_of), -1 where it is numeric."""
    rows = np.full(k, -1, dtype=np.int64)
    if categories is None or all(c is None for c in categories):
        return rows, None
    bitsets = [None if c is None else bitset_of(c) for c in categories]
    words = max(b.size for b in bitsets if b is not None)
    sets = np.zeros((k, words), dtype=np.uint32)
    for i, b in enumerate(bitsets):
        if b is not None:
            rows[i] = i
            sets[i, : b.size] = b
    return rows, sets

def apply_splits(ell, part: RowPartition, nids, features, bins, default_left, left_ids, right_ids,
                 categories=None):
    """Move the rows of each split node nids[i] to its left or right child.

    A row goes left when its bin of the split feature is <= bins[i], or when the
    value is missing and default_left[i] is set. categories: None, or per split None or
    the categories that go right (a categorical split: the row's bin of the feature is its
    category). Within a node's segment the left rows come first, then the right rows, each
    in their old order. Two launches (kernels/partition.cu) and no device sync: the
    children's row counts follow behind the launches (see RowPartition).
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
        category_row, sets = _category_rows(categories, k)
        # One host-to-device copy for all of the level's split parameters and tiles (layouts.py PARTITION_INFO).
        info = cupy.asarray(PARTITION_INFO.build(
            k, tail=owner, k=[k], n_tiles=[owner.size], start=starts, count=counts, feature=to_host(features),
            bin=to_host(bins), default_left=to_host(default_left), left_id=lids, right_id=rids,
            row_offset=part.row_offsets(nids), category_row=category_row, first_tile=first_tile))
        n_left_d = cupy.empty(k, dtype=cupy.int64)  # splits without rows have no tiles and stay unread
        launch_partition(ell, part.ridx, part.scratch, info, k, owner.size, part.segs_d, n_left_d,
                         None if sets is None else cupy.asarray(sets))
        # Children of splits with rows wait for their counts; those of empty splits are known (empty).
        has_rows = np.concatenate([counts > 0, counts > 0])
        index = np.arange(k)
        part.split_index[lids], part.split_index[rids] = index, index
        part.is_right[lids], part.is_right[rids] = False, True
        part._counts.start(n_left_d)
        part._pending.append((children[has_rows], part._counts))
    else:
        part.count[children] = 0
