"""Test configuration: tests marked ``gpu`` are skipped where CuPy sees no GPU."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    # get_closest_marker, not `"gpu" in item.keywords`: keywords also hold test names and
    # parameter ids, so a test parametrised with device="gpu" would be skipped too.
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from daskgb.arrays import cuda_available

    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (CuPy is not installed or sees none)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def settings():
    """settings({"training.queue-rounds": False, ...}): daskgb settings (daskgb/config.py) for
    this test only, through dask.config."""
    import contextlib

    import dask.config

    with contextlib.ExitStack() as stack:
        yield lambda values: stack.enter_context(dask.config.set({f"daskgb.{k}": v for k, v in values.items()}))
