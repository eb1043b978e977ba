"""daskgb against XGBoost `hist` on the XGBoost GPU papers' kinds of data, one command, one run.

    python examples/benchmark.py                                  # every set, full size, on the GPU
    python examples/benchmark.py --sets higgs,covertype --scale 0.05 --rounds 20 --device cpu
    python examples/benchmark.py --plot results/benchmark.json     # redraw the plot from saved results
    python examples/benchmark.py --sets higgs --skip-user-paths    # without the user-path table

Sets (made on the device from a seed, a tenth more rows held out for the metric, half as many for bosch):
higgs 10.5M x 28 binary depth 8 (AUC); bosch 1.07M x 968, 80% missing, rare positives,
depth 6 (AUC); covertype 523K x 54, 7 classes, depth 8 (accuracy); year 464K x 90
regression depth 8 (RMSE); airline N x 13 binary depth 8 (AUC; --airline-rows, default
as many as fit in a quarter of free device memory, at most the 2018 paper's 114M);
ranking ~475K x 700, 20K queries, rank:ndcg depth 8 (NDCG@10). 500 rounds, eta 0.1,
max_bin 256 unless told otherwise. Both libraries train the same rows with the same
parameters on the same device, after an untimed warm-up of each.

For each set: quantisation and training time of both, the ratio of training times,
the quality metric of both, and (on a GPU) each library's peak device memory beyond
the input (see PeakMemory). Then the user-path table (examples/user_paths.py: an eval set
watched every round, early stopping through the estimators, predict, lossguide, depth 12,
the wide sets, the first fit in a fresh process; its options are --up-*, its rows scaled
by --scale; --skip-user-paths leaves it out). With --sweep, time per round against rows (Higgs-shaped,
1M up to the full size) for both. Writes <out>/benchmark.md (a table),
<out>/benchmark.json and, where matplotlib is installed, <out>/scaling.png.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

SETS = ("higgs", "bosch", "covertype", "year", "airline", "ranking")
# Rounds of the separate, untimed run that measures peak device memory.
MEMORY_ROUNDS = 20


def spec(name: str, scale: float, airline_rows: int, rows: int | None = None):
    """(rows, make(xp, n, seed) -> (X, y, qid or None), params, metric name); rows overrides the set's."""
    from synthetic import make_airline, make_bosch, make_covertype, make_higgs, make_ltr, make_year

    def plain(make):
        return lambda xp, n, seed: (*make(xp, n, seed), None)

    binary = {"objective": "binary:logistic", "max_depth": 8}
    table = {
        "higgs": (10_500_000, plain(make_higgs), binary, "auc"),
        "bosch": (1_070_000, plain(make_bosch), {**binary, "max_depth": 6}, "auc"),
        "covertype": (523_000, plain(make_covertype),
                      {"objective": "multi:softprob", "num_class": 7, "max_depth": 8}, "accuracy"),
        "year": (464_000, plain(make_year), {"objective": "reg:squarederror", "max_depth": 8}, "rmse"),
        "airline": (airline_rows, plain(make_airline), binary, "auc"),
        # ~23.7 documents a query: rows are set through the number of queries
        "ranking": (475_000, lambda xp, n, seed: make_ltr(xp, max(10, int(n / 23.7)), 700, 23.7, seed),
                    {"objective": "rank:ndcg", "max_depth": 8}, "ndcg@10"),
    }
    default_rows, make, params, metric = table[name]
    return max(1000, int((rows or default_rows) * scale)), make, params, metric


def make_set(name: str, xp, rows: int | None = None, seed: int = 2017, device: str = "cuda"):
    """(rows, X, y, qid or None, params) of a set for the developer tools (benchmarks/): the set's rows
    (or `rows`; Airline 114M), data on xp's device, its parameters with eta 0.1."""
    n_rows, make, set_params, _ = spec(name, 1.0, 114_000_000, rows)
    X, y, qid = make(xp, n_rows, seed)
    return n_rows, X, y, qid, {"eta": 0.1, "device": device, **set_params}


def quantile_matrix(X, y, qid, device: str = "cuda"):
    """The QuantileMatrix of make_set's data (with its query ids where there are)."""
    import daskgb

    kw = {} if qid is None else {"qid": qid}
    return daskgb.QuantileMatrix(X, y, device=device, **kw)


