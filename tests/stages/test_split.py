"""numpy_backend.evaluate_splits scans features in groups of similar width: the same records as one scan."""

from __future__ import annotations

import numpy as np
import pytest

from daskgb import split
from daskgb.backend import numpy_backend as nb
from daskgb.split.reference import _width_groups
from daskgb.sketch import Cuts
from daskgb.split import SplitParams


def mixed_cuts(rng, widths):
    ptrs = np.concatenate([[0], np.cumsum(widths)]).astype(np.int32)
    values = np.concatenate([np.sort(rng.choice(np.arange(4 * w + 1), w, replace=False)) * 0.5 for w in widths])
    values = values.astype(np.float32)
    return Cuts(ptrs, values, (values[ptrs[:-1]] - 1.0).astype(np.float32))


def random_nodes(rng, cuts, k, ties: bool):
    """(hist, parent) for k nodes; some rows missing per feature; optionally duplicated features (ties)."""
    total = int(cuts.ptrs[-1])
    hist = np.zeros((k, total, 2))
    hist[..., 0] = np.round(rng.normal(size=(k, total)) * 4) / 4
    hist[..., 1] = np.round(rng.uniform(0, 3, size=(k, total)) * 4) / 4
    hist[rng.random((k, total)) < 0.3] = 0.0
    if ties:  # feature 5 repeats feature 1 (same width): equal gains, the lower feature must win
        p = np.asarray(cuts.ptrs)
        hist[:, p[5] : p[6]] = hist[:, p[1] : p[2]]
    sums = np.stack([hist[:, p0:p1].sum(axis=1) for p0, p1 in zip(cuts.ptrs[:-1], cuts.ptrs[1:])], axis=1)
    parent = sums.max(axis=1) + np.array([1.0, 2.0])  # every feature has some missing rows
    return hist, parent


@pytest.mark.parametrize("seed", range(6))
def test_grouped_scan_equals_one_scan(seed):
    rng = np.random.default_rng(seed)
    widths = [2, 40, 2, 3, 256, 40, 7, 2, 130, 1, 2, 256]
    cuts = mixed_cuts(rng, widths)
    assert _width_groups(cuts) is not None
    k = 12
    hist, parent = random_nodes(rng, cuts, k, ties=seed % 2 == 0)
    params = SplitParams(reg_lambda=[0.0, 1.0, 5.0][seed % 3], reg_alpha=0.5 * (seed % 2), min_child_weight=1.0,
                         max_delta_step=0.7 if seed == 3 else 0.0, min_split_loss=0.0)
    masks = [None, rng.random(len(widths)) < 0.6, rng.random((k, len(widths))) < 0.5]
    mask = masks[seed % 3]
    if mask is not None and mask.ndim == 2:
        mask[0] = False  # a node allowed nothing
    monotone = np.array([0, 1, 0, -1, 1, 0, 0, 0, -1, 0, 0, 1]) if seed >= 4 else None
    bounds = (np.tile(np.float32([-1.0, 1.0]), (k, 1)) if monotone is not None else None)
    ones = np.ones(2)
    want = split.evaluate_splits(np, hist, parent, ones, cuts.ptrs, cuts.values, cuts.min_values, params, mask,
                                 monotone, bounds)
    got = nb.evaluate_splits(cuts, hist, parent, ones, params, mask, monotone, bounds)
    found = want[0]["feature"] >= 0
    assert found.any()
    np.testing.assert_array_equal(got[0]["feature"], want[0]["feature"])
    for name in want[0].dtype.names:  # a node with no split reports feature 0's fields in both
        np.testing.assert_array_equal(got[0][name], want[0][name], err_msg=name)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


def test_one_width_keeps_one_scan():
    rng = np.random.default_rng(9)
    assert _width_groups(mixed_cuts(rng, [256, 250, 256, 200])) is None


def test_tie_across_groups_goes_to_the_lower_feature():
    """Feature 1 (2 bins, a later group) and feature 3 (256 bins, feature 0's group) split alike:
    the one scan prefers feature 1, its visiting order being first; the groups must too."""
    rng = np.random.default_rng(3)
    cuts = mixed_cuts(rng, [256, 2, 40, 256])
    p = np.asarray(cuts.ptrs)
    k = 4
    hist = np.zeros((k, int(p[-1]), 2))
    for f in range(4):  # every feature: all mass in its first bins, weakly informative
        hist[:, p[f] : p[f] + 2] = rng.uniform(0.5, 1.0, (k, 2, 2)) * [[1.0, 1.0]]
    hist[:, p[1] : p[1] + 2] = [[-3.0, 2.0], [3.0, 2.0]]
    hist[:, p[3] : p[3] + 2] = [[-3.0, 2.0], [3.0, 2.0]]  # the same split as feature 1's
    parent = np.stack([hist[:, p[f] : p[f + 1]].sum(axis=1) for f in range(4)], axis=1)[:, 1]
    ones = np.ones(2)
    params = SplitParams()
    want = split.evaluate_splits(np, hist, parent, ones, cuts.ptrs, cuts.values, cuts.min_values, params)
    got = nb.evaluate_splits(cuts, hist, parent, ones, params)
    assert (want[0]["feature"] == 1).all()
    np.testing.assert_array_equal(got[0], want[0])
