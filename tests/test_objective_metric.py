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
    got = expf(cupy, cupy.asarray(x)).get()
    # CuPy compiles kernels from source with -ftz=true: results below float32's smallest normal
    # are flushed to zero there (no gradient changes: the sigmoid adds 1 to them); a cubin built
    # without it keeps numpy's subnormals.
    flushed = (np.abs(want) < np.finfo(np.float32).tiny) & (got == 0.0)
    np.testing.assert_array_equal(np.where(flushed, 0, got.view(np.uint32)),
                                  np.where(flushed, 0, want.view(np.uint32)))
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


# --------------------------------------------------------------------------- metrics where the rows are
METRIC_CASES = ["rmse", "mae", "logloss", "error", "auc", "aucpr", "poisson-nloglik", "gamma-deviance",
                "tweedie-nloglik@1.5", "quantile", "ndcg@5", "map", "pre@3", "ndcg-", "mc:auc", "mc:aucpr",
                "mc:mlogloss", "mc:merror"]


def _metric_rows(rng, n, name):
    """(y, pred, weight, groups) a metric can score: ties among the predictions, weights."""
    from daskgb.ranking import groups_from_qid

    w = rng.uniform(0.1, 2, n).astype(np.float32)
    groups = None
    if name.startswith("mc:"):
        y = rng.integers(0, 3, n).astype(np.float32)
        p = rng.dirichlet(np.ones(3), n).astype(np.float32)
        p[:50] = p[0]  # ties
        return y, p, w, groups
    if name.split("@")[0].rstrip("-") in ("ndcg", "map", "pre"):
        y = rng.integers(0, 4, n).astype(np.float32)
        groups = groups_from_qid(np.sort(rng.integers(0, n // 20, n)), n)
    elif name == "cox-nloglik":  # survival times with ties, a third censored (negative)
        y = (np.round(rng.exponential(1.0, n), 1) + 0.1).astype(np.float32)
        y[rng.random(n) < 0.3] *= -1
    elif name in ("poisson-nloglik", "gamma-deviance", "tweedie-nloglik@1.5", "rmse", "mae", "quantile"):
        y = rng.gamma(2.0, 1.0, n).astype(np.float32)
    else:
        y = (rng.random(n) < 0.3).astype(np.float32)
    p = np.clip(rng.random(n) * 0.6 + y * 0.1 + 0.05, 0.01, None).astype(np.float32)
    p[:100] = p[0]  # ties
    return y, p, w, groups


def _score(name, xp, y, p, w, groups, comm=None):
    from daskgb.metric import evaluate

    return evaluate(name.removeprefix("mc:"), xp, xp.asarray(y), xp.asarray(p), xp.asarray(w), comm,
                    quantile_alpha=0.3, groups=groups)


@pytest.mark.gpu
@pytest.mark.parametrize("name", METRIC_CASES)
def test_every_metric_on_the_device_equals_the_host(name):
    """The metrics run where the predictions are; on the device they give the host's values."""
    import cupy

    y, p, w, groups = _metric_rows(np.random.default_rng(5), 4000, name)
    host = _score(name, np, y, p, w, groups)
    device = _score(name, cupy, y, p, w, groups)
    assert device == pytest.approx(host, rel=1e-12, abs=1e-15) and np.isfinite(host)


class _TwoThreads:
    """Two ranks of a collective as two threads of this process (what they exchange meets at a barrier)."""

    def __init__(self):
        import threading

        self.barrier = threading.Barrier(2, timeout=30)
        self.slots = [None, None]
        self.gathered_by = [False, False]


def _thread_comm(rank, meeting, on_device):
    from daskgb.collective import Communicator

    class ThreadComm(Communicator):
        world_size = 2
        reduces_on_device = on_device

        def _exchange(self, x):
            meeting.slots[self.rank] = x
            meeting.barrier.wait()
            both = list(meeting.slots)
            meeting.barrier.wait()
            return both

        def allgather(self, obj):
            return self._exchange(obj)

        def gather_apply(self, obj, fn):
            # As DaskCommunicator: fn runs once, on rank 0; the others get its result.
            both = self._exchange(obj)
            return self._exchange(fn(both) if self.rank == 0 else None)[0]

        def gather_to(self, root, rows, counts):
            both = self._exchange(rows)
            assert [len(r) for r in both] == list(counts)
            meeting.gathered_by[self.rank] = self.rank == root
            if self.rank != root:
                return None
            import cupy

            return cupy.concatenate(both)

        def allreduce(self, x, op="sum", *, out=None):
            a, b = self._exchange(x)
            total = a + b
            meeting.barrier.wait()  # both have read both before either writes its own in place
            if out is None:
                return total
            out[...] = total
            return out

    comm = ThreadComm()
    comm.rank = rank
    return comm


@pytest.mark.parametrize("name", ["auc", "aucpr", "logloss", "mc:auc", "mc:aucpr", "cox-nloglik"])
@pytest.mark.parametrize("xp_name", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("root", [0, 1])
def test_a_metric_of_two_workers_rows_is_the_metric_of_all_rows(name, xp_name, root):
    """Exact over all workers' rows: the AUCs gather the rows on one rank (through the host
    collective's rank 0, or on the device to the rank the caller names), which scores them and
    hands the parts to the others; the other metrics add partial sums."""
    from concurrent.futures import ThreadPoolExecutor

    from daskgb.metric import finish, metric_parts
    from daskgb.arrays import to_host

    xp = np if xp_name == "numpy" else pytest.importorskip("cupy")
    y, p, w, _ = _metric_rows(np.random.default_rng(8), 3000, name)
    whole = _score(name, np, y, p, w, None)
    meeting, cut = _TwoThreads(), 1234  # unequal shares
    shares = [slice(0, cut), slice(cut, None)]
    metric = name.removeprefix("mc:")

    def rank(r):
        parts = metric_parts(metric, xp, xp.asarray(y[shares[r]]), xp.asarray(p[shares[r]]), xp.asarray(w[shares[r]]),
                             _thread_comm(r, meeting, xp is not np), quantile_alpha=0.3, span=(cut, 3000 - cut),
                             root=root)
        return finish(metric, to_host(parts))

    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(rank, range(2)))
    assert got[0] == got[1] == pytest.approx(whole, rel=1e-12)
    if xp is not np and metric in ("auc", "aucpr", "cox-nloglik"):
        assert meeting.gathered_by == [root == 0, root == 1]


@pytest.mark.parametrize("scale_pos_weight", [1.0, 3.0])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_binary_logitraw_equals_xgboost(scale_pos_weight, device):
    """binary:logitraw: the logistic gradient, the margins as outputs, the base score (the
    mean label, or with scale_pos_weight the Newton step) taken as the first margin, as
    XGBoost's LogisticRaw; its default metric logloss reads the margins."""
    xgb = pytest.importorskip("xgboost")
    import daskgb

    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(800, 4)), 1).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=800) > 0.5).astype(np.float32)
    w = rng.uniform(0.5, 2, 800).astype(np.float32)
    p = {"objective": "binary:logitraw", "max_depth": 3, "scale_pos_weight": scale_pos_weight}
    dx = xgb.DMatrix(X, y, weight=w)
    theirs_log, ours_log = {}, {}
    bx = xgb.train({**p, "tree_method": "hist", "nthread": 1}, dx, 5, evals=[(dx, "t")], evals_result=theirs_log,
                   verbose_eval=False)
    dm = daskgb.QuantileMatrix(X, y, weight=w, device=device)
    bd = daskgb.train({**p, "device": device}, dm, 5, evals=[(dm, "t")], evals_result=ours_log, verbose_eval=False)
    np.testing.assert_allclose(np.asarray(bd.predict(X)), bx.predict(xgb.DMatrix(X)), atol=1e-5)
    np.testing.assert_allclose(ours_log["t"]["logloss"], theirs_log["t"]["logloss"], rtol=1e-5)
    with pytest.raises(ValueError, match=r"binary:logitraw needs labels in \[0, 1\]"):
        daskgb.train({**p, "device": "cpu"}, daskgb.QuantileMatrix(X, y * 2, device="cpu"), 1)


