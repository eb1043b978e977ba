"""Survival objectives on 2 Dask workers: survival:aft (the bounds carried with their rows, eval
sets and the survival metrics) equals in-process training and XGBoost; survival:cox equals
in-process training exactly, its risk sets summed over every worker's rows."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")

from placement import on_workers  # noqa: E402

CHUNKS = [300, 450, 250]


def aft_data(seed=0, n=1000):
    """Features of few distinct values (exact cuts: XGBoost's bins), and every kind of censoring."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[:, 2] = rng.integers(0, 6, n)
    t = np.exp(0.3 * X[:, 0] - 0.2 * X[:, 2] + rng.normal(scale=0.3, size=n)).astype(np.float32)
    lower, upper = t.copy(), t.copy()
    kind = rng.integers(0, 4, n)  # observed, right-, left-, interval-censored
    upper[kind == 1] = np.inf
    lower[kind == 2] = 0.0
    upper[kind == 2] = (t[kind == 2] * 1.5).astype(np.float32)
    lower[kind == 3] = (t[kind == 3] * 0.7).astype(np.float32)
    upper[kind == 3] = (t[kind == 3] * 1.3).astype(np.float32)
    return X, lower, upper


def cox_data(seed=4, n=1000):
    """Survival times rounded (ties), a third censored (negative)."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    t = (np.round(np.exp(-0.4 * X[:, 0] + rng.normal(scale=0.5, size=n)), 1) + 0.1).astype(np.float32)
    return X, np.where(rng.random(n) < 0.3, -t, t).astype(np.float32)


def placed(client, placement, *arrays):
    return [on_workers(client, a, CHUNKS, placement) for a in arrays]


@pytest.mark.parametrize("distribution,scale", [("normal", 1.0), ("logistic", 0.8), ("extreme", 1.2)])
def test_aft_on_two_workers_equals_in_process_and_xgboost(client, distribution, scale):
    xgb = pytest.importorskip("xgboost")
    X, lower, upper = aft_data()
    Xv, lv, uv = aft_data(seed=1, n=400)
    params = {"objective": "survival:aft", "aft_loss_distribution": distribution,
              "aft_loss_distribution_scale": scale, "max_depth": 3, "eta": 0.1, "device": "cpu",
              "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    Xd, ld, ud = placed(client, [0, 1, 0], X, lower, upper)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=ld, label_upper_bound=ud)
    dvalid = dgb.DaskQuantileMatrix(client, *(on_workers(client, a, [150, 250], [1, 0]) for a in (Xv,)),
                                    label_lower_bound=on_workers(client, lv, [150, 250], [1, 0]),
                                    label_upper_bound=on_workers(client, uv, [150, 250], [1, 0]), ref=dtrain)
    out = dgb.train(client, params, dtrain, 10, evals=[(dtrain, "t"), (dvalid, "v")], verbose_eval=False)

    m = daskgb.QuantileMatrix(X, label_lower_bound=lower, label_upper_bound=upper)
    mv = daskgb.QuantileMatrix(Xv, label_lower_bound=lv, label_upper_bound=uv, ref=m)
    local_log: dict = {}
    local = daskgb.train(params, m, 10, evals=[(m, "t"), (mv, "v")], evals_result=local_log, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(Xv), local.predict(Xv), rtol=1e-6)
    for name in ("t", "v"):
        for k in params["eval_metric"]:
            np.testing.assert_allclose(out["history"][name][k], local_log[name][k], rtol=1e-6, err_msg=(name, k))

    d = xgb.DMatrix(X)
    d.set_float_info("label_lower_bound", lower)
    d.set_float_info("label_upper_bound", upper)
    dv = xgb.DMatrix(Xv)
    dv.set_float_info("label_lower_bound", lv)
    dv.set_float_info("label_upper_bound", uv)
    theirs_log: dict = {}
    theirs = xgb.train({**params, "tree_method": "hist"}, d, 10, evals=[(dv, "v")], evals_result=theirs_log,
                       verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(Xv), theirs.predict(xgb.DMatrix(Xv)), rtol=1e-5)
    for k in params["eval_metric"]:
        np.testing.assert_allclose(out["history"]["v"][k], theirs_log["v"][k], rtol=1e-5, err_msg=k)


def test_aft_bounds_with_labels_weights_and_a_worker_holding_none_of_an_eval_set(client):
    """y given beside the bounds (not read by AFT), weights, and an eval set all on one worker:
    the other worker's share of it is empty and still evaluates."""
    X, lower, upper = aft_data(seed=2)
    w = np.random.default_rng(3).uniform(0.5, 2.0, X.shape[0]).astype(np.float32)
    params = {"objective": "survival:aft", "max_depth": 4, "device": "cpu",
              "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    Xd, yd, wd, ld, ud = placed(client, [1, 0, 1], X, lower, w, lower, upper)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd, weight=wd, label_lower_bound=ld, label_upper_bound=ud)
    dvalid = dgb.DaskQuantileMatrix(client, *placed(client, [0, 0, 0], X), label_lower_bound=placed(
        client, [0, 0, 0], lower)[0], label_upper_bound=placed(client, [0, 0, 0], upper)[0], ref=dtrain)
    out = dgb.train(client, params, dtrain, 6, evals=[(dvalid, "v")], verbose_eval=False)
    m = daskgb.QuantileMatrix(X, lower, weight=w, label_lower_bound=lower, label_upper_bound=upper)
    log: dict = {}
    local = daskgb.train(params, m, 6, evals=[(daskgb.QuantileMatrix(X, label_lower_bound=lower, label_upper_bound=upper,
                                                                     ref=m), "v")], evals_result=log,
                         verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), rtol=1e-6)
    for k in params["eval_metric"]:
        np.testing.assert_allclose(out["history"]["v"][k], log["v"][k], rtol=1e-6, err_msg=k)


@pytest.mark.parametrize("placement", [[0, 1, 1], [1, 0, 1]], ids=["in-order", "interleaved"])
def test_cox_on_two_workers_equals_in_process(client, placement):
    """Exact, not per worker: every round's risk sets span both workers' rows, ties broken by
    the rows' places in the collection (wherever Dask placed them), as in one process."""
    X, y = cox_data()
    w = np.random.default_rng(5).uniform(0.5, 2.0, len(y)).astype(np.float32)
    params = {"objective": "survival:cox", "max_depth": 3, "eta": 0.3, "device": "cpu"}
    Xd, yd, wd = placed(client, placement, X, y, w)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd, weight=wd)
    out = dgb.train(client, params, dtrain, 10, evals=[(dtrain, "t")], verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y, weight=w)
    log: dict = {}
    local = daskgb.train(params, m, 10, evals=[(m, "t")], evals_result=log, verbose_eval=False)
    assert out["booster"].base_score == local.base_score
    assert [t.to_dict() for t in out["booster"].trees] == [t.to_dict() for t in local.trees]
    np.testing.assert_allclose(out["history"]["t"]["cox-nloglik"], log["t"]["cox-nloglik"], rtol=1e-9)


