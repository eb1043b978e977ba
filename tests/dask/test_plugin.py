"""daskgb's per-worker state (daskgb.dask.plugin): one WorkerState per worker, owned by a WorkerPlugin
that the entry points register once per client, freed by the plugin's teardown.

The workers here are threads of the test's process (LocalCluster(processes=False)), so that
the test can hold a worker's state and look at it after the teardown.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import daskgb.dask as dgb
from daskgb.collective.state import _PROCESS
from daskgb.dask import plugin
from daskgb.dask.plugin import PLUGIN_NAME

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.filterwarnings("ignore:Port 8787 is already in use:UserWarning")


@pytest.fixture
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            yield c, cl


def _states(cluster) -> dict:
    return {w.address: w.plugins[PLUGIN_NAME].state for w in cluster.workers.values()}


def test_entry_points_install_one_state_per_worker_once(cluster, monkeypatch):
    c, client = cluster
    rng = np.random.default_rng(0)
    X = da.from_array(rng.normal(size=(400, 3)).astype(np.float32), chunks=200)
    y = da.from_array((rng.random(400) > 0.5).astype(np.float32), chunks=200)
    dtrain = dgb.DaskQuantileMatrix(client, X, y)  # registers the plugin
    states = _states(c)
    assert len({id(s) for s in states.values()}) == 2  # each worker its own, in one process
    assert all(isinstance(s, plugin.WorkerState) for s in states.values())
    registered = []
    real = client.register_plugin
    monkeypatch.setattr(client, "register_plugin", lambda p, *a, **k: registered.append(p) or real(p, *a, **k))
    dgb.train(client, {"max_depth": 2}, dtrain, 2, verbose_eval=False)
    dgb.predict(client, dgb.train(client, {"max_depth": 2}, dtrain, 1, verbose_eval=False)["booster"], X).compute()
    dgb.release_nccl(client)
    # Once per client: no scheduler round trip at each fit (the dashboard's plugin is another story).
    assert not [p for p in registered if isinstance(p, plugin.DaskgbWorkerPlugin)]
    assert _states(c) == states  # the same objects: state lives as long as the worker


def test_teardown_frees_what_the_state_holds(cluster, monkeypatch, settings):
    c, client = cluster
    plugin.register(client)
    a = sorted(w.address for w in c.workers.values())[0]
    state = _states(c)[a]
    job = f"test-{uuid.uuid4().hex}"
    # A rendezvous left listening (its rank 0 never came), in the worker's state, not the process's.
    from daskgb.dask.worker import start_collective

    root = client.submit(start_collective, job, workers=[a], pure=False).result()
    assert root and job in state.collective.roots and job not in _PROCESS.roots

    class Fake:
        aborted = 0

        def abort(self):
            Fake.aborted += 1

    state.collective.kept_nccl.keep(0, ("key", "generation", Fake()))
    # A give-back waiting for the worker to idle.
    given = []
    monkeypatch.setattr(plugin, "_current_device", lambda: 0)
    monkeypatch.setattr(plugin, "_give_back_device_memory", lambda device=None: given.append(device))
    settings({"worker.give-back-after": 60})
    state.give_back_device_memory_when_idle()
    assert state._waiting

    client.unregister_worker_plugin(PLUGIN_NAME)
    assert all(PLUGIN_NAME not in w.plugins for w in c.workers.values())
    assert state.collective.roots == {} and Fake.aborted == 1 and len(state.collective.kept_nccl) == 0
    assert not state._waiting and given == []
    # A fit that ends on the closing worker keeps nothing there.
    state.collective.kept_nccl.keep(0, ("key", "generation", Fake()))
    assert Fake.aborted == 2 and len(state.collective.kept_nccl) == 0
