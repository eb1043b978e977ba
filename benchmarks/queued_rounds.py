"""Training time with rounds queued ahead of the host, as CUDA graphs or launch by launch,
and with every round read before the next is queued (developer tool, GPU).

    python ci/queued_rounds.py --rounds 500 --repeats 3             # Higgs-shaped, 10.5M rows
    python ci/queued_rounds.py --data covertype --rounds 200

booster.train queues round r+1 on the device before the host reads round r's trees when
nothing looks at the rounds in between (no eval sets, callbacks or custom objective), and
replays each round as a CUDA graph (backend/cuda_growth.ForestGraphs). The modes:
  graphs      both (the default)
  queued      queued, launch by launch (DASKGB_CUDA_GRAPHS=0)
  one-by-one  neither (DASKGB_QUEUE_ROUNDS=0)
They alternate, each repeated, on one QuantileMatrix; medians and ratios to one-by-one are
printed, and the models must be equal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

MODES = {"graphs": (True, True), "queued": (True, False), "one-by-one": (False, False)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="higgs", help="a set of examples/benchmark.py")
    ap.add_argument("--rows", type=int, default=None, help="the set's rows by default")
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import benchmark
    import cupy

    import daskgb
    from daskgb import booster as booster_module
    from daskgb.backend import cuda_growth

    n_rows, X, y, qid, params = benchmark.make_set(args.data, cupy, args.rows)
    m = benchmark.quantile_matrix(X, y, qid)
    del X
    daskgb.train(params, m, 3, verbose_eval=False)  # compile and warm up
    times = {mode: [] for mode in MODES}
    models = {}
    for _ in range(args.repeats):
        for mode, (queue, graphs) in MODES.items():
            booster_module._QUEUE_ROUNDS, cuda_growth.GRAPHS = queue, graphs
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            b = daskgb.train(params, m, args.rounds, verbose_eval=False)
            cupy.cuda.runtime.deviceSynchronize()
            times[mode].append(time.perf_counter() - t)
            models[mode] = json.dumps(b.to_dict())
    booster_module._QUEUE_ROUNDS, cuda_growth.GRAPHS = True, True
    base = statistics.median(times["one-by-one"])
    print(f"{args.data} {n_rows} rows, {args.rounds} rounds, {args.repeats} repeats (medians)")
    for mode, ts in times.items():
        t = statistics.median(ts)
        print(f"{mode:11s} {t:.3f} s  ({1e3 * t / args.rounds:.2f} ms a round)  / one-by-one {t / base:.3f}  "
              f"runs {[round(x, 3) for x in ts]}")
    print("models equal" if len(set(models.values())) == 1 else "MODELS DIFFER")


if __name__ == "__main__":
    main()
