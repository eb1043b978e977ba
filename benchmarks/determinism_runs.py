"""Determinism across processes (issue 8): the same training run in N fresh processes saves
byte-identical model files.

    python benchmarks/determinism_runs.py --device cuda --runs 3
    python benchmarks/determinism_runs.py --device cpu --smoke     # 2 runs of 2,000 rows, 3 rounds

Each run is its own Python process (fresh CUDA context, fresh kernel cache load, fresh
memory pool): Higgs-shaped rows made from a fixed seed, gradient-based row sampling and
column sampling on, --rounds rounds (100); the model is saved and its SHA-256 printed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path


def one_run(device: str, rows: int, rounds: int, path: str) -> None:
    import numpy as np

    import daskgb

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from synthetic import make_higgs

    xp = np
    if device == "cuda":
        import cupy as xp
    X, y = make_higgs(xp, rows, 7)
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "subsample": 0.5,
              "sampling_method": "gradient_based", "colsample_bynode": 0.8, "seed": 3, "device": device}
    dtrain = daskgb.QuantileMatrix(X, y, device=device)
    daskgb.train(params, dtrain, rounds, verbose_eval=False).save_model(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--smoke", action="store_true", help="2 runs of 2,000 rows and 3 rounds: that the script runs")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.rows, args.rounds = 2, 2_000, 3
    if args.one:
        one_run(args.device, args.rows, args.rounds, args.one)
        return
    digests = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.runs):
            path = str(Path(d) / f"run{i}.json")
            subprocess.run([sys.executable, __file__, "--device", args.device, "--rows", str(args.rows),
                            "--rounds", str(args.rounds), "--one", path], check=True)
            data = Path(path).read_bytes()
            digests.append(hashlib.sha256(data).hexdigest())
            print(f"run {i + 1}: {len(data):,} bytes, sha256 {digests[-1]}", flush=True)
    print("byte-identical" if len(set(digests)) == 1 else "DIFFERENT")
    sys.exit(0 if len(set(digests)) == 1 else 1)


if __name__ == "__main__":
    main()
