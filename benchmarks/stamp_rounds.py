"""A device timeline of each rank's rounds on a LocalCUDACluster (developer tool, GPUs).

    python benchmarks/stamp_rounds.py --workers 4 --rows-per-worker 10000000 --rounds 300
    python benchmarks/stamp_rounds.py --smoke                      # 1 worker, 20,000 rows, 10 rounds

Training runs as it does for a user (rounds queued ahead of the host, each replayed as a
CUDA graph: the path cuda-graphs of training/plan.py; the path rank 0's booster reports is
printed), with a clock whose every phase mark (daskgb/phases.py: before a histogram, before
an allreduce, after it, at a tree's end; plus the round's start and the graph's launch) is a
one-thread kernel writing the GPU's %globaltimer into a device buffer. A mark inside a graph
is a kernel node of it, so every replay stamps. Nothing waits on the host.

The ranks' clocks are aligned on the allreduces' ends (every rank leaves an allreduce
within microseconds of the others): each rank's offset is the median difference of its
exits from rank 0's. Printed: the round time per rank; for each allreduce of a round, how
far apart the ranks arrived, how often each rank arrived last and how long each waited;
and the stretches between marks whose mean length differs most between ranks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

ROUND, LAUNCH = 10, 11
NAMES = {0: "histogram", 1: "allreduce", 2: "split", 3: "other", ROUND: "round", LAUNCH: "launch"}

_SOURCE = r"""
extern "C" __global__ void stamp(unsigned long long* buf, unsigned int* count, int code, unsigned int cap) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  unsigned int i = atomicAdd(count, 1u);
  if (i < cap) {
    buf[2 * i] = (unsigned long long)code;
    buf[2 * i + 1] = t;
  }
}
"""


class StampClock:
    """A phase clock (phases.mark's interface) whose marks are device timestamps."""

    def __init__(self, cap: int = 1 << 20):
        import cupy

        self.cupy, self.cap = cupy, cap
        self.buf = cupy.zeros(2 * cap, dtype=cupy.uint64)
        self.count = cupy.zeros(1, dtype=cupy.uint32)
        self.kernel = cupy.RawKernel(_SOURCE, "stamp")

    def mark(self, code: int) -> None:
        self.kernel((1,), (1,), (self.buf, self.count, np.int32(code), np.uint32(self.cap)))

    def cut(self) -> None:  # the stamps are read once, after training: no laps to keep
        pass

    def lap(self):
        return [0.0, 0.0, 0.0, 0.0]

    def stamps(self) -> np.ndarray:
        n = min(int(self.count.get()[0]), self.cap)
        return self.buf[: 2 * n].get().reshape(-1, 2)


def stamped_train(job, root, rank, world, options, dtrain):
    """train_on_worker with a StampClock running and rounds still queued and graphed."""
    import cupy

    from daskgb import collective, phases
    from daskgb.dask import plugin
    from daskgb.dask.worker import train_on_worker
    from daskgb.growth import graphs
    from daskgb.training.fit import Fit

    clock = StampClock()
    real_gradients, real_queue, real_running = Fit.gradients, graphs.ForestGraphs.queue, phases.clock_running
    host = []  # (label, start, end): host seconds of the steps outside the rounds, and each round's start
    # (A worker gives its device memory back once idle for the setting worker.give-back-after,
    # after the fit: inside this window only with that setting 0.)
    timed = [(collective.NcclCommunicator, "__init__", "NCCL communicator init"),
             (collective.NcclCommunicator, "close", "NCCL communicator close"),
             (graphs._ForestGraph, "__init__", "graph capture"),
             (graphs.ForestGraphs, "close", "graphs close"),
             (plugin, "_give_back_device_memory", "give back device memory")]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in timed]

    def host_timed(fn, label):
        def run(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                host.append((label, t0, time.perf_counter()))
        return run

    for (owner, name, label), (_, _, fn) in zip(timed, originals):
        setattr(owner, name, host_timed(fn, label))

    def gradients(self, *a, **k):
        now = time.perf_counter()
        host.append(("round", now, now))
        clock.mark(ROUND)
        return real_gradients(self, *a, **k)

    def queue(self, *a, **k):
        clock.mark(LAUNCH)
        return real_queue(self, *a, **k)

    Fit.gradients, graphs.ForestGraphs.queue = gradients, queue
    phases.clock_running = lambda: False  # the clock must not turn queuing and graphs off here
    token = phases._running.set(clock)
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    try:
        result = train_on_worker(job, root, rank, world, options, dtrain, [])
        cupy.cuda.runtime.deviceSynchronize()
    finally:
        phases._running.reset(token)
        Fit.gradients, graphs.ForestGraphs.queue = real_gradients, real_queue
        phases.clock_running = real_running
        for owner, name, fn in originals:
            setattr(owner, name, fn)
    end = time.perf_counter()
    starts = [a for label, a, _ in host if label == "round"]
    steps = {"first round starts (s after the call)": starts[0] - t if starts else None,
             "rounds 0-4 (s)": starts[5] - starts[0] if len(starts) > 5 else None,
             "rounds 5-last start (s)": starts[-1] - starts[5] if len(starts) > 5 else None,
             "last round start to return (s)": end - starts[-1] if starts else None}
    for label, a, b in host:
        if label != "round":
            steps[f"{label} (s)"] = steps.get(f"{label} (s)", 0.0) + (b - a)
    booster = result["booster"]
    return {"wall": end - t, "stamps": clock.stamps(), "host": steps,
            "path": None if booster is None else booster.attr("training_path")}


def analyse(per_rank: list[np.ndarray], rounds: int, skip: int = 5) -> None:
    n = min(len(s) for s in per_rank)
    if any(len(s) != n for s in per_rank):
        print(f"note: ranks made {[len(s) for s in per_rank]} stamps; the first {n} are compared")
    codes = per_rank[0][:n, 0].astype(int)
    for r, s in enumerate(per_rank):
        if not np.array_equal(s[:n, 0].astype(int), codes):
            print(f"rank {r}'s marks differ from rank 0's: no alignment possible")
            return
    t = np.stack([s[:n, 1].astype(np.int64) for s in per_rank])  # (ranks, stamps) ns
    starts = np.flatnonzero(codes == ROUND)
    if len(starts) <= skip + 1:
        print("too few rounds stamped")
        return
    keep = np.arange(starts[skip], starts[-1])  # whole rounds past the first few (capture, warm-up)
    enter = np.flatnonzero(codes[:-1] == 1)  # each allreduce: its mark and the next one (its end)
    enter = enter[(enter >= keep[0]) & (enter < keep[-1])]
    leave = enter + 1
    offset = np.median(t[:, leave] - t[0, leave], axis=1)  # each rank's clock against rank 0's
    ta = t - offset[:, None].astype(np.int64)
    w = len(per_rank)
    round_ms = np.diff(t[:, starts[skip:]], axis=1) / 1e6
    print(f"ranks {w}, rounds timed {round_ms.shape[1]}; round (ms, mean / median per rank): "
          + ", ".join(f"{m:.3f}/{d:.3f}" for m, d in zip(round_ms.mean(1), np.median(round_ms, 1))))
    print(f"clock offsets against rank 0 (us): {[round(float(o) / 1e3, 1) for o in offset]}")
    # The allreduces by their place in the round.
    round_of = np.searchsorted(starts, enter, side="right") - 1
    place = enter - starts[round_of]
    print("| allreduce (place in round) | calls | arrival spread us (mean) | last to arrive (share per rank) | "
          "wait us per rank (mean) | in the allreduce us (mean) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for p in np.unique(place):
        sel = enter[place == p]
        arrive, out = ta[:, sel], ta[:, sel + 1]
        spread = (arrive.max(0) - arrive.min(0)) / 1e3
        last = np.bincount(arrive.argmax(0), minlength=w) / len(sel)
        wait = (arrive.max(0)[None] - arrive) / 1e3
        inside = (out - arrive) / 1e3
        print(f"| {p} | {len(sel)} | {spread.mean():.1f} | {' '.join(f'{x:.2f}' for x in last)} | "
              f"{' '.join(f'{x:.1f}' for x in wait.mean(1))} | {' '.join(f'{x:.1f}' for x in inside.mean(1))} |")
    # Stretches between consecutive marks, by their place in the round, compared across ranks.
    seg_start = keep[:-1]
    seg_place = seg_start - starts[np.searchsorted(starts, seg_start, side="right") - 1]
    dur = (t[:, seg_start + 1] - t[:, seg_start]) / 1e3
    rows = []
    for p in np.unique(seg_place):
        sel = seg_place == p
        means = dur[:, sel].mean(1)
        kind = f"{NAMES.get(codes[seg_start[sel][0]], '?')}->{NAMES.get(codes[seg_start[sel][0] + 1], '?')}"
        rows.append((means.max() - means.min(), p, kind, means))
    total = dur.sum(1) / round_ms.shape[1]
    print(f"stretches per round: {len(rows)}; their sum per round (us): {[round(float(x), 1) for x in total]}")
    print("| place | stretch | mean us per rank | max - min |")
    print("| --- | --- | --- | --- |")
    for diff, p, kind, means in sorted(rows, key=lambda r: -r[0])[:14]:
        print(f"| {p} | {kind} | {' '.join(f'{m:.1f}' for m in means)} | {diff:.1f} |")
    print("| place | stretch | mean us (rank 0) | (longest stretches) |")
    for diff, p, kind, means in sorted(rows, key=lambda r: -r[3][0])[:10]:
        print(f"| {p} | {kind} | {means[0]:.1f} | |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,4", help="worker counts, one cluster each")
    ap.add_argument("--rows-per-worker", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--smoke", action="store_true", help="1 worker, 20,000 rows, 10 rounds: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.rows_per_worker, args.rounds = "1", 20_000, 10
    from benchmark_dask_higgs import make_data
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import daskgb.dask as dgb
    from daskgb.dask.worker import start_collective
    from daskgb.training import TrainingOptions

    for workers in [int(w) for w in args.workers.split(",")]:
        devices = ",".join(str(i) for i in range(workers))
        with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices) as cluster, Client(cluster) as client:
            X, y = make_data(client, args.rows_per_worker * workers, 8 * workers, False)
            dtrain = dgb.DaskQuantileMatrix(client, X, y)
            params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "device": "cuda"}
            dgb.train(client, params, dtrain, 3, verbose_eval=False)  # warm up
            options = TrainingOptions.create(params, args.rounds, verbose_eval=False, has_evals=False)
            options = options.for_workers("cuda")
            job = uuid.uuid4().hex
            root = client.submit(start_collective, job, workers=[dtrain.workers[0]], pure=False).result()
            futs = [client.submit(stamped_train, job, root, r, len(dtrain.workers), options, dtrain._local[a],
                                  workers=[a], pure=False)
                    for r, a in enumerate(dtrain.workers)]
            results = client.gather(futs)
            walls = [res["wall"] for res in results]
            print(f"\n## {workers} worker(s), {args.rows_per_worker * workers:,} rows, {args.rounds} rounds: "
                  f"wall {statistics.median(walls):.3f} s ({1e3 * statistics.median(walls) / args.rounds:.2f} ms "
                  f"a round), path {results[0]['path']}")
            for r, res in enumerate(results):
                print(f"rank {r} host: " + ", ".join(f"{k} {v:.4f}" for k, v in res["host"].items() if v is not None))
            analyse([res["stamps"] for res in results], args.rounds)


if __name__ == "__main__":
    main()
