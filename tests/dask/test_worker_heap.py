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


def test_the_next_training_waits_for_the_memory_given_back():
    """train_on_worker gives the device memory back on a thread (_give_back_device_memory_soon);
    the next training waits for it (_wait_for_give_back), every pending one."""
    import threading
    import time

    done = []

    def slow(i):
        time.sleep(0.2)
        done.append(i)

    for i in range(2):
        t = threading.Thread(target=slow, args=(i,))
        worker._GIVING_BACK.append(t)
        t.start()
    worker._wait_for_give_back()
    assert sorted(done) == [0, 1] and worker._GIVING_BACK == []
    worker._wait_for_give_back()  # none pending: returns at once


@pytest.mark.gpu
def test_device_memory_is_given_back_on_a_thread():
    """The blocks CuPy's pool caches are freed by the give-back thread, on the device of the
    task that started it."""
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("needs a GPU")
    pool = cupy.get_default_memory_pool()
    x = cupy.empty(64 << 20, dtype=cupy.uint8)  # a block of its own, cached once freed
    del x
    cached = pool.total_bytes()
    worker._give_back_device_memory_soon()
    worker._wait_for_give_back()
    assert pool.total_bytes() <= cached - (64 << 20)
