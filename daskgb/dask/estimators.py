"""DaskGBRegressor, DaskGBClassifier and DaskGBRanker (and the random forests DaskGBRFRegressor and
DaskGBRFClassifier): the scikit-learn style front end on a Dask cluster.

Thin: the parameters and their checks are the in-process estimators'; fit builds
DaskQuantileMatrix objects and calls daskgb.dask.train; predict returns lazy
dask arrays. Labels are encoded on the workers; only the distinct class labels
reach the client.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from ..arrays import array_module, to_host
from ..sklearn import (GBClassifier, GBRanker, GBRegressor, _check_rank_objective, _checkpointing,
                       _fit_feature_weights, _RandomForest, _score_metric, _split_qid)
from .data import DaskQuantileMatrix, encode_labels
from .prediction import predict_array as predict
from .training import run
from .watch import gather_watching

__all__ = ["DaskGBRegressor", "DaskGBClassifier", "DaskGBRanker", "DaskGBRFRegressor", "DaskGBRFClassifier"]


def _score_targets(X, y, sample_weight):
    """y and sample_weight for score(): a DaskQuantileMatrix carries its own."""
    if not isinstance(X, DaskQuantileMatrix):
        if y is None:
            raise ValueError("score needs y (or X a DaskQuantileMatrix, which carries its labels)")
        return y, sample_weight
    if y is not None or sample_weight is not None:
        raise ValueError("a DaskQuantileMatrix carries its labels and weights: score(matrix) with y=None and no "
                         "sample_weight")
    if not X.has_labels:
        raise ValueError("the DaskQuantileMatrix has no labels (y) to score against")
    return X.labels(), X.weights()


def _release(matrices) -> None:
    """Free the workers' memory of the matrices a fit made, as the fit ends or fails: a failed
    fit's traceback keeps them referenced (in a notebook, until the next error), and their
    futures would hold the rows and the ELLPACK matrices on the workers until then."""
    for m in matrices:
        try:
            m.release()
        except Exception:  # the cluster may be gone: nothing left to free
            pass


def _as_dask_vector(y, what):
    import dask.array as da

    if y is None:
        return None
    if isinstance(y, da.Array):
        return y
    if hasattr(y, "to_dask_array"):
        return y.to_dask_array()
    raise ValueError(f"{what} must be a dask array or series, got {type(y).__name__}")


def _is_dask(X) -> bool:
    import dask

    return isinstance(X, DaskQuantileMatrix) or dask.is_dask_collection(X)


def _computed(a):
    """A dask collection computed (feature weights are one number per feature), else a as it is."""
    import dask

    return a.compute() if dask.is_dask_collection(a) else a


def _missing_as_nan(X, missing):
    """X with the missing-value marker as NaN, block by block, as training read it (predict's
    blocks reach Booster.predict without the marker). Category columns keep their values."""
    import dask.array as da

    if isinstance(X, DaskQuantileMatrix) or np.isnan(float(missing)):
        return X
    if isinstance(X, da.Array):
        dtype = X.dtype if X.dtype.kind == "f" else np.dtype(np.float32)
        return X.map_blocks(_block_missing_as_nan, float(missing), dtype=dtype)
    if hasattr(X, "map_partitions"):
        return X.map_partitions(_frame_missing_as_nan, float(missing))
    return X


def _block_missing_as_nan(block, missing):
    xp = array_module(block)
    block = block if block.dtype.kind == "f" else block.astype(xp.float32)
    return xp.where(block == missing, xp.asarray(np.nan, dtype=block.dtype), block)


def _frame_missing_as_nan(frame, missing):
    from ..inputs import is_numeric_dtype

    frame = frame.copy()
    for c in frame.columns:
        if is_numeric_dtype(frame[c].dtype):
            column = frame[c].astype(np.float64) if frame[c].dtype.kind != "f" else frame[c]
            frame[c] = column.mask(column == missing)
    return frame


def _aligned(p, y):
    """The prediction p and the labels y as dask arrays of the same chunks: a dask dataframe's
    partitions have unknown lengths until counted, and the two may be split differently."""
    if any(np.isnan(c) for c in p.chunks[0]):
        p = p.compute_chunk_sizes()
    if any(np.isnan(c) for c in y.chunks[0]):
        y = y.compute_chunk_sizes()
    if p.shape[0] != y.shape[0]:
        raise ValueError(f"X has {p.shape[0]} rows and y {y.shape[0]}")
    if y.chunks[0] != p.chunks[0]:
        y = y.rechunk({0: p.chunks[0]})
    return p, y


def _label_values(m) -> np.ndarray:
    """The distinct labels of a worker's matrix."""
    return np.unique(to_host(m.label))


