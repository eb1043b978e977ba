"""The cuts of a feature with more distinct values than max_bin, in process and on 2 workers.

XGBoost's sketch gives the same cuts (and model) on two partitions as in process; daskgb's must too."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb
from daskgb import sketch

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from placement import on_workers  # noqa: E402

POISSON = {"objective": "count:poisson", "max_depth": 6, "eta": 0.3}


def column(rng, n, distinct):
    """n values of a skewed column holding exactly `distinct` distinct values."""
    pool = np.unique(np.round(rng.lognormal(2, 1, 20 * distinct) * 10) / 10)
    values = rng.choice(pool, distinct, replace=False)
    rest = rng.choice(values, n - distinct, p=(1 / values) / (1 / values).sum())
    return rng.permutation(np.concatenate([values, rest]))


def counts_data(n=1000, seed=1000):
    """Two features of 615 and 340 distinct values (the report's), a count label. At 1000 rows
    and max_bin 256 the sketch budget (513 entries) is below 615 and above each half's rows."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([column(rng, n, 615), column(rng, n, 340)]).astype(np.float32)
    y = rng.poisson(np.exp(X[:, 0] / X[:, 0].max() + X[:, 1] / X[:, 1].max())).astype(np.float32)
    assert sketch.sketch_budget(n, 256) < 615
    return X, y


def halves(client, X, y):
    k = X.shape[0] // 2
    return (on_workers(client, X, [k, X.shape[0] - k], [0, 1]), on_workers(client, y, [k, X.shape[0] - k], [0, 1]))


def test_cuts_beyond_max_bin_on_two_workers_equal_in_process(client):
    X, y = counts_data()
    Xd, yd = halves(client, X, y)
    local = daskgb.QuantileMatrix(X, y, max_bin=256)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd, max_bin=256)
    for f in range(2):
        np.testing.assert_array_equal(np.asarray(dtrain.cuts.values[dtrain.cuts.ptrs[f] : dtrain.cuts.ptrs[f + 1]]),
                                      np.asarray(local.cuts.values[local.cuts.ptrs[f] : local.cuts.ptrs[f + 1]]),
                                      err_msg=f"feature {f}")
    params = {**POISSON, "device": "cpu"}
    on_dask = dgb.train(client, params, dtrain, 20, verbose_eval=False)["booster"]
    in_process = daskgb.train(params, local, 20, verbose_eval=False)
    np.testing.assert_allclose(on_dask.predict(X), in_process.predict(X), atol=1e-5)


def test_xgboost_dask_on_the_same_halves_equals_in_process(client):
    """The reference the test above holds daskgb to: XGBoost's own sketch, on the same two halves."""
    xgboost = pytest.importorskip("xgboost")
    import xgboost.dask as xgb_dask

    X, y = counts_data()
    Xd, yd = halves(client, X, y)
    params = {**POISSON, "tree_method": "hist"}
    in_process = xgboost.train(params, xgboost.DMatrix(X, y), 20)
    on_dask = xgb_dask.train(client, params, xgb_dask.DaskDMatrix(client, Xd, yd), 20)["booster"]
    np.testing.assert_allclose(on_dask.predict(xgboost.DMatrix(X)), in_process.predict(xgboost.DMatrix(X)),
                               atol=1e-5)
