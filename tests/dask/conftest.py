"""The Dask tests' cluster: a LocalCluster of 2 worker processes, one per test module."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    # No work stealing: the tests place partitions on chosen workers and rely on them staying there.
    import dask

    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as c:
            with distributed.Client(c) as cl:
                cl.wait_for_workers(2)  # tests that place partitions on worker 1 need it up
                yield cl
