"""The per-round phase clock (daskgb/phases.py): off by default; on, every moment of a round
belongs to one phase, and the model is the same."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import daskgb
from daskgb.backend import get_backend
from daskgb.training import TrainingOptions, run
from daskgb import phases

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n) > 0).astype(np.float32)
    return X, y


def test_mark_without_a_clock_does_nothing():
    assert phases._running.get() is None
    phases.mark(phases.HISTOGRAM)
    with phases.running() as clock:
        assert phases._running.get() is clock
    assert phases._running.get() is None


# The host-driven grower (lossguide on GPU too) and, on GPU, the device grower (depthwise).
@pytest.mark.parametrize("grow_policy", ["depthwise", "lossguide"])
@pytest.mark.parametrize("device", DEVICES)
def test_phases_add_up_to_the_round_and_leave_the_model_alone(device, grow_policy):
    X, y = _data(20_000 if device == "cuda" else 4000)
    params = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.1, "device": device,
              "grow_policy": grow_policy}
    m = daskgb.QuantileMatrix(X, y)
    plain = daskgb.train(params, m, 8, evals=[(m, "train")], verbose_eval=False)
    laps, stamps = [], []
    with phases.running(get_backend(device).phase_clock()) as clock:
        def after_round(it, history):
            laps.append(clock.lap())  # on GPU: waits for the round's work, then reads its events
            stamps.append(time.perf_counter())

        timed = run(TrainingOptions.create(params, 8, verbose_eval=False), m, [(m, "train")], after_round=after_round)
    np.testing.assert_array_equal(plain.predict(X), timed.predict(X))
    assert len(laps) == 8
    # Round 0 also holds training's set-up (and on GPU the kernels' compilation); the others
    # span one lap's end to the next.
    for lap, (a, b) in zip(laps[1:], zip(stamps, stamps[1:])):
        assert len(lap) == len(phases.PHASES) and min(lap) >= 0
        assert math.isclose(sum(lap), b - a, rel_tol=0.1, abs_tol=2e-3), (lap, b - a)
        assert lap[phases.HISTOGRAM] > 0 and lap[phases.SPLIT] > 0 and lap[phases.OTHER] > 0
