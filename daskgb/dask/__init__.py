"""daskgb on a Dask cluster: XGBoost's xgboost.dask, with DaskQuantileMatrix for its DaskDMatrix and
DaskQuantileDMatrix.

train (dask/training.py) runs one long task per worker, histograms summed by collectives;
predict and inplace_predict (dask/prediction.py) predict a collection's blocks where they lie;
the estimators are dask/estimators.py's.
"""

from .data import DaskQuantileMatrix
from .estimators import DaskGBClassifier, DaskGBRanker, DaskGBRegressor, DaskGBRFClassifier, DaskGBRFRegressor
from .fit_lock import WorkersBusyError
from .prediction import inplace_predict, predict
from .training import WorkerLostError, WorkerUnresponsiveError, release_nccl, train

__all__ = ["DaskQuantileMatrix", "train", "predict", "inplace_predict", "DaskGBRegressor", "DaskGBClassifier",
           "DaskGBRanker", "DaskGBRFRegressor", "DaskGBRFClassifier", "WorkerLostError", "WorkerUnresponsiveError",
           "WorkersBusyError", "release_nccl"]
