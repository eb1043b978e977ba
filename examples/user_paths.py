"""daskgb beside XGBoost `hist` on the paths users take, not only the fastest one.

    python examples/user_paths.py                              # Higgs-sized, on the GPU
    python examples/user_paths.py --rows 1000000 --rounds 200  # smaller
    python examples/user_paths.py --smoke --device cpu         # the same code in seconds
    python examples/benchmark.py --user-paths ...              # this table beside the data sets'

The cases (WARM_CASES, and "cold"): training with nothing watching; the same with an eval
set watched with auc every round; the estimators (GBClassifier / XGBClassifier) fitted
with eval_set and early_stopping_rounds; predict of the training rows; lossguide with 255
leaves; depth 12; the wide sets (Bosch-shaped 968 columns, 80% missing, and a ranking set
of 700 columns, 60% missing, rank:ndcg); the first fit in a fresh process (an empty kernel
cache).

Both libraries train the same rows with the same parameters in the same run, after an
untimed warm-up of each. A case is timed once, and twice more where that took under 10 s:
the median is printed, with the ratio daskgb / XGBoost and the quality of both (AUC on the
held-out rows, NDCG@10 for ranking). The cold case runs each library once in a child
process of its own, with CuPy's kernel cache pointed at an empty folder, and times the
child's whole life (imports, kernel compilation, quantisation, 20 rounds; the data made on
the host and copied to the device, so that making it compiles nothing) and, apart, the fit
from the data on the device to the trained model (fit_s in the JSON). Memory, with --memory
only: the device's used memory (cudaMemGetInfo) above the level before the matrices are
built, through the fit, sampled every 2 ms in a run of its own, for both libraries alike
(daskgb's memory pool is emptied first). In this process, after the cases before it, it
reads low for daskgb: CuPy's pool keeps blocks it cannot return (parts of them live) and
the fit's arrays land there unseen. examples/benchmark.py's peaks are the figures to quote:
each library in a fresh process, the pool holding nothing but the input.

Data made to look like real rows: Higgs-shaped (examples/synthetic.py) with three columns of
few values and two columns a third missing; a held-out eval set of --eval-rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark import PeakMemory, release, sync  # noqa: E402  (examples/, on the path above)

COLD_SCRIPT = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {examples!r})
lib, device, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
import numpy as np
from synthetic import make_higgs
# Made on the host and copied over: made with CuPy, the data would compile CuPy's kernels in
# this fresh process, a cost of the benchmark, not of either library.
X, y = make_higgs(np, rows, 7)[:2]
if device == "cuda":
    import cupy
    X, y = cupy.asarray(X), cupy.asarray(y)
    cupy.cuda.runtime.deviceSynchronize()
t1 = time.perf_counter()
params = {{"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "device": device}}
if lib == "daskgb":
    import daskgb
    b = daskgb.train(params, daskgb.QuantileMatrix(X, y, device=device), 20, verbose_eval=False)
else:
    import xgboost as xgb
    b = xgb.train({{**params, "tree_method": "hist"}}, xgb.QuantileDMatrix(X, y), 20)
if device == "cuda":
    cupy.cuda.runtime.deviceSynchronize()
print(time.perf_counter() - t0, time.perf_counter() - t1)
"""


def realistic(xp, X):
    """Few-valued and partly missing columns, as real tables have them."""
    X = X.copy()
    for c in (0, 1, 2):  # counts and codes: a handful of distinct values
        X[:, c] = xp.floor(xp.abs(X[:, c]) * 2).clip(0, 5 + c)
    rs = xp.random.RandomState(11)
    for c in (3, 4):
        X[:, c] = xp.where(rs.random_sample(X.shape[0]) < 0.33, xp.float32(xp.nan), X[:, c])
    return X


