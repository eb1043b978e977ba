"""daskgb.dask as a drop-in for xgboost.dask: what its functions take and return, in which order.

xgboost.dask (xgboost-cpu) is the reference for the return types, indexes and row order."""

from __future__ import annotations

import types

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from placement import on_workers  # noqa: E402

PARAMS = {"objective": "reg:squarederror", "max_depth": 4, "eta": 0.3, "base_score": 0.5, "device": "cpu"}


def exact_data(n=1200, seed=0, features=5):
    """Few distinct values a feature: the cuts are exact, so Dask's model equals in-process's."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, features)) * 4) / 4).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n) * 0.2).astype(np.float32)
    return X, y


def trained(client, X, y, rounds=8, params=PARAMS):
    return dgb.train(client, params, dgb.DaskQuantileMatrix(client, X, y), rounds, verbose_eval=False)


# --------------------------------------------------------------------------- 1: row order


def test_predict_on_matrix_keeps_x_row_order(client):
    """Partitions 0 and 2 on one worker, 1 and 3 on the other: the matrix's rows lie in worker
    order (0, 2, 1, 3), its predictions and labels come back in X's."""
    X, y = exact_data()
    chunks, placement = [300, 300, 300, 300], [1, 0, 1, 0]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    m = dgb.DaskQuantileMatrix(client, Xd, yd)
    booster = dgb.train(client, PARAMS, m, 8, verbose_eval=False)["booster"]
    pred = dgb.predict(client, booster, m)
    assert pred.chunks[0] == tuple(chunks)
    np.testing.assert_allclose(pred.compute(), booster.predict(X), atol=1e-6)
    np.testing.assert_array_equal(m.labels().compute(), y)
    # take() numbers rows as X does, and keeps the order it was given.
    idx = np.array([905, 3, 650, 299, 300, 1199, 0, 601])
    sub = m.take(idx)
    np.testing.assert_array_equal(sub.labels().compute(), y[idx])
    np.testing.assert_allclose(dgb.predict(client, booster, sub).compute(), booster.predict(X[idx]), atol=1e-6)


def test_take_of_scattered_rows_keeps_order(client):
    """Many short runs of rows (beyond the slice-per-run limit): the gather keeps the order too."""
    X, y = exact_data(n=12000, seed=4)
    chunks, placement = [3000] * 4, [1, 0, 1, 0]
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    m = dgb.DaskQuantileMatrix(client, Xd, yd)
    idx = np.random.default_rng(0).permutation(12000)[:9000]
    np.testing.assert_array_equal(m.take(idx).labels().compute(), y[idx])


# --------------------------------------------------------------------------- 2: nullable dtypes


def nullable_frame(n=900, seed=1):
    rng = np.random.default_rng(seed)
    a = pd.array(rng.integers(0, 6, n), dtype="Int64")
    a[rng.random(n) < 0.1] = pd.NA
    b = pd.array(np.round(rng.normal(size=n), 1), dtype="Float64")
    b[rng.random(n) < 0.1] = pd.NA
    c = pd.array(rng.random(n) < 0.5, dtype="boolean")
    c[rng.random(n) < 0.1] = pd.NA
    frame = pd.DataFrame({"a": a, "b": b, "c": c})
    y = (rng.normal(size=n) + np.nan_to_num(b.to_numpy(dtype=float, na_value=np.nan))).astype(np.float32)
    return frame, pd.Series(y)


