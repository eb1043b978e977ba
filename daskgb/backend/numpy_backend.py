"""NumPy backend: the readable reference of every hot loop, the test oracle, and what CPU workers run.

cupy_backend.py implements the same functions with CUDA kernels; tests run both on
the same random input and compare.
"""

from __future__ import annotations

import numpy as np

from .. import split as _split
from ..arrays import array_module

xp = np
name = "cpu"

# Rows are packed in chunks of a multiple of 32 entries, so a chunk starts on a
# word boundary whatever the bit width and chunks never share a word.
_PACK_CHUNK_ENTRIES = 32 * 65536


def to_device(a):
    """A host array on this backend's device (cupy_backend copies without stalling the host)."""
    return np.asarray(a)


# --------------------------------------------------------------------------- ELLPACK
def count_missing(X, missing: float) -> int:
    """Number of entries of a dense array that are NaN or equal to `missing`."""
    miss = np.isnan(X)
    if not np.isnan(missing):
        miss |= X == np.float32(missing)
    return int(miss.sum())


def bin_dense(X, cuts, missing: float, null_symbol: int):
    """(n_rows, n_features) uint32 feature-local bins; null_symbol where missing.

    A value's bin is the first cut strictly greater than it (upper bound),
    clamped to the feature's last bin, as XGBoost's SearchBin.
    """
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    values = np.asarray(cuts.values)
    out = np.empty(X.shape, dtype=np.uint32)
    for f in range(X.shape[1]):
        col = X[:, f]
        lo, hi = ptrs[f], ptrs[f + 1]
        b = np.minimum(np.searchsorted(values[lo:hi], col, side="right"), hi - lo - 1)
        miss = np.isnan(col) if np.isnan(missing) else np.isnan(col) | (col == np.float32(missing))
        out[:, f] = np.where(miss, null_symbol, b)
    return out


def present_counts(X, missing: float) -> np.ndarray:
    """(n_rows,) int64: each row's entries that are not missing (NaN or `missing`)."""
    miss = np.isnan(X)
    if not np.isnan(missing):
        miss |= X == np.float32(missing)
    return X.shape[1] - miss.sum(axis=1, dtype=np.int64)


def pack_dense_sparse(X, cuts, missing: float, row_stride: int, null_symbol: int, bits: int):
    """Quantise a dense array into the sparse layout and pack it: each row's global bins of
    its present entries in feature order, padded with null_symbol to row_stride slots."""
    local = bin_dense(X, cuts, missing, null_symbol)
    present = local != null_symbol
    gbin = local.astype(np.int64) + np.asarray(cuts.ptrs[:-1], dtype=np.int64)[None, :]
    # A stable sort of "absent" flags moves each row's present entries to its front, in order.
    order = np.argsort(~present, axis=1, kind="stable")[:, :row_stride]
    syms = np.take_along_axis(np.where(present, gbin, null_symbol), order, axis=1).astype(np.uint32)
    if syms.shape[1] < row_stride:
        syms = np.pad(syms, ((0, 0), (0, row_stride - syms.shape[1])), constant_values=null_symbol)
    return pack_symbols(syms, bits)


def pack_symbols(symbols, bits: int):
    """Bit-pack a flat array of symbols (see ellpack.py for the stream layout)."""
    from ..ellpack import n_words

    symbols = np.asarray(symbols).ravel()
    n = symbols.size
    words = np.zeros(n_words(n, bits), dtype=np.uint32)
    for start in range(0, n, _PACK_CHUNK_ENTRIES):
        sym = symbols[start : start + _PACK_CHUNK_ENTRIES].astype(np.uint64)
        pos = (np.arange(sym.size, dtype=np.uint64) + np.uint64(start)) * np.uint64(bits)
        word = (pos >> np.uint64(5)).astype(np.int64)
        off = pos & np.uint64(31)
        lo = (sym << off) & np.uint64(0xFFFFFFFF)
        hi = np.where(off + np.uint64(bits) > 32, sym >> (np.uint64(32) - off), np.uint64(0))
        first = int(word[0])
        span = int(word[-1]) - first + 2
        # The bit fields of different entries never overlap, so OR equals ADD, and
        # float64 sums of values below 2**32 are exact.
        acc = np.bincount(word - first, weights=lo.astype(np.float64), minlength=span)
        acc += np.bincount(word - first + 1, weights=hi.astype(np.float64), minlength=span)
        words[first : first + span] |= acc.astype(np.uint64).astype(np.uint32)
    return words


