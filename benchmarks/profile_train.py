"""Where a training round's time goes: wall time per backend call, summed over rounds (developer tool).

    python ci/profile_train.py --rounds 50                 # Higgs-shaped, 10.5M rows
    python ci/profile_train.py --data covertype --rounds 20 --cprofile

Each backend function is wrapped with a device synchronisation before and after,
so the numbers add up to the round time (the syncs themselves cost a little). The
breakdowns grow trees with the host grower (grower.grow_forest), whose backend calls
can be wrapped; "as trained" is the default, the device grower where it applies
(backend/cuda_growth.py), and "host grower" the same rounds with it switched off.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="higgs", help="a set of examples/benchmark.py")
    ap.add_argument("--rows", type=int, default=None, help="the set's rows by default")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--cprofile", action="store_true", help="also profile the host side (no syncs added)")
    ap.add_argument("--top", type=int, default=40, help="functions the host profile lists")
    ap.add_argument("--host", action="store_true",
                    help="also the host's time in each backend call and grower step, with no syncs added")
    args = ap.parse_args()

    import benchmark
    import cupy

    import daskgb
    from daskgb.backend import cupy_backend as cb

    n_rows, X, y, qid, params = benchmark.make_set(args.data, cupy, args.rows)
    m = benchmark.quantile_matrix(X, y, qid)
    del X
    daskgb.train(params, m, 3, verbose_eval=False)  # compile and warm up
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    daskgb.train(params, m, args.rounds, verbose_eval=False)
    cupy.cuda.runtime.deviceSynchronize()
    print(f"as trained (no added syncs): {1e3 * (time.perf_counter() - t) / args.rounds:.2f} ms per round")
    from daskgb.backend import cuda_growth

    cuda_growth.ENABLED = False  # from here on: the host grower, whose calls the breakdowns wrap
    t = time.perf_counter()
    daskgb.train(params, m, args.rounds, verbose_eval=False)
    cupy.cuda.runtime.deviceSynchronize()
    print(f"host grower (no added syncs): {1e3 * (time.perf_counter() - t) / args.rounds:.2f} ms per round")
    if args.cprofile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        prof.enable()
        daskgb.train(params, m, args.rounds, verbose_eval=False)
        cupy.cuda.runtime.deviceSynchronize()
        prof.disable()
        print(f"unsynchronised: {1e3 * (time.perf_counter() - t) / args.rounds:.2f} ms per round")
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)

    if args.host:
        host_times(daskgb, cupy, cb, params, m, args.rounds)

    spent = collections.Counter()
    calls = collections.Counter()
    for name in ("build_histograms", "evaluate_splits", "apply_splits", "children_histograms", "prepare_gradients",
                 "new_partition", "sum_gradients"):
        fn = getattr(cb, name)

        def timed(*a, _fn=fn, _name=name, **k):
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            out = _fn(*a, **k)
            cupy.cuda.runtime.deviceSynchronize()
            spent[_name] += time.perf_counter() - t
            calls[_name] += 1
            return out

        setattr(cb, name, timed)
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    daskgb.train(params, m, args.rounds, verbose_eval=False)
    cupy.cuda.runtime.deviceSynchronize()
    total = time.perf_counter() - t
    print(f"{args.data} {n_rows} rows, depth {params['max_depth']}: {1e3 * total / args.rounds:.2f} ms per round "
          "(a device sync around every backend call)")
    for name, s in spent.most_common():
        print(f"  {name:20s} {1e3 * s / args.rounds:8.2f} ms/round  {calls[name] / args.rounds:6.1f} calls/round")
    print(f"  {'(rest: python, objective, xp ops)':20s} {1e3 * (total - sum(spent.values())) / args.rounds:8.2f} ms/round")


def host_times(daskgb, cupy, cb, params, m, rounds):
    """Wall time spent in each backend call and grower step with no syncs added: where the host
    goes when the device waits for it (a call that ends in a device-to-host copy also holds
    the wait for the work queued before it)."""
    from daskgb import grower

    spent = collections.Counter()
    calls = collections.Counter()
    undo = []

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        def timed(*a, **k):
            t = time.perf_counter()
            out = fn(*a, **k)
            spent[label] += time.perf_counter() - t
            calls[label] += 1
            return out

        setattr(owner, name, timed)
        undo.append((owner, name, fn))

    for name in ("build_histograms", "evaluate_splits", "apply_splits", "children_histograms", "prepare_gradients",
                 "new_partition"):
        wrap(cb, name, f"cupy_backend.{name}")
    for name in ("root", "expand", "children", "evaluate"):
        wrap(grower._Growth, name, f"growth.{name}")
    try:
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        daskgb.train(params, m, rounds, verbose_eval=False)
        cupy.cuda.runtime.deviceSynchronize()
        total = time.perf_counter() - t
    finally:
        for owner, name, fn in reversed(undo):
            setattr(owner, name, fn)
    print(f"host time per call, no syncs added ({1e3 * total / rounds:.2f} ms per round):")
    for label, s in spent.most_common():
        print(f"  {label:34s} {1e3 * s / rounds:7.2f} ms/round {1e6 * s / calls[label]:8.1f} us/call "
              f"{calls[label] / rounds:5.1f}/round")


if __name__ == "__main__":
    main()