def test_nullable_dtypes_fit_and_predict(client):
    frame, y = nullable_frame()
    Xd, yd = dd.from_pandas(frame, npartitions=3), dd.from_pandas(y, npartitions=3)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    booster = dgb.train(client, PARAMS, dtrain, 8, verbose_eval=False)["booster"]
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(frame, y), 8, verbose_eval=False)
    expected = local.predict(frame)
    np.testing.assert_allclose(booster.predict(frame), expected, atol=1e-5)
    np.testing.assert_allclose(dgb.predict(client, booster, Xd).compute().to_numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(dgb.inplace_predict(client, booster, Xd).compute().to_numpy(), expected, atol=1e-5)
    # A matrix of the frame, with the model's cuts.
    m = dgb.DaskQuantileMatrix(client, Xd, ref=dtrain)
    np.testing.assert_allclose(dgb.predict(client, booster, m).compute(), expected, atol=1e-5)


# --------------------------------------------------------------------------- 3: CSR partitions


def test_csr_partitions(client):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    X, y = exact_data(n=1000, seed=2)
    X[np.random.default_rng(3).random(X.shape) < 0.6] = 0  # absent entries: missing, as in process
    csr = scipy_sparse.csr_matrix(X)
    Xd = da.from_array(X, chunks=(250, -1)).map_blocks(scipy_sparse.csr_matrix, dtype=np.float32)
    yd = da.from_array(y, chunks=250)
    out = trained(client, Xd, yd)
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(csr, y), 8, verbose_eval=False)
    expected = local.predict(csr)
    np.testing.assert_allclose(out["booster"].predict(csr), expected, atol=1e-5)
    pred = dgb.predict(client, out, Xd)
    assert isinstance(pred, da.Array) and pred.chunks[0] == (250,) * 4
    np.testing.assert_allclose(pred.compute(), expected, atol=1e-5)
    np.testing.assert_allclose(dgb.inplace_predict(client, out, Xd).compute(), expected, atol=1e-5)


# --------------------------------------------------------------------------- 4: X and y partitioned apart


def frame_data(n=1000, seed=5):
    X, y = exact_data(n=n, seed=seed, features=3)
    df = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    df["y"] = y
    return df


@pytest.mark.parametrize("divisions", ["known", "unknown"])
def test_y_partitioned_unlike_x_is_aligned(client, divisions):
    df = frame_data()
    X = dd.from_pandas(df.drop(columns="y"), npartitions=4)
    y = dd.from_pandas(df["y"], npartitions=2)
    w = da.from_array(np.linspace(0.5, 2, len(df)).astype(np.float32), chunks=333)  # a third partitioning
    if divisions == "unknown":
        X, y = X.clear_divisions(), y.clear_divisions()
    assert X.npartitions != y.npartitions
    m = dgb.DaskQuantileMatrix(client, X, y, weight=w)
    np.testing.assert_array_equal(m.labels().compute(), df["y"].to_numpy())
    booster = dgb.train(client, PARAMS, m, 8, verbose_eval=False)["booster"]
    local = daskgb.train(PARAMS, daskgb.QuantileMatrix(df.drop(columns="y"), df["y"],
                                                       weight=np.linspace(0.5, 2, len(df))), 8, verbose_eval=False)
    np.testing.assert_allclose(booster.predict(df.drop(columns="y")), local.predict(df.drop(columns="y")), atol=1e-5)


def test_y_of_other_rows_is_a_clear_error(client):
    df = frame_data()
    X = dd.from_pandas(df.drop(columns="y"), npartitions=4).clear_divisions()
    y = dd.from_pandas(df["y"].iloc[:900], npartitions=2).clear_divisions()
    with pytest.raises(ValueError, match="y has 900 rows but X has 1000"):
        dgb.DaskQuantileMatrix(client, X, y)


# --------------------------------------------------------------------------- 5, 6: what predict returns


def test_predict_on_dataframe_returns_series_like_xgboost(client):
    xgb_dask = pytest.importorskip("xgboost.dask")
    import xgboost

    df = frame_data()
    df.index = df.index * 3 + 7  # an index of its own, which the predictions keep
    X, y = dd.from_pandas(df.drop(columns="y"), npartitions=4), dd.from_pandas(df["y"], npartitions=4)
    ours = trained(client, X, y)
    reference = xgb_dask.train(client, {"tree_method": "hist", **PARAMS}, xgb_dask.DaskDMatrix(client, X, y),
                               num_boost_round=8)
    assert isinstance(reference["booster"], xgboost.Booster)
    for predict in ("predict", "inplace_predict"):
        got = getattr(dgb, predict)(client, ours, X)  # 6: train()'s dict, as xgboost.dask takes it
        want = getattr(xgb_dask, predict)(client, reference, X)
        assert type(got) is type(want) is dd.Series, predict
        assert got.divisions == want.divisions == X.divisions
        got, want = got.compute(), want.compute()
        assert got.name == want.name and got.dtype == want.dtype
        pd.testing.assert_index_equal(got.index, df.index)
        np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), atol=1e-5)
    # Arrays stay arrays, of X's chunks.
    arr = X.to_dask_array(lengths=True)
    for predict in (dgb.predict, dgb.inplace_predict):
        pred = predict(client, ours, arr)
        assert isinstance(pred, da.Array) and pred.chunks == (arr.chunks[0],)
        np.testing.assert_allclose(pred.compute(), ours["booster"].predict(df.drop(columns="y")), atol=1e-6)


