"""The histogram stage compiled for CPUs (cpu/): reference.py's sums, bit for bit, at a compiled loop's speed.

Every bin's gradient sum is accumulated in float64 in row order, as reference.py's bincounts
(and XGBoost's single-threaded CPU builder) accumulate it, so the two give the same bits. The
threads split the bins, never the rows: a dense matrix by features (each thread reads its own
slots of every row), a sparse one by ranges of global bins (each thread reads every row's
entries up to its range's end).

The loops read the matrix as global symbols (global_symbols): every entry is its global bin,
or total_bins where it is missing or padding, in C order (a row's entries side by side). A
row's pair is read once for all its entries, whose bins lie apart, so their adds overlap; the
histogram is one flat float64 array indexed without signs, and a missing entry adds to a
spare pair past the histograms rather than being branched around (a missing entry would be a
mispredicted branch; the spare adds are free).
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from ..ellpack.compiled import unpack_symbols
from ..partition.reference import node_count
from . import reference


def _rows_of(positions, slot_of_node, n_rows, rows, ell_rows, slots):
    """The virtual rows in nodes being built (and their matrix row and node's slot): the count.
    Tree c's virtual row v is matrix row v - c * n_rows (partition/reference.py). They come
    matrix row by matrix row, a row's trees together, so that a forest's level reads each
    matrix row once; a node is one tree's, so each bin still sums its rows in row order.
    slot_of_node covers every node (-1: not built); each row is written and kept only where its
    node is built, without a branch (one on the node would be mispredicted)."""
    n = np.uint64(0)
    n_trees = positions.shape[0] // n_rows if n_rows else 0
    for r in range(n_rows):  # unsigned indices: no wrap-around checks
        for c in range(n_trees):
            v = c * n_rows + r
            s = slot_of_node[np.uint64(positions[np.uint64(v)])]
            rows[n] = v
            ell_rows[n] = r
            slots[n] = s
            n += np.uint64(s >= 0)
    return np.int64(n)


def _dense(lo, hi, gsym, rows, ell_rows, slots, gpair, hist, total_bins):
    """Slots (features) lo..hi of every row of a dense matrix. Missing entries (total_bins) add to
    the spare pair of this piece, hist[-2 * (lo + 1):], past every node's bins."""
    stride = gsym.shape[1]
    flat = gsym.ravel()
    spare = np.uint64(hist.shape[0] - 2 * (lo + 1))
    tb = np.uint64(total_bins)
    two = np.uint64(2)
    for i in range(rows.shape[0]):
        g = np.float64(gpair[rows[i], 0])
        h = np.float64(gpair[rows[i], 1])
        off = np.uint64(slots[i]) * tb
        base = np.uint64(ell_rows[i]) * np.uint64(stride)
        for j in range(lo, hi):
            s = np.uint64(flat[base + np.uint64(j)])
            k = (off + s) * two if s < tb else spare
            hist[k] += g
            hist[k + np.uint64(1)] += h


def _dense_full(lo, hi, gsym, rows, ell_rows, slots, gpair, hist, total_bins):
    """_dense where no entry is missing (the matrix has none): no spare pair to choose."""
    stride = gsym.shape[1]
    flat = gsym.ravel()
    tb = np.uint64(total_bins)
    two = np.uint64(2)
    for i in range(rows.shape[0]):
        g = np.float64(gpair[rows[i], 0])
        h = np.float64(gpair[rows[i], 1])
        off = np.uint64(slots[i]) * tb
        base = np.uint64(ell_rows[i]) * np.uint64(stride)
        for j in range(lo, hi):
            k = (off + np.uint64(flat[base + np.uint64(j)])) * two
            hist[k] += g
            hist[k + np.uint64(1)] += h


def _sparse(lo, hi, gsym, rows, ell_rows, slots, gpair, hist, total_bins, sorted_rows):
    """Global bins lo..hi of a sparse matrix: a row's scan stops at its padding (total_bins).
    Rows whose entries never fall (sorted_rows: rows_sorted, what the CPU's quantising makes)
    are read from their first entry >= lo (a binary search) to their first >= hi, so that
    threads of other bins do not read this thread's entries; else every entry is read."""
    stride = gsym.shape[1]
    flat = gsym.ravel()
    ulo = np.uint64(lo)
    uhi = np.uint64(hi)
    tb = np.uint64(total_bins)
    two = np.uint64(2)
    for i in range(rows.shape[0]):
        g = np.float64(gpair[rows[i], 0])
        h = np.float64(gpair[rows[i], 1])
        off = np.uint64(slots[i]) * tb
        base = np.uint64(ell_rows[i]) * np.uint64(stride)
        if sorted_rows:
            j = np.uint64(0)  # the row's first entry >= lo
            count = np.uint64(stride)
            while count > np.uint64(0):
                half = count >> np.uint64(1)
                if np.uint64(flat[base + j + half]) < ulo:
                    j += half + np.uint64(1)
                    count -= half + np.uint64(1)
                else:
                    count = half
            while j < np.uint64(stride):
                s = np.uint64(flat[base + j])
                if s >= uhi:
                    break
                k = (off + s) * two
                hist[k] += g
                hist[k + np.uint64(1)] += h
                j += np.uint64(1)
            continue
        for j in range(stride):
            s = np.uint64(flat[base + np.uint64(j)])
            if s >= tb:
                break
            if ulo <= s < uhi:
                k = (off + s) * two
                hist[k] += g
                hist[k + np.uint64(1)] += h


def _rows_never_fall(gsym):
    """Whether every row's entries (padding, total_bins, included) never fall."""
    for r in range(gsym.shape[0]):
        for j in range(1, gsym.shape[1]):
            if gsym[r, j] < gsym[r, j - 1]:
                return False
    return True


def _globalise(local, ptrs, null_symbol, total_bins, out):
    """A dense layout's feature-local symbols (flat, C order) as global ones; missing: total_bins."""
    n_features = ptrs.shape[0] - 1
    for i in range(local.shape[0]):
        s = local[i]
        f = i % n_features
        out[i] = total_bins if s == null_symbol else ptrs[f] + s


def _children(lo, hi, parents, parent_rows, built, build_right, out):
    """Splits lo..hi: the built child's histogram and its sibling's (the parent's minus it),
    left child at row 2i of out, right at 2i + 1 (reference.children_histograms)."""
    n_bins = built.shape[1]
    for i in range(lo, hi):
        p = parents[parent_rows[i]]
        c = built[i]
        left = out[2 * i]
        right = out[2 * i + 1]
        if build_right[i]:
            for b in range(n_bins):
                right[b, 0] = c[b, 0]
                right[b, 1] = c[b, 1]
                left[b, 0] = p[b, 0] - c[b, 0]
                left[b, 1] = p[b, 1] - c[b, 1]
        else:
            for b in range(n_bins):
                left[b, 0] = c[b, 0]
                left[b, 1] = c[b, 1]
                right[b, 0] = p[b, 0] - c[b, 0]
                right[b, 1] = p[b, 1] - c[b, 1]


def _sum_rows(gpair, out):
    """Every row's pair added in row order, in double: reference.sum_gradients' cumsum, without its array."""
    g = np.float64(0.0)
    h = np.float64(0.0)
    for i in range(gpair.shape[0]):
        g += np.float64(gpair[i, 0])
        h += np.float64(gpair[i, 1])
    out[0] = g
    out[1] = h


_compiled = {}


def _kernels():
    if not _compiled:
        _compiled.update(rows_of=cpu.jit(_rows_of), never_fall=cpu.jit(_rows_never_fall), dense=cpu.jit(_dense),
                         dense_full=cpu.jit(_dense_full), sparse=cpu.jit(_sparse),
                         globalise=cpu.jit(_globalise), children=cpu.jit(_children),
                         sum_rows=cpu.jit(_sum_rows))
    return _compiled


# Below this many (row, feature) pairs a level's histogram is one thread's work.
_MIN_PAIRS_PER_THREAD = 1 << 16


def build_histograms(ell, gpair_native, part, build_nodes):
    """(len(build_nodes), total_bins, 2) float64 gradient sums per bin of each node: reference.py's."""
    k = _kernels()
    n_nodes = len(build_nodes)
    total_bins = ell.cuts.total_bins
    positions = part.positions
    build_nodes = np.asarray(build_nodes, dtype=np.int64)
    size = max(node_count(part), int(build_nodes.max()) + 1 if build_nodes.size else 1)
    slot_of_node = np.full(size, -1, dtype=np.int32)
    slot_of_node[build_nodes] = np.arange(n_nodes, dtype=np.int32)
    rows = np.empty(positions.shape[0], dtype=np.int64)
    ell_rows = np.empty(positions.shape[0], dtype=np.int64)
    slots = np.empty(positions.shape[0], dtype=np.int32)
    n = k["rows_of"](positions, slot_of_node, ell.n_rows, rows, ell_rows, slots)
    rows, ell_rows, slots = rows[:n], ell_rows[:n], slots[:n]
    gpair = np.ascontiguousarray(gpair_native, dtype=np.float32)
    gsym = global_symbols(ell)
    size = n_nodes * total_bins * 2
    if ell.is_dense:
        # One spare pair per piece of features (a piece starting at feature lo owns pair lo).
        hist = np.zeros(size + 2 * ell.n_features, dtype=np.float64)
        work = max(1, n * ell.n_features // _MIN_PAIRS_PER_THREAD)
        cpu.run_chunks(k["dense" if ell.has_missing else "dense_full"], ell.n_features, gsym, rows, ell_rows, slots,
                       gpair, hist, total_bins,
                       min_chunk=max(1, ell.n_features // work))
    else:
        hist = np.zeros(size, dtype=np.float64)
        work = max(1, n * gsym.shape[1] // _MIN_PAIRS_PER_THREAD)
        cpu.run_chunks(k["sparse"], total_bins, gsym, rows, ell_rows, slots, gpair, hist, total_bins,
                       rows_sorted(ell), min_chunk=max(1, total_bins // work))
    return hist[:size].reshape(n_nodes, total_bins, 2)


def sum_gradients(gpair_native):
    """Sum of all rows' gradient pairs, accumulated row by row in double: reference.sum_gradients."""
    gpair = np.asarray(gpair_native)
    if gpair.dtype != np.float32 or gpair.ndim != 2:
        return reference.sum_gradients(gpair_native)
    out = np.zeros(2, dtype=np.float64)
    _kernels()["sum_rows"](gpair, out)
    return out


def children_histograms(parents, parent_rows, built, build_right, parent_left, parent_right):
    """The children of k split nodes: (2k, total_bins, 2) histograms and (2k, 2) sums, as
    reference.children_histograms makes them (one pass, no temporaries)."""
    if parents.dtype != np.float64 or built.dtype != np.float64:
        return reference.children_histograms(parents, parent_rows, built, build_right, parent_left, parent_right)
    k = built.shape[0]
    rows = np.asarray(parent_rows, dtype=np.int64)
    out = np.empty((2 * k,) + built.shape[1:], dtype=np.float64)
    cpu.run_chunks(_kernels()["children"], k, np.ascontiguousarray(parents), rows, np.ascontiguousarray(built),
                   np.asarray(build_right, dtype=np.bool_), out, min_chunk=max(1, _MIN_PAIRS_PER_THREAD // max(1, built.shape[1])))
    sums = np.stack([parent_left[rows], parent_right[rows]], axis=1)
    return out, sums.reshape(-1, 2)


def rows_sorted(ell) -> bool:
    """Whether every row of a sparse matrix's global symbols never falls (its entries in feature
    order, a repeated column's bins rising): the loops may then search a row. Cached."""
    cached = ell.__dict__.get("_rows_sorted")
    if cached is None:
        cached = bool(_kernels()["never_fall"](global_symbols(ell)))
        ell.__dict__["_rows_sorted"] = cached
    return cached


def global_symbols(ell):
    """(n_rows, row_stride) global bins, total_bins where missing or padding, C order: what the
    compiled loops read (histograms, partitions). Cached on the matrix; the narrowest unsigned
    type that holds total_bins."""
    cached = ell.__dict__.get("_global_symbols")
    if cached is None:
        total_bins = int(ell.cuts.total_bins)
        dtype = np.uint16 if total_bins < 65536 else np.uint32
        local = unpack_symbols(ell.words, ell.bits, ell.n_rows * ell.row_stride)
        if ell.is_dense:
            cached = np.empty(local.size, dtype=dtype)
            _kernels()["globalise"](local, np.asarray(ell.cuts.ptrs, dtype=np.int64), np.uint32(ell.null_symbol),
                                    total_bins, cached)
        else:  # already global; the null symbol is total_bins
            cached = local.astype(dtype)
        cached = cached.reshape(ell.n_rows, ell.row_stride)
        ell.__dict__["_global_symbols"] = cached
    return cached

