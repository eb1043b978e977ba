"""Survival analysis: the accelerated failure time objective (survival:aft) and its metrics.

Each row's label is an interval [lower, upper] of its survival time (XGBoost's
label_lower_bound / label_upper_bound): lower == upper for an observed time, upper = inf for
a right-censored one, lower = 0 for a left-censored one. The margin is the predicted log
time; the noise ``(log t - margin) / scale`` follows a normal, logistic or extreme-value
distribution (aft_loss_distribution, aft_loss_distribution_scale).

The loss, gradient and hessian are XGBoost's (src/common/survival_util.h and
probability_distribution.h, after Barnwal, Cho and Hocking, arXiv:2006.04920): computed in
float64 from the float32 bounds and margins, the gradient clipped to [-15, 15], the hessian to
[1e-16, 15], and each replaced by its limit where the denominator vanishes (a margin far
outside the interval). Array code for numpy or CuPy (erf: scipy's or CuPy's).
"""

from __future__ import annotations

import math

import numpy as np

from .arrays import to_host
from .objective import Objective

DISTRIBUTIONS = ("normal", "logistic", "extreme")
MIN_GRAD, MAX_GRAD, MIN_HESS, MAX_HESS, EPS = -15.0, 15.0, 1e-16, 15.0, 1e-12
_UNCENSORED, _RIGHT, _LEFT, _INTERVAL = 0, 1, 2, 3


def _erf(xp, z):
    if xp is not np:
        from cupyx.scipy.special import erf

        return erf(z)
    try:
        from scipy.special import erf
    except ImportError:  # scipy is not a dependency: the slow, exact way
        return np.vectorize(math.erf, otypes=[np.float64])(z)
    return erf(z)


class _Normal:
    @staticmethod
    def pdf(xp, z):
        return xp.exp(-z * z / 2.0) / math.sqrt(2.0 * math.pi)

    @staticmethod
    def cdf(xp, z):
        return 0.5 * (1 + _erf(xp, z / math.sqrt(2.0)))

    @classmethod
    def grad_pdf(cls, xp, z):
        return -z * cls.pdf(xp, z)

    @classmethod
    def hess_pdf(cls, xp, z):
        return (z * z - 1.0) * cls.pdf(xp, z)


