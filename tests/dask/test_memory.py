"""Repeated fits leave nothing behind on the workers: no daskgb object stays alive and no
key stays in a worker's memory once a fit (or a failed fit) is over.

Resident set size is not asserted on: Dask's own bounded bookkeeping (the profiler's
history above all) grows it for the first hour of a worker's life, fit or no fit. What a
fit could leak is daskgb's: matrices, boosters, trees, communicators, arrays held by them.
benchmarks/repeated_fits.py prints the memory figures over 100 fits (device memory on GPUs).
"""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb.callback import TrainingCallback

pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


def _daskgb_objects(dask_worker):
    """What a worker holds: live daskgb objects by type, its keys, and running training jobs."""
    import collections
    import enum
    import gc
    import sys

    from daskgb.dask.plugin import PLUGIN_NAME

    gc.collect()
    # A module's constants (layouts.py's structs, training/plan.py's paths: enum members) live
    # as long as their module, not a fit's.
    constants = {id(v) for name, m in list(sys.modules.items()) if name.startswith("daskgb")
                 for v in vars(m).values()}
    live = collections.Counter(type(o).__name__ for o in gc.get_objects()
                               if str(type(o).__dict__.get("__module__", "")).startswith("daskgb")
                               and not isinstance(o, enum.Enum) and id(o) not in constants)
    jobs = dask_worker.plugins[PLUGIN_NAME].state.running
    return {"objects": dict(live), "keys": sorted(str(k) for k in dask_worker.data), "jobs": len(jobs)}


def _summary(state: dict) -> dict:
    """What the cluster holds, whichever worker holds it: Dask may move a block of X from one
    worker to another between fits (a dependency fetched, then the first copy dropped)."""
    return {"objects": {a: s["objects"] for a, s in state.items()},
            "keys": sorted({k for s in state.values() for k in s["keys"]}),
            "jobs": sum(s["jobs"] for s in state.values())}


class _FailAt(TrainingCallback):
    def __init__(self, at):
        self.at = at

    def after_iteration(self, model, epoch, evals_log):
        if epoch == self.at:
            raise RuntimeError(f"planned failure in round {epoch}")
        return False


def _settled(client, before, timeout=15.0):
    """The workers' state once the client's releases have reached them (they travel
    asynchronously: client -> scheduler -> workers), or what it is at the timeout."""
    import time

    deadline = time.monotonic() + timeout
    while (now := _summary(client.run(_daskgb_objects))) != before and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


def test_repeated_fits_leave_nothing_behind(client):
    from distributed import wait

    from daskgb.dask.plugin import register

    rng = np.random.default_rng(0)
    Xn = rng.normal(size=(4000, 8)).astype(np.float32)
    yn = (Xn[:, 0] + Xn[:, 1] * Xn[:, 2] > 0).astype(np.float32)
    X, y = client.persist([da.from_array(Xn, chunks=(1000, 8)), da.from_array(yn, chunks=1000)])
    wait([X, y])
    register(client)  # each worker's daskgb state (dask/plugin.py) lives as long as the worker
    before = _summary(client.run(_daskgb_objects))
    assert len(before["keys"]) == 8  # X's and y's blocks, nothing else
    # The plugin's state (the collective's process-wide one, collective/state.py, is a module
    # constant, as are layouts.py's structs: not counted).
    state = {"DaskgbWorkerPlugin": 1, "WorkerState": 1, "CollectiveState": 1, "KeptNccl": 2}
    assert all(v == state for v in before["objects"].values()) and before["jobs"] == 0
    for i in range(12):
        model = daskgb.DaskGBClassifier(n_estimators=5, max_depth=4, device="cpu", client=client)
        model.fit(X, y, verbose=False)
        model.predict_proba(X).compute()
        del model
        after = _settled(client, before)
        assert after == before, f"after fit {i + 1}: {after} (before the fits: {before})"
    model = daskgb.DaskGBClassifier(n_estimators=10, max_depth=4, device="cpu", client=client,
                                    callbacks=[_FailAt(3)])
    with pytest.raises(RuntimeError, match="planned failure in round 3"):
        model.fit(X, y, verbose=False)
    del model
    after = _settled(client, before)
    assert after == before, f"after a failed fit: {after} (before the fits: {before})"
