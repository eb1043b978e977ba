"""Memory over many fits on one cluster (issue 8): device and host memory after each fit.

    python benchmarks/repeated_fits.py --fits 100                 # LocalCUDACluster, one worker per GPU
    python benchmarks/repeated_fits.py --fits 30 --cpu            # LocalCluster of 2 CPU workers
    python benchmarks/repeated_fits.py --cpu --smoke              # 2 fits of 4,000 rows, 3 rounds

Each fit is a DaskGBClassifier.fit on the same dask arrays (a DaskQuantileMatrix is built and
dropped each time, as a user's loop does), then a predict. After every fit each worker
reports the bytes in use in CuPy's memory pool, the device's used bytes (cudaMemGetInfo:
total - free, which counts what the pool holds cached too) and its resident set size.
After the last fit one more fit is made to fail mid-training (a callback raises), and the
same figures are taken again: a failed fit must give its device memory back too.
Prints one JSON line a fit and a summary with last/first ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def worker_memory(dask_worker):
    import gc
    import os

    gc.collect()
    out = {"rss": _rss(os.getpid()), "keys": len(dask_worker.data)}
    try:
        import cupy

        pool = cupy.get_default_memory_pool()
        free, total = cupy.cuda.runtime.memGetInfo()
        out.update(pool_used=pool.used_bytes(), pool_held=pool.total_bytes(), device_used=total - free)
    except Exception:
        pass
    return out


def settled(client, baseline, timeout=10.0):
    """The workers' figures once the fit's keys are gone from them (the client's releases
    reach the workers asynchronously), or at the timeout. Counted over all workers: a block
    of X or y may end a fit on another worker than it started on (seen on a CPU LocalCluster,
    where waiting per worker then ran into the timeout every fit), and it is no key of the fit's."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        mem = client.run(worker_memory)
        if sum(m["keys"] for m in mem.values()) <= sum(baseline.values()) or time.monotonic() > deadline:
            return mem
        time.sleep(0.1)


def _rss(pid) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class FailAt:
    """A training callback that raises after round `at` (a fit that fails mid-training)."""

    def __new__(cls, at):
        from daskgb.callback import TrainingCallback

        class _Fail(TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                if epoch == at:
                    raise RuntimeError(f"planned failure in round {epoch}")
                return False

        return _Fail()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fits", type=int, default=100)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="2 fits of 4,000 rows and 3 rounds: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.fits, args.rows, args.rounds = 2, 4_000, 3

    import dask.array as da
    import dask.config
    from distributed import Client, LocalCluster, wait

    from daskgb import DaskGBClassifier

    # Each fit's figures are those of workers that gave their cached device memory back (a
    # worker otherwise waits 2 s for a next fit first: the setting worker.give-back-after);
    # the workers take this process's dask.config as they start.
    dask.config.set({"daskgb.worker.give-back-after": 0})
    if args.cpu:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    else:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(dashboard_address=None)
    with cluster, Client(cluster) as client:
        rng = da.random.default_rng(0)
        X = rng.standard_normal((args.rows, 20), chunks=(args.rows // 8, 20)).astype("float32")
        y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype("float32")
        if not args.cpu:
            import cupy

            X, y = X.map_blocks(cupy.asarray), y.map_blocks(cupy.asarray)
        X, y = client.persist([X, y])
        wait([X, y])
        baseline = {a: m["keys"] for a, m in client.run(worker_memory).items()}  # X's and y's blocks
        device = "cpu" if args.cpu else "cuda"
        rows = []
        for i in range(args.fits):
            model = DaskGBClassifier(n_estimators=args.rounds, max_depth=6, device=device, client=client)
            model.fit(X, y, verbose=False)
            model.predict_proba(X).compute()
            del model
            mem = settled(client, baseline)
            rows.append(mem)
            print(json.dumps({"fit": i + 1, **{a: m for a, m in sorted(mem.items())}}), flush=True)
        failed = None
        try:
            model = DaskGBClassifier(n_estimators=args.rounds, max_depth=6, device=device, client=client,
                                     callbacks=[FailAt(args.rounds // 2)])
            model.fit(X, y, verbose=False)
        except Exception as exc:
            failed = f"{type(exc).__name__}: {str(exc)[:120]}"
        del model
        after_failure = settled(client, baseline)
        print(json.dumps({"after a failed fit": after_failure, "error": failed}), flush=True)

    first, last = rows[0], rows[-1]
    print(f"\n| worker | figure | after fit 1 | after fit {args.fits} | ratio | after a failed fit |")
    print("| --- | --- | --- | --- | --- | --- |")
    for a in sorted(first):
        for k in sorted(first[a]):
            f, last_v, fail_v = first[a][k], last[a][k], after_failure.get(a, {}).get(k)
            ratio = f"{last_v / f:.3f}" if f else "-"

            def show(v, k=k):
                return "" if v is None else (str(v) if k == "keys" else f"{v / 2**20:.1f} MiB")

            print(f"| {a} | {k} | {show(f)} | {show(last_v)} | {ratio} | {show(fail_v)} |")


if __name__ == "__main__":
    main()