def test_multiclass_predict_on_dataframe_is_a_dataframe_like_xgboost(client):
    xgb_dask = pytest.importorskip("xgboost.dask")
    df = frame_data()
    df["y"] = np.digitize(df["f0"], [-1, 1]).astype(np.float32)
    X, y = dd.from_pandas(df.drop(columns="y"), npartitions=3), dd.from_pandas(df["y"], npartitions=3)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "device": "cpu"}
    ours = trained(client, X, y, 5, params)
    reference = xgb_dask.train(client, {"tree_method": "hist", **params}, xgb_dask.DaskDMatrix(client, X, y),
                               num_boost_round=5)
    got, want = dgb.predict(client, ours, X), xgb_dask.predict(client, reference, X)
    assert type(got) is type(want) is dd.DataFrame
    assert got.divisions == X.divisions
    got, want = got.compute(), want.compute()
    assert list(got.columns) == list(want.columns) and list(got.dtypes) == list(want.dtypes)
    pd.testing.assert_index_equal(got.index, df.index)
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), atol=1e-4)


def test_inplace_predict_margin_missing_and_base_margin(client):
    X, y = exact_data(n=800, seed=6)
    Xd = da.from_array(X, chunks=(200, -1))
    out = trained(client, Xd, da.from_array(y, chunks=200))
    booster = out["booster"]
    margin = np.linspace(-1, 1, 800).astype(np.float32)
    got = dgb.inplace_predict(client, out, Xd, predict_type="margin", base_margin=da.from_array(margin, chunks=300))
    np.testing.assert_allclose(got.compute(), booster.predict(X, output_margin=True, base_margin=margin), atol=1e-5)
    got = dgb.inplace_predict(client, booster, Xd, missing=0.25)
    np.testing.assert_allclose(got.compute(), booster.predict(X, missing=0.25), atol=1e-6)
    got = dgb.predict(client=client, model=out, data=Xd, missing=0.25, output_margin=True)  # xgboost.dask's keywords
    np.testing.assert_allclose(got.compute(), booster.predict(X, missing=0.25, output_margin=True), atol=1e-6)
    with pytest.raises(ValueError, match="predict_type"):
        dgb.inplace_predict(client, booster, Xd, predict_type="leaf")
    with pytest.raises(ValueError, match="dict train"):
        dgb.predict(client, {"history": {}}, Xd)


# --------------------------------------------------------------------------- 7: the public names


def test_public_names_are_xgboost_dasks():
    public = {n for n in dir(dgb) if not n.startswith("_") and not isinstance(getattr(dgb, n), types.ModuleType)}
    expected = {"DaskQuantileMatrix", "train", "predict", "inplace_predict", "DaskGBRegressor", "DaskGBClassifier",
                "DaskGBRanker", "DaskGBRFRegressor", "DaskGBRFClassifier", "WorkerLostError", "WorkerUnresponsiveError",
                "WorkersBusyError",
                "release_nccl"}
    assert public == expected == set(dgb.__all__)
    xgb_dask = pytest.importorskip("xgboost.dask")
    # xgboost.dask's __all__, name for name (DaskDMatrix and DaskQuantileDMatrix are one matrix
    # here; XGBoost's CommunicatorContext is its collective's, which daskgb sets up itself).
    ours = {"DaskDMatrix": "DaskQuantileMatrix", "DaskQuantileDMatrix": "DaskQuantileMatrix",
            "CommunicatorContext": None}
    for name in xgb_dask.__all__:
        mine = ours.get(name, name.replace("XGB", "GB"))
        assert mine is None or mine in public, name
    # predict and inplace_predict take xgboost.dask's arguments, by the same names.
    import inspect

    for name in ("predict", "inplace_predict"):
        theirs = list(inspect.signature(getattr(xgb_dask, name)).parameters)
        assert set(theirs) <= set(inspect.signature(getattr(dgb, name)).parameters), name


# --------------------------------------------------------------------------- the same on a GPU


