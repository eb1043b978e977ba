"""The split stage (daskgb/split/): the best split of each node from its histogram.

Candidates in XGBoost's order: features in order; within one, the forward scan (missing
values go right) over its bins, then, where the node misses values of the feature, the
backward scan (missing go left); the first largest loss change wins and must beat 0.

Tests taking `backend` run on every backend against a brute-force search over every
candidate; numpy_backend's grouped scan (features of similar width scanned together) is
checked against the one scan of split.evaluate_splits, and the gain arithmetic against its
definition; tests taking `cb` (marked gpu) run the oracle and the CUDA backend on the same
histograms and compare every record field.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import LAYOUTS, both_ellpacks, grow_partitions, make_cuts, random_gpair
from daskgb import split
from daskgb.arrays import to_host
from daskgb.backend import numpy_backend as nb
from daskgb.split.reference import _width_groups
from daskgb.sketch import Cuts
from daskgb.split import SplitParams


# --------------------------------------------------------------------------- every backend: a brute-force search
def node_histograms(rng, cuts, k: int, unit: float):
    """(int64 hist (k, total_bins, 2), int64 parent (k, 2)) summed from random rows, in units of
    `unit`: node i holds a few rows (node 1 a single row: no valid split), a signal on
    feature i % F, and missing values of the even features."""
    ptrs = np.asarray(cuts.ptrs)
    n_features = len(ptrs) - 1
    hist = np.zeros((k, int(ptrs[-1]), 2), dtype=np.int64)
    parent = np.zeros((k, 2), dtype=np.int64)
    for i in range(k):
        n = 1 if i == 1 else int(rng.integers(20, 300))
        local = np.stack([rng.integers(0, ptrs[f + 1] - ptrs[f], n) for f in range(n_features)], axis=1)
        sig = i % n_features
        g = rng.normal(size=n) + 2.0 * (local[:, sig] > (ptrs[sig + 1] - ptrs[sig]) // 2)
        pair = np.round(np.stack([g, rng.uniform(0.2, 1.0, n)], axis=1) / unit).astype(np.int64)
        parent[i] = pair.sum(axis=0)
        missing = (rng.random(local.shape) < 0.15) & (np.arange(n_features) % 2 == 0)
        for f in range(n_features):
            rows = ~missing[:, f]
            np.add.at(hist[i, :, 0], ptrs[f] + local[rows, f], pair[rows, 0])
            np.add.at(hist[i, :, 1], ptrs[f] + local[rows, f], pair[rows, 1])
    return hist, parent


def brute_force(hist, parent, ptrs, p: SplitParams):
    """Per node, every valid candidate (loss change, feature, recorded bin, default_left, left
    sums, right sums, gain at the parent), best first: loops over features, bins and sides."""
    lam = p.reg_lambda
    out = []
    for i in range(hist.shape[0]):
        P = parent[i]
        root = P[0] ** 2 / (P[1] + lam)
        scored = []
        for f in range(len(ptrs) - 1):
            fb = hist[i, ptrs[f] : ptrs[f + 1]]
            has_missing = bool(np.any(fb.sum(axis=0) != P))
            for b in range(fb.shape[0]):
                left = fb[: b + 1].sum(axis=0)
                sides = [(b, 0, left, P - left)]
                if has_missing:  # bins b..last right, missing values left; bin b - 1 is the last one left
                    right = fb[b:].sum(axis=0)
                    sides.append((b - 1, 1, P - right, right))
                for rec_bin, default_left, L, R in sides:
                    if L[1] < p.min_child_weight or R[1] < p.min_child_weight:
                        continue
                    loss = L[0] ** 2 / (L[1] + lam) + R[0] ** 2 / (R[1] + lam) - root
                    scored.append((loss, f, rec_bin, default_left, L, R, root))
        scored.sort(key=lambda c: -c[0])
        out.append(scored)
    return out


@pytest.mark.parametrize("params", [SplitParams(), SplitParams(reg_lambda=0.3, min_child_weight=4.0)],
                         ids=["default", "lambda_mcw"])
def test_evaluate_splits_finds_the_brute_force_best(backend, xp, params):
    """Each node's record is the best candidate of a search by loops (its loss change, up to
    the float32 the gains are rounded to; where it wins clearly, its feature, bin, side,
    threshold and children's sums); a node with no valid candidate reports no split."""
    rng = np.random.default_rng(13)
    n_features, k, unit = 6, 12, 2.0**-20
    cuts = make_cuts(rng, n_features, 16)
    hist, parent = node_histograms(rng, cuts, k, unit)
    if backend.histogram_dtype == np.int64:  # the backend's own type: fixed point, or float64 sums
        h, par, scale = hist, parent, np.array([unit, unit])
    else:
        h, par, scale = hist * unit, parent * unit, np.ones(2)
    rec, left, right = backend.evaluate_splits(cuts.to(xp), xp.asarray(h), xp.asarray(par), scale, params)
    left, right = to_host(left) * scale, to_host(right) * scale
    ptrs, values, min_values = np.asarray(cuts.ptrs), np.asarray(cuts.values), np.asarray(cuts.min_values)
    checked = 0
    for i, cands in enumerate(brute_force(hist * unit, parent * unit, ptrs, params)):
        if not cands or cands[0][0] <= 0:
            assert rec["feature"][i] == -1 and rec["gain"][i] == 0, f"node {i}: no valid split, got {rec[i]}"
            continue
        loss, f, b, dl, L, R, root = cands[0]
        tol = 1e-6 * max(1.0, root + abs(loss))
        assert abs(rec["gain"][i] - loss) <= tol, f"node {i}: gain {rec['gain'][i]}, brute force {loss}"
        if len(cands) > 1 and cands[1][0] > loss - 10 * tol:
            continue  # a near tie: float32 rounding may pick either
        checked += 1
        got = (int(rec["feature"][i]), int(rec["bin"][i]), int(rec["default_left"][i]))
        assert got == (f, b, dl), f"node {i}: (feature, bin, default_left) {got}, brute force {(f, b, dl)}"
        assert rec["threshold"][i] == (values[ptrs[f] + b] if b >= 0 else min_values[f])
        np.testing.assert_allclose([rec["left_grad"][i], rec["left_hess"][i]], L, rtol=1e-12)
        np.testing.assert_allclose([rec["right_grad"][i], rec["right_hess"][i]], R, rtol=1e-12)
        np.testing.assert_allclose(left[i], L, rtol=1e-12)
        np.testing.assert_allclose(right[i], R, rtol=1e-12)
    assert rec["feature"][1] == -1  # a single row: one side is always empty
    assert checked >= k // 2, f"only {checked} of {k} nodes had a clear winner: the test data is too tied"


