"""Quickstart: train a binary classifier on a Dask cluster with daskgb.

Starts an embedded cluster (a LocalCUDACluster, one worker per GPU, where
dask-cuda and GPUs are present; a LocalCluster of 2 CPU workers otherwise),
makes a seeded synthetic data set on the workers (200,000 rows x 20 features,
5% missing values), holds out a test set, trains DaskGBClassifier with the test
set as eval_set, and prints the dashboard's and daskgb's page's links, the time the data took
to make, the fit time (from when the workers hold the data) and test logloss / AUC / accuracy.
With --keep-open the cluster stays up after the fit, until Enter is pressed, so that the
printed links (the dashboard, daskgb's page with the fit's learning curves) can be opened.

    python examples/quickstart.py [--keep-open]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

N_TRAIN, N_TEST, N_FEATURES, N_CHUNKS = 200_000, 40_000, 20, 8


def start_cluster():
    """A LocalCUDACluster where GPUs are (and dask-cuda installed), else 2 CPU workers."""
    from distributed import LocalCluster

    from daskgb.arrays import cuda_available

    if cuda_available():
        try:
            from dask_cuda import LocalCUDACluster

            return LocalCUDACluster(), "cuda"
        except ImportError:
            print("GPUs are present but dask-cuda is not installed: using CPU workers")
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True), "cpu"


def make_data(device: str, seed: int = 0):
    """A binary task with linear, interaction and threshold effects, made block by block on the workers."""
    import dask.array as da

    n = N_TRAIN + N_TEST
    if device == "cuda":
        import cupy

        rs = da.random.RandomState(seed, RandomState=cupy.random.RandomState)
    else:
        rs = da.random.RandomState(seed)
    X = rs.normal(size=(n, N_FEATURES), chunks=(n // N_CHUNKS, N_FEATURES)).astype(np.float32)
    coef = [float(c) for c in np.random.default_rng(seed).normal(size=8)]
    logit = sum(X[:, i] * coef[i] for i in range(8)) + 1.5 * X[:, 8] * X[:, 9] + 2.0 * (X[:, 10] > 0.5) - 1.0
    noise = rs.logistic(size=n, chunks=n // N_CHUNKS).astype(np.float32)
    y = (logit + noise > 0).astype(np.float32)
    X = da.where(rs.random_sample(size=X.shape, chunks=X.chunks) < 0.05, np.float32(np.nan), X)
    return X, y


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train a DaskGBClassifier on a local Dask cluster.")
    ap.add_argument("--keep-open", action="store_true",
                    help="keep the cluster (and its dashboard) up after the fit until Enter is pressed")
    args = ap.parse_args(argv)

    import dask
    from distributed import Client, wait

    import daskgb
    import daskgb.dask.dashboard
    from daskgb.dask.watch import live_workers
    from daskgb.metric import auc_of, logloss

    cluster, device = start_cluster()
    with cluster, Client(cluster) as client:
        print(f"Dask dashboard: {client.dashboard_link}")
        # The fit's learning curves, round times and workers (None where the scheduler has no dashboard).
        page = daskgb.dask.dashboard.register(client)
        print(f"daskgb page: {page}")
        print(f"workers: {len(live_workers(client))} ({device})")
        X, y = make_data(device)
        # persist returns at once; the fit's clock starts once the workers hold the data.
        made = time.perf_counter()
        X, y = dask.persist(X, y)
        wait([X, y])
        print(f"data: {time.perf_counter() - made:.1f} s to make {N_TRAIN + N_TEST:,} rows on the workers")
        X_train, y_train = X[:N_TRAIN], y[:N_TRAIN]
        X_test, y_test = X[N_TRAIN:], y[N_TRAIN:]

        clf = daskgb.DaskGBClassifier(n_estimators=100, max_depth=6, learning_rate=0.3, client=client)
        t0 = time.perf_counter()
        clf.fit(X_train, y_train, eval_set=[(X_test, y_test)])
        fit_s = time.perf_counter() - t0

        proba = clf.predict_proba(X_test)[:, 1]
        p, yt = (np.asarray(a.get() if hasattr(a, "get") else a) for a in dask.compute(proba, y_test))
        print(f"fit: {fit_s:.1f} s for {N_TRAIN:,} rows x {N_FEATURES} features, 100 rounds")
        print(f"test logloss {logloss(np, yt, p):.4f}   AUC {auc_of(yt, p):.4f}   "
              f"accuracy {clf.score(X_test, y_test):.4f}")
        history = clf.evals_result()["validation_0"]["logloss"]
        print(f"eval logloss by round: first {history[0]:.4f}, last {history[-1]:.4f}")
        if args.keep_open:
            # The dashboard lives as long as the cluster: held open until the user is done looking.
            print(f"The cluster stays up: open {page or client.dashboard_link}; press Enter to stop it.", flush=True)
            try:
                input()
            except EOFError:  # no terminal to read Enter from (stdin closed): stop now
                pass


if __name__ == "__main__":
    main()
