"""Evaluation metrics on output-space predictions, weighted, with XGBoost's names and formulas.

Each metric is exact over all rows of all workers: the additive ones reduce
their partial sums with the communicator; AUC gathers the rows, because an AUC
of shards is not the AUC of the whole.
"""

from __future__ import annotations

import functools

import numpy as np

from . import ranking
from .arrays import to_host
from .collective import LocalCommunicator


def _weights(xp, y, weight):
    if weight is not None:
        return weight.astype(xp.float64)
    if xp is np:
        return np.ones(y.shape[0], dtype=np.float64)
    from . import device_arrays  # CuPy's ones would be compiled at first use

    return device_arrays.full(y.shape[0], 1.0, xp.float64)


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

# Survival metrics (survival.py): additive, over each row's [lower, upper] interval rather than its label.
SURVIVAL = ("aft-nloglik", "interval-regression-accuracy")

# The additive metrics with kernels of their own on the device (metric_cuda: one launch, exact
# sums); the others run their array steps there.
_DEVICE_ADDITIVE = ("rmse", "logloss", "error", "mae")

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


def _sorted_descending(xp, pred, columns, whole_sums=False):
    """The columns reordered by descending prediction, and each position's flag "the last of
    its tie group". Tie groups are aggregated, so the order within one does not matter; but NaN
    equals nothing, each NaN prediction is a group of its own, and their order does: a stable
    sort keeps them in row order (as metric_cuda's sort keys do). Where the columns' running
    sums are whole numbers (whole_sums: weights 1, labels 0 or 1; such sums are exact in any
    order) and no prediction is NaN, numpy's unstable sort gives the same bits: 1.6 against
    7.1 ms for 50K rows, most of an AUC scored every round."""
    stable = not (whole_sums and not np.isnan(pred).any())  # whole_sums: host rows only
    order = xp.argsort(-pred.astype(xp.float64), kind="stable" if stable else "quicksort")
    p = pred[order]
    last = xp.ones(p.shape[0], dtype=bool)
    last[:-1] = p[1:] != p[:-1]
    return [c[order] for c in columns], last


def _whole_sums(xp, y, w) -> bool:
    """Whether host rows' weights are all 1 and labels all 0 or 1 (checked on the host only: on
    a device the answer would wait for it)."""
    return xp is np and bool((w == 1).all()) and bool(((y == 0) | (y == 1)).all())


def _at_tie_ends(xp, last, values):
    """values at the tie groups' last positions, packed to the front of an array of the same
    length, and the mask of the packed entries: a scatter, not a boolean selection, so that on
    the device nothing waits for the number of groups."""
    n = values.shape[0]
    slot = xp.where(last, xp.cumsum(last) - 1, n)
    packed = xp.zeros(n + 1, dtype=values.dtype)
    packed[slot] = values  # only the unused slot n is written more than once
    return packed[:n], xp.arange(n) < last.sum()


def _previous(xp, v):
    """v shifted one place on, 0 first."""
    out = xp.zeros_like(v)
    out[1:] = v[:-1]
    return out


def _auc_parts(xp, y, pred, w):
    """(area under the ROC curve, positive weight x negative weight) over rows in any order,
    ties counting half (trapezoids over tie groups): AUC = area / product."""
    if y.shape[0] == 0:
        return 0.0, 0.0
    (yy, ww), last = _sorted_descending(xp, pred, [y.astype(xp.float64), w], _whole_sums(xp, y, w))
    tp_all, fp_all = xp.cumsum(ww * yy), xp.cumsum(ww * (1.0 - yy))
    tp, valid = _at_tie_ends(xp, last, tp_all)
    fp, _ = _at_tie_ends(xp, last, fp_all)
    area = xp.where(valid, (fp - _previous(xp, fp)) * (tp + _previous(xp, tp)) / 2.0, 0.0).sum()
    return area, tp_all[-1] * fp_all[-1]