def _check_seen(found, known) -> None:
    unseen = np.setdiff1d(found, known)
    if len(unseen):
        raise ValueError(f"eval_set labels {unseen.tolist()} are not among the training classes {known.tolist()}")


def _encoding(classes):
    """The classes a matrix encodes its labels by, or None where the labels already are the
    class indices 0..K-1 (they then go in as they are, as float32)."""
    if classes.dtype.kind in "biuf" and np.array_equal(classes, np.arange(classes.size)):
        return None
    return classes


class _ClassesOnWorkers:
    """A classifier's classes from its labels' distinct values as the training matrix finds them
    (DaskQuantileMatrix's _label_classes): training(found) checks them, sets classes_, checks
    the eval sets' (eval_classes: futures of their distinct labels) and returns the training
    matrix's encoding; the eval matrices then take that encoding (encoding())."""

    def __init__(self, model, eval_classes=()):
        self.model = model
        self.eval_classes = list(eval_classes)

    def training(self, found):
        self.model._fit_labels(found)  # checks the classes and sets classes_
        for future in self.eval_classes:
            _check_seen(np.unique(to_host(future.result())), self.model.classes_)
        return self.encoding()

    def encoding(self):
        return _encoding(self.model.classes_)


class _DaskModel:
    """fit / predict on a Dask cluster, shared by both estimators."""

    def __sklearn_clone__(self):
        """scikit-learn's clone: the parameters deep-copied as clone copies them, but the client
        shared (a Client cannot be copied), so that a search's clones train on the same cluster."""
        import copy

        params = self.get_params(deep=False)
        return type(self)(**{k: v if k == "client" else copy.deepcopy(v) for k, v in params.items()})

    def __getstate__(self):
        # A Client does not pickle (nor would it mean anything elsewhere): a pickled estimator
        # keeps its model and finds the default client where it is loaded, as XGBoost's do.
        state = dict(self.__dict__)
        state["client"] = None
        return state

    def _get_client(self):
        """client=, else the fit's client inside a Dask task (_client_scope), else the current one
        (distributed.get_client: the worker's client in a task, as XGBoost's _get_client)."""
        if self.client is not None:
            return self.client
        scoped = getattr(self, "_scoped_client", None)
        if scoped is not None:
            return scoped
        from distributed import get_client

        try:
            return get_client()
        except ValueError:
            raise ValueError(f"{type(self).__name__} needs a Dask client: pass client=, or create a "
                             "distributed.Client first") from None

    @contextlib.contextmanager
    def _client_scope(self):
        """For a fit inside a Dask task without client=: the worker's client, the task seceded
        from the worker's thread pool while the fit waits (distributed.worker_client), so that the
        training tasks the fit submits can run on that worker too."""
        from distributed import get_worker, worker_client

        try:
            get_worker()
        except ValueError:  # not in a task
            yield
            return
        if self.client is not None:
            yield
            return
        with worker_client() as client:
            self._scoped_client = client
            try:
                yield
            finally:
                self._scoped_client = None

    def fit(self, X, y=None, sample_weight=None, eval_set=None, sample_weight_eval_set=None, verbose=True, *,
            checkpoint_dir=None, checkpoint_every=None, resume=False, xgb_model=None, feature_weights=None,
            base_margin=None, base_margin_eval_set=None):
        """Train n_estimators rounds on dask collections; eval_set is a list of (X, y) dask pairs.
        X may also be a DaskQuantileMatrix (y=None: its labels and weights are inside), so that
        a parameter search quantises once; its eval_set then holds (matrix, None) pairs.
        checkpoint_dir / checkpoint_every / resume: as daskgb.dask.train takes them.
        feature_weights: as the constructor's, for this fit (a dask array is computed).
        base_margin (and base_margin_eval_set, one per eval_set entry): each row's starting
        margin, partitioned like X (XGBoost's names).
        Inside a Dask task, without client=, the fit runs on the worker's client."""
        with self._client_scope():
            self._fit_feature_weights = _fit_feature_weights(self, _computed(feature_weights))
            return self._fit(X, y, sample_weight, eval_set, sample_weight_eval_set, verbose, checkpoint_dir,
                             checkpoint_every, resume, xgb_model, base_margin, base_margin_eval_set)

    def _fit(self, X, y, sample_weight, eval_set, sample_weight_eval_set, verbose, checkpoint_dir, checkpoint_every,
             resume, xgb_model, base_margin=None, base_margin_eval_set=None):
        self._checkpointing = _checkpointing(checkpoint_dir, checkpoint_every, resume)
        self._continuing = {} if xgb_model is None else {"xgb_model": xgb_model}
        if isinstance(X, DaskQuantileMatrix):
            if base_margin is not None or base_margin_eval_set is not None:
                raise ValueError("a DaskQuantileMatrix carries its base margins: build it with base_margin=")
            return self._fit_matrix(X, y, sample_weight, eval_set, sample_weight_eval_set, verbose)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        client = self._get_client()
        eval_set = list(eval_set or ())
        labelled = time.perf_counter()
        (labels, *eval_labels), classes = self._dask_labels([y] + [y_eval for _, y_eval in eval_set])
        labels_s = time.perf_counter() - labelled
        device = None if self.device in (None, "auto") else self.device
        for name, given in (("sample_weight_eval_set", sample_weight_eval_set),
                            ("base_margin_eval_set", base_margin_eval_set)):
            if given is not None and len(given) != len(eval_set):
                raise ValueError(f"{name} has {len(given)} entries, eval_set has {len(eval_set)}")
        built: list = []
        started = time.perf_counter()
        try:
            # Matrices are built by keyword, as XGBoost's estimators build theirs.
            dtrain = DaskQuantileMatrix(client=client, X=X, y=labels, weight=sample_weight, base_margin=base_margin,
                                        missing=self.missing, max_bin=self._matrix_max_bin(), device=device,
                                        feature_types=self.feature_types, enable_categorical=self.enable_categorical,
                                        _label_classes=None if classes is None else classes.training)
            built.append(dtrain)
            evals = []
            for i, ((X_eval, y_given), y_eval) in enumerate(zip(eval_set, eval_labels)):
                w = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
                m = None if base_margin_eval_set is None else base_margin_eval_set[i]
                if X_eval is X and y_given is y and w is sample_weight and m is base_margin:
                    # The training data itself (the same objects): its matrix, not a second one, as XGBoost does.
                    evals.append((dtrain, f"validation_{i}"))
                    continue
                evals.append((DaskQuantileMatrix(client=client, X=X_eval, y=y_eval, weight=w, base_margin=m,
                                                 missing=self.missing, ref=dtrain, device=device,
                                                 _encode_labels=None if classes is None else classes.encoding()),
                              f"validation_{i}"))
                built.append(evals[-1][0])
            # Where a fit's time went, for benchmarks (examples/benchmark_scaling.py): the labels'
            # pass (a classifier's classes), quantising the matrices here, _train's part, and
            # freeing the matrices.
            self._fit_phases = {"labels_s": labels_s, "quantise_s": time.perf_counter() - started}
            # After the matrices: a classifier's class count (found as they were built) picks the objective.
            return self._train(self._train_params(), dtrain, evals, verbose, X)
        finally:
            released = time.perf_counter()
            _release(built)
            if hasattr(self, "_fit_phases"):
                self._fit_phases["release_s"] = time.perf_counter() - released

    def _fit_matrix(self, dtrain, y, sample_weight, eval_set, sample_weight_eval_set, verbose):
        """fit on a DaskQuantileMatrix built once: no quantising, the rows stay where they are."""
        if y is not None or sample_weight is not None or sample_weight_eval_set is not None:
            raise ValueError("a DaskQuantileMatrix carries its labels and weights: fit(dtrain) with y=None and no "
                             "sample weights")
        if not dtrain.has_labels:
            raise ValueError("the DaskQuantileMatrix has no labels (y)")
        evals = []
        for i, item in enumerate(eval_set or ()):
            m, label = (item[0], item[1] if len(item) > 1 else None) if isinstance(item, (tuple, list)) else (item, None)
            if not isinstance(m, DaskQuantileMatrix) or label is not None:
                raise ValueError("fitting on a DaskQuantileMatrix, eval_set holds (DaskQuantileMatrix, None) pairs")
            evals.append((m, f"validation_{i}"))
        self._matrix_labels(dtrain)
        self._fit_phases = {"quantise_s": 0.0}
        return self._train(self._train_params(), dtrain, evals, verbose, None)

    def _matrix_labels(self, dtrain) -> None:
        """What fit learns from the labels of a prebuilt matrix (the classifier: its classes)."""

    def _train(self, params, dtrain, evals, verbose, X):
        started = time.perf_counter()
        out = run(self._get_client(), self._training_options(params, verbose, evals), dtrain, evals)
        # train_s: the training tasks, their set-up included (setup_s: the slowest rank's joining of
        # the collective and NCCL communicator, as each rank timed it).
        self._fit_phases = {**getattr(self, "_fit_phases", {}), "train_s": time.perf_counter() - started,
                            "setup_s": max((c.get("setup_s", 0.0) for c in out["collective"]), default=0.0)}
        self._Booster = out["booster"]
        self.evals_result_ = out["history"]
        self._collective = out["collective"]
        self.n_features_in_ = dtrain.n_features
        if hasattr(X, "columns") and dtrain.feature_names is not None:
            self.feature_names_in_ = np.asarray(dtrain.feature_names, dtype=object)
        return self

    def _margin_or_value(self, X, output_margin=False, iteration_range=None, **explain):
        self._check_fitted()
        if not _is_dask(X):
            # numpy, pandas, ...: predicted here, as the in-process estimator does (a model loaded
            # from a pickle or a file needs no cluster for that).
            return super()._margin_or_value(X, output_margin, iteration_range, **explain)
        return predict(self._get_client(), self._Booster, _missing_as_nan(X, self.missing),
                       output_margin=output_margin, iteration_range=iteration_range or (0, 0), **explain)


