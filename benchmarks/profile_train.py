"""Where a training round's time goes: wall time per backend call, summed over rounds (developer tool).

    python benchmarks/profile_train.py --rounds 50                 # Higgs-shaped, 10.5M rows
    python benchmarks/profile_train.py --data covertype --rounds 20 --cprofile
    python benchmarks/profile_train.py --device cpu --smoke --host  # 2,000 rows, 2 rounds, on the numpy backend

Each backend function is wrapped with a device synchronisation before and after (on the
CPU, none is needed), so the numbers add up to the round time (the syncs themselves cost a
little). The breakdowns grow trees with the host grower (growth/host.py), whose backend
calls can be wrapped; "as trained" is the default path (training/plan.py; on a GPU the
device grower where it applies, growth/device.py), and "host grower" the same rounds with
the setting daskgb.training.device-growth off. Each line names the path the booster
reports (its attribute "training_path").
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
    ap.add_argument("--device", default="auto", help="cuda or cpu (auto: cuda where CuPy sees a GPU)")
    ap.add_argument("--cprofile", action="store_true", help="also profile the host side (no syncs added)")
    ap.add_argument("--top", type=int, default=40, help="functions the host profile lists")
    ap.add_argument("--host", action="store_true",
                    help="also the host's time in each backend call and grower step, with no syncs added")
    ap.add_argument("--smoke", action="store_true", help="2,000 rows and 2 rounds: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.rounds, args.top = 2_000, 2, 5

    import benchmark
    import dask.config

    import daskgb
    from daskgb.backend import get_backend, resolve_device

    device = resolve_device(args.device)
    backend = get_backend(device)
    sync = _sync_of(backend.xp)

    n_rows, X, y, qid, params = benchmark.make_set(args.data, backend.xp, args.rows, device=device)
    m = benchmark.quantile_matrix(X, y, qid, device=device)
    del X
    daskgb.train(params, m, 3, verbose_eval=False)  # compile and warm up
    sync()
    t = time.perf_counter()
    b = daskgb.train(params, m, args.rounds, verbose_eval=False)
    sync()
    print(f"as trained (no added syncs): {1e3 * (time.perf_counter() - t) / args.rounds:.2f} ms per round "
          f"({b.attr('training_path')})")

    # From here on: the host grower, whose calls the breakdowns wrap.
    dask.config.set({"daskgb.training.device-growth": False})
    t = time.perf_counter()
    b = daskgb.train(params, m, args.rounds, verbose_eval=False)
    sync()
    print(f"host grower (no added syncs): {1e3 * (time.perf_counter() - t) / args.rounds:.2f} ms per round "
          f"({b.attr('training_path')})")
    if args.cprofile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        sync()
        t = time.perf_counter()
        prof.enable()
        daskgb.train(params, m, args.rounds, verbose_eval=False)
        sync()
        prof.disable()
        print(f"unsynchronised: {1e3 * (time.perf_counter() - t) / args.rounds:.2f} ms per round")
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)

    if args.host:
        host_times(daskgb, sync, backend, params, m, args.rounds)

    spent = collections.Counter()
    calls = collections.Counter()
    for name in ("build_histograms", "evaluate_splits", "apply_splits", "children_histograms", "prepare_gradients",
                 "new_partition", "sum_gradients"):
        fn = getattr(backend, name)

        def timed(*a, _fn=fn, _name=name, **k):
            sync()
            t = time.perf_counter()
            out = _fn(*a, **k)
            sync()
            spent[_name] += time.perf_counter() - t
            calls[_name] += 1
            return out

        setattr(backend, name, timed)
    sync()
    t = time.perf_counter()
    daskgb.train(params, m, args.rounds, verbose_eval=False)
    sync()
    total = time.perf_counter() - t
    how = "a device sync around every backend call" if device == "cuda" else "every backend call timed"
    print(f"{args.data} {n_rows} rows, depth {params['max_depth']}: {1e3 * total / args.rounds:.2f} ms per round "
          f"({how})")
    for name, s in spent.most_common():
        print(f"  {name:20s} {1e3 * s / args.rounds:8.2f} ms/round  {calls[name] / args.rounds:6.1f} calls/round")
    print(f"  {'(rest: python, objective, xp ops)':20s} {1e3 * (total - sum(spent.values())) / args.rounds:8.2f} ms/round")


def _sync_of(xp):
    """A function that waits for the device (nothing to wait for on the CPU)."""
    if xp.__name__ == "numpy":
        return lambda: None
    return xp.cuda.runtime.deviceSynchronize


def host_times(daskgb, sync, backend, params, m, rounds):
    """Wall time spent in each backend call and grower step with no syncs added: where the host
    goes when the device waits for it (a call that ends in a device-to-host copy also holds
    the wait for the work queued before it)."""
    from daskgb.growth import host as grower

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

    prefix = backend.__name__.rsplit(".", 1)[-1]
    for name in ("build_histograms", "evaluate_splits", "apply_splits", "children_histograms", "prepare_gradients",
                 "new_partition"):
        wrap(backend, name, f"{prefix}.{name}")
    for name in ("root", "expand", "children", "evaluate"):
        wrap(grower._Growth, name, f"growth.{name}")
    try:
        sync()
        t = time.perf_counter()
        daskgb.train(params, m, rounds, verbose_eval=False)
        sync()
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
