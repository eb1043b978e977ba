"""Per-phase time inside each worker of a LocalCUDACluster training run (developer tool).

    python ci/profile_dask.py --workers 2 --rows 10500000 --rounds 100

Wraps the CUDA backend's functions (and with --sync-allreduce the communicator's
allreduce) with device synchronisations inside every worker process, trains, and
prints per-rank milliseconds per round for each phase. With the device grower
(backend/cuda_growth.py) a whole tree is one phase, grow_tree. --events instead times
each allreduce and each round's trees on the device with CUDA events (no syncs added),
which shows how long each NCCL call waited for the other ranks.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def profiled_train(job, root, rank, world, params, dtrain, rounds, sync_allreduce, cprofile=False):
    import cupy

    from daskgb import collective
    from daskgb.backend import cuda_growth
    from daskgb.backend import cupy_backend as cb
    from daskgb.dask.worker import train_on_worker

    spent = collections.Counter()

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        def timed(*a, **k):
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            out = fn(*a, **k)
            cupy.cuda.runtime.deviceSynchronize()
            spent[label] += time.perf_counter() - t
            return out

        setattr(owner, name, timed)
        return fn

    originals = [(cb, n, wrap(cb, n, n)) for n in ("build_histograms", "evaluate_splits", "apply_splits",
                                                   "prepare_gradients", "gradient_abs_sums")]
    originals.append((cuda_growth, "grow_tree", wrap(cuda_growth, "grow_tree", "grow_tree")))
    if sync_allreduce:
        originals.append((collective.NcclCommunicator, "allreduce",
                          wrap(collective.NcclCommunicator, "allreduce", "allreduce (wait + NCCL)")))
    if cprofile:  # the host's own time, no syncs added
        for owner, name, fn in originals:
            setattr(owner, name, fn)
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    train_on_worker(job, root, rank, world, params, dtrain, [], rounds, False, None)
    cupy.cuda.runtime.deviceSynchronize()
    total = time.perf_counter() - t
    if cprofile:
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        return {"total": round(1e3 * total / rounds, 2), "profile": text.getvalue()}
    for owner, name, fn in originals:
        setattr(owner, name, fn)
    out = {k: round(1e3 * v / rounds, 2) for k, v in spent.most_common()}
    out["total"] = round(1e3 * total / rounds, 2)
    out["rest"] = round(out["total"] - sum(v for k, v in out.items() if k != "total"), 2)
    return out


def event_train(job, root, rank, world, params, dtrain, rounds, switch_interval=None, gc_mode="on"):
    """Per-rank device time between CUDA events around each allreduce and each round's trees,
    with no syncs added: an allreduce's span is its NCCL kernel, including the wait for the
    other ranks to reach it; a round's trees span from the first launch to the last."""
    import cupy

    from daskgb import collective
    from daskgb.backend import cuda_growth
    from daskgb.dask.worker import train_on_worker

    spans = []  # (label, start event, end event)

    def wrap(owner, name, label_of):
        fn = getattr(owner, name)

        def timed(*a, **k):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            out = fn(*a, **k)
            end.record()
            spans.append((label_of(a), start, end))
            return out

        setattr(owner, name, timed)
        return fn

    def allreduce_label(a):
        x = a[1]
        return "allreduce, gradient scale" if getattr(x, "size", 0) == 2 else "allreduce, histograms"

    originals = [(collective.NcclCommunicator, "allreduce", wrap(collective.NcclCommunicator, "allreduce",
                                                                 allreduce_label)),
                 (cuda_growth, "grow_forest", wrap(cuda_growth, "grow_forest", lambda a: "trees (grow_forest)"))]
    import gc

    before = sys.getswitchinterval()
    if gc_mode == "freeze":  # the worker's objects out of the collector's way while it trains
        gc.freeze()
    elif gc_mode == "off":
        gc.disable()
    if switch_interval is not None:  # how long another thread may hold the GIL before this one asks for it
        sys.setswitchinterval(switch_interval)
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    try:
        result = train_on_worker(job, root, rank, world, params, dtrain, [], rounds, False, None)
        cupy.cuda.runtime.deviceSynchronize()
    finally:
        gc.unfreeze()
        gc.enable()
        sys.setswitchinterval(before)
        for owner, name, fn in originals:
            setattr(owner, name, fn)
    total = time.perf_counter() - t
    spent, calls = collections.Counter(), collections.Counter()
    for label, start, end in spans:
        spent[label] += cupy.cuda.get_elapsed_time(start, end)
        calls[label] += 1
    out = {f"{k} ({calls[k] / rounds:g}/round)": round(v / rounds, 3) for k, v in spent.most_common()}
    out["total"] = round(1e3 * total / rounds, 2)
    setup = result["collective"]["setup_s"]  # joining the collective and NCCL's init, once a fit
    out["setup (ms, once)"] = round(1e3 * setup, 1)
    out["total without setup"] = round(1e3 * (total - setup) / rounds, 2)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--sync-allreduce", action="store_true", help="also time every allreduce (adds syncs)")
    ap.add_argument("--cprofile", action="store_true", help="instead: each rank's host profile, no syncs added")
    ap.add_argument("--events", action="store_true",
                    help="instead: device time (CUDA events, no syncs) of each allreduce and each round's trees")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="with --events: sys.setswitchinterval in each worker while it trains")
    ap.add_argument("--gc", choices=("on", "freeze", "off"), default="on",
                    help="with --events: the worker's garbage collector while it trains")
    args = ap.parse_args()
    from benchmark_dask_higgs import make_data
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import daskgb.dask as dgb
    from daskgb.dask.worker import start_collective

    devices = ",".join(str(i) for i in range(args.workers))
    with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices) as cluster, Client(cluster) as client:
        X, y = make_data(client, args.rows, 8, True)
        dtrain = dgb.DaskQuantileMatrix(client, X, y)
        params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "device": "cuda"}
        dgb.train(client, params, dtrain, 3, verbose_eval=False)  # warm up
        job = uuid.uuid4().hex
        root = client.submit(start_collective, job, workers=[dtrain.workers[0]], pure=False).result()
        if args.events:
            futs = [client.submit(event_train, job, root, r, len(dtrain.workers), params, dtrain._local[a],
                                  args.rounds, args.switch_interval, args.gc, workers=[a], pure=False)
                    for r, a in enumerate(dtrain.workers)]
        else:
            futs = [client.submit(profiled_train, job, root, r, len(dtrain.workers), params, dtrain._local[a],
                                  args.rounds, args.sync_allreduce, args.cprofile, workers=[a], pure=False)
                    for r, a in enumerate(dtrain.workers)]
        results = client.gather(futs)
        if args.cprofile:
            for r, out in enumerate(results):
                print(f"rank {r}: {out['total']} ms per round\n{out['profile']}")
        else:
            print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
