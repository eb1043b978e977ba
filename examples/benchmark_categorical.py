"""Categorical features: daskgb against XGBoost on the same data, in the same run.

    python examples/benchmark_categorical.py                      # 5M rows, 5 categorical + 20 numeric, GPU
    python examples/benchmark_categorical.py --rows 1000000 --rounds 200
    python examples/benchmark_categorical.py --device cpu --smoke # seconds

The data look like real tabular data: 5 categorical columns of --cardinalities categories
with skewed (Zipf-like) frequencies and a few missing values, 20 numeric columns of which some
are few-valued, some heavy-tailed and some partly missing; the binary label depends on
category effects, numeric effects and an interaction. Both libraries train the same
parameters (binary:logistic, max_depth 6, eta 0.1, max_bin 256, XGBoost's categorical
defaults max_cat_to_onehot 4 and max_cat_threshold 64) from the same device arrays: daskgb's
QuantileMatrix(feature_types=...) and XGBoost's QuantileDMatrix(enable_categorical=True,
feature_types=...). A fit is the matrix built and the rounds trained; the first fit of each
library in this process is reported apart (kernel compiles and caches), then the median of
--repeats fits. The AUC is each model's on --test-rows held-out rows.
"""

from __future__ import annotations

import argparse
import statistics
import time


def make_data(xp, rows: int, cardinalities, n_numeric: int, seed: int):
    """(X float32 (rows, len(cardinalities) + n_numeric), y float32, feature_types)."""
    rng = xp.random.default_rng(seed) if hasattr(xp.random, "default_rng") else xp.random.RandomState(seed)
    cols, score = [], xp.zeros(rows, dtype=xp.float64)
    for j, card in enumerate(cardinalities):
        # Zipf-like frequencies: category k drawn with weight 1 / (k + 1).
        u = rng.random(rows)
        c = xp.floor(xp.exp(u * xp.log(card + 1.0)) - 1.0).clip(0, card - 1)
        # A random effect per category, the codes shuffled so frequency and code differ.
        perm = xp.asarray(_host_rng(seed + j).permutation(card))
        c = perm[c.astype(xp.int64)].astype(xp.float32)
        effect = xp.asarray(_host_rng(seed + 100 + j).normal(size=card))
        score += effect[c.astype(xp.int64)] * (1.0 if j % 2 == 0 else 0.5)
        c[rng.random(rows) < 0.02] = xp.nan
        cols.append(c)
    for j in range(n_numeric):
        v = rng.standard_normal(rows)
        if j % 5 == 0:  # few-valued
            v = xp.floor(v * 2.0)
        elif j % 5 == 1:  # heavy-tailed
            v = xp.exp(v * 1.5)
        if j < 6:
            score += (0.6 / (j + 1)) * xp.tanh(v)
        v = v.astype(xp.float32)
        if j % 4 == 3:  # partly missing
            v[rng.random(rows) < 0.15] = xp.nan
        cols.append(v)
    score += 0.5 * xp.nan_to_num(cols[1]) % 2 * xp.tanh(xp.nan_to_num(cols[len(cardinalities)]))
    score += rng.standard_normal(rows) * 1.0
    X = xp.stack(cols, axis=1).astype(xp.float32)
    y = (score > xp.median(score)).astype(xp.float32)
    return X, y, ["c"] * len(cardinalities) + ["q"] * n_numeric


def _host_rng(seed: int):
    import numpy as np

    return np.random.default_rng(seed)


def auc(y, p) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--test-rows", type=int, default=500_000)
    ap.add_argument("--cardinalities", default="3,30,300,1000,5000")
    ap.add_argument("--numeric", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--max-depth", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--skip-xgboost", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="20,000 rows, 10 rounds, 1 repeat")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.test_rows, args.rounds, args.repeats = 20_000, 5_000, 10, 1

    import numpy as np

    import daskgb

    if args.device == "cuda":
        import cupy as xp

        def sync():
            xp.cuda.runtime.deviceSynchronize()

        to_host = xp.asnumpy
    else:
        xp, sync, to_host = np, (lambda: None), np.asarray
    cards = [int(c) for c in args.cardinalities.split(",")]
    X, y, types = make_data(xp, args.rows + args.test_rows, cards, args.numeric, seed=7)
    Xt, yt = xp.ascontiguousarray(X[: args.rows]), y[: args.rows]
    Xe, ye = xp.ascontiguousarray(X[args.rows :]), to_host(y[args.rows :])
    sync()
    params = {"objective": "binary:logistic", "max_depth": args.max_depth, "eta": 0.1, "max_bin": 256}

    def ours():
        m = daskgb.QuantileMatrix(Xt, yt, feature_types=types, max_bin=256, device=args.device)
        b = daskgb.train({**params, "device": args.device}, m, args.rounds, verbose_eval=False)
        sync()
        return b, lambda: to_host(b.predict(Xe))

    def theirs():
        import xgboost as xgb

        m = xgb.QuantileDMatrix(Xt, yt, feature_types=types, enable_categorical=True, max_bin=256)
        b = xgb.train({**params, "device": args.device, "tree_method": "hist"}, m, args.rounds)
        sync()
        return b, lambda: to_host(b.inplace_predict(Xe))

    libs = [("daskgb", ours)] + ([] if args.skip_xgboost else [("XGBoost", theirs)])
    results = {}
    for name, fit in libs:
        t = time.perf_counter()
        model, predict = fit()
        first = time.perf_counter() - t
        times = []
        for _ in range(args.repeats):
            del model
            t = time.perf_counter()
            model, predict = fit()
            times.append(time.perf_counter() - t)
        results[name] = (first, statistics.median(times), auc(ye, predict()),
                         getattr(model, "attr", lambda _: None)("training_path"))
    xgb_version = ""
    if not args.skip_xgboost:
        import xgboost as xgb

        xgb_version = f", xgboost {xgb.__version__}"
    print(f"{args.rows:,} rows x {len(cards)} categorical ({args.cardinalities} categories) + {args.numeric} numeric, "
          f"{args.rounds} rounds of depth {args.max_depth}, device {args.device}, median of {args.repeats}"
          f"{xgb_version}")
    print("| library | first fit (s) | fit (s) | test AUC | path |")
    print("|---|---|---|---|---|")
    for name, (first, warm, score, path) in results.items():
        print(f"| {name} | {first:.2f} | {warm:.2f} | {score:.4f} | {path or ''} |")
    if "XGBoost" in results:
        a, b = results["daskgb"], results["XGBoost"]
        print(f"ratio daskgb / XGBoost: first fit {a[0] / b[0]:.2f}, fit {a[1] / b[1]:.2f}; "
              f"AUC difference {a[2] - b[2]:+.4f}")


if __name__ == "__main__":
    main()
