"""survival:aft (accelerated failure time) and its metrics: XGBoost's model on the same data,
with every kind of censoring, for each noise distribution."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb import survival
from daskgb.arrays import to_host
from daskgb.collective import LocalCommunicator

from exact_data import make_data


def _survival_data(seed=0, n=1200):
    X, s = make_data(seed, "reg:squarederror", True, n=n)
    rng = np.random.default_rng(seed)
    t = np.exp(0.3 * s + rng.normal(scale=0.3, size=n)).astype(np.float32)
    lower, upper = t.copy(), t.copy()
    kind = rng.integers(0, 4, n)  # observed, right-, left-, interval-censored
    upper[kind == 1] = np.inf
    lower[kind == 2] = 0.0
    upper[kind == 2] = (t[kind == 2] * 1.5).astype(np.float32)
    lower[kind == 3] = (t[kind == 3] * 0.7).astype(np.float32)
    upper[kind == 3] = (t[kind == 3] * 1.3).astype(np.float32)
    return X, lower, upper


@pytest.mark.parametrize("distribution,scale", [("normal", 1.0), ("logistic", 0.8), ("extreme", 1.2)])
def test_aft_equals_xgboosts(distribution, scale):
    xgb = pytest.importorskip("xgboost")
    X, lower, upper = _survival_data()
    Xv, lv, uv = _survival_data(seed=1, n=400)
    params = {"objective": "survival:aft", "aft_loss_distribution": distribution,
              "aft_loss_distribution_scale": scale, "max_depth": 3, "eta": 0.1,
              "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    m = daskgb.QuantileMatrix(X, label_lower_bound=lower, label_upper_bound=upper)
    mv = daskgb.QuantileMatrix(Xv, label_lower_bound=lv, label_upper_bound=uv, ref=m)
    ours_log: dict = {}
    ours = daskgb.train({**params, "device": "cpu"}, m, 10, evals=[(mv, "v")], evals_result=ours_log,
                        verbose_eval=False)
    d = xgb.DMatrix(X)
    d.set_float_info("label_lower_bound", lower)
    d.set_float_info("label_upper_bound", upper)
    dv = xgb.DMatrix(Xv)
    dv.set_float_info("label_lower_bound", lv)
    dv.set_float_info("label_upper_bound", uv)
    theirs_log: dict = {}
    theirs = xgb.train({**params, "tree_method": "hist"}, d, 10, evals=[(dv, "v")], evals_result=theirs_log,
                       verbose_eval=False)
    np.testing.assert_allclose(ours.predict(Xv), theirs.predict(xgb.DMatrix(Xv)), rtol=1e-5)
    for k in params["eval_metric"]:
        np.testing.assert_allclose(ours_log["v"][k], theirs_log["v"][k], rtol=1e-5, err_msg=k)


def test_the_gradient_limits_where_the_margin_is_far_outside():
    """Margins far from the interval: XGBoost's limits, clipped, never NaN."""
    lower = np.array([1.0, 1.0, 0.0, 1.0], np.float32)
    upper = np.array([1.0, np.inf, 1.0, 2.0], np.float32)
    for name in survival.DISTRIBUTIONS:
        for m in (-1e4, 1e4):
            g, h = survival.aft_gradient(np, lower, upper, np.full(4, m, np.float32), name, 1.0)
            assert np.isfinite(g).all() and np.isfinite(h).all()
            assert (g >= survival.MIN_GRAD).all() and (h >= survival.MIN_HESS).all()


