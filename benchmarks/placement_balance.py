"""A Dask fit on partitions Dask left uneven, with and without moving them (developer tool).

    python benchmarks/placement_balance.py                 # the quickstart's rows, 2 CPU workers
    python benchmarks/placement_balance.py --smoke         # 2,000 rows, 3 rounds

The quickstart's shape (200K x 20, 5% missing, 7 partitions: six of 30K rows and one of 20K)
is placed on a LocalCluster of 2 workers x 1 thread as given by --placement (one worker index
a partition; the default is the 6-to-1 deal Dask made in one of three quickstart runs), then
fitted (DaskQuantileMatrix and train, depth 6, eta 0.3, 100 rounds, the training rows scored
with logloss every round) with the setting daskgb.dask.balance-rows at 1.1 (the default:
partitions move until the busiest worker holds <= 1.1x the mean rows) and at 0 (they stay),
alternating, --repeats times each. Prints each fit's rows per worker and seconds, the
medians, and whether both settings gave the same model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "dask"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--placement", default="0,0,0,0,0,0,1", help="worker index of each partition")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="2,000 rows, 3 rounds, one repeat")
    args = ap.parse_args(argv)

    import dask
    import distributed

    import daskgb.dask as dgb
    from placement import on_workers

    n, rounds, repeats = (2_000, 3, 1) if args.smoke else (200_000, args.rounds, args.repeats)
    placement = [int(p) for p in args.placement.split(",")]
    chunks = [n * 3 // 20] * (len(placement) - 1)
    chunks.append(n - sum(chunks))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 20)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    y = (Z[:, 0] + Z[:, 1] * Z[:, 2] + 2.0 * (Z[:, 3] > 0.5) + rng.logistic(size=n) > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.3, "device": "cpu", "eval_metric": "logloss"}
    times, models = {1.1: [], 0.0: []}, {}
    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            client.wait_for_workers(2)
            Xd = on_workers(client, X, chunks, placement, fresh=True)
            yd = on_workers(client, y, chunks, placement, fresh=True)
            Xd, yd = client.persist([Xd, yd])
            distributed.wait([Xd, yd])
            # An untimed fit first: the workers load the compiled loops.
            dgb.train(client, params, dgb.DaskQuantileMatrix(client, Xd, yd), 2, verbose_eval=False)
            for _ in range(repeats):
                for tolerance in times:
                    with dask.config.set({"daskgb.dask.balance-rows": tolerance}):
                        t = time.perf_counter()
                        dtrain = dgb.DaskQuantileMatrix(client, Xd, yd)
                        out = dgb.train(client, params, dtrain, rounds, evals=[(dtrain, "train")], verbose_eval=False)
                        elapsed = time.perf_counter() - t
                    times[tolerance].append(elapsed)
                    models[tolerance] = out["booster"].save_raw("json")
                    print(f"balance-rows {tolerance:g}: rows per worker {sorted(dtrain.rows_per_worker.values())}, "
                          f"fit {elapsed:.2f} s", flush=True)
    moved, stayed = (statistics.median(times[t]) for t in (1.1, 0.0))
    print(f"placement {placement}, {n:,} rows, {rounds} rounds: medians {moved:.2f} s (moved) against "
          f"{stayed:.2f} s (stayed), ratio {moved / stayed:.2f}; same model: {models[1.1] == models[0.0]}")


if __name__ == "__main__":
    main()
