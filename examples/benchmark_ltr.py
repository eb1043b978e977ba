"""Learning-to-rank benchmark shaped like Yahoo! LTR set 1: daskgb against XGBoost `hist`, rank:ndcg, same run.

    python examples/benchmark_ltr.py                                   # ~470K x 700, ~20K queries, on the GPU
    python examples/benchmark_ltr.py --queries 500 --features 50 --rounds 20 --device cpu

Data are made on the device from a seed: queries of 1 to 139 documents (23.7 on
average, as in Yahoo set 1), 700 features in [0, 1] of which about 40% are 0
(Yahoo's missing), graded relevance 0-4 in Yahoo's proportions (26/36/28/7/2 %)
from a per-query latent score of 20 features plus noise. Both libraries train
rank:ndcg (topk pairs, k = 32) with the same parameters on the same device; a
held-out set of --test-queries queries scores NDCG@10 (XGBoost's definition,
through daskgb.metric for both models). Prints each library's quantisation and
training time, time per round, NDCG@10, and the ratio of training times; writes
the same as JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# Yahoo! LTR set 1: relevance grades 0-4 in these proportions; queries of 1-139 documents.
GRADE_SHARES = (0.26, 0.36, 0.28, 0.07, 0.03)
MAX_QUERY_SIZE = 139


def make_ltr(xp, n_queries: int, n_features: int, mean_docs: float, seed: int):
    """(X float32 (n, F), y float32 (n,), qid int64 (n,)) on xp's device, deterministic for a seed."""
    rs = xp.random.RandomState(seed)
    sizes = xp.clip(1 + rs.poisson(mean_docs - 1, n_queries), 1, MAX_QUERY_SIZE).astype(xp.int64)
    n = int(sizes.sum())
    ends = xp.cumsum(sizes)
    qid = xp.searchsorted(ends, xp.arange(n, dtype=xp.int64), side="right").astype(xp.int64)
    X = rs.random_sample((n, n_features)).astype(xp.float32)
    X = xp.round(X ** 2 * 64) / 64  # skewed, coarse values: most features bin exactly
    X[rs.random_sample((n, n_features)) < 0.4] = 0.0
    informative = min(20, n_features)
    w = rs.standard_normal(informative).astype(xp.float32)
    query_shift = rs.standard_normal(n_queries).astype(xp.float32)[qid]
    score = X[:, :informative] @ w + 0.5 * xp.sin(6 * X[:, 0] * X[:, 1]) + 0.5 * query_shift
    score = score + 1.5 * rs.standard_normal(n).astype(xp.float32)
    cut = xp.asarray(np.cumsum(GRADE_SHARES)[:-1])
    thresholds = xp.quantile(score, cut)
    y = xp.searchsorted(thresholds, score).astype(xp.float32)
    return xp.ascontiguousarray(X), y, qid


def sync(xp):
    if xp is not np:
        xp.cuda.runtime.deviceSynchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--test-queries", type=int, default=2_000)
    ap.add_argument("--features", type=int, default=700)
    ap.add_argument("--mean-docs", type=float, default=23.7)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=2011)
    ap.add_argument("--skip-xgboost", action="store_true")
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args()

    import daskgb
    from daskgb.backend import get_backend, resolve_device
    from daskgb.metric import evaluate
    from daskgb.ranking import groups_from_qid

    device = resolve_device(args.device)
    xp = get_backend(device).xp
    X, y, qid = make_ltr(xp, args.queries + args.test_queries, args.features, args.mean_docs, args.seed)
    split = int(xp.searchsorted(qid, xp.asarray(args.queries)))
    Xtr, ytr, qtr = X[:split], y[:split], qid[:split]
    Xte, yte, qte = X[split:], y[split:], qid[split:]
    test_groups = groups_from_qid(qte, int(yte.shape[0]))
    params = {
        "objective": "rank:ndcg",
        "max_depth": args.depth,
        "eta": args.eta,
        "max_bin": args.max_bin,
        "device": device,
    }
    res = {"rows": split, "queries": args.queries, "features": args.features, "rounds": args.rounds,
           "depth": args.depth, "device": device, "test_rows": int(yte.shape[0])}

    def ndcg10(pred):
        return evaluate("ndcg@10", xp, yte, xp.asarray(pred), groups=test_groups)

    # Untimed warm-up on the first queries: compiles daskgb's CUDA kernels and XGBoost's lazy
    # initialisation, so that the timings below measure the work.
    warm = int(xp.searchsorted(qtr, xp.asarray(min(args.queries, 2000))))
    daskgb.train(params, daskgb.QuantileMatrix(Xtr[:warm], ytr[:warm], qid=qtr[:warm], max_bin=args.max_bin,
                                               device=device), 2, verbose_eval=False)
    if not args.skip_xgboost:
        import xgboost as xgb

        xgb_params = {**params, "tree_method": "hist", "device": "cuda" if device == "cuda" else "cpu"}
        xgb.train(xgb_params, xgb.QuantileDMatrix(Xtr[:warm], ytr[:warm], qid=qtr[:warm], max_bin=args.max_bin), 2)
    sync(xp)
    t0 = time.perf_counter()
    dtrain = daskgb.QuantileMatrix(Xtr, ytr, qid=qtr, max_bin=args.max_bin, device=device)
    sync(xp)
    t1 = time.perf_counter()
    booster = daskgb.train(params, dtrain, args.rounds, verbose_eval=False)
    sync(xp)
    t2 = time.perf_counter()
    res["daskgb"] = {"quantise_s": t1 - t0, "train_s": t2 - t1, "ms_per_round": 1e3 * (t2 - t1) / args.rounds,
                     "ndcg@10": ndcg10(booster.predict(Xte)), "ellpack_mb": dtrain.ellpack.nbytes / 1e6}
    del dtrain

    if not args.skip_xgboost:
        sync(xp)
        t0 = time.perf_counter()
        dx = xgb.QuantileDMatrix(Xtr, ytr, qid=qtr, max_bin=args.max_bin)
        sync(xp)
        t1 = time.perf_counter()
        bx = xgb.train(xgb_params, dx, args.rounds)
        sync(xp)
        t2 = time.perf_counter()
        res["xgboost"] = {"version": xgb.__version__, "quantise_s": t1 - t0, "train_s": t2 - t1,
                          "ms_per_round": 1e3 * (t2 - t1) / args.rounds, "ndcg@10": ndcg10(bx.inplace_predict(Xte))}
        res["train_time_ratio"] = res["daskgb"]["train_s"] / res["xgboost"]["train_s"]
        res["ndcg@10_diff"] = res["daskgb"]["ndcg@10"] - res["xgboost"]["ndcg@10"]

    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
