"""Per tree level: the histogram kernel's and the row partition's device time, and the
histogram's achieved bandwidth against the copy bandwidth measured in the same run.

    python benchmarks/bench_levels.py --data higgs --rows 10500000
    python benchmarks/bench_levels.py --smoke                      # 20,000 rows, one rep

One boosting round is grown as training grows it; every build_histograms and
apply_splits call of the measured tree is repeated --reps times on the same input
(apply_splits restores the partition before each repeat) and timed with CUDA events;
the table shows medians. Bytes counted for a histogram build are the least it must
read: per built row its packed ELLPACK row (the feature group's slots for a dense
matrix, all slots for a sparse one, once per feature group), its ridx entry (4 B) and
its float32 gradient pair (8 B), plus the histogram written (16 B per bin).
The round is grown by the host grower (growth/host.py, the setting
daskgb.training.device-growth off), whose backend calls can be timed one by one; the device
grower (growth/device.py) launches the same histogram and partition kernels. GPU only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def copy_bandwidth(cupy, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), median of reps."""
    a = cupy.ones(nbytes // 4, dtype=cupy.float32)
    b = cupy.empty_like(a)
    times = []
    for _ in range(reps + 1):
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        s.record()
        cupy.copyto(b, a)
        e.record()
        e.synchronize()
        times.append(cupy.cuda.get_elapsed_time(s, e) / 1e3)
    del a, b
    return 2 * nbytes / statistics.median(times[1:])


def timed(cupy, fn, reps: int, before=None) -> float:
    """Median seconds of fn() over reps, each bracketed by CUDA events (before() untimed)."""
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        cupy.cuda.runtime.deviceSynchronize()
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cupy.cuda.get_elapsed_time(s, e) / 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="higgs", help="a set of examples/benchmark.py")
    ap.add_argument("--rows", type=int, default=None, help="the set's rows by default")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=int, default=None, help="histogram shared-memory budget in bytes")
    ap.add_argument("--threads", type=int, default=None, help="histogram block size")
    ap.add_argument("--sparse-grouped", action="store_true", help="sparse rows: a pass per feature group")
    ap.add_argument("--keep-dense", action="store_true", help="mostly-missing dense input: keep the dense layout")
    ap.add_argument("--sparse-ratio", type=float, default=None, help="ellpack.layout.SPARSE_BITS_RATIO")
    ap.add_argument("--smoke", action="store_true", help="20,000 rows, one rep: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.reps = 20_000, 1

    import cupy
    import dask.config

    import benchmark

    import daskgb
    from daskgb.backend import cupy_backend as cb
    from daskgb.histogram import cuda as histogram

    if args.budget is not None:
        histogram.SHARED_BUDGET_BYTES = args.budget
    if args.threads is not None:
        histogram._HIST_THREADS = args.threads
    histogram.SPARSE_ONE_PASS = not args.sparse_grouped
    if args.sparse_ratio is not None:
        from daskgb.ellpack import layout

        layout.SPARSE_BITS_RATIO = args.sparse_ratio
    if args.keep_dense:
        cb.present_counts = lambda X, missing: cupy.full(X.shape[0], X.shape[1])
    n_rows, X, y, qid, params = benchmark.make_set(args.data, cupy, args.rows)
    m = benchmark.quantile_matrix(X, y, qid)
    del X
    daskgb.train(params, m, 2, verbose_eval=False)  # compile, warm up
    bw = copy_bandwidth(cupy)

    levels = []  # per call: dict
    real_hist, real_apply = cb.build_histograms, cb.apply_splits

    def hist_hook(ell, gpair, part, build_nodes):
        rows = int(part.exact(build_nodes)[:, 1].sum())
        sec = timed(cupy, lambda: real_hist(ell, gpair, part, build_nodes), args.reps)
        n_groups = histogram.histogram_setup(ell).n_groups
        row_bytes = ell.row_stride * ell.bits / 8 * (1 if ell.is_dense else n_groups)
        nbytes = rows * (row_bytes + 4 + 8) + len(build_nodes) * int(ell.cuts.total_bins) * 16
        levels.append({"kind": "hist", "nodes": len(build_nodes), "rows": rows, "sec": sec, "bytes": nbytes,
                       "groups": n_groups})
        return real_hist(ell, gpair, part, build_nodes)

    def apply_hook(ell, part, *rest):
        rows = int(part.exact(rest[0])[:, 1].sum())
        ridx, table = part.ridx.copy(), part.segs_d.copy()
        host = {name: getattr(part, name).copy() for name in ("start", "count", "leaf", "split_index",
                                                              "is_right")}
        pending = list(part._pending)

        def restore():
            part.ridx[...] = ridx
            part.segs_d = table.copy()
            for name, a in host.items():
                setattr(part, name, a.copy())
            part._pending = list(pending)

        sec = timed(cupy, lambda: real_apply(ell, part, *rest), args.reps, before=restore)
        restore()
        levels.append({"kind": "part", "nodes": len(rest[0]), "rows": rows, "sec": sec})
        return real_apply(ell, part, *rest)

    cb.build_histograms, cb.apply_splits = hist_hook, apply_hook
    try:
        with dask.config.set({"daskgb.training.device-growth": False}):
            booster = daskgb.train(params, m, 1, verbose_eval=False)
    finally:
        cb.build_histograms, cb.apply_splits = real_hist, real_apply

    ell = m.ellpack if hasattr(m, "ellpack") else None
    print(f"{args.data} {n_rows} rows, depth {params['max_depth']}, path {booster.attr('training_path')}; copy "
          f"bandwidth {bw / 1e9:.0f} GB/s (read + write); histogram: shared budget {histogram._shared_budget()} B, "
          f"{histogram._HIST_THREADS} threads")
    if ell is not None:
        print(f"ELLPACK {ell.bits} bits x {ell.row_stride} slots, {'dense' if ell.is_dense else 'sparse'}")
    print("| level | kind | nodes | rows | groups | ms | GB/s | of copy bw |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    depth = {"hist": 0, "part": 0}
    tot = {"hist": 0.0, "part": 0.0}
    for r in levels:
        tot[r["kind"]] += r["sec"]
        if r["kind"] == "hist":
            gbs = r["bytes"] / r["sec"] / 1e9
            print(f"| {depth['hist']} | histogram | {r['nodes']} | {r['rows']} | {r['groups']} | "
                  f"{1e3 * r['sec']:.3f} | {gbs:.0f} | {gbs * 1e9 / bw:.2f} |")
        else:
            print(f"| {depth['part']} | partition | {r['nodes']} | {r['rows']} | | {1e3 * r['sec']:.3f} | | |")
        depth[r["kind"]] += 1
    print(f"tree totals: histograms {1e3 * tot['hist']:.2f} ms, partitions {1e3 * tot['part']:.2f} ms")


if __name__ == "__main__":
    main()
