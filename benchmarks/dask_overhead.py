"""What a Dask fit pays beyond training in process (developer tool).

    python ci/dask_overhead.py --workers 1 --rows 10500000 --rounds 500 --repeats 3

On examples/benchmark_dask_higgs.py's data (persisted cupy partitions, a LocalCUDACluster of
--workers GPUs), medians of --repeats of each, after one untimed warm-up fit:
- DaskGBClassifier.fit as a user calls it (verbose: a progress bar fed by rank 0);
- the same with verbose=False;
- its steps through the functional API: the labels' classes (dask unique), the
  DaskQuantileMatrix, daskgb.dask.train (verbose=False);
- and, with --workers 1, daskgb.train on the worker's own matrix in a plain task, and
  QuantileMatrix + train in this process on the same rows.
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
    with give_back, also the time of giving the device memory back at once (what a worker
    does once idle after a fit)."""
    import cupy

    import daskgb

    from daskgb.dask.plugin import _give_back_device_memory

    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    daskgb.train(params, local, rounds, verbose_eval=False)
    cupy.cuda.runtime.deviceSynchronize()
    t1 = time.perf_counter()
    if give_back:
        _give_back_device_memory()
    return t1 - t, time.perf_counter() - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import dask.array as da
    import numpy as np
    from benchmark_dask_higgs import fit_in_process, make_data
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import daskgb
    import daskgb.dask as dd
    from daskgb.collective import stop_root
    from daskgb.dask import dashboard
    from daskgb.dask.worker import start_collective

    devices = ",".join(str(i) for i in range(args.workers))
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256, "device": "cuda"}
    times: dict[str, list] = {}

    def timed(name, fn):
        t = time.perf_counter()
        out = fn()
        times.setdefault(name, []).append(time.perf_counter() - t)
        return out

    with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices) as cluster, Client(cluster) as client:
        X, y = make_data(client, args.rows, 8 * args.workers, exact=False)
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
            timed("  dd.train", lambda: dd.train(client, params, m, args.rounds, verbose_eval=False))
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
            if args.workers == 1 and rep == args.repeats - 1:  # last: it empties the pool the next fit would use
                _took, give_back = client.submit(_train_in_task, params, local, args.rounds, True, workers=[a],
                                             pure=False).result()
                times.setdefault("  device memory given back after a fit", []).append(give_back)
            m.release()
        if args.workers == 1:
            for _ in range(args.repeats):
                r = fit_in_process(X, y, argparse.Namespace(depth=args.depth, rounds=args.rounds))
                times.setdefault("in process: QuantileMatrix + train", []).append(r["fit_s"])
                times.setdefault("  in process: QuantileMatrix", []).append(r["quantise_s"])
                times.setdefault("  in process: train", []).append(r["train_s"])
    print(f"\n{args.rows:,} rows, {args.workers} worker(s), {args.rounds} rounds, depth {args.depth}; "
          f"medians of {args.repeats}")
    for name, ts in times.items():
        print(f"{name:45s} {statistics.median(ts):7.3f} s   runs {[round(t, 3) for t in ts]}")


if __name__ == "__main__":
    main()
