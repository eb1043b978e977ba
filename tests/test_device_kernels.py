"""daskgb's own kernels for the array steps, the objectives and the metrics (device_arrays,
objective_cuda, metric_cuda) against their numpy oracles on fresh random input: bit for bit
where the steps are numpy's, and the exact float sums against math.fsum (the correctly rounded
exact sum), in any order of the rows."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest

from daskgb import fmath
from daskgb.backend import kernels

KERNELS = Path(kernels.kernel_dir())
PACKAGE = Path(fmath.__file__).resolve().parent


def _module_constant(module: str, name: str):
    """A literal module-level constant of daskgb/<module>.py, read without importing it (the
    device modules import CuPy)."""
    for node in ast.parse((PACKAGE / module).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{module} has no constant {name}")


# --------------------------------------------------------------------------- the constants both sides hold
def test_exact_slots_are_the_headers():
    text = (KERNELS / "exact_sum.cuh").read_text()
    digits = int(re.search(r"constexpr int kExactDigits = (\d+);", text).group(1))
    assert "constexpr int kExactSlots = kExactDigits + 1;" in text
    assert _module_constant("device_arrays.py", "EXACT_SLOTS") == digits + 1


def test_expf_header_has_fmaths_constants():
    text = (KERNELS / "expf.cuh").read_text()
    for c in (fmath._INVLN2N, fmath._SHIFT, fmath._C0, fmath._C1, fmath._C2):
        assert c.hex() in text
    assert float(fmath._OVERFLOW).hex() + "f" in text and float(fmath._UNDERFLOW).hex() + "f" in text
    assert "ki % 32ull" in text and f"ki << {52 - 5}" in text


def test_enums_are_the_launchers():
    objective = (KERNELS / "objective.cu").read_text()
    rules = _module_constant("objective_cuda.py", "LABEL_RULES")
    for name, value in re.findall(r"(k\w+) = (\d+),", objective[objective.index("enum LabelRule"):]):
        assert int(value) in rules.values(), name
    assert sorted(rules.values()) == list(range(5))
    metric = (KERNELS / "metric.cu").read_text()
    start = metric.index("enum AdditiveMetric")
    enum = dict(re.findall(r"k(\w+) = (\d+)", metric[start:metric.index("};", start)]))
    assert {k.lower(): int(v) for k, v in enum.items()} == _module_constant("metric_cuda.py", "ADDITIVE")


# --------------------------------------------------------------------------- helpers of the device tests
def _cupy():
    return pytest.importorskip("cupy")


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same_bits(got, want):
    """Equal to the bit, every NaN counting as every other (payloads and signs of NaN differ)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(_bits(np.where(nan, 0, got)), _bits(np.where(nan, 0, want)))


def _fsum(values) -> float:
    """IEEE's sum class for NaN and infinities, else the correctly rounded exact sum."""
    v = np.asarray(values, dtype=np.float64)
    if np.isnan(v).any() or (np.isposinf(v).any() and np.isneginf(v).any()):
        return math.nan
    if np.isinf(v).any():
        return float(v[np.isinf(v)][0])
    return math.fsum(v.tolist())


def _wide_floats(rng, shape, lo=-140, hi=120):
    """float32 values over most of float32's range, subnormals included."""
    with np.errstate(over="ignore"):
        return (rng.normal(size=shape) * np.exp2(rng.integers(lo, hi, shape).astype(np.float64))).astype(np.float32)


# --------------------------------------------------------------------------- exact sums
@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 7, 3000, 200_000])
@pytest.mark.parametrize("kind", ["gradients", "wide", "nan", "inf"])
def test_gradient_abs_sums_are_exact_in_any_order(n, kind):
    cp = _cupy()
    from daskgb import device_arrays as da

    rng = np.random.default_rng(n + len(kind))
    g = _wide_floats(rng, (n, 2)) if kind == "wide" else (rng.normal(size=(n, 2)) * [1.0, 0.25]).astype(np.float32)
    if n and kind == "nan":
        g[n // 2, 0] = np.nan
    if n and kind == "inf":
        g[n - 1, 1] = -np.inf
    got = da.gradient_abs_sums(cp.asarray(g)).get()
    want = np.array([_fsum(np.abs(g[:, c].astype(np.float64))) for c in range(2)])
    assert_same_bits(got, want)
    shuffled = da.gradient_abs_sums(cp.asarray(g[rng.permutation(n)])).get()
    assert_same_bits(shuffled, got)
    if kind == "gradients" and n:  # the scale numpy's sums give
        from daskgb.histogram.quantiser import fixed_point_scale

        scale, _ = da.fixed_point_scales(cp.asarray(got))
        np.testing.assert_array_equal(scale.get(), fixed_point_scale(np.abs(g.astype(np.float64)).sum(axis=0)))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 5, 5000, 100_000])
