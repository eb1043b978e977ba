"""Two GPU workers (LocalCUDACluster, NCCL) grow the trees one GPU grows in process (2+ GPUs only).

With every feature's distinct values within max_bin, the workers' merged cuts are the
in-process cuts, and the int64 histograms summed by NCCL are exact: the models must be
equal tree for tree, through the device grower (depthwise) and the host grower (lossguide).
"""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

pytestmark = pytest.mark.gpu


def _data(n=40_000, seed=0):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 8)) * 8) / 8).astype(np.float32)  # ~80 distinct values a feature
    X[rng.random(X.shape) < 0.1] = np.nan
    Z = np.nan_to_num(X)
    y = (Z[:, 0] - Z[:, 1] * Z[:, 2] + np.sin(Z[:, 3]) + rng.normal(size=n) * 0.5 > 0).astype(np.float32)
    return X, y


@pytest.mark.parametrize("policy", [dict(max_depth=7), dict(grow_policy="lossguide", max_leaves=31, max_depth=0)],
                         ids=["depthwise", "lossguide"])
def test_two_gpus_grow_the_trees_of_one(policy):
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client
    from placement import on_workers

    import daskgb.dask as dgb

    X, y = _data()
    params = {"objective": "binary:logistic", "eta": 0.3, "device": "cuda", **policy}
    with dask_cuda.LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES="0,1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        chunks, placement = [7_000, 13_000, 9_000, 11_000], [0, 1, 1, 0]
        dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                        on_workers(client, y, chunks, placement))
        assert len(dtrain.workers) == 2
        out = dgb.train(client, params, dtrain, 8, verbose_eval=False)
    assert {s["communicator"] for s in out["collective"]} == {"NcclCommunicator"}
    local = daskgb.train(params, daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y), device="cuda"), 8,
                         verbose_eval=False)
    dist = out["booster"]
    assert dist.num_boosted_rounds() == local.num_boosted_rounds() == 8
    for i, (a, b) in enumerate(zip(dist.trees, local.trees)):
        for name in ("left", "right", "feature", "bin", "threshold", "default_left", "value", "cover"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"tree {i} {name}")


def test_a_second_fit_takes_the_nccl_communicator_the_first_kept():
    """A clean fit keeps its NCCL communicator for the next fit on the same workers
    (collective/nccl.py, the setting collective.keep-nccl); a failed fit's is never reused, and the fit after it makes its own.
    The models do not depend on which communicator summed the histograms."""
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client
    from placement import on_workers

    import daskgb.dask as dgb
    from daskgb.callback import TrainingCallback

    class FailOnRankOne(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            from daskgb.dask.plugin import worker_state

            if epoch == 2 and any(getattr(j.comm, "rank", 0) == 1 for j in worker_state().running.values()):
                raise RuntimeError("rank 1 fails on purpose")
            return False

    X, y = _data(20_000, seed=3)
    params = {"objective": "binary:logistic", "max_depth": 5, "device": "cuda"}
    with dask_cuda.LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES="0,1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        chunks, placement = [10_000, 10_000], [0, 1]
        dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, chunks, placement),
                                        on_workers(client, y, chunks, placement))

        def fit(**kw):
            return dgb.train(client, params, dtrain, 6, verbose_eval=False, **kw)

        first, second = fit(), fit()
        assert [s["nccl_reused"] for s in first["collective"]] == [False, False]
        assert [s["nccl_reused"] for s in second["collective"]] == [True, True]
        assert first["booster"].to_dict() == second["booster"].to_dict()
        with pytest.raises(Exception, match="fails on purpose"):
            fit(callbacks=[FailOnRankOne()])
        third = fit()
        assert [s["nccl_reused"] for s in third["collective"]] == [False, False]
        assert third["booster"].to_dict() == first["booster"].to_dict()
        fourth = fit()
        assert [s["nccl_reused"] for s in fourth["collective"]] == [True, True]
