"""What watching an eval set with auc costs a Dask fit (developer tool).

    python benchmarks/eval_auc_dask.py --device cpu --workers 2 --rows 100000 --eval-rows 400000 --rounds 30
    python benchmarks/eval_auc_dask.py --workers 2 --rows 10500000 --eval-rows 500000 --rounds 500   # 2 GPUs
    python benchmarks/eval_auc_dask.py --device cpu --smoke

Higgs-shaped rows (examples/synthetic.py's make_higgs), --rows for training and --eval-rows
for the eval set, each split evenly over --workers (a LocalCUDACluster of that many GPUs, or
a LocalCluster of CPU processes with --device cpu). daskgb.dask.train runs --rounds rounds
without an eval set, then watching the eval set with each of --metrics (every round), the
median of --repeats fits each after one untimed warm-up. The AUCs' rows meet on one rank
each round (metric.py's _ranking_parts): this is the figure that shows what that costs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def _persisted(client, a, workers: int, device: str):
    """a as a dask array of one block per worker, persisted (on the GPUs as cupy arrays)."""
    import dask.array as da

    rows = -(-a.shape[0] // workers)
    arr = da.from_array(a, chunks=(rows,) + a.shape[1:])
    if device == "cuda":
        import cupy

        arr = arr.map_blocks(cupy.asarray)
    return client.persist(arr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--eval-rows", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--max-depth", type=int, default=8)
    ap.add_argument("--metrics", default="auc,aucpr", help="comma-separated; each is timed on its own")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="2 workers, 4,000 + 2,000 rows, 3 rounds, 1 repeat")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.rows, args.eval_rows, args.rounds, args.repeats = 2, 4_000, 2_000, 3, 1

    import distributed

    import daskgb.dask as dgb
    from synthetic import make_higgs

    import numpy as np

    X, y = make_higgs(np, args.rows + args.eval_rows, seed=7)
    X, y, Xv, yv = X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :]
    if args.device == "cuda":
        import dask_cuda

        cluster = dask_cuda.LocalCUDACluster(n_workers=args.workers, dashboard_address=None)
    else:
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(args.workers)
        dtrain = dgb.DaskQuantileMatrix(client, _persisted(client, X, args.workers, args.device),
                                        _persisted(client, y, args.workers, args.device))
        dvalid = dgb.DaskQuantileMatrix(client, _persisted(client, Xv, args.workers, args.device),
                                        _persisted(client, yv, args.workers, args.device), ref=dtrain)
        base = {"objective": "binary:logistic", "max_depth": args.max_depth, "device": args.device}
        print(f"{args.workers} worker(s), device {args.device}: {args.rows:,} training rows, {args.eval_rows:,} "
              f"eval rows, {args.rounds} rounds, depth {args.max_depth}, median of {args.repeats}")
        print("| eval set | median | runs | metric at the last round | / without |")
        print("|---|---|---|---|---|")
        without = None
        for metric in [None] + [m for m in args.metrics.split(",") if m]:
            params = dict(base, **({"eval_metric": metric} if metric else {}))
            evals = [(dvalid, "v")] if metric else []
            dgb.train(client, params, dtrain, min(args.rounds, 3), evals=evals, verbose_eval=False)  # warm-up
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                out = dgb.train(client, params, dtrain, args.rounds, evals=evals, verbose_eval=False)
                times.append(time.perf_counter() - t)
            median = statistics.median(times)
            without = median if metric is None else without
            value = f"{out['history']['v'][metric][-1]:.5f}" if metric else ""
            runs = ", ".join(f"{t:.3f}" for t in times)
            print(f"| {metric or 'none'} | {median:.3f} s | {runs} | {value} | {median / without:.2f} |")


if __name__ == "__main__":
    main()