class _Logistic:
    @staticmethod
    def pdf(xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            d = 1 + w
            return xp.where(xp.isinf(w) | xp.isinf(w * w), 0.0, w / (d * d))

    @staticmethod
    def cdf(xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            return xp.where(xp.isinf(w), 1.0, w / (1 + w))

    @classmethod
    def grad_pdf(cls, xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            return xp.where(xp.isinf(w), 0.0, cls.pdf(xp, z) * (1 - w) / (1 + w))

    @classmethod
    def hess_pdf(cls, xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            return xp.where(xp.isinf(w) | xp.isinf(w * w), 0.0,
                            cls.pdf(xp, z) * (w * w - 4 * w + 1) / ((1 + w) * (1 + w)))


class _Extreme:
    @staticmethod
    def pdf(xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            return xp.where(xp.isinf(w), 0.0, w * xp.exp(-w))

    @staticmethod
    def cdf(xp, z):
        with np.errstate(over="ignore"):
            return 1 - xp.exp(-xp.exp(z))

    @classmethod
    def grad_pdf(cls, xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            return xp.where(xp.isinf(w), 0.0, (1 - w) * cls.pdf(xp, z))

    @classmethod
    def hess_pdf(cls, xp, z):
        with np.errstate(over="ignore", invalid="ignore"):
            w = xp.exp(z)
            return xp.where(xp.isinf(w) | xp.isinf(w * w), 0.0, (w * w - 3 * w + 1) * cls.pdf(xp, z))


_DIST = {"normal": _Normal, "logistic": _Logistic, "extreme": _Extreme}


def _limits(name: str, sigma: float):
    """XGBoost's GetLimitGradAtInfPred / GetLimitHessAtInfPred: {censoring: ((grad if z > 0,
    grad otherwise), (hess if z > 0, hess otherwise))}."""
    s2 = 1.0 / (sigma * sigma)
    if name == "normal":
        return {_UNCENSORED: ((MIN_GRAD, MAX_GRAD), (s2, s2)), _RIGHT: ((MIN_GRAD, 0.0), (s2, MIN_HESS)),
                _LEFT: ((0.0, MAX_GRAD), (MIN_HESS, s2)), _INTERVAL: ((MIN_GRAD, MAX_GRAD), (s2, s2))}
    if name == "logistic":
        g = 1.0 / sigma
        return {_UNCENSORED: ((-g, g), (MIN_HESS, MIN_HESS)), _RIGHT: ((-g, 0.0), (MIN_HESS, MIN_HESS)),
                _LEFT: ((0.0, g), (MIN_HESS, MIN_HESS)), _INTERVAL: ((-g, g), (MIN_HESS, MIN_HESS))}
    g = 1.0 / sigma
    return {_UNCENSORED: ((MIN_GRAD, g), (MAX_HESS, MIN_HESS)), _RIGHT: ((MIN_GRAD, 0.0), (MAX_HESS, MIN_HESS)),
            _LEFT: ((0.0, g), (MIN_HESS, MIN_HESS)), _INTERVAL: ((MIN_GRAD, g), (MAX_HESS, MIN_HESS))}


def _terms(xp, dist, lower, upper, margin, sigma):
    """Every row's z-scores, densities and their derivatives at both ends (0 where an end is
    open), its censoring and the sign XGBoost's limits read; float64."""
    lo = lower.astype(xp.float64)
    hi = upper.astype(xp.float64)
    pred = margin.astype(xp.float64)
    exact = lo == hi
    right = xp.isinf(hi) & ~exact
    left = (lo <= 0.0) & ~exact
    with np.errstate(divide="ignore", invalid="ignore"):
        z_u = xp.where(right, 0.0, (xp.log(hi) - pred) / sigma)
        z_l = xp.where(left, 0.0, (xp.log(lo) - pred) / sigma)
    # XGBoost tests the upper end, then the lower: an interval open at both ends counts as left-censored.
    censor = xp.where(exact, _UNCENSORED, xp.where(left, _LEFT, xp.where(right, _RIGHT, _INTERVAL)))
    return lo, hi, exact, right, left, z_u, z_l, censor


def _limit(xp, table, censor, positive, which: int):
    out = xp.zeros(censor.shape, dtype=xp.float64)
    for c, pair in table.items():
        both = pair[which]
        out = xp.where(censor == c, xp.where(positive, both[0], both[1]), out)
    return out


def aft_gradient(xp, lower, upper, margin, name: str, sigma: float):
    """(grad, hess) float64 of every row, as XGBoost's AFTLoss::Gradient and Hessian."""
    d = _DIST[name]
    lo, hi, exact, right, left, z_u, z_l, censor = _terms(xp, d, lower, upper, margin, sigma)
    z = z_l  # the uncensored z (lower == upper)
    pdf, grad_pdf, hess_pdf = d.pdf(xp, z), d.grad_pdf(xp, z), d.hess_pdf(xp, z)
    pdf_u = xp.where(right, 0.0, d.pdf(xp, z_u))
    cdf_u = xp.where(right, 1.0, d.cdf(xp, z_u))
    gpdf_u = xp.where(right, 0.0, d.grad_pdf(xp, z_u))
    pdf_l = xp.where(left, 0.0, d.pdf(xp, z_l))
    cdf_l = xp.where(left, 0.0, d.cdf(xp, z_l))
    gpdf_l = xp.where(left, 0.0, d.grad_pdf(xp, z_l))
    positive = xp.where(exact, z > 0, (z_u > 0) | (z_l > 0))
    cdf_diff, pdf_diff, grad_diff = cdf_u - cdf_l, pdf_u - pdf_l, gpdf_u - gpdf_l
    with np.errstate(divide="ignore", invalid="ignore"):
        g_num = xp.where(exact, grad_pdf, pdf_u - pdf_l)
        g_den = xp.where(exact, sigma * pdf, sigma * cdf_diff)
        grad = g_num / g_den
        h_num = xp.where(exact, -(pdf * hess_pdf - grad_pdf * grad_pdf), -(cdf_diff * grad_diff - pdf_diff * pdf_diff))
        sq = sigma * cdf_diff
        h_den = xp.where(exact, sigma * sigma * pdf * pdf, sq * sq)
        hess = h_num / h_den
    table = _limits(name, sigma)
    grad = xp.where((g_den < EPS) & (xp.isnan(grad) | xp.isinf(grad)), _limit(xp, table, censor, positive, 0), grad)
    hess = xp.where((h_den < EPS) & (xp.isnan(hess) | xp.isinf(hess)), _limit(xp, table, censor, positive, 1), hess)
    return xp.clip(grad, MIN_GRAD, MAX_GRAD), xp.clip(hess, MIN_HESS, MAX_HESS)


def aft_loss(xp, lower, upper, margin, name: str, sigma: float):
    """Every row's negative log likelihood (XGBoost's AFTLoss::Loss), float64."""
    d = _DIST[name]
    lo, hi, exact, right, left, z_u, z_l, censor = _terms(xp, d, lower, upper, margin, sigma)
    with np.errstate(divide="ignore", invalid="ignore"):
        uncensored = -xp.log(xp.maximum(d.pdf(xp, z_l) / (sigma * lo), EPS))
        cdf_u = xp.where(right, 1.0, d.cdf(xp, z_u))
        cdf_l = xp.where(left, 0.0, d.cdf(xp, z_l))
        censored = -xp.log(xp.maximum(cdf_u - cdf_l, EPS))
    return xp.where(exact, uncensored, censored)


class SurvivalAFT(Objective):
    """survival:aft: the margin is the log survival time; its labels are the matrices'
    label_lower_bound / label_upper_bound (y is not read)."""

    name = "survival:aft"
    default_metric = "aft-nloglik"

    def __init__(self, distribution: str = "normal", scale: float = 1.0):
        self.distribution, self.scale = distribution, float(scale)

    def check_labels(self, xp, y) -> None:
        """The bounds are checked where the matrix takes them."""

    def gradient_of(self, xp, margin, dtrain, iteration: int, out=None):
        lower, upper = bounds_of(dtrain, "dtrain")
        grad, hess = aft_gradient(xp, lower, upper, margin, self.distribution, self.scale)
        out = xp.empty((margin.shape[0], 2), dtype=xp.float32)
        out[:, 0] = grad.astype(xp.float32)
        out[:, 1] = hess.astype(xp.float32)
        if dtrain.weight is not None:  # XGBoost: the float pair times the float weight
            out *= dtrain.weight[:, None]
        return out

    def transform(self, xp, margin):
        return xp.exp(margin)

    def eval_transform(self, xp, margin):
        return margin  # the AFT metrics read margins (XGBoost's EvalTransform does nothing)

    def base_score_to_margin(self, base_score: float) -> np.float32:
        return np.float32(np.log(np.float32(base_score)))

    def estimate_base_score(self, xp, y, weight, comm=None) -> float:
        return 0.5  # XGBoost fits no intercept for survival:aft: its default base_score


def bounds_of(m, what: str):
    """(lower, upper) of a QuantileMatrix, or a ValueError saying how to give them."""
    check_bounds_given(m, what)
    return m.label_lower_bound, m.label_upper_bound


def check_bounds_given(m, what: str) -> None:
    """A ValueError unless matrix m (a QuantileMatrix, or a DaskQuantileMatrix on the client)
    carries survival bounds, saying how to give them."""
    if not getattr(m, "has_survival_bounds", False):
        kind = type(m).__name__
        raise ValueError(f"survival:aft reads each row's survival interval: {what} needs label_lower_bound and "
                         f"label_upper_bound ({kind}(X, label_lower_bound=..., label_upper_bound=...)); an "
                         "estimator's fit(X, y) cannot give them (nor can XGBoost's), train with train()")


def check_bounds(lower, upper) -> None:
    """Raise ValueError unless every row's interval is 0 <= lower <= upper, lower finite."""
    lo, hi = np.asarray(lower), np.asarray(upper)
    if lo.shape != hi.shape:
        raise ValueError(f"label_lower_bound has {lo.shape[0]} rows, label_upper_bound {hi.shape[0]}")
    bad = np.isnan(lo) | np.isnan(hi) | ~np.isfinite(lo) | (lo < 0) | (hi < lo)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"survival bounds must satisfy 0 <= label_lower_bound <= label_upper_bound (lower finite, "
                         f"upper may be inf); row {i} has [{lo[i]}, {hi[i]}] ({int(bad.sum())} such rows)")


def metric_sums(name: str, xp, lower, upper, margin, weight, distribution: str, scale: float):
    """(sum of w x the row's value, sum of w), float64: aft-nloglik (the negative log likelihood)
    or interval-regression-accuracy (whether exp(margin) lies in the interval)."""
    w = xp.ones(margin.shape[0], dtype=xp.float64) if weight is None else weight.astype(xp.float64)
    if name == "aft-nloglik":
        value = aft_loss(xp, lower, upper, margin, distribution, scale)
    else:
        pred = xp.exp(margin.astype(xp.float64))
        value = ((pred >= lower.astype(xp.float64)) & (pred <= upper.astype(xp.float64))).astype(xp.float64)
    return (w * value).sum(), w.sum()


def _cox_order(xp, y):
    """Rows by ascending |label| (stable: XGBoost's LabelAbsSort), and each row's first
    position of its tie group (same |label|) in that order."""
    order = xp.argsort(xp.abs(y), kind="stable")
    t = xp.abs(y[order])
    return order, xp.searchsorted(t, t, side="left")


def _cox_sorted_pairs(xp, e, event, first):
    """XGBoost's Cox gradient and hessian (float64) of rows in _cox_order's order, from their
    hazard ratios e (exp of the margins), events (1.0 or 0.0) and tie-group starts."""
    before = xp.concatenate([xp.zeros(1), xp.cumsum(e)])  # sum of e over the positions before each
    risk = e.sum() - before[first]  # the risk set: every row not in an earlier time group
    r = xp.cumsum(event / risk)
    s = xp.cumsum(event / (risk * risk))
    return e * r - event, e * r - e * e * s


def _weighted_pairs(xp, grad, hess, weight):
    """(n, 2) float32 pairs of float64 gradients and hessians, each times its row's weight (float64)."""
    w = xp.ones(grad.shape[0], dtype=xp.float64) if weight is None else weight.astype(xp.float64)
    out = xp.empty((grad.shape[0], 2), dtype=xp.float32)
    out[:, 0] = (grad * w).astype(xp.float32)
    out[:, 1] = (hess * w).astype(xp.float32)
    return out


class _CoxRows:
    """Where one worker's rows sit among every worker's, for the Cox gradient of all rows:
    ``mine`` their positions in the global _cox_order (ties broken by the rows' places in the
    collection, as one process holding the concatenated rows breaks them), ``event`` and
    ``first`` the order's events and tie-group starts (device arrays of all rows), ``rows`` the
    gathered index (rank order) of each row of the collection in turn."""

    def __init__(self, xp, dtrain, comm):
        y = to_host(dtrain.label)
        spans = getattr(dtrain, "row_spans", None)
        places = None
        if spans and sum(r for _, r in spans) == y.shape[0]:
            places = np.concatenate([np.arange(a, a + r, dtype=np.int64) for a, r in spans])
        views = comm.allgather((y, places))
        ys = np.concatenate([np.asarray(v[0], dtype=np.float32) for v in views])
        n = ys.shape[0]
        place = np.arange(n, dtype=np.int64)
        if all(v[1] is not None for v in views):
            gathered = np.concatenate([np.asarray(v[1], dtype=np.int64) for v in views])
            if np.array_equal(np.sort(gathered), place):  # every row of the collection, once
                place = gathered
        order = np.lexsort((place, np.abs(ys)))  # by |label|, ties by place: the stable sort of one process
        t = np.abs(ys[order])
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        start = sum(int(np.asarray(v[0]).shape[0]) for v in views[: comm.rank])
        self.n = n
        self.mine = xp.asarray(position[start : start + y.shape[0]])
        self.event = xp.asarray((ys[order] > 0).astype(np.float64))
        self.first = xp.asarray(np.searchsorted(t, t, side="left"))
        self.rows = np.argsort(place)


class SurvivalCox(Objective):
    """survival:cox: Cox proportional hazards, Breslow's ties, XGBoost's gradient. A label is a
    survival time, negative where censored; the margin is the log hazard ratio.

    The risk sets reach across all rows: on several workers every round's hazard ratios are
    summed into one vector of all rows (each worker writes its own rows' places, zeros elsewhere:
    the sum is exact), from which every worker computes the gradients of all rows in one order
    and keeps its own, so the model is the one a single process trains on the concatenated rows.
    A round moves 8 bytes a row of all rows through each worker (XGBoost sums each worker's risk
    sets over its own rows only)."""

    name = "survival:cox"
    default_metric = "cox-nloglik"

    def prepare(self, xp, dtrain, comm) -> None:
        self._comm = comm
        self._rows = _CoxRows(xp, dtrain, comm) if comm.world_size > 1 else None

    def gradient(self, xp, margin, y, weight):
        order, first = _cox_order(xp, y)
        e = xp.exp(margin[order].astype(xp.float64))
        grad, hess = _cox_sorted_pairs(xp, e, (y[order] > 0).astype(xp.float64), first)
        out = xp.empty((y.shape[0], 2), dtype=xp.float32)
        out[order] = _weighted_pairs(xp, grad, hess, None if weight is None else weight[order])
        return out

    def gradient_of(self, xp, margin, dtrain, iteration: int, out=None):
        rows = getattr(self, "_rows", None)
        if rows is None:
            return self.gradient(xp, margin, dtrain.label, dtrain.weight)
        comm = self._comm
        e = xp.zeros(rows.n, dtype=xp.float64)
        e[rows.mine] = xp.exp(margin.astype(xp.float64))
        if xp is not np and not getattr(comm, "reduces_on_device", False):
            e = xp.asarray(comm.allreduce(to_host(e)))
        else:
            e = comm.allreduce(e)
        grad, hess = _cox_sorted_pairs(xp, e, rows.event, rows.first)
        return _weighted_pairs(xp, grad[rows.mine], hess[rows.mine], dtrain.weight)

    def transform(self, xp, margin):
        return xp.exp(margin)

    def base_score_to_margin(self, base_score: float) -> np.float32:
        return np.float32(np.log(np.float32(base_score)))

    def estimate_base_score(self, xp, y, weight, comm=None) -> float:
        """XGBoost's intercept for Cox (FitStump): one Newton step from the zero margin,
        -sum(grad) / sum(hess), as a hazard ratio (exp). On several workers every worker's
        pairs are gathered and summed in the collection's row order, as one process sums them."""
        rows = getattr(self, "_rows", None)
        zero = xp.zeros(y.shape[0], dtype=xp.float32)
        if rows is None or comm is None or comm.world_size == 1:
            pairs = self.gradient(xp, zero, y, weight)
        else:
            mine = self.gradient_of(xp, zero, _Labelled(y, weight), 0)
            pairs = xp.asarray(np.concatenate([np.asarray(p) for p in comm.allgather(to_host(mine))])[rows.rows])
        g, h = (float(pairs[:, k].astype(xp.float64).sum()) for k in (0, 1))
        return float(np.exp(np.float32(-g / h))) if h > 0 else 0.5


class _Labelled:
    """Labels and weights where gradient_of reads a matrix's."""

    def __init__(self, label, weight):
        self.label, self.weight = label, weight


def cox_nloglik_sums(xp, y, pred):
    """(negative partial log likelihood, number of events) of hazard ratios pred (exp of the
    margins), as XGBoost's cox-nloglik: -sum over events of log(pred) - log(its risk set's sum)."""
    order, first = _cox_order(xp, y)
    p = pred[order].astype(xp.float64)
    event = y[order] > 0
    before = xp.concatenate([xp.zeros(1), xp.cumsum(p)])
    risk = p.sum() - before[first]
    with np.errstate(divide="ignore"):
        terms = xp.where(event, xp.log(p) - xp.log(risk), 0.0)
    return -terms.sum(), event.sum().astype(xp.float64)
