"""Where a first fit's time goes in a fresh process with an empty CuPy kernel cache (developer tool).

    python benchmarks/profile_cold_start.py              # 100K x 20 rows, depth 6, 10 rounds
    python benchmarks/profile_cold_start.py --rows 2000  # the same, smaller

Run it as its own process: it points CUPY_CACHE_DIR at a new empty folder before CuPy is
imported, with CUPY_CACHE_SAVE_CUDA_SOURCE set, then times the import, the first
QuantileMatrix, training and predict, and a second fit. CuPy writes each kernel it compiles
into the cache as it goes, so the files in order of writing, with the time since the one
before, say which compiles the first fit waited for (the kernel names come from the saved
sources). The gaps include whatever ran between two compiles.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--top", type=int, default=0, help="list only the slowest N compiles (0: all, in order)")
    args = ap.parse_args()

    cache = tempfile.mkdtemp(prefix="daskgb-cold-")
    os.environ["CUPY_CACHE_DIR"] = cache
    os.environ["CUPY_CACHE_SAVE_CUDA_SOURCE"] = "1"
    began = time.time()
    t0 = time.perf_counter()
    import cupy
    import numpy as np

    import daskgb

    took_import = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=args.rows) > 0).astype(np.float32)
    Xd, yd = cupy.asarray(X), cupy.asarray(y)
    params = {"objective": "binary:logistic", "device": "cuda", "max_depth": 6}

    def fit():
        cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        m = daskgb.QuantileMatrix(Xd, yd)
        cupy.cuda.Device().synchronize()
        quantised = time.perf_counter()
        booster = daskgb.train(params, m, args.rounds)
        cupy.cuda.Device().synchronize()
        trained = time.perf_counter()
        booster.predict(Xd)
        cupy.cuda.Device().synchronize()
        return quantised - t, trained - t, time.perf_counter() - t

    first = fit()
    second = fit()
    print(f"import {took_import:.2f} s; first fit: quantised {first[0]:.2f} s, trained {first[1]:.2f} s, "
          f"predicted {first[2]:.2f} s; second fit {second[2]:.3f} s")

    written = []
    for root, _, names in os.walk(cache):
        for name in names:
            path = os.path.join(root, name)
            if not name.endswith(".cu") and not name.startswith("tmp"):
                written.append((os.path.getmtime(path), path))
    written.sort()
    rows, before = [], began
    for when, path in written:
        label = "?"
        if os.path.exists(path + ".cu"):
            with open(path + ".cu") as f:
                source = f.read()
            kernels = re.findall(r"__global__\s+void\s+(\w+)", source)
            label = f"{len(kernels)} kernel(s) {kernels[:2]}"
        rows.append((when - before, label))
        before = when
    print(f"{len(rows)} compiles, {sum(r[0] for r in rows):.2f} s between the first fit's start and the last")
    shown = sorted(rows, key=lambda r: -r[0])[: args.top] if args.top else rows
    for gap, label in shown:
        print(f"{gap:7.2f} s  {label}")


if __name__ == "__main__":
    main()
