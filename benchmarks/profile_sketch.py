"""Where the dense sketch's time goes on the GPU (developer tool).

    python benchmarks/profile_sketch.py --rows 10000000            # Higgs-shaped, 28 features
    python benchmarks/profile_sketch.py --smoke                    # 20,000 rows, one timed call

Times sketch.summarize (repeated; medians), with the segmented search as one kernel
(sketch/cuda.py, the CUDA backend's segmented_searchsorted) and as the array-step reference
(sketch/reference.py) in the same run (the cuts must be equal), and profiles one call's host
side with cProfile: the sketch is a sequence of small CuPy steps, so its host time is its time.
GPU only: the kernel is the subject.
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
    ap.add_argument("--smoke", action="store_true", help="20,000 rows, one timed call: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.repeats, args.top = 20_000, 1, 5

    import cupy
    import numpy as np
    from synthetic import make_higgs

    from daskgb import sketch
    from daskgb.backend import cupy_backend
    from daskgb.sketch import reference

    X, _ = make_higgs(cupy, args.rows, 1)
    budget = sketch.sketch_budget(args.rows, args.max_bin)
    sketch.summarize(X[:100_000], None, float("nan"), budget)  # compile

    kernel_search = cupy_backend.segmented_searchsorted

    def steps_search(a, lo, hi, v, max_width, right):
        return reference.segmented_searchsorted(cupy, a, lo, hi, v, max_width, right)

    cuts = {}

    def once(how="kernel"):
        cupy_backend.segmented_searchsorted = kernel_search if how == "kernel" else steps_search
        try:
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            cuts[how] = sketch.make_cuts(sketch.summarize(X, None, float("nan"), budget), args.max_bin).to(np)
            return time.perf_counter() - t
        finally:
            cupy_backend.segmented_searchsorted = kernel_search

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
