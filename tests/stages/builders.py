"""Random inputs the stage tests share: cuts, matrices in each layout, partitions, gradient pairs, trees.

Everything is drawn on the host from a numpy Generator, so the same seed gives the same
input to every backend; a builder that takes a backend packs or grows on it. Values sit on
the cuts' grid, so that many equal a cut exactly (the upper-bound ties of binning).
"""

from __future__ import annotations

import numpy as np
import pytest

from daskgb import ellpack
from daskgb.arrays import to_host
from daskgb.backend import numpy_backend as nb
from daskgb.ellpack import reference as ref
from daskgb.layouts import PREDICT_NODE_DTYPE
from daskgb.sketch import Cuts

MISSING_SENTINEL = -999.0
LAYOUTS = ("dense", "dense_missing", "sparse")


# --------------------------------------------------------------------------- cuts and matrices
def make_cuts(rng, n_features: int, max_bins: int) -> Cuts:
    """Random cuts on a half-integer grid; one feature has exactly max_bins bins."""
    n_bins = rng.integers(1, max_bins + 1, n_features)
    n_bins[rng.integers(n_features)] = max_bins
    ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int32)
    values = np.concatenate([np.sort(rng.choice(np.arange(-2 * b, 2 * b + 1), b, replace=False)) * 0.5 for b in n_bins])
    values = values.astype(np.float32)
    return Cuts(ptrs, values, (values[ptrs[:-1]] - 1.0).astype(np.float32))


def make_X(rng, cuts: Cuts, n_rows: int, missing_frac: float = 0.0, sentinel: bool = False):
    """Values on the cuts' grid, so many equal a cut exactly (upper-bound ties) and
    some lie past the last cut (clamping); NaN and the sentinel mark missing."""
    ptrs = np.asarray(cuts.ptrs)
    cols = []
    for f in range(len(ptrs) - 1):
        b = int(ptrs[f + 1] - ptrs[f])
        cols.append(rng.integers(-2 * b - 6, 2 * b + 7, n_rows) * 0.5)
    X = np.stack(cols, axis=1).astype(np.float32)
    if missing_frac:
        X[rng.random(X.shape) < missing_frac] = np.nan
    if sentinel:
        X[rng.random(X.shape) < missing_frac] = MISSING_SENTINEL
    return X


