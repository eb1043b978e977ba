"""Where an out-of-core training round's time goes (developer tool): wall time of each
step of booster._grow_compacted and of the streamed grower, summed over rounds, with a
device sync around each, and the host-to-device copy bandwidth of a page from pinned and
from pageable memory.

    python ci/profile_external.py --rows 10500000 --rounds 50 --rate 0.3
    python ci/profile_external.py --rate 1.0 --rounds 5           # streaming every page at every step
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--times", type=float, default=3.0)
    ap.add_argument("--path", default="compact")
    args = ap.parse_args()

    import cupy
    import numpy as np

    import daskgb
    from daskgb import booster, external, grower, sampling
    from daskgb.backend import cupy_backend as cb
    from synthetic import make_higgs

    X, y = make_higgs(cupy, args.rows, 2020)
    X, y = X.get(), y.get()
    ell_bytes = daskgb.QuantileMatrix(X[:1_000_000], y[:1_000_000], device="cuda").ellpack.nbytes * args.rows / 1e6
    budget = int(ell_bytes / args.times)
    t = time.perf_counter()
    m = daskgb.QuantileMatrix(X, y, device="cuda", device_memory_budget=budget)
    cupy.cuda.runtime.deviceSynchronize()
    print(f"{args.rows:,} rows: {m.ellpack.n_pages} pages, budget {budget / 2**20:.1f} MiB, "
          f"quantised in {time.perf_counter() - t:.2f} s", flush=True)

    # Copy bandwidth of one page, from its (pinned) host memory and from a pageable copy.
    words = m.ellpack._pages[0].words
    pageable = np.array(words)
    for name, host in (("page memory", words), ("pageable", pageable)):
        d = cupy.asarray(host)
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        for _ in range(10):
            d.set(host)
        cupy.cuda.runtime.deviceSynchronize()
        print(f"host to device from {name}: {10 * host.nbytes / (time.perf_counter() - t) / 1e9:.1f} GB/s "
              f"({host.nbytes / 2**20:.1f} MiB a copy)", flush=True)

    totals, calls = collections.Counter(), collections.Counter()

    def timed(owner, name, label=None):
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def wrapper(*a, **k):
            cupy.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            out = fn(*a, **k)
            cupy.cuda.runtime.deviceSynchronize()
            totals[label or name] += time.perf_counter() - t0
            calls[label or name] += 1
            return out
        setattr(owner, name, wrapper)

    timed(external, "compact_rows")
    timed(booster, "add_tree_binned")
    timed(booster, "grow_forest")
    timed(booster, "mvs_sample")
    timed(sampling, "mvs_threshold")
    timed(cb, "prepare_gradients")
    timed(grower._Growth, "_histograms", "streamed histograms")
    timed(grower._Growth, "_apply_pending", "streamed partitions")
    timed(external.PagedEllpack, "page", "page copies (overlapped)")
    external.COMPACT_SAMPLED = args.path == "compact"
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "device": "cuda"}
    if args.rate < 1:
        params.update(subsample=args.rate, sampling_method="gradient_based")
    daskgb.train(params, m, 2, verbose_eval=False)
    totals.clear()
    calls.clear()
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    daskgb.train(params, m, args.rounds, verbose_eval=False)
    cupy.cuda.runtime.deviceSynchronize()
    wall = time.perf_counter() - t
    print(f"\nrate {args.rate}, path {args.path}: {wall / args.rounds * 1e3:.2f} ms a round ({args.rounds} rounds)")
    for name, total in totals.most_common():
        print(f"  {name:24s} {total / args.rounds * 1e3:8.2f} ms a round  ({calls[name] / args.rounds:.1f} calls)")


if __name__ == "__main__":
    main()
