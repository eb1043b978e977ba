"""Gradient-based sampling through Dask: the threshold targets the sample over all workers'
rows, so 2 workers train the model one process trains on the same rows."""

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
