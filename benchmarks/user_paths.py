"""daskgb beside XGBoost `hist` on the paths users take, not only the fastest one: an eval set
watched every round with early stopping, prediction, lossguide, a wide set of mostly missing
values, and the first fit in a fresh process (empty kernel cache).

Both libraries train the same rows with the same parameters in the same run. Each warm case
is timed `--repeats` times after an untimed warm-up and its median printed with the ratio
daskgb / XGBoost. The cold case runs each library once in a child process of its own, with
CuPy's kernel cache pointed at an empty folder, and times the child's whole life (imports,
kernel compilation, quantisation, 20 rounds). Memory: the device's used memory above the
level before the matrices are built, through the fit, sampled every 2 ms in a run of its own,
for both libraries alike (daskgb's memory pool is emptied first, so what it caches counts).

Data, Higgs-shaped (examples/synthetic.py) and made to look like real rows: three columns of
few values, two columns with a third of their values missing; a tenth more rows held out as
the eval set. The wide case is Bosch-shaped: 968 columns, about 80% missing.

    python benchmarks/user_paths.py                      # 1M rows on the GPU
    python benchmarks/user_paths.py --rows 10500000 --eval-rows 500000 --rounds 500 \\
        --cases "no eval set,eval set watched"            # the Higgs-sized eval-set case
    python benchmarks/user_paths.py --smoke --device cpu # the same code in seconds
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

COLD_SCRIPT = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {examples!r})
lib, device, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
import numpy as np
xp = np
if device == "cuda":
    import cupy as xp
from synthetic import make_higgs
X, y = make_higgs(xp, rows, 7)[:2]
params = {{"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "device": device}}
if lib == "daskgb":
    import daskgb
    b = daskgb.train(params, daskgb.QuantileMatrix(X, y, device=device), 20, verbose_eval=False)
else:
    import xgboost as xgb
    b = xgb.train({{**params, "tree_method": "hist"}}, xgb.QuantileDMatrix(X, y), 20)
if device == "cuda":
    xp.cuda.runtime.deviceSynchronize()
print(time.perf_counter() - t0)
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


class DeviceUsed:
    """Peak of the device's used memory (cudaMemGetInfo) above the level at entry, sampled every 2 ms."""

    def __init__(self, xp):
        self.xp, self.peak = xp, None

    def _used(self):
        free, total = self.xp.cuda.runtime.memGetInfo()
        return total - free

    def __enter__(self):
        if self.xp is np:
            return self
        self.base = self.max = self._used()
        self.stop = threading.Event()

        def sample():
            while not self.stop.is_set():
                self.max = max(self.max, self._used())
                time.sleep(0.002)

        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.xp is np:
            return
        self.stop.set()
        self.thread.join()
        self.peak = (max(self.max, self._used()) - self.base) / 2**30


def release(xp):
    gc.collect()
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()
        xp.cuda.runtime.deviceSynchronize()


def sync(xp):
    if xp is not np:
        xp.cuda.runtime.deviceSynchronize()


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


def timed(xp, fn, repeats):
    """(median seconds over repeats, last result), after one untimed call."""
    fn()
    times, out = [], None
    for _ in range(repeats):
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


WARM_CASES = ("no eval set", "eval set watched", "eval set + early stopping", "predict", "lossguide", "wide")


