"""Quickstart: train a binary classifier with daskgb and report speed and quality.

Makes a seeded synthetic data set (200,000 rows x 20 features, numpy), holds
out a test set, trains GBClassifier with the test set as eval_set, and prints
the device used, the fit time and test logloss / AUC / accuracy. Runs on a GPU
when CuPy sees one (device="auto"), else on the CPU.

    python examples/quickstart.py
"""

from __future__ import annotations

import time

import numpy as np

import daskgb
from daskgb.backend import resolve_device

N_ROWS, N_FEATURES, N_TEST = 200_000, 20, 40_000


def make_data(seed: int = 0):
    """A binary task with linear, interaction and threshold effects, some noise and 5% missing values."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    coef = rng.normal(size=8)  # features 12..19 carry no signal
    logit = (
        X[:, :8] @ coef
        + 1.5 * X[:, 8] * X[:, 9]
        + 2.0 * (X[:, 10] > 0.5)
        - np.abs(X[:, 11])
        + rng.logistic(scale=0.5, size=N_ROWS)
    )
    y = (logit > np.median(logit)).astype(np.int64)
    X[rng.random(X.shape) < 0.05] = np.nan
    return X, y


def auc(y, p):
    """Area under the ROC curve (rank statistic; ties get their mean rank)."""
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sorted_p = p[order]
    _, first, counts = np.unique(sorted_p, return_index=True, return_counts=True)
    mean_rank = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(mean_rank, counts)
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return (ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def main():
    X, y = make_data()
    X_train, y_train = X[:-N_TEST], y[:-N_TEST]
    X_test, y_test = X[-N_TEST:], y[-N_TEST:]

    model = daskgb.GBClassifier(n_estimators=100, max_depth=6, device="auto", eval_metric=["logloss", "auc"])
    print(f"daskgb {daskgb.__version__}: {len(y_train):,} training rows x {N_FEATURES} features, "
          f"device={resolve_device(model.device)}")

    start = time.perf_counter()
    model.fit(X_train, y_train, eval_set=[(X_test, y_test)])
    fit_s = time.perf_counter() - start

    p = model.predict_proba(X_test)[:, 1].astype(np.float64)
    eps = 1e-16
    logloss = -np.mean(y_test * np.log(np.maximum(p, eps)) + (1 - y_test) * np.log(np.maximum(1 - p, eps)))
    accuracy = model.score(X_test, y_test)
    history = model.evals_result()["validation_0"]

    print(f"fit: {fit_s:.2f} s for {model.n_estimators} trees of depth {model.max_depth}")
    print(f"test logloss {logloss:.4f}  AUC {auc(y_test, p):.4f}  accuracy {accuracy:.4f}")
    print(f"eval_set history: logloss {history['logloss'][0]:.4f} (round 1) -> {history['logloss'][-1]:.4f} "
          f"(round {len(history['logloss'])})")


if __name__ == "__main__":
    main()