def test_cox_metric_on_a_dask_eval_set_equals_in_process(client):
    X, y = cox_data(seed=6)
    Xv, yv = cox_data(seed=7, n=500)
    params = {"objective": "survival:cox", "max_depth": 3, "device": "cpu", "base_score": 0.8}
    dtrain = dgb.DaskQuantileMatrix(client, *placed(client, [0, 1, 0], X, y))
    dvalid = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [200, 300], [1, 0]),
                                    on_workers(client, yv, [200, 300], [1, 0]), ref=dtrain)
    out = dgb.train(client, params, dtrain, 5, evals=[(dvalid, "v")], verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y)
    log: dict = {}
    local = daskgb.train(params, m, 5, evals=[(daskgb.QuantileMatrix(Xv, yv, ref=m), "v")], evals_result=log,
                         verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(Xv), local.predict(Xv), rtol=1e-6)
    np.testing.assert_allclose(out["history"]["v"]["cox-nloglik"], log["v"]["cox-nloglik"], rtol=1e-9)


def test_bad_or_missing_bounds_on_dask_are_named(client):
    X, lower, upper = aft_data(n=400)
    chunks, placement = [200, 200], [0, 1]
    Xd, ld, ud = (on_workers(client, a, chunks, placement) for a in (X, lower, upper))
    with pytest.raises(ValueError, match="go together"):
        dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=ld)
    with pytest.raises(ValueError, match="label_upper_bound has 300 rows but X has 400"):
        dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=ld,
                               label_upper_bound=on_workers(client, upper[:300], [100, 100, 100], [0, 1, 1]))
    bad = upper.copy()
    bad[205] = lower[205] - 1  # row 5 of partition 1
    with pytest.raises(ValueError, match=r"partition 1 of the data: .*0 <= label_lower_bound <= label_upper_bound.*"
                                         r"row 5"):
        dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=ld,
                               label_upper_bound=on_workers(client, bad, chunks, placement))
    neg = lower.copy()
    neg[3] = -1.0
    with pytest.raises(ValueError, match="partition 0 of the data: .*row 3"):
        dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=on_workers(client, neg, chunks, placement),
                               label_upper_bound=ud)
    with pytest.raises(ValueError, match="label_lower_bound has 350 rows but X has 400"):
        dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=on_workers(client, lower[:350], [150, 200], placement),
                               label_upper_bound=ud)
    # Without bounds survival:aft is refused on the client, before any training, as in process.
    plain = dgb.DaskQuantileMatrix(client, Xd, on_workers(client, lower, chunks, placement))
    with pytest.raises(ValueError, match="dtrain needs label_lower_bound and label_upper_bound"):
        dgb.train(client, {"objective": "survival:aft"}, plain, 2, verbose_eval=False)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, label_lower_bound=ld, label_upper_bound=ud)
    with pytest.raises(ValueError, match="eval set 'v' needs label_lower_bound"):
        dgb.train(client, {"objective": "survival:aft"}, dtrain, 2,
                  evals=[(dgb.DaskQuantileMatrix(client, Xd, on_workers(client, lower, chunks, placement),
                                                 ref=dtrain), "v")], verbose_eval=False)