@pytest.mark.parametrize("weighted", [False, True])
def test_label_sums_are_exact(n, weighted):
    cp = _cupy()
    from daskgb import objective_cuda
    from daskgb.objectives import get_objective

    rng = np.random.default_rng(3 * n + weighted)
    y = _wide_floats(rng, n, -60, 60)
    w = rng.uniform(0.01, 3, n).astype(np.float32) if weighted else None
    got = objective_cuda.label_sums(cp.asarray(y), None if w is None else cp.asarray(w))
    if weighted:
        want = (_fsum(w.astype(np.float64) * y.astype(np.float64)), _fsum(w))
    else:
        want = (_fsum(y), float(n))
    assert_same_bits(np.array(got), np.array(want))
    obj = get_objective("reg:squarederror")  # through the objective, as training asks, on labels
    y = rng.gamma(2.0, 1.0, n).astype(np.float32)  # whose numpy sum cancels nothing
    on_device = obj.base_score_sums(cp, cp.asarray(y), None if w is None else cp.asarray(w))
    np.testing.assert_allclose(on_device, obj.base_score_sums(np, y, w), rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [2, 5, 100])  # 100 classes: the sums do not fit shared memory
@pytest.mark.parametrize("weighted", [False, True])
def test_class_weight_sums_are_exact(k, weighted):
    cp = _cupy()
    from daskgb.objective import Softmax

    rng = np.random.default_rng(k + weighted)
    n = 20_000
    y = rng.integers(0, k, n).astype(np.float32)
    w = rng.uniform(0, 2, n).astype(np.float32) if weighted else None
    obj = Softmax(k)
    got = obj.base_score_sums(cp, cp.asarray(y), None if w is None else cp.asarray(w))
    ww = np.ones(n) if w is None else w.astype(np.float64)
    want = [_fsum(ww[y == c]) for c in range(k)] + [_fsum(ww)]
    assert_same_bits(np.array(got), np.array(want))
    np.testing.assert_allclose(got, obj.base_score_sums(np, y, w), rtol=1e-12)


# --------------------------------------------------------------------------- checked copies, counts
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.int16, np.uint8, np.bool_])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "2d", "empty"])
def test_checked_float32_converts_and_counts_as_numpy(dtype, layout):
    cp = _cupy()
    from daskgb import device_arrays as da

    rng = np.random.default_rng(len(layout))
    if np.dtype(dtype).kind == "f":
        a = (rng.normal(size=3000) * 1e3).astype(dtype)
        a[::97] = np.nan
        a[5::113] = np.inf
        a[7::131] = -np.inf
        if dtype == np.float64:
            a[11::157] = 1e300  # beyond float32: inf
    elif dtype == np.bool_:
        a = rng.random(3000) < 0.5
    else:
        info = np.iinfo(dtype)
        a = rng.integers(max(info.min, -10**9), min(info.max, 10**9), 3000).astype(dtype)
    host = {"contiguous": a, "strided": a[::3], "2d": a[:3000 - 3000 % 6].reshape(-1, 6), "empty": a[:0]}[layout]
    dev = cp.asarray(a)
    dev = {"contiguous": dev, "strided": dev[::3], "2d": dev[:3000 - 3000 % 6].reshape(-1, 6), "empty": dev[:0]}[layout]
    with np.errstate(over="ignore", invalid="ignore"):
        want = host.astype(np.float32)
    for copy in (True, False):
        out, bad, negative = da.checked_float32(dev, copy)
        assert_same_bits(out.get(), want)
        assert bad == int((~np.isfinite(want)).sum()) and negative == int((want < 0).sum())
        if not copy and dtype == np.float32 and layout != "strided":
            assert out is dev
    assert_same_bits(da.contiguous_float32(dev).get(), want)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (1000, 1), (2000, 37), (3, 70)])