@pytest.mark.parametrize("parts", ["_auc_parts", "_aucpr_parts"])
@pytest.mark.parametrize("case", ["unweighted", "weighted", "nan"])
def test_ranking_metrics_sort_ties_in_any_order_only_where_it_keeps_the_bits(parts, case, monkeypatch):
    """AUC and AUC-PR sort the rows by prediction. Where every weight is 1, every label 0 or 1
    and no prediction NaN, the running sums are whole numbers and the host sorts unstably
    (faster); the result has the stable sort's bits. Weighted rows and NaN predictions keep
    the stable sort."""
    from daskgb import metric

    rng = np.random.default_rng(3)
    n = 20_000
    pred = np.round(rng.random(n), 2).astype(np.float32)  # ~100 values: large tie groups
    y = (rng.random(n) < pred).astype(np.float32)
    w = np.ones(n) if case != "weighted" else rng.random(n) * 3
    if case == "nan":
        pred[rng.random(n) < 0.01] = np.nan
    kinds = []
    argsort = np.argsort

    def recording_argsort(a, *args, kind=None, **kwargs):
        kinds.append(kind)
        return argsort(a, *args, kind=kind, **kwargs)

    monkeypatch.setattr(np, "argsort", recording_argsort)
    got = getattr(metric, parts)(np, y, pred, w)
    monkeypatch.setattr(metric, "_whole_sums", lambda xp, y, w: False)
    expected = getattr(metric, parts)(np, y, pred, w)
    assert kinds == (["quicksort", "stable"] if case == "unweighted" else ["stable", "stable"])
    assert [np.float64(v).tobytes() for v in got] == [np.float64(v).tobytes() for v in expected]
