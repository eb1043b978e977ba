"""Evaluation metrics on output-space predictions, weighted, with XGBoost's names and formulas.

Each metric is exact over all rows of all workers: the additive ones reduce
their partial sums with the communicator; AUC gathers the rows, because an AUC
of shards is not the AUC of the whole.
"""

from __future__ import annotations

import numpy as np

from . import ranking
from .arrays import to_host
from .collective import LocalCommunicator


def _weights(xp, y, weight):
    return xp.ones(y.shape[0], dtype=xp.float64) if weight is None else weight.astype(xp.float64)


def _rmse_sums(xp, y, pred, w):
    d = pred.astype(xp.float64) - y.astype(xp.float64)
    return (w * d * d).sum(), w.sum()


def _logloss_sums(xp, y, pred, w):
    eps = 1e-16
    p = pred.astype(xp.float64)
    yy = y.astype(xp.float64)
    loss = -(yy * xp.log(xp.maximum(p, eps)) + (1.0 - yy) * xp.log(xp.maximum(1.0 - p, eps)))
    return (w * loss).sum(), w.sum()


def _error_sums(xp, y, pred, w):
    wrong = (pred > 0.5).astype(xp.float64) != y.astype(xp.float64)
    return (w * wrong).sum(), w.sum()


def _mae_sums(xp, y, pred, w):
    return (w * xp.abs(pred.astype(xp.float64) - y.astype(xp.float64))).sum(), w.sum()


# Lanczos approximation (g = 7, 9 terms): log-gamma to ~1e-15 for x >= 0.5, on numpy and cupy alike.
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _lgamma(xp, x):
    x = x - 1.0
    a = xp.full(x.shape, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], start=1):
        a = a + c / (x + i)
    t = x + 7.5
    return 0.5 * np.log(2 * np.pi) + (x + 0.5) * xp.log(t) - t + xp.log(a)


def _poisson_nloglik_sums(xp, y, pred, w):
    yy = y.astype(xp.float64)
    p = xp.maximum(pred.astype(xp.float64), 1e-16)
    return (w * (_lgamma(xp, yy + 1.0) + p - xp.log(p) * yy)).sum(), w.sum()


def _gamma_nloglik_sums(xp, y, pred, w):
    # XGBoost's gamma density with psi = 1: theta = -1/p, so -(y*theta + log(-theta)) = y/p + log(p)
    # (the other terms, log(y/psi) - log(y) - log gamma(1/psi), cancel).
    p = pred.astype(xp.float64)
    return (w * (y.astype(xp.float64) / p + xp.log(p))).sum(), w.sum()


def _gamma_deviance_sums(xp, y, pred, w):
    eps = 1e-6
    ratio = (y.astype(xp.float64) + eps) / (pred.astype(xp.float64) + eps)
    return (w * (ratio - xp.log(ratio) - 1.0)).sum(), w.sum()


def _tweedie_sums(rho):
    def sums(xp, y, pred, w):
        p = pred.astype(xp.float64)
        yy = y.astype(xp.float64)
        a = yy * xp.exp((1.0 - rho) * xp.log(p)) / (1.0 - rho)
        b = xp.exp((2.0 - rho) * xp.log(p)) / (2.0 - rho)
        return (w * (b - a)).sum(), w.sum()

    return sums


def _mphe_sums(xp, y, pred, w, slope=1.0):
    z = pred.astype(xp.float64) - y.astype(xp.float64)
    return (w * (slope * slope * (xp.sqrt(1.0 + (z / slope) ** 2) - 1.0))).sum(), w.sum()


def _quantile_sums(alpha):
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float32)).astype(np.float64)

    def sums(xp, y, pred, w):
        # XGBoost's pinball loss: alpha * d above the prediction, (alpha - 1) * d below, d = y - pred;
        # with K alphas, predictions (n, K), the mean over rows and alphas.
        d = y.astype(xp.float64)[:, None] - pred.astype(xp.float64).reshape(y.shape[0], -1)
        a = xp.asarray(alphas)[None, :]
        return (w[:, None] * xp.where(d >= 0, a * d, (a - 1.0) * d)).sum(), w.sum() * alphas.size

    return sums


def _mlogloss_sums(xp, y, pred, w):
    eps = 1e-16
    p = pred[xp.arange(y.shape[0]), y.astype(xp.int64)].astype(xp.float64)
    return (w * -xp.log(xp.maximum(p, eps))).sum(), w.sum()


def _merror_sums(xp, y, pred, w):
    # argmax takes the first of tied maxima, as XGBoost's FindMaxIndex does.
    wrong = (xp.argmax(pred, axis=1) != y.astype(xp.int64)).astype(xp.float64)
    return (w * wrong).sum(), w.sum()


def _mean(num, den):
    return float(num / den)