# --------------------------------------------------------------------------- numpy_backend: groups of similar width
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


# --------------------------------------------------------------------------- the reference's arithmetic and masks
def test_child_gain_at_alpha_zero_is_the_thresholded_gain():
    """child_gain skips threshold_l1 when reg_alpha is 0; the gains must not change, zeros of
    either sign, infinities and NaN included."""
    from daskgb.split import child_gain, threshold_l1

    rng = np.random.default_rng(4)
    G = np.concatenate([rng.normal(size=500), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300]])
    H = np.concatenate([rng.uniform(-0.5, 3.0, size=500), [1.0, 1.0, 2.0, 2.0, 1.0, 0.5, 0.5]])
    p = SplitParams(reg_lambda=1.0)
    t = threshold_l1(np, G, 0.0)
    want = np.where(H > 0, (t * t / np.where(H > 0, H + p.reg_lambda, 1.0)).astype(np.float32), np.float32(0))
    np.testing.assert_array_equal(child_gain(np, G, H, p), want.astype(np.float32))


def test_masked_evaluation_equals_evaluating_the_allowed_features_alone():
    """split.evaluate_splits with a (k, F) mask scans only the allowed features: each node's
    result must equal an unmasked evaluation of a histogram holding just its allowed features."""
    rng = np.random.default_rng(8)
    n_features, k = 7, 12
    n_bins = rng.integers(1, 9, n_features)
    ptrs = np.concatenate([[0], np.cumsum(n_bins)])
    values = np.concatenate([np.sort(rng.choice(50, b, replace=False)) for b in n_bins]).astype(np.float32)
    min_values = (values[ptrs[:-1]] - 1).astype(np.float32)
    hist = np.stack([rng.normal(size=(k, ptrs[-1])), rng.uniform(0.5, 3, (k, ptrs[-1]))], axis=-1)
    parent = hist[:, : ptrs[1]].sum(axis=1)
    parent[::2] += [0.7, 2.0]  # missing values in half of the nodes
    mask = rng.random((k, n_features)) < 0.4
    mask[0] = False
    p = split.SplitParams(reg_lambda=0.5, min_child_weight=0.5)
    rec, left, right = split.evaluate_splits(np, hist, parent, np.ones(2), ptrs, values, min_values, p, mask)
    for i in range(k):
        fs = np.flatnonzero(mask[i])
        if fs.size == 0:
            assert rec["feature"][i] == -1 and rec["gain"][i] == 0
            continue
        bins = np.concatenate([np.arange(ptrs[f], ptrs[f + 1]) for f in fs])
        sub_ptrs = np.concatenate([[0], np.cumsum(n_bins[fs])])
        r, lft, rgt = split.evaluate_splits(np, hist[i : i + 1, bins], parent[i : i + 1], np.ones(2), sub_ptrs,
                                            values[bins], min_values[fs], p)
        expect_feature = fs[r["feature"][0]] if r["feature"][0] >= 0 else -1
        assert rec["feature"][i] == expect_feature, i
        for name in ("gain", "left_grad", "left_hess", "right_grad", "right_hess"):
            assert rec[name][i] == r[name][0], (i, name)
        if expect_feature >= 0:
            for name in ("bin", "default_left", "threshold"):
                assert rec[name][i] == r[name][0], (i, name)
            np.testing.assert_array_equal(left[i], lft[0])
            np.testing.assert_array_equal(right[i], rgt[0])
    assert (rec["feature"] >= 0).sum() >= k // 2


