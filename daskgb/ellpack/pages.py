"""ELLPACK pages beyond device memory: a matrix held as pages of rows in host memory or in
files on local disk, each brought to the device when a training step reads it.

The 2020 out-of-core GPU paper and XGBoost's external memory keep the quantised matrix as
pages. A PagedEllpack holds the rows of one ELLPACK matrix in pages of consecutive rows,
each an Ellpack of its own with the same cuts, layout and bits. Pages live in host memory,
or, with a spill directory, in .npy files read back through memory maps.

- Building: quantise_blocks takes the rows a piece at a time from wherever they are (an
  array, CSR rows, or the batches of QuantileMatrix.from_batches), so neither the input nor
  the matrix is ever whole on the device.
- Training without sampling streams the pages: at every step growth/host.py's grow_forest partitions
  and builds histograms page by page and adds the pages' histograms (XGBoost's current way).
- Training with sampling compacts each tree's sampled rows into one in-core matrix
  (compact_rows, the 2020 paper's Algorithm 7; training/rounds.py CompactedRounds).
Either way the trees are those of the in-core matrix with the same cuts.

A page takes at most a quarter of the device-memory budget (PAGE_FRACTION), leaving the
rest to the rows' gradients, partition and the histograms of a step.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import replace

import numpy as np

from ..arrays import to_host
from .layout import Ellpack, bits_for, dense_input_layout, n_words, pack_dense_as

# A page takes at most budget // PAGE_FRACTION bytes of packed symbols.
PAGE_FRACTION = 4
# With row sampling (subsample < 1), a tree trains on the sampled rows compacted into one
# in-core matrix (the 2020 paper's Algorithm 7; see compact_rows) instead of streaming every
# page at every step: training/plan.py's COMPACTED_PAGES path (setting
# daskgb.training.compact-sampled-pages). Compaction reads the pages twice a tree (to gather
# the sampled rows, then to route all rows to their leaves); streaming reads them once a step
# (a depth-8 tree: nine times). The trees are the same either way (dropped rows have zero
# gradients).


class SpillDirectory:
    """A private folder, made under the user's spill directory, for one matrix's page files;
    removed with the matrix (or at once when writing a page fails: nothing half-written is
    left behind)."""

    def __init__(self, parent):
        parent = os.fspath(parent)
        if not os.path.isdir(parent):
            raise ValueError(f"spill_dir {parent!r} is not a directory")
        try:
            self.path = tempfile.mkdtemp(prefix="daskgb-pages-", dir=parent)
        except OSError as exc:
            raise ValueError(f"spill_dir {parent!r} is not writable: {exc}") from None
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)

    def write(self, index: int, words: np.ndarray) -> np.ndarray:
        """Write one page's words; returns them read back through a memory map."""
        final = os.path.join(self.path, f"page-{index:06d}.npy")
        partial = final + ".part"
        try:
            with open(partial, "wb") as f:
                np.save(f, np.ascontiguousarray(words))
            os.replace(partial, final)
            return np.load(final, mmap_mode="r")
        except OSError as exc:
            self.remove()
            raise OSError(f"could not write an ELLPACK page to the spill directory {self.path}: {exc} "
                          "(is the disk full?); its files were removed") from exc

    def remove(self) -> None:
        self._finalizer()


