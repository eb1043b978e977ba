"""CPU fits with skewed columns read by their other entries and read densely (developer tool).

    python benchmarks/skewed_columns.py --data covertype             # 523K x 54, 7 classes, depth 8
    python benchmarks/skewed_columns.py --data binary --share 0.75   # 500K x (8 normal + 20 binary), depth 8
    python benchmarks/skewed_columns.py --data zeros --share 0.75    # 500K x (8 normal + 20 zero-inflated), depth 8
    python benchmarks/skewed_columns.py --smoke                      # 2,000 rows, 2 rounds, one repeat

A dense matrix's features whose one bin holds most of a worker's rows (histogram/compiled.py
entry_layout; e.g. one-hot columns) are read by their other entries only. This fits the same
data (quantising included, --threads threads, --rounds rounds) with the layout at its
threshold (`on`) and with it off (`off`: every feature read densely), alternating, --repeats
times each, and XGBoost CPU hist once a repeat where it is installed. --data binary: --share
is the binary columns' common value's share of the rows; --data zeros: the share of zeros in
20 columns whose other values are spread over their 256 bins. With either, `on` reads them by
their other entries where the share is at least 0.25. Prints each fit's seconds, the medians, on / off, on / XGBoost,
and the largest difference of the two settings' predictions (their histograms differ only in
rounding).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


def make_data(name: str, rows: int, share: float):
    """(X, y, params) of a set: covertype (examples/synthetic.py), binary or zeros."""
    if name == "covertype":
        from synthetic import make_covertype

        X, y = make_covertype(np, rows, 2017)
        return X, y, {"objective": "multi:softprob", "num_class": 7, "max_depth": 8}
    rs = np.random.RandomState(0)
    cont = rs.standard_normal((rows, 8)).astype(np.float32)
    if name == "binary":
        binary = (rs.random_sample((rows, 20)) < share).astype(np.float32)  # 1 in `share` of the rows
    else:  # 0 in `share` of the rows, else a lognormal amount (counts, sums of money)
        binary = np.where(rs.random_sample((rows, 20)) < share, 0.0,
                          rs.lognormal(0.0, 1.0, (rows, 20))).astype(np.float32)
    y = ((cont[:, 0] + 0.3 * binary[:, :5].sum(axis=1) + rs.standard_normal(rows)) > 0.5).astype(np.float32)
    return np.concatenate([cont, binary], axis=1), y, {"objective": "binary:logistic", "max_depth": 8}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("covertype", "binary", "zeros"), default="covertype")
    ap.add_argument("--rows", type=int, default=None, help="523,000 (covertype) or 500,000 (binary) by default")
    ap.add_argument("--share", type=float, default=0.75, help="--data binary or zeros: the common value's share "
                                                                "of the rows")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="2,000 rows, 2 rounds, one repeat, no XGBoost")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.rounds, args.repeats = 2000, 2, 1

    import daskgb
    from daskgb.histogram import compiled as hist_compiled

    rows = args.rows or (523_000 if args.data == "covertype" else 500_000)
    X, y, params = make_data(args.data, rows, args.share)
    params = {**params, "eta": 0.1, "max_bin": 256, "nthread": args.threads}
    # Binary columns' common value holds at least half the rows and the zeros --share of them;
    # the normal columns' fullest bin holds ~1% (256 bins): 0.25 reads the former apart only.
    threshold = hist_compiled._SKEWED_SHARE if args.data == "covertype" else 0.25
    settings = {"on": threshold, "off": 2.0}  # a share no bin reaches: every feature read densely

    def ours(setting):
        hist_compiled._SKEWED_SHARE = settings[setting]
        started = time.perf_counter()
        dm = daskgb.QuantileMatrix(X, y, max_bin=256, device="cpu")
        booster = daskgb.train({**params, "device": "cpu"}, dm, args.rounds)
        elapsed = time.perf_counter() - started
        layout = hist_compiled.entry_layout(dm.ellpack)  # as training made it (cached on the matrix)
        skewed = 0 if layout is None else X.shape[1] - layout.dense.size
        return elapsed, booster.predict(dm), skewed

    def theirs():
        import xgboost as xgb

        started = time.perf_counter()
        dm = xgb.QuantileDMatrix(X, y, max_bin=256)
        xgb.train({**params, "tree_method": "hist"}, dm, args.rounds)
        return time.perf_counter() - started

    try:
        import xgboost  # noqa: F401
        have_xgboost = not args.smoke
    except ImportError:
        have_xgboost = False
    for setting in settings:  # the loops compiled (or loaded from numba's cache) before any timing
        hist_compiled._SKEWED_SHARE = settings[setting]
        daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X[:1000], y[:1000], max_bin=256, device="cpu"), 1)
    times = {"on": [], "off": [], "xgboost": []}
    preds = {}
    for r in range(args.repeats):
        for setting in ("on", "off") if r % 2 == 0 else ("off", "on"):
            seconds, preds[setting], skewed = ours(setting)
            times[setting].append(seconds)
            print(f"repeat {r}: {setting:3s} {seconds:.3f} s ({skewed} of {X.shape[1]} features read by their "
                  f"other entries)", flush=True)
        if have_xgboost:
            times["xgboost"].append(theirs())
            print(f"repeat {r}: xgboost {times['xgboost'][-1]:.3f} s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    line = (f"{args.data} {rows:,} x {X.shape[1]}, {args.rounds} rounds, {args.threads} threads, medians of "
            f"{args.repeats}: on {med['on']:.3f} s, off {med['off']:.3f} s, on / off {med['on'] / med['off']:.2f}")
    if "xgboost" in med:
        line += f"; xgboost {med['xgboost']:.3f} s, on / xgboost {med['on'] / med['xgboost']:.2f}"
    print(line)
    print(f"largest prediction difference, on against off: {float(np.max(np.abs(preds['on'] - preds['off']))):.3g}")


if __name__ == "__main__":
    main()
