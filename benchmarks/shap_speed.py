"""SHAP contributions beside XGBoost's on the same model (developer tool).

    python benchmarks/shap_speed.py                                     # 1M rows x 500 trees of depth 8, GPU
    python benchmarks/shap_speed.py --rows 100000 --rounds 100
    python benchmarks/shap_speed.py --smoke                             # seconds

A model is trained with daskgb on Higgs-shaped rows made to look real (examples/user_paths.py's
realistic: few-valued and partly missing columns), --train-rows of them, and saved in XGBoost's
JSON format; xgboost.Booster loads it on the GPU, so both libraries explain the same trees.
Then, on --rows other rows on the device: daskgb's Booster.predict(X, pred_contribs=True)
against XGBoost's predict(DMatrix, pred_contribs=True) (its DMatrix made before the clock
starts), and the same for approx_contribs and pred_leaf; medians of --repeats after a
warm-up of each, their ratio, and the largest difference between the two outputs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def _timed(fn, repeats: int):
    import cupy

    fn()
    cupy.cuda.runtime.deviceSynchronize()
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        cupy.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--train-rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--max-depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--interaction-rows", type=int, default=20_000,
                    help="rows for pred_interactions (its output is rows x (features + 1)^2)")
    ap.add_argument("--smoke", action="store_true", help="2,000 rows, 5 rounds, 1 repeat")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.train_rows, args.rounds, args.repeats, args.interaction_rows = 2_000, 2_000, 5, 1, 500

    import cupy
    import numpy as np
    import xgboost as xgb

    import daskgb
    from synthetic import make_higgs
    from user_paths import realistic

    X, y = make_higgs(cupy, args.train_rows + args.rows, seed=11)
    X = realistic(cupy, X)
    Xt, yt, Xe = X[: args.train_rows], y[: args.train_rows], cupy.ascontiguousarray(X[args.train_rows :])
    params = {"objective": "binary:logistic", "max_depth": args.max_depth, "eta": 0.1, "device": "cuda"}
    booster = daskgb.train(params, daskgb.QuantileMatrix(Xt, yt), args.rounds, verbose_eval=False)
    saved = Path(tempfile.mkdtemp()) / "model.json"
    booster.save_model(saved, format="xgboost")
    theirs = xgb.Booster(model_file=str(saved))
    theirs.set_param({"device": "cuda"})
    dm = xgb.DMatrix(Xe, missing=np.nan)
    print(f"{args.rows:,} rows x {X.shape[1]} features, {len(booster.trees)} trees of depth {args.max_depth}, "
          f"median of {args.repeats} (xgboost {xgb.__version__})")
    print("| output | daskgb | XGBoost (GPU) | ratio | max abs difference |")
    print("|---|---|---|---|---|")
    Xi = cupy.ascontiguousarray(Xe[: args.interaction_rows])
    di = xgb.DMatrix(Xi, missing=np.nan)
    for name, kwargs, x, dx in (("pred_contribs", {"pred_contribs": True}, Xe, dm),
                                ("approx_contribs", {"pred_contribs": True, "approx_contribs": True}, Xe, dm),
                                ("pred_leaf", {"pred_leaf": True}, Xe, dm),
                                (f"pred_interactions ({Xi.shape[0]:,} rows)", {"pred_interactions": True}, Xi, di)):
        ours_s, ours_runs, ours = _timed(lambda: booster.predict(x, **kwargs), args.repeats)
        try:
            theirs_s, theirs_runs, want = _timed(lambda: theirs.predict(dx, **kwargs), args.repeats)
        except xgb.core.XGBoostError as exc:  # approx_contribs: not in XGBoost's GPU predictor
            print(f"| {name} | {ours_s:.3f} s ({', '.join(f'{t:.3f}' for t in ours_runs)}) | XGBoost on the GPU "
                  f"refuses: {str(exc).splitlines()[0].split(': ', 1)[-1][:80]} | | |")
            continue
        gap = np.abs(cupy.asnumpy(ours) - np.asarray(want))
        print(f"| {name} | {ours_s:.3f} s ({', '.join(f'{t:.3f}' for t in ours_runs)}) | {theirs_s:.3f} s "
              f"({', '.join(f'{t:.3f}' for t in theirs_runs)}) | {ours_s / theirs_s:.2f} | {float(gap.max()):.2e} "
              f"({int((gap > 1e-4).sum())} of {gap.size:,} entries beyond 1e-4) |")
    # The same outputs of XGBoost's CPU predictor on the first rows (approx_contribs is CPU-only there).
    cpu = xgb.Booster(model_file=str(saved))
    cpu.set_param({"device": "cpu"})
    head = cupy.asnumpy(Xe[:2000])
    dh = xgb.DMatrix(head, missing=np.nan)
    for name, kwargs in (("pred_contribs", {"pred_contribs": True}),
                         ("approx_contribs", {"pred_contribs": True, "approx_contribs": True}),
                         ("pred_leaf", {"pred_leaf": True}), ("pred_interactions", {"pred_interactions": True})):
        ours = booster.predict(head[:50] if name == "pred_interactions" else head, **kwargs)
        want = cpu.predict(xgb.DMatrix(head[:50], missing=np.nan) if name == "pred_interactions" else dh, **kwargs)
        rows = ours.shape[0]
        print(f"against XGBoost's CPU predictor, first {rows:,} rows, {name}: max abs difference "
              f"{float(np.abs(ours - want).max()):.2e}, entries differing by > 1e-4: "
              f"{int((np.abs(ours - want) > 1e-4).sum())} of {ours.size:,}")


if __name__ == "__main__":
    main()