def _aucpr_parts(xp, y, pred, w):
    """(area under the precision-recall curve, 1 if both classes have weight else 0), as
    XGBoost computes it (BinaryPRAUC): between consecutive distinct predictions, precision is
    interpolated non-linearly in recall (Davis and Goadrich), with XGBoost's closed form per segment."""
    if y.shape[0] == 0:
        return 0.0, 0.0
    y = y.astype(xp.float32)
    w = w.astype(xp.float32)
    # XGBoost's sums: float products added in double.
    pos_w = (w * y).astype(xp.float64)
    neg_w = (w * (xp.float32(1.0) - y)).astype(xp.float64)
    total_pos, total_neg = pos_w.sum(), neg_w.sum()
    (pos_s, neg_s), last = _sorted_descending(xp, pred, [pos_w, neg_w], _whole_sums(xp, y, w))
    tp, valid = _at_tie_ends(xp, last, xp.cumsum(pos_s))
    fp, _ = _at_tie_ends(xp, last, xp.cumsum(neg_s))
    tp0, fp0 = _previous(xp, tp), _previous(xp, fp)
    # CalcDeltaPRAUC for every segment (tp0, fp0) -> (tp, fp) at once.
    same = tp == tp0
    both = (total_pos > 0) & (total_neg > 0)
    scale = xp.where(both, total_pos, 1.0)
    h = xp.where(same, 0.0, (fp - fp0) / xp.where(same, 1.0, tp - tp0))
    a = xp.where(same, 1.0, h + 1.0)
    b = xp.where(same, 0.0, (fp0 - h * tp0) / scale)
    pr, pr0 = tp / scale, tp0 / scale
    bb = xp.where(b != 0.0, b, 1.0)  # the log terms are read only where b != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        curved = (pr - pr0 - b / a * (xp.log(a * pr + bb) - xp.log(a * pr0 + bb))) / a
    area = xp.where(valid & both, xp.where(b != 0.0, curved, (pr - pr0) / a), 0.0).sum()
    return xp.minimum(area, 1.0), both.astype(xp.float64)


def _multiclass_auc_parts(xp, y, pred, w):
    """XGBoost's multiclass AUC: each class's one-vs-rest AUC, averaged with the classes'
    weight sums as weights: (sum of AUC x class weight, sum of the class weights) over the
    classes whose AUC is defined."""
    labels = y.astype(xp.int64)
    num = den = xp.zeros((), dtype=xp.float64)
    for c in range(pred.shape[1]):
        is_c = (labels == c).astype(xp.float64)
        area, product = _auc_parts(xp, is_c, pred[:, c], w)
        prevalence = (w * is_c).sum()
        defined = (product > 0) & (prevalence > 0)
        num = num + xp.where(defined, area / xp.where(defined, product, 1.0) * prevalence, 0.0)
        den = den + xp.where(defined, prevalence, 0.0)
    return num, den


def _multiclass_aucpr_parts(xp, y, pred, w):
    """XGBoost's multiclass AUC-PR: the plain mean of each class's one-vs-rest AUC-PR (unlike
    multiclass AUC, not weighted by class; NaN when a class has no rows, as XGBoost)."""
    labels = y.astype(xp.int64)
    num = xp.zeros((), dtype=xp.float64)
    for c in range(pred.shape[1]):
        area, both = _aucpr_parts(xp, (labels == c).astype(xp.float32), pred[:, c], w)
        num = num + xp.where(both > 0, area, np.nan)
    return num / pred.shape[1], xp.ones((), dtype=xp.float64)


def _finish_ratio_or_nan(num, den):
    return float(num / den) if den > 0 else float("nan")


