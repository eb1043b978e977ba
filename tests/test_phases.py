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
    started = time.perf_counter()
    with phases.running(get_backend(device).phase_clock()) as clock:
        def after_round(it, history):
            laps.append(clock.lap())  # on GPU: waits for the round's work, then reads its events
            stamps.append(time.perf_counter())

        timed = run(TrainingOptions.create(params, 8, verbose_eval=False), m, [(m, "train")], after_round=after_round)
    np.testing.assert_array_equal(plain.predict(X), timed.predict(X))
    assert len(laps) == 8
    for lap in laps:
        assert len(lap) == len(phases.PHASES) and min(lap) >= 0
        assert lap[phases.HISTOGRAM] > 0 and lap[phases.SPLIT] > 0 and lap[phases.OTHER] > 0
    # Round 0 also holds training's set-up (and on GPU the kernels' compilation); the others
    # span one lap's end to the next.
    if timed.attr("training_path") in ("queued-rounds", "cuda-graphs"):
        # The host reads round i once round i + 1 is queued: a lap is the device's time from
        # one round's end to the next, and the host's stamps trail the device's ends by however
        # far the host lags, so they bound the laps instead of matching them: rounds 1.. ran
        # on the device after the fit started and before the last lap was read.
        assert 0 < sum(map(sum, laps[1:])) <= stamps[-1] - started
        return
    if device == "cpu":  # a lap is the host's time: each round's laps are that round's span
        for lap, (a, b) in zip(laps[1:], zip(stamps, stamps[1:])):
            assert math.isclose(sum(lap), b - a, rel_tol=0.1, abs_tol=2e-3), (lap, b - a)
        return
    # On GPU a lap ends at an event where the round's work ended on the device, and the host
    # stamps the round once it has read the lap: later, by however long the host took, which a
    # loaded machine stretched to 4 ms of a 34 ms round (the GPU suite at -n 8). The laps still
    # tile the rounds: their sum is the span from the first stamp to the last, give or take the
    # lags at its two ends.
    total = sum(map(sum, laps[1:]))
    assert math.isclose(total, stamps[-1] - stamps[0], rel_tol=0.1, abs_tol=5e-3), (laps, stamps)


@pytest.mark.parametrize("device", DEVICES)
def test_a_lap_cut_where_a_round_ends_is_handed_back_first(device):
    """A path that queues the next round cuts the clock where a round's work ends; the laps read
    later are still one per round, in order."""
    with phases.running(get_backend(device).phase_clock()) as clock:
        phases.mark(phases.HISTOGRAM)
        time.sleep(0.02)
        phases.cut()
        phases.mark(phases.SPLIT)
        time.sleep(0.03)
        first, second = clock.lap(), clock.lap()
    if device == "cpu":  # device time: the sleeps are the host's, between events
        assert first[phases.HISTOGRAM] >= 0.02 and first[phases.SPLIT] == 0
        assert second[phases.SPLIT] >= 0.03 and second[phases.HISTOGRAM] == 0
    else:
        assert first[phases.SPLIT] == 0 and second[phases.HISTOGRAM] == 0
        assert first[phases.HISTOGRAM] >= 0.015 and second[phases.SPLIT] >= 0.025


@pytest.mark.gpu
def test_the_dashboard_clock_leaves_the_path_and_the_model_alone():
    """An open dashboard (a phase clock on the worker) with an eval set watched: the rounds are
    still replayed as CUDA graphs, the model is the same, and every round has its lap, the
    captured rounds' phases included."""
    X, y = _data(20_000)
    params = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.1, "device": "cuda"}
    m = daskgb.QuantileMatrix(X, y)
    plain = daskgb.train(params, m, 8, evals=[(m, "train")], verbose_eval=False)
    assert plain.attr("training_path") == "cuda-graphs"
    laps = []
    with phases.running(get_backend("cuda").phase_clock()) as clock:
        timed = run(TrainingOptions.create(params, 8, verbose_eval=False), m, [(m, "train")],
                    after_round=lambda it, history: laps.append(clock.lap()))
    assert timed.attr("training_path") == "cuda-graphs"
    np.testing.assert_array_equal(plain.predict(X), timed.predict(X))
    assert len(laps) == 8 and all(lap[phases.HISTOGRAM] > 0 and lap[phases.SPLIT] > 0 for lap in laps)


_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < (unsigned long long)ns);
}
"""


@pytest.mark.gpu
def test_a_replayed_graph_stamps_its_phases_in_stream_order():
    """Marks made while a graph was captured are timed where each replay runs, between the
    clock's own marks before and after it; a lap of more marks than a block holds adds up too."""
    import cupy

    spin = cupy.RawKernel(_SPIN, "spin")

    def busy(ms):
        spin((1,), (1,), (np.int64(ms * 1e6),))

    with phases.running(get_backend("cuda").phase_clock()) as clock:
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            busy(0)  # loaded before the capture
            stream.begin_capture()
            with phases.recording() as recorded:
                phases.mark(phases.HISTOGRAM)
                busy(20)
                phases.mark(phases.OTHER)
            graph = stream.end_capture()
        assert recorded is not None and recorded.used == 2
        clock.lap()
        laps = []
        for _ in range(2):
            phases.mark(phases.SPLIT)
            busy(10)
            graph.launch(stream=cupy.cuda.get_current_stream())
            phases.splice(recorded)
            phases.mark(phases.ALLREDUCE)
            busy(30)
            phases.cut()
        laps = [clock.lap(), clock.lap()]
        for lap in laps:
            assert lap[phases.SPLIT] == pytest.approx(0.010, abs=2e-3)
            assert lap[phases.HISTOGRAM] == pytest.approx(0.020, abs=2e-3)
            assert lap[phases.ALLREDUCE] == pytest.approx(0.030, abs=2e-3)
        start = time.perf_counter()
        for i in range(3000):
            phases.mark(phases.SPLIT if i % 2 else phases.HISTOGRAM)
        busy(5)
        lap = clock.lap()
        assert sum(lap) == pytest.approx(time.perf_counter() - start, rel=0.5)
        assert lap[phases.HISTOGRAM] > 0 and lap[phases.SPLIT] > 0
