"""Per-phase time inside each worker of a LocalCUDACluster training run (developer tool).

    python benchmarks/profile_dask.py --workers 2 --rows 10500000 --rounds 100
    python benchmarks/profile_dask.py --events --set training.cuda-graphs=false
    python benchmarks/profile_dask.py --device cpu --smoke --sync-allreduce   # 2 CPU workers, 4,000 rows, 2 rounds

Wraps the backend's functions (and with --sync-allreduce the communicator's allreduce)
with device synchronisations inside every worker process, trains, and prints per-rank
milliseconds per round for each phase. The syncs would break a round's CUDA graph capture
and undo the queueing of rounds, so this breakdown trains with the setting
daskgb.training.queue-rounds off: with the device grower (growth/device.py) a whole tree is
then one phase, grow_tree. --events instead times each allreduce and each round's trees on
the device with CUDA events (no syncs added), which shows how long each NCCL call waited for
the other ranks; on the default path (rounds queued, replayed as CUDA graphs) a replayed
round makes no allreduce call of its own, so its allreduces are inside "trees (queued
round)": --set training.cuda-graphs=false (or training.queue-rounds=false) shows them one by
one. --set KEY=VALUE sets a daskgb setting (daskgb/config.py) on the workers. Each rank's
line names the training path (rank 0's booster's "training_path").

On the CPU (--device cpu: a LocalCluster of --workers processes, numpy partitions) the
numpy backend's functions are timed (nothing to sync) and the allreduce is the host
collective's; --events needs a GPU.
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


def _sync_of(device: str):
    if device == "cpu":
        return lambda: None
    import cupy

    return cupy.cuda.runtime.deviceSynchronize


def _path(result) -> str | None:
    booster = result.get("booster")
    return None if booster is None else booster.attr("training_path")


def profiled_train(job, root, rank, world, options, dtrain, sync_allreduce, cprofile=False):
    import dask.config

    from daskgb import collective
    from daskgb.backend import get_backend
    from daskgb.dask.worker import train_on_worker

    device = options.train_params.device
    backend = get_backend(device)
    sync = _sync_of(device)
    spent = collections.Counter()

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        def timed(*a, **k):
            sync()
            t = time.perf_counter()
            out = fn(*a, **k)
            sync()
            spent[label] += time.perf_counter() - t
            return out

        setattr(owner, name, timed)
        return fn

    originals = [(backend, n, wrap(backend, n, n)) for n in ("build_histograms", "evaluate_splits", "apply_splits",
                                                             "prepare_gradients", "gradient_abs_sums")]
    if device == "cuda":
        from daskgb.growth import device as device_growth

        originals.append((device_growth, "grow_tree", wrap(device_growth, "grow_tree", "grow_tree")))
    if sync_allreduce:
        if device == "cuda" and world > 1:
            owner, label = collective.NcclCommunicator, "allreduce (wait + NCCL)"
        else:
            owner, label = collective.DaskCommunicator, "allreduce (wait + host)"
        originals.append((owner, "allreduce", wrap(owner, "allreduce", label)))
    settings = {}
    if cprofile:  # the host's own time, no syncs added, the path as planned
        for owner, name, fn in originals:
            setattr(owner, name, fn)
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    else:
        settings = {"daskgb.training.queue-rounds": False}
    sync()
    t = time.perf_counter()
    with dask.config.set(settings):
        result = train_on_worker(job, root, rank, world, options, dtrain, [])
    sync()
    total = time.perf_counter() - t
    rounds = options.num_boost_round
    if cprofile:
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        return {"total": round(1e3 * total / rounds, 2), "path": _path(result), "profile": text.getvalue()}
    for owner, name, fn in originals:
        setattr(owner, name, fn)
    out = {k: round(1e3 * v / rounds, 2) for k, v in spent.most_common()}
    out["total"] = round(1e3 * total / rounds, 2)
    out["rest"] = round(out["total"] - sum(v for k, v in out.items() if k != "total"), 2)
    if rank == 0:
        out["path"] = _path(result)
    return out


def event_train(job, root, rank, world, options, dtrain, switch_interval=None, gc_mode="on"):
    """Per-rank device time between CUDA events around each allreduce and each round's trees,
    with no syncs added: an allreduce's span is its NCCL kernel, including the wait for the
    other ranks to reach it; a round's trees span from the first launch to the last (a
    replayed CUDA graph: the graph)."""
    import cupy

    from daskgb import collective
    from daskgb.dask.worker import train_on_worker
    from daskgb.growth import device as device_growth
    from daskgb.growth import graphs

    spans = []  # (label, start event, end event)

    def wrap(owner, name, label_of):
        fn = getattr(owner, name)

        def timed(*a, **k):
            if cupy.cuda.get_current_stream().is_capturing():  # inside a CUDA graph: timed as its replays
                return fn(*a, **k)
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
                 (device_growth, "grow_forest", wrap(device_growth, "grow_forest", lambda a: "trees (grow_forest)")),
                 (graphs.ForestGraphs, "queue", wrap(graphs.ForestGraphs, "queue", lambda a: "trees (queued round)"))]
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
        result = train_on_worker(job, root, rank, world, options, dtrain, [])
        cupy.cuda.runtime.deviceSynchronize()
    finally:
        gc.unfreeze()
        gc.enable()
        sys.setswitchinterval(before)
        for owner, name, fn in originals:
            setattr(owner, name, fn)
    total = time.perf_counter() - t
    rounds = options.num_boost_round
    spent, calls = collections.Counter(), collections.Counter()
    for label, start, end in spans:
        spent[label] += cupy.cuda.get_elapsed_time(start, end)
        calls[label] += 1
    out = {f"{k} ({calls[k] / rounds:g}/round)": round(v / rounds, 3) for k, v in spent.most_common()}
    out["total"] = round(1e3 * total / rounds, 2)
    setup = result["collective"]["setup_s"]  # joining the collective and NCCL's init, once a fit
    out["setup (ms, once)"] = round(1e3 * setup, 1)
    out["total without setup"] = round(1e3 * (total - setup) / rounds, 2)
    if rank == 0:
        out["path"] = _path(result)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--data", default="higgs", choices=("higgs", "quickstart"),
                    help="quickstart: examples/quickstart.py's rows (20 features, 5%% missing; --rows ignored)")
    ap.add_argument("--sync-allreduce", action="store_true", help="also time every allreduce (adds syncs)")
    ap.add_argument("--cprofile", action="store_true", help="instead: each rank's host profile, no syncs added")
    ap.add_argument("--events", action="store_true",
                    help="instead: device time (CUDA events, no syncs) of each allreduce and each round's trees")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="with --events: sys.setswitchinterval in each worker while it trains")
    ap.add_argument("--gc", choices=("on", "freeze", "off"), default="on",
                    help="with --events: the worker's garbage collector while it trains")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a daskgb setting on the workers, e.g. training.cuda-graphs=false (repeatable)")
    ap.add_argument("--smoke", action="store_true", help="4,000 rows and 2 rounds: that the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.rounds = 4_000, 2
    if args.events and args.device != "cuda":
        ap.error("--events times CUDA events: it needs --device cuda")

    import dask.config
    from benchmark_dask_higgs import make_data
    from distributed import Client

    import daskgb.dask as dgb
    from daskgb.dask.worker import start_collective
    from daskgb.training import TrainingOptions

    # The workers take this process's dask.config as they start.
    dask.config.set({f"daskgb.{key}": value for key, value in (s.split("=", 1) for s in args.set)})
    if args.device == "cuda":
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(args.workers)))
    else:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        if args.data == "quickstart":
            import quickstart

            X, y = client.persist(list(quickstart.make_data(args.device)))
            X, y = X[: quickstart.N_TRAIN], y[: quickstart.N_TRAIN]
        else:
            X, y = make_data(client, args.rows, 8, True, device=args.device)
        dtrain = dgb.DaskQuantileMatrix(client, X, y)
        params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "device": args.device}
        dgb.train(client, params, dtrain, 3, verbose_eval=False)  # warm up
        options = TrainingOptions.create(params, args.rounds, verbose_eval=False, has_evals=False)
        options = options.for_workers(args.device)
        job = uuid.uuid4().hex
        world = len(dtrain.workers)
        root = client.submit(start_collective, job, workers=[dtrain.workers[0]], pure=False).result()
        if args.events:
            futs = [client.submit(event_train, job, root, r, world, options, dtrain._local[a], args.switch_interval,
                                  args.gc, workers=[a], pure=False)
                    for r, a in enumerate(dtrain.workers)]
        else:
            futs = [client.submit(profiled_train, job, root, r, world, options, dtrain._local[a], args.sync_allreduce,
                                  args.cprofile, workers=[a], pure=False)
                    for r, a in enumerate(dtrain.workers)]
        results = client.gather(futs)
        if args.cprofile:
            for r, out in enumerate(results):
                print(f"rank {r}: {out['total']} ms per round ({out['path'] or 'path on rank 0'})\n{out['profile']}")
        else:
            print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
