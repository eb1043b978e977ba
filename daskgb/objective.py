"""Loss functions: gradient and hessian, base score, and the margin -> output transform.

Arithmetic is float32 as XGBoost's, and exp is glibc's expf to the bit
(fmath.py), so numpy, CUDA and XGBoost compute the same gradients.
"""

from __future__ import annotations

import numpy as np

from . import cpu
from .arrays import to_host
from .collective import LocalCommunicator
from .fmath import expf


def _sigmoid(xp, margin):
    # XGBoost's Sigmoid: 1 / (exp(min(-x, 88.7)) + 1), in float.
    if xp is not np:
        from . import objective_cuda

        return objective_cuda.sigmoid(margin)
    e = expf(xp, xp.minimum(-margin, xp.float32(88.7)))
    return xp.float32(1.0) / (e + xp.float32(1.0))


class Objective:
    """One learning objective (XGBoost's ObjFunction).

    n_groups outputs per row: 1, or K for multiclass (margins of shape (n, K), one
    tree per class per round).
    """

    name = ""
    default_metric = ""
    n_groups = 1

    def check_labels(self, xp, y) -> None:
        """Raise ValueError if the labels are invalid for this objective."""

    def leaf_quantile_alpha(self, group: int) -> float | None:
        """For objectives whose leaves XGBoost refits after growth (UpdateTreeLeaf): the alpha of
        the residual quantile each leaf of output group `group` takes (adaptive.refresh_leaves).
        None for the others."""
        return None

    def gradient(self, xp, margin, y, weight):
        """(n, 2) float32 gradient pairs at the current margins."""
        raise NotImplementedError

    def prepare(self, xp, dtrain, comm) -> None:
        """Called once before training with the training matrix and the communicator. Objectives that
        need more than labels and weights (the ranking ones: query groups) take it here."""

    # Whether gradient_of can write the pairs into a given array (its out=): training's CUDA graph
    # then reads them where they are written, with no second (n, 2) array beside them.
    writes_gradients_into = False

    def gradient_of(self, xp, margin, dtrain, iteration: int, out=None):
        """Gradient pairs for the training matrix in boosting round ``iteration`` (into out, an
        (n, 2) float32 device array, where given: only objectives that write_gradients_into)."""
        if out is None:
            return self.gradient(xp, margin, dtrain.label, dtrain.weight)
        return self.gradient(xp, margin, dtrain.label, dtrain.weight, out=out)

    def transform(self, xp, margin):
        """Margins to outputs (probabilities, values)."""
        return margin

    def eval_transform(self, xp, margin):
        """Margins to what metrics read (XGBoost's EvalTransform): the output, except
        that multi:softmax is evaluated on probabilities."""
        return self.transform(xp, margin)

    def base_score_from_sums(self, sums):
        """The default base_score from base_score_sums added over all workers."""
        return float(sums[0] / sums[1])

    def base_score_to_margin(self, base_score: float) -> np.float32:
        return np.float32(base_score)

    def base_score_sums(self, xp, y, weight) -> tuple[float, float]:
        """(sum w*y, sum w): the default base_score is their ratio, the weighted mean label, as
        XGBoost 3 uses for these objectives (checked against xgboost 3.2's saved base_score).
        Sums, not the mean, so that workers can add theirs. On the device each is the double
        nearest the exact sum (objective_cuda.label_sums), whatever the order of the rows."""
        if xp is not np:
            from . import objective_cuda

            return objective_cuda.label_sums(y, weight)
        y64 = y.astype(xp.float64)
        if weight is None:
            return float(y64.sum()), float(y.shape[0])
        w64 = weight.astype(xp.float64)
        return float((w64 * y64).sum()), float(w64.sum())

    def estimate_base_score(self, xp, y, weight, comm=None):
        """The default base_score over the rows of every worker (comm=None: this process's rows)."""
        comm = comm or LocalCommunicator()
        return self.base_score_from_sums(comm.allreduce(np.asarray(self.base_score_sums(xp, y, weight),
                                                                   dtype=np.float64)))


