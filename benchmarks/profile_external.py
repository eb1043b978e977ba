"""Where an out-of-core training round's time goes (developer tool): wall time of each
step of the compacted-pages path (training/rounds.py CompactedRounds) and of the streamed
host grower, summed over rounds, with a device sync around each, and on a GPU the
host-to-device copy bandwidth of a page from page-locked and from pageable memory.

    python benchmarks/profile_external.py --rows 10500000 --rounds 50 --rate 0.3
    python benchmarks/profile_external.py --rate 1.0 --rounds 5           # streaming every page at every step
    python benchmarks/profile_external.py --device cpu --smoke            # 20,000 rows, 2 rounds, numpy backend

--path compact or stream picks the path of a sampled fit (the setting
daskgb.training.compact-sampled-pages); the path the booster reports is printed. On the
CPU the pages stay in host memory, so there are no copies to time and no syncs to add.
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
    ap.add_argument("--path", default="compact", choices=("compact", "stream"))
    ap.add_argument("--device", default="auto", help="cuda or cpu (auto: cuda where CuPy sees a GPU)")
    ap.add_argument("--smoke", action="store_true", help="20,000 rows and 2 rounds: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.rounds = 20_000, 2

    import dask.config
    import numpy as np

    import daskgb
    from daskgb import sampling
    from daskgb.backend import get_backend, resolve_device
    from daskgb.ellpack import pages
    from daskgb.growth import host as host_growth
    from daskgb.training import gradients, rounds
    from synthetic import make_higgs

    device = resolve_device(args.device)
    backend = get_backend(device)
    xp = backend.xp
    on_gpu = xp is not np

    def sync():
        if on_gpu:
            xp.cuda.runtime.deviceSynchronize()

    X, y = make_higgs(xp, args.rows, 2020)
    if on_gpu:  # the rows wait in host memory: only pages go to the GPU
        X, y = X.get(), y.get()
    sample = min(args.rows, 1_000_000)
    ell_bytes = daskgb.QuantileMatrix(X[:sample], y[:sample], device=device).ellpack.nbytes * args.rows / sample
    budget = int(ell_bytes / args.times)
    t = time.perf_counter()
    m = daskgb.QuantileMatrix(X, y, device=device, device_memory_budget=budget)
    sync()
    print(f"{args.rows:,} rows: {m.ellpack.n_pages} pages, budget {budget / 2**20:.1f} MiB, "
          f"quantised in {time.perf_counter() - t:.2f} s", flush=True)

    if on_gpu:  # copy bandwidth of one page, from its (page-locked) host memory and from a pageable copy
        words = m.ellpack._pages[0].words
        pageable = np.array(words)
        for name, host in (("page memory", words), ("pageable", pageable)):
            d = xp.asarray(host)
            sync()
            t = time.perf_counter()
            for _ in range(10):
                d.set(host)
            sync()
            print(f"host to device from {name}: {10 * host.nbytes / (time.perf_counter() - t) / 1e9:.1f} GB/s "
                  f"({host.nbytes / 2**20:.1f} MiB a copy)", flush=True)

    totals, calls = collections.Counter(), collections.Counter()

    def timed(owner, name, label=None):
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def wrapper(*a, **k):
            sync()
            t0 = time.perf_counter()
            out = fn(*a, **k)
            sync()
            totals[label or name] += time.perf_counter() - t0
            calls[label or name] += 1
            return out
        setattr(owner, name, wrapper)

    # Where training/rounds.py and training/gradients.py call them (they import the names).
    timed(rounds, "compact_rows")
    timed(rounds, "add_tree_binned")
    timed(host_growth, "grow_forest")
    if on_gpu:
        from daskgb.growth import device as device_growth

        timed(device_growth, "grow_forest")
    timed(gradients, "mvs_sample")
    timed(sampling, "_threshold", "mvs_threshold")
    timed(backend, "prepare_gradients")
    timed(host_growth._Growth, "_histograms", "streamed histograms")
    timed(host_growth._Growth, "_apply_pending", "streamed partitions")
    timed(pages.PagedEllpack, "page", "page copies (overlapped)" if on_gpu else "pages")
    dask.config.set({"daskgb.training.compact-sampled-pages": args.path == "compact"})
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "device": device}
    if args.rate < 1:
        params.update(subsample=args.rate, sampling_method="gradient_based")
    daskgb.train(params, m, 2, verbose_eval=False)
    totals.clear()
    calls.clear()
    sync()
    t = time.perf_counter()
    booster = daskgb.train(params, m, args.rounds, verbose_eval=False)
    sync()
    wall = time.perf_counter() - t
    print(f"\nrate {args.rate}, path {booster.attr('training_path')}: {wall / args.rounds * 1e3:.2f} ms a round "
          f"({args.rounds} rounds)")
    for name, total in totals.most_common():
        print(f"  {name:24s} {total / args.rounds * 1e3:8.2f} ms a round  ({calls[name] / args.rounds:.1f} calls)")


if __name__ == "__main__":
    main()