@pytest.mark.gpu
def test_gpu_matrix_order_csr_partitions_and_cupy_blocks():
    """device="cuda" on a dask-cuda worker (one per GPU: two workers sharing a GPU cannot join
    one NCCL communicator): CSR partitions quantised on the GPU, the matrix's predictions in X's
    order, and cupy blocks predicted into a cupy-backed array of X's chunks."""
    cupy = pytest.importorskip("cupy")
    dask_cuda = pytest.importorskip("dask_cuda")
    scipy_sparse = pytest.importorskip("scipy.sparse")
    X, y = exact_data(n=1000, seed=2)
    X[np.random.default_rng(3).random(X.shape) < 0.6] = 0
    params = {**PARAMS, "device": "cuda"}
    csr = scipy_sparse.csr_matrix(X)
    local = daskgb.train(params, daskgb.QuantileMatrix(csr, y, device="cuda"), 8, verbose_eval=False)
    expected = local.predict(csr)
    with dask_cuda.LocalCUDACluster(n_workers=1, CUDA_VISIBLE_DEVICES="0", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        # Partitions out of X's order: the matrix's predictions still come in X's order.
        chunks = [250] * 4
        Xd = da.from_array(X, chunks=(250, -1)).map_blocks(scipy_sparse.csr_matrix, dtype=np.float32)
        Xd = da.concatenate([Xd.blocks[i] for i in (2, 0, 3, 1)])
        yd = da.concatenate([da.from_array(y, chunks=chunks).blocks[i] for i in (2, 0, 3, 1)])
        order = np.concatenate([np.arange(250 * i, 250 * (i + 1)) for i in (2, 0, 3, 1)])
        m = dgb.DaskQuantileMatrix(client, Xd, yd, device="cuda")
        booster = dgb.train(client, params, m, 8, verbose_eval=False)["booster"]
        np.testing.assert_allclose(booster.predict(csr), expected, atol=1e-5)
        np.testing.assert_allclose(cupy.asnumpy(dgb.predict(client, booster, m).compute()), expected[order],
                                   atol=1e-5)
        # Dense blocks: their zeros are values, not missing as a CSR matrix's absent entries are.
        blocks = da.from_array(X, chunks=(250, -1)).map_blocks(cupy.asarray, dtype=np.float32)
        pred = dgb.inplace_predict(client, booster, blocks)
        assert pred.chunks[0] == (250,) * 4 and type(pred._meta).__module__.startswith("cupy")
        np.testing.assert_allclose(cupy.asnumpy(pred.compute()), booster.predict(X), atol=1e-5)


def test_strict_shape_as_xgboost_dask(client):
    """strict_shape=True in daskgb.dask.predict / inplace_predict: Booster.predict's strict shapes,
    which are XGBoost's, block by block."""
    X, y = exact_data(n=300)
    Xd, yd = da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)
    booster = trained(client, Xd, yd, rounds=3, params={**PARAMS, "num_parallel_tree": 2})["booster"]
    for kw in ({}, {"pred_leaf": True}, {"pred_contribs": True}, {"pred_interactions": True}):
        got = dgb.predict(client, booster, Xd, strict_shape=True, **kw).compute()
        want = booster.predict(X, strict_shape=True, **kw)
        assert got.shape == want.shape and want.shape[1] == 1 + (kw == {"pred_leaf": True}) * 2, kw
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert dgb.inplace_predict(client, booster, Xd, strict_shape=True).compute().shape == (300, 1)
    # A matrix with cuts of its own is predicted from its collections, as XGBoost predicts a DaskDMatrix.
    own = dgb.DaskQuantileMatrix(client, Xd, yd)
    got = dgb.predict(client, booster, own, strict_shape=True).compute()
    assert got.shape == (300, 1)
    np.testing.assert_allclose(got[:, 0], booster.predict(X), atol=1e-6)
    np.testing.assert_allclose(dgb.predict(client, booster, own, pred_contribs=True).compute(),
                               booster.predict(X, pred_contribs=True), atol=1e-5)
    frame = dd.from_pandas(pd.DataFrame(X, columns=[f"f{i}" for i in range(5)]), npartitions=2)
    out = dgb.inplace_predict(client, booster, frame, strict_shape=True).compute()
    assert isinstance(out, pd.DataFrame) and out.shape == (300, 1)


