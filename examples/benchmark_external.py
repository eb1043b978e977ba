"""Out-of-core training (the 2020 GPU paper's experiment): Higgs-shaped rows whose quantised
matrix is --times the configured device-memory budget, trained out of core with gradient-based
sampling at several rates, against in-core training on all rows, in one run.

    python examples/benchmark_external.py                          # 10.5M rows, budget = matrix / 3
    python examples/benchmark_external.py --rows 200000 --rounds 20 --device cpu
    python examples/benchmark_external.py --paths compact,stream   # both ways of using the pages
    python examples/benchmark_external.py --features 500 --rows 40000000 --batch-rows 1000000 --rates 0.1
    python examples/benchmark_external.py --dask 1 --rates 1.0,0.1      # through a LocalCUDACluster

With --dask N the same runs go through a LocalCUDACluster of N GPUs (a LocalCluster of N
workers on CPU): each worker quantises its own rows (held in its host memory) into its own
pages under a budget of its in-core matrix / --times, and daskgb.dask.train trains on them.

For each run: training time, its ratio to the in-core time, AUC on held-out rows and its
difference from in-core's. Out of core, the matrix's pages live in host memory (or in files
under --spill-dir) and training brings them to the device: with sampling, each tree trains on
its sampled rows compacted into one in-core matrix ("compact", the paper's Algorithm 7) or on
every page at every step ("stream"); without sampling (rate 1.0) it streams. Prints a markdown
table and JSON (--json to save it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--features", type=int, default=28, help="Higgs-shaped: 28; the paper's Table 1: 500")
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--times", type=float, default=3.0, help="the quantised matrix over the device budget")
    ap.add_argument("--rates", default="1.0,0.5,0.3,0.1", help="gradient-based subsample rates out of core")
    ap.add_argument("--paths", default="compact", help="compact, stream or both (with sampling)")
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-in-core", action="store_true",
                    help="skip the in-core run (rows that do not fit the device); give --budget-mib")
    ap.add_argument("--budget-mib", type=float, default=None,
                    help="the device budget out of core (default: the in-core matrix / --times)")
    ap.add_argument("--batches-on-device", action="store_true",
                    help="with --batch-rows, hand each batch over on the GPU where it is made (no trip through the "
                         "host: for the row counts that fill the device, where host copies would take the time)")
    ap.add_argument("--peak-memory", action="store_true",
                    help="also the peak device memory in live arrays (quantising and training; a CuPy memory "
                         "hook, in the timed run)")
    ap.add_argument("--dask", type=int, default=0, help="train through a local Dask cluster of this many workers")
    ap.add_argument("--batch-rows", type=int, default=None,
                    help="make the training rows batch by batch (QuantileMatrix.from_batches): they are never "
                         "whole in memory, so row counts beyond host memory can train out of core")
    args = ap.parse_args(argv)

    import dask.config

    import daskgb
    from daskgb.backend import get_backend, resolve_device
    from daskgb.ellpack import pages as external

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    n_test = min(1_000_000, max(1000, args.rows // 10))

    def make(n, seed):
        return make_rows(xp, n, seed, args.features)

    Xte, yte = make(n_test, args.seed + 7919)
    if args.dask:
        return run_dask(args, device, Xte, yte)
    if args.batch_rows:
        sizes = [min(args.batch_rows, args.rows - a) for a in range(0, args.rows, args.batch_rows)]

        def batches():  # the same rows on every pass: batch k from seed + k
            for k, size in enumerate(sizes):
                Xb, yb = make(size, args.seed + 1 + k)
                host = xp is not np and not args.batches_on_device
                yield (xp.asnumpy(Xb), xp.asnumpy(yb)) if host else (Xb, yb)

        def matrix(**kw):
            return daskgb.QuantileMatrix.from_batches(batches, max_bin=args.max_bin, device=device, **kw)
        warm_X, warm_y = (a[:50_000].copy() for a in next(iter(batches())))  # not the whole batch kept
    else:
        Xtr, ytr = make(args.rows, args.seed)
        if xp is not np:  # the training rows wait in host memory: out of core, only pages go to the GPU
            Xtr, ytr = xp.asnumpy(Xtr), xp.asnumpy(ytr)

        def matrix(**kw):
            return daskgb.QuantileMatrix(Xtr, ytr, max_bin=args.max_bin, device=device, **kw)
        warm_X, warm_y = Xtr, ytr

    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": args.eta, "device": device,
              "seed": args.seed}

    def sync():
        if xp is not np:
            xp.cuda.runtime.deviceSynchronize()

    from benchmark import PeakMemory
    from daskgb.metric import evaluate

    daskgb.train(params, daskgb.QuantileMatrix(warm_X[:50_000], warm_y[:50_000], max_bin=args.max_bin,
                                               device=device), 2, verbose_eval=False)  # compile, warm up

    reference = {}  # the in-core model's test predictions: rate 1.0 out of core must give them

    def run(label, rate, path, budget, cuts=None):
        sync()
        peak = PeakMemory(xp, pool=True) if args.peak_memory else contextlib.nullcontext()
        peak.__enter__()
        base = xp.get_default_memory_pool().used_bytes() if args.peak_memory and xp is not np else 0
        t0 = time.perf_counter()
        # The in-core run stays in core however large (daskgb would page a matrix beyond half the
        # free device memory by itself: external.AUTO_FREE_FRACTION).
        external.AUTO_FREE_FRACTION = 1.0 if budget is None else 0.5
        m = matrix(device_memory_budget=budget, spill_dir=args.spill_dir if budget else None, cuts=cuts)
        sync()
        t1 = time.perf_counter()
        p = dict(params)
        if rate < 1.0:
            p.update(subsample=rate, sampling_method="gradient_based")
        with dask.config.set({"daskgb.training.compact-sampled-pages": path == "compact"}):
            booster = daskgb.train(p, m, args.rounds, verbose_eval=False)
        sync()
        t2 = time.perf_counter()
        peak.__exit__(None, None, None)
        pred = xp.asarray(booster.predict(Xte))
        reference.setdefault("pred", pred)
        pool_gib = 0.0
        if xp is not np:  # the memory pool's high-water mark: what the run took on the device
            del booster
            pool = xp.get_default_memory_pool()
            pool_gib = pool.total_bytes() / 2**30
        out = {"run": label, "rate": rate, "path": path, "pages": m.ellpack.n_pages if m.paged else 0,
               "device_pool_gib": pool_gib,
               "device_peak_gib": (base + peak.peak) / 2**30 if getattr(peak, "peak", None) is not None else None,
               "ellpack_mib": m.ellpack.nbytes / 2**20, "quantise_s": t1 - t0, "train_s": t2 - t1,
               "auc": float(evaluate("auc", xp, xp.asarray(yte), pred)),
               "max_pred_diff": float(xp.abs(pred - reference["pred"]).max())}
        print(json.dumps(out), flush=True)
        if xp is not np:
            xp.get_default_memory_pool().free_all_blocks()
        return out, m

    # The out-of-core runs bin with the in-core run's cuts, so that rate 1.0 must give the
    # in-core model.
    if args.no_in_core:
        if args.budget_mib is None:
            ap.error("--no-in-core needs --budget-mib")
        in_core, cuts, results = None, None, []
    else:
        in_core, m = run("in core", 1.0, "in core", None)
        ell_bytes, cuts = m.ellpack.nbytes, m.cuts
        del m
        results = [in_core]
    budget = int(args.budget_mib * 2**20) if args.budget_mib else int(ell_bytes / args.times)
    paths = ["compact", "stream"] if args.paths == "both" else args.paths.split(",")
    for rate in (float(r) for r in args.rates.split(",") if r):
        for path in (["stream"] if rate >= 1.0 else paths):
            results.append(run("out of core", rate, path, budget, cuts)[0])

    ell_bytes = results[-1]["ellpack_mib"] * 2**20
    print(f"\n{args.rows:,} x {args.features} rows, depth {args.depth}, {args.rounds} rounds, device {device}; "
          f"quantised matrix {ell_bytes / 2**20:.1f} MiB, device budget {budget / 2**20:.1f} MiB "
          f"({budget / ell_bytes:.2f} of it)\n")
    report(results, in_core, args.json, {"budget_bytes": budget, "ellpack_bytes": ell_bytes})


def make_rows(xp, n, seed, features):
    """Higgs-shaped rows; wider ones repeat the Higgs columns with noise."""
    from synthetic import make_higgs

    X, y = make_higgs(xp, n, seed)
    if features != X.shape[1]:
        # Filled in place, a block of columns at a time: concatenating copies and slicing
        # held about twice the batch at once, which made the widest batches fail first.
        wide = xp.empty((n, features), dtype=xp.float32)
        rs = xp.random.RandomState(seed + 1)
        for i in range(0, features, X.shape[1]):
            w = min(X.shape[1], features - i)
            wide[:, i : i + w] = X[:, :w]
            if i:
                wide[:, i : i + w] += 0.1 * rs.standard_normal((n, w)).astype(xp.float32)
        X = wide
    return X, y


def report(results, in_core, json_path, extra):
    print("| run | subsample (gradient-based) | pages | path | train | / in core | AUC | AUC - in core | "
          "max abs prediction - in core | device pool |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    def vs(r, key, fmt):
        return "-" if in_core is None else format(r[key] / in_core[key] if key == "train_s" else r[key] - in_core[key],
                                                  fmt)
    for r in results:
        print(f"| {r['run']} | {r['rate']:g} | {r['pages']} | {r['path']} | {r['train_s']:.2f} s | "
              f"{vs(r, 'train_s', '.2f')} | {r['auc']:.5f} | {vs(r, 'auc', '+.5f')} | "
              + ("-" if in_core is None else f"{r['max_pred_diff']:.2e}") + f" | {r.get('device_pool_gib', 0):.2f} GiB |"
              + ("" if r.get("device_peak_gib") is None else f" peak in arrays {r['device_peak_gib']:.2f} GiB |"))
    if json_path:
        Path(json_path).write_text(json.dumps({**extra, "results": results}, indent=2))


def _pages(m) -> int:
    return m.ellpack.n_pages if m.paged else 0


def run_dask(args, device, Xte, yte):
    """The runs of main() through a local Dask cluster: rows made on the workers and kept in
    their host memory, one DaskQuantileMatrix in core, then out of core with its cuts."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    from daskgb.dask.watch import live_workers

    import daskgb.dask as dd
    from daskgb.ellpack import pages as external
    from daskgb.backend import get_backend
    from daskgb.metric import evaluate

    xp = get_backend(device).xp
    if device == "cuda":
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(args.dask)))
    else:
        cluster = LocalCluster(n_workers=args.dask, threads_per_worker=1)
    features = args.features

    def block(i, n):  # made on the worker's device, kept in its host memory
        bxp = get_backend(device).xp
        X, y = make_rows(bxp, n, args.seed + 1 + i, features)
        Xy = bxp.concatenate([X, y[:, None]], axis=1)
        return Xy.get() if bxp is not np else Xy

    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": args.eta, "device": device,
              "seed": args.seed, "max_bin": args.max_bin}
    results = []
    with cluster, Client(cluster) as client:
        workers = sorted(live_workers(client))
        n_chunks = 4 * len(workers)
        sizes = [args.rows // n_chunks + (i < args.rows % n_chunks) for i in range(n_chunks)]
        parts = []
        for i, n in enumerate(sizes):
            with dask.annotate(workers=[workers[i % len(workers)]], allow_other_workers=False):
                part = da.from_delayed(dask.delayed(block)(i, n), shape=(n, features + 1), dtype=np.float32,
                                       meta=np.empty((0, features + 1), np.float32))
                parts.append(client.persist(part, optimize_graph=False))
        wait(parts)
        Xy = da.concatenate(parts, axis=0)
        X, y = Xy[:, :features], Xy[:, features]
        warm = dd.DaskQuantileMatrix(client, X[:50_000], y[:50_000], max_bin=args.max_bin)
        dd.train(client, params, warm, 2, verbose_eval=False)  # compile, warm up
        del warm
        reference, in_core_m = {}, None

        def run(label, rate, path, budget):
            nonlocal in_core_m
            t0 = time.perf_counter()
            m = dd.DaskQuantileMatrix(client, X, y, max_bin=args.max_bin, ref=in_core_m,
                                      device_memory_budget=budget, spill_dir=args.spill_dir if budget else None)
            t1 = time.perf_counter()
            p = dict(params)
            if rate < 1.0:
                p.update(subsample=rate, sampling_method="gradient_based")
            # The setting is read where training runs: set it on the workers.
            client.run(_set_compacting, path == "compact")
            booster = dd.train(client, p, m, args.rounds, verbose_eval=False)["booster"]
            t2 = time.perf_counter()
            pred = xp.asarray(booster.predict(Xte))
            reference.setdefault("pred", pred)
            pages = sum(client.gather([client.submit(_pages, f, workers=[a], pure=False) for a, f in m._local.items()]))
            out = {"run": label, "rate": rate, "path": path, "pages": pages,
                   "ellpack_mib": sum(m.nbytes_per_worker.values()) / 2**20, "quantise_s": t1 - t0,
                   "train_s": t2 - t1, "auc": evaluate("auc", xp, xp.asarray(yte), pred),
                   "max_pred_diff": float(xp.abs(pred - reference["pred"]).max())}
            print(json.dumps(out), flush=True)
            if in_core_m is None:
                in_core_m = m
            return out

        in_core = run("in core", 1.0, "in core", None)
        budget = int(max(in_core_m.nbytes_per_worker.values()) / args.times)
        results.append(in_core)
        paths = ["compact", "stream"] if args.paths == "both" else args.paths.split(",")
        for rate in (float(r) for r in args.rates.split(",") if r):
            for path in (["stream"] if rate >= 1.0 else paths):
                results.append(run("out of core", rate, path, budget))
        client.run(_set_compacting, True)
    print(f"\n{args.rows:,} x {args.features} rows through Dask ({args.dask} workers, device {device}), depth "
          f"{args.depth}, {args.rounds} rounds; in-core matrix {in_core['ellpack_mib']:.1f} MiB in all, device "
          f"budget {budget / 2**20:.1f} MiB a worker (1/{args.times:g} of its matrix)\n")
    report(results, in_core, args.json, {"budget_bytes_per_worker": budget, "workers": args.dask})


def _set_compacting(on: bool) -> None:
    """On a worker: sampled pages compacted (the compacted-pages path) or streamed."""
    import dask.config

    dask.config.set({"daskgb.training.compact-sampled-pages": on})


if __name__ == "__main__":
    main()
