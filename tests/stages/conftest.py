"""The stage tests' fixtures: the backend a test runs on, the oracle, and the CUDA backend.

backend  each stage test that checks a backend against an independent expectation (a
         definition summed by hand, a round trip, a brute-force search) takes this one:
         it runs on numpy_backend ("cpu") and compiled_backend ("compiled") everywhere and
         on cupy_backend ("cuda", marked gpu) where CuPy sees a GPU. STYLE.md: one test body, run on every backend.
xp       the backend's array module.
oracle   numpy_backend, the readable reference of every hot loop.
compiled compiled_backend, for the tests that run the oracle and the CPU's compiled loops
         on the same input and compare, bit for bit.
cb       cupy_backend, for the tests (marked gpu) that run the oracle and the CUDA
         backend on the same input and compare: those exist only on a GPU, since the
         oracle compared with itself could not fail.

The random inputs the tests share (cuts, matrices in each layout, partitions, gradient
pairs, trees) are built by builders.py. CuPy is imported inside fixtures only: CPU CI
imports every test module.
"""

from __future__ import annotations

import pytest

from daskgb.arrays import cuda_available

BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("compiled", id="compiled"),
            pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def _cupy_backend():
    # The gpu marker skips without a GPU (tests/conftest.py); this guards runs without it.
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from daskgb.backend import cupy_backend

    return cupy_backend


@pytest.fixture(params=BACKENDS)
def backend(request):
    """numpy_backend ("cpu"), compiled_backend ("compiled", the CPU's compiled loops) and
    cupy_backend ("cuda", marked gpu)."""
    if request.param == "cuda":
        return _cupy_backend()
    if request.param == "compiled":
        from daskgb.backend import compiled_backend

        return compiled_backend
    from daskgb.backend import numpy_backend

    return numpy_backend


@pytest.fixture
def xp(backend):
    """The backend's array module: numpy or cupy."""
    return backend.xp


@pytest.fixture
def oracle():
    """numpy_backend: the reference every CUDA launcher is compared with."""
    from daskgb.backend import numpy_backend

    return numpy_backend


@pytest.fixture
def cb():
    """cupy_backend, for oracle-vs-CUDA tests (mark them gpu)."""
    return _cupy_backend()


@pytest.fixture
def compiled():
    """compiled_backend: numpy_backend with the CPU's compiled loops (backend/compiled_backend.py)."""
    from daskgb.backend import compiled_backend

    return compiled_backend
