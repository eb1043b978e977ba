"""Evaluation metrics on output-space predictions, weighted, with XGBoost's names and formulas."""

from __future__ import annotations

import numpy as np


def _weights(xp, y, weight):
    return xp.ones(y.shape[0], dtype=xp.float64) if weight is None else weight.astype(xp.float64)


def rmse(xp, y, pred, weight=None):
    w = _weights(xp, y, weight)
    d = pred.astype(xp.float64) - y.astype(xp.float64)
    return float(xp.sqrt((w * d * d).sum() / w.sum()))


def logloss(xp, y, pred, weight=None):
    w = _weights(xp, y, weight)
    eps = 1e-16
    p = pred.astype(xp.float64)
    yy = y.astype(xp.float64)
    loss = -(yy * xp.log(xp.maximum(p, eps)) + (1.0 - yy) * xp.log(xp.maximum(1.0 - p, eps)))
    return float((w * loss).sum() / w.sum())


def error(xp, y, pred, weight=None):
    w = _weights(xp, y, weight)
    wrong = (pred > 0.5).astype(xp.float64) != y.astype(xp.float64)
    return float((w * wrong).sum() / w.sum())


def auc(xp, y, pred, weight=None):
    """Weighted ROC AUC; tied predictions count half (trapezoids over tie groups)."""
    w = _weights(xp, y, weight)
    order = xp.argsort(-pred.astype(xp.float64), kind="stable") if xp is np else xp.argsort(-pred.astype(xp.float64))
    p, yy, ww = pred[order], y[order].astype(xp.float64), w[order]
    tp = xp.cumsum(ww * yy)
    fp = xp.cumsum(ww * (1.0 - yy))
    # Keep the last position of each group of equal predictions.
    last = xp.concatenate([p[1:] != p[:-1], xp.ones(1, dtype=bool)]) if p.shape[0] else p.astype(bool)
    tp, fp = tp[last], fp[last]
    total_p, total_n = float(tp[-1]) if tp.shape[0] else 0.0, float(fp[-1]) if fp.shape[0] else 0.0
    if total_p <= 0 or total_n <= 0:
        return float("nan")
    tp0 = xp.concatenate([xp.zeros(1), tp[:-1]])
    fp0 = xp.concatenate([xp.zeros(1), fp[:-1]])
    area = ((fp - fp0) * (tp + tp0) / 2.0).sum()
    return float(area / (total_p * total_n))


METRICS = {"rmse": rmse, "logloss": logloss, "error": error, "auc": auc}


def evaluate(name: str, xp, y, pred, weight=None) -> float:
    try:
        fn = METRICS[name]
    except KeyError:
        raise ValueError(f"unknown eval_metric {name!r}; one of {sorted(METRICS)}") from None
    return fn(xp, y, pred, weight)
