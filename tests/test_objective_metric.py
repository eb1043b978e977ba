"""Objectives (gradients, base score, glibc-exact expf) and metrics against references."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from daskgb.fmath import expf
from daskgb.metric import auc, error, logloss, rmse
from daskgb.objectives import get_objective


def test_expf_is_glibc_expf_bit_for_bit():
    name = ctypes.util.find_library("m")
    if name is None:
        pytest.skip("no C math library to compare with")
    libm = ctypes.CDLL(name)
    libm.expf.restype = ctypes.c_float
    libm.expf.argtypes = [ctypes.c_float]
    rng = np.random.default_rng(0)
    x = np.concatenate([(rng.normal(size=20000) * 20), rng.uniform(-103, 88.7, 20000), [0.0, -0.0, 88.7, -88.7]])
    x = x.astype(np.float32)
    ref = np.array([libm.expf(float(v)) for v in x], dtype=np.float32)
    ours = expf(np, x)
    if not np.array_equal(ref, ours):
        bad = np.flatnonzero(ref != ours)
        # glibc < 2.28 had another expf; say so rather than fail obscurely
        pytest.fail(f"{bad.size} of {x.size} differ from this libm's expf, e.g. x={x[bad[0]]!r}")
    assert np.isinf(expf(np, np.float32([100.0]))[0])
    assert expf(np, np.float32([-200.0]))[0] == 0.0
    assert np.isnan(expf(np, np.float32([np.nan]))[0])


@pytest.mark.gpu
def test_cuda_expf_and_logistic_gradient_match_numpy_bit_for_bit():
    """The fused CUDA expf and logistic-gradient kernels against the numpy steps, to the bit."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(size=50000) * 20, rng.uniform(-110, 95, 50000),
                        [0.0, -0.0, 88.7, -88.7, 88.72283, -103.97208, np.inf, -np.inf, np.nan]]).astype(np.float32)
    want = expf(np, x)
    # CuPy compiles every kernel with -ftz=true: results below float32's smallest normal are
    # flushed to zero there (no gradient changes: the sigmoid adds 1 to them).
    want[np.abs(want) < np.finfo(np.float32).tiny] = 0.0
    np.testing.assert_array_equal(expf(cupy, cupy.asarray(x)).get().view(np.uint32), want.view(np.uint32))
    obj = get_objective("binary:logistic")
    margin = (rng.normal(size=20000) * 8).astype(np.float32)
    y = (rng.random(20000) < 0.4).astype(np.float32)
    w = rng.random(20000).astype(np.float32)
    for weight in (None, w):
        want = obj.gradient(np, margin, y, weight)
        got = obj.gradient(cupy, cupy.asarray(margin), cupy.asarray(y), None if weight is None else cupy.asarray(weight))
        np.testing.assert_array_equal(got.get().view(np.uint32), want.view(np.uint32))


def test_logistic_gradient_formula():
    obj = get_objective("binary:logistic")
    margin = np.float32([-30, -1, 0, 2, 40])
    y = np.float32([0, 1, 0, 1, 1])
    w = np.float32([1, 2, 1, 0.5, 1])
    g = obj.gradient(np, margin, y, w)
    p = 1 / (1 + np.exp(-margin.astype(np.float64)))
    np.testing.assert_allclose(g[:, 0], (p - y) * w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g[:, 1], np.maximum(p * (1 - p), 1e-16) * w, rtol=1e-5, atol=1e-12)
    assert g.dtype == np.float32


def test_squared_error_gradient_and_base_score():
    obj = get_objective("reg:squarederror")
    y = np.float32([1, 2, 3, 10])
    w = np.float32([1, 1, 1, 3])
    g = obj.gradient(np, np.zeros(4, np.float32), y, w)
    np.testing.assert_array_equal(g[:, 0], -y * w)
    np.testing.assert_array_equal(g[:, 1], w)
    assert obj.estimate_base_score(np, y, w) == pytest.approx((1 + 2 + 3 + 30) / 6)


def test_label_checks():
    with pytest.raises(ValueError, match="binary:logistic"):
        get_objective("binary:logistic").check_labels(np, np.float32([0, 1, 2]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        get_objective("reg:logistic").check_labels(np, np.float32([0, 1.5]))
    with pytest.raises(ValueError, match="unknown objective"):
        get_objective("binary:hinge")
    with pytest.raises(ValueError, match="num_class >= 2"):
        get_objective("multi:softmax")


def test_metrics_match_scikit_learn():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    y = (rng.random(3000) < 0.3).astype(np.float32)
    p = np.clip(rng.random(3000) * 0.6 + y * 0.3, 0, 1).astype(np.float32)
    p[:100] = 0.5  # ties
    w = rng.uniform(0.1, 2, 3000).astype(np.float32)
    for weight in (None, w):
        assert auc(np, y, p, weight) == pytest.approx(sk.roc_auc_score(y, p, sample_weight=weight), rel=1e-9)
        assert logloss(np, y, p, weight) == pytest.approx(sk.log_loss(y, p, sample_weight=weight), rel=1e-6)
        assert rmse(np, y, p, weight) == pytest.approx(np.sqrt(sk.mean_squared_error(y, p, sample_weight=weight)))
        assert error(np, y, p, weight) == pytest.approx(1 - sk.accuracy_score(y, p > 0.5, sample_weight=weight))
    assert np.isnan(auc(np, np.ones(5, np.float32), np.float32([0.1, 0.2, 0.3, 0.4, 0.5])))
