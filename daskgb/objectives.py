"""Objective names to objects: every built-in objective, from objective.py and ranking.py, by its XGBoost name."""

from __future__ import annotations

from . import ranking
from .objective import (MULTICLASS, OBJECTIVES, Objective, Poisson, PseudoHuber, QuantileError, Softmax, Tweedie,
                        _Logistic)


def get_objective(name: str, params=None) -> Objective:
    """The objective called `name`, configured from TrainParams where it reads them."""
    if name in ranking.RANKING_OBJECTIVES:
        return ranking.make_objective(name, params)
    if name == "survival:cox":
        from .survival import SurvivalCox

        return SurvivalCox()
    if name == "survival:aft":
        from .survival import SurvivalAFT

        if params is None:
            return SurvivalAFT()
        return SurvivalAFT(params.aft_loss_distribution, params.aft_loss_distribution_scale)
    if name in MULTICLASS:
        num_class = getattr(params, "num_class", 0) if params is not None else 0
        if num_class < 2:
            raise ValueError(f"{name} needs num_class >= 2, got {num_class}")
        return Softmax(num_class, output_prob=name == "multi:softprob")
    try:
        cls = OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; one of "
                         f"{sorted(OBJECTIVES) + list(MULTICLASS) + list(ranking.RANKING_OBJECTIVES) + ['survival:aft', 'survival:cox']}"
                         ) from None
    if params is None:
        return cls()
    if cls is Poisson:
        obj = cls(params.max_delta_step if getattr(params, "max_delta_step_set", False) else 0.7)
    elif cls is Tweedie:
        obj = cls(params.tweedie_variance_power)
    elif issubclass(cls, _Logistic):
        obj = cls(params.scale_pos_weight)
    elif cls is PseudoHuber:
        obj = cls(params.huber_slope)
    elif cls is QuantileError:
        obj = cls(params.quantile_alpha)
    else:
        obj = cls()
    if getattr(params, "num_class", 0) > 1:
        # A custom objective (obj=) with num_class outputs: the named objective only supplies the
        # output transform, as in XGBoost; train() refuses this without obj=.
        obj.n_groups = params.num_class
    return obj