class Libraries:
    """The same operations spelled in each library."""

    def __init__(self, device, max_bin):
        import daskgb
        import xgboost as xgb

        self.daskgb, self.xgb, self.device, self.max_bin = daskgb, xgb, device, max_bin

    def matrix(self, lib, X, y, ref=None):
        if lib == "daskgb":
            return self.daskgb.QuantileMatrix(X, y, max_bin=self.max_bin, ref=ref, device=self.device)
        return self.xgb.QuantileDMatrix(X, y, max_bin=self.max_bin, ref=ref)

    def train(self, lib, params, dtrain, rounds, evals=(), early_stopping_rounds=None):
        params = {**params, "max_bin": self.max_bin, "device": self.device}
        if lib == "daskgb":
            return self.daskgb.train(params, dtrain, rounds, evals=list(evals), verbose_eval=False,
                                     early_stopping_rounds=early_stopping_rounds)
        return self.xgb.train({**params, "tree_method": "hist"}, dtrain, rounds, evals=list(evals),
                              verbose_eval=False, early_stopping_rounds=early_stopping_rounds)

    def predict(self, lib, booster, X):
        return booster.predict(X) if lib == "daskgb" else booster.inplace_predict(X)

    def ranking_matrix(self, lib, X, y, qid):
        if lib == "daskgb":
            return self.daskgb.QuantileMatrix(X, y, qid=qid, max_bin=self.max_bin, device=self.device)
        return self.xgb.QuantileDMatrix(X, y, qid=qid, max_bin=self.max_bin)

    def classifier(self, lib, **params):
        params = {**params, "max_bin": self.max_bin, "device": self.device}
        if lib == "daskgb":
            return self.daskgb.GBClassifier(**params)
        return self.xgb.XGBClassifier(tree_method="hist", **params)


def timed(xp, fn, repeats, under_s: float = 10.0):
    """(median seconds, last result) after one untimed call: one timed call, and repeats - 1
    more where it took under under_s seconds."""
    fn()
    times, out = [], None
    while not times or (len(times) < repeats and times[0] < under_s):
        release(xp)
        t0 = time.perf_counter()
        out = fn()
        sync(xp)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def report(rows, row) -> None:
    """Keep a result and print it at once: a run cut short still says what it measured."""
    rows.append(row)
    print(json.dumps(row), flush=True)


WARM_CASES = ("no eval set", "eval set watched", "estimators + early stopping", "predict", "lossguide", "depth 12",
              "wide", "ranking")


def _quality(lib, libs, booster, X, y, qid=None):
    """AUC of the held-out rows (NDCG@10 over qid's queries for ranking)."""
    from daskgb.arrays import to_host
    from daskgb.metric import auc_of, evaluate
    from daskgb.ranking import groups_from_qid

    pred = to_host(libs.predict(lib, booster, X)).astype(np.float32)
    if qid is None:
        return auc_of(to_host(y), pred)
    q = to_host(qid)
    return evaluate("ndcg@10", np, to_host(y).astype(np.float32), pred, groups=groups_from_qid(q, q.shape[0]))