def _pack(xp, grad, hess, weight=None):
    """(n, 2) float32 gradient pairs, each scaled by its row's weight (as XGBoost does, after the loss)."""
    scalar_hess = np.ndim(hess) == 0 and not isinstance(hess, xp.ndarray)
    if xp is not np and grad.ndim == 1 and grad.dtype == np.float32 and (
            scalar_hess or (hess.shape == grad.shape and hess.dtype == np.float32)):
        from . import objective_cuda

        return objective_cuda.pack_gradients(grad, hess, weight)
    if weight is not None:
        grad, hess = grad * weight, hess * weight
    out = xp.empty((grad.shape[0], 2), dtype=xp.float32)
    out[:, 0] = grad
    out[:, 1] = hess
    return out


def _refused_labels(xp, y, rule: str, refused, n_classes: int = 0) -> int:
    """How many labels the numpy expression refused(y) marks; on the device, objective_cuda's
    rule of that name, which marks the same ones."""
    if xp is np:
        return int(refused(y).sum())
    from . import objective_cuda

    return objective_cuda.count_refused_labels(y, rule, n_classes)


class SquaredError(Objective):
    name = "reg:squarederror"
    default_metric = "rmse"
    writes_gradients_into = True

    def gradient(self, xp, margin, y, weight, out=None):
        if xp is not np and margin.ndim == 1:
            from . import objective_cuda

            return objective_cuda.squared_error_gradient(margin, y, weight, out=out)
        if out is not None:
            raise ValueError("gradient pairs are written into an array on a GPU only")
        grad = margin - y
        return _pack(xp, grad, xp.float32(1.0), weight)


class _Logistic(Objective):
    writes_gradients_into = True

    def __init__(self, scale_pos_weight: float = 1.0):
        # XGBoost's scale_pos_weight: rows labelled 1 weigh this much more in the gradient.
        self.scale_pos_weight = float(scale_pos_weight)
        self._scaled_weight = None  # the training rows' weights with it applied (prepare)

    def _positive_scaled(self, xp, y, weight):
        w = xp.where(y == 1, xp.float32(self.scale_pos_weight), xp.float32(1.0)).astype(xp.float32)
        return w if weight is None else w * weight.astype(xp.float32)

    def prepare(self, xp, dtrain, comm) -> None:
        if self.scale_pos_weight != 1.0:
            self._scaled_weight = self._positive_scaled(xp, dtrain.label, dtrain.weight)

    def gradient_of(self, xp, margin, dtrain, iteration: int, out=None):
        if self._scaled_weight is None:
            return super().gradient_of(xp, margin, dtrain, iteration, out=out)
        if out is None:
            return self.gradient(xp, margin, dtrain.label, self._scaled_weight)
        return self.gradient(xp, margin, dtrain.label, self._scaled_weight, out=out)

    def base_score_sums(self, xp, y, weight) -> tuple[float, float]:
        """With scale_pos_weight, XGBoost's FitIntercept: the Newton step from margin 0 of the
        scaled gradient, sum (y - 1/2) w' over sum w'/4 (its probability in base_score_from_sums);
        else the weighted mean label."""
        if self.scale_pos_weight == 1.0:
            return super().base_score_sums(xp, y, weight)
        w = self._positive_scaled(xp, y, weight).astype(xp.float64)
        return (float((w * (y.astype(xp.float64) - 0.5)).sum()), float((w * 0.25).sum()))

    def base_score_from_sums(self, sums):
        if self.scale_pos_weight == 1.0:
            return super().base_score_from_sums(sums)
        return float(1.0 / (1.0 + np.exp(-sums[0] / sums[1])))

    def gradient(self, xp, margin, y, weight, out=None):
        if xp is not np and margin.ndim == 1:
            from . import objective_cuda

            return objective_cuda.logistic_gradient(margin, y, weight, out=out)
        if out is not None:
            raise ValueError("gradient pairs are written into an array on a GPU only")
        if (cpu.compiled_loaded() and margin.ndim == 1 and margin.dtype == y.dtype == np.float32
                and (weight is None or weight.dtype == np.float32)):
            from . import objective_compiled

            return objective_compiled.logistic_gradient(margin, y, weight)
        p = _sigmoid(xp, margin)
        grad = p - y
        hess = xp.maximum(p * (xp.float32(1.0) - p), xp.float32(1e-16))
        return _pack(xp, grad, hess, weight)

    def transform(self, xp, margin):
        return _sigmoid(xp, margin)

    def base_score_to_margin(self, base_score: float) -> np.float32:
        # XGBoost's ProbToMargin: -log(1/p - 1), in float.
        p = np.float32(base_score)
        with np.errstate(divide="ignore"):  # base_score 0 or 1 gives an infinite margin, as in XGBoost
            return np.float32(-np.log(np.float32(1.0) / p - np.float32(1.0)))