class PagedEllpack:
    """An ELLPACK matrix as pages of consecutive rows on the host (see the module docstring).

    It has the attributes training reads of an Ellpack (n_rows, n_features, cuts, is_dense,
    has_missing, nbytes) and page(i, xp): page i on xp's device, with its rows
    row_ranges[i] of the matrix."""

    def __init__(self, pages: list, spill: SpillDirectory | None = None):
        if not pages:
            raise ValueError("a paged matrix needs at least one page")
        self._pages = pages
        self.spill = spill  # kept alive as long as the pages that live in its files
        first = pages[0]
        self.cuts = first.cuts
        self.is_dense, self.has_missing = first.is_dense, any(p.has_missing for p in pages)
        starts = np.zeros(len(pages) + 1, dtype=np.int64)
        np.cumsum([p.n_rows for p in pages], out=starts[1:])
        self.row_ranges = [(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
        self.n_rows = int(starts[-1])
        self._device_cuts: dict = {}  # device id -> the cuts there
        self._copies: dict = {}  # backend name -> its page_copies()

    @property
    def n_features(self) -> int:
        return self.cuts.n_features

    @property
    def bits(self) -> int:
        return self._pages[0].bits

    @property
    def row_stride(self) -> int:
        return self._pages[0].row_stride

    @property
    def n_pages(self) -> int:
        return len(self._pages)

    @property
    def nbytes(self) -> int:
        return int(sum(p.words.nbytes for p in self._pages))

    def device_cuts(self, xp):
        """The cuts on xp's device, copied there once."""
        if xp is np:
            return self.cuts
        device = xp.cuda.runtime.getDevice()
        cuts = self._device_cuts.get(device)
        if cuts is None:
            cuts = self._device_cuts[device] = self.cuts.to(xp)
        return cuts

    def page(self, index: int, xp) -> Ellpack:
        """Page `index` on xp's device, or for numpy the words in memory (a fresh Ellpack each
        time, so that no per-matrix cache keeps every page). On a GPU the copy of the next page
        starts as this one is handed out, on a stream of its own, so that it overlaps the work
        on this one (training reads the pages in order); nothing is read ahead past the last."""
        from ..backend import backend_of

        p = self._pages[index]
        backend = backend_of(xp)
        copies = self._copies.get(backend.name)
        if copies is None:
            copies = self._copies[backend.name] = backend.page_copies()
        ahead = index + 1 if index + 1 < len(self._pages) else None
        words = copies.get(index, p.words, ahead, None if ahead is None else self._pages[ahead].words)
        return replace(p, words=words, cuts=self.device_cuts(xp))

    def to(self, xp) -> "PagedEllpack":
        """Pages stay on the host whatever device trains: page() moves each as it is read."""
        return self


def rows_per_page(row_stride: int, bits: int, budget_bytes: int) -> int:
    """Rows of a page of row_stride symbols of `bits` bits a row under a device-memory budget
    (PAGE_FRACTION of it for the page)."""
    row_bits = max(1, int(row_stride) * int(bits))
    page_bytes = int(budget_bytes) // PAGE_FRACTION
    rows = (8 * page_bytes) // row_bits
    if rows < 1:
        raise ValueError(f"device_memory_budget={int(budget_bytes)} bytes is too small for even one page: a page "
                         f"may take {page_bytes} bytes (1/{PAGE_FRACTION} of the budget) and one row takes "
                         f"{-(-row_bits // 8)} bytes")
    return int(rows)


def compact_rows(backend, paged: PagedEllpack, rows) -> Ellpack:
    """Rows of a paged matrix (ascending global indices, a backend array) as one in-core
    Ellpack on the backend's device, in the same order: the sampled rows a tree trains on.
    Each page's rows are gathered from its packed words straight into their place in the
    new matrix's words (backend.gather_rows), so a page is read once and never unpacked."""
    xp = backend.xp
    rows = xp.asarray(rows, dtype=xp.int64)
    stride = paged.row_stride
    starts = [a for a, _ in paged.row_ranges] + [paged.n_rows]
    bounds = to_host(xp.searchsorted(rows, xp.asarray(starts)))
    words = xp.zeros(n_words(int(rows.size) * stride, paged.bits), dtype=xp.uint32)
    for i, a in enumerate(starts[:-1]):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if hi > lo:
            backend.gather_rows(paged.page(i, xp), rows[lo:hi] - a, words, lo * stride)
    first = paged._pages[0]
    return replace(first, words=words, n_rows=int(rows.size), cuts=paged.device_cuts(xp))


class CsrRows:
    """CSR features (inputs.Features) read as dense float32 row blocks, absent entries NaN
    (missing), so that dense_pages can quantise sparse input a chunk at a time too."""

    ndim = 2

    def __init__(self, features):
        self.features = features
        self.shape = (features.n_rows, features.n_features)

    def __getitem__(self, rows: slice):
        from ..inputs import Features

        f = self.features
        a, b = rows.start or 0, min(f.n_rows, rows.stop)
        ptr = f.indptr[a : b + 1]
        lo, hi = int(ptr[0]), int(ptr[-1])
        return Features(None, ptr - lo, f.indices[lo:hi], f.data[lo:hi], b - a, f.n_features).densify(np.nan)


def dense_pages(backend, X, weight, missing: float, max_bin: int, budget_bytes: int, spill_dir=None,
                cuts=None):
    """(cuts, PagedEllpack or Ellpack) of dense rows X (or CsrRows) and their weights, quantised
    a chunk at a time where they lie (quantise_blocks, with X as one block)."""
    return quantise_blocks(backend, lambda: iter([(X, weight)]), X.shape[1], missing, max_bin, budget_bytes,
                           spill_dir, cuts)


def quantise_blocks(backend, blocks, n_features: int, missing: float, max_bin: int, budget_bytes, spill_dir=None,
                    cuts=None, budget_for=None):
    """(cuts, PagedEllpack or Ellpack) of rows given as blocks, so that neither the input nor the
    matrix is ever whole on the device.

    blocks: a callable returning a fresh iterator of (X block, weight block or None): dense
    arrays (or CsrRows) on the host or the device, of any number of rows; it is called twice.
    Each block is copied to the device a piece at a time (a piece's float32 values take at
    most a page's share of the budget). The first pass sketches the pieces, merging their
    summaries as the Dask layer merges workers' (pruned as they grow; unless cuts are given),
    and finds the layout every page shares (any value missing, the longest row); the second
    packs the pieces into pages. (A piece of CSR rows is made dense first: its layout is the
    one from_dense picks for those values, sparse when that is smaller.) A matrix within the
    budget (budget_bytes None: any) comes back in core, its pieces packed into one buffer.
    budget_for: with budget_bytes None, a callable given the row count after the first pass
    that returns the budget to page under (or None: in core).
    """
    from .. import sketch

    xp = backend.xp
    budget = None if budget_bytes is None else int(budget_bytes)
    piece_rows = 1 << 20 if budget is None else max(32, (budget // PAGE_FRACTION) // max(1, 4 * n_features))

    def pieces(rows):
        for Xb, wb in blocks():
            nb = int(Xb.shape[0])
            if Xb.ndim != 2 or Xb.shape[1] != n_features:
                raise ValueError(f"a block of rows has shape {tuple(Xb.shape)}; every block needs {n_features} "
                                 "features")
            for a in range(0, nb, rows):
                yield (xp.asarray(Xb[a : a + rows], dtype=xp.float32),
                       None if wb is None else xp.asarray(wb[a : a + rows]))

    n, has_missing, longest, summary = 0, False, 0, None
    for Xc, wc in pieces(piece_rows):
        rows = int(Xc.shape[0])
        n += rows
        if rows and backend.count_missing(Xc, missing):
            has_missing = True
            longest = max(longest, backend.longest_present_row(Xc, missing))
        if cuts is None and rows:
            s = sketch.summarize(Xc, wc, missing, sketch.sketch_budget(rows, max_bin))
            summary = s if summary is None else sketch.merge(summary, s)
            keep = sketch.sketch_budget(n, max_bin)
            if summary.value.size > 2 * keep * max(1, n_features):
                summary = sketch.prune(summary, keep)
    if cuts is None:
        if summary is None:
            raise ValueError("the blocks hold no rows")
        cuts = sketch.make_cuts(sketch.prune(summary, sketch.sketch_budget(n, max_bin)), max_bin)
    if budget is None and budget_for is not None:
        budget = budget_for(n)
        if budget is not None:
            piece_rows = max(32, (budget // PAGE_FRACTION) // max(1, 4 * n_features))
    cuts = cuts.to(xp)
    layout = dense_input_layout(cuts, n_features, has_missing, longest if has_missing else n_features)
    row_bits = max(1, layout["row_stride"] * layout["bits"])
    in_core = budget is None or n * row_bits <= 8 * budget
    spill = SpillDirectory(spill_dir) if spill_dir is not None and not in_core else None
    host_cuts = cuts.to(np)
    parts = []
    # A page holds up to page_rows packed rows (in core: one page of all rows, on the device),
    # each piece packed and appended at the page's end (an identity gather at a bit offset),
    # so that a page spans several pieces (a piece's float values take 32 / bits times its
    # packed rows' room) and nothing is held twice.
    page_rows = n if in_core else rows_per_page(layout["row_stride"], layout["bits"], budget)
    piece_rows = max(1, min(piece_rows, page_rows))
    stride = layout["row_stride"]
    words, filled = None, 0

    def close_page():
        nonlocal words
        words = words[: n_words(filled * stride, layout["bits"])]  # a page short of page_rows
        if in_core:
            parts.append(Ellpack(words=words, n_rows=filled, cuts=cuts, **layout))
            return
        host = backend.host_copy(words) if spill is None else np.asarray(to_host(words))
        if spill is not None:
            host = spill.write(len(parts), host)
        parts.append(Ellpack(words=host, n_rows=filled, cuts=host_cuts, **layout))

    for Xc, _ in pieces(piece_rows):
        rows = int(Xc.shape[0])
        if words is not None and filled + rows > page_rows:
            close_page()
            words = None
        if words is None:
            words, filled = xp.zeros(n_words(page_rows * stride, layout["bits"]), dtype=xp.uint32), 0
        piece = pack_dense_as(backend, Xc, cuts, missing, layout)
        backend.gather_rows(piece, xp.arange(rows, dtype=xp.int64), words, filled * stride)
        del piece
        filled += rows
    if words is not None:
        close_page()
    if sum(p.n_rows for p in parts) != n:
        if spill is not None:
            spill.remove()
        raise ValueError(f"the blocks gave {n} rows on their first pass and {sum(p.n_rows for p in parts)} on the "
                         "second: they must give the same rows every time they are called")
    if in_core:
        if not parts:
            return cuts, pack_dense_as(backend, xp.zeros((0, n_features), dtype=xp.float32), cuts, missing,
                                                layout)
        return cuts, parts[0]
    if not parts:  # no rows at all: one empty page
        parts.append(replace(pack_dense_as(backend, xp.zeros((0, n_features), dtype=xp.float32), cuts,
                                                    missing, layout), cuts=host_cuts))
    return cuts, PagedEllpack(parts, spill)


# Without a budget, a CUDA matrix pages itself when its quantised rows would take more than
# this share of the device's free memory (the rest: gradients, partition, histograms, input).
AUTO_FREE_FRACTION = 0.5


def auto_budget(n_rows: int, n_features: int, max_bin: int, free_bytes: int) -> int | None:
    """The device-memory budget a matrix takes by itself: None when its quantised rows (at
    most bits_for(max_bin + 1) bits a value, dense) fit AUTO_FREE_FRACTION of free_bytes,
    else that share of free memory."""
    share = int(free_bytes * AUTO_FREE_FRACTION)
    need = -(-n_rows * n_features * bits_for(int(max_bin) + 1) // 8)
    return None if need <= share else max(share, 1)
