"""Higgs-shaped training through Dask: daskgb's DaskGBClassifier against xgboost.dask's DaskXGBClassifier,
on the same LocalCUDACluster and the same persisted cupy partitions, in one run.

    python examples/benchmark_dask_higgs.py                 # 1 worker (GPU 0), 10.5M x 28, depth 8, 500 rounds
    python examples/benchmark_dask_higgs.py --workers 2 --compare-one-worker --exact
    python examples/benchmark_dask_higgs.py --eval-set --predict   # a user's fit: eval set watched, then predict

--exact rounds every feature to at most 200 distinct values, so cuts are exact and
models trained with 1 and 2 workers must be equal; --compare-one-worker trains
daskgb on a 1-worker cluster too and reports the largest prediction difference.
--eval-set has both libraries watch the 500K test rows with auc every round (fit's
eval_set); --predict times daskgb.dask.predict of the training rows against the same
booster's in-process predict of them on GPU 0 (both after a warm-up, medians of 3).
Prints JSON: fit times (the median of --repeats fits of each library after an untimed warm-up,
and each run), ratio, test AUC of both, and what went through NCCL.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def make_data(client, rows, n_chunks, exact, seed=2017, device="cuda"):
    """(X, y) dask arrays of Higgs-shaped rows, persisted on the workers: cupy partitions
    (numpy ones with device="cpu", for the CPU runs of benchmarks/)."""
    import dask.array as da
    from synthetic import make_higgs

    def block(i, n):
        from daskgb.backend import get_backend

        xp = get_backend(device).xp
        X, y = make_higgs(xp, n, seed + i)
        if exact:
            X = xp.round(xp.clip(X, -5, 5) * 20) / 20  # <= 201 distinct values per feature
        return xp.concatenate([X, y[:, None]], axis=1)

    if device == "cpu":
        meta = np.empty((0, 29), np.float32)
    else:
        import cupy

        meta = cupy.empty((0, 29), np.float32)

    import dask
    from distributed import wait

    from daskgb.dask.watch import live_workers

    # Partitions dealt in runs of neighbours, the same number to every worker, so every GPU holds
    # as many rows: both libraries train rows where they live, and an uneven deal would time the
    # most loaded worker, not the method. Runs, as Dask's scheduler places a collection's
    # sibling partitions together (co-assigning root tasks); a worker holding a run merges its
    # partitions' sketches itself (dask/data.py _local_summary).
    workers = sorted(live_workers(client))
    sizes = [rows // n_chunks + (i < rows % n_chunks) for i in range(n_chunks)]
    parts = []
    for i, n in enumerate(sizes):
        with dask.annotate(workers=[workers[i * len(workers) // n_chunks]], allow_other_workers=False):
            part = da.from_delayed(dask.delayed(block)(i, n), shape=(n, 29), dtype=np.float32, meta=meta)
            parts.append(client.persist(part, optimize_graph=False))
    wait(parts)
    Xy = da.concatenate(parts, axis=0)
    return Xy[:, :28], Xy[:, 28]


def fit_daskgb(client, X, y, args, eval_set=None):
    import daskgb

    # Untimed warm-up of two rounds on all rows: every worker compiles its CUDA kernels once
    # (NVRTC, then CuPy's disk cache); the timed fit measures training, as XGBoost's has
    # nothing to compile. (A slice would warm only the workers holding it.)
    kw = dict(max_depth=args.depth, learning_rate=0.1, max_bin=256, client=client)
    if eval_set is not None:
        kw["eval_metric"] = "auc"
    daskgb.DaskGBClassifier(n_estimators=2, **kw).fit(X, y, eval_set=eval_set)
    times = []
    for _ in range(args.repeats):
        clf = daskgb.DaskGBClassifier(n_estimators=args.rounds, **kw)
        t = time.perf_counter()
        clf.fit(X, y, eval_set=eval_set)
        times.append(time.perf_counter() - t)
    return clf, statistics.median(times), times


def time_predict(client, booster, X):
    """(daskgb.dask.predict of X's rows, in-process Booster.predict of the same rows gathered
    to this process's GPU): medians of 3 after a warm-up, seconds."""
    import statistics

    import cupy

    import daskgb.dask as dd

    def median(fn):
        fn()
        times = []
        for _ in range(3):
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            fn()
            cupy.cuda.runtime.deviceSynchronize()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    from distributed import wait

    # Predictions kept where they are made (persisted on the workers), as the in-process ones stay on the GPU.
    on_dask = median(lambda: wait(dd.predict(client, booster, X).persist()))
    Xh = X.compute()
    in_process = median(lambda: booster.predict(Xh))
    return {"dask_predict_s": on_dask, "in_process_predict_s": in_process, "ratio": on_dask / in_process}


def fit_in_process(X, y, args, device="cuda"):
    """daskgb without Dask on the same rows: QuantileMatrix and train, as fit does them."""
    import daskgb

    def sync():
        if device == "cuda":
            import cupy

            cupy.cuda.runtime.deviceSynchronize()

    Xh, yh = X.compute(), y.compute()
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256, "device": device}
    daskgb.train(params, daskgb.QuantileMatrix(Xh[:200_000], yh[:200_000], device=device), 2)  # warm-up
    sync()
    t = time.perf_counter()
    m = daskgb.QuantileMatrix(Xh, yh, device=device)
    sync()
    t1 = time.perf_counter()
    booster = daskgb.train(params, m, args.rounds)
    sync()
    t2 = time.perf_counter()
    del booster, Xh, yh, m
    return {"fit_s": t2 - t, "quantise_s": t1 - t, "train_s": t2 - t1}