class BinaryLogistic(_Logistic):
    name = "binary:logistic"
    default_metric = "logloss"

    def check_labels(self, xp, y):
        bad = _refused_labels(xp, y, "binary", lambda y: (y != 0) & (y != 1))
        if bad:
            raise ValueError(f"binary:logistic needs labels in {{0, 1}}; {bad} labels are not")


class RegLogistic(_Logistic):
    name = "reg:logistic"
    default_metric = "rmse"

    def check_labels(self, xp, y):
        bad = _refused_labels(xp, y, "unit_interval", lambda y: (y < 0) | (y > 1))
        if bad:
            raise ValueError(f"{self.name} needs labels in [0, 1]; {bad} labels are not")


class BinaryLogitRaw(RegLogistic):
    """binary:logitraw: the logistic loss with the margins as outputs, labels in [0, 1] as
    reg:logistic's. As XGBoost's
    LogisticRaw: no PredTransform, and no ProbToMargin, so the base score (the weighted mean
    label) is the starting margin as it is; metrics read the margins."""

    name = "binary:logitraw"
    default_metric = "logloss"

    def transform(self, xp, margin):
        return margin

    def base_score_from_sums(self, sums):
        # With scale_pos_weight, FitIntercept's Newton step itself: XGBoost turns it into an
        # output by the (here absent) PredTransform, so it stays a margin.
        if self.scale_pos_weight == 1.0:
            return super().base_score_from_sums(sums)
        return float(sums[0] / sums[1])

    def base_score_to_margin(self, base_score: float) -> np.float32:
        return np.float32(base_score)


class _LogLink(Objective):
    """Objectives on a log scale: outputs are exp(margin), base_score maps to log(base_score)."""

    def transform(self, xp, margin):
        return expf(xp, margin)

    def base_score_to_margin(self, base_score: float) -> np.float32:
        with np.errstate(divide="ignore"):
            return np.float32(np.log(np.float32(base_score)))

    def check_labels(self, xp, y):
        bad = _refused_labels(xp, y, "negative", lambda y: y < 0)
        if bad:
            raise ValueError(f"{self.name} needs non-negative labels; {bad} labels are negative")


class Poisson(_LogLink):
    """count:poisson. Its hessian is inflated by exp(max_delta_step) (0.7 unless the user sets
    max_delta_step, which XGBoost then applies to the objective and the tree alike)."""

    name = "count:poisson"
    default_metric = "poisson-nloglik"

    def __init__(self, max_delta_step: float = 0.7):
        self.max_delta_step = np.float32(max_delta_step)

    def gradient(self, xp, margin, y, weight):
        grad = expf(xp, margin) - y
        hess = expf(xp, margin + self.max_delta_step)
        return _pack(xp, grad, hess, weight)


class Gamma(_LogLink):
    name = "reg:gamma"
    default_metric = "gamma-deviance"

    def gradient(self, xp, margin, y, weight):
        ratio = y / expf(xp, margin)
        grad = xp.float32(1.0) - ratio
        return _pack(xp, grad, ratio, weight)

    def check_labels(self, xp, y):
        bad = _refused_labels(xp, y, "not_positive", lambda y: y <= 0)
        if bad:
            raise ValueError(f"reg:gamma needs positive labels; {bad} labels are not")


class Tweedie(_LogLink):
    name = "reg:tweedie"

    def __init__(self, variance_power: float = 1.5):
        self.rho = np.float32(variance_power)
        self.default_metric = f"tweedie-nloglik@{float(self.rho):g}"

    def gradient(self, xp, margin, y, weight):
        one, two = xp.float32(1.0) - self.rho, xp.float32(2.0) - self.rho
        a = expf(xp, one * margin)
        b = expf(xp, two * margin)
        grad = -y * a + b
        hess = -y * one * a + two * b
        return _pack(xp, grad, hess, weight)