def _host_parts(parts, y, pred, weight):
    """A metric of host arrays (numpy): its (num, den) over these rows."""
    y = np.asarray(y)
    pred = np.asarray(pred)
    w = np.ones(y.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
    return parts(np, y, pred, w)


def auc_of(y, pred, weight=None):
    """Weighted ROC AUC of host arrays; tied predictions count half (trapezoids over tie groups)."""
    return _finish_ratio_or_nan(*_host_parts(_auc_parts, y, pred, weight))


def aucpr_of(y, pred, weight=None):
    """Weighted area under the precision-recall curve of host arrays, as XGBoost computes it."""
    return _finish_ratio_or_nan(*_host_parts(_aucpr_parts, y, pred, weight))


def multiclass_auc_of(y, pred, weight=None):
    """XGBoost's multiclass AUC of host arrays (see _multiclass_auc_parts)."""
    return _finish_ratio_or_nan(*_host_parts(_multiclass_auc_parts, y, pred, weight))


def multiclass_aucpr_of(y, pred, weight=None):
    """XGBoost's multiclass AUC-PR of host arrays (see _multiclass_aucpr_parts)."""
    return _finish_ratio_or_nan(*_host_parts(_multiclass_aucpr_parts, y, pred, weight))


# Metrics of the ranking of all rows, (parts of one output, parts of multiclass outputs,
# finish): each worker's rows are gathered, since AUCs of shards do not add up.
_RANKING = {"auc": (_auc_parts, _multiclass_auc_parts, _finish_ratio_or_nan),
            "aucpr": (_aucpr_parts, _multiclass_aucpr_parts, _finish_ratio_or_nan)}

METRICS = tuple(_ADDITIVE) + SURVIVAL + ("cox-nloglik", "auc", "aucpr", "quantile", "tweedie-nloglik@<rho>", "ndcg[@k][-]", "map[@k][-]",
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


def row_span(comm, n_rows: int) -> tuple[int, ...]:
    """Every worker's count of these rows, in rank order: one host collective, made once per
    matrix by the caller that evaluates it every round (the AUCs gather the rows by it)."""
    if comm.world_size == 1:
        return (int(n_rows),)
    return tuple(int(c) for c in comm.allgather(int(n_rows)))


def _ranking_parts_here(name, xp, y, pred, weight):
    """An AUC's (or cox-nloglik's) (num, den) over rows that are all here."""
    if name == "cox-nloglik":
        from . import survival

        return _pair(xp, survival.cox_nloglik_sums(xp, y, pred))
    if name == "auc" and _on_device_kernels(xp, y, pred, weight):
        from . import metric_cuda

        if y.shape[0] < metric_cuda.MAX_AUC_ROWS:
            return metric_cuda.auc_parts(y, pred, weight)
    one, multiclass, _ = _RANKING[name]
    return _pair(xp, (multiclass if pred.ndim == 2 else one)(xp, y, pred, _weights(xp, y, weight)))


def _ranking_parts(name, xp, comm, y, pred, weight, span=None, root: int = 0):
    """An AUC's (num, den) over every worker's rows, the same on every worker. AUCs of shards do
    not add up (nor do cox-nloglik's, whose risk sets reach across all rows), so the rows travel
    to one rank, which sorts them all; the others receive the two numbers. Nothing moves every
    row to every worker. (cox-nloglik's rows meet in rank order: where rows tie, the sum's
    rounding may differ from one process's in the last bits.)

    On devices whose collective works there (NCCL), each rank packs its (label, weight, preds)
    rows, rank `root` receives them all (collective.gather_to: grouped sends, sized by span, so
    nothing waits), scores them, and one allreduce of (2,) float64 hands its parts to every
    rank (the others add zeros: exact). Per round a rank other than root sends its own rows,
    (2 + outputs) x 4 bytes each; root receives all rows and sorts them (outputs sorts for
    multiclass): its work grows with all rows, every other rank's with its own. EvalSets
    gives each (set, metric) its own root in turn, so several AUCs sort on several ranks.
    Elsewhere the rows go to rank 0 of the host collective (gather_apply), which scores them
    and sends the parts back. span: row_span's answer (None: asked here)."""
    if comm.world_size == 1:
        return _ranking_parts_here(name, xp, y, pred, weight)
    if xp is not np and getattr(comm, "reduces_on_device", False):
        counts = span if span is not None else row_span(comm, y.shape[0])
        n = y.shape[0]
        width = 1 if pred.ndim == 1 else pred.shape[1]
        dtype = xp.result_type(pred.dtype, y.dtype, xp.float32)
        mine = xp.empty((n, width + 2), dtype=dtype)
        mine[:, 0] = y
        mine[:, 1] = 1.0 if weight is None else weight
        mine[:, 2:] = pred.reshape(n, width)
        rows = comm.gather_to(root, mine, counts)
        if comm.rank == root:
            out = rows[:, 2] if pred.ndim == 1 else rows[:, 2:]
            parts = _ranking_parts_here(name, xp, rows[:, 0], out, rows[:, 1])
        else:
            parts = xp.zeros(2, dtype=xp.float64)
        return comm.allreduce(parts)
    mine = (to_host(y), to_host(pred), None if weight is None else to_host(weight))
    return xp.asarray(comm.gather_apply(mine, functools.partial(_parts_of_gathered, name)))


def _parts_of_gathered(name, parts):
    """An AUC's (num, den) of every rank's host (y, pred, weight), concatenated in rank order."""
    ys, ps, ws = zip(*parts)
    w = None if all(v is None for v in ws) else np.concatenate(
        [np.ones(len(yy), np.float32) if v is None else v for yy, v in zip(ys, ws)])
    return _ranking_parts_here(name, np, np.concatenate(ys), np.concatenate(ps), w)


def _on_device_kernels(xp, y, pred, weight) -> bool:
    """Whether metric_cuda's kernels take these rows: device arrays of one output per row, float32
    as training makes them (the kernels' terms convert float32 to double as numpy's do)."""
    return xp is not np and pred.ndim == 1 and all(
        a is None or a.dtype == np.float32 for a in (y, pred, weight))


def _pair(xp, parts):
    """(num, den) as one (2,) float64 array (metric_cuda's parts are one already)."""
    if getattr(parts, "shape", None) == (2,) and parts.dtype == np.float64:
        return parts
    parts = [xp.asarray(v, dtype=xp.float64) for v in parts]
    if xp is np:
        return np.stack(parts)
    from . import device_arrays  # CuPy's stack would be compiled at first use

    return device_arrays.stack(parts)


def _reduce(xp, comm, parts):
    """The (2,) float64 sums of every worker's (num, den), where the arrays are when the
    collective sums there, else on the host."""
    sums = _pair(xp, parts)
    if comm.world_size == 1:
        return sums
    if xp is not np and not getattr(comm, "reduces_on_device", False):
        sums = to_host(sums)
    return comm.allreduce(sums)


def metric_parts(name: str, xp, y, pred, weight=None, comm=None, *, quantile_alpha=None, groups=None,
                 ndcg_exp_gain: bool = True, rank_default_k: int | None = ranking.DEFAULT_METRIC_K, span=None,
                 root: int = 0, label_bounds=None, aft=("normal", 1.0)):
    """The metric over the rows of every worker as (2,) float64 (num, den), the same on every
    worker, where the arrays are (nothing waits for the device): finish(name, parts) is the value.
    Arguments as evaluate's; span: row_span's answer for these rows, and root: the rank that
    gathers them (modulo the ranks), for the AUCs; label_bounds: the rows' (lower, upper)
    survival intervals and aft: (distribution, scale), for the survival metrics."""
    comm = comm or LocalCommunicator()
    if name in SURVIVAL:
        from . import survival

        if label_bounds is None or label_bounds[0] is None:
            raise ValueError(f"eval_metric {name!r} reads each row's survival interval: the matrix needs "
                             "label_lower_bound and label_upper_bound")
        return _reduce(xp, comm, survival.metric_sums(name, xp, label_bounds[0], label_bounds[1], pred, weight,
                                                      aft[0], aft[1]))
    if ranking.parse_metric(name) is not None:
        g = _rank_groups(name, y, groups, comm)
        return _reduce(xp, comm, ranking.metric_sums(name, xp, y, pred, g, ndcg_exp_gain, rank_default_k))
    if name in _RANKING or name == "cox-nloglik":
        return _ranking_parts(name, xp, comm, y, pred, weight, span, root % comm.world_size)
    if name in _DEVICE_ADDITIVE and _on_device_kernels(xp, y, pred, weight):
        from . import metric_cuda

        return _reduce(xp, comm, metric_cuda.additive_parts(name, y, pred, weight))
    return _reduce(xp, comm, _additive(name, quantile_alpha)[0](xp, y, pred, _weights(xp, y, weight)))


def _additive(name, quantile_alpha):
    """(partial sums, finish) of an additive metric."""
    if name == "quantile":
        if quantile_alpha is None:
            raise ValueError("eval_metric 'quantile' needs quantile_alpha")
        return _quantile_sums(quantile_alpha), _mean
    if name.startswith("tweedie-nloglik@"):
        return _tweedie_sums(float(name.split("@", 1)[1])), _mean
    partial, finish = _ADDITIVE.get(name, (None, None))
    if partial is None:
        raise ValueError(f"unknown eval_metric {name!r}; one of {sorted(METRICS)}")
    return partial, finish


def finish(name: str, parts) -> float:
    """The metric's value from metric_parts' (num, den) (host numbers)."""
    num, den = np.float64(parts[0]), np.float64(parts[1])
    if ranking.parse_metric(name) is not None:
        return float(num / den) if den > 0 else 0.0
    if name in _RANKING:
        return _RANKING[name][2](num, den)
    if name in _ADDITIVE:
        return _ADDITIVE[name][1](num, den)
    return _mean(num, den)  # quantile, tweedie-nloglik@rho


def evaluate(name: str, xp, y, pred, weight=None, comm=None, *, quantile_alpha=None, groups=None,
             ndcg_exp_gain: bool = True, rank_default_k: int | None = ranking.DEFAULT_METRIC_K) -> float:
    """The metric over the rows of every worker (comm=None: this process's rows).

    quantile_alpha: the alpha of the ``quantile`` (pinball loss) metric.

    Ranking metrics (ndcg, map, pre and their @k / - forms) score each query group
    (``groups``, a ranking.Groups; None: all rows one query) and average them with the
    groups' weights; ``weight`` (per row) is not theirs to read. A ranking metric named
    without @k is cut at rank_default_k (XGBoost's 32; None: whole lists).
    """
    parts = metric_parts(name, xp, y, pred, weight, comm, quantile_alpha=quantile_alpha, groups=groups,
                         ndcg_exp_gain=ndcg_exp_gain, rank_default_k=rank_default_k)
    return finish(name, to_host(parts))


def rmse(xp, y, pred, weight=None):
    return evaluate("rmse", xp, y, pred, weight)


def logloss(xp, y, pred, weight=None):
    return evaluate("logloss", xp, y, pred, weight)


def error(xp, y, pred, weight=None):
    return evaluate("error", xp, y, pred, weight)


def auc(xp, y, pred, weight=None):
    return evaluate("auc", xp, y, pred, weight)
