"""Multi-GPU scaling of daskgb through Dask: strong scaling (fixed rows, more GPUs), weak
scaling (fixed rows per GPU), and 1 against 2 GPUs on Higgs-sized data, Higgs-shaped rows,
depth 8, 500 rounds, one LocalCUDACluster per GPU count.

    python examples/benchmark_scaling.py                     # GPUs 1,2,4; 40M strong; 10M per GPU weak
    python examples/benchmark_scaling.py --gpus 1,2 --strong-rows 20000000

Efficiencies: strong = t(1 GPU) / (g * t(g GPUs)); weak = t(1 GPU, r rows) / t(g GPUs, g*r rows).
Each fit is timed --repeats times in the same cluster (after a 2-round warm-up fit that
compiles the kernels and makes the NCCL communicator); the table shows the median run.
Prints a markdown table and JSON (--json to save it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="1,2,4")
    ap.add_argument("--strong-rows", type=int, default=40_000_000)
    ap.add_argument("--rows-per-gpu", type=int, default=10_000_000)
    ap.add_argument("--same-rows", type=int, default=10_500_000, help="rows of the 1-vs-2 GPU comparison")
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1, help="timed fits per configuration; the median is shown")
    ap.add_argument("--json", default=None)
    ap.add_argument("--phases", action="store_true",
                    help="time the fit's two phases (DaskQuantileMatrix, train; functional API) instead of "
                         "DaskGBClassifier.fit; fit is then their sum")
    args = ap.parse_args()

    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from benchmark_dask_higgs import fit_daskgb, make_data, phases_dask

    gpus = [int(g) for g in args.gpus.split(",")]
    fit_args = argparse.Namespace(depth=args.depth, rounds=args.rounds, repeats=1)
    runs = []  # (gpus, rows, kinds)
    for g in gpus:
        rows: dict = {}
        rows.setdefault(args.strong_rows, []).append("strong")
        rows.setdefault(args.rows_per_gpu * g, []).append("weak")
        if g in (1, 2):
            rows.setdefault(args.same_rows, []).append("same")
        runs += [(g, r, kinds) for r, kinds in sorted(rows.items())]
    results = []
    for g in gpus:
        devices = ",".join(str(i) for i in range(g))
        with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices) as cluster, Client(cluster) as client:
            for gg, rows, kinds in runs:
                if gg != g:
                    continue
                X, y = make_data(client, rows, 8 * g, exact=False)
                fit_daskgb(client, X, y, argparse.Namespace(depth=args.depth, rounds=2, repeats=1))  # compile, warm up
                timed = []
                for _ in range(max(args.repeats, 1)):
                    if args.phases:
                        phases = phases_dask(client, X, y, fit_args)
                        timed.append((phases["quantise_s"] + phases["train_s"], phases))
                    else:
                        timed.append((fit_daskgb(client, X, y, fit_args)[1], {}))
                timed.sort(key=lambda run: run[0])
                fit_s, phases = timed[(len(timed) - 1) // 2]
                phases = {**phases, "fit_runs_s": [round(run[0], 3) for run in timed]}
                del X, y
                client.run(lambda: __import__("cupy").get_default_memory_pool().free_all_blocks())
                results.append({"gpus": g, "rows": rows, "kinds": kinds, "fit_s": fit_s, **phases})
                print(json.dumps(results[-1]), flush=True)

    def t(g, rows):
        return next((r["fit_s"] for r in results if r["gpus"] == g and r["rows"] == rows), None)

    print("\n| GPUs | rows | fit | strong efficiency | weak efficiency |" + (" quantise | train |" if args.phases else ""))
    print("| --- | --- | --- | --- | --- |" + (" --- | --- |" if args.phases else ""))
    for r in results:
        g, rows = r["gpus"], r["rows"]
        strong = weak = ""
        if "strong" in r["kinds"] and t(1, args.strong_rows):
            r["strong_efficiency"] = t(1, args.strong_rows) / (g * r["fit_s"])
            strong = f"{r['strong_efficiency']:.2f}"
        if "weak" in r["kinds"] and t(1, args.rows_per_gpu):
            r["weak_efficiency"] = t(1, args.rows_per_gpu) / r["fit_s"]
            weak = f"{r['weak_efficiency']:.2f}"
        extra = f" {r['quantise_s']:.2f} s | {r['train_s']:.2f} s |" if args.phases else ""
        print(f"| {g} | {rows:,} | {r['fit_s']:.2f} s | {strong} | {weak} |" + extra)
    if t(1, args.same_rows) and t(2, args.same_rows):
        print(f"\n{args.same_rows:,} rows: 1 GPU {t(1, args.same_rows):.2f} s, 2 GPUs {t(2, args.same_rows):.2f} s "
              f"(speed-up {t(1, args.same_rows) / t(2, args.same_rows):.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
