"""Dask collections -> per-worker partitions kept together, a cluster-wide sketch, and ELLPACK matrices on the workers.

A partition's X, y, weight and base_margin are computed into one future, so
they land on one worker; who_has then says which worker holds which
partitions. No row ever passes through the client or the scheduler: workers
send only small sketch summaries to the client, which merges them (in worker
order, so every run merges alike) into the cuts every worker quantises with.
"""

from __future__ import annotations

import sys
import uuid

import numpy as np

from .. import sketch
from ..backend import array_module
from .watch import gather_watching

# --------------------------------------------------------------------------- on the workers


def _part(X, y, w, m):
    """One partition's pieces, as host or device arrays (dataframes become arrays)."""
    return (_as_array(X), _as_array(y), _as_array(w), _as_array(m))


def _as_array(v):
    if v is None:
        return None
    if hasattr(v, "to_cupy"):  # cudf
        return v.to_cupy()
    if hasattr(v, "to_numpy"):  # pandas
        return v.to_numpy(dtype=np.float32, na_value=np.nan) if v.ndim == 2 else v.to_numpy()
    return v


def _is_gpu_worker() -> bool:
    """A dask-cuda worker: one pinned to a GPU by dask-cuda (its plugins are dask-cuda's)."""
    try:
        from distributed import get_worker

        plugins = get_worker().plugins.values()
    except ValueError:  # not inside a worker
        return False
    return "dask_cuda" in sys.modules and any(type(p).__module__.startswith("dask_cuda") for p in plugins)


def _local_info(*parts):
    """Rows, features and device kind of the partitions a worker holds; checks them first."""
    n_rows, n_features, on_gpu = 0, None, False
    for X, y, w, m in parts:
        if X.ndim != 2:
            raise ValueError(f"X partitions must be 2-dimensional, got {X.ndim} dimension(s)")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X has non-numeric dtype {X.dtype}")
        if n_features is not None and X.shape[1] != n_features:
            raise ValueError(f"X partitions have {n_features} and {X.shape[1]} features")
        n_features = X.shape[1]
        for v, what in ((y, "y (labels)"), (w, "weight"), (m, "base_margin")):
            if v is not None and v.shape[0] != X.shape[0]:
                raise ValueError(f"a partition has {X.shape[0]} rows of X but {v.shape[0]} of {what}")
        n_rows += X.shape[0]
        on_gpu |= array_module(X) is not np
    return {"rows": n_rows, "features": n_features, "gpu": on_gpu or _is_gpu_worker()}


def _stack(parts, i, xp):
    pieces = [p[i] for p in parts if p[i] is not None]
    if not pieces:
        return None
    if len(pieces) != len(parts):
        raise ValueError("some partitions have labels/weights/base margins and others not")
    return xp.concatenate([xp.asarray(p) for p in pieces]) if len(pieces) > 1 else xp.asarray(pieces[0])


def _local_arrays(parts, device):
    import daskgb.backend as be

    xp = be.get_backend(device).xp
    if not parts:
        return None, None, None, None
    X = _stack(parts, 0, xp)
    return X, _stack(parts, 1, xp), _stack(parts, 2, xp), _stack(parts, 3, xp)


def _local_summary(device, missing, budget, *parts):
    """This worker's weighted quantile summary (host arrays), or None without rows."""
    from ..inputs import as_vector

    X, y, w, _ = _local_arrays(parts, device)
    if X is None or X.shape[0] == 0:
        return None
    xp = array_module(X)
    w = as_vector(w, X.shape[0], "weight", xp, nonnegative=True)
    as_vector(y, X.shape[0], "y (labels)", xp)  # NaN / inf labels: an error before any training
    return sketch.summarize(xp.asarray(X, dtype=xp.float32), w, missing, budget).to(np)


def _local_matrix(device, cuts, token, missing, max_bin, n_features, feature_names, has_labels, *parts):
    """The worker's QuantileMatrix, binned with the cluster's cuts (may hold 0 rows)."""
    from ..matrix import QuantileMatrix

    X, y, w, m = _local_arrays(parts, device)
    if X is None:  # a worker that holds none of these rows still takes part in evaluation
        import daskgb.backend as be

        xp = be.get_backend(device).xp
        X = xp.zeros((0, n_features), dtype=np.float32)
        y = xp.zeros(0, dtype=np.float32) if has_labels else None
    return QuantileMatrix(X, y, w, m, missing=missing, max_bin=max_bin, feature_names=feature_names,
                          device=device, cuts=cuts, _cuts_token=token, _allow_empty=True)