@pytest.mark.parametrize("missing", [np.nan, -1.0])
def test_missing_counts_are_the_references(shape, missing):
    cp = _cupy()
    from daskgb.ellpack import cuda, reference

    rng = np.random.default_rng(shape[0] + shape[1])
    X = rng.normal(size=shape).astype(np.float32)
    X[rng.random(shape) < 0.1] = np.nan
    X[rng.random(shape) < 0.1] = -1.0
    X[rng.random(shape) < 0.02] = np.inf
    assert cuda.count_missing(cp.asarray(X), missing) == reference.count_missing(X, missing)
    np.testing.assert_array_equal(cuda.present_counts(cp.asarray(X), missing).get(),
                                  reference.present_counts(X, missing))
    from daskgb import device_arrays as da

    longest = int(reference.present_counts(X, missing).max()) if shape[0] else 0
    assert da.longest_present_row(cp.asarray(X), missing) == longest


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 2047, 50_000])
def test_fixed_point_sums_are_numpys(n):
    cp = _cupy()
    from daskgb import device_arrays as da

    rng = np.random.default_rng(n)
    g = (rng.normal(size=(n, 2)) * [3.0, 0.5]).astype(np.float32)
    inv = np.array([2.0**40, 2.0**44])
    fixed = np.trunc(g.astype(np.float64) * inv).astype(np.int64)
    np.testing.assert_array_equal(da.to_fixed(cp.asarray(g), cp.asarray(inv)).get(), fixed)
    np.testing.assert_array_equal(da.fixed_sums(cp.asarray(g), cp.asarray(inv)).get(), fixed.sum(axis=0))
    np.testing.assert_array_equal(da.pair_sums(cp.asarray(fixed), n).get(), fixed.sum(axis=0))
    hist = cp.asarray(fixed.reshape(1, n, 2))
    end = n // 2
    np.testing.assert_array_equal(da.pair_sums(hist, end).get(), fixed[:end].sum(axis=0))


