"""The worker's heap setting while it trains (daskgb.dask.worker.heap_kept_while_training)."""

from __future__ import annotations

import numpy as np
import pytest

from daskgb.dask import worker


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
def give_back(monkeypatch):
    """worker's give-back with a fake device and a recording _give_back_device_memory."""
    calls = []
    monkeypatch.setattr(worker, "_current_device", lambda: 3)
    monkeypatch.setattr(worker, "_give_back_device_memory", lambda device=None: calls.append(device))
    monkeypatch.setattr(worker, "GIVE_BACK_AFTER_S", 0.2)
    return calls


def test_an_idle_worker_gives_its_device_memory_back(give_back):
    import time

    worker.give_back_device_memory_when_idle()
    assert give_back == []  # not at once: the next fit may follow
    time.sleep(0.5)
    assert give_back == [3]


def test_a_task_that_follows_keeps_the_memory(give_back):
    import time

    worker.give_back_device_memory_when_idle()
    worker.device_in_use()  # the next matrix or training starts within the wait
    time.sleep(0.5)
    assert give_back == []
    worker._RUNNING["job"] = object()  # a training under way: it gives back when it ends
    try:
        worker.give_back_device_memory_when_idle()
        time.sleep(0.5)
        assert give_back == []
    finally:
        worker._RUNNING.pop("job")


def test_no_wait_gives_back_as_the_fit_ends(give_back, monkeypatch):
    monkeypatch.setattr(worker, "GIVE_BACK_AFTER_S", 0.0)
    worker.give_back_device_memory_when_idle()
    assert give_back == [3]


def test_a_task_waits_for_a_give_back_under_way(monkeypatch):
    """A cudaFree while a training captures a CUDA graph would break the capture."""
    import threading
    import time

    started, events = threading.Event(), []

    def slow(device=None):
        started.set()
        time.sleep(0.3)
        events.append("given back")

    monkeypatch.setattr(worker, "_current_device", lambda: 0)
    monkeypatch.setattr(worker, "_give_back_device_memory", slow)
    monkeypatch.setattr(worker, "GIVE_BACK_AFTER_S", 0.01)
    worker.give_back_device_memory_when_idle()
    assert started.wait(5)
    worker.device_in_use()
    events.append("task starts")
    assert events == ["given back", "task starts"]


@pytest.mark.gpu
def test_device_memory_is_given_back_when_idle(monkeypatch):
    """The blocks CuPy's pool caches are freed by the give-back thread, on the device of the
    task that scheduled it."""
    import time

    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("needs a GPU")
    monkeypatch.setattr(worker, "GIVE_BACK_AFTER_S", 0.1)
    pool = cupy.get_default_memory_pool()
    x = cupy.empty(64 << 20, dtype=cupy.uint8)  # a block of its own, cached once freed
    del x
    cached = pool.total_bytes()
    worker.give_back_device_memory_when_idle()
    deadline = time.monotonic() + 10
    while pool.total_bytes() > cached - (64 << 20) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.total_bytes() <= cached - (64 << 20)
