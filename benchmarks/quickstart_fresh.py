"""The quickstart's fit as a user first meets it, daskgb against xgboost.dask (issue: CPU workers at XGBoost's speed).

    python benchmarks/quickstart_fresh.py                 # 3 runs each, alternating
    python benchmarks/quickstart_fresh.py --smoke         # 2,000 rows, 3 rounds, one run each, in this process

Each run is a fresh Python process that does what examples/quickstart.py does on a CPU-only
machine: starts a LocalCluster of 2 worker processes x 1 thread with its dashboard (on a free
port: daskgb's page joins it and the workers report each round to it, as in the quickstart;
the smoke run has none), whose fresh workers load daskgb's compiled loops from numba's cache,
or XGBoost's library, in the timed fit; makes the quickstart's data (200,000 training rows x
20 features, 5% missing, 40,000 held out) and persists it (waiting until the workers hold
it), then times the fit with the held-out rows as eval_set (100 rounds, depth 6, learning
rate 0.3, logloss every round): DaskGBClassifier, or xgboost.dask's DaskXGBClassifier with
tree_method="hist" and the same parameters. numba's cache is what the machine has (run
examples/quickstart.py or `daskgb warm-up` once first for a warm one). Prints
each run's fit seconds, the medians and their ratio (ours / XGBoost's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def one_fit(library: str, smoke: bool) -> dict:
    sys.path.insert(0, str(EXAMPLES))
    import dask
    from distributed import Client, LocalCluster, wait

    import quickstart

    rounds = 3 if smoke else 100
    if smoke:
        quickstart.N_TRAIN, quickstart.N_TEST = 1_600, 400
    # (The smoke run's workers are threads of this process: what it checks is the script, not the timing.)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=not smoke,
                      dashboard_address=None if smoke else ":0") as cluster, Client(cluster) as client:
        X, y = dask.persist(*quickstart.make_data("cpu"))
        wait([X, y])  # the clock starts once the workers hold the data (persist returns at once)
        X_train, y_train = X[:quickstart.N_TRAIN], y[:quickstart.N_TRAIN]
        X_test, y_test = X[quickstart.N_TRAIN:], y[quickstart.N_TRAIN:]
        kw = dict(n_estimators=rounds, max_depth=6, learning_rate=0.3, max_bin=256)
        if library == "daskgb":
            import daskgb

            clf = daskgb.DaskGBClassifier(**kw, client=client)
        else:
            import xgboost.dask

            clf = xgboost.dask.DaskXGBClassifier(**kw, tree_method="hist", eval_metric="logloss")
            clf.client = client
        t = time.perf_counter()
        clf.fit(X_train, y_train, eval_set=[(X_test, y_test)], verbose=False)
        fit_s = time.perf_counter() - t
        logloss = clf.evals_result()["validation_0"]["logloss"][-1]
    return {"library": library, "fit_s": fit_s, "logloss": logloss}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="2,000 rows, 3 rounds, one run each")
    ap.add_argument("--one", choices=("daskgb", "xgboost"), help=argparse.SUPPRESS)  # a run, in its own process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_fit(args.one, args.smoke)))
        return
    repeats = 1 if args.smoke else args.repeats
    runs = {"daskgb": [], "xgboost": []}
    for _ in range(repeats):
        for library in runs:
            if args.smoke:
                run = one_fit(library, smoke=True)
            else:
                cmd = [sys.executable, __file__, "--one", library]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                run = json.loads(out.strip().splitlines()[-1])
            runs[library].append(run["fit_s"])
            print(f"{library}: fit {run['fit_s']:.2f} s, eval logloss {run['logloss']:.4f}", flush=True)
    ours, theirs = (statistics.median(runs[k]) for k in ("daskgb", "xgboost"))
    print(f"medians of {repeats}: daskgb {ours:.2f} s, xgboost.dask {theirs:.2f} s, ratio {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
