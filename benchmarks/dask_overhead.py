"""What a Dask fit pays beyond training in process (developer tool).

    python benchmarks/dask_overhead.py --workers 1 --rows 10500000 --rounds 500 --repeats 3
    python benchmarks/dask_overhead.py --device cpu --smoke        # 1 CPU worker, 4,000 rows, 3 rounds

On examples/benchmark_dask_higgs.py's data (persisted cupy partitions, a LocalCUDACluster of
--workers GPUs; numpy partitions on a LocalCluster of --workers processes with --device
cpu), medians of --repeats of each, after one untimed warm-up fit:
- DaskGBClassifier.fit as a user calls it (verbose: a progress bar fed by rank 0);
- the same with verbose=False;
- its steps through the functional API: the labels' classes (dask unique), the
  DaskQuantileMatrix, daskgb.dask.train (verbose=False);
- and, with --workers 1, daskgb.train on the worker's own matrix in a plain task, and
  QuantileMatrix + train in this process on the same rows (on a GPU also the time a worker
  takes to give its cached device memory back after a fit).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def _train_in_task(params, local, rounds, give_back=False):
    """daskgb.train on a worker's QuantileMatrix in a plain task (no communicator, no job);
    with give_back (GPU), also the time of giving the device memory back at once (what a
    worker does once idle after a fit)."""
    import daskgb

    on_gpu = params["device"] == "cuda"
    if on_gpu:
        import cupy

        sync = cupy.cuda.runtime.deviceSynchronize
    else:
        def sync():
            pass

    sync()
    t = time.perf_counter()
    daskgb.train(params, local, rounds, verbose_eval=False)
    sync()
    t1 = time.perf_counter()
    if give_back and on_gpu:
        from daskgb.dask.plugin import _give_back_device_memory

        _give_back_device_memory()
    return t1 - t, time.perf_counter() - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--smoke", action="store_true", help="4,000 rows, 3 rounds, once each: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.rounds, args.repeats = 4_000, 3, 1

    import dask.array as da
    import numpy as np
    from benchmark_dask_higgs import fit_in_process, make_data
    from distributed import Client

    import daskgb
    import daskgb.dask as dd
    from daskgb.collective import stop_root
    from daskgb.dask import dashboard
    from daskgb.dask.worker import start_collective

    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256,
              "device": args.device}
    times: dict[str, list] = {}

    def timed(name, fn):
        t = time.perf_counter()
        out = fn()
        times.setdefault(name, []).append(time.perf_counter() - t)
        return out

    if args.device == "cuda":
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(args.workers)))
    else:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        X, y = make_data(client, args.rows, 8 * args.workers, exact=False, device=args.device)
        kw = dict(max_depth=args.depth, learning_rate=0.1, max_bin=256, client=client)
        daskgb.DaskGBClassifier(n_estimators=2, **kw).fit(X, y)  # compile, warm up
        for rep in range(args.repeats):
            timed("DaskGBClassifier.fit", lambda: daskgb.DaskGBClassifier(n_estimators=args.rounds, **kw).fit(X, y))
            timed("DaskGBClassifier.fit(verbose=False)",
                  lambda: daskgb.DaskGBClassifier(n_estimators=args.rounds, **kw).fit(X, y, verbose=False))
            timed("  classes (da.unique)", lambda: np.unique(da.unique(y).compute()))
            m = timed("  DaskQuantileMatrix", lambda: dd.DaskQuantileMatrix(client, X, y, max_bin=256))
            for step, took in m.timings.items():
                times.setdefault(f"    {step}", []).append(took)
            r = timed("  dd.train", lambda: dd.train(client, params, m, args.rounds, verbose_eval=False))
            if rep == 0:
                print(f"training path: {r['training_path']}", flush=True)
            if args.workers == 1:  # the worker's own matrix trained in a plain task: the worker's cost alone
                (a, local), = m._local.items()
                took, _none = client.submit(_train_in_task, params, local, args.rounds, workers=[a],
                                            pure=False).result()
                times.setdefault("  daskgb.train in a worker task", []).append(took)
                job = uuid.uuid4().hex
                timed("  start_collective round trip", lambda: client.submit(
                    start_collective, job, workers=[a], pure=False).result())
                client.submit(stop_root, job, workers=[a], pure=False).result()
                timed("  dashboard.register", lambda: dashboard.register(client))
            if args.workers == 1 and args.device == "cuda" and rep == args.repeats - 1:
                # last: it empties the pool the next fit would use
                _took, give_back = client.submit(_train_in_task, params, local, args.rounds, True, workers=[a],
                                                 pure=False).result()
                times.setdefault("  device memory given back after a fit", []).append(give_back)
            m.release()
        if args.workers == 1:
            for _ in range(args.repeats):
                r = fit_in_process(X, y, argparse.Namespace(depth=args.depth, rounds=args.rounds), device=args.device)
                times.setdefault("in process: QuantileMatrix + train", []).append(r["fit_s"])
                times.setdefault("  in process: QuantileMatrix", []).append(r["quantise_s"])
                times.setdefault("  in process: train", []).append(r["train_s"])
    print(f"\n{args.rows:,} rows, {args.workers} worker(s), {args.rounds} rounds, depth {args.depth}; "
          f"medians of {args.repeats}")
    for name, ts in times.items():
        print(f"{name:45s} {statistics.median(ts):7.3f} s   runs {[round(t, 3) for t in ts]}")


if __name__ == "__main__":
    main()
