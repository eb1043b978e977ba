"""Split rules: leaf weight, gain and validity, in XGBoost's arithmetic (read by split evaluation and tree growth).

The arithmetic mirrors XGBoost's `hist` updater type for type, because models are
tested against it tree for tree: gradient sums are double; each child's gain is
computed in double and rounded to float; the loss change is float; parameters are
float32 (XGBoost stores them as float) promoted to double where they meet sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..layouts import RT_EPS  # a split must improve the loss by more than this (XGBoost's kRtEps)


@dataclass(frozen=True)
class SplitParams:
    """The training parameters that split evaluation reads, as float32 values."""

    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    min_child_weight: float = 1.0
    max_delta_step: float = 0.0
    min_split_loss: float = 0.0

    def __post_init__(self):
        for name in ("reg_lambda", "reg_alpha", "min_child_weight", "max_delta_step", "min_split_loss"):
            object.__setattr__(self, name, float(np.float32(getattr(self, name))))


def threshold_l1(xp, g, alpha: float):
    """sign(g) * max(|g| - alpha, 0)."""
    return xp.where(g > alpha, g - alpha, xp.where(g < -alpha, g + alpha, 0.0))


def calc_weight(xp, G, H, p: SplitParams, bounds=None):
    """Optimal leaf weight for gradient sums (G, H), as float32 (XGBoost's CalcWeight).

    bounds: optional (lower, upper) float32 arrays broadcasting against G: the node's
    monotone-constraint bounds (monotone.py), which the weight is clipped to.
    """
    G = xp.asarray(G, dtype=xp.float64)
    H = xp.asarray(H, dtype=xp.float64)
    ok = (H >= p.min_child_weight) & (H > 0.0)
    denom = xp.where(ok, H + p.reg_lambda, 1.0)
    w = -threshold_l1(xp, G, p.reg_alpha) / denom
    if p.max_delta_step != 0.0:
        w = xp.where(xp.abs(w) > p.max_delta_step, xp.copysign(p.max_delta_step, w), w)
    w = xp.where(ok, w, 0.0).astype(xp.float32)
    if bounds is not None:
        lower, upper = bounds
        w = xp.where(w < lower, lower, xp.where(w > upper, upper, w)).astype(xp.float32)
    return w


def child_gain(xp, G, H, p: SplitParams, bounds=None):
    """Gain of one side of a split, as float32 (XGBoost's CalcGainGivenWeight).

    bounds: as calc_weight's; given (monotone constraints are on), the gain is taken
    at the bounded weight, as XGBoost does whenever the constraints are set.
    """
    G = xp.asarray(G, dtype=xp.float64)
    H = xp.asarray(H, dtype=xp.float64)
    positive = H > 0.0
    if p.max_delta_step == 0.0 and bounds is None:
        # At alpha 0 the threshold is G itself but for NaN (0 there); squared below, so the sign
        # of a zero is moot: two passes over the candidates instead of six.
        t = xp.where(xp.isnan(G), 0.0, G) if p.reg_alpha == 0.0 else threshold_l1(xp, G, p.reg_alpha)
        gain = (t * t / xp.where(positive, H + p.reg_lambda, 1.0)).astype(xp.float32)
    else:
        # With a clipped weight the closed form no longer holds: evaluate the
        # objective at the weight, in float as xgboost 3.2's CalcGainGivenWeight does:
        # no alpha term (reg_alpha acts through the weight only), and (H + lambda)
        # times (w * w). Saturated weights make neighbouring thresholds tie exactly in
        # real arithmetic, so the association decides which wins.
        w = calc_weight(xp, G, H, p, bounds)
        g32, h32 = G.astype(xp.float32), H.astype(xp.float32)
        lam = xp.float32(p.reg_lambda)
        gain = -(xp.float32(2.0) * g32 * w + (h32 + lam) * (w * w))
    return xp.where(positive, gain, xp.float32(0.0)).astype(xp.float32)


def splits_applied(recs, depth: int, max_depth: int, p: SplitParams) -> np.ndarray:
    """Which nodes' best splits are applied (XGBoost driver's IsValid), for host records."""
    ok = (recs["feature"] >= 0) & (recs["gain"] > RT_EPS)
    ok &= (recs["left_hess"] != 0.0) & (recs["right_hess"] != 0.0)
    ok &= recs["gain"] >= np.float32(p.min_split_loss)
    return ok & (not (max_depth > 0 and depth >= max_depth))
