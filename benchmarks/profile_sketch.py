"""Where the dense sketch's time goes on the GPU (developer tool).

    python ci/profile_sketch.py --rows 10000000            # Higgs-shaped, 28 features

Times sketch.summarize (repeated; medians), with the segmented search as one kernel and
as the array-step reference in the same run (the cuts must be equal), and profiles one
call's host side with cProfile: the sketch is a sequence of small CuPy steps, so its host
time is its time.
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

    kernel_search = sketch._segmented_searchsorted
    cuts = {}

    def once(how="kernel"):
        sketch._segmented_searchsorted = (kernel_search if how == "kernel" else
                                          sketch._segmented_searchsorted_steps)
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        cuts[how] = sketch.make_cuts(sketch.summarize(X, None, float("nan"), budget), args.max_bin).to(np)
        took = time.perf_counter() - t
        sketch._segmented_searchsorted = kernel_search
        return took

    medians = {}
    for how in ("kernel", "steps"):
        once(how)
        times = [once(how) for _ in range(args.repeats)]
        medians[how] = statistics.median(times)
        print(f"summarize + cuts ({how} search), {args.rows} x {X.shape[1]}, budget {budget}: "
              f"median {medians[how]:.3f} s runs {[round(t, 3) for t in times]}")
    same = all(np.array_equal(getattr(cuts["kernel"], f), getattr(cuts["steps"], f))
               for f in ("ptrs", "values", "min_values"))
    print(f"kernel / steps: {medians['kernel'] / medians['steps']:.2f}; cuts equal: {same}")
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