def phases_dask(client, X, y, args):
    """The Dask fit's two phases through the functional API: DaskQuantileMatrix, then train."""
    import daskgb.dask as dd

    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256, "device": "cuda"}
    t = time.perf_counter()
    m = dd.DaskQuantileMatrix(client, X, y, max_bin=256)
    t1 = time.perf_counter()
    dd.train(client, params, m, args.rounds)
    t2 = time.perf_counter()
    return {"quantise_s": t1 - t, "train_s": t2 - t1,
            "quantise_steps_s": {k: round(v, 3) for k, v in m.timings.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="timed fits of each library; the median is reported")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--compare-one-worker", action="store_true")
    ap.add_argument("--skip-xgboost", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--eval-set", action="store_true", help="both fits watch the test rows with auc every round")
    ap.add_argument("--predict", action="store_true", help="time daskgb.dask.predict against in-process predict")
    ap.add_argument("--in-process", action="store_true",
                    help="also train in this process on the same rows (gathered to GPU 0), QuantileMatrix included")
    args = ap.parse_args()

    import cupy
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from daskgb.metric import auc_of

    devices = ",".join(str(i) for i in range(args.workers))
    res = {"rows": args.rows, "rounds": args.rounds, "depth": args.depth, "workers": args.workers,
           "exact": args.exact}
    with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices) as cluster, Client(cluster) as client:
        X, y = make_data(client, args.rows, args.chunks, args.exact)
        n_test = 500_000
        Xt, yt = make_data(client, n_test, 2, args.exact) if not args.exact else (X[:n_test], y[:n_test])
        eval_set = [(Xt, yt)] if args.eval_set else None
        res["eval_set"] = bool(args.eval_set)
        clf, fit_s, runs = fit_daskgb(client, X, y, args, eval_set)
        res["training_path"] = clf.get_booster().attr("training_path")
        if args.predict:
            res["predict"] = time_predict(client, clf.get_booster(), X)
        if args.in_process:
            res["dask_phases"] = phases_dask(client, X, y, args)
            res["in_process"] = fit_in_process(X, y, args)
            res["dask_over_in_process"] = fit_s / res["in_process"]["fit_s"]
        p = clf.predict_proba(Xt)[:, 1].compute()
        yt_h = cupy.asnumpy(yt.compute())
        res["daskgb"] = {"fit_s": fit_s, "runs_s": runs, "auc": auc_of(yt_h, cupy.asnumpy(p)),
                         "collective": getattr(clf, "_collective", None)}
        sample = Xt[:100_000].compute()
        ours_pred = cupy.asnumpy(clf.get_booster().predict(sample))
        if not args.skip_xgboost:
            from xgboost import dask as dxgb

            xclf = dxgb.DaskXGBClassifier(n_estimators=args.rounds, max_depth=args.depth, learning_rate=0.1,
                                          max_bin=256, tree_method="hist", device="cuda",
                                          eval_metric="auc" if args.eval_set else None)
            xclf.client = client
            warm = dxgb.DaskXGBClassifier(n_estimators=2, max_depth=args.depth, tree_method="hist", device="cuda")
            warm.client = client
            warm.fit(X[:200_000], y[:200_000])
            xtimes = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                xclf.fit(X, y, eval_set=eval_set, verbose=False)
                xtimes.append(time.perf_counter() - t)
            xfit = statistics.median(xtimes)
            px = xclf.predict_proba(Xt)[:, 1].compute()
            res["xgboost_dask"] = {"fit_s": xfit, "runs_s": xtimes, "auc": auc_of(yt_h, cupy.asnumpy(px))}
            res["fit_time_ratio"] = fit_s / xfit
    if args.compare_one_worker and args.workers > 1:
        with LocalCUDACluster(CUDA_VISIBLE_DEVICES="0") as cluster, Client(cluster) as client:
            X, y = make_data(client, args.rows, args.chunks, args.exact)
            clf1, fit1, _ = fit_daskgb(client, X, y, args)
            one = cupy.asnumpy(clf1.get_booster().predict(cupy.asarray(sample)))
            res["daskgb_one_worker"] = {"fit_s": fit1, "max_abs_pred_diff_vs_multi": float(np.abs(one - ours_pred).max())}
            res["speedup_vs_one_worker"] = fit1 / fit_s
    print(json.dumps(res, indent=2, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2, default=str)


if __name__ == "__main__":
    main()
