"""Categorical features on two Dask workers: the categories are the union over the partitions,
the same codes on every worker, and the model is the one process's."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
xgb = pytest.importorskip("xgboost")

from placement import on_workers  # noqa: E402


def _frame(seed: int, n: int, letters: str):
    """A frame whose category columns hold only some of the categories (its own dtype lists
    only those present): partitions built apart disagree on their categories and codes."""
    rng = np.random.default_rng(seed)
    small = rng.choice(list(letters[:3]), n)
    big = rng.choice([f"{letters}{i}" for i in range(40)], n).astype(object)
    big[rng.random(n) < 0.1] = None
    x = rng.integers(0, 20, n).astype(np.float32)
    return pd.DataFrame({"small": pd.Categorical(small), "big": pd.Categorical(big), "x": x})


def _target(frame, seed):
    rng = np.random.default_rng(seed)
    effect = {c: rng.normal() for c in frame["big"].cat.categories}
    y = frame["big"].astype(object).map(effect).fillna(0.0).to_numpy(dtype=float)
    return (y + 0.1 * frame["x"].to_numpy() + (frame["small"].astype(object) == "a") + rng.normal(size=len(y)) * 0.2
            ).astype(np.float32)


def test_partitions_with_different_categories_train_on_their_union(client):
    parts = [_frame(1, 300, "abc"), _frame(2, 300, "bcd"), _frame(3, 200, "cde")]
    whole = pd.concat([p.astype({"small": object, "big": object}) for p in parts], ignore_index=True)
    y = np.concatenate([_target(p, 7) for p in parts])
    X = dd.concat([dd.from_pandas(p, npartitions=1) for p in parts])
    dy = dd.concat([dd.from_pandas(pd.Series(y[a:b]), npartitions=1) for a, b in ((0, 300), (300, 600), (600, 800))])
    with pytest.raises(ValueError, match="enable_categorical=True"):
        dgb.DaskQuantileMatrix(client, X, dy, device="cpu")
    dm = dgb.DaskQuantileMatrix(client, X, dy, enable_categorical=True, device="cpu")
    assert dm.feature_types == ["c", "c", "q"]
    union = dm.categories
    assert set(union[1]) == set(whole["big"].dropna())
    params = {"max_depth": 4, "device": "cpu", "max_cat_to_onehot": 4}
    out = dgb.train(client, params, dm, 6, evals=[(dm, "train")])
    ours = out["booster"]
    # In one process, on the same rows with the union's categories in the union's order.
    local = whole.copy()
    for i, name in enumerate(["small", "big"]):
        local[name] = pd.Categorical(local[name], categories=union[i])
    single = daskgb.train(params, daskgb.QuantileMatrix(local, y, enable_categorical=True, device="cpu"), 6,
                          verbose_eval=False)
    assert any(t.categories for t in ours.trees)
    for a, b in zip(ours.trees, single.trees):
        np.testing.assert_array_equal(a.feature, b.feature)
        assert {k: v.tolist() for k, v in a.categories.items()} == {k: v.tolist() for k, v in b.categories.items()}
    np.testing.assert_allclose(ours.predict(local), single.predict(local), atol=1e-6)
    # And XGBoost's model on the same codes.
    codes = np.stack([local[c].cat.codes.to_numpy().astype(np.float32) for c in ("small", "big")] +
                     [local["x"].to_numpy()], axis=1)
    codes[codes < 0] = np.nan
    dx = xgb.DMatrix(codes, y, feature_types=["c", "c", "q"], enable_categorical=True)
    bx = xgb.train({"tree_method": "hist", "max_depth": 4, "nthread": 1, "max_cat_to_onehot": 4}, dx, 6)
    np.testing.assert_allclose(ours.predict(codes, output_margin=True), bx.predict(dx, output_margin=True),
                               atol=1e-5)
    # Lazy prediction on the dask frame recodes each partition by the model's categories.
    lazy = dgb.predict(client, ours, X).compute()
    np.testing.assert_allclose(lazy, single.predict(local), atol=1e-6)


def test_an_eval_set_takes_the_training_codes_and_the_estimator_fits_a_dask_frame(client):
    parts = [_frame(4, 250, "abc"), _frame(5, 250, "bcd")]
    y = np.concatenate([_target(p, 3) for p in parts])
    X = dd.concat([dd.from_pandas(p, npartitions=1) for p in parts])
    dy = dd.concat([dd.from_pandas(pd.Series(y[a:b]), npartitions=1) for a, b in ((0, 250), (250, 500))])
    # The eval set's partitions list their categories in another order.
    Xe = dd.concat([dd.from_pandas(p.assign(big=p["big"].cat.reorder_categories(
        list(reversed(p["big"].cat.categories)))), npartitions=1) for p in parts])
    est = daskgb.DaskGBRegressor(client=client, n_estimators=4, max_depth=3, enable_categorical=True, device="cpu")
    est.fit(X, dy, eval_set=[(X, dy), (Xe, dy)])
    res = est.evals_result()
    np.testing.assert_allclose(res["validation_1"]["rmse"], res["validation_0"]["rmse"], rtol=1e-6)
    assert est.get_booster().feature_types == ["c", "c", "q"]


def test_bad_category_codes_in_a_partition_are_named(client):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, (400, 3)).astype(np.float32)
    X[390, 1] = -4
    y = rng.normal(size=400).astype(np.float32)
    with pytest.raises(ValueError, match="column 1 is categorical"):
        dgb.DaskQuantileMatrix(client, on_workers(client, X, [200, 200], [0, 1]),
                               on_workers(client, y, [200, 200], [0, 1]), feature_types=["q", "c", "q"],
                               device="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("n_workers", [1, 2])
def test_gpu_workers_grow_the_categorical_trees_of_one_gpu(n_workers):
    """GPU workers (dask-cuda, a worker per GPU) train a dask frame's category columns on the
    device, with the union's codes, and grow the trees one GPU grows in process."""
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < n_workers:
        pytest.skip(f"needs {n_workers} GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")

    parts = [_frame(11, 3000, "abc"), _frame(12, 3000, "bcd"), _frame(13, 2000, "cde")]
    y = np.concatenate([_target(p, 5) for p in parts])
    X = dd.concat([dd.from_pandas(p, npartitions=1) for p in parts])
    dy = dd.concat([dd.from_pandas(pd.Series(y[a:b]), npartitions=1) for a, b in ((0, 3000), (3000, 6000),
                                                                                  (6000, 8000))])
    params = {"max_depth": 5, "device": "cuda", "max_cat_threshold": 16}
    devices = ",".join(str(i) for i in range(n_workers))
    with dask_cuda.LocalCUDACluster(n_workers=n_workers, CUDA_VISIBLE_DEVICES=devices,
                                    dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        dm = dgb.DaskQuantileMatrix(client, X, dy, enable_categorical=True)
        out = dgb.train(client, params, dm, 6)
        union = dm.categories
        whole = pd.concat([p.astype({"small": object, "big": object}) for p in parts], ignore_index=True)
        for i, name in enumerate(["small", "big"]):
            whole[name] = pd.Categorical(whole[name], categories=union[i])
        lazy = dgb.predict(client, out["booster"], X).compute()
    ours = out["booster"]
    assert ours.attr("training_path") == "cuda-graphs"
    single = daskgb.train(params, daskgb.QuantileMatrix(whole, y, enable_categorical=True, device="cuda"), 6,
                          verbose_eval=False)
    assert any(t.categories for t in ours.trees)
    for i, (a, b) in enumerate(zip(ours.trees, single.trees)):
        for name in ("left", "right", "feature", "bin", "default_left", "value", "cover"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"tree {i} {name}")
        assert {k: v.tolist() for k, v in a.categories.items()} == {k: v.tolist() for k, v in b.categories.items()}
    np.testing.assert_allclose(np.asarray(lazy), np.asarray(single.predict(whole)), atol=1e-6)