_ADDITIVE = {
    "rmse": (_rmse_sums, lambda num, den: float(np.sqrt(num / den))),
    "mae": (_mae_sums, _mean),
    "logloss": (_logloss_sums, _mean),
    "error": (_error_sums, _mean),
    "poisson-nloglik": (_poisson_nloglik_sums, _mean),
    "gamma-nloglik": (_gamma_nloglik_sums, _mean),
    "gamma-deviance": (_gamma_deviance_sums, lambda num, den: float(2.0 * num / den)),
    "mphe": (_mphe_sums, _mean),
    "mlogloss": (_mlogloss_sums, _mean),
    "merror": (_merror_sums, _mean),
}

# Metrics of (n, K) class probabilities; the others read one output per row.
MULTICLASS = ("mlogloss", "merror", "auc", "aucpr")


def check_metric(name: str, n_groups: int, quantile_alpha=None) -> None:
    """Raise ValueError if metric `name` cannot evaluate a model with n_groups outputs per row."""
    if name == "quantile":
        n_alphas = int(np.size(quantile_alpha))
        if n_alphas != n_groups:
            raise ValueError(f"eval_metric 'quantile' has {n_alphas} quantile_alpha value(s) for a model of "
                             f"{n_groups} output(s) per row")
        return
    if n_groups > 1 and name not in MULTICLASS:
        raise ValueError(f"eval_metric {name!r} is for single-output models; a multiclass model takes "
                         f"{list(MULTICLASS)}")
    if n_groups == 1 and name in ("mlogloss", "merror"):
        raise ValueError(f"eval_metric {name!r} is for multiclass models (multi:softprob / multi:softmax); "
                         "use logloss / error for binary ones")


def auc_of(y, pred, weight=None):
    """Weighted ROC AUC of host arrays; tied predictions count half (trapezoids over tie groups)."""
    y = np.asarray(y, dtype=np.float64)
    w = np.ones(y.size) if weight is None else np.asarray(weight, dtype=np.float64)
    order = np.argsort(-np.asarray(pred, dtype=np.float64), kind="stable")
    p, yy, ww = np.asarray(pred)[order], y[order], w[order]
    tp = np.cumsum(ww * yy)
    fp = np.cumsum(ww * (1.0 - yy))
    last = np.concatenate([p[1:] != p[:-1], [True]]) if p.size else np.zeros(0, bool)
    tp, fp = tp[last], fp[last]
    total_p = float(tp[-1]) if tp.size else 0.0
    total_n = float(fp[-1]) if fp.size else 0.0
    if total_p <= 0 or total_n <= 0:
        return float("nan")
    tp0 = np.concatenate([[0.0], tp[:-1]])
    fp0 = np.concatenate([[0.0], fp[:-1]])
    return float(((fp - fp0) * (tp + tp0) / 2.0).sum() / (total_p * total_n))


def aucpr_of(y, pred, weight=None):
    """Weighted area under the precision-recall curve of host arrays, as XGBoost computes it
    (BinaryPRAUC): between consecutive distinct predictions, precision is interpolated
    non-linearly in recall (Davis and Goadrich), with XGBoost's closed form per segment."""
    y = np.asarray(y, dtype=np.float32)
    w = np.ones(y.size, np.float32) if weight is None else np.asarray(weight, dtype=np.float32)
    # XGBoost's sums: float products added in double.
    pos_w = (w * y).astype(np.float64)
    neg_w = (w * (np.float32(1.0) - y)).astype(np.float64)
    total_pos, total_neg = float(pos_w.sum()), float(neg_w.sum())
    if total_pos <= 0 or total_neg <= 0:
        return float("nan")
    order = np.argsort(-np.asarray(pred, dtype=np.float64), kind="stable")
    p = np.asarray(pred)[order]
    tp = np.cumsum(pos_w[order])
    fp = np.cumsum(neg_w[order])
    last = np.concatenate([p[1:] != p[:-1], [True]])
    tp, fp = tp[last], fp[last]
    tp0 = np.concatenate([[0.0], tp[:-1]])
    fp0 = np.concatenate([[0.0], fp[:-1]])
    # CalcDeltaPRAUC for every segment (tp0, fp0) -> (tp, fp) at once.
    same = tp == tp0
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(same, 0.0, (fp - fp0) / (tp - tp0))
        a = np.where(same, 1.0, h + 1.0)
        b = np.where(same, 0.0, (fp0 - h * tp0) / total_pos)
        pr, pr0 = tp / total_pos, tp0 / total_pos
        curved = (pr - pr0 - b / a * (np.log(a * pr + b) - np.log(a * pr0 + b))) / a
        area = np.where(b != 0.0, curved, (pr - pr0) / a)
    return float(min(area.sum(), 1.0))


def multiclass_auc_of(y, pred, weight=None):
    """XGBoost's multiclass AUC: each class's one-vs-rest AUC, averaged with the classes'
    weight sums as weights."""
    y = np.asarray(y).astype(np.int64)
    w = np.ones(y.size) if weight is None else np.asarray(weight, dtype=np.float64)
    total, area = 0.0, 0.0
    for c in range(pred.shape[1]):
        prevalence = float(w[y == c].sum())
        if prevalence <= 0:
            continue
        a = auc_of((y == c).astype(np.float64), pred[:, c], w)
        if not np.isnan(a):
            area += a * prevalence
            total += prevalence
    return float(area / total) if total > 0 else float("nan")


