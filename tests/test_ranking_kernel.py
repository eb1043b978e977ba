"""LambdaRank's pair kernel (kernels/ranking.cu through daskgb/ranking_cuda.py) against the numpy chunk loop of
LambdaRank._pair_sums, its oracle, on fresh random queries: every objective, both pair methods, score
normalisation and the gradient normalisation on and off, weights, ties in labels and in margins,
single-document queries, queries of one label, saturated sigmoids, and rounds with no pair at all.

Given the same per-round arrays (the objective's gains, discounts, MAP's running sums), each
pair's lambda and hessian are the loop's bits (the same float32 / float64 operations in the same
order, glibc's expf in the sigmoid); only the order of the float64 sums differs (atomics in the
kernel, bincounts in numpy), so the sums agree to a few double ulps of their terms (rtol 1e-12 of
the largest). End to end, the per-round arrays are CuPy's own (its log2 and its parallel cumsum
differ from numpy's by ulps, and MAP's delta is a difference of two running sums, which makes
those ulps relative errors of ~1e-11), so a lambda may round to the neighbouring float32: the
float32 gradients agree to rtol 1e-6 (a few float32 ulps), as the CuPy path did before the kernel.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import daskgb
from daskgb import ranking

pytestmark = pytest.mark.gpu

METHODS = [("topk", 32), ("topk", 3), ("mean", 1), ("mean", 3)]
FLAGS = [(True, True, True), (False, False, False), (True, False, True), (False, True, False)]


def _queries(seed, binary, shape="mixed"):
    """(sizes, labels, margins, group weights) of random queries with ties, single documents, one-label
    queries, one long query (more pairs than the kernel's grid has threads) and large margins."""
    rng = np.random.default_rng(seed)
    if shape == "single":  # every query one document: no pair at all
        sizes = np.ones(17, np.int64)
    elif shape == "one_label":  # pairs, all of equal labels: every pair skipped
        sizes = rng.integers(1, 9, 12)
    else:
        sizes = rng.integers(0, 30, 40)
        sizes[:4] = [1, 0, 6, 1]
        sizes[5] = 700 + seed
    n = int(sizes.sum())
    y = rng.integers(0, 2 if binary else 5, n).astype(np.float32)
    if shape == "one_label":
        y[:] = 1.0
    else:
        y[1:7] = 1.0  # the third query: one label only
    pred = np.round(rng.normal(size=n), 1).astype(np.float32)  # ties within queries
    if shape == "mixed":
        start = int(sizes[:4].sum())
        pred[start:start + sizes[4]] = 0.25  # a query of equal margins: no score normalisation there
        big = rng.random(n) < 0.1
        pred[big] *= np.float32(40.0)  # differences past the sigmoid's saturation
    return sizes, y, pred, rng.uniform(0.5, 2.0, sizes.size).astype(np.float32)


def _both(kind, method, num_pair, flags, sizes, y, w):
    import cupy as cp

    X = np.zeros((y.size, 1), np.float32)
    host = daskgb.QuantileMatrix(X, y, group=sizes, weight=w, device="cpu")
    dev = daskgb.QuantileMatrix(cp.asarray(X), cp.asarray(y), group=sizes,
                                weight=None if w is None else cp.asarray(w), device="cuda")
    out = []
    for xp, m in ((np, host), (cp, dev)):
        obj = ranking.RANKING_OBJECTIVES[f"rank:{kind}"](method, num_pair, *flags)
        obj.prepare(xp, m, None)
        out.append((xp, m, obj))
    return out


def _kernel_sums(h_obj, d_obj, host, dev, pred, iteration):
    """The numpy loop's sums, and the kernel's given the host's per-matrix and per-round arrays (the
    kernel's arithmetic alone), with the same ranking."""
    import cupy as cp

    ranked_h, *sums_h = h_obj._pair_sums(np, pred, host.label, iteration)
    static = h_obj._state["static"]
    per_round = h_obj._per_round(np, static, ranked_h, host.label[ranked_h.order].astype(np.float32))
    d_obj._state["static"] = {k: cp.asarray(v) for k, v in static.items()}
    d_obj._per_round = lambda xp, st, ranked, ys: {k: cp.asarray(v) for k, v in per_round.items()}
    try:
        ranked_d, *sums_d = d_obj._pair_sums(cp, cp.asarray(pred), dev.label, iteration)
    finally:
        del d_obj._per_round
        d_obj._state["static"] = None
    np.testing.assert_array_equal(daskgb.arrays.to_host(ranked_d.order), ranked_h.order)
    return sums_h, sums_d


def _close(dev, host, rel):
    dev, host = daskgb.arrays.to_host(dev), np.asarray(host)
    scale = float(np.abs(host).max()) if host.size else 0.0
    np.testing.assert_allclose(dev, host, rtol=rel, atol=rel * scale)


@pytest.mark.parametrize("kind", ["pairwise", "ndcg", "map"])
@pytest.mark.parametrize("method, num_pair", METHODS)
def test_kernel_pairs_equal_the_numpy_loop(kind, method, num_pair):
    for seed, flags, weighted, iteration in itertools.product([0, 1], FLAGS, [False, True], [0, 3]):
        sizes, y, pred, w = _queries(seed + 10 * num_pair, kind == "map")
        (np_, host, h_obj), (cp, dev, d_obj) = _both(kind, method, num_pair, flags, sizes, y, w if weighted else None)
        what = f"seed {seed} flags {flags} weighted {weighted} round {iteration}"
        sums_h, sums_d = _kernel_sums(h_obj, d_obj, host, dev, pred, iteration)
        for name, d, h in zip(("grad", "hess", "sum_lambda"), sums_d, sums_h):
            assert np.any(h != 0.0), (name, what)
            try:
                _close(d, h, 1e-12)  # the same terms, summed in another order
            except AssertionError as e:
                raise AssertionError(f"{name}, {what}") from e
        g_h = h_obj.gradient_of(np, pred, host, iteration)
        g_d = d_obj.gradient_of(cp, cp.asarray(pred), dev, iteration)
        try:
            _close(g_d, g_h, 1e-6)
        except AssertionError as e:
            raise AssertionError(f"gradient pairs, {what}") from e


@pytest.mark.parametrize("shape", ["single", "one_label"])
@pytest.mark.parametrize("method, num_pair", METHODS)
def test_rounds_without_pairs(shape, method, num_pair):
    import cupy as cp

    for kind in ("pairwise", "ndcg", "map"):
        sizes, y, pred, w = _queries(5, kind == "map", shape)
        (_, host, h_obj), (_, dev, d_obj) = _both(kind, method, num_pair, FLAGS[0], sizes, y, w)
        _, *sums_h = h_obj._pair_sums(np, pred, host.label, 1)
        _, *sums_d = d_obj._pair_sums(cp, cp.asarray(pred), dev.label, 1)
        for d, h in zip(sums_d, sums_h):
            assert not np.any(h) and not np.any(daskgb.arrays.to_host(d))
        np.testing.assert_array_equal(daskgb.arrays.to_host(d_obj.gradient_of(cp, cp.asarray(pred), dev, 1)),
                                      h_obj.gradient_of(np, pred, host, 1))


def test_kernel_pairs_match_for_linear_gains_and_fractional_labels():
    # ndcg_exp_gain=False takes labels that are not relevance degrees: ties among fractional labels.
    import cupy as cp

    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 40, 60)
    y = np.round(rng.random(sizes.sum()) * 3, 1).astype(np.float32)
    pred = rng.normal(size=sizes.sum()).astype(np.float32)
    for method, num_pair in METHODS:
        (_, host, h_obj), (_, dev, d_obj) = _both("ndcg", method, num_pair, (True, True, False), sizes, y, None)
        sums_h, sums_d = _kernel_sums(h_obj, d_obj, host, dev, pred, 2)
        for d, h in zip(sums_d, sums_h):
            _close(d, h, 1e-12)
        _close(d_obj.gradient_of(cp, cp.asarray(pred), dev, 2), h_obj.gradient_of(np, pred, host, 2), 1e-6)
