"""Predictions on a Dask cluster: blocks of a collection (or a DaskQuantileMatrix's rows) predicted where they lie."""

from __future__ import annotations

import weakref

import numpy as np

from ..inputs import check_feature_names
from . import plugin
from .data import DaskQuantileMatrix, _categorical_frame
from .watch import gather_watching, live_workers

__all__ = ["predict", "inplace_predict"]


def predict(client, model, data, output_margin: bool = False, iteration_range=(0, 0), *, pred_leaf: bool = False,
            pred_contribs: bool = False, approx_contribs: bool = False, pred_interactions: bool = False,
            missing=np.nan, validate_features: bool = True, strict_shape: bool = False):
    """Lazy predictions for a dask array or dataframe, or a DaskQuantileMatrix, as xgboost.dask.predict's.

    model: a Booster, the dict train() returns (its "booster"), or a future of either. The booster travels to each
    worker once (scattered), never with every block.

    What comes back, in data's row order: for a dask array, a dask array of a block per
    partition (its chunk sizes data's where dask knows them); for a dask dataframe, a dask Series
    (a DataFrame of columns 0..k-1 for k outputs a row) with data's index and divisions, except
    outputs of more than two dimensions, which come as a dask array; for a DaskQuantileMatrix,
    a dask array whose chunks are the partitions of the X it was built from, in X's row order.

    pred_contribs and pred_interactions (either with approx_contribs) and pred_leaf as
    Booster.predict's, block by block: (n, n_features + 1) contributions, (n, n_features + 1,
    n_features + 1) interactions (a group axis after the rows for several outputs), (n,
    n_trees) leaf ids. A dataframe's missing entries (NaN, None, pd.NA) are missing values, and
    so are entries equal to `missing`; validate_features=False skips the check of a dataframe's
    column names against the model's. strict_shape=True: Booster.predict's shapes of that name
    (a dataframe's (n, 1) predictions then come as a DataFrame of one column).
    """
    booster = _booster_of(model)
    plugin.register(client)
    explain = pred_leaf or pred_contribs or approx_contribs or pred_interactions
    if isinstance(data, DaskQuantileMatrix):
        source = data.source()
        if source is not None and (explain or getattr(booster, "_train_cuts_token", None) != data.cuts_token):
            # Not binned with the model's cuts (or asked for explanations): the collections the
            # matrix was built from, as XGBoost predicts any DaskDMatrix; an array, as for a matrix.
            ask = _Ask(output_margin, tuple(iteration_range), pred_leaf, pred_contribs, approx_contribs,
                       pred_interactions, source["missing"], validate_features, strict_shape)
            return _predict_collection(client, booster, source["X"], ask, as_frame=False,
                                       base_margin=source["base_margin"])
        if explain:
            raise ValueError("pred_contribs and pred_leaf take raw features (a DaskQuantileMatrix holds bins, and "
                             "this one keeps no collections to read them from); pass the dask array or dataframe")
        out = _predict_matrix(client, booster, data, output_margin, iteration_range)
        return out[:, None] if strict_shape and out.ndim == 1 else out
    return _predict_collection(client, booster, data, _Ask(output_margin, tuple(iteration_range), pred_leaf,
                                                           pred_contribs, approx_contribs, pred_interactions,
                                                           missing, validate_features, strict_shape), as_frame=True)


def predict_array(client, model, X, output_margin: bool = False, iteration_range=(0, 0), base_margin=None,
                  **explain):
    """predict(), with a dask array for a dataframe too (its chunk sizes unknown), as the
    estimators' predict returns (as XGBoost's do); base_margin: a dask collection of margins to
    start from, its rows matched to X's (as inplace_predict's)."""
    booster = _booster_of(model)
    plugin.register(client)
    if isinstance(X, DaskQuantileMatrix):
        if base_margin is not None:
            raise ValueError("a DaskQuantileMatrix carries its base margins: build it with base_margin=")
        return predict(client, booster, X, output_margin, iteration_range, **explain)
    names = ("pred_leaf", "pred_contribs", "approx_contribs", "pred_interactions")
    ask = _Ask(output_margin, tuple(iteration_range), *(bool(explain.get(n, False)) for n in names))
    if base_margin is not None and ask.explain:
        raise ValueError("base_margin goes with predictions and margins, not with leaf ids or contributions")
    return _predict_collection(client, booster, X, ask, as_frame=False, base_margin=base_margin)


