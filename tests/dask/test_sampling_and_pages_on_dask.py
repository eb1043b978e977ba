"""Gradient-based sampling and out-of-core pages through Dask: the sampling threshold targets
the sample over all workers' rows, and each worker pages its own rows, so 2 workers train the
model one process trains on the same rows."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")

from placement import on_workers  # noqa: E402
from test_train import PARAMS, UNEVEN, exact_data  # noqa: E402


# Rows in worker order (a row's draw is keyed by its index among all workers' rows, in rank
# order: the in-process rows must come in that order to draw the same).
@pytest.mark.parametrize("placement", [[0, 0, 1, 1, 1], [0, 0, 0, 0, 0]], ids=["both-workers", "one-holds-none"])
def test_gradient_based_sampling_equals_in_process(client, placement):
    X, y = exact_data(seed=5)
    params = {**PARAMS, "subsample": 0.4, "sampling_method": "gradient_based", "seed": 11}
    Xd = on_workers(client, X, UNEVEN, placement)
    yd = on_workers(client, y, UNEVEN, placement)
    out = dgb.train(client, params, dgb.DaskQuantileMatrix(client, Xd, yd), 12, verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y), 12, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)
    # And sampling changed the model.
    plain = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y), 12, verbose_eval=False)
    assert not np.allclose(plain.predict(X), local.predict(X), atol=1e-5)


@pytest.mark.parametrize("sampling", [{}, {"subsample": 0.4, "sampling_method": "gradient_based"}],
                         ids=["streamed", "sampled-compacted"])
def test_workers_keep_their_own_pages(client, tmp_path, sampling):
    """Each worker pages its own rows (a budget below its share); the model is the in-process one."""
    X, y = exact_data(seed=6)
    params = {**PARAMS, "seed": 3, **sampling}
    placement = [0, 0, 1, 1, 1]
    Xd = on_workers(client, X, UNEVEN, placement)
    yd = on_workers(client, y, UNEVEN, placement)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd, device_memory_budget=1024, spill_dir=tmp_path)
    out = dgb.train(client, params, dtrain, 10, evals=[(dtrain, "train")], verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y), 10, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-5)
    pages = [client.submit(lambda m: (m.paged, m.ellpack.n_pages if m.paged else 1), dtrain._local[a],
                           workers=[a], pure=False).result() for a in dtrain.workers]
    assert all(p for p, _ in pages) and sum(n for _, n in pages) >= 4


def test_paging_arguments_are_checked_before_any_work(client):
    X, y = exact_data(seed=6)
    Xd = on_workers(client, X, UNEVEN, [0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="device_memory_budget"):
        dgb.DaskQuantileMatrix(client, Xd, device_memory_budget=-1)