def make_csr(rng, cuts: Cuts, n_rows: int, density: float, sentinel: bool = False):
    """CSR arrays with unsorted column indices, empty rows (the last one included),
    and explicit NaN (and sentinel) values that count as missing."""
    X = make_X(rng, cuts, n_rows)
    present = rng.random(X.shape) < density
    present[rng.integers(n_rows, size=max(1, n_rows // 10))] = False
    present[-1] = False
    indptr, indices, data = [0], [], []
    for r in range(n_rows):
        cols = rng.permutation(np.flatnonzero(present[r]))
        indices.extend(cols.tolist())
        data.extend(X[r, cols].tolist())
        indptr.append(len(indices))
    data = np.asarray(data, dtype=np.float32)
    data[rng.random(data.size) < 0.05] = np.nan
    if sentinel:
        data[rng.random(data.size) < 0.05] = MISSING_SENTINEL
    return np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64), data


def csr_to_dense(indptr, indices, data, n_rows: int, n_features: int):
    """The CSR rows as a dense array, absent entries NaN."""
    dense = np.full((n_rows, n_features), np.nan, dtype=np.float32)
    for r in range(n_rows):
        dense[r, indices[indptr[r] : indptr[r + 1]]] = data[indptr[r] : indptr[r + 1]]
    return dense


def mostly_missing(rng, cuts, n_rows, sentinel=False):
    """Dense values, ~90% missing in blocks of features: the sparse layout is the smaller one."""
    X = make_X(rng, cuts, n_rows)
    blocks = np.arange(X.shape[1]) // 4
    visit = rng.random((n_rows, blocks.max() + 1)) < 0.1
    X[~visit[:, blocks]] = MISSING_SENTINEL if sentinel else np.nan
    return X


def csr_row_stride(indptr, data, missing: float) -> int:
    keep = ~np.isnan(data) if np.isnan(missing) else ~np.isnan(data) & (data != np.float32(missing))
    c = np.concatenate([[0], np.cumsum(keep)])
    return max(1, int((c[indptr[1:]] - c[indptr[:-1]]).max(initial=0)))


def sparse_ellpack(backend, indptr, indices, data, n_rows: int, cuts: Cuts, missing: float):
    """A sparse-layout Ellpack built with backend.pack_csr (ellpack.from_csr's layout)."""
    xp = backend.xp
    row_stride = csr_row_stride(indptr, data, missing)
    null_symbol, bits = ellpack.sparse_layout(cuts)
    words = backend.pack_csr(xp.asarray(indptr), xp.asarray(indices), xp.asarray(data), n_rows, row_stride,
                             cuts.to(xp), missing, null_symbol, bits)
    return ellpack.Ellpack(words, bits, n_rows, row_stride, False, True, null_symbol, cuts.to(xp))


def random_rows(backend, rng, cuts, layout: str, n_rows: int):
    """n_rows random rows in a layout (LAYOUTS): dense, dense with missing values (10%), or
    sparse (CSR, 60% of the entries present). Returns (the rows as a dense host array, absent
    and missing entries NaN; the matrix packed by backend)."""
    xp = backend.xp
    if layout == "sparse":
        indptr, indices, data = make_csr(rng, cuts, n_rows, 0.6)
        X = csr_to_dense(indptr, indices, data, n_rows, cuts.n_features)
        return X, sparse_ellpack(backend, indptr, indices, data, n_rows, cuts, np.nan)
    X = make_X(rng, cuts, n_rows, 0.1 if layout == "dense_missing" else 0.0)
    return X, ellpack.from_dense(backend, xp.asarray(X), cuts.to(xp), np.nan)


def random_ellpack(backend, rng, cuts, layout: str, n_rows: int):
    """random_rows' matrix alone."""
    return random_rows(backend, rng, cuts, layout, n_rows)[1]


def numpy_ellpack(rng, cuts, layout: str, n_rows: int):
    """A numpy matrix of n_rows random rows in a layout: "dense", "dense_missing" or "sparse"."""
    return random_ellpack(nb, rng, cuts, layout, n_rows)


def both_ellpacks(cb, rng, layout: str, n_rows: int, n_features: int = 7, max_bins: int = 40):
    """The same matrix packed by both backends: (ell_numpy, ell_cupy)."""
    import cupy

    cuts = make_cuts(rng, n_features, max_bins)
    if layout == "sparse":
        indptr, indices, data = make_csr(rng, cuts, n_rows, 0.6)
        return (sparse_ellpack(nb, indptr, indices, data, n_rows, cuts, np.nan),
                sparse_ellpack(cb, indptr, indices, data, n_rows, cuts, np.nan))
    X = make_X(rng, cuts, n_rows, missing_frac=0.1 if layout == "dense_missing" else 0.0)
    ell_n = ellpack.from_dense(nb, X, cuts, np.nan)
    ell_c = ellpack.from_dense(cb, cupy.asarray(X), cuts.to(cupy), np.nan)
    assert ell_n.has_missing == (layout == "dense_missing")
    return ell_n, ell_c


def bins_by_hand(X, cuts: Cuts, missing: float):
    """(n_rows, n_features) feature-local bin of every value, -1 where missing: the first cut
    above the value (upper bound), the last bin for values past the last cut."""
    ptrs, values = np.asarray(to_host(cuts.ptrs)), np.asarray(to_host(cuts.values))
    out = np.empty(X.shape, dtype=np.int64)
    for f in range(X.shape[1]):
        own = values[ptrs[f] : ptrs[f + 1]]
        out[:, f] = np.minimum(np.searchsorted(own, X[:, f], side="right"), own.size - 1)
    miss = np.isnan(X) if np.isnan(missing) else np.isnan(X) | (X == np.float32(missing))
    return np.where(miss, -1, out)


def reference_pack(symbols, bits: int) -> np.ndarray:
    """Bit packing with one Python integer as the bit stream: obviously right, slow."""
    stream = 0
    for i, s in enumerate(symbols.tolist()):
        stream |= int(s) << (i * bits)
    n = ellpack.n_words(len(symbols), bits)
    return np.array([(stream >> (32 * w)) & 0xFFFFFFFF for w in range(n)], dtype=np.uint32)


def assert_words_equal(expected, got, bits: int, n_entries: int, row_stride: int):
    """Equal packed words; on a mismatch, name the first entry whose symbol differs."""
    expected, got = to_host(expected), to_host(got)
    assert got.shape == expected.shape, f"word count: expected {expected.shape}, got {got.shape}"
    if np.array_equal(expected, got):
        return
    se = nb.unpack_symbols(expected, bits, n_entries)
    sg = nb.unpack_symbols(got, bits, n_entries)
    bad = np.flatnonzero(se != sg)
    w = np.flatnonzero(expected != got)
    if bad.size:
        i = int(bad[0])
        detail = (f"{bad.size} entries differ; first: entry {i} (row {i // row_stride}, slot {i % row_stride}) "
                  f"expected symbol {se[i]}, got {sg[i]}")
    else:
        detail = "all symbols equal: only padding bits differ"
    pytest.fail(f"{w.size} of {expected.size} words differ (first word {w[0]}); {detail}")


# --------------------------------------------------------------------------- partitions
def random_level(rng, cuts: Cuts, leaves: list[int], next_id: int, frac: float = 1.0):
    """Random splits of a random subset of leaves (bins from -1, only missing goes left,
    to the feature's last bin, everything present goes left)."""
    ptrs = np.asarray(cuts.ptrs)
    nids = [n for n in leaves if rng.random() < frac] or leaves[:1]
    k = len(nids)
    features = rng.integers(0, len(ptrs) - 1, k)
    n_bins = ptrs[features + 1] - ptrs[features]
    bins = np.array([rng.integers(-1, nb_) for nb_ in n_bins], dtype=np.int32)
    default_left = rng.integers(0, 2, k).astype(np.int32)
    left_ids = np.arange(next_id, next_id + 2 * k, 2, dtype=np.int32)
    right_ids = left_ids + 1
    return (np.asarray(nids, dtype=np.int32), features.astype(np.int32), bins, default_left, left_ids, right_ids)


def next_leaves(leaves: list[int], args) -> tuple[list[int], int]:
    """The leaves after a level of splits (random_level's arrays), and the next free node id."""
    split_nodes = set(args[0].tolist())
    leaves = [n for n in leaves if n not in split_nodes] + [int(x) for p in zip(args[4], args[5]) for x in p]
    return leaves, int(args[5].max()) + 1


def grow_partitions(cb, ell_n, ell_c, rng, n_levels: int = 3):
    """Apply the same random levels of splits on both backends; check positions after each.

    The first level sends every row of the root left (an empty right child), so
    later levels split a node that has no rows.
    """
    part_n, part_c = nb.new_partition(ell_n.n_rows), cb.new_partition(ell_c.n_rows)
    ptrs = np.asarray(ell_n.cuts.ptrs)
    leaves, next_id = [0], 1
    for level in range(n_levels):
        if level == 0:
            f = 0
            args = (np.array([0], np.int32), np.array([f], np.int32), np.array([ptrs[f + 1] - ptrs[f] - 1], np.int32),
                    np.array([1], np.int32), np.array([1], np.int32), np.array([2], np.int32))
        else:
            args = random_level(rng, ell_n.cuts, leaves, next_id, frac=1.0 if level == 1 else 0.8)
        nb.apply_splits(ell_n, part_n, *args)
        cb.apply_splits(ell_c, part_c, *args)
        got = to_host(part_c.positions)
        bad = np.flatnonzero(got != part_n.positions)
        assert bad.size == 0, (f"level {level}: {bad.size} rows in different nodes; first row {bad[0]}: "
                               f"numpy node {part_n.positions[bad[0]]}, cuda node {got[bad[0]]}; splits {args}")
        check_segments(part_c)
        leaves, next_id = next_leaves(leaves, args)
    return part_n, part_c


def check_segments(part_c):
    """Each segment holds exactly its node's rows, in increasing order, and the segments tile ridx."""
    pos, ridx = to_host(part_c.positions), to_host(part_c.ridx)
    covered = 0
    for node, (start, count) in sorted(part_c.segments.items(), key=lambda kv: kv[1]):
        assert start == covered, f"segments do not tile ridx: node {node} starts at {start}, expected {covered}"
        expected = np.flatnonzero(pos == node)
        got = ridx[start : start + count]
        assert np.array_equal(got, expected), (f"node {node}: segment ({start}, {count}) holds rows {got[:10]}..., "
                                                f"positions say {expected[:10]}... ({expected.size} rows)")
        covered += count
    assert covered == pos.size, f"segments cover {covered} of {pos.size} rows"


def forest_levels(rng, cuts, n_trees: int, n_levels: int):
    """Random levels of splits for each tree, in local node ids: [level][tree] -> split arrays."""
    leaves = [[0] for _ in range(n_trees)]
    next_id = [1] * n_trees
    levels = []
    for _ in range(n_levels):
        level = []
        for c in range(n_trees):
            args = random_level(rng, cuts, leaves[c], next_id[c], frac=0.8)
            leaves[c], next_id[c] = next_leaves(leaves[c], args)
            level.append(args)
        levels.append(level)
    return levels


def to_global(args, c: int, n_trees: int):
    """Tree c's split arrays in the forest's node ids (node g belongs to tree g % n_trees)."""
    nids, features, bins, default_left, lids, rids = args
    g = lambda ids: (ids.astype(np.int64) * n_trees + c).astype(np.int32)  # noqa: E731
    return g(nids), features, bins, default_left, g(lids), g(rids)


def concat(level, n_trees):
    """One level of every tree's splits as one forest level."""
    parts = [to_global(args, c, n_trees) for c, args in enumerate(level)]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(6))


# --------------------------------------------------------------------------- gradients
def random_gpair(rng, n_rows: int):
    g = rng.normal(size=n_rows)
    g[rng.random(n_rows) < 0.05] = 0.0
    return np.stack([g, rng.uniform(0.1, 1.0, n_rows)], axis=1).astype(np.float32)


def fixed_histogram(ell_n, fixed, positions, build_nodes):
    """The int64 histogram, added row by row with np.add.at: what the kernel must equal exactly.

    positions may cover a forest's virtual rows (a multiple of the matrix's rows): virtual row
    v reads matrix row v % n_rows and gradient pair v."""
    sym = ref.symbols(ell_n).astype(np.int64)
    total_bins = int(ell_n.cuts.total_bins)
    hist = np.zeros((len(build_nodes), total_bins, 2), dtype=np.int64)
    for s, node in enumerate(build_nodes):
        rows = np.flatnonzero(positions == node)
        rs = sym[rows % ell_n.n_rows]
        present = rs != ell_n.null_symbol
        gbin = rs + np.asarray(ell_n.cuts.ptrs[:-1], dtype=np.int64)[None, :] if ell_n.is_dense else rs
        for c in range(2):
            v = np.broadcast_to(fixed[rows, c : c + 1], rs.shape)
            np.add.at(hist[s, :, c], gbin[present], v[present])
    return hist


# --------------------------------------------------------------------------- trees
def random_trees(rng, n_trees: int, n_features: int, max_depth: int):
    """PREDICT_NODE_DTYPE records of random trees (node 0 the root), and each tree's offset."""
    trees = []
    for _ in range(n_trees):
        rows = {}
        todo = [(0, 0)]
        n_nodes = 1
        while todo:
            nid, depth = todo.pop()
            if depth < max_depth and (depth == 0 or rng.random() < 0.75):
                left, right = n_nodes, n_nodes + 1
                n_nodes += 2
                rows[nid] = (left, right, rng.integers(n_features), rng.integers(2), rng.integers(-20, 21) * 0.5, 0.0)
                todo += [(left, depth + 1), (right, depth + 1)]
            else:
                rows[nid] = (-1, -1, 0, 0, 0.0, rng.normal() * 0.3)
        trees.append(np.array([rows[i] for i in range(n_nodes)], dtype=PREDICT_NODE_DTYPE))
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in trees])]).astype(np.int32)
    return np.concatenate(trees), offsets


