"""The worker's heap setting while it trains (daskgb.dask.worker.heap_kept_while_training)."""

from __future__ import annotations

import numpy as np

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