def warm_cases(args, xp, libs):
    from synthetic import make_bosch, make_higgs, make_ltr

    n, n_eval = args.rows, args.eval_rows or max(1000, args.rows // 20)
    X, y = make_higgs(xp, n + n_eval, args.seed)[:2]
    X = realistic(xp, X)
    Xt, yt, Xe, ye = X[:n], y[:n], X[n:], y[n:]
    del X, y
    base = {"objective": "binary:logistic", "eta": 0.1, "max_depth": 8}
    watched = {**base, "eval_metric": "auc"}
    short = min(200, args.rounds)
    higgs = (Xt, yt, Xe, ye, None)
    # name: (title, rows (train X, y, eval X, y, (train qid, eval qid) or None), fit(lib, dtrain, deval) -> model, or
    # None where the fit takes the raw rows (the estimators))
    cases = {
        "no eval set": (f"{n} rows, {args.rounds} rounds, depth 8, no eval set", higgs,
                        lambda lib, d, e: libs.train(lib, base, d, args.rounds)),
        "eval set watched": (f"the same, a {n_eval}-row eval set watched with auc", higgs,
                             lambda lib, d, e: libs.train(lib, watched, d, args.rounds, evals=[(e, "eval")])),
        "estimators + early stopping": (
            "the same through GBClassifier / XGBClassifier: fit(eval_set=..., early_stopping_rounds=20)", higgs,
            None),
        "lossguide": (f"lossguide, max_leaves 255, {short} rounds", higgs, lambda lib, d, e: libs.train(
            lib, {**base, "grow_policy": "lossguide", "max_depth": 0, "max_leaves": 255}, d, short)),
        "depth 12": (f"depth 12, {short} rounds", higgs, lambda lib, d, e: libs.train(
            lib, {**base, "max_depth": 12}, d, short)),
    }
    if "wide" in args.cases:
        # Half as many held-out rows as training rows: with ~0.6% positives, 107K held-out rows
        # moved AUC by +-0.005 between seeds for models of equal quality, more than the 0.002 compared.
        Xw, yw = make_bosch(xp, args.wide_rows + args.wide_rows // 2, args.seed)
        m = args.wide_rows
        cases["wide"] = (f"Bosch-shaped {m}x968, 80% missing, depth 6, {args.rounds} rounds",
                         (Xw[:m], yw[:m], Xw[m:], yw[m:], None),
                         lambda lib, d, e: libs.train(lib, {**base, "max_depth": 6}, d, args.rounds))
    if "ranking" in args.cases:
        # Training queries, then a tenth as many held out, whose NDCG@10 is the quality.
        n_queries = max(10, int(args.ranking_rows / 21))
        Xr, yr, qr = make_ltr(xp, n_queries + max(2, n_queries // 10), 700, 21.0, args.seed)
        Xr[xp.random.RandomState(3).random_sample(Xr.shape) < 0.6] = xp.nan
        m = int(xp.searchsorted(qr, n_queries))  # qid ascends: the held-out queries' first row
        cases["ranking"] = (f"ranking {m}x700, 60% missing, rank:ndcg, depth 8, {args.rounds} rounds",
                            (Xr[:m], yr[:m], Xr[m:], yr[m:], (qr[:m], qr[m:])), lambda lib, d, e: libs.train(
                                lib, {"objective": "rank:ndcg", "eta": 0.1, "max_depth": 8}, d, args.rounds))
    rows = []
    for lib in ("daskgb", "xgboost"):
        for name, (title, (Xc, yc, Xv, yv, qids), fit) in cases.items():
            qid, qid_eval = qids if qids is not None else (None, None)
            wanted = name in args.cases or (name == "no eval set" and "predict" in args.cases)
            if not wanted:
                continue
            if fit is None:  # the estimators: quantising is part of their fit, for both
                est = lambda: libs.classifier(lib, n_estimators=args.rounds, max_depth=8,  # noqa: E731
                                              learning_rate=0.1, eval_metric="auc", early_stopping_rounds=20)
                s, model = timed(xp, lambda: est().fit(Xc, yc, eval_set=[(Xv, yv)], verbose=False), args.repeats)
                booster = model.get_booster()
                report(rows, {"case": title, "lib": lib, "s": s, "mem_gib": None, "rounds": booster.best_iteration,
                              "quality": _quality(lib, libs, booster, Xv, yv)})
                model = booster = None
                release(xp)
                continue
            make = (lambda lib, X, y: libs.ranking_matrix(lib, X, y, qid)) if qid is not None else libs.matrix
            dtrain = make(lib, Xc, yc)
            deval = libs.matrix(lib, Xv, yv, ref=dtrain) if name == "eval set watched" else None
            s, booster = timed(xp, lambda: fit(lib, dtrain, deval), args.repeats)
            dtrain = deval = None
            mem = None
            if args.memory and xp is not np:
                # Memory in a run of its own, from an empty pool: the matrices and the fit, as a user's
                # first fit pays them (a library may keep working buffers with the matrix between fits).
                release(xp)
                with PeakMemory(xp, pool=False) as used:  # the device's used memory, for both alike
                    d = make(lib, Xc, yc)
                    fit(lib, d, libs.matrix(lib, Xv, yv, ref=d) if name == "eval set watched" else None)
                    sync(xp)
                del d
                mem = used.peak / 2**30
            if name in args.cases:
                report(rows, {"case": title, "lib": lib, "s": s, "mem_gib": mem, "rounds": None,
                              "quality": _quality(lib, libs, booster, Xv, yv, qid_eval)})
            if name == "no eval set" and "predict" in args.cases:
                s, _ = timed(xp, lambda: libs.predict(lib, booster, Xt), args.repeats)
                report(rows, {"case": f"predict {n} rows, {args.rounds} trees of depth 8", "lib": lib, "s": s,
                              "mem_gib": None, "rounds": None, "quality": None})
            booster = None
            release(xp)
    return rows


def cold_case(args):
    examples = str(Path(__file__).resolve().parent)
    rows = []
    for lib in ("daskgb", "xgboost"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "CUPY_CACHE_DIR": cache}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", COLD_SCRIPT.format(examples=examples), lib, args.device,
                                  str(args.cold_rows)], env=env, capture_output=True, text=True, check=True)
            whole = time.perf_counter() - t0
        in_process, fit = (float(v) for v in out.stdout.split()[-2:])
        # s: the fresh process from start to end; fit_s: from the data on the device to the trained
        # model, the library's import, first QuantileMatrix and first training.
        report(rows, {"case": f"cold start {args.cold_rows} rows, 20 rounds", "lib": lib, "s": whole,
                     "mem_gib": None, "rounds": None, "in_process_s": in_process, "fit_s": fit})
    return rows


def table(rows) -> str:
    """The markdown table of the cases measured for both libraries."""
    out = ["| case | daskgb s | XGBoost s | ratio | daskgb GiB | XGBoost GiB | quality (ours / theirs) "
           "| best_iteration (ours / theirs) |",
           "|---|---:|---:|---:|---:|---:|---|---|"]
    for case in dict.fromkeys(r["case"] for r in rows):
        ours = next((r for r in rows if r["case"] == case and r["lib"] == "daskgb"), None)
        theirs = next((r for r in rows if r["case"] == case and r["lib"] == "xgboost"), None)
        if ours is None or theirs is None:
            continue
        mem = [f"{r['mem_gib']:.2f}" if r["mem_gib"] is not None else "" for r in (ours, theirs)]
        best = f"{ours['rounds']} / {theirs['rounds']}" if ours["rounds"] is not None else ""
        quality = f"{ours['quality']:.4f} / {theirs['quality']:.4f}" if ours.get("quality") is not None else ""
        out.append(f"| {case} | {ours['s']:.3f} | {theirs['s']:.3f} | {ours['s'] / theirs['s']:.2f} | "
                   f"{mem[0]} | {mem[1]} | {quality} | {best} |")
    return "\n".join(out)


def add_arguments(ap, prefix: str = "") -> None:
    """The options of the user-path cases (prefix: for benchmark.py's, e.g. "up-")."""
    ap.add_argument(f"--{prefix}rows", type=int, default=10_500_000, help="Higgs-shaped training rows")
    ap.add_argument(f"--{prefix}eval-rows", type=int, default=500_000)
    ap.add_argument(f"--{prefix}wide-rows", type=int, default=1_070_000, help="Bosch-shaped rows")
    ap.add_argument(f"--{prefix}ranking-rows", type=int, default=419_000)
    ap.add_argument(f"--{prefix}cold-rows", type=int, default=100_000)
    ap.add_argument(f"--{prefix}cases", default=",".join(WARM_CASES + ("cold",)),
                    help=f"comma-separated, of {','.join(WARM_CASES + ('cold',))}")
    ap.add_argument(f"--{prefix}repeats", type=int, default=3, help="timed runs of a case under 10 s (median)")
    ap.add_argument(f"--{prefix}memory", dest=f"{prefix.replace('-', '_')}memory", action="store_true",
                    help="also measure memory in this process (reads low for daskgb: see the module's docstring)")
    ap.add_argument(f"--{prefix}no-memory", dest=f"{prefix.replace('-', '_')}memory", action="store_false",
                    help="no memory runs (the default)")


def run(args, device: str, rounds: int, max_bin: int, seed: int, prefix: str = "") -> list[dict]:
    """Every chosen case for both libraries (rows as report() printed them)."""
    import types

    get = lambda name: getattr(args, prefix.replace("-", "_") + name)  # noqa: E731
    opts = types.SimpleNamespace(rows=get("rows"), eval_rows=get("eval_rows"), wide_rows=get("wide_rows"),
                                 ranking_rows=get("ranking_rows"), cold_rows=get("cold_rows"),
                                 cases=[c.strip() for c in get("cases").split(",") if c.strip()],
                                 repeats=get("repeats"), memory=get("memory"), rounds=rounds, seed=seed,
                                 device=device)
    unknown = set(opts.cases) - set(WARM_CASES + ("cold",))
    if unknown:
        raise SystemExit(f"unknown user-path cases {sorted(unknown)}; choose from {list(WARM_CASES + ('cold',))}")
    if device == "cuda":
        import cupy as xp
    else:
        xp = np
    libs = Libraries(device, max_bin)
    return warm_cases(opts, xp, libs) + (cold_case(opts) if "cold" in opts.cases else [])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--rounds", type=int, default=500, help="the depth-8 cases' rounds (at most 200 for lossguide "
                    "and depth 12)")
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--smoke", action="store_true", help="small sizes and few rounds: the same code in seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.eval_rows, args.wide_rows, args.ranking_rows = 4_000, 1_000, 1_000, 1_000
        args.cold_rows, args.rounds, args.repeats = 2_000, 4, 1
    rows = run(args, args.device, args.rounds, args.max_bin, args.seed)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
