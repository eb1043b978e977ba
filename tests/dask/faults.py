"""Faults for the Dask tests: a worker signalled mid-fit, and the two-worker clusters the fault tests use."""

from __future__ import annotations

import os
import signal
import sys

import cloudpickle
import pytest

from daskgb.callback import TrainingCallback

# Worker processes need not import this file by name: its callbacks travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class SignalWorkerAt(TrainingCallback):
    """Sends `signum` to the worker process at `address` after round `at`: SIGKILL (no goodbye to
    anyone), or SIGSTOP (it keeps its sockets and its place in the cluster but answers nothing
    until SIGCONT)."""

    def __init__(self, address: str, at: int, signum: int = signal.SIGKILL):
        self.address, self.at, self.signum = address, at, signum

    def after_iteration(self, model, epoch, evals_log):
        from distributed import get_worker

        if epoch == self.at and get_worker().address == self.address:
            os.kill(os.getpid(), self.signum)
        return False


def two_workers(kind: str):
    """A cluster of two worker processes: CPU workers, or dask-cuda workers on GPUs 0 and 1
    (the test skips without 2 GPUs)."""
    import distributed

    if kind == "cpu":
        return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")
    return dask_cuda.LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES="0,1", dashboard_address=None)
