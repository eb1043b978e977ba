"""NCCL allreduce time between GPUs of this host, through CuPy, at histogram-like sizes
(developer tool: what a tree level's histogram allreduce costs on a machine).

    python benchmarks/nccl_bandwidth.py --gpus 2
    python benchmarks/nccl_bandwidth.py --smoke                    # the GPUs there are, up to 2; one size

One process per GPU; int64 sums; median of --reps after a warm-up; prints the time and
the bus bandwidth (NCCL's convention: bytes * 2 * (n - 1) / n / time).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time


def _rank(rank, n, uid, sizes, reps, out):
    import cupy
    from cupy.cuda import nccl

    cupy.cuda.Device(rank).use()
    comm = nccl.NcclCommunicator(n, uid, rank)
    stream = cupy.cuda.get_current_stream()
    rows = []
    for nbytes in sizes:
        x = cupy.ones(nbytes // 8, dtype=cupy.int64)
        y = cupy.empty_like(x)
        times = []
        for i in range(reps + 2):
            stream.synchronize()
            t = time.perf_counter()
            comm.allReduce(x.data.ptr, y.data.ptr, x.size, nccl.NCCL_INT64, nccl.NCCL_SUM, stream.ptr)
            stream.synchronize()
            if i >= 2:
                times.append(time.perf_counter() - t)
        rows.append((nbytes, statistics.median(times)))
    if rank == 0:
        out.put(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sizes", default="114688,1835008,7340032,29360128", help="bytes")
    ap.add_argument("--smoke", action="store_true", help="up to 2 GPUs (those there are), one size, 2 reps: that "
                                                          "the script runs")
    args = ap.parse_args()
    import cupy
    from cupy.cuda import nccl

    if args.smoke:
        args.gpus, args.reps, args.sizes = min(args.gpus, cupy.cuda.runtime.getDeviceCount()), 2, "114688"

    sizes = [int(s) for s in args.sizes.split(",")]
    uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, args.gpus, uid, sizes, args.reps, out)) for r in range(args.gpus)]
    for p in procs:
        p.start()
    rows = out.get(timeout=300)
    for p in procs:
        p.join()
    n = args.gpus
    print(f"| bytes | allreduce ({n} GPUs) | bus bandwidth |")
    print("| --- | --- | --- |")
    for nbytes, sec in rows:
        print(f"| {nbytes:,} | {1e6 * sec:.0f} us | {nbytes * 2 * (n - 1) / n / sec / 1e9:.1f} GB/s |")


if __name__ == "__main__":
    main()
