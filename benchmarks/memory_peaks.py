"""Where daskgb's peak device memory comes from (developer tool).

    python benchmarks/memory_peaks.py --data higgs
    python benchmarks/memory_peaks.py --smoke                  # 2,000 rows, 2 rounds

Tracks the bytes in live CuPy arrays (the memory pool's used bytes, plus the blocks
training's CUDA graphs hold in pools of their own: growth/graphs.py graph_memory_bytes)
through building the QuantileMatrix and a few training rounds, and prints the peak of each
phase with the allocation that reached it (its Python stack) and what was live then. GPU only.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="higgs", help="a set of examples/benchmark.py")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="2,000 rows and 2 rounds: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.rounds = 2_000, 2

    import benchmark
    import cupy
    from cupy.cuda import memory_hook

    import daskgb

    n_rows, X, y, qid, params = benchmark.make_set(args.data, cupy, args.rows)
    from daskgb.growth.graphs import graph_memory_bytes

    pool = cupy.get_default_memory_pool()

    class Peak(memory_hook.MemoryHook):
        name = "Peak"

        def __init__(self):
            self.base = pool.used_bytes() + graph_memory_bytes()
            self.peak, self.stack, self.size = self.base, None, 0

        def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
            used = pool.used_bytes() + graph_memory_bytes()  # CUDA graphs' blocks are in pools of their own
            if used > self.peak:
                self.peak, self.size = used, mem_size
                self.stack = [f for f in traceback.extract_stack()[:-2] if "daskgb" in f.filename][-4:]

    def report(phase, hook):
        print(f"{phase}: peak {(hook.peak - hook.base) / 2**30:.3f} GiB above {hook.base / 2**30:.3f} GiB "
              f"(the last allocation {hook.size / 2**20:.1f} MiB)")
        for f in hook.stack or []:
            print(f"    {Path(f.filename).name}:{f.lineno} {f.name}: {f.line}")

    print(f"{args.data}: {n_rows} rows; input X {X.nbytes / 2**30:.3f} GiB")
    with Peak() as h:
        m = benchmark.quantile_matrix(X, y, qid)
    report("QuantileMatrix", h)
    print(f"  ELLPACK {m.ellpack.nbytes / 2**30:.3f} GiB ({m.ellpack.bits} bits x {m.ellpack.row_stride})")
    with Peak() as h:
        booster = daskgb.train(params, m, args.rounds, verbose_eval=False)
    report(f"train {args.rounds} rounds ({booster.attr('training_path')})", h)


if __name__ == "__main__":
    main()