class PseudoHuber(Objective):
    name = "reg:pseudohubererror"
    default_metric = "mphe"

    def __init__(self, huber_slope: float = 1.0):
        self.slope = np.float32(huber_slope)

    def base_score_sums(self, xp, y, weight) -> tuple[float, float]:
        """XGBoost's generic intercept for this loss: one Newton step from margin 0, -sum g / sum h."""
        gp = self.gradient(xp, xp.zeros(y.shape[0], dtype=xp.float32), y, weight).astype(xp.float64)
        return float(-gp[:, 0].sum()), float(gp[:, 1].sum())

    def gradient(self, xp, margin, y, weight):
        z = margin - y
        slope2 = self.slope * self.slope
        scale_sqrt = xp.sqrt(xp.float32(1.0) + z * z / slope2)
        grad = z / scale_sqrt
        hess = slope2 / ((slope2 + z * z) * scale_sqrt)
        return _pack(xp, grad, hess, weight)


class AbsoluteError(Objective):
    """reg:absoluteerror: gradient sign(margin - y), hessian 1; the leaves are then refitted to
    the median residual of their rows."""

    name = "reg:absoluteerror"
    default_metric = "mae"

    def leaf_quantile_alpha(self, group):
        return 0.5

    def gradient(self, xp, margin, y, weight):
        return _pack(xp, xp.sign(margin - y), xp.float32(1.0), weight)

    def estimate_base_score(self, xp, y, weight, comm=None) -> float:
        """XGBoost's intercept: the (weighted) median label, scaled by the weight sum W and back in
        float, float(float(median * W) / W), as XGBoost averages workers' medians. Here the median
        is the one of all workers' rows, not an average."""
        from .adaptive import group_quantiles

        comm = comm or LocalCommunicator()
        q, _ = group_quantiles(xp, y, xp.zeros(y.shape[0], dtype=xp.int64), 1, 0.5, weight, comm)
        total = float(y.shape[0]) if weight is None else float(weight.astype(xp.float64).sum())
        total = float(comm.allreduce(np.array([total], dtype=np.float64))[0])
        return float(np.float32(float(np.float32(float(to_host(q)[0]) * total)) / total))


class QuantileError(Objective):
    """reg:quantileerror (pinball loss) at each of quantile_alpha's K alphas: one output per alpha
    (margins (n, K) for K > 1, one tree per alpha per round, as XGBoost); gradient 1 - alpha where
    the margin is >= y, -alpha below, hessian 1; the leaves are then refitted to the alpha-quantile
    residual."""

    name = "reg:quantileerror"
    default_metric = "quantile"

    def __init__(self, quantile_alpha=0.5):
        self.alphas = np.atleast_1d(np.asarray(quantile_alpha, dtype=np.float32))
        self.n_groups = int(self.alphas.size)

    def leaf_quantile_alpha(self, group):
        return float(self.alphas[group])

    def gradient(self, xp, margin, y, weight):
        # (margin >= y) - alpha: 1 - alpha (in float, as XGBoost's 1.0f - alpha) or -alpha.
        if self.n_groups == 1:
            grad = (margin - y >= 0).astype(xp.float32) - self.alphas[0]
            return _pack(xp, grad, xp.float32(1.0), weight)
        grad = (margin - y[:, None] >= 0).astype(xp.float32) - xp.asarray(self.alphas)[None, :]
        hess = xp.ones_like(grad)
        if weight is not None:
            grad, hess = grad * weight[:, None], hess * weight[:, None]
        return xp.stack([grad, hess], axis=-1)

    def estimate_base_score(self, xp, y, weight, comm=None):
        """Each alpha's quantile of the labels (XGBoost's Quantile or WeightedQuantile), over all
        workers' rows (XGBoost averages the workers' quantiles); one number, or K."""
        from .adaptive import group_quantiles

        groups = xp.zeros(y.shape[0], dtype=xp.int64)
        q = [float(to_host(group_quantiles(xp, y, groups, 1, float(a), weight, comm)[0])[0]) for a in self.alphas]
        return q[0] if self.n_groups == 1 else q

    def base_score_to_margin(self, base_score):
        """base_score: one margin per alpha, or one number used for all."""
        if np.ndim(base_score) == 0:
            return np.float32(base_score) if self.n_groups == 1 else np.full(self.n_groups, base_score, np.float32)
        return np.asarray(base_score, dtype=np.float32)


# std::numeric_limits<float>::min(): XGBoost's softmax gradient starts its running max there, so a
# row whose margins are all negative is shifted by (about) 0 rather than by its max.
_FLT_MIN = np.float32(np.finfo(np.float32).tiny)


