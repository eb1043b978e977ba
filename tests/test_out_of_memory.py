"""Running out of memory comes out as daskgb.OutOfMemoryError: what daskgb was doing, the
data's size, and what to change (daskgb/out_of_memory.py)."""

from __future__ import annotations

import numpy as np
import pytest
from exact_data import make_data

import daskgb
from daskgb.training import fit as _fit
from daskgb.ellpack import pages as external
from daskgb import matrix as _matrix
from daskgb.out_of_memory import explain


def _raise(exc):
    def fail(*args, **kwargs):
        raise exc

    return fail


class FakeCupyOutOfMemory(MemoryError):
    """Stands for cupy.cuda.memory.OutOfMemoryError on a machine without CuPy: the GPU's
    errors are told by their module."""


FakeCupyOutOfMemory.__module__ = "cupy.cuda.memory"


def test_training_that_runs_out_of_host_memory_says_so(monkeypatch):
    X, y = make_data(1, "reg:squarederror", False, n=300)
    m = daskgb.QuantileMatrix(X, y, device="cpu")
    original = MemoryError("Unable to allocate 6.00 GiB for an array")
    monkeypatch.setattr(_fit, "round_gradients", _raise(original))
    with pytest.raises(daskgb.OutOfMemoryError, match=r"the host ran out of memory while training on 300 rows x 6 "
                       r"features .* in host memory\).*more workers.*Unable to allocate 6.00 GiB") as info:
        daskgb.train({"device": "cpu"}, m, 3, verbose_eval=False)
    assert isinstance(info.value, MemoryError) and info.value.__cause__ is original


@pytest.mark.parametrize("how", ["QuantileMatrix", "from_batches"])
def test_quantising_that_runs_out_of_memory_says_so(monkeypatch, how):
    X, y = make_data(2, "reg:squarederror", False, n=300)
    if how == "QuantileMatrix":
        monkeypatch.setattr(_matrix, "_make_cuts", _raise(MemoryError("no room")))
        build = lambda: daskgb.QuantileMatrix(X, y, device="cpu")  # noqa: E731
    else:
        monkeypatch.setattr(external, "quantise_blocks", _raise(MemoryError("no room")))
        build = lambda: daskgb.QuantileMatrix.from_batches(lambda: iter([(X, y)]), device="cpu")  # noqa: E731
    with pytest.raises(daskgb.OutOfMemoryError, match=r"the host ran out of memory while quantising\. .*no room"):
        build()


def test_a_gpu_error_names_the_gpu_and_the_way_out_in_core_and_out_of_core():
    X, y = make_data(3, "reg:squarederror", False, n=2000)
    whole = daskgb.QuantileMatrix(X, y, device="cpu")
    paged = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=4096)
    assert paged.paged and not whole.paged
    exc = FakeCupyOutOfMemory("Out of memory allocating 6,400,000,000 bytes")

    text = str(explain(exc, "training", whole))
    assert text.startswith("daskgb: the GPU ran out of memory while training on 2,000 rows x 6 features")
    assert "on the GPU)" in text and "device_memory_budget=" in text and "sampling_method='gradient_based'" in text
    assert text.endswith("(FakeCupyOutOfMemory: Out of memory allocating 6,400,000,000 bytes)")

    text = str(explain(exc, "training", paged))
    assert "in host memory as pages)" in text and "Out of core the GPU still holds every row's training state" in text
    assert "smaller device_memory_budget" in text


def test_an_explained_error_is_not_explained_twice(monkeypatch):
    X, y = make_data(4, "reg:squarederror", False, n=300)
    m = daskgb.QuantileMatrix(X, y, device="cpu")
    inner = daskgb.OutOfMemoryError("daskgb: already said")
    monkeypatch.setattr(_fit, "round_gradients", _raise(inner))
    with pytest.raises(daskgb.OutOfMemoryError) as info:
        daskgb.train({"device": "cpu"}, m, 1, verbose_eval=False)
    assert info.value is inner


@pytest.mark.gpu
def test_cupys_out_of_memory_in_training_names_the_gpu(monkeypatch):
    import cupy

    X, y = make_data(5, "reg:squarederror", False, n=2000)
    m = daskgb.QuantileMatrix(X, y, device="cuda")
    original = cupy.cuda.memory.OutOfMemoryError(6_400_000_000, 83_000_000_000)
    monkeypatch.setattr(_fit, "round_gradients", _raise(original))
    with pytest.raises(daskgb.OutOfMemoryError, match=r"the GPU ran out of memory while training on 2,000 rows x 6 "
                       r"features .* on the GPU\).*device_memory_budget=") as info:
        daskgb.train({"device": "cuda"}, m, 2, verbose_eval=False)
    assert info.value.__cause__ is original
    assert np.isfinite(m.label.sum().get())  # the matrix is still usable