def inplace_predict(client, model, data, *, iteration_range=(0, 0), predict_type: str = "value", missing=np.nan,
                    validate_features: bool = True, base_margin=None, strict_shape: bool = False):
    """xgboost.dask.inplace_predict: predict()'s output for a dask array or dataframe, without
    building a matrix. predict_type "value" (transformed predictions) or "margin" (raw
    margins); missing: the value that stands for a missing entry (besides NaN); base_margin: a
    dask array (for array data) or dask series / dataframe (for dataframe data) of margins to
    start from, its rows matched to data's (dask/data.py _aligned); validate_features=False
    skips the check of a dataframe's column names against the model's; strict_shape as predict's."""
    if predict_type not in ("value", "margin"):
        raise ValueError(f"predict_type must be 'value' or 'margin', got {predict_type!r}")
    if isinstance(data, DaskQuantileMatrix):
        raise ValueError("inplace_predict takes a dask array or dataframe; for a DaskQuantileMatrix use predict")
    booster = _booster_of(model)
    plugin.register(client)
    ask = _Ask(predict_type == "margin", tuple(iteration_range), missing=float(missing),
               validate_features=bool(validate_features), strict_shape=strict_shape)
    return _predict_collection(client, booster, data, ask, as_frame=True, base_margin=base_margin)


class _Ask:
    """What a prediction asks for, as the blocks' tasks take it."""

    def __init__(self, output_margin=False, iteration_range=(0, 0), pred_leaf=False, pred_contribs=False,
                 approx_contribs=False, pred_interactions=False, missing=np.nan, validate_features=True,
                 strict_shape=False):
        if approx_contribs and not (pred_contribs or pred_interactions):
            raise ValueError("approx_contribs=True is a kind of pred_contribs=True; pass both")
        if sum(map(bool, (pred_leaf, pred_contribs, pred_interactions))) > 1:
            raise ValueError("pred_leaf, pred_contribs and pred_interactions are different outputs; ask for one")
        self.output_margin, self.iteration_range = bool(output_margin), tuple(iteration_range)
        self.pred_leaf, self.pred_contribs = bool(pred_leaf), bool(pred_contribs)
        self.approx_contribs, self.pred_interactions = bool(approx_contribs), bool(pred_interactions)
        self.missing, self.validate_features = float(missing), bool(validate_features)
        self.strict_shape = bool(strict_shape)

    @property
    def explain(self) -> bool:
        return self.pred_leaf or self.pred_contribs or self.pred_interactions

    def row_shape(self, booster) -> tuple:
        """The shape of one row's output (() for a number a row)."""
        shape = self._loose_row_shape(booster)
        if not self.strict_shape:
            return shape
        kind = ("leaf" if self.pred_leaf else "contribs" if self.pred_contribs else
                "interactions" if self.pred_interactions else "value")
        return booster.strict_shape_of(0, kind, int(np.prod(shape, dtype=np.int64)))[1:]

    def _loose_row_shape(self, booster) -> tuple:
        """row_shape() of strict_shape=False."""
        k, f = booster.n_groups, booster.n_features
        if self.pred_leaf:
            start, end = booster._tree_slice(self.iteration_range)  # checked here, before any block runs
            return (end - start,)
        if self.explain:
            return ((k,) if k > 1 else ()) + ((f + 1, f + 1) if self.pred_interactions else (f + 1,))
        # Multiclass models give (n, K) margins and probabilities; multi:softmax's classes are one column.
        if k > 1 and (self.output_margin or getattr(booster.objective, "output_prob", True)):
            return (k,)
        return ()


def _booster_of(model):
    """The Booster of a model argument: a Booster, train()'s dict, or a future of either (as
    xgboost.dask takes them)."""
    from distributed import Future

    if isinstance(model, Future):
        model = model.result()
    if isinstance(model, dict):
        if "booster" not in model:
            raise ValueError("model is a dict without a 'booster': pass a Booster or the dict train() returns")
        model = model["booster"]
    if not hasattr(model, "n_features") or not hasattr(model, "n_groups"):
        raise ValueError(f"model must be a daskgb Booster or the dict daskgb.dask.train returns, got "
                         f"{type(model).__name__}")
    return model


