"""Distributed training on a LocalCluster of 2 worker processes equals in-process training."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb
from daskgb.dask.watch import live_workers
from daskgb.metric import auc_of

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from placement import on_workers  # noqa: E402


async def _die():
    import os

    os._exit(1)


def exact_data(n=2000, seed=0, nan_rows=None):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 6)) * 4) / 4).astype(np.float32)
    X[:, 2] = rng.integers(0, 5, n)
    if nan_rows is not None:
        X[nan_rows, 3] = np.nan  # missing in some partitions only
    y = (X[:, 0] - X[:, 2] * 0.3 + np.nan_to_num(X[:, 3]) + rng.normal(size=n) > 0).astype(np.float32)
    return X, y


PARAMS = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.3, "base_score": 0.5, "device": "cpu"}
UNEVEN = [50, 731, 7, 412, 800]


@pytest.mark.parametrize("placement", [[0, 1, 0, 1, 1], [0, 0, 0, 0, 0]], ids=["both-workers", "one-holds-none"])
def test_exact_cuts_model_equals_in_process(client, placement):
    X, y = exact_data(nan_rows=slice(781, 1200))
    Xd = on_workers(client, X, UNEVEN, placement)
    yd = on_workers(client, y, UNEVEN, placement)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    assert dtrain.n_rows == X.shape[0]
    assert len(dtrain.workers) == len(set(placement))
    out = dgb.train(client, PARAMS, dtrain, 15, evals=[(dtrain, "train")], verbose_eval=False)
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 15, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)
    assert len(out["history"]["train"]["logloss"]) == 15
    pred = dgb.predict(client, out["booster"], Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), local.predict(X), atol=1e-5)
    # The result names the path the workers' rounds took (an eval set: no queued rounds).
    assert out["training_path"] == out["booster"].attr("training_path") == "host-levels"
    assert "device-levels: the CPU backend trains" in out["booster"].attr("training_path_refused")


def test_empty_partitions_and_weights(client):
    X, y = exact_data(seed=3)
    w = np.random.default_rng(1).uniform(0.5, 2, y.size).astype(np.float32)
    chunks = [0, 1000, 0, 1000]
    Xd = on_workers(client, X, chunks, [0, 1, 1, 0])
    yd = on_workers(client, y, chunks, [0, 1, 1, 0])
    wd = on_workers(client, w, chunks, [0, 1, 1, 0])
    out = dgb.train(client, PARAMS, dgb.DaskQuantileMatrix(client, Xd, yd, weight=wd), 10, verbose_eval=False)
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y, weight=w), 10, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)


def test_inexact_cuts_auc_close_to_in_process(client):
    rng = np.random.default_rng(7)
    n = 6000
    X = rng.normal(size=(n, 8)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + rng.normal(size=n) * 0.5 > 0).astype(np.float32)
    # 20,000 held-out rows: on 3,000, AUCs of sketches of equal quality (cuts from per-partition
    # summaries, per-worker ones, in process) moved by up to 0.0036; on 20,000, by at most 0.0023
    # over 8 seeds, 0.001 on average, either way.
    Xt = rng.normal(size=(20000, 8)).astype(np.float32)
    yt = (Xt[:, 0] * Xt[:, 1] + np.sin(3 * Xt[:, 2]) + rng.normal(size=20000) * 0.5 > 0).astype(np.float32)
    params = {**PARAMS, "max_bin": 32, "max_depth": 6}
    chunks, placement = [2500, 500, 3000], [0, 1, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement), max_bin=32)
    out = dgb.train(client, params, dtrain, 30, verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y, max_bin=32), 30, verbose_eval=False)
    a_dist = auc_of(yt, out["booster"].predict(Xt))
    a_local = auc_of(yt, local.predict(Xt))
    assert abs(a_dist - a_local) <= 0.002, (a_dist, a_local)


def test_eval_set_on_a_worker_without_training_rows(client):
    X, y = exact_data(seed=5)
    Xv, yv = exact_data(n=600, seed=6)
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, [2000], [0]), on_workers(client, y, [2000], [0]))
    dvalid = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [600], [1]), on_workers(client, yv, [600], [1]),
                                    ref=dtrain)
    out = dgb.train(client, {**PARAMS, "eval_metric": ["logloss", "auc"]}, dtrain, 8,
                    evals=[(dvalid, "valid")], verbose_eval=False)
    b = out["booster"]
    assert out["history"]["valid"]["auc"][-1] == pytest.approx(auc_of(yv, b.predict(Xv)), abs=1e-9)


def test_an_eval_set_without_ref_is_binned_with_the_training_cuts(client):
    """As XGBoost bins a DaskDMatrix eval set: built without ref=, it has cuts of its own, and
    train bins it again from its collections with the training cuts on the training workers."""
    xgb = pytest.importorskip("xgboost")
    X, y = exact_data(seed=5)
    Xv, yv = exact_data(n=600, seed=6)
    Xv[:, 1] += 0.125  # values the training rows lack: the eval set's own cuts differ from the training's
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, [1000, 1000], [0, 1]),
                                    on_workers(client, y, [1000, 1000], [0, 1]))
    own = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [600], [1]), on_workers(client, yv, [600], [1]))
    assert not own.shares_cuts_with(dtrain)
    params = {**PARAMS, "eval_metric": ["logloss", "auc"]}
    got = dgb.train(client, params, dtrain, 8, evals=[(own, "valid")], verbose_eval=False)["history"]
    with_ref = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [600], [1]), on_workers(client, yv, [600], [1]),
                                      ref=dtrain)
    want = dgb.train(client, params, dtrain, 8, evals=[(with_ref, "valid")], verbose_eval=False)["history"]
    assert got == want
    theirs = {}
    xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), 8, evals=[(xgb.DMatrix(Xv, yv), "valid")],
              evals_result=theirs, verbose_eval=False)
    for metric in ("logloss", "auc"):
        np.testing.assert_allclose(got["valid"][metric], theirs["valid"][metric], rtol=1e-5, atol=1e-6)
    assert not own.shares_cuts_with(dtrain)  # the user's matrix is left as it was, and trains as itself
    dgb.train(client, params, own, 1, evals=[(own, "own")], verbose_eval=False)


def test_bad_input_fails_early(client):
    X, y = exact_data(n=200)
    with pytest.raises(ValueError, match="no rows"):
        dgb.DaskQuantileMatrix(client, da.zeros((0, 3), chunks=(10, 3)), da.zeros(0, chunks=10))
    y_nan = y.copy()
    y_nan[5] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=100), da.from_array(y_nan, chunks=100))
    # y partitioned otherwise is rechunked to X's partitions (test_xgboost_dask_api.py); y of other rows is an error.
    with pytest.raises(ValueError, match="y has 150 rows but X has 200"):
        dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=100), da.from_array(y[:150], chunks=50))
    with pytest.raises(ValueError, match="dask array or a dask dataframe"):
        dgb.DaskQuantileMatrix(client, X, y)


def test_dataframe_partitions(client):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = exact_data(n=1200, seed=9)
    df = dd.from_pandas(pd.DataFrame(X, columns=[f"c{i}" for i in range(6)]), npartitions=3)
    ys = dd.from_pandas(pd.Series(y), npartitions=3)
    dtrain = dgb.DaskQuantileMatrix(client, df, ys)
    assert dtrain.feature_names == [f"c{i}" for i in range(6)]
    out = dgb.train(client, PARAMS, dtrain, 5, verbose_eval=False)
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 5, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)
    assert out["booster"].feature_names == [f"c{i}" for i in range(6)]


def test_worker_death_is_an_error_within_60s():
    X, y = exact_data(n=4000, seed=11)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            Xd = on_workers(cl, X, [2000, 2000], [0, 1])
            yd = on_workers(cl, y, [2000, 2000], [0, 1])
            dtrain = dgb.DaskQuantileMatrix(cl, Xd, yd)
            victim = dtrain.workers[1]
            killed_at = []

            def kill():
                time.sleep(3.0)
                killed_at.append(time.monotonic())
                cl.run(_die, workers=[victim], wait=False)

            threading.Thread(target=kill, daemon=True).start()
            with pytest.raises(Exception) as info:
                dgb.train(cl, {**PARAMS, "max_depth": 3}, dtrain, 100_000, verbose_eval=False)
            assert killed_at, "training finished before the worker was killed"
            elapsed = time.monotonic() - killed_at[0]
            assert elapsed < 60, f"the error took {elapsed:.1f} s"
            assert "rank" in str(info.value) or "left the cluster" in str(info.value), str(info.value)


def test_eval_rows_on_only_one_of_the_training_workers(client):
    X, y = exact_data(seed=12)
    Xv, yv = exact_data(n=500, seed=13)
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, [1000, 1000], [0, 1]),
                                    on_workers(client, y, [1000, 1000], [0, 1]))
    dvalid = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [500], [0]), on_workers(client, yv, [500], [0]),
                                    ref=dtrain)
    assert len(dtrain.workers) == 2
    out = dgb.train(client, {**PARAMS, "eval_metric": "error"}, dtrain, 6, evals=[(dvalid, "v")], verbose_eval=False)
    wrong = ((out["booster"].predict(Xv) > 0.5) != yv).mean()
    assert out["history"]["v"]["error"][-1] == pytest.approx(wrong, abs=1e-12)


def _sleep(seconds):
    time.sleep(seconds)
    return seconds


def test_waiting_on_a_pinned_task_whose_worker_dies_raises_promptly():
    from daskgb.dask.watch import gather_watching

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            a, b = sorted(live_workers(cl))
            futs = [cl.submit(_sleep, 0.1, workers=[a], allow_other_workers=False, pure=False),
                    cl.submit(_sleep, 120, workers=[b], allow_other_workers=False, pure=False)]
            time.sleep(1.0)
            killed = time.monotonic()
            cl.run(_die, workers=[b], wait=False)
            with pytest.raises(RuntimeError, match="rank 1"):
                gather_watching(cl, futs, [a, b], "quantisation")
            assert time.monotonic() - killed < 30


def _fail_after(seconds, exc):
    time.sleep(seconds)
    raise exc


def test_the_failing_ranks_own_error_is_raised_when_it_lands_during_on_error(client):
    """Rank 0 only reports its peer's failure (a RuntimeError); rank 1's own ValueError lands
    while on_error is still asking the workers. It is the one raised: a CI run once raised the
    report, because the peer was then neither pending nor looked at as erred."""
    from daskgb.dask import watch

    # The wait wakes as rank 0's future has failed, before rank 1 fails (0.5 s); on_error outlasts it.
    a, b = sorted(live_workers(client))
    futs = [client.submit(_fail_after, 0.0, RuntimeError("allreduce #1: rank 1 failed: ValueError: bad"),
                          workers=[a], allow_other_workers=False, pure=False),
            client.submit(_fail_after, 0.5, ValueError("bad labels"), workers=[b], allow_other_workers=False,
                          pure=False)]
    distributed.wait(futs[0])
    with pytest.raises(ValueError, match="bad labels"):
        watch.gather_watching(client, futs, [a, b], "training", on_error=lambda e: time.sleep(1.5))


@pytest.mark.parametrize("objective", ["count:poisson", "reg:gamma", "reg:tweedie", "reg:pseudohubererror"])
def test_regression_objectives_equal_in_process(client, objective):
    rng = np.random.default_rng(21)
    X, _ = exact_data(n=1500, seed=21)
    mu = np.exp(0.4 * np.nan_to_num(X[:, 0]))
    y = (rng.gamma(2.0, mu / 2.0) + 1e-3 if objective != "reg:pseudohubererror" else X[:, 0] + rng.normal(size=1500))
    y = y.astype(np.float32)
    params = {"objective": objective, "max_depth": 4, "device": "cpu"}
    chunks, placement = [700, 800], [0, 1]
    out = dgb.train(client, params, dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                                           on_workers(client, y, chunks, placement)), 8,
                    verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
    assert out["booster"].base_score == pytest.approx(local.base_score, rel=1e-6)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), rtol=1e-5, atol=1e-5)


def _sq_obj(predt, dtrain):
    y = dtrain.get_label()
    return predt - y, np.ones_like(predt)


def _max_abs_err(predt, dmatrix):
    return "max-abs", float(np.max(np.abs(predt - dmatrix.get_label())))


def test_custom_objective_and_metric_on_dask(client):
    X, y = exact_data(n=1400, seed=31)
    chunks, placement = [600, 800], [0, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    out = dgb.train(client, {"max_depth": 4, "device": "cpu"}, dtrain, 6, evals=[(dtrain, "t")],
                    verbose_eval=False, obj=_sq_obj, custom_metric=_max_abs_err)
    m = daskgb.QuantileMatrix(X, y)
    res = {}
    local = daskgb.train({"max_depth": 4, "device": "cpu"}, m, 6, evals=[(m, "t")], evals_result=res,
                         verbose_eval=False, obj=_sq_obj, custom_metric=_max_abs_err)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)
    # the metric saw every worker's rows: it equals the in-process value
    np.testing.assert_allclose(out["history"]["t"]["max-abs"], res["t"]["max-abs"], rtol=1e-6)


def test_early_stopping_on_dask_stops_with_in_process(client):
    X, y = exact_data(n=1600, seed=41)
    Xv, yv = exact_data(n=500, seed=42)
    chunks, placement = [800, 800], [0, 1]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    dvalid = dgb.DaskQuantileMatrix(client, on_workers(client, Xv, [500], [1]), on_workers(client, yv, [500], [1]),
                                    ref=dtrain)
    params = {**PARAMS, "max_depth": 6, "eta": 0.6}
    out = dgb.train(client, params, dtrain, 200, evals=[(dvalid, "v")], verbose_eval=False, early_stopping_rounds=4)
    m = daskgb.QuantileMatrix(X, y)
    local = daskgb.train(params, m, 200, evals=[(daskgb.QuantileMatrix(Xv, yv, ref=m), "v")], verbose_eval=False,
                         early_stopping_rounds=4)
    assert out["booster"].best_iteration == local.best_iteration
    assert out["booster"].num_boosted_rounds() == local.num_boosted_rounds() < 200


TREE_GROWTH = [
    {"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 10},
    {"max_leaves": 9, "colsample_bytree": 0.8, "colsample_bylevel": 0.7, "colsample_bynode": 0.6, "seed": 5},
    {"grow_policy": "lossguide", "max_leaves": 16, "interaction_constraints": [[0, 1], [1, 2, 3]],
     "colsample_bynode": 0.8},
    {"monotone_constraints": (1, 0, -1), "max_delta_step": 0.5, "grow_policy": "lossguide", "max_leaves": 12},
]


@pytest.mark.parametrize("growth", range(len(TREE_GROWTH)), ids=["lossguide", "colsample", "interaction", "monotone"])
def test_tree_growth_options_equal_in_process(client, growth):
    X, y = exact_data(n=1600, seed=51, nan_rows=slice(300, 900))
    chunks, placement = [500, 300, 800], [0, 1, 0]
    dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                    on_workers(client, y, chunks, placement))
    params = {**PARAMS, **TREE_GROWTH[growth]}
    out = dgb.train(client, params, dtrain, 8, verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y), 8, verbose_eval=False)
    assert [t.to_dict() for t in out["booster"].trees] == [t.to_dict() for t in local.trees]
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-6)


def test_dask_estimator_and_named_interaction_constraints(client):
    X, y = exact_data(n=1200, seed=52)
    chunks, placement = [700, 500], [0, 1]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    kwargs = dict(n_estimators=5, grow_policy="lossguide", max_leaves=8, interaction_constraints=[[0, 2], [2, 3, 4]],
                  colsample_bynode=0.9, device="cpu")
    clf = daskgb.DaskGBClassifier(client=client, **kwargs).fit(Xd, yd)
    local = daskgb.GBClassifier(**kwargs).fit(X, y)
    assert [t.to_dict() for t in clf.get_booster().trees] == [t.to_dict() for t in local.get_booster().trees]
    # Names resolve against the matrix's feature names, checked on the client before training starts.
    names = [f"c{i}" for i in range(6)]
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd, feature_names=names)
    named = {**PARAMS, "interaction_constraints": [["c0", "c2"], ["c2", "c3", "c4"]]}
    out = dgb.train(client, named, dtrain, 5, verbose_eval=False)
    by_index = daskgb.train({**PARAMS, "interaction_constraints": [[0, 2], [2, 3, 4]]}, daskgb.QuantileMatrix(X, y), 5,
                            verbose_eval=False)
    assert [t.to_dict() for t in out["booster"].trees] == [t.to_dict() for t in by_index.trees]
    with pytest.raises(ValueError, match="'c9', which the data does not have"):
        dgb.train(client, {**PARAMS, "interaction_constraints": [["c0", "c9"]]}, dtrain, 1)


def test_an_xgboost_model_predicts_on_dask(client, tmp_path):
    """A model trained by XGBoost, read from its JSON format, predicts on the cluster what
    XGBoost predicts."""
    xgb = pytest.importorskip("xgboost")
    import dask.array as da

    rng = np.random.default_rng(8)
    X = rng.normal(size=(900, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.integers(0, 3, 900).astype(np.float32)
    xb = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "tree_method": "hist"},
                   xgb.DMatrix(X, y), 8)
    xb.save_model(str(tmp_path / "xgb.json"))
    booster = daskgb.Booster().load_model(tmp_path / "xgb.json")
    got = dgb.predict(client, booster, da.from_array(X, chunks=300)).compute()
    np.testing.assert_allclose(got, xb.predict(xgb.DMatrix(X)), rtol=1e-5, atol=1e-6)


def test_predicting_again_sends_the_model_once_until_it_changes(client):
    """The booster is scattered to the workers once and reused while it is unchanged; a model
    with other trees is sent again, and predicts with its own trees."""
    import dask.array as da

    from daskgb.dask.prediction import _SCATTERED

    X, y = exact_data()
    booster = daskgb.train({"max_depth": 3, "objective": "binary:logistic"}, daskgb.QuantileMatrix(X, y), 6,
                           verbose_eval=False)
    Xd = da.from_array(X, chunks=500)
    first = dgb.predict(client, booster, Xd).compute()
    sent = _SCATTERED[booster][1]
    np.testing.assert_array_equal(dgb.predict(client, booster, Xd).compute(), first)
    assert _SCATTERED[booster][1] is sent
    np.testing.assert_allclose(first, booster.predict(X), rtol=1e-6)
    booster.keep_rounds(2)
    fewer = dgb.predict(client, booster, Xd).compute()
    assert _SCATTERED[booster][1] is not sent
    np.testing.assert_allclose(fewer, booster.predict(X), rtol=1e-6)
    assert not np.allclose(fewer, first)


def test_progress_and_the_eval_log_reach_the_client(client, capsys):
    """verbose_eval shows a progress bar and the eval lines on the client, at its cadence,
    the last round's included; verbose_eval=False shows nothing."""
    X, y = exact_data()
    Xd, yd = on_workers(client, X, UNEVEN, [0, 1, 0, 1, 0]), on_workers(client, y, UNEVEN, [0, 1, 0, 1, 0])
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    out = dgb.train(client, PARAMS, dtrain, 7, evals=[(dtrain, "train")], verbose_eval=3)
    err = capsys.readouterr().err
    history = out["history"]["train"]["logloss"]
    for r in (0, 3, 6):  # every third round, and the last
        assert f"[{r}]\ttrain-logloss:{history[r]:.5f}" in err
    for r in (1, 2, 4, 5):
        assert f"[{r}]\t" not in err
    assert "7/7" in err  # the bar reached the end
    dgb.train(client, PARAMS, dtrain, 3, evals=[(dtrain, "train")], verbose_eval=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_early_stopping_message_reaches_the_client(client, capsys):
    X, y = exact_data()
    Xd, yd = on_workers(client, X, UNEVEN, [0, 1, 0, 1, 0]), on_workers(client, y, UNEVEN, [0, 1, 0, 1, 0])
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    Xv, yv = exact_data(600, seed=1)
    dvalid = dgb.DaskQuantileMatrix(client, da.from_array(Xv, chunks=300), da.from_array(yv, chunks=300), ref=dtrain)
    out = dgb.train(client, {**PARAMS, "eta": 1.0}, dtrain, 300, evals=[(dvalid, "valid")], early_stopping_rounds=2)
    booster = out["booster"]
    assert booster.num_boosted_rounds() < 300
    best = out["history"]["valid"]["logloss"][booster.best_iteration]
    assert f"Stopping. Best iteration: [{booster.best_iteration}] valid-logloss:{best:.5f}" in capsys.readouterr().err


def test_live_workers_does_not_read_the_clients_cached_identity(client):
    """The client's periodic refresh caches an identity without workers (distributed's
    _update_scheduler_info with its default n_workers=0); a read of that cache once made a
    healthy cluster look empty. live_workers asks the scheduler."""
    client.sync(client._update_scheduler_info)  # what the periodic refresh does
    assert client._scheduler_identity["workers"] == {}
    assert live_workers(client) == set(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.workers)))
    assert len(live_workers(client)) == 2