def test_the_dask_regressor_trains_cox_and_refuses_aft_saying_why(client):
    """fit(X, y) carries labels only: survival:cox reads them; survival:aft's bounds cannot be
    given there (XGBoost's DaskXGBRegressor fails too), and the error says to use train."""
    X, y = cox_data(seed=8, n=600)
    Xd, yd = (on_workers(client, a, [300, 300], [0, 1]) for a in (X, y))
    reg = daskgb.DaskGBRegressor(objective="survival:cox", n_estimators=5, max_depth=3, device="cpu").fit(Xd, yd)
    local = daskgb.GBRegressor(objective="survival:cox", n_estimators=5, max_depth=3, device="cpu").fit(X, y)
    np.testing.assert_allclose(reg.predict(Xd).compute(), local.predict(X), rtol=1e-6)
    with pytest.raises(ValueError, match="estimator's fit.*cannot give them"):
        daskgb.DaskGBRegressor(objective="survival:aft", n_estimators=2, device="cpu").fit(Xd, np.abs(yd))


@pytest.mark.gpu
def test_survival_on_two_gpu_workers_equals_one_gpu():
    """AFT and Cox on 2 GPU workers (NCCL: Cox's hazard ratios summed on the device, its metric's
    rows gathered there) equal in-process training on one GPU."""
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")

    X, lower, upper = aft_data()
    Xc, y = cox_data()
    aft = {"objective": "survival:aft", "aft_loss_distribution": "logistic", "max_depth": 4, "device": "cuda",
           "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    cox = {"objective": "survival:cox", "max_depth": 4, "device": "cuda"}
    with dask_cuda.LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES="0,1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        placement = [0, 1, 0]
        m = dgb.DaskQuantileMatrix(client, *placed(client, placement, X), label_lower_bound=placed(
            client, placement, lower)[0], label_upper_bound=placed(client, placement, upper)[0])
        mc = dgb.DaskQuantileMatrix(client, *placed(client, [1, 0, 1], Xc, y))
        out_aft = dgb.train(client, aft, m, 8, evals=[(m, "t")], verbose_eval=False)
        out_cox = dgb.train(client, cox, mc, 8, evals=[(mc, "t")], verbose_eval=False)
    assert {s["communicator"] for s in out_cox["collective"]} == {"NcclCommunicator"}
    q = daskgb.QuantileMatrix(cupy.asarray(X), label_lower_bound=cupy.asarray(lower),
                              label_upper_bound=cupy.asarray(upper))
    qc = daskgb.QuantileMatrix(cupy.asarray(Xc), cupy.asarray(y))
    log_aft, log_cox = {}, {}
    local_aft = daskgb.train(aft, q, 8, evals=[(q, "t")], evals_result=log_aft, verbose_eval=False)
    local_cox = daskgb.train(cox, qc, 8, evals=[(qc, "t")], evals_result=log_cox, verbose_eval=False)
    np.testing.assert_allclose(out_aft["booster"].predict(X), local_aft.predict(X), rtol=1e-5)
    for k in aft["eval_metric"]:
        np.testing.assert_allclose(out_aft["history"]["t"][k], log_aft["t"][k], rtol=1e-6, err_msg=k)
    assert out_cox["booster"].base_score == pytest.approx(local_cox.base_score, rel=1e-6)
    np.testing.assert_allclose(out_cox["booster"].predict(Xc), local_cox.predict(Xc), rtol=1e-5)
    np.testing.assert_allclose(out_cox["history"]["t"]["cox-nloglik"], log_cox["t"]["cox-nloglik"], rtol=1e-6)