def _softmax(xp, margin, wmax):
    """Rows of (n, K) float32 margins to probabilities as XGBoost computes them: expf of the
    shifted margins, their sum accumulated class by class in double, one float divide."""
    e = expf(xp, margin - wmax[:, None])
    wsum = xp.zeros(margin.shape[0], dtype=xp.float64)
    for k in range(margin.shape[1]):
        wsum += e[:, k]
    return e / wsum.astype(xp.float32)[:, None]


class Softmax(Objective):
    """multi:softprob (outputs class probabilities) and multi:softmax (outputs the class index).

    The default intercept is XGBoost 3's: the log of each class's weighted frequency
    (plus 1e-6), centred to mean 0; base_score holds these K margins.
    """

    default_metric = "mlogloss"

    def __init__(self, num_class: int, output_prob: bool = True):
        self.n_groups = int(num_class)
        self.output_prob = output_prob
        self.name = "multi:softprob" if output_prob else "multi:softmax"

    def check_labels(self, xp, y):
        bad = _refused_labels(xp, y, "class", lambda y: (y < 0) | (y >= self.n_groups) | (y != np.floor(y)),
                              self.n_groups)
        if bad:
            raise ValueError(f"{self.name} needs integer labels in [0, num_class={self.n_groups}); "
                             f"{bad} labels are not")

    def gradient(self, xp, margin, y, weight):
        if xp is not np:
            from . import objective_cuda

            return objective_cuda.softmax_gradient(margin, y, weight)
        if cpu.compiled_loaded() and margin.dtype == np.float32:
            from . import objective_compiled

            return objective_compiled.softmax_gradient(margin, y, weight, _FLT_MIN)
        wmax = xp.maximum(margin.max(axis=1), _FLT_MIN)
        p = _softmax(xp, margin, wmax)
        is_label = y.astype(xp.int64)[:, None] == xp.arange(self.n_groups)[None, :]
        grad = xp.where(is_label, p - xp.float32(1.0), p)
        hess = xp.float32(2.0) * p * (xp.float32(1.0) - p)
        if weight is not None:
            grad = grad * weight[:, None]
            hess = hess * weight[:, None]
        out = xp.empty(margin.shape + (2,), dtype=xp.float32)
        out[..., 0] = grad
        out[..., 1] = xp.maximum(hess, xp.float32(1e-16))
        return out

    def transform(self, xp, margin):
        if not self.output_prob:
            if xp is not np:
                from . import objective_cuda

                return objective_cuda.argmax_rows(margin)
            return xp.argmax(margin, axis=1).astype(xp.float32)
        return self.eval_transform(xp, margin)

    def eval_transform(self, xp, margin):
        if xp is not np:
            from . import objective_cuda

            return objective_cuda.softmax(margin)
        return _softmax(xp, margin, margin.max(axis=1))

    def base_score_sums(self, xp, y, weight):
        """Each class's weight sum, then the total weight (on the device each the double nearest
        the exact sum: objective_cuda.class_weight_sums)."""
        if xp is not np:
            from . import objective_cuda

            return objective_cuda.class_weight_sums(y, weight, self.n_groups)
        w = xp.ones(y.shape[0], dtype=xp.float64) if weight is None else weight.astype(xp.float64)
        per_class = xp.bincount(y.astype(xp.int64), weights=w, minlength=self.n_groups)[: self.n_groups]
        return [float(v) for v in to_host(per_class)] + [float(w.sum())]

    def base_score_from_sums(self, sums):
        sums = np.asarray(sums, dtype=np.float64)
        p = (sums[:-1] / sums[-1]).astype(np.float32)
        logp = np.log(p + np.float32(1e-6))
        return [float(v) for v in (logp - np.float32(logp.astype(np.float64).mean()))]

    def base_score_to_margin(self, base_score):
        """base_score: the K class margins, or one number used for every class."""
        if np.ndim(base_score) == 0:
            return np.full(self.n_groups, base_score, dtype=np.float32)
        return np.asarray(base_score, dtype=np.float32)


OBJECTIVES = {cls.name: cls for cls in (SquaredError, BinaryLogistic, RegLogistic, BinaryLogitRaw, Poisson, Gamma, Tweedie,
                                        PseudoHuber, AbsoluteError, QuantileError)}
MULTICLASS = ("multi:softprob", "multi:softmax")
