"""Higgs-shaped benchmark: daskgb against XGBoost `hist` on the same rows, parameters and device, in one run.

    python examples/benchmark_higgs.py                       # 10.5M x 28, depth 8, 500 rounds, on the GPU
    python examples/benchmark_higgs.py --rows 200000 --rounds 50 --device cpu

Data are made on the device from a seed (28 features: 21 "low-level" normal and
heavy-tailed ones, 7 nonlinear combinations of them, as in the Higgs set), with
a held-out test set of 10% more rows for AUC. Prints each library's
quantisation time, training time, time per round, test AUC, the ratio of
training times, and daskgb's ELLPACK size; writes the same as JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def make_higgs(xp, n_rows: int, seed: int):
    """(X float32 (n, 28), y float32 (n,)) on xp's device, deterministic for a seed."""
    rs = xp.random.RandomState(seed)
    low = rs.standard_normal((n_rows, 21)).astype(xp.float32)
    low[:, 0::3] = xp.abs(low[:, 0::3]) ** 1.5  # momentum-like, skewed
    high = xp.stack(
        [
            xp.sqrt(low[:, 0] ** 2 + low[:, 3] ** 2),
            low[:, 1] * low[:, 4],
            xp.tanh(low[:, 2] - low[:, 5]),
            xp.log1p(xp.abs(low[:, 6] * low[:, 9])),
            low[:, 7] ** 2 - low[:, 10],
            xp.sin(low[:, 8]) * low[:, 11],
            xp.abs(low[:, 12] + low[:, 15]) ** 0.5,
        ],
        axis=1,
    ).astype(xp.float32)
    X = xp.concatenate([low, high], axis=1)
    score = 0.8 * high[:, 0] - 0.6 * high[:, 1] + high[:, 2] - 0.5 * high[:, 4] + 0.7 * high[:, 5] - low[:, 13]
    score = score - score.mean()
    p = 1.0 / (1.0 + xp.exp(-score))
    y = (rs.random_sample(n_rows) < p).astype(xp.float32)
    return xp.ascontiguousarray(X), y


def sync(xp):
    if xp is not np:
        xp.cuda.runtime.deviceSynchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--skip-xgboost", action="store_true")
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args()

    import daskgb
    from daskgb.backend import get_backend, resolve_device
    from daskgb.metric import auc

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    n_test = max(1000, args.rows // 10)
    X, y = make_higgs(xp, args.rows + n_test, args.seed)
    Xtr, ytr, Xte, yte = X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :]
    params = {
        "objective": "binary:logistic",
        "max_depth": args.depth,
        "eta": args.eta,
        "max_bin": args.max_bin,
        "device": device,
    }
    res = {"rows": args.rows, "features": int(X.shape[1]), "rounds": args.rounds, "depth": args.depth,
           "device": device}

    # Untimed warm-up on a slice: compiles daskgb's CUDA kernels (NVRTC, then CuPy's disk
    # cache) and XGBoost's lazy initialisation, so that the timings below measure the work.
    warm = daskgb.QuantileMatrix(Xtr[:100_000], ytr[:100_000], max_bin=args.max_bin, device=device)
    daskgb.train(params, warm, 2, verbose_eval=False)
    if not args.skip_xgboost:
        import xgboost as xgb

        xgb.train({**params, "tree_method": "hist", "device": "cuda" if device == "cuda" else "cpu"},
                  xgb.QuantileDMatrix(Xtr[:100_000], ytr[:100_000], max_bin=args.max_bin), 2)
    sync(xp)
    t0 = time.perf_counter()
    dtrain = daskgb.QuantileMatrix(Xtr, ytr, max_bin=args.max_bin, device=device)
    sync(xp)
    t1 = time.perf_counter()
    booster = daskgb.train(params, dtrain, args.rounds, verbose_eval=False)
    sync(xp)
    t2 = time.perf_counter()
    pred = booster.predict(Xte)
    ours_auc = auc(xp, yte, xp.asarray(pred))
    res["daskgb"] = {"quantise_s": t1 - t0, "train_s": t2 - t1, "ms_per_round": 1e3 * (t2 - t1) / args.rounds,
                     "auc": ours_auc, "ellpack_mb": dtrain.ellpack.nbytes / 1e6, "bits": dtrain.ellpack.bits}
    del dtrain

    if not args.skip_xgboost:
        import xgboost as xgb

        sync(xp)
        t0 = time.perf_counter()
        dx = xgb.QuantileDMatrix(Xtr, ytr, max_bin=args.max_bin)
        sync(xp)
        t1 = time.perf_counter()
        bx = xgb.train({**params, "tree_method": "hist", "device": "cuda" if device == "cuda" else "cpu"}, dx,
                       args.rounds)
        sync(xp)
        t2 = time.perf_counter()
        px = bx.inplace_predict(Xte)
        res["xgboost"] = {"version": xgb.__version__, "quantise_s": t1 - t0, "train_s": t2 - t1,
                          "ms_per_round": 1e3 * (t2 - t1) / args.rounds, "auc": auc(xp, yte, xp.asarray(px))}
        res["train_time_ratio"] = res["daskgb"]["train_s"] / res["xgboost"]["train_s"]
        res["auc_diff"] = res["daskgb"]["auc"] - res["xgboost"]["auc"]

    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