def test_bad_bounds_and_missing_bounds_are_named():
    X, lower, upper = _survival_data(n=100)
    with pytest.raises(ValueError, match="go together"):
        daskgb.QuantileMatrix(X, label_lower_bound=lower)
    bad = upper.copy()
    bad[3] = lower[3] - 1
    with pytest.raises(ValueError, match="row 3"):
        daskgb.QuantileMatrix(X, label_lower_bound=lower, label_upper_bound=bad)
    with pytest.raises(ValueError, match="label_lower_bound and label_upper_bound"):
        daskgb.train({"objective": "survival:aft"}, daskgb.QuantileMatrix(X, lower), 2, verbose_eval=False)
    with pytest.raises(ValueError, match="aft_loss_distribution"):
        daskgb.train({"objective": "survival:aft", "aft_loss_distribution": "weibull"},
                     daskgb.QuantileMatrix(X, label_lower_bound=lower, label_upper_bound=upper), 2)


def test_an_aft_model_saved_as_xgboost_json_predicts_as_xgboost(tmp_path):
    xgb = pytest.importorskip("xgboost")
    X, lower, upper = _survival_data(seed=2)
    ours = daskgb.train({"objective": "survival:aft", "aft_loss_distribution": "logistic", "max_depth": 3},
                        daskgb.QuantileMatrix(X, label_lower_bound=lower, label_upper_bound=upper), 5,
                        verbose_eval=False)
    path = tmp_path / "aft.json"
    ours.save_model(path, format="xgboost")
    np.testing.assert_allclose(xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X)), ours.predict(X), rtol=1e-6)
    back = daskgb.Booster().load_model(path)
    assert back.params.aft_loss_distribution == "logistic"


@pytest.mark.gpu
def test_aft_on_the_gpu_equals_the_cpu():
    cupy = pytest.importorskip("cupy")
    X, lower, upper = _survival_data(seed=3)
    params = {"objective": "survival:aft", "aft_loss_distribution": "extreme", "max_depth": 4,
              "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    logs = {}
    models = {}
    for device in ("cpu", "cuda"):
        xp = cupy if device == "cuda" else np
        m = daskgb.QuantileMatrix(xp.asarray(X), label_lower_bound=xp.asarray(lower),
                                  label_upper_bound=xp.asarray(upper))
        logs[device] = {}
        models[device] = daskgb.train({**params, "device": device}, m, 8, evals=[(m, "t")],
                                      evals_result=logs[device], verbose_eval=False)
    np.testing.assert_allclose(models["cuda"].predict(X), models["cpu"].predict(X), rtol=1e-5)
    for k in params["eval_metric"]:
        np.testing.assert_allclose(logs["cuda"]["t"][k], logs["cpu"]["t"][k], rtol=1e-6)


def _cox_data(seed=4, n=1000):
    X, s = make_data(seed, "reg:squarederror", True, n=n)
    rng = np.random.default_rng(seed)
    t = np.round(np.exp(-0.3 * s + rng.normal(scale=0.5, size=n)), 1).astype(np.float32) + 0.1  # ties
    censored = rng.random(n) < 0.3
    return X, np.where(censored, -t, t).astype(np.float32)


def test_cox_equals_xgboosts():
    xgb = pytest.importorskip("xgboost")
    X, y = _cox_data()
    w = np.random.default_rng(5).uniform(0.5, 2.0, len(y)).astype(np.float32)
    params = {"objective": "survival:cox", "max_depth": 3, "eta": 0.1}
    ours_log: dict = {}
    m = daskgb.QuantileMatrix(X, y, weight=w)
    ours = daskgb.train({**params, "device": "cpu"}, m, 10, evals=[(m, "t")], evals_result=ours_log,
                        verbose_eval=False)
    d = xgb.DMatrix(X, y, weight=w)
    theirs_log: dict = {}
    theirs = xgb.train({**params, "tree_method": "hist"}, d, 10, evals=[(d, "t")], evals_result=theirs_log,
                       verbose_eval=False)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(xgb.DMatrix(X)), rtol=1e-5)
    np.testing.assert_allclose(ours_log["t"]["cox-nloglik"], theirs_log["t"]["cox-nloglik"], rtol=1e-5)


