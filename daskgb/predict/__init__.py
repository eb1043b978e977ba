"""The predict stage: margins from trees, for raw features (thresholds) or rows quantised with the training cuts (bins).

reference.py  numpy (the oracle)
compiled.py   the CPU's compiled loops (backend/compiled_backend.py)
cuda.py       kernels/predict.cu launches (CuPy)
"""

from __future__ import annotations

from ..ellpack.pages import PagedEllpack


def add_tree_binned(backend, ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row, routing rows by their bins (page by
    page for a paged matrix).

    Valid only for matrices binned with the training cuts: rows go where training's
    partition sent them.
    """
    if ell.n_rows == 0:
        return
    if isinstance(ell, PagedEllpack):
        for i, (a, b) in enumerate(ell.row_ranges):
            backend.add_leaf_values(ell.page(i, backend.xp), tree, margin[a:b])
        return
    backend.add_leaf_values(ell, tree, margin)
