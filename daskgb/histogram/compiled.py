"""The histogram stage compiled for CPUs (cpu/): reference.py's sums, bit for bit, at a compiled loop's speed.

Every bin's gradient sum is accumulated in float64 in row order, as reference.py's bincounts
(and XGBoost's single-threaded CPU builder) accumulate it, so the two give the same bits. The
threads split the bins, never the rows: a dense matrix by features (each thread reads its own
columns), a sparse one by ranges of global bins (each thread reads every row, keeps its bins).
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from ..ellpack.reference import symbols


def _rows_of(positions, slot_of_node, n_rows, rows, ell_rows, slots):
    """The virtual rows in nodes being built (and their matrix row and node's slot), in row order:
    the count. Tree c's virtual row v is matrix row v - c * n_rows (partition/reference.py)."""
    n = 0
    for v in range(positions.shape[0]):
        p = positions[v]
        if p < slot_of_node.shape[0]:
            s = slot_of_node[p]
            if s >= 0:
                rows[n] = v
                ell_rows[n] = v % n_rows
                slots[n] = s
                n += 1
    return n


def _dense(lo, hi, sym, ptrs, rows, ell_rows, slots, gpair, hist):
    """Features lo..hi of a dense matrix (sym: C order, each row's feature-local bins), row by row:
    a row's pair is read once for its features, whose bins lie apart, so their adds overlap."""
    n_features = hi - lo
    base = np.empty(n_features, np.int64)
    n_bins = np.empty(n_features, np.int64)
    for j in range(n_features):
        base[j] = ptrs[lo + j]
        n_bins[j] = ptrs[lo + j + 1] - ptrs[lo + j]
    for i in range(rows.shape[0]):
        v = rows[i]
        g = np.float64(gpair[v, 0])
        h = np.float64(gpair[v, 1])
        node = hist[slots[i]]
        row = sym[ell_rows[i]]
        for j in range(n_features):
            b = np.int64(row[lo + j])
            if b < n_bins[j]:  # the null symbol (missing) counts past every feature's bins
                node[base[j] + b, 0] += g
                node[base[j] + b, 1] += h


def _sparse(lo, hi, sym, rows, ell_rows, slots, gpair, hist):
    """Global bins lo..hi of a sparse matrix (sym: rows of global bins, padded with the null symbol)."""
    stride = sym.shape[1]
    for i in range(rows.shape[0]):
        v = rows[i]
        r = ell_rows[i]
        s = slots[i]
        for j in range(stride):
            b = np.int64(sym[r, j])
            if lo <= b < hi:
                hist[s, b, 0] += np.float64(gpair[v, 0])
                hist[s, b, 1] += np.float64(gpair[v, 1])


_compiled = {}


def _kernels():
    if not _compiled:
        _compiled.update(rows_of=cpu.jit(_rows_of), dense=cpu.jit(_dense), sparse=cpu.jit(_sparse))
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
    size = int(build_nodes.max()) + 1 if build_nodes.size else 1
    slot_of_node = np.full(size, -1, dtype=np.int32)
    slot_of_node[build_nodes] = np.arange(n_nodes, dtype=np.int32)
    rows = np.empty(positions.shape[0], dtype=np.int64)
    ell_rows = np.empty(positions.shape[0], dtype=np.int64)
    slots = np.empty(positions.shape[0], dtype=np.int32)
    n = k["rows_of"](positions, slot_of_node, ell.n_rows, rows, ell_rows, slots)
    rows, ell_rows, slots = rows[:n], ell_rows[:n], slots[:n]
    hist = np.zeros((n_nodes, total_bins, 2), dtype=np.float64)
    gpair = np.ascontiguousarray(gpair_native, dtype=np.float32)
    sym = row_symbols(ell)
    if ell.is_dense:
        ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
        work = max(1, n * ell.n_features // _MIN_PAIRS_PER_THREAD)
        cpu.run_chunks(k["dense"], ell.n_features, sym, ptrs, rows, ell_rows, slots, gpair, hist,
                       min_chunk=max(1, ell.n_features // work))
    else:
        work = max(1, n * sym.shape[1] // _MIN_PAIRS_PER_THREAD)
        cpu.run_chunks(k["sparse"], total_bins, sym, rows, ell_rows, slots, gpair, hist,
                       min_chunk=max(1, total_bins // work))
    return hist


def row_symbols(ell):
    """The unpacked symbols in C order (a row's symbols side by side), as the compiled loops read
    them; cached on the matrix beside the oracle's (a dense matrix's are Fortran order there)."""
    cached = ell.__dict__.get("_row_symbols")
    if cached is None:
        cached = np.ascontiguousarray(symbols(ell))
        ell.__dict__["_row_symbols"] = cached
    return cached
