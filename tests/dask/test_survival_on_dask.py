"""Survival objectives on several Dask workers: refused before any training, saying why."""

from __future__ import annotations

import numpy as np
import pytest

import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")

from placement import on_workers  # noqa: E402


def test_survival_on_several_workers_is_refused_saying_why(client):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)).astype(np.float32)
    y = rng.uniform(0.5, 3.0, 400).astype(np.float32)
    dm = dgb.DaskQuantileMatrix(client, on_workers(client, X, [200, 200], [0, 1]),
                                on_workers(client, y, [200, 200], [0, 1]))
    with pytest.raises(ValueError, match="does not carry label_lower_bound"):
        dgb.train(client, {"objective": "survival:aft"}, dm, 2, verbose_eval=False)
    with pytest.raises(ValueError, match="survival:cox .* one process"):
        dgb.train(client, {"objective": "survival:cox", "device": "cpu"}, dm, 2, verbose_eval=False)
