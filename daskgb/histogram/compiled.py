"""The histogram stage compiled for CPUs (cpu/): reference.py's sums at a compiled loop's speed, bit for bit
but in skewed features' most common bins.

Every bin's gradient sum is accumulated in float64 in row order, as reference.py's bincounts
(and XGBoost's single-threaded CPU builder) accumulate it, so the two give the same bits (but
see skewed features below). The threads split the bins (features, trees), never a bin's rows.

A dense matrix is read as bytes (a byte a symbol where the bins fit), in one of two copies.
A level first lists its rows in built nodes (_entries: matrix row and gradient pair, tree by
tree within pieces of rows made by the threads); then each work item, a tree's rows over a
piece of the features, walks its tree's list once per group of features, a group being as
many features as keep the tree's histograms of them within _HIST_BUDGET bins (in cache).
Where the walks read few cache lines of a row in all (shallow levels, narrow rows), they read
row_symbols (row-major), prefetching the rows listed _ROWS_AHEAD ahead: the rows rise with
gaps, which the hardware's stride prefetchers cannot follow, and unprefetched each row was a
cache miss (~0.9 against ~0.5 ns an add). Else they read feature_columns (each feature's
symbols side by side), each walk reading only its features' bytes. Why not row-major with
every node's histograms at once: a row then adds into one of up to 64 nodes' histograms of
every feature (megabytes, out of cache), ~4 ns an add at 500K Higgs-shaped rows' deep levels.
XGBoost's order (a level's rows node by node, a node's histogram in cache) measured no better
than the tree-by-tree list (Covertype 331-336 against 314 ms a round).

A dense matrix's listed features (entry_layout) are read apart, by their entries other than
a dominant bin or symbol: a skewed feature's (no missing entry, one bin in at least
_SKEWED_SHARE of the rows; a one-hot column's zeros) other bins, and a mostly missing feature's
(missing in at least _MISSING_SHARE of the rows; Bosch's measurements of stations a part
skipped) present entries. 7-class Covertype's 44 one-hot columns hold 2 such entries a row,
not 44; an 80%-missing row a fifth of its features. They are kept as CSR in blocks of their
bins (a row's entries of a block side by side), each block's histogram of a node within
_HIST_BUDGET: a level walks a tree's rows as listed where all its nodes' histograms of a block
fit in cache together (_listed_by_rows), else node by node (_listed; XGBoost's order), so
that a deep level of a wide matrix walks its rows once a block, not once a group of a few
features. Each node's most common bin of a skewed feature is the node's sum of rows less its
other bins (_implicit_bins): those bins alone are not the oracle's bits but its sums to
rounding (a subtraction, not a row-order sum); every other bin keeps the bits.

A sparse matrix is read as global symbols (global_symbols): every entry is its global bin,
or total_bins where it is missing or padding, in C order (a row's entries side by side),
split by ranges of global bins (each thread reads every row's entries up to its range's end).
The histogram is one flat float64 array indexed without signs, a row's pair added to a bin as
one two-lane add (cpu/intrinsics.py add_pair), and a dense matrix's missing
entry adds to its feature's spare pair past the histograms rather than being branched around
(a missing entry would be a mispredicted branch; the spare adds are cheap), where the
feature misses few entries (a mostly missing one is listed, above). A level's histograms go
to buffers reused from level to level (cpu/buffers.py): wide ones were mostly page faults.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from .. import cpu
from ..cpu.buffers import float64_buffer
from ..cpu.intrinsics import add_pair, prefetch
from ..ellpack.compiled import unpack_columns, unpack_symbols
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


def _entries(lo, hi, bounds, positions, slot_of_node, n_rows, gpair, ell_rows, slots, gh, counts):
    """Pieces lo..hi of the level's row list: piece c lists the virtual rows in nodes being
    built among matrix rows bounds[c]..bounds[c + 1], tree by tree (a tree's rows in row
    order), each as its matrix row, its node's slot and its gradient pair (a copy: the feature
    loops walk the list once per group of features, a stream rather than a gather each time).
    A piece is written from its first virtual row's place, bounds[c] * n_trees, and
    counts[c, t] says how many rows of tree t it kept; each row is written and kept only where
    its node is built, without a branch."""
    n_trees = positions.shape[0] // n_rows if n_rows else 0
    for c in range(lo, hi):
        n = np.uint64(bounds[c] * n_trees)
        for t in range(n_trees):
            first = n
            for r in range(bounds[c], bounds[c + 1]):
                v = np.uint64(t * n_rows + r)
                s = slot_of_node[np.uint64(positions[v])]
                ell_rows[n] = r
                slots[n] = s
                gh[n, 0] = gpair[v, 0]
                gh[n, 1] = gpair[v, 1]
                n += np.uint64(s >= 0)
            counts[c, t] = np.int64(n - first)


def _dense(lo, hi, sym, step_feature, step_row, ahead, node_offsets, feature_bounds, group_end, starts, counts, ell_rows,
           slots, gh, hist, null_symbol, spare_pairs):
    """Work items lo..hi of a dense level: item w is tree w // P's listed rows (the list's
    piece c: entries starts[c, t].., counts[c, t] of them, _entries) over the features
    feature_bounds[w % P]..feature_bounds[w % P + 1] (P pieces of features), a group of
    features (j0..group_end[j0], _feature_groups) a walk of the tree's rows. Feature j of
    matrix row r is sym[j * step_feature + r * step_row]: feature_columns or row_symbols (a
    step_feature of 1: the row-major loop, its reads a row's run of bytes). A row's bin of
    feature j is node_offsets[slot, j] + its symbol (_node_offsets).
    A missing entry (null_symbol) adds to a spare pair past every node's bins, which nothing
    reads: one for every feature, because a spare shared by the piece made each missing entry
    wait for the last one's add (a store-to-load chain; on an 80%-missing matrix most of the
    loop's time), and a set of them for every tree (spare_pairs[t]: _level_buffer), because
    threads walking two trees' rows over the same features would otherwise add into the same
    lines."""
    two = np.uint64(2)
    one = np.uint64(1)
    nf = np.uint64(node_offsets.shape[1])
    offsets = node_offsets.ravel()
    null = np.uint64(null_symbol)
    sj = np.uint64(step_feature)
    sr = np.uint64(step_row)
    n_pieces = np.uint64(feature_bounds.shape[0] - 1)
    for w in range(lo, hi):
        t = np.uint64(w) // n_pieces
        f = np.uint64(w) % n_pieces
        spare = spare_pairs[t]
        j0 = np.uint64(feature_bounds[f])
        f1 = np.uint64(feature_bounds[f + one])
        while j0 < f1:
            j1 = min(np.uint64(group_end[j0]), f1)
            for c in range(starts.shape[0]):  # the list's pieces, in row order
                i = np.uint64(starts[c, t])
                end = i + np.uint64(counts[c, t])
                while i < end:  # unsigned indices throughout: numba checks a signed one for wrap-around
                    if ahead != 0 and i + ahead < end:
                        later = np.uint64(ell_rows[i + ahead]) * sr
                        prefetch(sym, later)
                        prefetch(sym, later + sr - one)
                    row = np.uint64(ell_rows[i]) * sr
                    g = np.float64(gh[i, 0])
                    h = np.float64(gh[i, 1])
                    node = np.uint64(slots[i]) * nf
                    j = j0
                    # The spare chosen by arithmetic: as a conditional expression it cost ~0.4 ns an
                    # add more (one thread, 100K rows x 20, 5% missing: 2.1-2.3 -> 1.5-1.9 ns an add).
                    if sj == one:
                        while j < j1:
                            s = np.uint64(sym[row + j])
                            at = (offsets[node + j] + s) * two
                            add_pair(hist, at + np.uint64(s == null) * (spare[j] - at), g, h)
                            j += one
                    else:
                        while j < j1:
                            s = np.uint64(sym[j * sj + row])
                            at = (offsets[node + j] + s) * two
                            add_pair(hist, at + np.uint64(s == null) * (spare[j] - at), g, h)
                            j += one
                    i += one
            j0 = j1


def _dense_full(lo, hi, sym, step_feature, step_row, ahead, node_offsets, feature_bounds, group_end, starts, counts,
                ell_rows, slots, gh, hist, null_symbol, spare_pairs):
    """_dense where no entry is missing (the matrix has none): no symbol to compare, no spare
    pair to choose. A copy of _dense's walk on purpose: without the compare a full matrix's
    level took 15-20% less (one thread, 500K Higgs- and Covertype-shaped rows, either symbol
    layout); one kernel with the flag as numba's literal cost ~30 ms a call in dispatch."""
    two = np.uint64(2)
    one = np.uint64(1)
    nf = np.uint64(node_offsets.shape[1])
    offsets = node_offsets.ravel()
    sj = np.uint64(step_feature)
    sr = np.uint64(step_row)
    n_pieces = np.uint64(feature_bounds.shape[0] - 1)
    for w in range(lo, hi):
        t = np.uint64(w) // n_pieces
        f = np.uint64(w) % n_pieces
        j0 = np.uint64(feature_bounds[f])
        f1 = np.uint64(feature_bounds[f + one])
        while j0 < f1:
            j1 = min(np.uint64(group_end[j0]), f1)
            for c in range(starts.shape[0]):  # the list's pieces, in row order
                i = np.uint64(starts[c, t])
                end = i + np.uint64(counts[c, t])
                while i < end:
                    if ahead != 0 and i + ahead < end:
                        later = np.uint64(ell_rows[i + ahead]) * sr
                        prefetch(sym, later)
                        prefetch(sym, later + sr - one)
                    row = np.uint64(ell_rows[i]) * sr
                    g = np.float64(gh[i, 0])
                    h = np.float64(gh[i, 1])
                    node = np.uint64(slots[i]) * nf
                    j = j0
                    if sj == one:
                        while j < j1:
                            add_pair(hist, (offsets[node + j] + np.uint64(sym[row + j])) * two, g, h)
                            j += one
                    else:
                        while j < j1:
                            add_pair(hist, (offsets[node + j] + np.uint64(sym[j * sj + row])) * two, g, h)
                            j += one
                    i += one
            j0 = j1


def _dense_root(lo, hi, sym, step_feature, step_row, node_offsets, feature_bounds, group_end, n_rows, gpair, hist,
                null_symbol, full, spare_pairs):
    """Work items lo..hi of a root level (every virtual row of tree t in node t, slot t): item w
    is tree w // P's rows 0..n_rows in order, their pairs read from gpair in place (tree t's
    from row t * n_rows), over features feature_bounds[w % P]..feature_bounds[w % P + 1], a group
    of features (group_end) a walk. No row list: the rows are contiguous, so the hardware's
    prefetchers follow them. Missing entries add to spare pairs as in _dense; where full, no
    symbol is compared."""
    two = np.uint64(2)
    one = np.uint64(1)
    null = np.uint64(null_symbol)
    sj = np.uint64(step_feature)
    sr = np.uint64(step_row)
    un = np.uint64(n_rows)
    n_pieces = np.uint64(feature_bounds.shape[0] - 1)
    for w in range(lo, hi):
        t = np.uint64(w) // n_pieces
        f = np.uint64(w) % n_pieces
        offsets = node_offsets[t]
        spare = spare_pairs[t]
        first = t * un
        j0 = np.uint64(feature_bounds[f])
        f1 = np.uint64(feature_bounds[f + one])
        while j0 < f1:
            j1 = min(np.uint64(group_end[j0]), f1)
            r = np.uint64(0)
            while r < un:
                row = r * sr
                g = np.float64(gpair[first + r, 0])
                h = np.float64(gpair[first + r, 1])
                j = j0
                if full and sj == one:
                    while j < j1:
                        add_pair(hist, (offsets[j] + np.uint64(sym[row + j])) * two, g, h)
                        j += one
                elif full:
                    while j < j1:
                        add_pair(hist, (offsets[j] + np.uint64(sym[j * sj + row])) * two, g, h)
                        j += one
                elif sj == one:
                    while j < j1:
                        s = np.uint64(sym[row + j])
                        at = (offsets[j] + s) * two
                        add_pair(hist, at + np.uint64(s == null) * (spare[j] - at), g, h)
                        j += one
                else:
                    while j < j1:
                        s = np.uint64(sym[j * sj + row])
                        at = (offsets[j] + s) * two
                        add_pair(hist, at + np.uint64(s == null) * (spare[j] - at), g, h)
                        j += one
                r += one
            j0 = j1


def _dense_by_node(lo, hi, sym, n_features, ahead, node_offsets, feature_bounds, node_starts, node_rows, node_gh, hist,
                   null_symbol, full, spare_pairs):
    """Work items lo..hi of a dense level too deep for _dense's walks (its nodes' histograms
    of a feature group out of cache together): item w is built node (slot) w // P's rows
    (node_rows, _scatter_by_node) over the features feature_bounds[w % P]..feature_bounds[w % P + 1]
    (P pieces, each one node's histograms of it within _HIST_BUDGET), read row-major (sym:
    row_symbols), a row's features in one walk, the rows prefetched _ROWS_AHEAD ahead (a deep
    level's rows are scattered). A missing entry adds to a spare pair of its feature and node
    (_dense's, spare_pairs[slot]: two threads' nodes share no line); where full (the matrix misses
    none) no symbol is compared (the flag is tested once a row, outside the features' loop)."""
    two = np.uint64(2)
    one = np.uint64(1)
    null = np.uint64(null_symbol)
    sr = np.uint64(n_features)
    n_pieces = np.uint64(feature_bounds.shape[0] - 1)
    for w in range(lo, hi):
        s = np.uint64(w) // n_pieces
        f = np.uint64(w) % n_pieces
        offsets = node_offsets[s]
        spare = spare_pairs[s]
        j0 = np.uint64(feature_bounds[f])
        j1 = np.uint64(feature_bounds[f + one])
        i = np.uint64(node_starts[s])
        end = np.uint64(node_starts[s + one])
        while i < end:
            if i + ahead < end:
                later = np.uint64(node_rows[i + ahead]) * sr
                prefetch(sym, later + j0)
                prefetch(sym, later + j1 - one)
            row = np.uint64(node_rows[i]) * sr
            g = np.float64(node_gh[i, 0])
            h = np.float64(node_gh[i, 1])
            j = j0
            if full:
                while j < j1:
                    add_pair(hist, (offsets[j] + np.uint64(sym[row + j])) * two, g, h)
                    j += one
            else:
                while j < j1:
                    v = np.uint64(sym[row + j])
                    at = (offsets[j] + v) * two  # the spare by arithmetic, as in _dense
                    add_pair(hist, at + np.uint64(v == null) * (spare[j] - at), g, h)
                    j += one
            i += one


def _count_by_node(lo, hi, starts, counts, slots, node_counts):
    """Pieces lo..hi of the level's row list (_entries): node_counts[c, s], how many of piece
    c's rows slot s holds."""
    for c in range(lo, hi):
        for t in range(starts.shape[1]):
            for i in range(starts[c, t], starts[c, t] + counts[c, t]):
                node_counts[c, slots[i]] += 1


def _scatter_by_node(lo, hi, starts, counts, ell_rows, slots, gh, cursor, node_rows, node_gh):
    """Pieces lo..hi of the level's row list (_entries) again node by node: piece c's rows of
    slot s from node_rows[cursor[c, s]] on, in row order (the pieces' places follow the
    pieces' order within a slot: a stable counting sort), as _listed and _dense_by_node walk
    them."""
    for c in range(lo, hi):
        for t in range(starts.shape[1]):
            for i in range(starts[c, t], starts[c, t] + counts[c, t]):
                s = slots[i]
                at = cursor[c, s]
                node_rows[at] = ell_rows[i]
                node_gh[at, 0] = gh[i, 0]
                node_gh[at, 1] = gh[i, 1]
                cursor[c, s] = at + 1


def _listed(lo, hi, n_blocks, node_starts, node_rows, node_gh, indptr, entries, block_first, n_rows, hist, totals,
            total_bins, with_totals, zero):
    """Work items lo..hi of a dense level's listed features (entry_layout): item w is built
    node (slot) w // n_blocks's rows (node_rows, _scatter_by_node) over block w % n_blocks of those
    features' bins; each row adds its entries in the block (indptr, entries: bins counted from
    the block's first, block_first) into the node's histogram of the block, which stays in
    cache (_HIST_BUDGET). Where with_totals (skewed features), block 0's items also sum each
    node's rows into totals, in row order: a skewed feature's most common bin is the node's
    sum less its other bins (_implicit_bins). Where zero (every feature listed: the blocks
    cover every bin), an item first zeroes its node's histogram of the block, which the adds
    then find in cache."""
    tb = np.uint64(total_bins)
    two = np.uint64(2)
    one = np.uint64(1)
    nb = np.uint64(n_blocks)
    ur = np.uint64(n_rows)
    far = np.uint64(2 * _ROWS_AHEAD)
    near = np.uint64(_ROWS_AHEAD)
    line = np.uint64(64 // entries.itemsize)
    for w in range(lo, hi):
        s = np.uint64(w) // nb
        b = np.uint64(w) % nb
        base = s * tb + np.uint64(block_first[b])
        rows_at = b * ur
        sum_totals = with_totals and b == np.uint64(0)
        if zero:
            hist[base * two:(s * tb + np.uint64(block_first[b + one])) * two] = 0.0
        i = np.uint64(node_starts[s])
        end = np.uint64(node_starts[s + one])
        while i < end:
            # A deep level's rows are scattered: each row's place in indptr, then its entries,
            # fetched ahead (a cache miss each otherwise; the hardware cannot guess them).
            if i + far < end:
                prefetch(indptr, rows_at + np.uint64(node_rows[i + far]))
            if i + near < end:
                later = np.uint64(indptr[rows_at + np.uint64(node_rows[i + near])])
                prefetch(entries, later)
                prefetch(entries, later + line)
            at = rows_at + np.uint64(node_rows[i])
            g = np.float64(node_gh[i, 0])
            h = np.float64(node_gh[i, 1])
            a = np.uint64(indptr[at])
            e = np.uint64(indptr[at + one])
            if sum_totals:
                add_pair(totals, s * _TOTALS_STRIDE, g, h)
            while a < e:
                add_pair(hist, (base + np.uint64(entries[a])) * two, g, h)
                a += one
            i += one


def _listed_by_rows(lo, hi, n_blocks, starts, counts, ell_rows, slots, gh, indptr, entries, block_first, n_rows, hist,
                    totals, total_bins, with_totals):
    """_listed where every node of a tree fits in cache together (few nodes, or narrow blocks:
    a one-hot column's 2 bins): item w is tree w // n_blocks's rows as the level lists them
    (_entries, row order) over block w % n_blocks, each row adding into its own node's
    histogram; no list node by node to make."""
    tb = np.uint64(total_bins)
    two = np.uint64(2)
    one = np.uint64(1)
    nb = np.uint64(n_blocks)
    ur = np.uint64(n_rows)
    for w in range(lo, hi):
        t = np.uint64(w) // nb
        b = np.uint64(w) % nb
        first = np.uint64(block_first[b])
        rows_at = b * ur
        sum_totals = with_totals and b == np.uint64(0)
        for c in range(starts.shape[0]):  # the list's pieces, in row order
            i = np.uint64(starts[c, t])
            end = i + np.uint64(counts[c, t])
            while i < end:
                at = rows_at + np.uint64(ell_rows[i])
                g = np.float64(gh[i, 0])
                h = np.float64(gh[i, 1])
                slot = np.uint64(slots[i])
                a = np.uint64(indptr[at])
                e = np.uint64(indptr[at + one])
                if sum_totals:
                    add_pair(totals, slot * _TOTALS_STRIDE, g, h)
                base = slot * tb + first
                while a < e:
                    add_pair(hist, (base + np.uint64(entries[a])) * two, g, h)
                    a += one
                i += one


def _implicit_bins(hist, totals, n_nodes, total_bins, implicit, first, last):
    """Each built node's skewed features' most common bins (implicit: global bins; their
    features' bins first..last): the node's pair (totals) less the feature's other bins, in
    bin order."""
    tb = np.uint64(total_bins)
    two = np.uint64(2)
    for node in range(n_nodes):
        base = np.uint64(node) * tb
        for k in range(implicit.shape[0]):
            d = np.uint64(implicit[k])
            g = totals[np.uint64(node) * _TOTALS_STRIDE]
            h = totals[np.uint64(node) * _TOTALS_STRIDE + np.uint64(1)]
            for b in range(first[k], last[k]):
                ub = np.uint64(b)
                if ub != d:
                    g -= hist[(base + ub) * two]
                    h -= hist[(base + ub) * two + np.uint64(1)]
            hist[(base + d) * two] = g
            hist[(base + d) * two + np.uint64(1)] = h


def _count_entries(lo, hi, columns, features, dominant, block_features, n_rows, counts):
    """Blocks lo..hi of entry_layout: counts[b * n_rows + r + 1], how many of block b's features
    (features[block_features[b]:block_features[b + 1]], rows of columns, feature_columns) row r
    holds in a bin other than the feature's dominant one (or its null symbol)."""
    for b in range(lo, hi):
        at = b * n_rows + 1
        for k in range(block_features[b], block_features[b + 1]):
            col = columns[features[k]]
            d = dominant[k]
            for r in range(n_rows):
                counts[at + r] += np.int64(col[r] != d)


def _fill_entries(lo, hi, columns, features, dominant, block_features, n_rows, bin_in_block, cursor, entries):
    """Blocks lo..hi of entry_layout: _count_entries' entries, each its bin counted from its
    block's first (bin_in_block[k]: feature k's first), each row's in feature order (rising),
    from cursor[b * n_rows + r]."""
    for b in range(lo, hi):
        at = b * n_rows
        for k in range(block_features[b], block_features[b + 1]):
            col = columns[features[k]]
            d = dominant[k]
            first = bin_in_block[k]
            for r in range(n_rows):
                s = col[r]
                if s != d:
                    entries[cursor[at + r]] = first + s
                    cursor[at + r] += 1


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
                add_pair(hist, k, g, h)
                j += np.uint64(1)
            continue
        for j in range(stride):
            s = np.uint64(flat[base + np.uint64(j)])
            if s >= tb:
                break
            if ulo <= s < uhi:
                k = (off + s) * two
                add_pair(hist, k, g, h)


def _rows_never_fall(gsym):
    """Whether every row's entries (padding, total_bins, included) never fall."""
    for r in range(gsym.shape[0]):
        for j in range(1, gsym.shape[1]):
            if gsym[r, j] < gsym[r, j - 1]:
                return False
    return True


def _children(lo, hi, parents, parent_rows, built, build_right, out):
    """Splits lo..hi: the built child's histogram and its sibling's (the parent's minus it),
    left child at row 2i of out, right at 2i + 1 (reference.children_histograms). Flat and
    unsigned: a node's histogram is one run of floats, copied and subtracted in SIMD lanes."""
    width = np.uint64(built.shape[1] * built.shape[2])
    parents_flat = parents.ravel()
    built_flat = built.ravel()
    out_flat = out.ravel()
    one = np.uint64(1)
    for i in range(lo, hi):
        ui = np.uint64(i)
        right = np.uint64(build_right[i])
        p0 = np.uint64(parent_rows[i]) * width
        c0 = ui * width
        built_at = (np.uint64(2) * ui + right) * width
        other_at = (np.uint64(2) * ui + (one - right)) * width
        b = np.uint64(0)
        while b < width:
            c = built_flat[c0 + b]
            out_flat[built_at + b] = c
            out_flat[other_at + b] = parents_flat[p0 + b] - c
            b += one


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
        _compiled.update(rows_of=cpu.jit(_rows_of), entries=cpu.jit(_entries), never_fall=cpu.jit(_rows_never_fall), dense=cpu.jit(_dense),
                         dense_full=cpu.jit(_dense_full), dense_root=cpu.jit(_dense_root), sparse=cpu.jit(_sparse), count_by_node=cpu.jit(_count_by_node),
                         scatter_by_node=cpu.jit(_scatter_by_node),
                         listed=cpu.jit(_listed), dense_by_node=cpu.jit(_dense_by_node), listed_by_rows=cpu.jit(_listed_by_rows), implicit_bins=cpu.jit(_implicit_bins),
                         count_entries=cpu.jit(_count_entries), fill_entries=cpu.jit(_fill_entries),
                         children=cpu.jit(_children),
                         sum_rows=cpu.jit(_sum_rows))
    return _compiled


# Below this many (row, feature) pairs a level's histogram is one thread's work.
_MIN_PAIRS_PER_THREAD = 1 << 16
# Where the threads' even shares of a dense level's features would walk its rows unequally
# often (features of many bins beside features of few: Covertype's 10 of ~256 and 44 of 2),
# the features are cut into this many pieces a thread, each taken by whichever thread is free:
# a 7-class Covertype round's histograms 358 -> 292 ms. Where the shares are even (Higgs) one
# piece a thread, each walking the list fewer times, was ~3% faster.
_PIECES_PER_THREAD = 3
# Below this many matrix rows a level's row list is one thread's work.
_MIN_ROWS_PER_THREAD = 1 << 15

# A dense level's walk of its rows adds into at most this many bins (nodes x bins of the
# group's features): 32K float64 pairs, 512 KiB, half an L2 cache of today's server cores.
# On 500K Higgs-shaped rows (2 threads) 8K and 256K bins were slower; 32K and 64K alike.
_HIST_BUDGET = 1 << 15
# A dense level whose walks read at most this many cache lines of a row in all reads the
# row-major symbols (_dense_level).
_MAX_LINES_BY_ROWS = 8
# How many listed rows ahead a row-major walk prefetches a row's symbols.
_ROWS_AHEAD = 16
# A feature of a dense matrix with no missing entry whose most common bin holds at least this
# share of the rows is read by its other entries only (entry_layout; e.g. a one-hot column).
# 500K rows of 8 normal and 20 binary columns, depth 8, 2 threads, 20 rounds, read this way
# against densely (medians of 4): the binary columns' common value in 50% of the rows 3.40
# against 3.00 s, in 65% 3.15 against 3.13 s, in 75% 2.82 against 2.99 s.
_SKEWED_SHARE = 0.7
# A feature of a dense matrix missing in at least this share of the rows is read by its present
# entries only (entry_layout; e.g. Bosch's measurements of stations a part skipped).
_MISSING_SHARE = 0.5
# The listed features' bins are cut into this many blocks a thread (entry_layout), each a walk of
# a node's rows: the root's items.
_BLOCKS_PER_THREAD = 4
# The fewest entries a row holds on average in a block of the listed features' bins (entry_layout).
_MIN_ENTRIES_PER_BLOCK = 8
# A node's pair in _listed's totals is a cache line (8 float64) from the next one's: two threads'
# items add into different nodes' totals at once (a forest's trees, or nodes), and pairs side by
# side would share their lines.
_TOTALS_STRIDE = np.uint64(8)


_scratch = threading.local()


def _level_lists(n):
    """A level's row list (matrix rows, node slots, gradient pairs) for up to n rows: this
    thread's buffers, kept from level to level (fresh megabytes each level cost their page
    faults and unmapping, ~10% of a 500K-row round). A Dask worker may grow two trees at once,
    on two threads: hence one set a thread."""
    lists = getattr(_scratch, "lists", None)
    if lists is None or lists[0].shape[0] < n:
        lists = (np.empty(n, dtype=np.uint32), np.empty(n, dtype=np.int32), np.empty((n, 2), dtype=np.float32))
        _scratch.lists = lists
    return lists


def _node_lists(n):
    """The level's row list node by node (_scatter_by_node: matrix rows, gradient pairs) for up to n
    rows: this thread's buffers, kept as _level_lists keeps its."""
    lists = getattr(_scratch, "node_lists", None)
    if lists is None or lists[0].shape[0] < n:
        lists = (np.empty(n, dtype=np.uint32), np.empty((n, 2), dtype=np.float32))
        _scratch.node_lists = lists
    return lists


def _walks(group_end, lo, hi) -> int:
    """How many walks of a level's rows features lo..hi take (their groups)."""
    n, j = 0, lo
    while j < hi:
        j, n = min(int(group_end[j]), hi), n + 1
    return n


def _pieces_per_thread(group_end, min_chunk):
    """1 where the threads' even shares of the features walk the level's rows as often (within
    one walk), else _PIECES_PER_THREAD."""
    walks = [_walks(group_end, lo, hi)
             for lo, hi in cpu.chunks(group_end.size, min(cpu.threads(), max(1, group_end.size // min_chunk)))]
    return 1 if max(walks) - min(walks) <= 1 else _PIECES_PER_THREAD


def _node_offsets(offsets, n_slots, total_bins):
    """(n_slots, n_features) uint64: node slot s's first global bin of each densely read feature
    (offsets, n_features + 1 of them), s * total_bins + offsets[j]: the walks find a row's bin
    as one load and one add, its node's place folded in (a root walk's adds ~25% faster, one
    thread, 500K Higgs-shaped rows, than adding the node's place to the feature's offset)."""
    base = np.arange(n_slots, dtype=np.uint64)[:, None] * np.uint64(total_bins)
    return np.ascontiguousarray(base + np.asarray(offsets[:-1], dtype=np.uint64)[None, :])


def _level_buffer(size, n_features, spare_sets, zero):
    """A level's flat histogram of size floats (zeroed where zero), and past it spare_sets sets
    of a spare pair for each densely read feature, which its missing entries add into (_dense);
    with the (spare_sets, n_features) uint64 table of where each set's pair of each feature
    starts (one set of zeros, never read, where the matrix misses no entry: spare_sets 0)."""
    hist = float64_buffer(size + 2 * n_features * spare_sets, zero=zero)
    if spare_sets == 0:
        return hist, np.zeros((1, n_features), dtype=np.uint64)
    spares = size + 2 * np.arange(spare_sets * n_features, dtype=np.uint64)
    return hist, spares.reshape(spare_sets, n_features)


def _feature_groups(ptrs, n_nodes):
    """group_end[j]: the end of the group of features from j, as many (at least one) as keep
    n_nodes histograms of their bins within _HIST_BUDGET."""
    ptrs = np.asarray(ptrs, dtype=np.int64)
    budget = max(1, _HIST_BUDGET // max(1, n_nodes))
    ends = np.searchsorted(ptrs, ptrs[:-1] + budget, side="right") - 1
    return np.maximum(ends, np.arange(1, ptrs.size)).astype(np.int64)


def _dense_level(k, ell, gpair, positions, slot_of_node, n_nodes, size, at_root):
    """The flat histogram (and the features' spare pairs past it) of a dense level's built nodes.
    at_root: every virtual row of tree t is in node t, slot t."""
    n_trees = max(1, positions.shape[0] // max(1, ell.n_rows))  # (a worker may hold no rows)
    layout = entry_layout(ell)
    if at_root and layout is None:
        return _dense_root_level(k, ell, gpair, n_trees, size)
    ell_rows, slots, gh = _level_lists(positions.shape[0])
    # The list is made in pieces of matrix rows, a piece a thread, each written in place.
    bounds = np.asarray([lo for lo, _ in cpu.chunks(ell.n_rows, cpu.threads())] + [ell.n_rows], dtype=np.int64)
    counts = np.zeros((bounds.size - 1, n_trees), dtype=np.int64)
    min_pieces = 1 if ell.n_rows >= _MIN_ROWS_PER_THREAD else max(1, bounds.size - 1)
    cpu.run_chunks(k["entries"], bounds.size - 1, bounds, positions, slot_of_node, ell.n_rows, gpair, ell_rows, slots,
                   gh, counts, min_chunk=min_pieces)
    starts = bounds[:-1, None] * n_trees + np.cumsum(counts, axis=1) - counts
    listed = int(counts.sum())
    made = []

    def by_node():
        """The list again node by node (_scatter_by_node): (node_starts, node_rows, node_gh), made once."""
        if not made:
            node_rows, node_gh = _node_lists(listed)
            n_pieces = starts.shape[0]
            node_counts = np.zeros((n_pieces, n_nodes), dtype=np.int64)
            cpu.run_chunks(k["count_by_node"], n_pieces, starts, counts, slots, node_counts, min_chunk=min_pieces)
            ends = np.cumsum(node_counts.T.ravel())  # slot by slot, each slot's pieces in order
            cursor = np.ascontiguousarray((ends - node_counts.T.ravel()).reshape(n_nodes, n_pieces).T)
            node_starts = np.full(n_nodes + 1, listed, dtype=np.int64)  # (a worker may hold no rows: no pieces)
            node_starts[:-1] = cursor[0] if n_pieces else 0
            cpu.run_chunks(k["scatter_by_node"], n_pieces, starts, counts, ell_rows, slots, gh, cursor, node_rows,
                           node_gh, min_chunk=min_pieces)
            made.append((node_starts, node_rows, node_gh))
        return made[0]
    if layout is None:
        offsets = np.asarray(ell.cuts.ptrs, dtype=np.int64)
        widths, n_features = offsets, ell.n_features
    else:
        offsets, widths, n_features = layout.offsets, layout.widths, layout.dense.size
    # Past the histograms, where entries are missing, a spare pair per densely read feature for
    # them, a set for every node or tree an item walks (_dense). Where every feature is listed,
    # _listed_features zeroes the histograms.
    zero_listed = layout is not None and n_features == 0
    hist, spare_pairs = _level_buffer(size, n_features, max(n_nodes, n_trees) if ell.has_missing else 0,
                                      zero=not zero_listed)
    if n_features:
        _dense_features(k, ell, layout, offsets, widths, n_features, n_nodes, n_trees, starts, counts, listed,
                        ell_rows, slots, gh, hist, by_node, spare_pairs)
    if layout is not None:
        _listed_features(k, ell, layout, n_nodes, n_trees, starts, counts, listed, ell_rows, slots, gh, hist, zero_listed,
                         by_node)
    return hist


def _dense_root_level(k, ell, gpair, n_trees, size):
    """_dense_level at the root of a matrix without listed features: the rows in order, their
    pairs read in place (_dense_root), no row list made. With _node_offsets, a 500K-row
    Higgs-shaped root (2 threads) took 7.3 against 10.4 ms for the listed walk, a 120K-row
    quickstart-shaped one with 5% missing (1 thread) 4.9-5.1 against 6.6-7.1 ms (alternating
    in one process, the same bits)."""
    offsets = np.asarray(ell.cuts.ptrs, dtype=np.int64)
    hist, spare_pairs = _level_buffer(size, ell.n_features, n_trees if ell.has_missing else 0, zero=True)
    if ell.n_features:
        _dense_features(k, ell, None, offsets, offsets, ell.n_features, n_nodes=n_trees, n_trees=n_trees,
                        starts=None, counts=None, listed=ell.n_rows * n_trees, ell_rows=None, slots=None, gh=gpair,
                        hist=hist, by_node=None, spare_pairs=spare_pairs, at_root=True)
    return hist


def _listed_features(k, ell, layout, n_nodes, n_trees, starts, counts, listed, ell_rows, slots, gh, hist, zero,
                     by_node):
    """A dense level's listed features (entry_layout) added into hist, block by block, and
    their skewed features' most common bins made (_implicit_bins). Where a tree's nodes'
    histograms of a block fit in cache together (_HIST_BUDGET), a tree's rows are walked as
    listed (_listed_by_rows); else node by node (_listed), each node's rows listed apart
    (_scatter_by_node), and where zero, each item zeroes its part of hist."""
    n_blocks = layout.block_first.size - 1
    totals = np.zeros(int(_TOTALS_STRIDE) * n_nodes, dtype=np.float64)
    work = max(1, listed * layout.entries.size // max(1, ell.n_rows) // _MIN_PAIRS_PER_THREAD)
    with_totals = layout.implicit.size > 0
    if -(-n_nodes // n_trees) * int(np.diff(layout.block_first).max()) <= _HIST_BUDGET:
        if zero:
            hist.fill(0.0)
        n_items = n_trees * n_blocks
        cpu.run_chunks(k["listed_by_rows"], n_items, n_blocks, starts, counts, ell_rows, slots, gh, layout.indptr,
                       layout.entries, layout.block_first, ell.n_rows, hist, totals, ell.cuts.total_bins, with_totals,
                       min_chunk=max(1, n_items // work), pieces_per_thread=-(-n_items // cpu.threads()))
    else:
        node_starts, node_rows, node_gh = by_node()
        n_items = n_nodes * n_blocks
        # Items of unequal cost (nodes of unequal rows): each thread takes the next not yet taken.
        cpu.run_chunks(k["listed"], n_items, n_blocks, node_starts, node_rows, node_gh, layout.indptr, layout.entries,
                       layout.block_first, ell.n_rows, hist, totals, ell.cuts.total_bins, with_totals, zero,
                       min_chunk=max(1, n_items // work), pieces_per_thread=-(-n_items // cpu.threads()))
    if with_totals:
        k["implicit_bins"](hist, totals, n_nodes, ell.cuts.total_bins, layout.implicit, layout.first, layout.last)


def _dense_features(k, ell, layout, offsets, widths, n_features, n_nodes, n_trees, starts, counts, listed, ell_rows,
                    slots, gh, hist, by_node, spare_pairs, at_root=False):
    """A dense level's densely read features added into hist: every feature's, or the ones
    entry_layout leaves (layout), in groups of features within _HIST_BUDGET (widths: their
    bins' running count; offsets: each one's first global bin). at_root: no list (starts,
    counts, ell_rows, slots are None), gh is the gradient pairs themselves (_dense_root)."""
    group_end = _feature_groups(widths, -(-n_nodes // n_trees))
    work = max(1, listed * n_features // _MIN_PAIRS_PER_THREAD)
    one_node = _feature_groups(widths, 1)
    if n_nodes > n_trees and _walks(group_end, 0, n_features) > _walks(one_node, 0, n_features):
        _dense_features_by_node(k, ell, layout, offsets, n_features, n_nodes, one_node, work, hist, by_node,
                                spare_pairs)
        return
    per_thread = _pieces_per_thread(group_end, max(1, n_features // work))
    # Work items: a tree's rows over a piece of the features. A forest's trees are items of
    # their own (each thread walks whole trees: no two threads read the same rows), cut into
    # pieces of features only as far as the threads need items.
    wanted = min(cpu.threads() * per_thread, work)
    feature_bounds = np.asarray(cpu.chunks(n_features, max(1, -(-wanted // n_trees))), dtype=np.int64)
    feature_bounds = np.append(feature_bounds[:, 0], n_features)
    n_items = n_trees * (feature_bounds.size - 1)
    # Which symbols a walk of the rows reads (the list's rows rise, with gaps; each read a
    # gather): the row-major ones where a level's walks (groups of features) read few cache
    # lines of a row in all, a row's features then fetched _ROWS_AHEAD rows ahead (software
    # prefetches: the hardware's follow strides, and the gaps have none); the feature columns
    # where they would read many (many walks, or wide rows), each walk then reading only its
    # features' bytes. Per add, 7-class Covertype's levels 2-7 (1-6 walks of one line) cost
    # 0.5-1.0 ns by rows against 0.8-1.5 by columns (2 threads), and Higgs' last level (14
    # walks) 2.3 by columns against 3.8 by rows; a 968-column Bosch-shaped fit (7 walks of 16
    # lines at the root) took 1.3x as long by rows.
    columns = feature_columns(ell) if layout is None else layout.columns
    if _walks(group_end, 0, n_features) * -(-n_features * columns.itemsize // 64) <= _MAX_LINES_BY_ROWS:
        rows = row_symbols(ell) if layout is None else _dense_rows(ell, layout)
        sym, step_feature, step_row, ahead = rows.reshape(-1), 1, n_features, _ROWS_AHEAD
    else:
        sym, step_feature, step_row, ahead = columns.reshape(-1), ell.n_rows, 1, 0
    node_offsets = _node_offsets(offsets, n_nodes, ell.cuts.total_bins)
    if at_root:
        cpu.run_chunks(k["dense_root"], n_items, sym, step_feature, step_row, node_offsets, feature_bounds, group_end,
                       ell.n_rows, gh, hist, int(ell.null_symbol), not ell.has_missing, spare_pairs,
                       min_chunk=max(1, n_items // work), pieces_per_thread=-(-n_items // cpu.threads()))
        return
    cpu.run_chunks(k["dense" if ell.has_missing else "dense_full"], n_items, sym, step_feature, step_row, np.uint64(ahead),
                   node_offsets, feature_bounds, group_end, starts, counts, ell_rows, slots, gh, hist,
                   int(ell.null_symbol), spare_pairs, min_chunk=max(1, n_items // work),
                   pieces_per_thread=-(-n_items // cpu.threads()))


def _dense_features_by_node(k, ell, layout, offsets, n_features, n_nodes, one_node, work, hist, by_node, spare_pairs):
    """_dense_features where a tree's nodes' histograms of a group of features do not fit in
    cache together (deep levels): node by node (_dense_by_node), a node's rows over a group of
    features whose histograms of one node do (one_node), cut further where the threads need
    more items than there are nodes. A row's features are read row-major in one walk.
    (Tried: the items costliest first, a node of many rows cut into pieces of features, as
    a deep level's rows are skewed (one node of 32 held 61% of a Higgs-shaped level's rows):
    5% slower, levels of 8-64 nodes, 2 threads, alternating in one process.)"""
    bounds, j = {0, n_features}, 0
    while j < n_features:
        j = int(one_node[j])
        bounds.add(j)
    cut = -(-cpu.threads() * _PIECES_PER_THREAD // n_nodes)
    if cut > 1:
        bounds.update(lo for lo, _ in cpu.chunks(n_features, cut))
    feature_bounds = np.asarray(sorted(bounds), dtype=np.int64)
    n_items = n_nodes * (feature_bounds.size - 1)
    node_starts, node_rows, node_gh = by_node()
    rows = row_symbols(ell) if layout is None else _dense_rows(ell, layout)
    cpu.run_chunks(k["dense_by_node"], n_items, rows.reshape(-1), n_features, np.uint64(_ROWS_AHEAD),
                   _node_offsets(offsets, n_nodes, ell.cuts.total_bins), feature_bounds, node_starts, node_rows, node_gh,
                   hist, int(ell.null_symbol), not ell.has_missing, spare_pairs, min_chunk=max(1, n_items // work),
                   pieces_per_thread=-(-n_items // cpu.threads()))


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
    gpair = np.ascontiguousarray(gpair_native, dtype=np.float32)
    size = n_nodes * total_bins * 2
    if ell.is_dense:
        # The root: no split applied yet (every tree's rows in its root), each root built.
        n_trees = max(1, positions.shape[0] // max(1, ell.n_rows))
        at_root = node_count(part) == n_trees and np.array_equal(build_nodes, np.arange(n_trees))
        hist = _dense_level(k, ell, gpair, positions, slot_of_node, n_nodes, size, at_root)
        return hist[:size].reshape(n_nodes, total_bins, 2)
    rows = np.empty(positions.shape[0], dtype=np.int64)
    ell_rows = np.empty(positions.shape[0], dtype=np.int64)
    slots = np.empty(positions.shape[0], dtype=np.int32)
    n = k["rows_of"](positions, slot_of_node, ell.n_rows, rows, ell_rows, slots)
    rows, ell_rows, slots = rows[:n], ell_rows[:n], slots[:n]
    gsym = global_symbols(ell)
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
    out = float64_buffer(2 * k * built.shape[1] * built.shape[2], zero=False).reshape((2 * k,) + built.shape[1:])
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


def feature_columns(ell):
    """(n_features, n_rows) local symbols of a dense matrix, a feature's side by side, missing
    as the matrix's null_symbol: what the histogram loops read. uint8 where every symbol fits
    (max_bin <= 255, or 256 without missing values; XGBoost's CPU matrix keeps its bins in a
    byte too), else uint16. Cached on the matrix (a byte an entry beside the packed matrix:
    the price of reading a feature as a stream)."""
    cached = ell.__dict__.get("_feature_columns")
    if cached is None:
        n_symbols = int(ell.null_symbol) + (1 if ell.has_missing else 0)
        dtype = np.uint8 if n_symbols <= 256 else np.uint16 if n_symbols <= 65536 else np.uint32
        cached = unpack_columns(ell.words, ell.bits, ell.n_rows, ell.n_features, dtype)
        ell.__dict__["_feature_columns"] = cached
    return cached


def row_lines(ell) -> int:
    """Cache lines (64 bytes) a dense matrix's row of row_symbols spans."""
    return -(-ell.n_features * feature_columns(ell).itemsize // 64)


def row_symbols(ell):
    """(n_rows, n_features) local symbols of a dense matrix, a row's features side by side:
    feature_columns transposed (its type), what a level whose walk reads every feature reads.
    Cached on the matrix beside the columns."""
    cached = ell.__dict__.get("_row_symbols")
    if cached is None:
        cached = np.ascontiguousarray(feature_columns(ell).T)
        ell.__dict__["_row_symbols"] = cached
    return cached


def global_symbols(ell):
    """(n_rows, row_stride) global bins of a sparse matrix, total_bins where missing or padding
    (its symbols as packed), C order: what the compiled loops read. Cached on the matrix; the
    narrowest unsigned type that holds total_bins. (A dense matrix is read as feature_columns.)"""
    if ell.is_dense:
        raise ValueError("global_symbols reads a sparse matrix; a dense one is read as feature_columns")
    cached = ell.__dict__.get("_global_symbols")
    if cached is None:
        dtype = np.uint16 if int(ell.cuts.total_bins) < 65536 else np.uint32
        local = unpack_symbols(ell.words, ell.bits, ell.n_rows * ell.row_stride)
        cached = local.astype(dtype).reshape(ell.n_rows, ell.row_stride)
        ell.__dict__["_global_symbols"] = cached
    return cached


class EntryLayout(NamedTuple):
    """A dense matrix's features split by how the histogram loops read them (entry_layout):
    densely, or listed, by their entries other than a dominant bin (skewed features) or
    their null symbol (mostly missing ones), in blocks of their bins."""

    dense: np.ndarray  # the densely read features (indices)
    offsets: np.ndarray  # (n_dense + 1,) int64: each one's first global bin, then total_bins
    widths: np.ndarray  # (n_dense + 1,) int64: their bins' running count, from 0 (their groups)
    columns: np.ndarray  # (n_dense, n_rows): their feature_columns
    implicit: np.ndarray  # (n_skewed,) int64: each skewed feature's most common bin (global)
    first: np.ndarray  # (n_skewed,) int64: its feature's first global bin
    last: np.ndarray  # (n_skewed,) int64: one past its feature's last
    block_first: np.ndarray  # (n_blocks + 1,) int64: each block's first global bin, then its end
    indptr: np.ndarray  # (n_blocks * n_rows + 1,) int64: block b's entries of row r from indptr[b * n_rows + r]
    entries: np.ndarray  # bins counted from their block's first, a row's rising within a block


def entry_layout(ell):
    """A dense matrix's EntryLayout, or None where no feature is listed. Listed: a feature
    that misses no entry and whose most common bin holds at least _SKEWED_SHARE of the rows
    (skewed), or that misses at least _MISSING_SHARE of them. Cached on the matrix. A worker
    decides for its own rows: its histograms are whole before they are summed across workers."""
    cached = ell.__dict__.get("_entry_layout", False)
    if cached is not False:
        return cached
    layout = None
    if ell.is_dense and ell.n_rows:
        columns = feature_columns(ell)
        ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
        null = int(ell.null_symbol)
        listed, dominant, n_entries = [], [], 0
        for f in range(ell.n_features):
            counts = np.bincount(columns[f], minlength=null + 1)
            if ell.has_missing and counts[null]:
                d = null if counts[null] >= _MISSING_SHARE * ell.n_rows else None
            else:
                d = int(np.argmax(counts[: ptrs[f + 1] - ptrs[f]]))
                d = d if counts[d] >= _SKEWED_SHARE * ell.n_rows else None
            if d is not None:
                listed.append(f)
                dominant.append(d)
                n_entries += ell.n_rows - int(counts[d])
        if listed:
            layout = _entry_layout(ell, columns, ptrs, null, np.asarray(listed, dtype=np.int64),
                                   np.asarray(dominant, dtype=np.int64), n_entries)
    ell.__dict__["_entry_layout"] = layout
    return layout


def _blocks(widths, n_entries, n_rows):
    """block_features: the listed features (their bins: widths) cut into blocks of consecutive
    features. A block's bins stay within _HIST_BUDGET (one node's histogram of the block in
    cache) where a feature allows; there are _BLOCKS_PER_THREAD blocks a thread for the root's
    items, as long as a row holds _MIN_ENTRIES_PER_BLOCK entries a block on average (each block
    is a walk of the level's rows)."""
    total = int(widths.sum())
    wanted = min(cpu.threads() * _BLOCKS_PER_THREAD, int(n_entries / max(1, n_rows) / _MIN_ENTRIES_PER_BLOCK))
    n_blocks = max(1, -(-total // _HIST_BUDGET), wanted)
    target = -(-total // n_blocks)
    bounds, acc = [0], 0
    for k, w in enumerate(widths.tolist()):
        if k > bounds[-1] and (acc + w > _HIST_BUDGET or acc >= target):
            bounds.append(k)
            acc = 0
        acc += w
    bounds.append(widths.size)
    return np.asarray(bounds, dtype=np.int64)


def _entry_layout(ell, columns, ptrs, null, listed, dominant, n_entries):
    k = _kernels()
    n_rows = ell.n_rows
    block_features = _blocks(ptrs[listed + 1] - ptrs[listed], n_entries, n_rows)
    n_blocks = block_features.size - 1
    block_first = np.append(ptrs[listed[block_features[:-1]]], ptrs[listed[-1] + 1])
    bin_in_block = ptrs[listed] - np.repeat(block_first[:-1], np.diff(block_features))
    counts = np.zeros(n_blocks * n_rows + 1, dtype=np.int64)
    cpu.run_chunks(k["count_entries"], n_blocks, columns, listed, dominant, block_features, n_rows, counts)
    indptr = np.cumsum(counts)
    widest = int(np.diff(block_first).max())
    entries = np.empty(int(indptr[-1]), dtype=np.uint16 if widest <= 65536 else np.uint32)
    cpu.run_chunks(k["fill_entries"], n_blocks, columns, listed, dominant, block_features, n_rows,
                   bin_in_block.astype(np.int64), indptr[:-1].copy(), entries)
    dense = np.setdiff1d(np.arange(ell.n_features), listed)
    skewed = dominant != null
    dense_widths = np.zeros(dense.size + 1, dtype=np.int64)
    np.cumsum(ptrs[dense + 1] - ptrs[dense], out=dense_widths[1:])
    return EntryLayout(dense=dense, offsets=np.append(ptrs[dense], ptrs[-1]), widths=dense_widths,
                       columns=np.ascontiguousarray(columns[dense]), implicit=ptrs[listed[skewed]] + dominant[skewed],
                       first=ptrs[listed[skewed]], last=ptrs[listed[skewed] + 1], block_first=block_first,
                       indptr=indptr, entries=entries)


def _dense_rows(ell, layout):
    """The densely read features' symbols row-major (row_symbols of layout.columns). Cached."""
    cached = ell.__dict__.get("_dense_rows")
    if cached is None:
        cached = np.ascontiguousarray(layout.columns.T)
        ell.__dict__["_dense_rows"] = cached
    return cached