class PeakMemory:
    """Peak device memory above the level at entry, measured in a separate, untimed run so
    that measuring never slows the timed one.

    pool=False (both libraries in the table): the device's used memory (cudaMemGetInfo),
    sampled by a thread every 2 ms, with CuPy's pool emptied before (release()): blocks a
    pool keeps cached are memory the GPU holds, so they count. pool=True (developer tools
    only): bytes in live CuPy arrays plus the blocks training's CUDA graphs hold
    (growth/graphs.py graph_memory_bytes), read after every allocation -- the working set
    without the pool's caching, which says where memory goes but understates what is held.
    """

    def __init__(self, xp, pool: bool):
        self.xp, self.pool, self.peak = xp, pool, None

    def __enter__(self):
        xp = self.xp
        if xp is np:
            return self
        if self.pool:
            from cupy.cuda import memory_hook

            from daskgb.growth.graphs import graph_memory_bytes

            mempool = xp.get_default_memory_pool()

            def used():  # live arrays, and the blocks training's CUDA graphs hold in their own pools
                return mempool.used_bytes() + graph_memory_bytes()

            self.base = self._max = used()
            outer = self

            class Hook(memory_hook.MemoryHook):
                name = "PeakMemory"

                def malloc_postprocess(self, **kwargs):
                    outer._max = max(outer._max, used())

            self._hook = Hook()
            self._hook.__enter__()
            return self
        self._stop = threading.Event()
        self.base = self._max = self._used()

        def sample():
            while not self._stop.is_set():
                self._max = max(self._max, self._used())
                time.sleep(0.002)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def _used(self):
        free, total = self.xp.cuda.runtime.memGetInfo()
        return total - free

    def __exit__(self, *exc):
        if self.xp is np:
            return
        if self.pool:
            self._hook.__exit__(*exc)
        else:
            self._stop.set()
            self._thread.join()
            self._max = max(self._max, self._used())
        self.peak = self._max - self.base


def quality(xp, metric, y, pred, qid):
    from daskgb.metric import evaluate

    pred = xp.asarray(pred)
    if metric == "accuracy":
        return float((xp.argmax(pred, axis=1) == y).mean())
    if metric == "ndcg@10":
        from daskgb.ranking import groups_from_qid

        return evaluate("ndcg@10", xp, y, pred, groups=groups_from_qid(qid, int(y.shape[0])))
    return evaluate(metric, xp, y, pred)


def sync(xp):
    if xp is not np:
        xp.cuda.runtime.deviceSynchronize()


def release(xp):
    gc.collect()
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()
        sync(xp)