class DaskGBRegressor(_DaskModel, GBRegressor):
    """Gradient-boosted trees for regression on a Dask cluster (XGBoost's DaskXGBRegressor parameters)."""

    def __init__(self, *, client=None, objective="reg:squarederror", **kwargs):
        self.client = client
        super().__init__(objective=objective, **kwargs)

    def _dask_labels(self, ys):
        """The training labels, then the eval sets', as dask vectors the matrices take, and None
        (a classifier's: what encodes them as the matrices are built, _ClassesOnWorkers)."""
        return [_as_dask_vector(y, "y") for y in ys], None

    def score(self, X, y=None, sample_weight=None):
        """R² of predict(X) against y, computed on the workers. X may be a DaskQuantileMatrix
        (y=None: its labels and weights are used), as a parameter search scores a split."""
        import dask.array as da

        y, sample_weight = _score_targets(X, y, sample_weight)
        if not _is_dask(X):
            return GBRegressor.score(self, X, y, sample_weight)
        p, y = _aligned(self.predict(X).astype(np.float64), _as_dask_vector(y, "y").astype(np.float64))
        w = da.ones_like(y) if sample_weight is None else _aligned(p, _as_dask_vector(sample_weight,
                                                                                       "sample_weight"))[1]
        mean = (w * y).sum() / w.sum()
        residual, total = da.compute((w * (y - p) ** 2).sum(), (w * (y - mean) ** 2).sum())
        if total == 0.0:
            return 1.0 if residual == 0.0 else 0.0
        return float(1.0 - residual / total)