# --------------------------------------------------------------------------- on the client


def _row_blocks(X):
    """The row partitions of a dask array or dataframe, as delayed objects, and its features."""
    import dask.array as da

    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional (rows x features), got {X.ndim} dimension(s)")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X has non-numeric dtype {X.dtype}")
        X = X.rechunk({1: -1})  # whole rows in each block
        return list(X.to_delayed()[:, 0]), X.shape[1], None
    if hasattr(X, "to_delayed") and hasattr(X, "columns"):
        bad = [str(c) for c, t in zip(X.columns, X.dtypes) if np.dtype(t).kind not in "biuf"]
        if bad:
            raise ValueError(f"X has non-numeric columns: {bad[:10]}; convert or drop them first")
        return list(X.to_delayed()), len(X.columns), [str(c) for c in X.columns]
    raise ValueError(f"X must be a dask array or a dask dataframe, got {type(X).__name__}")


def _vector_blocks(v, n_blocks, what):
    if v is None:
        return [None] * n_blocks
    import dask.array as da

    if isinstance(v, da.Array):
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim == 2 and what == "base_margin":  # (n, K) margins of a multiclass model
            blocks = list(v.rechunk({1: -1}).to_delayed()[:, 0])
        elif v.ndim != 1:
            raise ValueError(f"{what} must be 1-dimensional")
        else:
            blocks = list(v.to_delayed())
    elif hasattr(v, "to_delayed"):
        blocks = list(v.to_delayed())
    else:
        raise ValueError(f"{what} must be a dask array or series like X, got {type(v).__name__}")
    if len(blocks) != n_blocks:
        raise ValueError(f"{what} has {len(blocks)} partitions but X has {n_blocks}; partition them alike")
    return blocks