# --------------------------------------------------------------------------- GPU: the oracle and CUDA compared
@pytest.mark.gpu
@pytest.mark.parametrize(
    "params",
    [
        split.SplitParams(),
        split.SplitParams(reg_lambda=0.5, reg_alpha=0.3, min_child_weight=5.0),
        split.SplitParams(max_delta_step=0.7, min_child_weight=0.0),
    ],
    ids=["default", "alpha_mcw", "max_delta_step"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("use_kernel", [True, False], ids=["split_kernel", "array_ops"])
@pytest.mark.parametrize("n_features", [8, 45], ids=["one_block_per_node", "blocks_share_nodes"])
def test_evaluate_splits(cb, layout, params, use_kernel, n_features, settings):
    import cupy

    settings({"training.split-kernel": use_kernel})
    rng = np.random.default_rng(20 + LAYOUTS.index(layout) + n_features)
    # 45 features: the kernel splits a node's features among several blocks (cupy_backend n_chunks).
    ell_n, ell_c = both_ellpacks(cb, rng, layout, n_rows=2000, n_features=n_features, max_bins=30)
    part_n, part_c = grow_partitions(cb, ell_n, ell_c, rng, n_levels=3)
    gpair = random_gpair(rng, ell_n.n_rows)
    fixed, scale = cb.prepare_gradients(cupy.asarray(gpair))
    nodes = sorted(part_c.segments)
    hist = cb.build_histograms(ell_c, fixed, part_c, nodes)
    fixed_h = to_host(fixed)
    parent = np.stack([fixed_h[part_n.positions == n].sum(axis=0) for n in nodes]).astype(np.int64)
    cuts = ell_n.cuts
    per_node = rng.random((len(nodes), cuts.n_features)) < 0.5  # column sampling / interaction constraints
    per_node[0] = False  # a node that may split on nothing
    per_node[1] = True
    masks = [None, rng.random(cuts.n_features) < 0.6, per_node]
    for mask in masks:
        rec_e, left_e, right_e = split.evaluate_splits(np, to_host(hist), parent, scale, cuts.ptrs, cuts.values,
                                                       cuts.min_values, params, mask)
        rec_g, left_g, right_g = cb.evaluate_splits(ell_c.cuts, hist, cupy.asarray(parent), scale, params,
                                                    None if mask is None else cupy.asarray(mask))
        for field in rec_e.dtype.names:
            if field == "_pad":
                continue
            bad = np.flatnonzero(~((rec_e[field] == rec_g[field]) | (np.isnan(rec_e[field]) & np.isnan(rec_g[field]))))
            assert bad.size == 0, (f"mask shape={getattr(mask, 'shape', None)}: field {field} differs for nodes {bad[:5]}: "
                                   f"expected {rec_e[field][bad[:5]]}, got {rec_g[field][bad[:5]]}")
        np.testing.assert_array_equal(to_host(left_g), left_e)
        np.testing.assert_array_equal(to_host(right_g), right_e)
        assert (rec_e["feature"] >= 0).any(), "no node found a split: the test data is too easy"


@pytest.mark.gpu
@pytest.mark.parametrize("use_kernel", [True, False], ids=["split_kernel", "array_ops"])
def test_evaluate_splits_ties_and_no_split(cb, use_kernel, settings):
    """Hand-made histograms: exact ties (empty bins, a duplicated feature), a node
    with nothing, a node with only missing values, a node too light to split."""
    import cupy

    settings({"training.split-kernel": use_kernel})
    rng = np.random.default_rng(40)
    n_features, n_bins, k = 5, 12, 6
    ptrs = np.arange(0, n_features * n_bins + 1, n_bins, dtype=np.int32)
    values = np.concatenate([np.sort(rng.choice(100, n_bins, replace=False)) for _ in range(n_features)])
    cuts = Cuts(ptrs, values.astype(np.float32), (values[ptrs[:-1]] - 1).astype(np.float32))
    scale = np.array([2.0**-40, 2.0**-40])
    hist = np.zeros((k, ptrs[-1], 2), dtype=np.int64)
    g = rng.integers(-(2**43), 2**43, (k, ptrs[-1]))
    h = rng.integers(1, 2**43, (k, ptrs[-1]))
    empty = rng.random((k, ptrs[-1])) < 0.5  # empty bins: neighbouring candidates tie exactly
    hist[..., 0], hist[..., 1] = np.where(empty, 0, g), np.where(empty, 0, h)
    hist[:, 3 * n_bins : 4 * n_bins] = hist[:, 1 * n_bins : 2 * n_bins]  # feature 3 ties feature 1
    hist[1] = 0  # nothing at all
    hist[2] = 0  # only missing values (parent below is not zero)
    hist[3] //= 2**16  # hessians far below min_child_weight
    parent = hist[:, :n_bins].sum(axis=1)
    parent[2] = [2**42, 2**43]
    parent[4] += [2**41, 2**42]  # missing values on every feature
    for params in (split.SplitParams(), split.SplitParams(reg_alpha=2.0, max_delta_step=0.5)):
        rec_e, left_e, right_e = split.evaluate_splits(np, hist, parent, scale, cuts.ptrs, cuts.values,
                                                       cuts.min_values, params)
        rec_g, left_g, right_g = cb.evaluate_splits(cuts.to(cupy), cupy.asarray(hist), cupy.asarray(parent),
                                                    scale, params)
        for field in rec_e.dtype.names:
            np.testing.assert_array_equal(rec_g[field], rec_e[field], err_msg=f"{params}: field {field}")
        np.testing.assert_array_equal(to_host(left_g), left_e)
        np.testing.assert_array_equal(to_host(right_g), right_e)
        assert rec_e["feature"][1] == -1 and rec_e["feature"][3] == -1


# --------------------------------------------------------------------------- categorical features: categorical.cu against the array code
def categorical_nodes(rng, widths, categorical, k: int):
    """(cuts, int64 hist, int64 parent) of k nodes over features of the given widths: random
    fixed-point sums with empty categories (weight 0: ties in the sort), duplicated
    categories (equal weights), and missing values."""
    ptrs = np.concatenate([[0], np.cumsum(widths)]).astype(np.int32)
    values = np.concatenate([np.arange(1, w + 1, dtype=np.float32) for w in widths])
    cuts = Cuts(ptrs, values, np.zeros(len(widths), np.float32), np.asarray(categorical, dtype=bool))
    total = int(ptrs[-1])
    hist = np.zeros((k, total, 2), dtype=np.int64)
    hist[..., 0] = rng.integers(-4000, 4000, size=(k, total))
    hist[..., 1] = rng.integers(1, 3000, size=(k, total))
    hist[rng.random((k, total)) < 0.25] = 0
    dup = rng.random((k, total)) < 0.1
    hist[dup] = hist[:, :1].repeat(total, axis=1)[dup]
    sums = np.stack([hist[:, a:b].sum(axis=1) for a, b in zip(ptrs[:-1], ptrs[1:])], axis=1)
    parent = sums.max(axis=1) + rng.integers(0, 5000, size=(k, 2))
    return cuts, hist, parent


@pytest.mark.gpu
@pytest.mark.parametrize("rules", [(4, 64), (16, 8), (1, 2), (4, 5000)], ids=["default", "small-threshold",
                                                                             "no-onehot", "whole-scan"])
@pytest.mark.parametrize("masked", [False, True])
def test_categorical_kernel_equals_the_array_code(cb, rules, masked):
    """categorical.cu's best categorical split of every node is the array code's (split/
    categorical.py): loss, feature, side of missing values, children's sums and categories."""
    import cupy

    rng = np.random.default_rng(sum(rules) + masked)
    widths = [3, 7, 2, 12, 40, 300, 3000, 5]
    categorical = [True, False, True, True, True, True, True, False]
    cuts, hist, parent = categorical_nodes(rng, widths, categorical, k=9)
    scale = np.array([2.0**-12, 2.0**-11])
    params = SplitParams(reg_lambda=0.7, min_child_weight=0.05)
    mask = (rng.random((9, len(widths))) < 0.7) if masked else None
    want = nb.evaluate_categorical(cuts, hist, parent, scale, params, *rules, mask)
    got = cb.evaluate_categorical(cuts.to(cupy), cupy.asarray(hist), cupy.asarray(parent), scale, params, *rules,
                                  None if mask is None else cupy.asarray(mask))
    names = ("loss", "feature", "default_left", "left", "right", "bits")
    for name, w, g in zip(names, want, got):
        g = to_host(g)
        if name == "bits":  # the kernel's sets span the widest feature; the oracle's too
            assert g.shape == w.shape
        found = want[1] >= 0
        np.testing.assert_array_equal(np.asarray(g)[found], np.asarray(w)[found], err_msg=name)
    np.testing.assert_array_equal(got[1], want[1])
    assert (want[1] >= 0).sum() >= 5, "too few nodes found a categorical split to compare"
