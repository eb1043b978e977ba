"""Round time against a setting of the CUDA backend (a module variable of cupy_backend), for
sets of examples/benchmark.py (developer tool; daskgb only, every value in the same run).

    python ci/setting_sweep.py --sets year,bosch,higgs --setting SHARED_BUDGET_BYTES --values None,115712,57344
    python ci/setting_sweep.py --sets bosch,higgs --setting HIST_WINDOW --values True,False

SHARED_BUDGET_BYTES: a smaller budget makes more, smaller feature groups (each re-reads
its rows' ids and gradients) but lets more blocks share an SM. Each value trains once
untimed (compiles, warms up), then --reps times; the table shows medians and the
histogram's feature groups.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="year,bosch,higgs,ranking")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--setting", default="SHARED_BUDGET_BYTES", help="a module variable of cupy_backend")
    ap.add_argument("--values", default="None,115712,76800,57344", help="Python literals, comma-separated")
    args = ap.parse_args()

    import cupy

    import benchmark

    import daskgb
    from daskgb.backend import cupy_backend as cb

    values = [ast.literal_eval(v) for v in args.values.split(",")]
    original = getattr(cb, args.setting)
    print("| set | " + " | ".join(f"{args.setting}={v!r}: ms/round (groups)" for v in values) + " |")
    print("| --- |" + " --- |" * len(values))
    for name in args.sets.split(","):
        n_rows, X, y, qid, params = benchmark.make_set(name, cupy, None)
        m = benchmark.quantile_matrix(X, y, qid)
        del X
        cells = []
        for v in values:
            setattr(cb, args.setting, v)
            daskgb.train(params, m, 3, verbose_eval=False)
            times = []
            for _ in range(args.reps):
                cupy.cuda.runtime.deviceSynchronize()
                t = time.perf_counter()
                daskgb.train(params, m, args.rounds, verbose_eval=False)
                cupy.cuda.runtime.deviceSynchronize()
                times.append((time.perf_counter() - t) / args.rounds)
            groups = cb.histogram_setup(m.ellpack).n_groups
            cells.append(f"{1e3 * statistics.median(times):.2f} ({groups})")
        setattr(cb, args.setting, original)
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        del m


if __name__ == "__main__":
    main()