def test_estimator_base_margins_and_a_future_model_as_xgboost_dask(client):
    """DaskGB*.fit(base_margin=, base_margin_eval_set=) as xgboost.dask's estimators take them (the
    model equals in-process's), and predict of a scattered booster (a future), as xgboost.dask's."""
    X, y = exact_data(n=400)
    margin = np.random.default_rng(1).normal(size=400).astype(np.float32)
    Xd, yd, md = (da.from_array(v, chunks=200) if v.ndim == 1 else da.from_array(v, chunks=(200, 5))
                  for v in (X, y, margin))
    kw = dict(n_estimators=3, max_depth=3, device="cpu")
    ours = daskgb.DaskGBRegressor(client=client, **kw).fit(Xd, yd, base_margin=md, eval_set=[(Xd, yd)],
                                                           base_margin_eval_set=[md], verbose=False)
    local = daskgb.GBRegressor(**kw).fit(X, y, base_margin=margin, eval_set=[(X, y)], base_margin_eval_set=[margin],
                                         verbose=False)
    np.testing.assert_allclose(ours.predict(X), local.predict(X), atol=1e-5)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["rmse"],
                               local.evals_result()["validation_0"]["rmse"], rtol=1e-6)
    np.testing.assert_allclose(ours.predict(Xd, base_margin=md).compute(), local.predict(X, base_margin=margin),
                               atol=1e-5)
    clf = daskgb.DaskGBClassifier(client=client, **kw).fit(Xd, (yd > 0).astype(np.int64), base_margin=md)
    local_clf = daskgb.GBClassifier(**kw).fit(X, (y > 0).astype(np.int64), base_margin=margin)
    np.testing.assert_allclose(clf.predict_proba(Xd, base_margin=md).compute(),
                               local_clf.predict_proba(X, base_margin=margin), atol=1e-5)
    future = client.scatter(ours.get_booster())
    np.testing.assert_allclose(dgb.predict(client, future, Xd).compute(), local.predict(X), atol=1e-5)


def test_a_dataframe_matrix_with_margins_and_leaf_ids_of_counted_shape(client):
    """predict of a DaskQuantileMatrix built from a dataframe with base margins equals
    inplace_predict's (xgboost.dask's test_inplace_predict); apply of a dataframe gives leaf ids
    of known chunk sizes, which reshape (as XGBoost's, made through a DaskDMatrix)."""
    X, y = exact_data(n=300)
    frame = dd.from_pandas(pd.DataFrame(X, columns=[f"f{i}" for i in range(5)]), npartitions=3)
    ys = dd.from_pandas(pd.Series(y), npartitions=3)
    reg = daskgb.DaskGBRegressor(client=client, n_estimators=3, num_parallel_tree=2, device="cpu").fit(frame, ys)
    booster = reg.get_booster()
    inplace = dgb.inplace_predict(client, booster, frame, base_margin=ys).compute()
    copied = dgb.predict(client, booster, dgb.DaskQuantileMatrix(client, frame, base_margin=ys)).compute()
    np.testing.assert_allclose(np.asarray(inplace), np.asarray(copied), atol=1e-6)
    np.testing.assert_allclose(copied, booster.predict(X, base_margin=y), atol=1e-5)
    # A model's margins (a dask array of unknown chunk sizes) as the next model's base margins, by position.
    margin = reg.predict(frame, output_margin=True)
    np.testing.assert_allclose(reg.predict(frame, base_margin=margin).compute(),
                               booster.predict(X, base_margin=booster.predict(X, output_margin=True)), atol=1e-5)
    leaf = reg.apply(frame)
    assert not any(np.isnan(c) for c in leaf.chunks[0])
    np.testing.assert_array_equal(leaf.reshape((300, 3, 1, 2)).compute(),
                                  booster.predict(X, pred_leaf=True, strict_shape=True))