class DaskGBClassifier(_DaskModel, GBClassifier):
    """Classification on a Dask cluster (XGBoost's DaskXGBClassifier parameters).

    predict and predict_proba return lazy dask arrays; labels of any type (strings
    too) are encoded on the workers in sorted order (classes_); more than two
    classes train multi:softprob.
    """

    def __init__(self, *, client=None, objective="binary:logistic", **kwargs):
        self.client = client
        super().__init__(objective=objective, **kwargs)

    def _dask_labels(self, ys):
        """The training labels, then the eval sets', as the matrices take them, and what encodes
        them. Numbers (bool, integers, floats) go to the matrices as they are: each matrix finds
        their classes in its first pass over its partitions and encodes them as it bins X
        (_ClassesOnWorkers), so that a fit makes no pass over the training labels of its own (on
        4 GPUs, 40M rows, that pass took 0.07-0.18 s of a 3.3 s fit). The eval sets' classes are
        found meanwhile (futures), for the training matrix to check them before it sketches: an
        eval label that no training row has fails before any quantising. Others (strings,
        categories) are encoded here, every vector's classes found in one pass over the partitions."""
        import dask
        import dask.array as da

        ys = [_as_dask_vector(y, "y") for y in ys]
        if all(y.dtype.kind in "biuf" for y in ys):
            client = self._get_client()
            return ys, _ClassesOnWorkers(self, [client.compute(da.unique(y)) for y in ys[1:]])
        classes, *eval_classes = (np.unique(c) for c in dask.compute(*(da.unique(y) for y in ys)))
        self._fit_labels(classes)  # checks the classes and sets classes_
        known = self.classes_
        for found in eval_classes:
            _check_seen(found, known)
        if _encoding(known) is None:  # (numbers beside strings in an eval set)
            return ys, None

        return [y.map_blocks(encode_labels, classes=known, dtype=np.float32) for y in ys], None

    def _matrix_labels(self, dtrain) -> None:
        """A prebuilt matrix holds labels as XGBoost's DMatrix does: class indices 0..K-1."""
        client = self._get_client()
        found = gather_watching(client, [client.submit(_label_values, dtrain._local[a], workers=[a],
                                                       allow_other_workers=False, pure=False)
                                         for a in dtrain.workers], dtrain.workers, "reading the labels")
        classes = np.unique(np.concatenate(found))
        if not np.array_equal(classes, np.arange(classes.size)):
            raise ValueError(f"a DaskQuantileMatrix's labels must be class indices 0..K-1 for {type(self).__name__}; "
                             f"they are {classes[:10].tolist()}")
        self._fit_labels(classes)

    def predict_proba(self, X, iteration_range=None, *, base_margin=None):
        """Lazy (n, n_classes_) dask array of class probabilities, columns in classes_ order (for
        numpy or pandas X, computed here, as GBClassifier's); base_margin: margins to start from,
        partitioned like X."""
        import dask.array as da

        if not _is_dask(X):
            return GBClassifier.predict_proba(self, X, iteration_range, base_margin=base_margin)

        if self._multiclass:
            objective = self.get_booster().objective
            margin = self._margin_or_value(X, True, iteration_range, base_margin=base_margin)
            return margin.map_blocks(lambda b: objective.eval_transform(array_module(b), b), dtype=np.float32)
        p = self._margin_or_value(X, False, iteration_range, base_margin=base_margin)
        return da.stack([1.0 - p, p], axis=1)

    def predict(self, X, output_margin=False, iteration_range=None, *, base_margin=None):
        """Lazy dask array of predicted labels (or margins with output_margin=True); for numpy or
        pandas X, computed here, as GBClassifier's; base_margin as predict_proba's."""
        if not _is_dask(X):
            return GBClassifier.predict(self, X, output_margin, iteration_range, base_margin=base_margin)
        multiclass = self._multiclass
        p = self._margin_or_value(X, output_margin or multiclass, iteration_range, base_margin=base_margin)
        if output_margin:
            return p
        classes = self.classes_

        def to_labels(b):
            xp = array_module(b)
            index = xp.argmax(b, axis=1) if multiclass else (b > 0.5).astype(np.int64)
            if xp is not np and classes.dtype.kind in "biuf":
                return xp.asarray(classes)[index]
            return classes[to_host(index)]

        if multiclass:
            return p.map_blocks(to_labels, drop_axis=1, dtype=classes.dtype)
        return p.map_blocks(to_labels, dtype=classes.dtype)

    def score(self, X, y=None, sample_weight=None):
        """Accuracy of predict(X) against y, computed on the workers. X may be a
        DaskQuantileMatrix (y=None: its labels, class indices, and weights are used)."""
        import dask.array as da

        y, sample_weight = _score_targets(X, y, sample_weight)
        if not _is_dask(X):
            return GBClassifier.score(self, X, y, sample_weight)
        p, y = _aligned(self.predict(X), _as_dask_vector(y, "y"))
        correct = (p == y).astype(np.float64)
        if sample_weight is None:
            return float(correct.mean().compute())
        w = _aligned(p, _as_dask_vector(sample_weight, "sample_weight"))[1].astype(np.float64)
        num, den = da.compute((w * correct).sum(), w.sum())
        return float(num / den)


