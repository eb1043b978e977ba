"""Training time with rounds queued ahead of the host, as CUDA graphs or launch by launch,
and with every round read before the next is queued (developer tool, GPU).

    python benchmarks/queued_rounds.py --rounds 500 --repeats 3             # Higgs-shaped, 10.5M rows
    python benchmarks/queued_rounds.py --data covertype --rounds 200
    python benchmarks/queued_rounds.py --smoke                     # 2,000 rows, 4 rounds, once each

Training queues round r+1 on the device before the host reads round r's trees when nothing
looks at the rounds in between (no eval sets, callbacks or custom objective), and replays
each round as a CUDA graph (growth/graphs.py ForestGraphs): the paths of training/plan.py.
The modes, by the settings (daskgb/config.py):
  graphs      both (the default): path cuda-graphs
  queued      queued, launch by launch (daskgb.training.cuda-graphs off): path queued-rounds
  one-by-one  neither (daskgb.training.queue-rounds off): path device-levels
They alternate, each repeated, on one QuantileMatrix; medians and ratios to one-by-one are
printed with the path each booster reports, and the models must be equal. GPU only: the
CPU has none of these paths.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

MODES = {"graphs": {"daskgb.training.queue-rounds": True, "daskgb.training.cuda-graphs": True},
         "queued": {"daskgb.training.queue-rounds": True, "daskgb.training.cuda-graphs": False},
         "one-by-one": {"daskgb.training.queue-rounds": False, "daskgb.training.cuda-graphs": False}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="higgs", help="a set of examples/benchmark.py")
    ap.add_argument("--rows", type=int, default=None, help="the set's rows by default")
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="2,000 rows, 4 rounds, each mode once: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.rounds, args.repeats = 2_000, 4, 1

    import benchmark
    import cupy
    import dask.config

    import daskgb

    n_rows, X, y, qid, params = benchmark.make_set(args.data, cupy, args.rows)
    m = benchmark.quantile_matrix(X, y, qid)
    del X
    daskgb.train(params, m, 3, verbose_eval=False)  # compile and warm up
    times = {mode: [] for mode in MODES}
    models, paths = {}, {}
    for _ in range(args.repeats):
        for mode, settings in MODES.items():
            with dask.config.set(settings):
                cupy.cuda.runtime.deviceSynchronize()
                t = time.perf_counter()
                b = daskgb.train(params, m, args.rounds, verbose_eval=False)
                cupy.cuda.runtime.deviceSynchronize()
            times[mode].append(time.perf_counter() - t)
            models[mode] = json.dumps(_trees(b.to_dict()))
            paths[mode] = b.attr("training_path")
    base = statistics.median(times["one-by-one"])
    print(f"{args.data} {n_rows} rows, {args.rounds} rounds, {args.repeats} repeats (medians)")
    for mode, ts in times.items():
        t = statistics.median(ts)
        print(f"{mode:11s} {t:.3f} s  ({1e3 * t / args.rounds:.2f} ms a round)  / one-by-one {t / base:.3f}  "
              f"runs {[round(x, 3) for x in ts]}  path {paths[mode]}")
    print("models equal" if len(set(models.values())) == 1 else "MODELS DIFFER")


def _trees(model: dict) -> dict:
    """The model without its attributes: they name the path it was trained on."""
    return {k: v for k, v in model.items() if k != "attributes"}


if __name__ == "__main__":
    main()
