"""Out-of-core training (the 2020 GPU paper's experiment): Higgs-shaped rows whose quantised
matrix is --times the configured device-memory budget, trained out of core with gradient-based
sampling at several rates, against in-core training on all rows, in one run.

    python examples/benchmark_external.py                          # 10.5M rows, budget = matrix / 3
    python examples/benchmark_external.py --rows 200000 --rounds 20 --device cpu
    python examples/benchmark_external.py --paths compact,stream   # both ways of using the pages
    python examples/benchmark_external.py --features 500 --rows 40000000 --batch-rows 1000000 --rates 0.1

For each run: training time, its ratio to the in-core time, AUC on held-out rows and its
difference from in-core's. Out of core, the matrix's pages live in host memory (or in files
under --spill-dir) and training brings them to the device: with sampling, each tree trains on
its sampled rows compacted into one in-core matrix ("compact", the paper's Algorithm 7) or on
every page at every step ("stream"); without sampling (rate 1.0) it streams. Prints a markdown
table and JSON (--json to save it).
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--batch-rows", type=int, default=None,
                    help="make the training rows batch by batch (QuantileMatrix.from_batches): they are never "
                         "whole in memory, so row counts beyond host memory can train out of core")
    args = ap.parse_args(argv)

    import daskgb
    from daskgb import external
    from daskgb.backend import get_backend, resolve_device
    from synthetic import make_higgs

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    n_test = max(1000, args.rows // 10)
    def make(n, seed):
        X, y = make_higgs(xp, n, seed)
        if args.features != X.shape[1]:  # wider rows: the Higgs columns repeated with noise
            reps = -(-args.features // X.shape[1])
            rs = xp.random.RandomState(seed + 1)
            X = xp.concatenate([X if i == 0 else X + 0.1 * rs.standard_normal(X.shape).astype(xp.float32)
                                for i in range(reps)], axis=1)[:, : args.features]
        return X, y

    Xte, yte = make(n_test, args.seed + 7919)
    if args.batch_rows:
        sizes = [min(args.batch_rows, args.rows - a) for a in range(0, args.rows, args.batch_rows)]

        def batches():  # the same rows on every pass: batch k from seed + k
            for k, size in enumerate(sizes):
                Xb, yb = make(size, args.seed + 1 + k)
                yield (xp.asnumpy(Xb), xp.asnumpy(yb)) if xp is not np else (Xb, yb)

        def matrix(**kw):
            return daskgb.QuantileMatrix.from_batches(batches, max_bin=args.max_bin, device=device, **kw)
        warm_X, warm_y = next(iter(batches()))
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

    def auc(booster):
        from daskgb.metric import evaluate

        return evaluate("auc", xp, xp.asarray(yte), xp.asarray(booster.predict(Xte)))

    daskgb.train(params, daskgb.QuantileMatrix(warm_X[:50_000], warm_y[:50_000], max_bin=args.max_bin,
                                               device=device), 2, verbose_eval=False)  # compile, warm up

    def run(label, rate, path, budget, cuts=None):
        sync()
        t0 = time.perf_counter()
        m = matrix(device_memory_budget=budget, spill_dir=args.spill_dir if budget else None, cuts=cuts)
        sync()
        t1 = time.perf_counter()
        p = dict(params)
        if rate < 1.0:
            p.update(subsample=rate, sampling_method="gradient_based")
        external.COMPACT_SAMPLED = path == "compact"
        booster = daskgb.train(p, m, args.rounds, verbose_eval=False)
        sync()
        t2 = time.perf_counter()
        out = {"run": label, "rate": rate, "path": path, "pages": m.ellpack.n_pages if m.paged else 0,
               "ellpack_mib": m.ellpack.nbytes / 2**20, "quantise_s": t1 - t0, "train_s": t2 - t1,
               "auc": auc(booster)}
        print(json.dumps(out), flush=True)
        return out, m

    # The out-of-core runs bin with the in-core run's cuts, so that rate 1.0 must give the
    # in-core model.
    in_core, m = run("in core", 1.0, "in core", None)
    ell_bytes, cuts = m.ellpack.nbytes, m.cuts
    del m
    budget = int(ell_bytes / args.times)
    results = [in_core]
    paths = ["compact", "stream"] if args.paths == "both" else args.paths.split(",")
    for rate in (float(r) for r in args.rates.split(",")):
        for path in (["stream"] if rate >= 1.0 else paths):
            results.append(run("out of core", rate, path, budget, cuts)[0])
    external.COMPACT_SAMPLED = True

    print(f"\n{args.rows:,} x {args.features} rows, depth {args.depth}, {args.rounds} rounds, device {device}; "
          f"quantised matrix {ell_bytes / 2**20:.1f} MiB, device budget {budget / 2**20:.1f} MiB "
          f"(1/{args.times:g})\n")
    print("| run | subsample (gradient-based) | pages | path | train | / in core | AUC | AUC - in core |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['run']} | {r['rate']:g} | {r['pages']} | {r['path']} | {r['train_s']:.2f} s | "
              f"{r['train_s'] / in_core['train_s']:.2f} | {r['auc']:.5f} | {r['auc'] - in_core['auc']:+.5f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"budget_bytes": budget, "ellpack_bytes": ell_bytes,
                                               "results": results}, indent=2))


if __name__ == "__main__":
    main()
