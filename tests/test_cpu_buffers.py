"""cpu/buffers.py: a kept buffer is handed out again only once nothing refers to it."""

import numpy as np

from daskgb.cpu import buffers


def test_a_buffer_in_use_is_never_handed_out_again(monkeypatch):
    monkeypatch.setattr(buffers, "_kept", [])
    n = 2 * buffers._MIN_BYTES // 8
    a = buffers.float64_buffer(n, zero=True)
    assert not a.any()
    a[:] = 7.0
    view = a.reshape(-1, 2)[1:]  # a view of the view: still the kept buffer's
    del a
    b = buffers.float64_buffer(n, zero=False)
    assert not np.shares_memory(view, b), "a buffer a live view refers to was handed out"
    del view
    c = buffers.float64_buffer(n - 10, zero=True)
    assert len(buffers._kept) == 2 and not c.any(), "a free kept buffer is reused, and zeroed when asked"
    assert any(np.shares_memory(c, k) for k in buffers._kept)
    del b
    buffers.release()
    assert len(buffers._kept) == 1, "release drops the free buffers only"
    assert np.shares_memory(c, buffers._kept[0])


def test_small_buffers_and_a_full_pool_are_plain_arrays(monkeypatch):
    monkeypatch.setattr(buffers, "_kept", [])
    small = buffers.float64_buffer(10, zero=True)
    assert small.shape == (10,) and not small.any() and not buffers._kept
    held = [buffers.float64_buffer(buffers._MIN_BYTES // 8, zero=False) for _ in range(buffers._MAX_KEPT + 2)]
    assert len(buffers._kept) == buffers._MAX_KEPT
    assert not any(np.shares_memory(x, y) for i, x in enumerate(held) for y in held[i + 1:]), "every buffer in use is its own"
