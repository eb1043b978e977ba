"""Where building a QuantileMatrix takes its time (on the GPU, or the numpy path on the CPU), against
XGBoost's QuantileDMatrix on the same data in the same run (developer tool).

    python benchmarks/profile_quantise.py --sets higgs,bosch,ranking --repeats 3
    python benchmarks/profile_quantise.py --device cpu --smoke      # Higgs-shaped, 2,000 rows, one build

For each set (examples/benchmark.py's data): the median wall time of daskgb.QuantileMatrix
and of xgboost.QuantileDMatrix (when xgboost is installed) over --repeats builds, after an
untimed warm-up of each, then one build's host side under cProfile (top --top functions by
cumulative time). The sketch is a sequence of small CuPy steps, so its host time is its time;
a device wait shows up in whatever call synchronised.
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="higgs,bosch,ranking")
    ap.add_argument("--rows", type=int, default=None, help="rows of every set (default: the set's own)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="auto", help="cuda or cpu (auto: cuda where CuPy sees a GPU)")
    ap.add_argument("--smoke", action="store_true",
                    help="Higgs-shaped, 2,000 rows, one timed build: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.sets, args.rows, args.repeats, args.top = "higgs", 2_000, 1, 5

    from benchmark import make_set, release, sync

    import daskgb
    from daskgb.backend import get_backend, resolve_device

    device = resolve_device(args.device)
    xp = get_backend(device).xp

    try:
        import xgboost as xgb
    except ImportError:
        xgb = None

    def timed(build):
        sync(xp)
        t = time.perf_counter()
        m = build()
        sync(xp)
        took = time.perf_counter() - t
        del m
        release(xp)
        return took

    rows = []
    for name in args.sets.split(","):
        n, X, y, qid, _ = make_set(name, xp, args.rows, device=device)
        kw = {} if qid is None else {"qid": qid}
        ours = lambda: daskgb.QuantileMatrix(X, y, max_bin=args.max_bin, device=device, **kw)  # noqa: E731
        timed(ours)  # compile
        t_ours = statistics.median(timed(ours) for _ in range(args.repeats))
        t_xgb = theirs = None
        if xgb is not None:
            theirs = lambda: xgb.QuantileDMatrix(X, y, max_bin=args.max_bin, **kw)  # noqa: E731
            timed(theirs)
            t_xgb = statistics.median(timed(theirs) for _ in range(args.repeats))
        line = f"{name} {n} x {X.shape[1]}: daskgb {t_ours:.3f} s"
        if t_xgb is not None:
            line += f", xgboost {t_xgb:.3f} s, ratio {t_ours / t_xgb:.1f}"
        print(line, flush=True)
        rows.append((name, n, X.shape[1], t_ours, t_xgb))
        prof = cProfile.Profile()
        prof.enable()
        timed(ours)
        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
        X = y = qid = ours = theirs = None  # free the set before the next
        release(xp)

    print("| set | rows x features | daskgb QuantileMatrix | XGBoost QuantileDMatrix | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for name, n, f, a, b in rows:
        print(f"| {name} | {n:,} x {f} | {a:.3f} s | " + ("- | - |" if b is None else f"{b:.3f} s | {a / b:.1f} |"))


if __name__ == "__main__":
    main()