def multiclass_aucpr_of(y, pred, weight=None):
    """XGBoost's multiclass AUC-PR: the plain mean of each class's one-vs-rest AUC-PR (unlike
    multiclass AUC, not weighted by class; NaN when a class has no rows, as XGBoost)."""
    y = np.asarray(y).astype(np.int64)
    return float(np.mean([aucpr_of((y == c).astype(np.float32), pred[:, c], weight) for c in range(pred.shape[1])]))


# Metrics of the ranking of all rows: each worker's rows are gathered, since they do not add up.
_RANKING = {"auc": auc_of, "aucpr": aucpr_of}

METRICS = tuple(_ADDITIVE) + ("auc", "aucpr", "quantile", "tweedie-nloglik@<rho>", "ndcg[@k][-]", "map[@k][-]",
                              "pre[@k][-]")


def _rank_groups(name, y, groups, comm):
    """The query groups a ranking metric scores: the matrix's, or all rows as one group (XGBoost's
    reading of data without query ids), which only one process can hold."""
    if groups is not None:
        return groups
    if comm.world_size > 1:
        raise ValueError(f"eval_metric {name!r} needs query groups (qid=) when the rows are spread over "
                         "several workers")
    return ranking.Groups.single(int(y.shape[0]))


def check_labels(name: str, xp, y, ndcg_exp_gain: bool = True, groups=None, comm=None) -> None:
    """Raise ValueError if metric `name` cannot score these labels (ranking metrics check them)."""
    if name in _RANKING and groups is not None:
        # XGBoost scores AUC and AUC-PR query by query on ranking data, which is not built here.
        raise ValueError(f"eval_metric {name!r} on data with query groups (qid= or group=) is not supported; "
                         "use ndcg, map or pre")
    if ranking.parse_metric(name) is not None:
        _rank_groups(name, y, groups, comm or LocalCommunicator())
        ranking.check_metric_labels(name, xp, y, ndcg_exp_gain)


def evaluate(name: str, xp, y, pred, weight=None, comm=None, *, quantile_alpha=None, groups=None,
             ndcg_exp_gain: bool = True, rank_default_k: int | None = ranking.DEFAULT_METRIC_K) -> float:
    """The metric over the rows of every worker (comm=None: this process's rows).

    quantile_alpha: the alpha of the ``quantile`` (pinball loss) metric.

    Ranking metrics (ndcg, map, pre and their @k / - forms) score each query group
    (``groups``, a ranking.Groups; None: all rows one query) and average them with the
    groups' weights; ``weight`` (per row) is not theirs to read. A ranking metric named
    without @k is cut at rank_default_k (XGBoost's 32; None: whole lists).
    """
    comm = comm or LocalCommunicator()
    if ranking.parse_metric(name) is not None:
        g = _rank_groups(name, y, groups, comm)
        num, den = ranking.metric_sums(name, xp, y, pred, g, ndcg_exp_gain, rank_default_k)
        sums = comm.allreduce(np.array([num, den], dtype=np.float64))
        return float(sums[0] / sums[1]) if sums[1] > 0 else 0.0
    if name in _RANKING:
        parts = comm.allgather((to_host(y), to_host(pred), None if weight is None else to_host(weight)))
        ys, ps, ws = zip(*parts)
        w = None if all(v is None for v in ws) else np.concatenate(
            [np.ones(len(yy), np.float32) if v is None else v for yy, v in zip(ys, ws)])
        y, pred = np.concatenate(ys), np.concatenate(ps)
        if pred.ndim == 2:
            return (multiclass_aucpr_of if name == "aucpr" else multiclass_auc_of)(y, pred, w)
        return _RANKING[name](y, pred, w)
    if name == "quantile":
        if quantile_alpha is None:
            raise ValueError("eval_metric 'quantile' needs quantile_alpha")
        partial, finish = _quantile_sums(quantile_alpha), _mean
    elif name.startswith("tweedie-nloglik@"):
        partial, finish = _tweedie_sums(float(name.split("@", 1)[1])), _mean
    else:
        partial, finish = _ADDITIVE.get(name, (None, None))
    if partial is None:
        raise ValueError(f"unknown eval_metric {name!r}; one of {sorted(METRICS)}")
    num, den = partial(xp, y, pred, _weights(xp, y, weight))
    sums = comm.allreduce(np.array([float(num), float(den)], dtype=np.float64))
    return finish(sums[0], sums[1])


def rmse(xp, y, pred, weight=None):
    return evaluate("rmse", xp, y, pred, weight)


def logloss(xp, y, pred, weight=None):
    return evaluate("logloss", xp, y, pred, weight)


def error(xp, y, pred, weight=None):
    return evaluate("error", xp, y, pred, weight)


def auc(xp, y, pred, weight=None):
    return evaluate("auc", xp, y, pred, weight)
