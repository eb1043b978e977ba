"""daskgb: gradient-boosted decision trees on Dask clusters of GPUs (and on CPUs), XGBoost-compatible."""

from .booster import Booster, register_training_api
from .matrix import DMatrix, QuantileMatrix
from .out_of_memory import OutOfMemoryError
from .training import booster_rounds, train
from .training.cv import cv

# Booster.update, boost and eval_set are training's work, which sits above booster.py.
register_training_api(booster_rounds)

__version__ = "0.1.0"

__all__ = ["Booster", "DMatrix", "QuantileMatrix", "OutOfMemoryError", "train", "cv", "GBRegressor", "GBClassifier", "GBRanker", "DaskGBRegressor",
           "DaskGBClassifier", "DaskGBRanker", "GBRFRegressor", "GBRFClassifier", "DaskGBRFRegressor",
           "DaskGBRFClassifier", "plot_importance", "plot_metric", "plot_tree", "__version__"]


def __getattr__(name):
    # The estimators import lazily so that `import daskgb` stays light (no dask import).
    if name in ("GBRegressor", "GBClassifier", "GBRanker", "GBRFRegressor", "GBRFClassifier"):
        from . import sklearn

        return getattr(sklearn, name)
    if name in ("DaskGBRegressor", "DaskGBClassifier", "DaskGBRanker", "DaskGBRFRegressor", "DaskGBRFClassifier"):
        from .dask import estimators

        return getattr(estimators, name)
    if name in ("plot_importance", "plot_metric", "plot_tree"):
        from . import plotting

        return getattr(plotting, name)
    raise AttributeError(f"module 'daskgb' has no attribute {name!r}")