class DaskQuantileMatrix:
    """Training data on a Dask cluster: each worker quantises the partitions it holds into an
    ELLPACK matrix with cuts shared by all workers, and keeps it for every later fit.

    X is a dask array or dataframe (numpy, cupy, pandas or cudf partitions); y,
    weight and base_margin are partitioned like X. ``ref`` (another
    DaskQuantileMatrix) shares its cuts and places the partitions on its workers,
    as eval sets need. ``device`` (None: follow the workers) picks where each
    worker quantises.
    """

    def __init__(self, client, X, y=None, weight=None, base_margin=None, missing=np.nan, max_bin=256, ref=None,
                 feature_names=None, device=None):
        from distributed import wait

        from ..backend import DEVICES

        if isinstance(max_bin, bool) or not isinstance(max_bin, (int, np.integer)) or max_bin < 2:
            raise ValueError(f"max_bin must be an integer >= 2, got {max_bin!r}")
        if ref is not None and not isinstance(ref, DaskQuantileMatrix):
            raise ValueError("ref must be a DaskQuantileMatrix")
        if device is not None and device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES} or None, got {device!r}")
        workers = client.scheduler_info()["workers"]
        if not workers:
            raise ValueError("the Dask cluster has no workers")
        self.client = client
        self.missing = float(missing)
        blocks, n_features, names = _row_blocks(X)
        self.n_features = n_features
        self.feature_names = [str(n) for n in feature_names] if feature_names is not None else names
        ys = _vector_blocks(y, len(blocks), "y")
        ws = _vector_blocks(weight, len(blocks), "weight")
        ms = _vector_blocks(base_margin, len(blocks), "base_margin")

        # X's blocks are computed (or found, if X was persisted) first; each partition is then
        # assembled on the worker holding its X block, so rows stay where they already are.
        x_futs = client.compute(blocks)
        vec_futs = [client.compute(v) if v is not None else [None] * len(blocks) for v in (ys, ws, ms)]
        wait(x_futs)
        _raise_first_error(x_futs)
        where = client.who_has(x_futs)
        futures = [client.submit(_part, xf, yf, wf, mf, workers=list(where[xf.key][:1]) or None,
                                 allow_other_workers=not where[xf.key], pure=False)
                   for xf, yf, wf, mf in zip(x_futs, *vec_futs)]
        wait(futures)
        _raise_first_error(futures)
        who_has = client.who_has(futures)
        holder: dict[str, list] = {}
        for f in futures:
            holder.setdefault(who_has[f.key][0], []).append(f)

        addrs = sorted(holder)
        infos = dict(zip(addrs, gather_watching(
            client, [client.submit(_local_info, *holder[a], workers=[a], allow_other_workers=False, pure=False)
                     for a in addrs], addrs, "quantisation")))
        feats = {i["features"] for i in infos.values() if i["features"] is not None}
        if len(feats) > 1 or (feats and feats != {n_features}):
            raise ValueError(f"partitions disagree on the number of features: {sorted(feats)} vs {n_features}")
        self.n_rows = sum(i["rows"] for i in infos.values())
        if self.n_rows == 0:
            raise ValueError("X has no rows (every partition is empty)")
        kinds = {i["gpu"] for a, i in infos.items() if i["rows"] > 0}
        if device is None or device == "auto":
            if len(kinds) > 1:
                raise ValueError("the workers holding data mix GPU (dask-cuda) and CPU workers; use one kind, "
                                 "or pass device='cpu'")
            device = "cuda" if kinds == {True} else "cpu"
        self.device = device

        if ref is None:
            # Workers that hold rows train; others (no partitions, or only empty ones) sit out.
            self.workers = sorted(a for a, i in infos.items() if i["rows"] > 0)
            self.max_bin = int(max_bin)
            budget = sketch.sketch_budget(self.n_rows, self.max_bin)
            summaries = [client.submit(_local_summary, device, self.missing, budget, *holder[a], workers=[a],
                                       allow_other_workers=False, pure=False) for a in self.workers]
            merged = None
            for s in gather_watching(client, summaries, self.workers, "quantisation"):
                if s is not None:
                    merged = s if merged is None else sketch.merge(merged, s)
            self.cuts = sketch.make_cuts(sketch.prune(merged, budget), self.max_bin)
            self.cuts_token = uuid.uuid4().hex
        else:
            if ref.n_features != n_features:
                raise ValueError(f"ref has {ref.n_features} features, this data has {n_features}")
            self.workers, self.max_bin, self.cuts, self.cuts_token = ref.workers, ref.max_bin, ref.cuts, ref.cuts_token
            if self.feature_names is None:
                self.feature_names = ref.feature_names
            holder = _place_on(holder, self.workers)

        self._local = {
            a: client.submit(_local_matrix, device, self.cuts, self.cuts_token, self.missing, self.max_bin,
                             n_features, self.feature_names, y is not None, *holder.get(a, []), workers=[a],
                             allow_other_workers=False, pure=False)
            for a in self.workers
        }
        # Only wait here: the matrices stay on their workers.
        done = [client.submit(_nbytes, self._local[a], workers=[a], allow_other_workers=False, pure=False)
                for a in self.workers]
        self.nbytes_per_worker = dict(zip(self.workers, gather_watching(client, done, self.workers, "quantisation")))
        self._has_labels = y is not None

    def __repr__(self):
        return (f"DaskQuantileMatrix(n_rows={self.n_rows}, n_features={self.n_features}, max_bin={self.max_bin}, "
                f"device={self.device!r}, workers={len(self.workers)})")


def _nbytes(m) -> int:
    """The ELLPACK bytes a worker's matrix holds (what is waited on, small to send back)."""
    return int(m.ellpack.nbytes)


def _raise_first_error(futures) -> None:
    for f in futures:
        if f.status == "error":
            f.result()


def _place_on(holder: dict, workers: list) -> dict:
    """Partitions assigned to the given workers: kept where they are if that worker is one,
    else dealt round-robin (Dask moves them worker to worker, never through the client)."""
    out: dict[str, list] = {a: [] for a in workers}
    k = 0
    for a in sorted(holder):
        for f in holder[a]:
            if a in out:
                out[a].append(f)
            else:
                out[workers[k % len(workers)]].append(f)
                k += 1
    return out

