"""Digests of the models every training path grows, to show a refactor left them bit-identical.

Trains a fixed set of configurations (one or more per training path: depthwise and
lossguide, multiclass, paged with and without sampling, refitted leaves, ranking, eval sets
and early stopping, a custom objective, column sampling, constraints; on a GPU also the
device grower, queued rounds and CUDA graphs) through the public API only, and prints one
line per configuration: its name and the SHA-256 of the model's trees, base score and best
iteration (the model's JSON without its parameters, so that nothing but the trees counts).

Run it on the code before and after a change and compare the outputs; the lines must be
equal. ``--dask`` adds configurations on a 2-worker LocalCluster (CPU).

    python benchmarks/model_digests.py [--device cpu|cuda] [--dask] > digests.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import daskgb  # noqa: E402


def _data(xp, n: int, f: int, seed: int, missing: float = 0.0, classes: int = 2):
    rs = np.random.RandomState(seed)
    X = rs.standard_normal((n, f)).astype(np.float32)
    X[:, 1] = np.round(X[:, 1] * 2)  # a few-valued column
    X[:, 2] = np.abs(X[:, 2]) ** 2  # skew
    if missing:
        X[rs.random_sample((n, f)) < missing] = np.nan
    score = X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) - np.nan_to_num(X[:, 3]) * np.nan_to_num(X[:, 4])
    if classes == 2:
        y = (score + rs.standard_normal(n) * 0.5 > 0).astype(np.float32)
    elif classes > 2:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])).astype(np.float32)
    else:
        y = (score + rs.standard_normal(n) * 0.3).astype(np.float32)
    return xp.asarray(X), xp.asarray(y)


def digest(booster) -> str:
    d = booster.to_dict()
    kept = {k: d[k] for k in ("trees", "tree_info", "base_score", "best_iteration", "best_score")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:20]


def configurations(device: str):
    """(name, params, data options, train options)."""
    base = {"device": device, "max_depth": 6, "eta": 0.3, "seed": 3}
    yield "binary-depthwise", {**base, "objective": "binary:logistic"}, {}, {}
    yield "binary-missing", {**base, "objective": "binary:logistic"}, {"missing": 0.3}, {}
    yield "regression-deep", {**base, "max_depth": 10, "reg_alpha": 0.5, "min_child_weight": 3}, {"classes": 0}, {}
    yield "lossguide", {**base, "objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 31,
                        "max_depth": 0}, {}, {}
    yield "multiclass", {**base, "objective": "multi:softprob", "num_class": 4}, {"classes": 4}, {}
    yield "eval-early-stop", {**base, "objective": "binary:logistic", "eval_metric": "auc"}, {},\
        {"evals": True, "early_stopping_rounds": 3}
    yield "colsample", {**base, "objective": "binary:logistic", "colsample_bytree": 0.8, "colsample_bylevel": 0.7,
                        "colsample_bynode": 0.6}, {}, {}
    yield "colsample-tree-level", {**base, "objective": "binary:logistic", "colsample_bytree": 0.7,
                                   "colsample_bylevel": 0.8}, {}, {}
    yield "constraints", {**base, "objective": "binary:logistic", "monotone_constraints": "(1,0,0,-1,0,0)",
                          "interaction_constraints": "[[0, 1], [2, 3, 4]]"}, {}, {}
    yield "subsample-uniform", {**base, "objective": "binary:logistic", "subsample": 0.6}, {}, {}
    yield "subsample-gradient", {**base, "objective": "binary:logistic", "subsample": 0.5,
                                 "sampling_method": "gradient_based"}, {}, {}
    yield "quantile-refit", {**base, "objective": "reg:quantileerror", "quantile_alpha": [0.2, 0.8]},\
        {"classes": 0}, {}
    yield "absolute-error", {**base, "objective": "reg:absoluteerror"}, {"classes": 0}, {}
    yield "paged-stream", {**base, "objective": "binary:logistic"}, {"budget": 64 * 1024}, {}
    yield "paged-missing", {**base, "objective": "binary:logistic"}, {"budget": 64 * 1024, "missing": 0.3}, {}
    yield "paged-compacted", {**base, "objective": "binary:logistic", "subsample": 0.5}, {"budget": 64 * 1024}, {}
    yield "paged-multiclass-compacted", {**base, "objective": "multi:softmax", "num_class": 3, "subsample": 0.7,
                                         "sampling_method": "gradient_based"}, {"budget": 64 * 1024, "classes": 3},\
        {}
    yield "custom-objective", {**base}, {"classes": 0}, {"obj": True}
    yield "ranking", {**base, "objective": "rank:ndcg"}, {"ranking": True}, {}
    yield "callbacks", {**base, "objective": "binary:logistic"}, {}, {"callback": True}


def _squared(margin, dtrain):
    y = dtrain.get_label()
    return margin - y, margin * 0 + 1


def run_in_process(device: str, rounds: int, n: int):
    import daskgb.callback as cbm

    xp = np
    if device == "cuda":
        import cupy

        xp = cupy
    for name, params, data, options in configurations(device):
        X, y = _data(xp, n, 6, seed=7, missing=data.get("missing", 0.0), classes=data.get("classes", 2))
        kw = {}
        if "budget" in data:
            kw["device_memory_budget"] = data["budget"]
        if data.get("ranking"):
            qid = np.repeat(np.arange(n // 20), 20)[:n]
            kw["qid"] = qid
            y = xp.asarray(np.minimum(4, np.abs(np.asarray(y.get() if hasattr(y, "get") else y)) * 2).astype(
                np.float32))
        dtrain = daskgb.QuantileMatrix(X, y, max_bin=64, **kw)
        t = {}
        if options.get("evals"):
            Xv, yv = _data(xp, n // 4, 6, seed=8)
            t["evals"] = [(daskgb.QuantileMatrix(Xv, yv, ref=dtrain), "valid")]
            t["early_stopping_rounds"] = options["early_stopping_rounds"]
            t["verbose_eval"] = False
        if options.get("obj"):
            t["obj"] = _squared
        if options.get("callback"):
            t["callbacks"] = [cbm.TrainingCallback()]
        booster = daskgb.train(params, dtrain, rounds, **t)
        print(f"{device} {name} {digest(booster)}", flush=True)


def _placed(client, X, y):
    """X and y as dask collections whose i-th half lives on the i-th worker (in address order,
    which is rank order): the same global row order on every run, so sampling draws alike."""
    import dask.array as da

    workers = sorted(client.scheduler_info()["workers"])
    half = X.shape[0] // 2
    xs, ys = [], []
    for i, a in enumerate(workers[:2]):
        rows = slice(i * half, (i + 1) * half if i == 0 else X.shape[0])
        fx, fy = client.scatter([X[rows], y[rows]], workers=[a], broadcast=False)
        xs.append(da.from_delayed(fx, shape=X[rows].shape, dtype=X.dtype))
        ys.append(da.from_delayed(fy, shape=y[rows].shape, dtype=y.dtype))
    return da.concatenate(xs), da.concatenate(ys)


def run_on_dask(rounds: int, n: int):
    import dask.array as da
    from distributed import Client, LocalCluster

    import daskgb.dask as dgb

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        for name, params, data, options in configurations("cpu"):
            if data.get("ranking") or options.get("obj") or options.get("callback"):
                continue
            X, y = _data(np, n, 6, seed=7, missing=data.get("missing", 0.0), classes=data.get("classes", 2))
            dX, dy = _placed(client, X, y)
            kw = {"device_memory_budget": data["budget"]} if "budget" in data else {}
            dtrain = dgb.DaskQuantileMatrix(client, dX, dy, max_bin=64, **kw)
            t = {"verbose_eval": False}
            if options.get("evals"):
                Xv, yv = _data(np, n // 4, 6, seed=8)
                dv = dgb.DaskQuantileMatrix(client, *_placed(client, Xv, yv), ref=dtrain)
                t["evals"] = [(dv, "valid")]
                t["early_stopping_rounds"] = options["early_stopping_rounds"]
            out = dgb.train(client, params, dtrain, rounds, **t)
            print(f"dask2 {name} {digest(out['booster'])}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--rows", type=int, default=4000)
    ap.add_argument("--dask", action="store_true", help="also train on a 2-worker LocalCluster (CPU)")
    args = ap.parse_args(argv)
    run_in_process(args.device, args.rounds, args.rows)
    if args.dask:
        run_on_dask(args.rounds, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
