"""The worker's heap setting while it trains (daskgb.dask.worker.heap_kept_while_training), and its
device-memory give-back after a fit (daskgb.dask.plugin.WorkerState)."""

from __future__ import annotations

import numpy as np
import pytest

from daskgb.dask import plugin, worker


def test_heap_setting_is_applied_and_undone(monkeypatch):
    calls = []

    class FakeLibc:
        def mallopt(self, param, value):
            calls.append(("mallopt", param, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("malloc_trim", pad))
            return 1

    monkeypatch.setattr(worker, "_glibc", lambda: FakeLibc())
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    with worker.heap_kept_while_training():
        assert calls == [("mallopt", worker._M_TRIM_THRESHOLD, 1 << 30), ("mallopt", worker._M_MMAP_THRESHOLD, 32 << 20)]
    assert calls[2:] == [("mallopt", worker._M_TRIM_THRESHOLD, 65536),
                         ("mallopt", worker._M_MMAP_THRESHOLD, worker._DEFAULT_MMAP_THRESHOLD), ("malloc_trim", 0)]


def test_heap_setting_untouched_without_the_variable(monkeypatch):
    monkeypatch.setattr(worker, "_glibc", lambda: (_ for _ in ()).throw(AssertionError("must not load libc")))
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    with worker.heap_kept_while_training():
        pass


def test_heap_setting_with_the_real_c_library(monkeypatch):
    """On glibc the calls go through (an error in their types would raise here); elsewhere nothing happens."""
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    with worker.heap_kept_while_training():
        a = np.ones(1 << 20)
    assert a.sum() == 1 << 20


@pytest.fixture
def give_back(monkeypatch, settings):
    """A worker's state (dask/plugin.py WorkerState) with a fake device, a recording
    _give_back_device_memory and a give-back 0.2 s after a fit; its waiting threads end with the test."""
    calls = []
    monkeypatch.setattr(plugin, "_current_device", lambda: 3)
    monkeypatch.setattr(plugin, "_give_back_device_memory", lambda device=None: calls.append(device))
    settings({"worker.give-back-after": 0.2})
    state = plugin.WorkerState()
    yield state, calls
    state.stop_giving_back()


def test_an_idle_worker_gives_its_device_memory_back(give_back):
    import time

    state, calls = give_back
    state.give_back_device_memory_when_idle()
    assert calls == []  # not at once: the next fit may follow
    time.sleep(0.5)
    assert calls == [3]


def test_a_task_that_follows_keeps_the_memory(give_back):
    import time

    state, calls = give_back
    state.give_back_device_memory_when_idle()
    state.device_in_use()  # the next matrix or training starts within the wait
    time.sleep(0.5)
    assert calls == []
    state.running["job"] = object()  # a training under way: it gives back when it ends
    state.give_back_device_memory_when_idle()
    time.sleep(0.5)
    assert calls == []


def test_no_wait_gives_back_as_the_fit_ends(give_back, settings):
    state, calls = give_back
    settings({"worker.give-back-after": 0})  # read when used: a worker's setting applies from its next fit on
    state.give_back_device_memory_when_idle()
    assert calls == [3]


def test_the_legacy_variable_still_sets_the_wait(monkeypatch):
    calls = []
    monkeypatch.setattr(plugin, "_current_device", lambda: 3)
    monkeypatch.setattr(plugin, "_give_back_device_memory", lambda device=None: calls.append(device))
    monkeypatch.setenv("DASKGB_GIVE_BACK_AFTER_S", "0")  # read as the fit ends, not at import
    plugin.WorkerState().give_back_device_memory_when_idle()
    assert calls == [3]


def test_a_task_waits_for_a_give_back_under_way(monkeypatch, settings):
    """A cudaFree while a training captures a CUDA graph would break the capture."""
    import threading
    import time

    started, events = threading.Event(), []

    def slow(device=None):
        started.set()
        time.sleep(0.3)
        events.append("given back")

    monkeypatch.setattr(plugin, "_current_device", lambda: 0)
    monkeypatch.setattr(plugin, "_give_back_device_memory", slow)
    settings({"worker.give-back-after": 0.01})
    state = plugin.WorkerState()
    state.give_back_device_memory_when_idle()
    assert started.wait(5)
    state.device_in_use()
    events.append("task starts")
    assert events == ["given back", "task starts"]


def test_closing_the_state_ends_the_waiting_give_backs(give_back, settings):
    """The plugin's teardown (a worker closing) does not leave give-back threads waiting, nor
    starts new ones."""
    import threading
    import time

    state, calls = give_back
    settings({"worker.give-back-after": 60})
    state.give_back_device_memory_when_idle()
    assert any(t.name == "daskgb-give-back" and t.is_alive() for t in threading.enumerate())
    start = time.monotonic()
    state.stop_giving_back()
    assert time.monotonic() - start < 5
    assert not any(t.name == "daskgb-give-back" and t.is_alive() for t in threading.enumerate())
    state.give_back_device_memory_when_idle()
    assert calls == [] and not any(t.name == "daskgb-give-back" for t in threading.enumerate())


@pytest.mark.gpu
def test_device_memory_is_given_back_when_idle(settings):
    """The blocks CuPy's pool caches are freed by the give-back thread, on the device of the
    task that scheduled it."""
    import time

    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("needs a GPU")
    settings({"worker.give-back-after": 0.1})
    state = plugin.WorkerState()
    pool = cupy.get_default_memory_pool()
    x = cupy.empty(64 << 20, dtype=cupy.uint8)  # a block of its own, cached once freed
    del x
    cached = pool.total_bytes()
    state.give_back_device_memory_when_idle()
    deadline = time.monotonic() + 10
    while pool.total_bytes() > cached - (64 << 20) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.total_bytes() <= cached - (64 << 20)