class DaskGBRFRegressor(_RandomForest, DaskGBRegressor):
    """A random forest for regression on a Dask cluster (XGBoost's DaskXGBRFRegressor): GBRFRegressor's
    parameters, DaskGBRegressor's fit and predict."""


class DaskGBRFClassifier(_RandomForest, DaskGBClassifier):
    """A random forest for classification on a Dask cluster (XGBoost's DaskXGBRFClassifier):
    GBRFClassifier's parameters, DaskGBClassifier's fit and predict."""


class DaskGBRanker(_DaskModel, GBRanker):
    """Learning to rank on a Dask cluster (XGBoost's DaskXGBRanker parameters).

    qid is a dask array or series partitioned like X (or a qid column of a dask
    dataframe X); every query group must lie whole in one partition (a qid seen in
    two partitions is an error). sample_weight is partitioned like X too: one
    weight per row, the same for all rows of a group. The model equals the one
    trained in process on the same rows.
    """

    def __init__(self, *, client=None, objective="rank:ndcg", **kwargs):
        self.client = client
        super().__init__(objective=objective, **kwargs)

    def fit(self, X, y=None, *, group=None, qid=None, sample_weight=None, eval_set=None, eval_group=None,
            eval_qid=None, verbose=True, sample_weight_eval_set=None, checkpoint_dir=None, checkpoint_every=None,
            resume=False, xgb_model=None):
        """Train n_estimators rounds on dask collections with their query groups (qid=, or group= sizes
        when X's partition sizes are known); eval_set, eval_qid / eval_group and sample_weight_eval_set
        as in GBRanker.fit. X may also be a DaskQuantileMatrix built with its qid (y=None).
        checkpoint_dir / checkpoint_every / resume: as daskgb.dask.train takes them."""
        with self._client_scope():
            return self._fit_ranker(X, y, group, qid, sample_weight, eval_set, eval_group, eval_qid, verbose,
                                    sample_weight_eval_set, checkpoint_dir, checkpoint_every, resume, xgb_model)

    def _fit_ranker(self, X, y, group, qid, sample_weight, eval_set, eval_group, eval_qid, verbose,
                    sample_weight_eval_set, checkpoint_dir, checkpoint_every, resume, xgb_model):
        self._checkpointing = _checkpointing(checkpoint_dir, checkpoint_every, resume)
        self._continuing = {} if xgb_model is None else {"xgb_model": xgb_model}
        if isinstance(X, DaskQuantileMatrix):
            _check_rank_objective(self.objective)
            if group is not None or qid is not None or eval_group is not None or eval_qid is not None:
                raise ValueError("a DaskQuantileMatrix carries its query groups: fit(dtrain) without group or qid")
            return self._fit_matrix(X, y, sample_weight, eval_set, sample_weight_eval_set, verbose)
        client = self._get_client()
        device = None if self.device in (None, "auto") else self.device

        built: list = []

        def matrix(X, y, weight, qid, group, ref):
            built.append(DaskQuantileMatrix(client=client, X=X, y=_as_dask_vector(y, "y"), weight=weight,
                                            missing=self.missing,
                                            max_bin=self._matrix_max_bin(), ref=ref, device=device,
                                            qid=_as_dask_vector(qid, "qid"), group=group,
                                            feature_types=self.feature_types if ref is None else None,
                                            enable_categorical=self.enable_categorical))
            return built[-1]

        try:
            return self._fit_ranking(matrix, _split_qid, X, y, group, qid, sample_weight, eval_set, eval_group,
                                     eval_qid, verbose, sample_weight_eval_set)
        finally:
            _release(built)

    def predict(self, X, output_margin=False, iteration_range=None, *, base_margin=None):
        """Lazy dask array of ranking scores (a qid column in X is ignored); base_margin: margins
        to start from, partitioned like X."""
        X, _ = _split_qid(X, None)
        return self._margin_or_value(X, output_margin, iteration_range, base_margin=base_margin)

    def score(self, X, y, qid=None):
        """The last evaluation metric (e.g. ndcg@32) of predict(X) against y over the query groups of qid
        (or X's qid column), exact over all queries: each partition scores its whole groups on its worker
        and only the sums come back. A qid in two partitions is an error."""
        import dask

        X, qid = _split_qid(X, qid)
        if qid is None:
            raise ValueError("DaskGBRanker.score needs the query ids: qid= or a qid column in X")
        booster = self.get_booster()
        name, k = _score_metric(booster)
        pred = self.predict(X)
        y, qid = _as_dask_vector(y, "y"), _as_dask_vector(qid, "qid")
        blocks = [p.to_delayed() for p in (pred, y, qid)]
        if not len(blocks[0]) == len(blocks[1]) == len(blocks[2]):
            raise ValueError("X, y and qid must be partitioned alike")
        parts = [dask.delayed(_partition_metric)(name, p, t, q, booster.params.ndcg_exp_gain, k)
                 for p, t, q in zip(*(list(b) for b in blocks))]
        results = self._get_client().compute(parts, sync=True) if parts else []
        keys = np.concatenate([r[2] for r in results]) if results else np.zeros(0)
        unique, counts = np.unique(keys, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"qid {int(unique[counts > 1][0])} is in more than one partition; every query group "
                             "must lie whole in one partition")
        num = sum(r[0] for r in results)
        den = sum(r[1] for r in results)
        return float(num / den) if den > 0 else 0.0


def _partition_metric(name, pred, y, qid, exp_gain, default_k):
    """(weighted metric sum, weight sum, qids) of one partition's whole query groups."""
    from ..arrays import array_module, to_host
    from ..ranking import groups_from_qid, metric_sums

    xp = array_module(pred)
    y = xp.asarray(y, dtype=xp.float32)
    groups = groups_from_qid(qid, int(y.shape[0]))
    num, den = metric_sums(name, xp, y, pred, groups, exp_gain, default_k)
    num, den = float(num), float(den)
    keys = to_host(qid)[groups.ptr[:-1]] if groups.n_groups else np.zeros(0)
    return num, den, np.asarray(keys)