def split_set(name, args, device, xp):
    """(training rows, X, (X, y, qid) to train on, (X, y, qid) held out, params, metric) of a set."""
    n, make, params, metric = spec(name, args.scale, args.airline_rows, args.rows)
    # Bosch's positives are rare (~0.6%): a tenth held out (~640 positives) moved AUC by +-0.005
    # between seeds for models of equal quality, so it holds out half its training rows.
    n_test = max(1000, n // 2 if name == "bosch" else n // 10)
    X, y, qid = make(xp, n + n_test, args.seed)
    if qid is not None:  # whole queries on each side of the split
        n = int(xp.searchsorted(qid, qid[min(n, qid.shape[0] - 1)]))
    train = X[:n], y[:n], None if qid is None else qid[:n]
    held_out = X[n:], y[n:], None if qid is None else qid[n:]
    return n, X, train, held_out, {**params, "eta": args.eta, "max_bin": args.max_bin, "device": device}, metric


def peak_memory_here(name, lib, args, device, xp) -> float | None:
    """GiB: the device's used memory at its peak through quantising and MEMORY_ROUNDS rounds of `lib`
    on the set, above the level with the input on the device and CuPy's pool emptied. Meant for a
    fresh process (peak_memory): in one that ran other work, the pool keeps blocks it cannot
    return (parts of them live), later allocations land there unseen, and the figure reads low."""
    _, X, train, _, params, _ = split_set(name, args, device, xp)
    # Made, then moved to the host and back: the pool is then empty but for the input, in blocks of
    # their own (the data's making leaves blocks the pool cannot return, which would hide memory).
    host = [None if a is None else xp.asnumpy(a) for a in train]
    del X, train
    release(xp)
    Xtr, ytr, qtr = (None if a is None else xp.asarray(a) for a in host)
    del host
    release(xp)
    rounds = min(args.rounds, MEMORY_ROUNDS)
    with PeakMemory(xp, pool=False) as mem:
        if lib == "daskgb":
            import daskgb

            d = daskgb.QuantileMatrix(Xtr, ytr, qid=qtr, max_bin=args.max_bin, device=device)
            daskgb.train(params, d, rounds, verbose_eval=False)
        else:
            import xgboost as xgb

            kw = {} if qtr is None else {"qid": qtr}
            d = xgb.QuantileDMatrix(Xtr, ytr, max_bin=args.max_bin, **kw)
            xgb.train({**params, "tree_method": "hist", "device": "cuda"}, d, rounds)
        sync(xp)
    return None if mem.peak is None else mem.peak / 2**30


def peak_memory(name, lib, args) -> float | None:
    """peak_memory_here in a fresh process of this script (the device's used memory, counted
    alike for both libraries)."""
    import subprocess

    cmd = [sys.executable, __file__, "--peak-memory-of", f"{name}:{lib}", "--scale", str(args.scale),
           "--airline-rows", str(args.airline_rows), "--rounds", str(args.rounds), "--eta", str(args.eta),
           "--max-bin", str(args.max_bin), "--device", args.device, "--seed", str(args.seed)]
    if args.rows is not None:
        cmd += ["--rows", str(args.rows)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mem_gib"]


def run_set(name, args, device, xp):
    import daskgb

    n, X, (Xtr, ytr, qtr), (Xte, yte, qte), params, metric = split_set(name, args, device, xp)
    res = {"set": name, "rows": n, "features": int(X.shape[1]), "rounds": args.rounds, "params": params,
           "metric": metric}

    def qm(lo, hi):
        q = None if qtr is None else qtr[lo:hi]
        return daskgb.QuantileMatrix(Xtr[lo:hi], ytr[lo:hi], qid=q, max_bin=args.max_bin, device=device)

    # Warm-up, untimed in the table: kernel compilation (daskgb compiles its kernels on first
    # use and caches them on disk; the sketch's merge and prune run only on inputs larger than
    # a block, so the whole matrix is quantised once), XGBoost's lazy initialisation. The
    # first whole build's time is kept (quantise_first_s): what a fresh machine pays once.
    warm = min(n, 50_000)
    if qtr is not None:
        warm = int(xp.searchsorted(qtr, qtr[warm - 1]))
    daskgb.train(params, qm(0, warm), 2, verbose_eval=False)
    release(xp)
    t0 = time.perf_counter()
    qm(0, n)
    sync(xp)
    first_s = time.perf_counter() - t0
    xgb_params = {**params, "tree_method": "hist", "device": "cuda" if device == "cuda" else "cpu"}
    if not args.skip_xgboost:
        import xgboost as xgb

        kw = {} if qtr is None else {"qid": qtr[:warm]}
        xgb.train(xgb_params, xgb.QuantileDMatrix(Xtr[:warm], ytr[:warm], max_bin=args.max_bin, **kw), 2)
        xgb.QuantileDMatrix(Xtr, ytr, max_bin=args.max_bin, **({} if qtr is None else {"qid": qtr}))
    release(xp)

    sync(xp)
    t0 = time.perf_counter()
    dtrain = qm(0, n)
    sync(xp)
    t1 = time.perf_counter()
    booster = daskgb.train(params, dtrain, args.rounds, verbose_eval=False)
    sync(xp)
    t2 = time.perf_counter()
    res["daskgb"] = {"quantise_s": t1 - t0, "quantise_first_s": first_s, "train_s": t2 - t1,
                     "ms_per_round": 1e3 * (t2 - t1) / args.rounds,
                     "quality": quality(xp, metric, yte, booster.predict(Xte), qte)}
    del dtrain, booster
    release(xp)
    # Untimed, each library in a fresh process: a working round's memory does not grow with rounds.
    res["daskgb"]["peak_mem_gib"] = None if xp is np else peak_memory(name, "daskgb", args)

    if not args.skip_xgboost:
        import xgboost as xgb

        kw = {} if qtr is None else {"qid": qtr}
        sync(xp)
        t0 = time.perf_counter()
        dx = xgb.QuantileDMatrix(Xtr, ytr, max_bin=args.max_bin, **kw)
        sync(xp)
        t1 = time.perf_counter()
        bx = xgb.train(xgb_params, dx, args.rounds)
        sync(xp)
        t2 = time.perf_counter()
        res["xgboost"] = {"version": xgb.__version__, "quantise_s": t1 - t0, "train_s": t2 - t1,
                          "ms_per_round": 1e3 * (t2 - t1) / args.rounds,
                          "quality": quality(xp, metric, yte, bx.inplace_predict(Xte), qte)}
        del dx, bx
        release(xp)
        res["xgboost"]["peak_mem_gib"] = None if xp is np else peak_memory(name, "xgboost", args)
        res["ratio"] = res["daskgb"]["train_s"] / res["xgboost"]["train_s"]
    return res


def sweep(args, device, xp):
    """Time per round against rows, Higgs-shaped, both libraries (fewer rounds: the per-round cost)."""
    import daskgb
    from synthetic import make_higgs

    full = max(1000, int((args.rows or 10_500_000) * args.scale))
    sizes = sorted({min(full, s) for s in (1_000_000, 2_000_000, 4_000_000, 8_000_000)} | {full})
    X, y = make_higgs(xp, full, args.seed)
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": args.eta, "max_bin": args.max_bin,
              "device": device}
    rounds = args.sweep_rounds
    points = []
    for n in sizes:
        d = daskgb.QuantileMatrix(X[:n], y[:n], max_bin=args.max_bin, device=device)
        sync(xp)
        t = time.perf_counter()
        daskgb.train(params, d, rounds, verbose_eval=False)
        sync(xp)
        point = {"rows": n, "daskgb_ms_per_round": 1e3 * (time.perf_counter() - t) / rounds}
        del d
        release(xp)
        if not args.skip_xgboost:
            import xgboost as xgb

            dx = xgb.QuantileDMatrix(X[:n], y[:n], max_bin=args.max_bin)
            sync(xp)
            t = time.perf_counter()
            xgb.train({**params, "tree_method": "hist", "device": "cuda" if device == "cuda" else "cpu"}, dx, rounds)
            sync(xp)
            point["xgboost_ms_per_round"] = 1e3 * (time.perf_counter() - t) / rounds
            del dx
            release(xp)
        points.append(point)
        print(json.dumps(point), flush=True)
    return {"rounds": rounds, "points": points}


def markdown(results) -> str:
    lines = ["| set | rows x features | metric | daskgb train | XGBoost train | ratio | daskgb metric | "
             "XGBoost metric | daskgb peak mem | XGBoost peak mem | daskgb quantise | XGBoost quantise |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def mem(v):
        return "n/a" if v is None else f"{v:.2f} GiB"

    for r in results["sets"]:
        ours, theirs = r["daskgb"], r.get("xgboost")
        lines.append(
            f"| {r['set']} | {r['rows']:,} x {r['features']} | {r['metric']} | {ours['train_s']:.2f} s | "
            + (f"{theirs['train_s']:.2f} s | {r['ratio']:.2f} | " if theirs else "- | - | ")
            + f"{ours['quality']:.5f} | " + (f"{theirs['quality']:.5f} | " if theirs else "- | ")
            + f"{mem(ours['peak_mem_gib'])} | " + (f"{mem(theirs['peak_mem_gib'])} |" if theirs else "- |")
            + f" {ours['quantise_s']:.2f} s | " + (f"{theirs['quantise_s']:.2f} s |" if theirs else "- |"))
    head = (f"{results['rounds']} rounds, eta {results['eta']}, max_bin {results['max_bin']}, device "
            f"{results['device']} ({results.get('gpu', 'cpu')}), XGBoost {results.get('xgboost_version', '-')}\n\n")
    text = head + "\n".join(lines) + "\n"
    if results.get("user_paths"):
        from user_paths import table

        text += "\nWhat users do around training (examples/user_paths.py):\n\n" + table(results["user_paths"]) + "\n"
    return text


def plot(results, path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    pts = results["sweep"]["points"]
    rows = [p["rows"] / 1e6 for p in pts]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(rows, [p["daskgb_ms_per_round"] for p in pts], "o-", label="daskgb")
    if "xgboost_ms_per_round" in pts[0]:
        ax.plot(rows, [p["xgboost_ms_per_round"] for p in pts], "s-", label="XGBoost hist")
    ax.set_xlabel("rows (millions), Higgs-shaped, 28 features, depth 8")
    ax.set_ylabel("ms per boosting round")
    ax.set_title(f"time per round ({results.get('gpu', results['device'])})")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {','.join(SETS)}")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every set's rows")
    ap.add_argument("--rows", type=int, default=None, help="training rows of every chosen set (and of the sweep)")
    ap.add_argument("--airline-rows", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--skip-xgboost", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also time per round against rows (the plot)")
    ap.add_argument("--sweep-rounds", type=int, default=100)
    ap.add_argument("--out", default="benchmark-results")
    ap.add_argument("--plot", default=None, help="only draw the plot from a saved benchmark.json")
    ap.add_argument("--skip-user-paths", action="store_true", help="leave out the user-path table")
    ap.add_argument("--peak-memory-of", default=None, metavar="SET:LIB",
                    help="(internal) print peak_memory_here's figure for one set and library as JSON")
    import user_paths  # it measures with this module's helpers: imported once this module is whole

    user_paths.add_arguments(ap, prefix="up-")
    args = ap.parse_args(argv)

    if args.plot:
        results = json.loads(Path(args.plot).read_text())
        out = Path(args.plot).with_name("scaling.png")
        print(out if plot(results, out) else "matplotlib is not installed: no plot")
        return

    from daskgb.backend import get_backend, resolve_device

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in names if s not in SETS]
    if unknown:
        ap.error(f"unknown sets {unknown}; choose from {list(SETS)}")
    if args.airline_rows is None:
        if xp is np:
            args.airline_rows = 2_000_000
        else:  # X (13 float32) and y, with room for both libraries' working memory
            free, _ = xp.cuda.runtime.memGetInfo()
            args.airline_rows = int(min(114_000_000, free * 0.25 / (14 * 4)) / args.scale)
    if args.peak_memory_of:
        name, lib = args.peak_memory_of.split(":")
        print(json.dumps({"peak_mem_gib": peak_memory_here(name, lib, args, device, xp)}))
        return
    results = {"device": device, "rounds": args.rounds, "eta": args.eta, "max_bin": args.max_bin, "sets": []}
    if xp is not np:
        results["gpu"] = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    if not args.skip_xgboost:
        import xgboost as xgb

        results["xgboost_version"] = xgb.__version__
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        r = run_set(name, args, device, xp)
        release(xp)  # the set's arrays went with run_set's frame
        results["sets"].append(r)
        print(json.dumps(r), flush=True)
        (out / "benchmark.json").write_text(json.dumps(results, indent=2))  # partial results survive a crash
    if not (args.skip_user_paths or args.skip_xgboost):  # the table is both libraries side by side
        for name in ("rows", "eval_rows", "wide_rows", "ranking_rows", "cold_rows"):
            key = "up_" + name
            setattr(args, key, max(1000, int(getattr(args, key) * args.scale)))
        results["user_paths"] = user_paths.run(args, device, args.rounds, args.max_bin, args.seed, prefix="up-")
        (out / "benchmark.json").write_text(json.dumps(results, indent=2))
    if args.sweep:
        results["sweep"] = sweep(args, device, xp)
    (out / "benchmark.json").write_text(json.dumps(results, indent=2))
    (out / "benchmark.md").write_text(markdown(results))
    print(markdown(results))
    if args.sweep and plot(results, out / "scaling.png"):
        print(f"plot: {out / 'scaling.png'}")
    elif args.sweep:
        print(f"matplotlib is not installed: no plot (python examples/benchmark.py --plot {out / 'benchmark.json'} "
              "draws it elsewhere)")


if __name__ == "__main__":
    main()