class _Rows:
    """A worker's share of the rows, as Cox's gradient reads a matrix: labels, weights and the
    rows' places in the collection (row_spans, as a Dask worker's matrix has them)."""

    def __init__(self, xp, y, w, spans):
        rows = np.concatenate([np.arange(a, a + n) for a, n in spans])
        self.label, self.weight, self.row_spans = xp.asarray(y[rows]), xp.asarray(w[rows]), spans
        self.rows = rows


def _on_two_threads(fn, on_device):
    """fn(rank, comm) on two threads meeting in a two-rank communicator; the results by rank."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from daskgb.collective import Communicator

    barrier, slots = threading.Barrier(2, timeout=60), [None, None]

    class Comm(Communicator):
        world_size = 2
        reduces_on_device = on_device

        def __init__(self, rank):
            self.rank = rank

        def _exchange(self, x):
            slots[self.rank] = x
            barrier.wait()
            both = list(slots)
            barrier.wait()
            return both

        def allgather(self, obj):
            return self._exchange(obj)

        def allreduce(self, x, op="sum", *, out=None):
            assert on_device or isinstance(x, np.ndarray)  # a host collective is given host arrays
            a, b = self._exchange(x)
            return a + b

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda r: fn(r, Comm(r)), range(2)))


@pytest.mark.parametrize("xp_name,on_device", [("numpy", False), pytest.param("cupy", True, marks=pytest.mark.gpu),
                                               pytest.param("cupy", False, marks=pytest.mark.gpu)])
def test_cox_gradient_of_two_workers_is_the_gradient_of_all_rows(xp_name, on_device):
    """Each worker's Cox pairs (and the intercept) are those of its rows among all rows, to the
    bit: the risk sets span both workers, and tied times are ordered by the rows' places in
    the collection, as one process orders them, however the rows are dealt to the workers."""
    from daskgb.survival import SurvivalCox

    xp = np if xp_name == "numpy" else pytest.importorskip("cupy")
    _, y = _cox_data(n=900)
    w = np.random.default_rng(7).uniform(0.5, 2.0, len(y)).astype(np.float32)
    margin = np.random.default_rng(8).normal(scale=0.5, size=len(y)).astype(np.float32)
    whole = SurvivalCox()
    whole.prepare(xp, None, LocalCommunicator())
    expected = to_host(whole.gradient(xp, xp.asarray(margin), xp.asarray(y), xp.asarray(w)))
    base = whole.estimate_base_score(xp, xp.asarray(y), xp.asarray(w))
    shares = [[(0, 250), (600, 300)], [(250, 350)]]  # rank 0 holds the first and last rows

    def rank(r, comm):
        rows = _Rows(xp, y, w, shares[r])
        cox = SurvivalCox()
        cox.prepare(xp, rows, comm)
        score = cox.estimate_base_score(xp, rows.label, rows.weight, comm)
        return rows.rows, to_host(cox.gradient_of(xp, xp.asarray(margin[rows.rows]), rows, 1)), score

    for rows, pairs, score in _on_two_threads(rank, on_device):
        np.testing.assert_array_equal(pairs, expected[rows])
        assert score == base


@pytest.mark.gpu
def test_cox_on_the_gpu_equals_the_cpu():
    cupy = pytest.importorskip("cupy")
    X, y = _cox_data(seed=6)
    logs, models = {}, {}
    for device in ("cpu", "cuda"):
        xp = cupy if device == "cuda" else np
        m = daskgb.QuantileMatrix(xp.asarray(X), xp.asarray(y))
        logs[device] = {}
        models[device] = daskgb.train({"objective": "survival:cox", "max_depth": 4, "device": device}, m, 8,
                                      evals=[(m, "t")], evals_result=logs[device], verbose_eval=False)
    assert models["cuda"].base_score == pytest.approx(models["cpu"].base_score, rel=1e-6)
    np.testing.assert_allclose(models["cuda"].predict(X), models["cpu"].predict(X), rtol=1e-5)
    np.testing.assert_allclose(logs["cuda"]["t"]["cox-nloglik"], logs["cpu"]["t"]["cox-nloglik"], rtol=1e-6)

