"""Host memory of QuantileMatrix.from_batches beside its pages (developer tool).

    python benchmarks/host_memory_batches.py --rows 40000000 --batch-rows 2000000 --features 1
    python3 benchmarks/host_memory_batches.py --device cuda --rows 200000000 --batch-rows 20000000 --features 28
    python benchmarks/host_memory_batches.py --smoke            # 20,000 rows in 10 batches

Makes each batch as it is asked for (on the device on a GPU), so that the only lasting host
bytes are the library's: the pages and the labels. Prints the peak and the held bytes of
numpy's host allocations (tracemalloc sees them), against the pages' bytes and the labels'.
On a GPU the pages sit in page-locked memory, which tracemalloc does not see: there the
figures are the host bytes beside the pages.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=40_000_000)
    ap.add_argument("--batch-rows", type=int, default=2_000_000)
    ap.add_argument("--features", type=int, default=1, help="few features: the labels outweigh the pages")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget-fraction", type=float, default=1 / 3, help="the device budget over the pages' bytes")
    ap.add_argument("--smoke", action="store_true", help="20,000 rows in batches of 2,000: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.batch_rows = 20_000, 2_000

    import daskgb
    from daskgb.backend import get_backend, resolve_device

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    sizes = [min(args.batch_rows, args.rows - a) for a in range(0, args.rows, args.batch_rows)]

    def batches():  # the same rows on every pass: batch k from seed k
        for k, n in enumerate(sizes):
            rs = xp.random.RandomState(k)
            X = rs.randint(0, 200, size=(n, args.features)).astype(xp.float32)
            yield X, rs.random_sample(n).astype(xp.float32)

    budget = int(args.rows * args.features * args.budget_fraction)
    tracemalloc.start()
    t0 = time.perf_counter()
    m = daskgb.QuantileMatrix.from_batches(batches, device=device, device_memory_budget=budget)
    seconds = time.perf_counter() - t0
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mib = 2**20
    print(f"{args.rows:,} x {args.features} in {len(sizes)} batches on {device}, {m.ellpack.n_pages} pages, "
          f"{seconds:.1f} s: pages {m.ellpack.nbytes / mib:.1f} MiB, labels {args.rows * 4 / mib:.1f} MiB; "
          f"host allocations traced: peak {peak / mib:.1f} MiB, held after {held / mib:.1f} MiB")


if __name__ == "__main__":
    main()