def _predict_collection(client, booster, X, ask: _Ask, as_frame: bool, base_margin=None):
    """predict() / inplace_predict() of a dask array or dataframe, block by block where it lies."""
    import dask.array as da

    frame = hasattr(X, "columns") and hasattr(X, "map_partitions")
    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got {X.ndim} dimension(s)")
        if X.shape[1] != booster.n_features:
            raise ValueError(f"the model was trained on {booster.n_features} features, X has {X.shape[1]}")
    elif frame:
        if len(X.columns) != booster.n_features:
            raise ValueError(f"the model was trained on {booster.n_features} features, X has {len(X.columns)}")
        # The blocks go to Booster.predict as arrays, without their column names: checked here.
        if ask.validate_features:
            check_feature_names(booster.feature_names, list(X.columns), "the model", "X")
        # Category columns as codes of the model's categories (by name), as Booster.predict recodes.
        X, _, _ = _categorical_frame(X, booster.feature_types is not None, booster.categories or {})
    else:
        raise ValueError(f"X must be a dask array or dataframe, got {type(X).__name__}")
    shape = ask.row_shape(booster)
    handle = _scattered(client, booster)
    if frame and len(shape) <= 1 and (as_frame or base_margin is not None):
        out = _predict_frame(X, handle, ask, shape, base_margin)  # a base margin travels as X's columns
        return out if as_frame else out.to_dask_array()
    if frame:
        if base_margin is not None:
            raise ValueError("base_margin with outputs of more than two dimensions: pass X as a dask array")
        # The partitions as float32 (pd.NA and None as NaN), as an array: of row counts unknown to
        # dask for a value a row (as XGBoost's estimators give them), counted for outputs of more
        # dimensions (leaf ids, contributions), which callers reshape, as XGBoost's are counted.
        arr = X.map_partitions(_float_frame, meta=_float_frame(X._meta)).to_dask_array(lengths=True if shape else None)
    else:
        arr = X.rechunk({1: -1})
    margin = None
    if base_margin is not None:
        if not isinstance(base_margin, da.Array):
            raise ValueError(f"base_margin for a dask array X must be a dask array, got {type(base_margin).__name__}")
        from .data import _aligned

        margin = _aligned(base_margin, arr, "base_margin")
        margin = (margin if margin.ndim == 2 else margin[:, None]).rechunk({1: -1})
    meta = np.empty((0,) * (1 + len(shape)), dtype=np.float32)
    if _on_device_blocks(arr):
        import cupy

        meta = cupy.asarray(meta)
    chunks = (arr.chunks[0],) + tuple((n,) for n in shape)
    args = (arr, handle, ask, shape) + (() if margin is None else (margin,))
    if not shape:
        return da.map_blocks(_predict_block, *args, drop_axis=1, chunks=(arr.chunks[0],), dtype=np.float32,
                             meta=meta)
    new_axis = list(range(2, 1 + len(shape))) or None
    return da.map_blocks(_predict_block, *args, chunks=chunks, new_axis=new_axis, dtype=np.float32, meta=meta)


def _predict_frame(X, handle, ask: _Ask, shape: tuple, base_margin):
    """A dataframe's predictions as a dask Series (a DataFrame of columns 0..k-1 for k outputs a
    row) with X's index and divisions. A base margin travels as columns of X (assign aligns it
    with X's rows by index)."""
    import dask.array as da

    n_margin = 0
    if base_margin is not None:
        # A dask array (a model's margins, say) meets X's rows by position (_aligned).
        if not (hasattr(base_margin, "map_partitions") or isinstance(base_margin, da.Array)):
            raise ValueError("base_margin for a dask dataframe X must be a dask series, dataframe or array, got "
                             f"{type(base_margin).__name__}")
        from .data import _aligned

        base_margin = _aligned(base_margin, X, "base_margin")
        if not hasattr(base_margin, "map_partitions"):  # rows met by position: the array's chunks are X's partitions
            import dask.dataframe as dd

            base_margin = dd.from_dask_array(base_margin, index=X.index)
        cols = [base_margin] if base_margin.ndim == 1 else [base_margin.iloc[:, i]
                                                             for i in range(len(base_margin.columns))]
        n_margin = len(cols)
        X = X.assign(**{f"__daskgb_margin_{i}": c for i, c in enumerate(cols)})
    meta = _frame_output(X._meta, np.zeros((0,) + shape, dtype=np.float32))
    return X.map_partitions(_predict_partition, handle, ask, shape, n_margin, meta=meta)


def _frame_output(part, out):
    """A partition's predictions as a pandas (or cudf) Series / DataFrame on the partition's index."""
    if type(part).__module__.split(".")[0] == "cudf":
        import cudf as frames
    else:
        import pandas as frames
    if out.ndim == 1:
        return frames.Series(out, index=part.index, name=0, dtype=np.float32)
    return frames.DataFrame(out, index=part.index, columns=list(range(out.shape[1])), dtype=np.float32)


def _float_frame(part):
    """A partition (pandas / cudf) with float32 columns, its missing entries (pd.NA, None) NaN."""
    from .data import _as_array

    return type(part)(_as_array(part), index=part.index, columns=part.columns)


