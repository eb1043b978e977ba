"""Multi-GPU scaling of a user's fit through Dask, daskgb against xgboost.dask on the same cluster and rows.

    python examples/benchmark_scaling.py                          # GPUs 1,2,4; 40M strong; 10M per GPU weak
    python examples/benchmark_scaling.py --gpus 1,2 --plot docs/multi_gpu_scaling.png --json out.json
    python examples/benchmark_scaling.py --device cpu --gpus 1,2 --rows-per-gpu 4000 --strong-rows 8000 \\
        --same-rows 6000 --eval-rows 2000 --rounds 3                # the logic on CPU workers (tests)

The user's path, for each GPU count g (one LocalCUDACluster of g workers, CUDA_VISIBLE_DEVICES
0..g-1): Higgs-shaped rows made on the workers (partitions dealt round-robin, so every GPU holds
as many rows), DaskGBClassifier(n_estimators=500, max_depth=8, eval_metric="auc").fit(X, y,
eval_set=[(X_eval, y_eval)]) (a 500K-row eval set watched every round), then
daskgb.dask.predict of the training rows (kept on the workers). xgboost.dask's
DaskXGBClassifier and xgboost.dask.predict do the same on the same persisted partitions, in
the same run (--xgboost-on says for which row counts). Each library's fit follows an untimed
2-round warm-up fit on the same rows (kernels compiled, NCCL communicator made): "fit" is the
median of --repeats timed fits.

Row counts per g: weak g x --rows-per-gpu, strong --strong-rows, and --same-rows on 1 and 2
GPUs. Efficiencies: strong = t(1 GPU) / (g t(g GPUs)) on --strong-rows; weak = t(1 GPU,
r rows) / t(g GPUs, g r rows). A fit's set-up is reported apart: quantise (the
DaskQuantileMatrix of the training rows and of the eval set) and setup (the slowest rank's
joining of the collective and making of its NCCL communicator, inside train; also the warm-up
fit's, which on a cluster's first rows makes the communicator the later fits take), train being
the rest of the fit's training tasks. Each result is printed as a JSON line as it comes (and
appended to --json), then a markdown table; --plot draws fit time and efficiency against GPUs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

EVAL_SEED = 99


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="1,2,4", help="worker counts (GPUs, or CPU workers with --device cpu)")
    ap.add_argument("--strong-rows", type=int, default=40_000_000)
    ap.add_argument("--rows-per-gpu", type=int, default=10_000_000)
    ap.add_argument("--same-rows", type=int, default=10_500_000, help="rows of the 1-vs-2 GPU comparison")
    ap.add_argument("--eval-rows", type=int, default=500_000, help="eval set watched with auc every round (0: none)")
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1, help="timed fits per configuration; the median is shown")
    ap.add_argument("--xgboost-on", default="weak,strong",
                    help="which row counts xgboost.dask also fits: any of weak,strong,same; 'none' skips it")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--json", default=None, help="a file each result is appended to, one JSON line each")
    ap.add_argument("--plot", default=None, help="a PNG of fit time and efficiency against GPUs")
    ap.add_argument("--phases", action="store_true",
                    help="also, through the functional API: each quantising step of the training and eval "
                         "matrices (DaskQuantileMatrix.timings), then train with and without the eval set")
    ap.add_argument("--skip-fit", action="store_true", help="with --phases: only the phases (no fits, no xgboost)")
    args = ap.parse_args()

    gpus = [int(g) for g in args.gpus.split(",")]
    xgb_kinds = set() if args.xgboost_on == "none" else set(args.xgboost_on.split(","))
    results = []
    for g in gpus:
        runs: dict = {}
        runs.setdefault(args.rows_per_gpu * g, []).append("weak")
        runs.setdefault(args.strong_rows, []).append("strong")
        if g in (1, 2):
            runs.setdefault(args.same_rows, []).append("same")
        with _cluster(g, args.device) as cluster:
            from distributed import Client

            with Client(cluster) as client:
                client.wait_for_workers(g)
                for rows, kinds in sorted(runs.items()):
                    result = {"gpus": g, "rows": rows, "kinds": kinds, "rounds": args.rounds, "depth": args.depth,
                              "eval_rows": args.eval_rows, "device": args.device}
                    result.update(run_one(client, g, rows, args, with_xgboost=bool(xgb_kinds & set(kinds))))
                    results.append(result)
                    print(json.dumps(result), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(result) + "\n")
    table(results, args)
    if args.plot:
        plot(results, args)


def _cluster(g: int, device: str):
    if device == "cpu":
        from distributed import LocalCluster

        return LocalCluster(n_workers=g, threads_per_worker=1, processes=True, dashboard_address=None)
    from dask_cuda import LocalCUDACluster

    # The dashboard on, as a user's cluster has it (nobody watches daskgb's page here).
    return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(g)))


def run_one(client, g: int, rows: int, args, with_xgboost: bool) -> dict:
    """One row count on one cluster: daskgb's fit and predict, then xgboost.dask's."""
    from benchmark_dask_higgs import make_data

    import daskgb.dask as dgb
    from daskgb.metric import auc_of

    started = time.perf_counter()
    X, y = make_data(client, rows, 8 * g, exact=False, device=args.device)
    eval_set = None
    if args.eval_rows:
        eval_set = [make_data(client, args.eval_rows, g, exact=False, seed=EVAL_SEED, device=args.device)]
    out = {"make_data_s": round(time.perf_counter() - started, 3)}

    def auc(booster_predict):
        if eval_set is None:
            return None
        Xe, ye = eval_set[0]
        return round(float(auc_of(_host(ye.compute()), _host(booster_predict(Xe)))), 5)

    if args.phases:
        out["phases"] = time_phases(client, X, y, eval_set, args)
        if args.skip_fit:
            return out
    clf, runs = fit_daskgb(client, X, y, eval_set, args)
    booster = clf.get_booster()
    phases = clf._fit_phases
    out["daskgb"] = {"fit_s": statistics.median(runs), "runs_s": [round(t, 3) for t in runs],
                     "quantise_s": round(phases["quantise_s"], 3), "setup_s": round(phases["setup_s"], 3),
                     "warm_up_setup_s": round(clf._warm_up_setup_s, 3),
                     "train_s": round(phases["train_s"] - phases["setup_s"], 3),
                     "labels_s": round(phases.get("labels_s", 0.0), 3),
                     "release_s": round(phases.get("release_s", 0.0), 3),
                     "training_path": booster.attr("training_path"),
                     "predict_s": time_predict(lambda: dgb.predict(client, booster, X)),
                     "auc": auc(lambda Xe: dgb.predict(client, booster, Xe).compute())}
    if with_xgboost:
        xclf, xruns = fit_xgboost(client, X, y, eval_set, args)
        from xgboost import dask as dxgb

        xbooster = xclf.get_booster()
        out["xgboost_dask"] = {"fit_s": statistics.median(xruns), "runs_s": [round(t, 3) for t in xruns],
                               "predict_s": time_predict(lambda: dxgb.predict(client, xbooster, X)),
                               "auc": auc(lambda Xe: dxgb.predict(client, xbooster, Xe).compute())}
        out["fit_ratio"] = round(out["daskgb"]["fit_s"] / out["xgboost_dask"]["fit_s"], 3)
        out["predict_ratio"] = round(out["daskgb"]["predict_s"] / out["xgboost_dask"]["predict_s"], 3)
        del xclf, xbooster
    del X, y, eval_set, clf, booster
    if args.device == "cuda":
        client.run(lambda: __import__("cupy").get_default_memory_pool().free_all_blocks())
    return out


def time_phases(client, X, y, eval_set, args) -> dict:
    """Where a fit's time goes, through daskgb.dask's functional API on the same rows (after a
    warm-up build and 2-round train): each DaskQuantileMatrix step, and train with and without
    the eval set (the difference: scoring it every round)."""
    import daskgb.dask as dgb

    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256,
              "device": args.device}
    if eval_set is not None:
        params["eval_metric"] = "auc"

    def build():
        t = time.perf_counter()
        m = dgb.DaskQuantileMatrix(client, X, y, max_bin=256)
        built = time.perf_counter() - t
        e, e_built = None, 0.0
        if eval_set is not None:
            t = time.perf_counter()
            e = dgb.DaskQuantileMatrix(client, *eval_set[0], ref=m)
            e_built = time.perf_counter() - t
        return m, built, e, e_built

    m, _, e, _ = build()
    evals = [(e, "eval")] if e is not None else []
    dgb.train(client, params, m, 2, evals=evals, verbose_eval=False)
    m.release()
    if e is not None:
        e.release()
    m, built, e, e_built = build()
    evals = [(e, "eval")] if e is not None else []
    out = {"quantise_s": round(built, 3), "quantise_steps_s": {k: round(v, 3) for k, v in m.timings.items()},
           "eval_quantise_s": round(e_built, 3),
           "eval_quantise_steps_s": {k: round(v, 3) for k, v in (e.timings if e is not None else {}).items()}}
    for name, watched in (("train_with_eval_s", evals), ("train_s", [])):
        t = time.perf_counter()
        trained = dgb.train(client, params, m, args.rounds, evals=watched, verbose_eval=False)
        out[name] = round(time.perf_counter() - t, 3)
        out[name.replace("_s", "_setup_s")] = round(max(c.get("setup_s", 0.0) for c in trained["collective"]), 3)
    m.release()
    if e is not None:
        e.release()
    return out


def _params(args) -> dict:
    return dict(n_estimators=args.rounds, max_depth=args.depth, learning_rate=0.1, max_bin=256)


def fit_daskgb(client, X, y, eval_set, args):
    """A 2-round warm-up fit, then --repeats timed fits: (the last estimator, their times)."""
    import daskgb

    kw = {**_params(args), "client": client, "device": args.device}
    if eval_set is not None:
        kw["eval_metric"] = "auc"
    warm = daskgb.DaskGBClassifier(**{**kw, "n_estimators": 2}).fit(X, y, eval_set=eval_set, verbose=False)
    times = []
    for _ in range(max(args.repeats, 1)):
        clf = daskgb.DaskGBClassifier(**kw)
        t = time.perf_counter()
        clf.fit(X, y, eval_set=eval_set, verbose=False)
        times.append(time.perf_counter() - t)
    # The warm-up's set-up: on a cluster's first fit, the NCCL communicator is made (later fits
    # take the one it kept).
    clf._warm_up_setup_s = warm._fit_phases["setup_s"]
    return clf, times


def fit_xgboost(client, X, y, eval_set, args):
    from xgboost import dask as dxgb

    kw = {**_params(args), "tree_method": "hist", "device": args.device}
    if eval_set is not None:
        kw["eval_metric"] = "auc"
    warm = dxgb.DaskXGBClassifier(**{**kw, "n_estimators": 2})
    warm.client = client
    warm.fit(X, y, eval_set=eval_set, verbose=False)
    times = []
    for _ in range(max(args.repeats, 1)):
        clf = dxgb.DaskXGBClassifier(**kw)
        clf.client = client
        t = time.perf_counter()
        clf.fit(X, y, eval_set=eval_set, verbose=False)
        times.append(time.perf_counter() - t)
    return clf, times


def time_predict(predict) -> float:
    """Seconds to predict and keep the result on the workers (persist, wait): the second of two
    calls, the first having loaded the model on the workers."""
    from distributed import wait

    wait(predict().persist())
    t = time.perf_counter()
    wait(predict().persist())
    return round(time.perf_counter() - t, 3)


def _host(a):
    import numpy as np

    return a.get() if hasattr(a, "get") else np.asarray(a)


def table(results, args) -> None:
    def fit(g, rows, lib="daskgb"):
        r = next((r for r in results if r["gpus"] == g and r["rows"] == rows), None)
        return r[lib]["fit_s"] if r is not None and lib in r else None

    for lib in ("daskgb", "xgboost_dask"):
        base_weak, base_strong = fit(1, args.rows_per_gpu, lib), fit(1, args.strong_rows, lib)
        for r in results:
            if lib not in r:
                continue
            g, t = r["gpus"], r[lib]["fit_s"]
            if "weak" in r["kinds"] and base_weak:
                r[lib]["weak_efficiency"] = round(base_weak / t, 3)
            if "strong" in r["kinds"] and base_strong:
                r[lib]["strong_efficiency"] = round(base_strong / (g * t), 3)
                r[lib]["strong_speedup"] = round(base_strong / t, 3)

    def cell(r, lib, key, fmt="{:.2f}"):
        v = r.get(lib, {}).get(key)
        return "" if v is None else fmt.format(v)

    print(f"\n{args.rounds} rounds, depth {args.depth}, eval set of {args.eval_rows:,} rows watched with auc every "
          f"round; fit = quantise + train (set-up included); predict: the training rows\n")
    print("| GPUs | rows | kinds | daskgb fit | quantise | setup | train | xgboost.dask fit | ratio | "
          "weak eff. (ours / xgb) | strong eff. (ours / xgb) | predict (ours / xgb) | AUC (ours / xgb) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        if "daskgb" not in r:  # --skip-fit: the phases alone, in the JSON lines above
            continue
        ours, theirs = r["daskgb"], r.get("xgboost_dask", {})
        print(f"| {r['gpus']} | {r['rows']:,} | {','.join(r['kinds'])} | {ours['fit_s']:.2f} s | "
              f"{ours['quantise_s']:.2f} s | {ours['setup_s']:.2f} s | {ours['train_s']:.2f} s | "
              f"{cell(r, 'xgboost_dask', 'fit_s')}{' s' if theirs else ''} | {r.get('fit_ratio', '')} | "
              f"{cell(r, 'daskgb', 'weak_efficiency')} / {cell(r, 'xgboost_dask', 'weak_efficiency')} | "
              f"{cell(r, 'daskgb', 'strong_efficiency')} / {cell(r, 'xgboost_dask', 'strong_efficiency')} | "
              f"{ours['predict_s']:.3f} / {cell(r, 'xgboost_dask', 'predict_s', '{:.3f}')} | "
              f"{ours['auc']} / {theirs.get('auc', '')} |")
    one, two = fit(1, args.same_rows), fit(2, args.same_rows)
    if one and two:
        print(f"\n{args.same_rows:,} rows: 1 GPU {one:.2f} s, 2 GPUs {two:.2f} s (speed-up {one / two:.2f})")


def plot(results, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for lib, label, color, marker in (("daskgb", "daskgb", "C0", "o"), ("xgboost_dask", "xgboost.dask", "C1", "s")):
        for kind, ax_time, line in (("weak", axes[0], "-"), ("strong", axes[1], "--")):
            rows = sorted((r["gpus"], r[lib]["fit_s"], r[lib].get(f"{kind}_efficiency"))
                          for r in results if kind in r["kinds"] and lib in r)
            if not rows:
                continue
            g = [x[0] for x in rows]
            ax_time.plot(g, [x[1] for x in rows], marker=marker, ls="-", color=color, label=label)
            eff = [(x[0], x[2]) for x in rows if x[2] is not None]
            if eff:
                axes[2].plot([e[0] for e in eff], [e[1] for e in eff], marker=marker, ls=line, color=color,
                             label=f"{label}, {kind}")
    axes[0].set_title(f"weak scaling: {args.rows_per_gpu / 1e6:g}M rows per GPU")
    axes[1].set_title(f"strong scaling: {args.strong_rows / 1e6:g}M rows")
    axes[2].set_title("efficiency")
    axes[2].axhline(0.9, color="grey", lw=0.8, ls=":")
    for ax in axes[:2]:
        ax.set_ylabel("fit time (s), quantising included")
        ax.set_ylim(bottom=0)
    axes[2].set_ylim(0, 1.1)
    for ax in axes:
        ax.set_xlabel("GPUs" if args.device == "cuda" else "CPU workers")
        ax.set_xticks(sorted({r["gpus"] for r in results}))
        ax.legend()
        ax.grid(alpha=0.3)
    where = "LocalCUDACluster" if args.device == "cuda" else "LocalCluster of CPU workers"
    fig.suptitle(f"Higgs-shaped rows, depth {args.depth}, {args.rounds} rounds, eval set of {args.eval_rows:,} "
                 f"rows watched with auc every round ({where}, one run)")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
