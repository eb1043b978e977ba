"""Latency of daskgb's collectives between the GPUs of this host (developer tool).

    python benchmarks/nccl_probe.py            # LocalCUDACluster over all GPUs
    python benchmarks/nccl_probe.py --smoke    # two sizes, 5 calls each

Each worker joins a DaskCommunicator + NcclCommunicator as training does and
times allreduce of int64 device arrays (histogram sizes) and a small host array.
GPU only; on one GPU no NCCL call is made (a rank alone has nothing to reduce), so the
figures mean something from two GPUs on.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

SIZES = (16, 16 << 10, 1 << 20, 8 << 20)


def probe(job, root, rank, world, sizes=SIZES, calls=50):
    import cupy
    import numpy as np

    from daskgb.collective import DaskCommunicator, NcclCommunicator

    comm = NcclCommunicator(DaskCommunicator.connect(job, root, rank, world))
    out = {}
    with comm:
        for nbytes in sizes:
            x = cupy.ones(nbytes // 8, dtype=cupy.int64)
            for _ in range(5):
                comm.allreduce(x)
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            for _ in range(calls):
                y = comm.allreduce(x)
            cupy.cuda.runtime.deviceSynchronize()
            out[f"nccl_{nbytes}B_us"] = 1e6 * (time.perf_counter() - t) / calls
            assert int(y[0]) == world
        h = np.ones(2)
        t = time.perf_counter()
        for _ in range(calls):
            comm.allreduce(h)
        out["host_16B_us"] = 1e6 * (time.perf_counter() - t) / calls
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="two sizes, 5 calls each: that the script runs")
    args = ap.parse_args()
    sizes, calls = (SIZES[:2], 5) if args.smoke else (SIZES, 50)

    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from daskgb.dask.watch import live_workers
    from daskgb.dask.worker import start_collective

    with LocalCUDACluster(dashboard_address=None) as cluster, Client(cluster) as client:
        workers = sorted(live_workers(client))
        job = uuid.uuid4().hex
        root = client.submit(start_collective, job, workers=[workers[0]], pure=False).result()
        futs = [client.submit(probe, job, root, r, len(workers), sizes, calls, workers=[w], pure=False)
                for r, w in enumerate(workers)]
        print(json.dumps(client.gather(futs), indent=1))


if __name__ == "__main__":
    main()