def _predict_partition(part, booster, ask: _Ask, shape: tuple, n_margin: int):
    """One dataframe partition's predictions on its index (its last n_margin columns: base margins)."""
    from .data import _as_array

    margin = None
    if n_margin:
        margin = _as_array(part.iloc[:, -n_margin:])
        part = part.iloc[:, :-n_margin]
        margin = margin[:, 0] if n_margin == 1 else margin
    out = _predict_block(_as_array(part), booster, ask, shape, margin)
    return _frame_output(part, out)


def _predict_block(block, booster, ask: _Ask, shape: tuple, margin=None):
    """A block's predictions (numpy, cupy or sparse rows): what ask asks for, of the given row shape."""
    if margin is not None and margin.ndim == 2 and margin.shape[1] == 1:
        margin = margin[:, 0]
    if block.shape[0] == 0:
        xp = _module_of_block(block)
        return xp.zeros((0,) + shape, dtype=np.float32)
    return booster.predict(block, output_margin=ask.output_margin, iteration_range=ask.iteration_range,
                           missing=ask.missing, base_margin=margin, pred_leaf=ask.pred_leaf,
                           pred_contribs=ask.pred_contribs, pred_interactions=ask.pred_interactions,
                           approx_contribs=ask.approx_contribs, strict_shape=ask.strict_shape)


def _module_of_block(block):
    from .data import _module_of

    return _module_of(block)


def _on_device_blocks(arr) -> bool:
    """Whether a dask array's blocks are on a GPU (cupy, or cupyx sparse), by its meta."""
    meta = arr._meta
    return type(meta).__module__.split(".")[0] in ("cupy", "cupyx")


def _predict_matrix(client, booster, m, output_margin, iteration_range):
    """Predictions for a DaskQuantileMatrix built with the model's cuts (a split of the training
    matrix, or an eval set): each worker routes its binned rows; the result is in the matrix's
    row order (X's, or the order take() was given)."""
    import dask.array as da

    from .data import _empty_like_kind

    if m.released:
        raise ValueError("this DaskQuantileMatrix was released (release() freed its rows)")
    if m.n_features != booster.n_features:
        raise ValueError(f"the model was trained on {booster.n_features} features, the matrix has {m.n_features}")
    if getattr(booster, "_train_cuts_token", None) != m.cuts_token:
        raise ValueError("this DaskQuantileMatrix was binned with cuts other than the model's, and keeps no "
                         "collections to predict from (take(), or unpickled); pass the dask array or dataframe")
    handle = _scattered(client, booster)
    columns = sum(_Ask(output_margin, iteration_range).row_shape(booster))
    meta = _empty_like_kind("cupy" if m.device == "cuda" else "numpy")
    holders = [a for a in m.workers if m.rows_per_worker[a]]
    futures = [client.submit(_predict_local, handle, m._local[a], output_margin, tuple(iteration_range), workers=[a],
                             allow_other_workers=False, pure=False) for a in holders]
    # The rows stay on their workers, so the predictions are made there and waited for here:
    # a task pinned to a worker that died (before or during the predict) would wait for ever,
    # and the wait raises within seconds naming the worker instead (dask/watch.py).
    gather_watching(client, [client.submit(_rows_of, f, workers=[a], allow_other_workers=False, pure=False)
                             for f, a in zip(futures, holders)], holders, "prediction")
    # Each worker's rows are in its matrix's order: put back in X's (or take()'s) order.
    return m.in_row_order({a: da.from_delayed(f, shape=(m.rows_per_worker[a], columns) if columns
                                              else (m.rows_per_worker[a],), dtype=np.float32,
                                              meta=meta.reshape((0, 0)) if columns else meta)
                           for f, a in zip(futures, holders)})


def _rows_of(predictions) -> int:
    return int(predictions.shape[0])


# A booster's copy on every worker of a client, kept while the booster lives and is unchanged:
# predicting again sends nothing (a model of 500 trees pickles to megabytes), and the copy's
# packed trees stay packed on the workers between calls.
_SCATTERED = weakref.WeakKeyDictionary()


def _scattered(client, booster):
    """The future of the booster scattered to every worker (once per client and model state)."""
    state = (id(client), client.id, len(booster.trees), booster.best_iteration, tuple(booster.tree_info[-1:]),
             booster.params, frozenset(live_workers(client)))  # a worker that joined gets its copy too
    kept = _SCATTERED.get(booster)
    if kept is not None and kept[0] == state and kept[1].status == "finished":
        return kept[1]
    future = client.scatter(booster, broadcast=True, hash=False)
    _SCATTERED[booster] = (state, future)
    return future


def _predict_local(booster, m, output_margin, iteration_range):
    return booster.predict(m, output_margin=output_margin, iteration_range=iteration_range)
