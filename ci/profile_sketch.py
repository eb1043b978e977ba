"""Where the dense sketch's time goes on the GPU (developer tool).

    python ci/profile_sketch.py --rows 10000000            # Higgs-shaped, 28 features

Times sketch.summarize (repeated; medians) and profiles one call's host side with
cProfile: the sketch is a sequence of small CuPy steps, so its host time is its time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

    import cupy
    import numpy as np
    from synthetic import make_higgs

    from daskgb import sketch

    X, _ = make_higgs(cupy, args.rows, 1)
    budget = sketch.sketch_budget(args.rows, args.max_bin)
    sketch.summarize(X[:100_000], None, float("nan"), budget)  # compile

    def once():
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        sketch.make_cuts(sketch.summarize(X, None, float("nan"), budget), args.max_bin).to(np)
        return time.perf_counter() - t

    times = [once() for _ in range(args.repeats)]
    print(f"summarize + cuts, {args.rows} x {X.shape[1]}, budget {budget}: median {statistics.median(times):.3f} s "
          f"runs {[round(t, 3) for t in times]}")
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
