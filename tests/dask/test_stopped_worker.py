"""A worker stopped (SIGSTOP) mid-fit, alive to the scheduler but silent: the fit fails within the
collective timeout with an error naming it, and once it resumes the next fit on the same cluster
and rows trains the unbroken model (issue 25; the GPU case needs 2 GPUs, NCCL's watchdog then
being what gives up on the silent peer)."""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np
import pytest

import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")
pytest.importorskip("dask.array")

from faults import SignalWorkerAt, two_workers  # noqa: E402
from placement import on_workers  # noqa: E402

ROUNDS, STOP_AT = 30, 5
# Short enough for a test, long enough that a loaded CI machine's healthy ranks never hit it.
TIMEOUT_S = 10.0
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "seed": 5}


def _data(n=4000, seed=23):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=n) > 0).astype(np.float32)
    return X, y


@pytest.mark.parametrize("kind", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_stopped_worker_is_named_within_the_timeout_and_the_next_fit_trains(kind):
    import dask

    X, y = _data()
    params = {**PARAMS, "device": kind}
    # The setting reaches the worker processes through the nannies, which pass on the config.
    with dask.config.set({"distributed.scheduler.work-stealing": False, "daskgb.collective.timeout": TIMEOUT_S}):
        with two_workers(kind) as cluster, distributed.Client(cluster) as client:
            client.wait_for_workers(2)
            half = X.shape[0] // 2
            dtrain = dgb.DaskQuantileMatrix(client, on_workers(client, X, [half, half], [0, 1], fresh=True),
                                            on_workers(client, y, [half, half], [0, 1], fresh=True))
            unbroken = dgb.train(client, params, dtrain, ROUNDS, verbose_eval=False)

            victim = dtrain.workers[1]
            pid = client.run(os.getpid, workers=[victim])[victim]
            started = time.monotonic()
            try:
                with pytest.raises(dgb.WorkerUnresponsiveError) as info:
                    dgb.train(client, params, dtrain, ROUNDS, verbose_eval=False,
                              callbacks=[SignalWorkerAt(victim, STOP_AT, signal.SIGSTOP)])
                elapsed = time.monotonic() - started
            finally:
                os.kill(pid, signal.SIGCONT)
            message = str(info.value)
            # The peers give up at the timeout; the client then names the silent worker at once,
            # without the grace it gives a rank to report its own error (a stopped one never does).
            assert elapsed < TIMEOUT_S + 8, f"the error took {elapsed:.1f} s ({message})"
            assert info.value.workers == [victim], message
            assert victim in message and "rank 1" in message and "stopped answering" in message, message

            # Resumed, the worker learns of the failure, its task ends, and the next fit trains.
            again = dgb.train(client, params, dtrain, ROUNDS, verbose_eval=False)
            assert json.dumps(again["booster"].to_dict()) == json.dumps(unbroken["booster"].to_dict())
