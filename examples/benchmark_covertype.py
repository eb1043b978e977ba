"""Covertype-shaped multiclass benchmark: daskgb against XGBoost `hist` on the same rows, parameters and device.

    python examples/benchmark_covertype.py                        # 523K x 54, 7 classes, depth 8, 500 rounds
    python examples/benchmark_covertype.py --rows 50000 --rounds 20 --device cpu

The data imitate the UCI Covertype set's shape, made on the device from a seed:
10 continuous terrain features (elevation, aspect, slope, distances, hillshades)
and 44 binary ones (a one-hot wilderness area of 4 and a one-hot soil type of
40), with 7 imbalanced classes driven mostly by elevation, as in the real set
(two classes hold ~85% of the rows). A held-out set of 10% more rows gives the
test accuracy. Prints each library's quantisation and training time, test
accuracy and mlogloss, and the ratio of training times; --json writes them.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def make_covertype(xp, n_rows: int, seed: int):
    """(X float32 (n, 54), y float32 (n,) in 0..6) on xp's device, deterministic for a seed."""
    rs = xp.random.RandomState(seed)
    elevation = rs.normal(2960, 280, n_rows)
    aspect = rs.uniform(0, 360, n_rows)
    slope = xp.abs(rs.normal(14, 7.5, n_rows))
    h_hydro = xp.abs(rs.normal(270, 210, n_rows))
    v_hydro = rs.normal(46, 58, n_rows)
    h_road = xp.abs(rs.normal(2350, 1560, n_rows))
    shade9 = xp.clip(rs.normal(212, 27, n_rows) - 0.3 * (aspect - 180) / 6, 0, 254)
    shade12 = xp.clip(rs.normal(223, 20, n_rows) - slope, 0, 254)
    shade3 = xp.clip(rs.normal(142, 38, n_rows) + 0.3 * (aspect - 180) / 6, 0, 254)
    h_fire = xp.abs(rs.normal(1980, 1320, n_rows))
    wild = xp.clip(((elevation - 2400) / 350 + rs.normal(0, 0.8, n_rows)).astype(xp.int64), 0, 3)
    soil = xp.clip(((elevation - 1900) / 55 + rs.normal(0, 4, n_rows)).astype(xp.int64), 0, 39)
    cont = xp.stack([elevation, aspect, slope, h_hydro, v_hydro, h_road, shade9, shade12, shade3, h_fire], axis=1)
    onehot = xp.zeros((n_rows, 44), dtype=xp.float32)
    rows = xp.arange(n_rows)
    onehot[rows, wild] = 1.0
    onehot[rows, 4 + soil] = 1.0
    X = xp.concatenate([xp.round(cont).astype(xp.float32), onehot], axis=1)
    # Class scores: elevation bands dominate, the rest shift the boundaries.
    z = (elevation - 2960) / 280
    road = h_road / 1560
    fire = h_fire / 1320
    hydro = h_hydro / 210
    score = xp.stack([
        1.6 - 1.0 * (z - 0.6) ** 2 + 0.3 * road,                  # spruce/fir: high
        2.0 - 1.1 * z ** 2 + 0.2 * fire,                           # lodgepole pine: middle, the largest
        0.3 - 1.5 * (z + 1.6) ** 2 + 0.4 * (wild == 3),            # ponderosa pine: low
        -0.9 - 2.0 * (z + 2.2) ** 2 + 0.8 * (wild == 3) - 0.3 * hydro,  # cottonwood/willow: lowest, rare
        0.4 - 2.0 * (z + 0.4) ** 2 - 0.4 * road + 0.1 * slope / 7.5,  # aspen
        -0.2 - 1.6 * (z + 1.3) ** 2 + 0.3 * (soil < 8),            # douglas-fir
        0.2 - 1.2 * (z - 1.5) ** 2 + 0.2 * (wild == 2),           # krummholz: highest
    ], axis=1)
    g = -xp.log(-xp.log(rs.uniform(1e-12, 1.0, (n_rows, 7))))  # Gumbel noise: a softmax draw
    y = xp.argmax(score * 2.0 + g, axis=1).astype(xp.float32)
    return xp.ascontiguousarray(X), y


def sync(xp):
    if xp is not np:
        xp.cuda.runtime.deviceSynchronize()


def accuracy(xp, y, proba) -> float:
    return float((xp.argmax(xp.asarray(proba), axis=1) == y).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=523_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=1998)
    ap.add_argument("--skip-xgboost", action="store_true")
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args()

    import daskgb
    from daskgb.backend import get_backend, resolve_device
    from daskgb.metric import evaluate

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    n_test = max(1000, args.rows // 10)
    X, y = make_covertype(xp, args.rows + n_test, args.seed)
    Xtr, ytr, Xte, yte = X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :]
    params = {"objective": "multi:softprob", "num_class": 7, "max_depth": args.depth, "eta": args.eta,
              "max_bin": args.max_bin, "device": device}
    counts = np.bincount(np.asarray(y.get() if xp is not np else y, dtype=np.int64), minlength=7)
    res = {"rows": args.rows, "features": int(X.shape[1]), "classes": 7, "rounds": args.rounds,
           "depth": args.depth, "device": device, "class_share": [round(c / counts.sum(), 4) for c in counts]}

    # Untimed warm-up: compiles daskgb's kernels and runs XGBoost's lazy initialisation.
    warm = daskgb.QuantileMatrix(Xtr[:20_000], ytr[:20_000], max_bin=args.max_bin, device=device)
    daskgb.train(params, warm, 2, verbose_eval=False)
    if not args.skip_xgboost:
        import xgboost as xgb

        xgb.train({**params, "tree_method": "hist", "device": "cuda" if device == "cuda" else "cpu"},
                  xgb.QuantileDMatrix(Xtr[:20_000], ytr[:20_000], max_bin=args.max_bin), 2)
    sync(xp)
    t0 = time.perf_counter()
    dtrain = daskgb.QuantileMatrix(Xtr, ytr, max_bin=args.max_bin, device=device)
    sync(xp)
    t1 = time.perf_counter()
    booster = daskgb.train(params, dtrain, args.rounds, verbose_eval=False)
    sync(xp)
    t2 = time.perf_counter()
    proba = xp.asarray(booster.predict(Xte))
    res["daskgb"] = {"quantise_s": t1 - t0, "train_s": t2 - t1, "ms_per_round": 1e3 * (t2 - t1) / args.rounds,
                     "accuracy": accuracy(xp, yte, proba), "mlogloss": evaluate("mlogloss", xp, yte, proba)}
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
        px = xp.asarray(bx.inplace_predict(Xte))
        res["xgboost"] = {"version": xgb.__version__, "quantise_s": t1 - t0, "train_s": t2 - t1,
                          "ms_per_round": 1e3 * (t2 - t1) / args.rounds, "accuracy": accuracy(xp, yte, px),
                          "mlogloss": evaluate("mlogloss", xp, yte, px)}
        res["train_time_ratio"] = res["daskgb"]["train_s"] / res["xgboost"]["train_s"]
        res["accuracy_diff"] = res["daskgb"]["accuracy"] - res["xgboost"]["accuracy"]

    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