# --------------------------------------------------------------------------- making arrays
@pytest.mark.gpu
def test_fills_ranges_tiles():
    cp = _cupy()
    from daskgb import device_arrays as da

    for dtype, value in ((np.float32, 0.1), (np.float64, -2.5), (np.int64, 2**40 + 3), (np.int32, -7),
                         (np.uint32, 2**31 + 5), (np.uint8, 1)):
        for n in (0, 1, 10_000):
            out = da.full(n, value, dtype)
            np.testing.assert_array_equal(out.get(), np.full(n, value, dtype=dtype))
    segs = cp.zeros((5, 2), dtype=cp.int64)
    da.fill(segs[0, 1:], 1234)
    np.testing.assert_array_equal(segs.get(), np.array([[0, 1234]] + [[0, 0]] * 4))
    for dtype in (np.uint32, np.int64):
        for n in (0, 1, 100_001):
            np.testing.assert_array_equal(da.arange(n, dtype).get(), np.arange(n, dtype=dtype))
    parts = [np.arange(6, dtype=np.int32).reshape(2, 3) + 10 * i for i in range(4)]
    np.testing.assert_array_equal(da.stack([cp.asarray(a) for a in parts]).get(), np.stack(parts))
    np.testing.assert_array_equal(da.stack([cp.float64(1.5) * cp.ones(()), cp.zeros(())]).get(), [1.5, 0.0])
    margin = cp.asarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    column = da.contiguous_float32(margin[:, 1])
    np.testing.assert_array_equal(column.get(), [1, 4, 7, 10])
    da.copy_into(margin[:, 2], column)
    np.testing.assert_array_equal(margin.get()[:, 2], [1, 4, 7, 10])
    row = np.float32([0.5, -1.25, 3.0])
    np.testing.assert_array_equal(da.tile_row(row, 1000).get(), np.tile(row[None, :], (1000, 1)))
    assert da.tile_row(row, 0).shape == (0, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("n_trees", [1, 3])
def test_add_leaf_values_adds_as_the_host(n_trees):
    cp = _cupy()
    from daskgb import device_arrays as da

    rng = np.random.default_rng(n_trees)
    n, cap = 5000, 63
    values = rng.normal(size=(n_trees, cap)).astype(np.float32)
    positions = np.concatenate([rng.integers(0, cap, n) * n_trees + c for c in range(n_trees)]).astype(np.int32)
    margin = rng.normal(size=(n, n_trees) if n_trees > 1 else n).astype(np.float32)
    want = margin.copy()
    got = cp.asarray(margin)
    words = cp.asarray(values.view(np.int32))
    for c in range(n_trees):
        leaves = positions[c * n : (c + 1) * n]
        column = want if n_trees == 1 else want[:, c]
        column += values[c][leaves // n_trees]
        da.add_leaf_values(got, c, words[c], cp.asarray(leaves), n_trees)
    assert_same_bits(got.get(), want)


# --------------------------------------------------------------------------- objectives
_PACKED = ["reg:squarederror", "binary:logistic", "reg:logistic", "count:poisson", "reg:gamma", "reg:tweedie",
           "reg:absoluteerror", "reg:quantileerror", "reg:pseudohubererror"]


def _labels(rng, name, n):
    if name in ("binary:logistic",):
        return (rng.random(n) < 0.4).astype(np.float32)
    if name in ("reg:logistic",):
        return rng.random(n).astype(np.float32)
    if name in ("count:poisson",):
        return rng.poisson(3, n).astype(np.float32)
    if name in ("reg:gamma", "reg:tweedie"):
        return rng.gamma(2.0, 1.0, n).astype(np.float32) + np.float32(0.01)
    return rng.normal(size=n).astype(np.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("name", _PACKED)
@pytest.mark.parametrize("weighted", [False, True])
def test_gradients_on_the_device_are_numpys_bit_for_bit(name, weighted):
    cp = _cupy()
    from daskgb.objectives import get_objective

    rng = np.random.default_rng(len(name) + weighted)
    n = 20_000
    obj = get_objective(name)
    margin = (rng.normal(size=n) * 3).astype(np.float32)
    margin[:3] = [0.0, -0.0, np.nan]
    y = _labels(rng, name, n)
    w = rng.uniform(0, 2, n).astype(np.float32) if weighted else None
    want = obj.gradient(np, margin, y, w)
    got = obj.gradient(cp, cp.asarray(margin), cp.asarray(y), None if w is None else cp.asarray(w))
    assert_same_bits(got.get(), want)
    assert_same_bits(obj.gradient(cp, cp.asarray(margin[:0]), cp.asarray(y[:0]), None).get(),
                     obj.gradient(np, margin[:0], y[:0], None))


@pytest.mark.gpu
def test_sigmoid_and_expf_are_numpys():
    cp = _cupy()
    from daskgb.objectives import get_objective

    rng = np.random.default_rng(2)
    # Within +-80 the sigmoid stays above float32's normals (below, -ftz decides whether a
    # kernel keeps subnormals, which numpy does).
    margin = np.concatenate([rng.uniform(-80, 80, 30_000), [0.0, -0.0, np.nan, 80.0, -80.0]]).astype(np.float32)
    obj = get_objective("binary:logistic")
    assert_same_bits(obj.transform(cp, cp.asarray(margin)).get(), obj.transform(np, margin))
    x = np.concatenate([rng.uniform(-87, 88.7, 30_000), [np.inf, -np.inf, np.nan, 100.0, -200.0]]).astype(np.float32)
    assert_same_bits(fmath.expf(cp, cp.asarray(x)).get(), fmath.expf(np, x))
    assert fmath.expf(cp, cp.zeros(0, dtype=cp.float32)).shape == (0,)


@pytest.mark.gpu
@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_on_the_device_is_numpys(weighted):
    cp = _cupy()
    from daskgb.objective import Softmax

    rng = np.random.default_rng(weighted)
    n, k = 10_000, 4
    margin = (rng.normal(size=(n, k)) * 4).astype(np.float32)
    margin[0] = -5.0  # all negative: shifted by FLT_MIN
    margin[1, 2] = np.nan
    margin[2] = 1.0  # ties
    y = rng.integers(0, k, n).astype(np.float32)
    w = rng.uniform(0, 2, n).astype(np.float32) if weighted else None
    prob, cls = Softmax(k), Softmax(k, output_prob=False)
    assert_same_bits(prob.gradient(cp, cp.asarray(margin), cp.asarray(y), None if w is None else cp.asarray(w)).get(),
                     prob.gradient(np, margin, y, w))
    assert_same_bits(prob.transform(cp, cp.asarray(margin)).get(), prob.transform(np, margin))
    assert_same_bits(cls.transform(cp, cp.asarray(margin)).get(), cls.transform(np, margin))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["binary:logistic", "reg:logistic", "count:poisson", "reg:gamma", "multi:softprob"])
def test_label_checks_count_as_numpy(name):
    cp = _cupy()
    from daskgb.objective import Softmax
    from daskgb.objectives import get_objective

    obj = Softmax(3) if name == "multi:softprob" else get_objective(name)
    y = np.float32([0, 1, 2, -1, 0.5, np.nan, np.inf, -np.inf, 3, 1e-3, -0.0, 2.5] * 50)

    def message(xp, labels):
        try:
            obj.check_labels(xp, labels)
        except ValueError as e:
            return str(e)
        return None

    assert message(cp, cp.asarray(y)) == message(np, y) is not None
    ok = {"binary:logistic": [0, 1, 1], "reg:logistic": [0, 0.5, 1], "count:poisson": [0, 3, 0.5],
          "reg:gamma": [0.1, 2, 7], "multi:softprob": [0, 2, 1]}[name]
    ok = np.float32(ok)
    assert message(cp, cp.asarray(ok)) is None and message(np, ok) is None
    assert message(cp, cp.zeros(0, dtype=cp.float32)) is None


# --------------------------------------------------------------------------- metrics
def _metric_rows(rng, n):
    y = (rng.random(n) < 0.3).astype(np.float32)
    p = np.clip(rng.random(n) * 0.6 + y * 0.3, 0, 1).astype(np.float32)
    if n:
        p[: n // 10] = p[0]  # ties
    w = rng.uniform(0.1, 2, n).astype(np.float32)
    return y, p, w


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["rmse", "error", "mae", "logloss"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [0, 1, 30_000])
def test_additive_metric_sums_are_the_exact_sums_of_numpys_terms(name, weighted, n):
    cp = _cupy()
    from daskgb import metric

    rng = np.random.default_rng(n + weighted)
    y, p, w = _metric_rows(rng, n)
    w = w if weighted else None
    got = metric.metric_parts(name, cp, cp.asarray(y), cp.asarray(p), None if w is None else cp.asarray(w)).get()
    ww = np.ones(n) if w is None else w.astype(np.float64)
    yy, pp = y.astype(np.float64), p.astype(np.float64)
    with np.errstate(divide="ignore"):  # metric.py's terms, as numpy makes them before .sum()
        terms = {"rmse": lambda: ww * (pp - yy) * (pp - yy),
                 "error": lambda: ww * ((p > 0.5).astype(np.float64) != yy),
                 "mae": lambda: ww * np.abs(pp - yy),
                 "logloss": lambda: ww * -(yy * np.log(np.maximum(pp, 1e-16))
                                           + (1.0 - yy) * np.log(np.maximum(1.0 - pp, 1e-16)))}[name]()
    want = np.array([_fsum(terms), _fsum(ww)])
    if name == "logloss":  # CUDA's log and glibc's may differ in an ulp
        np.testing.assert_allclose(got, want, rtol=1e-14)
    else:
        assert_same_bits(got, want)
    host = metric.metric_parts(name, np, y, p, w)
    np.testing.assert_allclose(got, host, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 2, 5000, 300_000])
@pytest.mark.parametrize("weighted", [False, True])
def test_auc_parts_are_numpys(n, weighted):
    cp = _cupy()
    from daskgb import metric

    rng = np.random.default_rng(7 * n + weighted)
    y, p, w = _metric_rows(rng, n)
    w = w if weighted else None
    got = metric.metric_parts("auc", cp, cp.asarray(y), cp.asarray(p), None if w is None else cp.asarray(w)).get()
    want = np.asarray(metric.metric_parts("auc", np, y, p, w), dtype=np.float64)
    if weighted:
        np.testing.assert_allclose(got, want, rtol=1e-12)
    else:  # integer running sums: every step exact, as numpy's
        assert_same_bits(got, want)


@pytest.mark.gpu
def test_auc_sorts_special_predictions_as_numpy():
    """NaN last, -0 tied with 0, infinities and subnormals in their places (the sort keys)."""
    cp = _cupy()
    from daskgb import metric

    rng = np.random.default_rng(12)
    p = rng.choice(np.float32([0.5, -0.0, 0.0, np.nan, -np.inf, np.inf, 1e-40, -1e-40, -3, 2, 1e30]), 4000)
    y = (rng.random(4000) < 0.5).astype(np.float32)
    got = metric.metric_parts("auc", cp, cp.asarray(y), cp.asarray(p)).get()
    assert_same_bits(got, np.asarray(metric.metric_parts("auc", np, y, p), dtype=np.float64))


@pytest.mark.gpu
def test_inclusive_scans_across_levels():
    cp = _cupy()
    from daskgb import metric_cuda

    rng = np.random.default_rng(4)
    for n in (1, 2048, 2049, 5_000_000):  # 5M: three levels of chunks
        ends = np.where(rng.random(n) < 0.01, np.arange(n), -1).astype(np.int64)
        np.testing.assert_array_equal(metric_cuda.inclusive_scan(cp.asarray(ends), "MaxOfIndices").get(),
                                      np.maximum.accumulate(ends))
        counts = rng.integers(0, 3, n).astype(np.float64)  # integers: exact in any order
        np.testing.assert_array_equal(metric_cuda.inclusive_scan(cp.asarray(counts), "SumOfDoubles").get(),
                                      np.cumsum(counts))