def unpack_symbols(words, bits: int, n: int, start: int = 0):
    """Symbols start..start+n of a packed stream, as uint32."""
    pos = (np.arange(n, dtype=np.uint64) + np.uint64(start)) * np.uint64(bits)
    word = (pos >> np.uint64(5)).astype(np.int64)
    pair = words[word].astype(np.uint64) | (words[word + 1].astype(np.uint64) << np.uint64(32))
    return ((pair >> (pos & np.uint64(31))) & np.uint64((1 << bits) - 1)).astype(np.uint32)


def pack_dense(X, cuts, missing: float, null_symbol: int, bits: int):
    """Quantise a dense (n_rows, n_features) array and pack it (dense layout)."""
    return pack_symbols(bin_dense(X, cuts, missing, null_symbol), bits)


def csr_symbols(indptr, indices, data, n_rows: int, row_stride: int, cuts, missing: float, null_symbol: int):
    """(n_rows, row_stride) global bins of each row's non-missing entries, in feature order."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    data = np.asarray(data, dtype=np.float32)
    rows = np.repeat(np.arange(n_rows), np.diff(indptr))
    keep = ~np.isnan(data)
    if not np.isnan(missing):
        keep &= data != np.float32(missing)
    rows, cols, vals = rows[keep], indices[keep], data[keep]
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    values = np.asarray(cuts.values)
    gbin = np.empty(vals.size, dtype=np.int64)
    by_col = np.argsort(cols, kind="stable")
    bounds = np.searchsorted(cols[by_col], np.arange(ptrs.size))
    for f in range(ptrs.size - 1):
        seg = by_col[bounds[f] : bounds[f + 1]]
        lo, hi = ptrs[f], ptrs[f + 1]
        gbin[seg] = lo + np.minimum(np.searchsorted(values[lo:hi], vals[seg], side="right"), hi - lo - 1)
    counts = np.bincount(rows, minlength=n_rows)
    slot = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    out = np.full((n_rows, row_stride), null_symbol, dtype=np.uint32)
    out[rows, slot] = gbin
    return out


def pack_csr(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol, bits):
    """Quantise CSR arrays and pack them (sparse layout)."""
    return pack_symbols(csr_symbols(indptr, indices, data, n_rows, row_stride, cuts, missing, null_symbol), bits)


def symbols(ell):
    """The unpacked (n_rows, row_stride) symbol matrix, cached on the matrix.

    The CPU path trades memory for speed here: unpacking every level would cost
    more than the histogram itself. The narrowest unsigned type holds it. A dense
    layout's is stored a feature after another (Fortran order), as the histograms
    read it: a feature's symbols of a node's rows are then gathered from one column.
    """
    cached = ell.__dict__.get("_symbols")
    if cached is None:
        dtype = np.uint8 if ell.null_symbol < 256 else np.uint16 if ell.null_symbol < 65536 else np.uint32
        cached = unpack_symbols(ell.words, ell.bits, ell.n_rows * ell.row_stride).astype(dtype)
        cached = cached.reshape(ell.n_rows, ell.row_stride)
        if ell.is_dense:
            cached = np.asfortranarray(cached)
        ell.__dict__["_symbols"] = cached
    return cached


def feature_bins(ell, rows, features):
    """Feature-local bin of (rows[i], features[i]), or -1 where missing."""
    sym = symbols(ell)
    if ell.is_dense:
        b = sym[rows, features].astype(np.int64)
        return np.where(b == ell.null_symbol, -1, b)
    ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
    lo, hi = ptrs[features][:, None], ptrs[features + 1][:, None]
    row_sym = sym[rows].astype(np.int64)
    inside = (row_sym >= lo) & (row_sym < hi)
    found = inside.any(axis=1)
    local = np.where(inside, row_sym - lo, 0).max(axis=1)
    return np.where(found, local, -1)


def gather_rows(ell, rows, out, entry_offset: int) -> None:
    """OR the rows `rows` of ell (indices into its rows, in the order given) into the zeroed
    packed stream `out` (ell's bits) from symbol entry_offset on: one page's share of a
    compacted matrix (external.compact_rows). The rows are packed as a stream of their own,
    then ORed in shifted to the bit where they start (the bits past a stream's end are zero)."""
    sym = symbols(ell)[np.asarray(rows, dtype=np.int64)].ravel()
    if sym.size == 0:
        return
    n_bits = sym.size * ell.bits
    m = (n_bits + 31) // 32
    w = pack_symbols(sym, ell.bits)[:m].astype(np.uint64)
    first, r = divmod(int(entry_offset) * ell.bits, 32)
    out[first : first + m] |= ((w << np.uint64(r)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if r:
        out[first + 1 : first + m + 1] |= (w >> np.uint64(32 - r)).astype(np.uint32)


def host_copy(a) -> np.ndarray:
    """A host copy of a (an external page's words: numpy_backend pages are host arrays)."""
    return np.asarray(a)


def add_leaf_values(ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row of ell (binned with the training cuts),
    each row routed by its bins as training's partition routes it: a bin <= the split's
    goes left, a missing value takes default_left."""
    node = np.zeros(ell.n_rows, dtype=np.int64)
    rows = np.arange(ell.n_rows)
    while rows.size:
        nid = node[rows]
        inner = tree.left[nid] >= 0
        rows, nid = rows[inner], nid[inner]
        if rows.size == 0:
            break
        b = feature_bins(ell, rows, tree.feature[nid].astype(np.int64))
        left = np.where(b < 0, tree.default_left[nid] != 0, b <= tree.bin[nid])
        node[rows] = np.where(left, tree.left[nid], tree.right[nid])
    margin += tree.value[node]


# --------------------------------------------------------------------------- gradients
def prepare_gradients(gpair, abs_sum=None, wait: bool = True):
    """Per-row gradient pairs in the histogram's type, and the scale back to double.

    float64 histograms need no scaling; abs_sum (used by the fixed-point CUDA
    path to size its scale across workers) and wait (whether the CUDA path waits
    for its scale) are accepted and have no effect here.
    """
    return np.asarray(gpair, dtype=np.float32), np.ones(2, dtype=np.float64)


def gradient_abs_sums(gpair):
    """(2,) float64 sums of |gradient| and |hessian| over the rows."""
    return np.abs(np.asarray(gpair, dtype=np.float64)).sum(axis=0)


def sum_gradients(gpair_native):
    """Sum of all rows' gradient pairs, accumulated row by row in double as XGBoost does."""
    if gpair_native.shape[0] == 0:
        return np.zeros(2, dtype=np.float64)
    return np.cumsum(gpair_native.astype(np.float64), axis=0)[-1]


# --------------------------------------------------------------------------- rows per node
class RowPartition:
    """Which node each row is in: positions[r] is the node id of row r.

    A forest of n_trees trees can be grown together (multiclass: one tree per class,
    each level of all of them in one pass): it has n_trees * n_rows "virtual" rows,
    c * n_rows + r being row r in tree c, and node id g belongs to tree g % n_trees
    (tree c's root is node c). One tree is the case n_trees = 1.
    """

    def __init__(self, n_rows: int, n_trees: int = 1):
        self.n_rows, self.n_trees = n_rows, n_trees
        self.positions = np.repeat(np.arange(n_trees, dtype=np.int32), n_rows)


def new_partition(n_rows: int, n_trees: int = 1) -> RowPartition:
    return RowPartition(n_rows, n_trees)


def _node_lookup(node_ids, positions, values):
    """values[i] for rows whose node is node_ids[i]; -1 for rows in other nodes."""
    size = int(max(int(np.max(node_ids)) if len(node_ids) else 0, int(positions.max()) if positions.size else 0)) + 1
    table = np.full(size, -1, dtype=np.int64)
    table[np.asarray(node_ids)] = values
    return table[positions]


def apply_splits(ell, part: RowPartition, nids, features, bins, default_left, left_ids, right_ids):
    """Move the rows of each split node nids[i] to its left or right child.

    A row goes left when its bin of the split feature is <= bins[i], or when the
    value is missing and default_left[i] is set. Returns nothing: the numpy
    partition has no segments to size.
    """
    which = _node_lookup(nids, part.positions, np.arange(len(nids)))
    rows = np.flatnonzero(which >= 0)
    s = which[rows]
    features = np.asarray(features, dtype=np.int64)
    b = feature_bins(ell, rows % ell.n_rows if part.n_trees > 1 else rows, features[s])
    go_left = np.where(b < 0, np.asarray(default_left)[s] != 0, b <= np.asarray(bins)[s])
    part.positions[rows] = np.where(go_left, np.asarray(left_ids)[s], np.asarray(right_ids)[s])


# --------------------------------------------------------------------------- histograms
def build_histograms(ell, gpair_native, part: RowPartition, build_nodes):
    """(len(build_nodes), total_bins, 2) float64 gradient sums per bin of each node.

    Rows are added in row order, so every bin's sum is accumulated as XGBoost's
    single-threaded CPU builder accumulates it.
    """
    k = len(build_nodes)
    total_bins = ell.cuts.total_bins
    slot = _node_lookup(build_nodes, part.positions, np.arange(k))
    rows = np.flatnonzero(slot >= 0)
    ell_rows = rows % ell.n_rows if part.n_trees > 1 else rows
    hist = np.empty((k, total_bins, 2), dtype=np.float64)
    if ell.is_dense:
        # A feature at a time: its symbols are its own bins, and each row's g and h are read
        # as they are, with no (rows x features) copies of them and no mask (a third of the
        # time of one count over every present (row, feature) pair). Missing values' null
        # symbol counts past every feature's bins and is dropped.
        sym = symbols(ell)
        every_row = ell_rows.size == ell.n_rows and part.n_trees == 1  # a root: no gather
        width = int(ell.null_symbol) + 1
        base = slot[rows] * width
        g, h = gpair_native[rows, 0], gpair_native[rows, 1]
        ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
        key = np.empty(rows.size, dtype=np.intp)
        for f in range(ell.n_features):
            lo, hi = int(ptrs[f]), int(ptrs[f + 1])
            np.add(base, sym[:, f] if every_row else sym[ell_rows, f], out=key)
            hist[:, lo:hi, 0] = np.bincount(key, weights=g, minlength=k * width).reshape(k, width)[:, : hi - lo]
            hist[:, lo:hi, 1] = np.bincount(key, weights=h, minlength=k * width).reshape(k, width)[:, : hi - lo]
        return hist
    # Global bins, and the null symbol where a row has fewer values.
    sym = symbols(ell)[ell_rows].astype(np.int64)
    present = sym != ell.null_symbol
    key = (slot[rows][:, None] * total_bins + sym)[present]
    g = np.broadcast_to(gpair_native[rows, 0:1], sym.shape)[present]
    h = np.broadcast_to(gpair_native[rows, 1:2], sym.shape)[present]
    hist[..., 0] = np.bincount(key, weights=g, minlength=k * total_bins).reshape(k, total_bins)
    hist[..., 1] = np.bincount(key, weights=h, minlength=k * total_bins).reshape(k, total_bins)
    return hist


def children_histograms(parents, parent_rows, built, build_right, parent_left, parent_right):
    """The children of k split nodes: (2k, total_bins, 2) histograms and (2k, 2) sums.

    Split i's parent is row parent_rows[i] of parents (histograms) and of parent_left /
    parent_right (the sums of its best split's children); built[i] is the histogram of
    its right child where build_right[i], else of its left child, and the sibling is the
    parent minus it. Split i's left child is row 2i of the results, its right child 2i + 1.
    """
    xp = array_module(built)  # also cupy_backend's reference
    rows = xp.asarray(np.asarray(parent_rows, dtype=np.int64))
    br = xp.asarray(np.asarray(build_right, dtype=bool))[:, None, None]
    other = parents[rows] - built
    hist = xp.stack([xp.where(br, other, built), xp.where(br, built, other)], axis=1)
    sums = xp.stack([parent_left[rows], parent_right[rows]], axis=1)
    return hist.reshape(-1, *built.shape[1:]), sums.reshape(-1, 2)


def evaluate_splits(cuts, hist, parent, scale, params, feature_mask=None, monotone=None, bounds=None):
    """Best split of each node (see split.evaluate_splits), the same records.

    The reference pads every feature it scans to the widest one's bins; where bin counts
    differ a lot (one-hot next to continuous features) that scans several times the real
    bins. So features are evaluated in groups of similar width (bin counts up to 2, 4, 8, ...)
    and each node keeps the best group's split: the largest loss change, ties to the lower
    feature, as the single scan's visiting order decides.
    """
    groups = _width_groups(cuts)
    if groups is None:
        return _split.evaluate_splits(np, hist, parent, scale, cuts.ptrs, cuts.values, cuts.min_values, params,
                                      feature_mask, monotone, bounds)
    mask = None if feature_mask is None else np.asarray(feature_mask, dtype=bool)
    best = None
    # The group holding feature 0 comes first: a node with no split reports its fields, as the
    # reference does.
    for feats, bins, ptrs, values, min_values in groups:
        rec, left, right = _split.evaluate_splits(
            np, hist[:, bins], parent, scale, ptrs, values, min_values, params,
            None if mask is None else mask[..., feats], None if monotone is None else np.asarray(monotone)[feats],
            bounds)
        rec["feature"] = np.where(rec["feature"] >= 0, feats[np.maximum(rec["feature"], 0)], -1)
        if best is None:
            best = [rec, left, right]
            continue
        brec = best[0]
        wins = (rec["feature"] >= 0) & ((rec["gain"] > brec["gain"]) | (
            (rec["gain"] == brec["gain"]) & (brec["feature"] >= 0) & (rec["feature"] < brec["feature"])))
        brec[wins] = rec[wins]
        best[1][wins] = left[wins]
        best[2][wins] = right[wins]
    return tuple(best)


def _width_groups(cuts):
    """Per group of features with similar bin counts: (features, their global bins, sub-cut ptrs,
    values, min_values); None when one scan wastes little. Cached on the cuts."""
    cached = cuts.__dict__.get("_width_groups", False)
    if cached is not False:
        return cached
    ptrs = np.asarray(cuts.ptrs, dtype=np.int64)
    n_bins = np.diff(ptrs)
    groups = None
    if n_bins.size > 1 and n_bins.max() * n_bins.size > 2 * max(1, int(n_bins.sum())):
        bucket = np.ceil(np.log2(np.maximum(n_bins, 1))).astype(np.int64)
        values, min_values = np.asarray(cuts.values), np.asarray(cuts.min_values)
        order = [bucket[0]] + sorted(set(bucket.tolist()) - {bucket[0]})
        groups = []
        for b in order:
            feats = np.flatnonzero(bucket == b)
            bins = np.concatenate([np.arange(ptrs[f], ptrs[f + 1]) for f in feats])
            sub_ptrs = np.concatenate([[0], np.cumsum(n_bins[feats])])
            groups.append((feats, bins, sub_ptrs, values[bins], min_values[feats]))
    cuts.__dict__["_width_groups"] = groups
    return groups


# --------------------------------------------------------------------------- prediction
def predict_margin(X, nodes, tree_offsets, out, missing: float = np.nan):
    """Add the leaf values of every tree to out (float32), tree after tree.

    X: (n_rows, n_features) float32; nodes: PREDICT_NODE_DTYPE of all trees
    concatenated, tree t owning nodes[tree_offsets[t]:tree_offsets[t+1]].
    A value goes left when it is < threshold; a missing one takes default_left.
    """
    n = X.shape[0]
    rows = np.arange(n)
    for t in range(len(tree_offsets) - 1):
        tree = nodes[tree_offsets[t] : tree_offsets[t + 1]]
        nid = np.zeros(n, dtype=np.int64)
        active = rows[tree["left"][nid] >= 0]
        while active.size:
            node = tree[nid[active]]
            v = X[active, node["feature"]]
            miss = np.isnan(v) if np.isnan(missing) else np.isnan(v) | (v == np.float32(missing))
            left = np.where(miss, node["default_left"] != 0, v < node["threshold"])
            nid[active] = np.where(left, node["left"], node["right"])
            active = active[tree["left"][nid[active]] >= 0]
        out += tree["value"][nid]
    return out
