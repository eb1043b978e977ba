"""Training time of the paths users take, on Higgs-shaped rows: nothing watched (the fastest path), an
eval set watched every round, and lossguide.

One JSON line per timed fit: the case, the seconds, the path the booster names (its
"training_path" attribute; "n/a" for code that predates it) and a digest of the model, so
that two versions of the code run one after the other (PYTHONPATH) can be compared for
speed and for identical models. Each fit follows an untimed warm-up of the same case (the
kernels compiled, the caches filled); the matrix is built once.

    python benchmarks/training_paths.py                        # 10.5M x 28 on the GPU
    python benchmarks/training_paths.py --smoke --device cpu --cases fastest
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

CASES = {
    # name: (params beyond the common ones, rounds factor, watch an eval set)
    "fastest": ({}, 1.0, False),
    "eval-auc": ({"eval_metric": "auc"}, 0.2, True),
    "lossguide": ({"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 0}, 0.1, False),
}


def _sync(xp) -> None:
    if xp.__name__ == "cupy":
        xp.cuda.runtime.deviceSynchronize()


def _digest(booster) -> str:
    d = booster.to_dict()
    return hashlib.sha256(json.dumps({k: d[k] for k in ("trees", "base_score")}).encode()).hexdigest()[:16]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--smoke", action="store_true", help="20,000 rows and 10 rounds: the same code in seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.rounds = 20_000, 10

    import numpy as np

    import daskgb
    from synthetic import make_higgs

    xp = np
    if args.device == "cuda":
        import cupy as xp
    X, y = make_higgs(xp, args.rows, 2018)
    Xv, yv = make_higgs(xp, max(1000, args.rows // 20), 7)
    dtrain = daskgb.QuantileMatrix(X, y, max_bin=256, device=args.device)
    dvalid = daskgb.QuantileMatrix(Xv, yv, ref=dtrain, device=args.device)
    base = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "max_bin": 256, "device": args.device}
    for name in args.cases.split(","):
        extra, factor, watch = CASES[name]
        params = {**base, **extra}
        rounds = max(2, int(args.rounds * factor))
        evals = [(dvalid, "valid")] if watch else []
        daskgb.train(params, dtrain, 3, evals=evals, verbose_eval=False)  # warm-up
        for _ in range(args.repeats):
            _sync(xp)
            t0 = time.perf_counter()
            booster = daskgb.train(params, dtrain, rounds, evals=evals, verbose_eval=False)
            _sync(xp)
            seconds = time.perf_counter() - t0
            path = booster.attr("training_path") if hasattr(booster, "attr") else "n/a"
            print(json.dumps({"case": name, "rows": args.rows, "rounds": rounds, "seconds": round(seconds, 4),
                              "path": path, "model": _digest(booster)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