def random_binned_tree(rng, cuts: Cuts, max_depth: int):
    """A Tree of random splits on the cuts' bins (bins from -1: only missing goes left, to
    the feature's last bin: all present go left)."""
    from daskgb.tree import FIELDS, Tree

    ptrs = np.asarray(cuts.ptrs)
    nodes, todo = {}, [(0, 0)]
    n_nodes = 1
    while todo:
        nid, depth = todo.pop()
        if depth < max_depth and (depth == 0 or rng.random() < 0.75):
            f = int(rng.integers(len(ptrs) - 1))
            nodes[nid] = (n_nodes, n_nodes + 1, f, int(rng.integers(-1, ptrs[f + 1] - ptrs[f])), int(rng.integers(2)),
                          0.0, depth)
            todo += [(n_nodes, depth + 1), (n_nodes + 1, depth + 1)]
            n_nodes += 2
        else:
            nodes[nid] = (-1, -1, -1, -1, 0, float(rng.normal()), depth)
    cols = list(zip(*(nodes[i] for i in range(n_nodes))))
    given = dict(zip(("left", "right", "feature", "bin", "default_left", "value", "depth"), cols))
    return Tree(**{name: np.asarray(given.get(name, np.zeros(n_nodes)), dtype=dtype) for name, dtype in FIELDS.items()})


def route_by_partition(backend, ell, tree):
    """Every row's leaf (host array), routed a level at a time by backend.apply_splits
    (training's partition): the reference for add_leaf_values."""
    part = backend.new_partition(ell.n_rows)
    internal = np.flatnonzero(~tree.is_leaf)
    for depth in range(int(tree.depth.max()) + 1):
        nids = internal[tree.depth[internal] == depth]
        if nids.size:
            backend.apply_splits(ell, part, nids.astype(np.int32), tree.feature[nids], tree.bin[nids],
                                 tree.default_left[nids].astype(np.int32), tree.left[nids], tree.right[nids])
    return to_host(part.positions)
