"""The numpy path's shortcuts (what CPU workers run, and the CUDA kernels' oracle) against
what they stand for: the histograms against their definition (each node's g and h summed per
global bin, in double, rows in order), the split gain at alpha 0 against the thresholded one."""

from __future__ import annotations

import numpy as np
import pytest

from daskgb.backend import numpy_backend as nb
from daskgb.ellpack.reference import symbols

from test_backend_parity import make_cuts, numpy_ellpack, random_gpair, random_level


def histograms_by_definition(ell, gpair, positions, build_nodes):
    """Row by row, entry by entry, as plain double additions in row order."""
    sym = symbols(ell)
    ptrs = np.asarray(ell.cuts.ptrs)
    slot = {node: i for i, node in enumerate(build_nodes)}
    hist = np.zeros((len(build_nodes), ell.cuts.total_bins, 2))
    for r in range(ell.n_rows):
        i = slot.get(int(positions[r]))
        if i is None:
            continue
        for f, s in enumerate(sym[r]):
            if s == ell.null_symbol:
                continue
            b = ptrs[f] + s if ell.is_dense else s  # dense: the feature's own bin; sparse: global
            hist[i, b, 0] += float(gpair[r, 0])
            hist[i, b, 1] += float(gpair[r, 1])
    return hist


@pytest.mark.parametrize("layout", ["dense", "dense_missing", "sparse"])
def test_numpy_histograms_equal_their_definition(layout):
    rng = np.random.default_rng(23)
    n = 400
    cuts = make_cuts(rng, 6, 30)
    ell = numpy_ellpack(rng, cuts, layout, n)
    assert ell.is_dense == (layout != "sparse")
    gpair = random_gpair(rng, n)
    part = nb.new_partition(n)
    leaves, next_id = [0], 1
    for _ in range(3):
        args = random_level(rng, cuts, leaves, next_id)
        nb.apply_splits(ell, part, *args)
        split = set(args[0].tolist())
        leaves = [x for x in leaves if x not in split] + [int(x) for p in zip(args[4], args[5]) for x in p]
        next_id = int(args[5].max()) + 1
        build = leaves[::2]  # some of the level's nodes, as the subtraction trick builds
        np.testing.assert_array_equal(nb.build_histograms(ell, gpair, part, build),
                                      histograms_by_definition(ell, gpair, part.positions, build))


def test_child_gain_at_alpha_zero_is_the_thresholded_gain():
    """child_gain skips threshold_l1 when reg_alpha is 0; the gains must not change, zeros of
    either sign, infinities and NaN included."""
    from daskgb.split import SplitParams, child_gain, threshold_l1

    rng = np.random.default_rng(4)
    G = np.concatenate([rng.normal(size=500), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300]])
    H = np.concatenate([rng.uniform(-0.5, 3.0, size=500), [1.0, 1.0, 2.0, 2.0, 1.0, 0.5, 0.5]])
    p = SplitParams(reg_lambda=1.0)
    t = threshold_l1(np, G, 0.0)
    want = np.where(H > 0, (t * t / np.where(H > 0, H + p.reg_lambda, 1.0)).astype(np.float32), np.float32(0))
    np.testing.assert_array_equal(child_gain(np, G, H, p), want.astype(np.float32))