def test_the_workers_threads_are_the_models_nthread_as_xgboost_dask(client):
    """xgboost.dask trains with each worker's thread count and the model's config says so;
    an nthread given is kept."""
    import json

    X, y = exact_data(n=200)
    Xd, yd = da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)
    threads = next(iter(client.scheduler_info()["workers"].values()))["nthreads"]
    booster = trained(client, Xd, yd, rounds=1)["booster"]
    assert int(json.loads(booster.save_config())["learner"]["generic_param"]["nthread"]) == threads
    booster = trained(client, Xd, yd, rounds=1, params={**PARAMS, "nthread": 3})["booster"]
    assert int(json.loads(booster.save_config())["learner"]["generic_param"]["nthread"]) == 3
    local = daskgb.train({"device": "cpu"}, daskgb.QuantileMatrix(X, y), 1, verbose_eval=False)
    assert json.loads(local.save_config())["learner"]["generic_param"]["nthread"] == "0"  # in process: unset


def test_fit_builds_one_matrix_for_its_own_training_data_as_xgboost_dask(client):
    """xgboost.testing's own check with daskgb's classes: the Dask estimators build their matrices
    by keyword, and an eval_set entry of the training objects reuses the training matrix."""
    from xgboost.testing.shared import validate_data_initialization

    X, y = exact_data(n=200)
    Xd = dd.from_pandas(pd.DataFrame(X, columns=[f"f{i}" for i in range(5)]), npartitions=2)
    yd = dd.from_pandas(pd.Series((y > 0).astype(np.int64)), npartitions=2)
    init = dgb.DaskQuantileMatrix.__init__
    try:
        validate_data_initialization(dgb.DaskQuantileMatrix, daskgb.DaskGBClassifier, Xd, yd)
    finally:
        dgb.DaskQuantileMatrix.__init__ = init


def test_gblinear_on_dask_is_not_implemented_as_xgboost_dask_says(client):
    """xgboost.dask raises NotImplementedError naming gblinear; daskgb's refusal is one (and still
    a ValueError, as its other parameter errors)."""
    X, y = exact_data(n=100)
    dtrain = dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=(50, 5)), da.from_array(y, chunks=50))
    for booster in ("gblinear", "dart"):
        with pytest.raises(NotImplementedError, match=booster):
            dgb.train(client, {"booster": booster}, dtrain, 1)
        with pytest.raises(ValueError, match=booster):
            dgb.train(client, {"booster": booster}, dtrain, 1)
    with pytest.raises(ValueError, match="booster must be 'gbtree'"):
        dgb.train(client, {"booster": "gbtre"}, dtrain, 1)


def test_the_parameters_max_bin_bins_a_dask_matrix_again(client):
    """dgb.train({"max_bin": 8}, DaskQuantileMatrix(client, X, y)): sketched again from its
    collections with 8 bins (as XGBoost bins a DaskDMatrix with the parameters' max_bin): the
    model of a matrix built with max_bin=8; a matrix keeping no collections is refused."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 4)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=600) > 0).astype(np.float32)
    Xd, yd = da.from_array(X, chunks=(300, 4)), da.from_array(y, chunks=300)
    params = {**PARAMS, "objective": "binary:logistic", "max_bin": 8}
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
    out = dgb.train(client, params, dtrain, 3, evals=[(dtrain, "t")], verbose_eval=False)
    direct = dgb.train(client, params, dgb.DaskQuantileMatrix(client, Xd, yd, max_bin=8), 3, evals=[(dtrain, "t")],
                       verbose_eval=False)
    np.testing.assert_array_equal(out["booster"].predict(X), direct["booster"].predict(X))
    assert out["history"] == direct["history"] and dtrain.max_bin == 256
    with pytest.raises(ValueError, match="params max_bin=8 differs from the DaskQuantileMatrix's max_bin=256"):
        dgb.train(client, params, dtrain.take(np.arange(300)), 1, verbose_eval=False)


def test_a_matrix_of_another_fits_cuts_is_predicted_from_its_collections(client):
    """A DaskQuantileMatrix built with ref= another fit's matrix (an eval set) is predicted by a
    model of other cuts from the collections it was built from, as XGBoost predicts any DaskDMatrix."""
    X, y = exact_data(n=300)
    Xd, yd = da.from_array(X, chunks=(150, 5)), da.from_array(y, chunks=150)
    first = dgb.DaskQuantileMatrix(client, Xd, yd)
    valid = dgb.DaskQuantileMatrix(client, Xd, yd, ref=first)
    other = trained(client, Xd, yd, rounds=2)["booster"]  # its own matrix, other cuts
    np.testing.assert_allclose(dgb.predict(client, other, valid).compute(), other.predict(X), atol=1e-6)
