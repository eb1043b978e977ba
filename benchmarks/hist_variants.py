"""What limits the histogram kernel: the root histogram of Higgs-shaped data timed for
source variants of kernels/histogram.cu and launch settings (developer tool).

    python benchmarks/hist_variants.py --rows 10500000
    python benchmarks/hist_variants.py --smoke                     # 20,000 rows, one rep, two configurations

Variants that drop work (no atomics, no adds) give wrong histograms on purpose: they
show what the remaining work costs. Correct variants are checked against the base.
The launch settings are daskgb.histogram.cuda's module variables. GPU only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

ADD = ("    if (gh.x != 0) shared_add(g_planes, n_bins, b, gh.x);\n"
       "    if (gh.y != 0) shared_add(h_planes, n_bins, b, gh.y);")



# name: (source transform, bytes per bin, correct)
VARIANTS = {
    "carry": (lambda s: s, 16, True),
    "no_add": (lambda s: s.replace(ADD, "    if ((unsigned)(gh.x ^ gh.y) == 0x12345u) g_planes[b] = 1u;"),
               16, False),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--smoke", action="store_true", help="20,000 rows, one rep, the base configurations: that the "
                                                          "script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.reps = 20_000, 1

    import cupy
    import numpy as np

    import daskgb
    from daskgb.backend import cupy_backend as cb
    from daskgb.backend import kernels
    from daskgb.histogram import cuda as histogram
    from synthetic import make_higgs

    X, y = make_higgs(cupy, args.rows, 2017)
    m = daskgb.QuantileMatrix(X, y, device="cuda")
    del X
    ell = m.ellpack
    rng = cupy.random.RandomState(0)
    gpair = cupy.stack([rng.standard_normal(args.rows, dtype=cupy.float32),
                        rng.random_sample(args.rows, dtype=cupy.float32)], axis=1)
    fixed, _ = cb.prepare_gradients(gpair)
    part = cb.new_partition(args.rows)
    # A deep-level layout too: 64 nodes of ~equal size, every other one built.
    deep = cb.new_partition(args.rows)
    bounds = np.linspace(0, args.rows, 65).astype(np.int64)
    deep._ensure_capacity(63)
    deep.start[:64], deep.count[:64], deep.leaf[:64] = bounds[:-1], np.diff(bounds), True
    deep.segs_d[:64] = cupy.asarray(np.stack([bounds[:-1], np.diff(bounds)], axis=1))
    deep_nodes = list(range(0, 64, 2))

    real_source = kernels.load_source
    assert ADD in real_source("histogram.cu"), "the no_add variant no longer matches kernels/histogram.cu"

    def run(variant, budget, threads, nodes_part, nodes, slots=8):
        transform, bin_bytes, _ = VARIANTS[variant]
        histogram._BIN_BYTES = bin_bytes
        kernels.load_source = lambda name: transform(real_source(name)) if name == "histogram.cu" else real_source(name)
        kernels._cache.clear()
        kernels._functions.clear()
        ell.__dict__.pop("_cuda_hist_setup", None)  # its feature groups depend on the bytes per bin
        histogram.SHARED_BUDGET_BYTES, histogram._HIST_THREADS, histogram._SLOTS_PER_THREAD = budget, threads, slots
        try:
            out = cb.build_histograms(ell, fixed, nodes_part, nodes)
            times = []
            for _ in range(args.reps):
                cupy.cuda.runtime.deviceSynchronize()
                s, e = cupy.cuda.Event(), cupy.cuda.Event()
                s.record()
                cb.build_histograms(ell, fixed, nodes_part, nodes)
                e.record()
                e.synchronize()
                times.append(cupy.cuda.get_elapsed_time(s, e))
            return statistics.median(times), out
        finally:
            kernels.load_source = real_source

    rows_deep = int(deep.count[deep_nodes].sum())
    print(f"{args.rows} rows x {ell.n_features}, {ell.bits} bits; deep: {len(deep_nodes)} nodes, {rows_deep} rows")
    print("| variant | budget | threads | slots/thread | root ms | Gitems/s | deep ms | correct |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base_root = base_deep = None
    configs = [(v, None, 1024, 8) for v in VARIANTS] + ([] if args.smoke else [
        ("carry", b, t, sl) for b, t, sl in
        ((None, 1024, 4), (None, 1024, 16), (None, 1024, 32), (None, 512, 8), (96 * 1024, 1024, 8),
         (96 * 1024, 1024, 16), (96 * 1024, 512, 8), (48 * 1024, 512, 8), (48 * 1024, 1024, 8))])
    for variant, budget, threads, slots in configs:
        ms, root = run(variant, budget, threads, part, [0], slots)
        ms_deep, dh = run(variant, budget, threads, deep, deep_nodes, slots)
        if base_root is None:
            base_root, base_deep = root, dh
        ok = bool((root == base_root).all() and (dh == base_deep).all()) if VARIANTS[variant][2] else "n/a"
        items = args.rows * ell.n_features
        print(f"| {variant} | {budget or 'default'} | {threads} | {slots} | {ms:.3f} | {items / ms / 1e6:.0f} | "
              f"{ms_deep:.3f} | {ok} |")


if __name__ == "__main__":
    main()