def warm_cases(args, xp, libs):
    from daskgb.arrays import to_host
    from daskgb.metric import auc_of
    from synthetic import make_bosch, make_higgs

    n, n_eval = args.rows, args.eval_rows or max(1000, args.rows // 10)
    X, y = make_higgs(xp, n + n_eval, args.seed)[:2]
    X = realistic(xp, X)
    Xt, yt, Xe, ye = X[:n], y[:n], X[n:], y[n:]
    del X, y
    Xw, yw = make_bosch(xp, args.wide_rows, args.seed) if "wide" in args.cases else (None, None)
    base = {"objective": "binary:logistic", "eta": 0.1, "max_depth": 8}
    watched = {**base, "eval_metric": "auc"}
    quarter = max(2, args.rounds // 4)
    # name: (the rows, the fit on their matrices (train, eval))
    cases = {
        "no eval set": ((Xt, yt), lambda lib, d, e: libs.train(lib, base, d, args.rounds)),
        "eval set watched": ((Xt, yt), lambda lib, d, e: libs.train(lib, watched, d, args.rounds,
                                                                      evals=[(e, "eval")])),
        "eval set + early stopping": ((Xt, yt), lambda lib, d, e: libs.train(
            lib, watched, d, args.rounds, evals=[(e, "eval")], early_stopping_rounds=20)),
        "lossguide": ((Xt, yt), lambda lib, d, e: libs.train(
            lib, {**base, "grow_policy": "lossguide", "max_depth": 0, "max_leaves": 255}, d, quarter)),
        "wide": ((Xw, yw), lambda lib, d, e: libs.train(lib, {**base, "max_depth": 6}, d, quarter)),
    }
    titles = {"no eval set": f"{n} rows, {args.rounds} rounds, no eval set",
              "eval set watched": f"the same, a {n_eval}-row eval set watched with auc",
              "eval set + early stopping": "the same, early_stopping_rounds=20",
              "lossguide": f"lossguide, max_leaves 255, {quarter} rounds",
              "wide": f"wide {args.wide_rows}x968, 80% missing, depth 6, {quarter} rounds"}
    rows = []
    for lib in ("daskgb", "xgboost"):
        for name, ((Xc, yc), fit) in cases.items():
            if name not in args.cases and not (name == "no eval set" and "predict" in args.cases):
                continue
            dtrain = libs.matrix(lib, Xc, yc)
            deval = libs.matrix(lib, Xe, ye, ref=dtrain) if Xc is Xt else None
            s, booster = timed(xp, lambda: fit(lib, dtrain, deval), args.repeats)
            dtrain = deval = None
            mem = None
            if args.memory and xp is not np:
                # Memory in a run of its own, from an empty pool: the matrices and the fit, as a user's
                # first fit pays them (a library may keep working buffers with the matrix between fits).
                release(xp)
                with DeviceUsed(xp) as used:
                    d = libs.matrix(lib, Xc, yc)
                    fit(lib, d, libs.matrix(lib, Xe, ye, ref=d) if Xc is Xt else None)
                    sync(xp)
                del d
                mem = used.peak
            auc = auc_of(to_host(ye), to_host(libs.predict(lib, booster, Xe))) if Xc is Xt else None
            if name in args.cases:
                report(rows, {"case": titles[name], "lib": lib, "s": s, "mem_gib": mem, "auc": auc,
                              "rounds": getattr(booster, "best_iteration", None)})
            if name == "no eval set" and "predict" in args.cases:
                s, _ = timed(xp, lambda: libs.predict(lib, booster, Xt), args.repeats)
                report(rows, {"case": f"predict {n} rows, {args.rounds} trees of depth 8", "lib": lib, "s": s,
                              "mem_gib": None, "auc": None, "rounds": None})
            booster = None
            release(xp)
    return rows


def cold_case(args):
    examples = str(Path(__file__).resolve().parent.parent / "examples")
    rows = []
    for lib in ("daskgb", "xgboost"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "CUPY_CACHE_DIR": cache}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", COLD_SCRIPT.format(examples=examples), lib, args.device,
                                  str(args.cold_rows)], env=env, capture_output=True, text=True, check=True)
            whole = time.perf_counter() - t0
        report(rows, {"case": f"cold start {args.cold_rows} rows, 20 rounds", "lib": lib, "s": whole,
                     "mem_gib": None, "rounds": None, "in_process_s": float(out.stdout.split()[-1])})
    return rows


def table(rows) -> str:
    out = ["| case | daskgb s | XGBoost s | ratio | daskgb GiB | XGBoost GiB | eval AUC (ours / theirs) "
           "| best_iteration (ours / theirs) |",
           "|---|---:|---:|---:|---:|---:|---|---|"]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    for case in cases:
        ours = next(r for r in rows if r["case"] == case and r["lib"] == "daskgb")
        theirs = next(r for r in rows if r["case"] == case and r["lib"] == "xgboost")
        mem = [f"{r['mem_gib']:.2f}" if r["mem_gib"] is not None else "" for r in (ours, theirs)]
        best = f"{ours['rounds']} / {theirs['rounds']}" if ours["rounds"] is not None else ""
        auc = f"{ours['auc']:.4f} / {theirs['auc']:.4f}" if ours.get("auc") is not None else ""
        out.append(f"| {case} | {ours['s']:.3f} | {theirs['s']:.3f} | {ours['s'] / theirs['s']:.2f} | "
                   f"{mem[0]} | {mem[1]} | {auc} | {best} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--eval-rows", type=int, default=None, help="default: a tenth of --rows")
    ap.add_argument("--cases", default=",".join(WARM_CASES + ("cold",)),
                    help=f"comma-separated, of {','.join(WARM_CASES + ('cold',))}")
    ap.add_argument("--no-memory", dest="memory", action="store_false", help="skip the runs that measure memory")
    ap.add_argument("--wide-rows", type=int, default=200_000)
    ap.add_argument("--cold-rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=200, help="at most, with early stopping; a quarter for the others")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--smoke", action="store_true", help="small sizes and few rounds: the same code in seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.wide_rows, args.cold_rows, args.rounds, args.repeats = 20_000, 2_000, 5_000, 12, 1
    if args.device == "cuda":
        import cupy as xp
    else:
        xp = np
    args.cases = args.cases.split(",")
    unknown = set(args.cases) - set(WARM_CASES + ("cold",))
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}")
    libs = Libraries(args.device, args.max_bin)
    rows = warm_cases(args, xp, libs) + (cold_case(args) if "cold" in args.cases else [])
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
