"""Latency of daskgb's collectives between the GPUs of this host (developer tool).

    python ci/nccl_probe.py            # LocalCUDACluster over all GPUs

Each worker joins a DaskCommunicator + NcclCommunicator as training does and
times allreduce of int64 device arrays (histogram sizes) and a small host array.
"""

from __future__ import annotations

import json
import time
import uuid


def probe(job, root, rank, world):
    import cupy
    import numpy as np

    from daskgb.collective import DaskCommunicator, NcclCommunicator

    comm = NcclCommunicator(DaskCommunicator.connect(job, root, rank, world))
    out = {}
    with comm:
        for nbytes in (16, 16 << 10, 1 << 20, 8 << 20):
            x = cupy.ones(nbytes // 8, dtype=cupy.int64)
            for _ in range(5):
                comm.allreduce(x)
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            for _ in range(50):
                y = comm.allreduce(x)
            cupy.cuda.runtime.deviceSynchronize()
            out[f"nccl_{nbytes}B_us"] = 1e6 * (time.perf_counter() - t) / 50
            assert int(y[0]) == world
        h = np.ones(2)
        t = time.perf_counter()
        for _ in range(50):
            comm.allreduce(h)
        out["host_16B_us"] = 1e6 * (time.perf_counter() - t) / 50
    return out


def main():
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from daskgb.dask.watch import live_workers

    from daskgb.dask.worker import start_collective

    with LocalCUDACluster() as cluster, Client(cluster) as client:
        workers = sorted(live_workers(client))
        job = uuid.uuid4().hex
        root = client.submit(start_collective, job, workers=[workers[0]], pure=False).result()
        futs = [client.submit(probe, job, root, r, len(workers), workers=[w], pure=False)
                for r, w in enumerate(workers)]
        print(json.dumps(client.gather(futs), indent=1))


if __name__ == "__main__":
    main()
