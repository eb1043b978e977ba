"""Round time against a setting of the CUDA histogram stage (a module variable of
daskgb.histogram.cuda) or a daskgb setting of dask.config (daskgb/config.py), for sets of
examples/benchmark.py (developer tool; daskgb only, every value in the same run).

    python benchmarks/setting_sweep.py --sets year,bosch,higgs --setting SHARED_BUDGET_BYTES --values None,115712,57344
    python benchmarks/setting_sweep.py --sets bosch,higgs --setting HIST_WINDOW --values True,False
    python benchmarks/setting_sweep.py --sets year --setting training.split-kernel --values True,False
    python benchmarks/setting_sweep.py --smoke                     # year, 2,000 rows, 2 rounds

SHARED_BUDGET_BYTES: a smaller budget makes more, smaller feature groups (each re-reads
its rows' ids and gradients) but lets more blocks share an SM. Each value trains once
untimed (compiles, warms up), then --reps times; the table shows medians, the histogram's
feature groups and the training path the booster reports. GPU only: the subject is the
CUDA backend.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="year,bosch,higgs,ranking")
    ap.add_argument("--rows", type=int, default=None, help="rows of every set (default: the set's own)")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--setting", default="SHARED_BUDGET_BYTES",
                    help="a module variable of daskgb.histogram.cuda, or a daskgb setting (daskgb/config.py)")
    ap.add_argument("--values", default="None,115712,76800,57344", help="Python literals, comma-separated")
    ap.add_argument("--smoke", action="store_true", help="year, 2,000 rows, 2 rounds, one rep: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.sets, args.rows, args.rounds, args.reps, args.values = "year", 2_000, 2, 1, "None,57344"

    import cupy
    import dask.config

    import benchmark

    import daskgb
    from daskgb import config
    from daskgb.histogram import cuda as histogram

    values = [ast.literal_eval(v) for v in args.values.split(",")]
    in_config = args.setting in config.DEFAULTS
    if not in_config and not hasattr(histogram, args.setting):
        ap.error(f"{args.setting!r} is neither a variable of daskgb.histogram.cuda nor a daskgb setting "
                 f"({', '.join(sorted(config.DEFAULTS))})")

    def setting(v):
        """The value in force while it trains."""
        if in_config:
            return dask.config.set({f"daskgb.{args.setting}": v})
        original = getattr(histogram, args.setting)
        setattr(histogram, args.setting, v)
        return _restoring(histogram, args.setting, original)

    print("| set | " + " | ".join(f"{args.setting}={v!r}: ms/round (groups) path" for v in values) + " |")
    print("| --- |" + " --- |" * len(values))
    for name in args.sets.split(","):
        n_rows, X, y, qid, params = benchmark.make_set(name, cupy, args.rows)
        m = benchmark.quantile_matrix(X, y, qid)
        del X
        cells = []
        for v in values:
            with setting(v):
                daskgb.train(params, m, 3, verbose_eval=False)
                times = []
                for _ in range(args.reps):
                    cupy.cuda.runtime.deviceSynchronize()
                    t = time.perf_counter()
                    b = daskgb.train(params, m, args.rounds, verbose_eval=False)
                    cupy.cuda.runtime.deviceSynchronize()
                    times.append((time.perf_counter() - t) / args.rounds)
                groups = histogram.histogram_setup(m.ellpack).n_groups
            cells.append(f"{1e3 * statistics.median(times):.2f} ({groups}) {b.attr('training_path')}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        del m


@contextlib.contextmanager
def _restoring(module, name, original):
    try:
        yield
    finally:
        setattr(module, name, original)


if __name__ == "__main__":
    main()
