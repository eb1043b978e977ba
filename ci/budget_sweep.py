"""Round time against the histogram kernel's shared-memory budget per block, for sets of
examples/benchmark.py (developer tool; daskgb only, the same run for every budget).

    python ci/budget_sweep.py --sets year,bosch,higgs --rounds 100 --budgets 0,115712,76800,57344

Budget 0 is the default (cupy_backend._shared_budget()). A smaller budget makes more,
smaller feature groups (each re-reads its rows' ids and gradients) but lets more blocks
share an SM. Each setting trains once untimed (compiles, warms up), then --reps times;
the table shows medians.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--budgets", default="0,115712,76800,57344", help="bytes; 0: the default")
    args = ap.parse_args()

    import cupy

    import benchmark

    import daskgb
    from daskgb.backend import cupy_backend as cb

    budgets = [int(b) for b in args.budgets.split(",")]
    print("| set | " + " | ".join(f"budget {b or 'default'}: ms/round (groups)" for b in budgets) + " |")
    print("| --- |" + " --- |" * len(budgets))
    for name in args.sets.split(","):
        n_rows, X, y, qid, params = benchmark.make_set(name, cupy, None)
        m = benchmark.quantile_matrix(X, y, qid)
        del X
        cells = []
        for b in budgets:
            cb.SHARED_BUDGET_BYTES = b or None
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
        cb.SHARED_BUDGET_BYTES = None
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        del m


if __name__ == "__main__":
    main()
