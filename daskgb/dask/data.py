"""Dask collections -> per-worker partitions kept together, a cluster-wide sketch, and ELLPACK matrices on the workers.

A partition's X, y, weight, base_margin (and survival bounds) are computed into one future, so
they land on one worker; who_has then says which worker holds which
partitions. No row ever passes through the client or the scheduler: workers
send only small sketch summaries to the client, which merges them (in worker
order, so every run merges alike) into the cuts every worker quantises with.
"""

from __future__ import annotations

import sys
import uuid

import numpy as np

from .. import config, sketch
from ..arrays import array_module, to_host
from ..inputs import (category_columns, check_feature_names, check_unique_names, feature_types_of,
                      is_numeric_dtype, recode)
from ..matrix import _survival_bounds, categorical_mask, check_paging, xgboost_names
from .plugin import register
from .watch import gather_watching, live_workers
from .worker import device_in_use, give_back_device_memory_when_idle

# --------------------------------------------------------------------------- on the workers


def _part(X, y, w, m, q=None, lower=None, upper=None, index=0):
    """One partition's pieces, as host or device arrays (dataframes become arrays). q is the partition's
    query ids (an array like y), its group sizes (a _GroupSizes from the client), or None; lower and
    upper its survival bounds (label_lower_bound, label_upper_bound), checked here as QuantileMatrix
    checks them, the error naming the partition (index: its place in the collection)."""
    X = _as_array(X)
    if _is_sparse(X):  # scipy or cupyx sparse blocks: CSR, as QuantileMatrix reads them
        X = X.tocsr()
    lower, upper = _as_array(lower), _as_array(upper)
    if lower is not None:
        try:
            lower, upper = _survival_bounds(lower, upper, X.shape[0], _module_of(X))
        except ValueError as e:
            raise ValueError(f"partition {index} of the data: {e}") from None
    return (X, _as_array(y), _as_array(w), _as_array(m), q if isinstance(q, _GroupSizes) else _as_array(q),
            lower, upper)


def _slice_part(part, lo: int, hi: int):
    """Rows lo..hi of a partition (_part's pieces): the part of it a worker keeps, or gives to
    another worker, when the workers' rows are cut to even (_even_rows). No query groups here."""
    X, y, w, m, q, lower, upper = part
    return tuple(None if v is None else v[lo:hi] for v in (X, y, w, m)) + (q,) + \
        tuple(None if v is None else v[lo:hi] for v in (lower, upper))


class _GroupSizes:
    """The query group sizes of one partition, cut by the client from DaskQuantileMatrix(group=...);
    ``first`` is the global index of its first group."""

    def __init__(self, sizes, first: int):
        self.sizes, self.first = np.asarray(sizes, dtype=np.int64), int(first)


def _partition_groups(q, n_rows):
    """The query groups of one partition, keyed by qid (qid=) or by global group index (group=)."""
    from .. import ranking

    if isinstance(q, _GroupSizes):
        g = ranking.groups_from_sizes(q.sizes, n_rows)
        g.keys = g.keys + q.first
        return g
    g = ranking.groups_from_qid(q, n_rows)
    g.keys = np.asarray(ranking._host_vector(q, "qid")[g.ptr[:-1]], dtype=np.int64)
    return g


def _as_array(v):
    """A partition's pandas / cudf piece as a numpy / cupy array: a frame as float32, its
    missing entries (NaN, None, pd.NA of the nullable dtypes Int64, Float64, boolean) NaN, as
    in process; a series of a nullable dtype as float64 (NaN where pd.NA), others as they are."""
    if v is None:
        return None
    if hasattr(v, "to_cupy"):  # cudf
        if v.ndim == 2:
            return v.to_cupy(dtype=np.float32, na_value=np.nan)
        return v.to_cupy(dtype=np.float64, na_value=np.nan) if _is_nullable(v.dtype) else v.to_cupy()
    if hasattr(v, "to_numpy"):  # pandas
        if v.ndim == 2:
            return v.to_numpy(dtype=np.float32, na_value=np.nan)
        return v.to_numpy(dtype=np.float64, na_value=np.nan) if _is_nullable(v.dtype) else v.to_numpy()
    return v


def _is_nullable(dtype) -> bool:
    """A pandas (or cudf) extension dtype of numbers or booleans that holds pd.NA: Int64, Float64, boolean."""
    return not isinstance(dtype, np.dtype) and str(dtype).lower().startswith(("int", "uint", "float", "bool"))


def _is_sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _module_of(X):
    """numpy or cupy: where a block's values are (a sparse block's are in its data)."""
    return array_module(X.data if _is_sparse(X) else X)


def _is_gpu_worker() -> bool:
    """A dask-cuda worker: one pinned to a GPU by dask-cuda (its plugins are dask-cuda's)."""
    try:
        from distributed import get_worker

        plugins = get_worker().plugins.values()
    except ValueError:  # not inside a worker
        return False
    return "dask_cuda" in sys.modules and any(type(p).__module__.startswith("dask_cuda") for p in plugins)


def _local_info(*parts, label_values=False):
    """Rows, features and device kind of the partitions a worker holds, and the keys of each partition's
    query groups (qids, or global group indices); checks them first. label_values: also the
    distinct labels of its partitions (host, their own type), a classifier's classes."""
    n_rows, n_features, on_gpu, keys, part_rows, labels = 0, None, False, [], [], []
    for X, y, w, m, q, _, _ in parts:
        if X.ndim != 2:
            raise ValueError(f"X partitions must be 2-dimensional, got {X.ndim} dimension(s)")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X has non-numeric dtype {X.dtype}")
        if n_features is not None and X.shape[1] != n_features:
            raise ValueError(f"X partitions have {n_features} and {X.shape[1]} features")
        n_features = X.shape[1]
        for v, what in ((y, "y (labels)"), (w, "weight"), (m, "base_margin"),
                        (None if isinstance(q, _GroupSizes) else q, "qid")):
            if v is not None and v.shape[0] != X.shape[0]:
                raise ValueError(f"a partition has {X.shape[0]} rows of X but {v.shape[0]} of {what}")
        if q is not None:
            keys.append(_partition_groups(q, X.shape[0]).keys)
        n_rows += X.shape[0]
        part_rows.append(int(X.shape[0]))
        on_gpu |= _module_of(X) is not np
        if label_values and y is not None:
            labels.append(to_host(array_module(y).unique(y)))
    return {"rows": n_rows, "features": n_features, "gpu": on_gpu or _is_gpu_worker(), "group_keys": keys,
            "part_rows": part_rows, "label_values": np.unique(np.concatenate(labels)) if labels else None}


def _stack(parts, i, xp):
    pieces = [p[i] for p in parts if p[i] is not None]
    if not pieces:
        return None
    if len(pieces) != len(parts):
        raise ValueError("some partitions have labels/weights/base margins and others not")
    if _is_sparse(pieces[0]):
        return _stack_sparse(pieces)
    return xp.concatenate([xp.asarray(p) for p in pieces]) if len(pieces) > 1 else xp.asarray(pieces[0])


def _stack_sparse(pieces):
    """CSR blocks stacked into one CSR matrix where they are (QuantileMatrix moves it to its device)."""
    if len(pieces) == 1:
        return pieces[0]
    if _module_of(pieces[0]) is np:
        import scipy.sparse as sparse
    else:
        import cupyx.scipy.sparse as sparse
    return sparse.vstack(pieces, format="csr")


def _host_rows(X):
    """A block of rows in host memory (numpy, or scipy CSR for a sparse block)."""
    if _is_sparse(X) and _module_of(X) is not np:
        return X.get()
    return X if _is_sparse(X) else to_host(X)


def _local_arrays(parts, device, features_on_host: bool = False):
    """The worker's partitions stacked on the device, as (X, y, weight, base_margin, lower bound,
    upper bound); with features_on_host, X stays in host memory (a paged matrix quantises it a
    piece at a time: the whole of X never goes to the GPU)."""
    import daskgb.backend as be

    xp = be.get_backend(device).xp
    if not parts:
        return (None,) * 6
    if features_on_host:
        X = _stack([(_host_rows(p[0]),) for p in parts], 0, np)
    else:
        X = _stack(parts, 0, xp)
    return (X,) + tuple(_stack(parts, i, xp) for i in (1, 2, 3, 5, 6))


def _local_groups(parts, ordinals, n_total):
    """The query groups of a worker's stacked partitions, each keyed by its global ordinal."""
    from .. import ranking

    pieces = []
    for (X, _, _, _, q, _, _), keys in zip(parts, ordinals):
        g = _partition_groups(q, X.shape[0])
        g.keys = np.asarray(keys, dtype=np.int64)
        pieces.append(g)
    return ranking.concat_groups(pieces, n_total)


def _local_summary(device, missing, budget, indices, n_summaries, *parts):
    """This worker's share of the cluster's merge tree of partition summaries, and the seconds
    its steps took: [(node, summary (host arrays))]. indices: each partition's place among the
    collection's non-empty partitions (None for an empty one). The summaries merge in one tree
    fixed by those places (sketch.merge_tree_node), never by which worker holds which, so the
    cuts depend on the partitions alone; the nodes whose partitions are all here are merged here
    (sketch.held_merge_nodes), so that a worker holding a run of partitions sends one summary,
    not one a partition (a partition's summary of a float column is ~190 KB at the budget).
    budget: the entries a feature keeps, sized by the cluster's rows (sizing it by the worker's
    own rows made the cuts coarser for the same error bound on paper: an AUC test with max_bin
    32 moved 0.003 from in-process, and the sketch was no faster)."""
    import time

    from ..inputs import as_features, as_vector

    import daskgb.backend as be

    device_in_use()
    t0 = time.perf_counter()
    n = sum(p[0].shape[0] for p in parts)
    if n == 0:
        return [], {}
    # Labels and weights stacked for their checks (4 bytes a row); X is read partition by partition.
    xp = be.get_backend(device).xp
    y, w = _stack(parts, 1, xp), _stack(parts, 2, xp)
    w = as_vector(w, n, "weight", xp, nonnegative=True)
    # NaN / inf labels: an error before any training (its count comes to the host: a sync).
    as_vector(y, n, "y (labels)", xp)
    t1 = time.perf_counter()
    leaves, start = {}, 0
    for index, part in zip(indices, parts):
        rows = part[0].shape[0]
        if rows:
            weight = None if w is None else w[start : start + rows]
            if _is_sparse(part[0]):  # absent entries are missing, as in process (matrix.py)
                f = as_features(part[0]).to(xp)
                s = sketch.summarize_csr(f.indptr, f.indices, f.data, f.n_features, weight, missing, budget)
            else:
                s = sketch.summarize(xp.asarray(part[0], dtype=xp.float32), weight, missing, budget)
            leaves[(0, index)] = s
        start += rows
    t2 = time.perf_counter()
    nodes = [(node, sketch.merge_tree_node(leaves, n_summaries, node, budget).to(np))
             for node in sketch.held_merge_nodes([i for _, i in leaves], n_summaries)]
    return nodes, {"stack and check": t1 - t0, "summarize": t2 - t1, "merge here": time.perf_counter() - t2}


def _merged_cuts(device, budget, max_bin, categorical, n_summaries, *pairs):
    """The cluster's cuts from the workers' nodes of the merge tree (_local_summary), the rest of
    the tree merged on this worker's device. The merges are many small array steps, which a GPU
    does in milliseconds."""
    import daskgb.backend as be

    device_in_use()
    xp = be.get_backend(device).xp
    nodes = {node: s.to(xp) for summaries, _ in pairs for node, s in summaries}
    root = sketch.merge_tree_node(nodes, n_summaries, sketch.merge_tree_root(n_summaries), budget)
    # Each merge of the tree pruned to the cluster's budget (merge_tree_node), the root to it too
    # (a single partition's), then to max_bin + 1 by make_cuts. The tree is the partitions', so 1
    # and N workers get the same cuts; where no merged node outgrows the budget (every partition's
    # summary exact, their union within it) they are the in-process sketch's.
    return sketch.make_cuts(sketch.prune(root, budget), max_bin, categorical).to(np)


def _local_matrix(device, cuts, token, missing, max_bin, n_features, feature_info, labels, groups, paging,
                  row_spans, *parts, classes=None):
    """The worker's QuantileMatrix, binned with the cluster's cuts (may hold 0 rows). labels: which of
    "y" and "bounds" (the survival bounds) the partitions carry. groups: None, or
    (per-partition global group ordinals, number of groups in all partitions). paging: the
    (device_memory_budget, spill_dir) each worker keeps its own matrix within (ellpack/pages.py).
    row_spans: its rows' places in the collection, [(first global row, rows), ...] in its order.
    feature_info: (feature names, feature types, categories by feature) of the collection.
    classes: the labels' distinct values, sorted, a label then becoming its index among them
    (a classifier's encoding); None: the labels as they are."""
    device_in_use()
    feature_names, feature_types, categories = feature_info
    try:
        matrix = _build_local_matrix(device, cuts, token, missing, max_bin, n_features, feature_names, labels,
                                     groups, paging, *parts, feature_types=feature_types, classes=classes)
        # The collection's category names (the partitions hold their codes): the model keeps them.
        matrix.categories = categories
        # Where the rows sit in the collection: training keys row sampling by it (training/fit.py).
        matrix.row_spans = row_spans
        return matrix
    finally:
        if device == "cuda":  # what quantising cached goes back if no training follows soon
            give_back_device_memory_when_idle()


def encode_labels(y, classes):
    """Labels as their indices among classes (sorted), float32, where y is (a cupy block stays
    on its GPU): a classifier's encoding."""
    xp = array_module(y)
    return xp.searchsorted(xp.asarray(classes), y).astype(xp.float32)


def _build_local_matrix(device, cuts, token, missing, max_bin, n_features, feature_names, labels, groups, paging,
                        *parts, feature_types=None, classes=None):
    from .. import ranking
    from ..matrix import QuantileMatrix

    budget, spill_dir = paging
    X, y, w, m, lower, upper = _local_arrays(parts, device, features_on_host=budget is not None)
    if classes is not None and y is not None:
        y = encode_labels(y, classes)
    if X is None:  # a worker that holds none of these rows still takes part in evaluation
        import daskgb.backend as be

        xp = be.get_backend(device).xp
        X = xp.zeros((0, n_features), dtype=np.float32)
        y = xp.zeros(0, dtype=np.float32) if "y" in labels else None
        if "bounds" in labels:
            lower, upper = xp.zeros(0, dtype=np.float32), xp.zeros(0, dtype=np.float32)
    local_groups = None
    if groups is not None:
        local_groups = _local_groups(parts, *groups)
        # Every vector is partitioned like X, so weights come one per row: equal within a group.
        w = ranking.group_weights(w, local_groups, "weight", per_row_ok=True)
    return QuantileMatrix(X, y, w, m, missing=missing, max_bin=max_bin, feature_names=feature_names,
                          device=device, cuts=cuts, _cuts_token=token, _allow_empty=True, _groups=local_groups,
                          device_memory_budget=budget, spill_dir=spill_dir, label_lower_bound=lower,
                          label_upper_bound=upper, feature_types=feature_types)


# --------------------------------------------------------------------------- on the client

# Beyond this many runs of rows (a take() of scattered rows), predictions and labels are put in
# row order by one gather rather than a slice per run: a dask graph of a task per run would be
# slower to build than the gather is to run.
_MAX_RUNS = 4096


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
        bad = [str(c) for c, t in zip(X.columns, X.dtypes) if not is_numeric_dtype(t)]
        if bad:
            raise ValueError(f"X has non-numeric columns: {bad[:10]}; convert or drop them first")
        return list(X.to_delayed()), len(X.columns), [str(c) for c in X.columns]
    raise ValueError(f"X must be a dask array or a dask dataframe, got {type(X).__name__}")


def _categorical_frame(X, enable_categorical: bool, reference):
    """(X with its `category` columns as float codes, the columns' types, {feature index: the
    categories}) for a dask dataframe; (X, None, None) for anything else.

    A column's categories are the union over the partitions (dask's as_known, a pass over the
    column where the dtype does not list them), or, for an eval set, the training data's
    (reference): every partition's codes are then codes of the same list, whichever categories
    its own rows hold. A missing entry, or a category the reference lacks, becomes NaN."""
    if not (hasattr(X, "to_delayed") and hasattr(X, "columns")):
        return X, None, None
    cat_cols = category_columns(X, enable_categorical)
    if not cat_cols:
        return X, None, None
    categories = {}
    for i in cat_cols:
        if reference is not None and i in reference:
            categories[i] = list(reference[i])
            continue
        col = X[X.columns[i]]
        if not col.cat.known:
            col = col.cat.as_known()
        categories[i] = list(col.cat.categories)
    types = ["c" if i in categories else "q" for i in range(len(X.columns))]
    meta = X._meta.copy()
    for i in cat_cols:
        meta.isetitem(i, meta.iloc[:, i].cat.codes.astype(np.float32))
    return X.map_partitions(_as_codes, categories, meta=meta), types, categories


def _as_codes(frame, categories):
    """A partition with its categorical columns as float codes of the given categories (by
    name, as in process: inputs.recode)."""
    frame = frame.copy(deep=False)
    for i, names in categories.items():
        col = frame.iloc[:, i]
        if str(col.dtype) != "category":
            col = col.astype("category")
        frame.isetitem(i, recode(col.cat.codes.to_numpy(), list(col.cat.categories), names))
    return frame


def _aligned(v, X, what):
    """v (y, weight, base_margin, qid or a label bound) partitioned as X, its rows matched to X's.

    Where X and v are dataframes (or series) whose divisions are known, v is repartitioned to X's
    divisions: rows meet by index. Otherwise rows meet by position: v as it is where its
    partitions already hold as many rows as X's (or, their sizes unknown, where there are as
    many), else its rows rechunked to X's partition sizes (a pass over both to count them).
    A row count that differs is an error."""
    import dask.array as da

    if v is None or not (isinstance(v, da.Array) or hasattr(v, "npartitions")):
        return v  # not a dask collection: _vector_blocks says so
    frame = hasattr(X, "npartitions")
    x_blocks = _blocks(X)
    if frame and hasattr(v, "divisions") and X.known_divisions and v.known_divisions:
        if tuple(v.divisions) == tuple(X.divisions):
            return v
        return v.repartition(divisions=X.divisions, force=True)
    x_rows = None if frame else _known(X.chunks[0])
    v_rows = _known(v.chunks[0]) if isinstance(v, da.Array) else None
    if x_rows is not None and v_rows is not None:
        if x_rows == v_rows:
            return v
    elif x_rows is None and v_rows is None and _blocks(v) == x_blocks:
        return v  # as many partitions, of sizes known on neither side: each partition's are checked where it lies
    x_rows = tuple(int(r) for r in _partition_rows(X))
    if not isinstance(v, da.Array):
        v = v.to_dask_array(lengths=True)
    elif v_rows is None:
        v = v.compute_chunk_sizes()
    if v.shape[0] != sum(x_rows):
        raise ValueError(f"{what} has {v.shape[0]} rows but X has {sum(x_rows)}: they must hold the same rows. "
                         f"Take both from one dataframe (e.g. X = df.drop(columns='y'), y = df['y'])")
    return v.rechunk({0: x_rows})


def _blocks(c) -> int:
    """Row partitions of a dask array or dataframe."""
    return c.npartitions if hasattr(c, "npartitions") else c.numblocks[0]


def _known(sizes):
    """Chunk sizes as a tuple of ints, or None where dask does not know them."""
    return None if any(np.isnan(r) for r in sizes) else tuple(int(r) for r in sizes)


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


def _client_for(address: str):
    """This process's client of the scheduler at `address`: the default client where it is
    connected there (or the worker's own inside a task), else a new one, made the default, so
    that an estimator unpickled beside the matrix finds it too."""
    from distributed import Client, default_client, get_client

    for find in (get_client, default_client):
        try:
            client = find()
        except ValueError:
            continue
        if client.scheduler is not None and client.scheduler.address == address:
            return client
    return Client(address, set_as_default=True)


class DaskQuantileMatrix:
    """Training data on a Dask cluster: each worker quantises the partitions it holds into an
    ELLPACK matrix with cuts shared by all workers, and keeps it for every later fit.

    X is a dask array or dataframe (numpy, cupy, pandas or cudf partitions); y,
    weight and base_margin are partitioned like X (``data=`` and ``label=``, XGBoost's names,
    may stand for X and y). ``ref`` (another
    DaskQuantileMatrix) shares its cuts and places the partitions on its workers,
    as eval sets need. ``device`` (None: follow the workers) picks where each
    worker quantises.

    Ranking data name their query groups with ``qid`` (a dask array or series
    partitioned like X; within a partition non-decreasing, XGBoost's rule) or
    ``group`` (group sizes in row order, a host sequence; X's partition sizes must
    be known or computable). A query group must lie whole in one partition: a qid
    found in two partitions, or a group crossing a partition boundary, is an error
    (partitions are never reshuffled here: moving rows between workers is the
    costly step this layer avoids; repartition on query boundaries first, e.g. a
    dataframe indexed by qid). Weights are per query group: every row of a group
    carries its group's weight.

    ``label_lower_bound`` and ``label_upper_bound`` (dask arrays or series partitioned like X)
    are each row's survival interval, as QuantileMatrix's, for survival:aft and its metrics; y
    may then be left out. They travel with their partition's rows, as weight does.

    ``device_memory_budget`` and ``spill_dir`` are QuantileMatrix's, for each worker's own
    rows: a worker whose quantised rows take more than the budget keeps them as pages on
    its host (or in files under spill_dir, a path on each worker's machine) and streams them.
    """

    public_name = "daskgb.dask.DaskQuantileMatrix"
    # Spread over workers, rows without query ids cannot be one query: ranking needs qid= or group=.
    ranks_only_with_groups = True

    def __init__(self, client, X=None, y=None, weight=None, base_margin=None, missing=np.nan, max_bin=256, ref=None,
                 feature_names=None, device=None, *, qid=None, group=None, device_memory_budget=None,
                 spill_dir=None, label_lower_bound=None, label_upper_bound=None, feature_types=None,
                 enable_categorical=False, data=None, label=None, _label_classes=None, _encode_labels=None):
        import time

        from distributed import wait

        from ..backend import DEVICES

        X, y = xgboost_names(X, y, data, label)

        # What the matrix was built from (the collections, not their rows): an eval set built
        # without ref= is built again from it with the training cuts when training starts
        # (binned_like), as XGBoost bins a DaskDMatrix eval set with the training cuts.
        source = dict(X=X, y=y, weight=weight, base_margin=base_margin, missing=missing, feature_names=feature_names,
                      qid=qid, group=group, device_memory_budget=device_memory_budget, spill_dir=spill_dir,
                      label_lower_bound=label_lower_bound, label_upper_bound=label_upper_bound,
                      feature_types=feature_types, enable_categorical=enable_categorical)
        # Wall seconds of each step, for whoever asks why quantising took as long as it did.
        self.timings: dict[str, float] = {}
        clock = [time.perf_counter()]

        def lap(step: str) -> None:
            now = time.perf_counter()
            self.timings[step] = self.timings.get(step, 0.0) + now - clock[0]
            clock[0] = now

        if isinstance(max_bin, bool) or not isinstance(max_bin, (int, np.integer)) or max_bin < 2:
            raise ValueError(f"max_bin must be an integer >= 2, got {max_bin!r}")
        if ref is not None and not isinstance(ref, DaskQuantileMatrix):
            raise ValueError("ref must be a DaskQuantileMatrix")
        check_paging(device_memory_budget, spill_dir)
        if device is not None and device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES} or None, got {device!r}")
        register(client)  # the workers' state, which the tasks below use (dask/plugin.py)
        workers = live_workers(client)
        if not workers:
            raise ValueError("the Dask cluster has no workers")
        self.client = client
        self.released = False
        self.missing = float(missing)
        if ref is not None:
            feature_types = ref.feature_types if feature_types is None else feature_types
            enable_categorical = enable_categorical or ref.feature_types is not None
        X, frame_types, self.categories = _categorical_frame(X, enable_categorical,
                                                             None if ref is None else ref.categories)
        blocks, n_features, names = _row_blocks(X)
        self.feature_types = feature_types_of(feature_types, frame_types, n_features)
        if ref is not None and self.feature_types != ref.feature_types:
            raise ValueError(f"feature_types differ: ref (the training matrix) has {ref.feature_types}, this data "
                             f"has {self.feature_types}")
        self.n_features = n_features
        self.feature_names = [str(n) for n in feature_names] if feature_names is not None else names
        check_unique_names(self.feature_names)
        # Each vector's rows matched to X's partitions (by index or by position: _aligned).
        y, weight, base_margin, qid, label_lower_bound, label_upper_bound = (
            _aligned(v, X, what) for v, what in ((y, "y"), (weight, "weight"), (base_margin, "base_margin"),
                                                 (qid, "qid"), (label_lower_bound, "label_lower_bound"),
                                                 (label_upper_bound, "label_upper_bound")))
        ys = _vector_blocks(y, len(blocks), "y")
        ws = _vector_blocks(weight, len(blocks), "weight")
        ms = _vector_blocks(base_margin, len(blocks), "base_margin")
        if (label_lower_bound is None) != (label_upper_bound is None):
            raise ValueError("label_lower_bound and label_upper_bound go together: give both (an observed time: "
                             "lower == upper; right-censored: upper = inf)")
        los = _vector_blocks(label_lower_bound, len(blocks), "label_lower_bound")
        his = _vector_blocks(label_upper_bound, len(blocks), "label_upper_bound")
        self.has_survival_bounds = label_lower_bound is not None
        if qid is not None and group is not None:
            raise ValueError("give one of qid= and group=, not both")
        if group is not None:
            qs = _group_blocks(group, X, len(blocks))
        else:
            qs = _vector_blocks(qid, len(blocks), "qid")
        self.has_groups = qid is not None or group is not None

        # X's blocks are computed (or found, if X was persisted) first; each partition is then
        # assembled on the worker holding its X block, so rows stay where they already are.
        x_futs = client.compute(blocks)
        # Group sizes (from group=) are small host objects: they travel with the task.
        vec_futs = [v if any(isinstance(b, _GroupSizes) for b in v) else client.compute(v)
                    for v in (ys, ws, ms, qs, los, his)]
        wait(x_futs)
        _raise_first_error(x_futs)
        lap("compute X")
        where = client.who_has(x_futs)
        futures = [client.submit(_part, xf, yf, wf, mf, qf, lf, hf, i, workers=list(where[xf.key][:1]) or None,
                                 allow_other_workers=not where[xf.key], pure=False)
                   for i, (xf, yf, wf, mf, qf, lf, hf) in enumerate(zip(x_futs, *vec_futs))]
        wait(futures)
        _raise_first_error(futures)
        who_has = client.who_has(futures)
        holder: dict[str, list] = {}
        for f in futures:
            holder.setdefault(who_has[f.key][0], []).append(f)
        lap("assemble partitions")

        addrs = sorted(holder)
        infos = dict(zip(addrs, gather_watching(
            client, [client.submit(_local_info, *holder[a], label_values=_label_classes is not None and y is not None,
                                   workers=[a], allow_other_workers=False, pure=False)
                     for a in addrs], addrs, "quantisation")))
        feats = {i["features"] for i in infos.values() if i["features"] is not None}
        if len(feats) > 1 or (feats and feats != {n_features}):
            raise ValueError(f"partitions disagree on the number of features: {sorted(feats)} vs {n_features}")
        self.n_rows = sum(i["rows"] for i in infos.values())
        # Each partition's first row in the collection, from the partitions' row counts in order.
        rows_of = {f.key: r for a in addrs for f, r in zip(holder[a], infos[a]["part_rows"])}
        first_row_of, start = {}, 0
        for f in futures:
            first_row_of[f.key] = start
            start += rows_of[f.key]
        lap("check partitions")
        if self.n_rows == 0:
            raise ValueError("X has no rows (every partition is empty)")
        # A classifier's labels: their classes, found in the pass above rather than a pass of their
        # own, checked by _label_classes (before any sketch), which says how the matrices encode
        # them; or the classes to encode by, known already (_encode_labels: an eval set's).
        classes = _encode_labels
        if _label_classes is not None and y is not None:
            found = [i["label_values"] for i in infos.values() if i["label_values"] is not None]
            classes = _label_classes(np.unique(np.concatenate(found)) if found else np.zeros(0, np.float32))
        ordinals, self.n_groups = (_group_ordinals(holder, infos, group is not None) if self.has_groups
                                   else ({}, 0))
        kinds = {i["gpu"] for a, i in infos.items() if i["rows"] > 0}
        if device is None or device == "auto":
            if len(kinds) > 1:
                raise ValueError("the workers holding data mix GPU (dask-cuda) and CPU workers; use one kind, "
                                 "or pass device='cpu'")
            device = "cuda" if kinds == {True} else "cpu"
        self.device = device

        position = {f.key: i for i, f in enumerate(futures)}
        tolerance = config.get("dask.balance-rows")
        if ref is None:
            # Workers that hold rows train; others (no partitions, or only empty ones) sit out. Their
            # ranks follow the collection: rank 0 holds its first partition, and so on. The sketches
            # are per partition, merged in the collection's order, and row sampling is keyed by a
            # row's place in the collection (row_spans_of below): the model depends on the
            # partitions alone, not on which worker holds which, nor on the workers' addresses;
            # hence partitions may move to even the workers' rows (_balanced), and once sketched be cut
            # where whole ones cannot even them (_cut_to_even).
            holding = [a for a, i in infos.items() if i["rows"] > 0]
            holder = {**holder, **_balanced({a: holder[a] for a in holding}, rows_of, position, tolerance)}
            first = {a: min(position[f.key] for f in fs) for a, fs in holder.items() if fs}
            self.workers = sorted(holding, key=first.__getitem__)
            self.max_bin = int(max_bin)
            budget = sketch.sketch_budget(self.n_rows, self.max_bin)
            # The summaries' places in the merge tree: the non-empty partitions in collection order.
            nonempty = [f.key for f in futures if rows_of[f.key] > 0]
            index = {key: i for i, key in enumerate(nonempty)}
            summaries = [client.submit(_local_summary, device, self.missing, budget,
                                       [index.get(f.key) for f in holder[a]], len(nonempty), *holder[a],
                                       workers=[a], allow_other_workers=False, pure=False) for a in self.workers]
            steps = gather_watching(client, [client.submit(_second, s, workers=[a], pure=False)
                                             for s, a in zip(summaries, self.workers)], self.workers, "quantisation")
            lap("sketch on workers")
            for name in ("stack and check", "summarize", "merge here"):  # the slowest worker's
                self.timings[f"sketch: {name}"] = max((st.get(name, 0.0) for st in steps), default=0.0)
            cut_future = client.submit(_merged_cuts, device, budget, self.max_bin, categorical_mask(self.feature_types),
                                       len(nonempty), *summaries,
                                       workers=[self.workers[0]], allow_other_workers=False, pure=False)
            self.cuts = gather_watching(client, [cut_future], self.workers, "quantisation")[0]
            lap("merge sketches")
            self.cuts_token = uuid.uuid4().hex
        else:
            if ref.n_features != n_features:
                raise ValueError(f"ref has {ref.n_features} features, this data has {n_features}")
            self.workers, self.max_bin, self.cuts, self.cuts_token = ref.workers, ref.max_bin, ref.cuts, ref.cuts_token
            if self.feature_names is None:
                self.feature_names = ref.feature_names
            check_feature_names(ref.feature_names, self.feature_names, "ref (the training matrix)", "this data")
            holder = _balanced(_place_on(holder, self.workers), rows_of, position, tolerance)
        # Once sketched (the summaries are of whole partitions), partitions are cut where whole
        # ones could not even the workers' rows; a query group stays whole on its worker.
        if not self.has_groups:
            holder = _cut_to_even(client, holder, rows_of, first_row_of, self.workers, tolerance)

        def groups_of(a):
            if not self.has_groups:
                return None
            return [ordinals[f.key] for f in holder.get(a, [])], self.n_groups

        def row_spans_of(a):
            """Worker a's rows' places in the collection: runs of consecutive global rows, in its order."""
            spans: list[tuple[int, int]] = []
            for f in holder.get(a, []):
                first, rows = first_row_of[f.key], rows_of[f.key]
                if spans and spans[-1][0] + spans[-1][1] == first:
                    spans[-1] = (spans[-1][0], spans[-1][1] + rows)
                elif rows:
                    spans.append((first, rows))
            return spans

        # Each worker's rows' places in the collection, in its own order: what puts labels(),
        # weights() and predictions back in X's row order, and what take() indexes.
        self._row_spans = {a: np.asarray(row_spans_of(a), dtype=np.int64).reshape(-1, 2) for a in self.workers}
        labels = tuple(name for name, v in (("y", y), ("bounds", label_lower_bound)) if v is not None)
        self._local = {
            a: client.submit(_local_matrix, device, self.cuts, self.cuts_token, self.missing, self.max_bin,
                             n_features, (self.feature_names, self.feature_types, self.categories), labels,
                             groups_of(a),
                             (device_memory_budget, None if spill_dir is None else str(spill_dir)), row_spans_of(a),
                             *holder.get(a, []), classes=classes,
                             workers=[a], allow_other_workers=False, pure=False)
            for a in self.workers
        }
        # Only wait here: the matrices stay on their workers.
        done = [client.submit(_size, self._local[a], workers=[a], allow_other_workers=False, pure=False)
                for a in self.workers]
        sizes = gather_watching(client, done, self.workers, "quantisation")
        self.nbytes_per_worker = {a: b for a, (b, _) in zip(self.workers, sizes)}
        self.rows_per_worker = {a: r for a, (_, r) in zip(self.workers, sizes)}
        self.has_labels = bool(labels)  # with the bounds and no y, a worker's matrix takes the lower bounds as labels
        # The matrix keeps what it was built from: a model of other cuts predicts it from there, and
        # one with cuts of its own is binned again from there as an eval set. The dask graphs hold
        # no rows on the workers (a persisted X's partitions stay as long as the user keeps X).
        self._source = dict(source, device=device)
        lap("ELLPACK on workers")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, self.n_features)

    def shares_cuts_with(self, other: "DaskQuantileMatrix") -> bool:
        """Whether this matrix was quantised with other's cuts (built with ref=other, or other itself)."""
        return self.cuts_token == other.cuts_token

    def __len__(self) -> int:
        return self.n_rows

    def source(self) -> dict | None:
        """The collections and arguments this matrix was built from (X, y, weight, base_margin,
        missing, ...), or None: made by take(), released or unpickled."""
        return None if self.released else getattr(self, "_source", None)

    def binned_like(self, ref: "DaskQuantileMatrix", name: str = "the matrix") -> "DaskQuantileMatrix":
        """This matrix binned with ref's cuts on ref's workers (itself where it is already): a
        new matrix built from the dask collections this one was built from, with ref=ref. What
        train does with an eval set built without ref=, as in process (QuantileMatrix.binned_like).
        ValueError where this matrix keeps no collections (take(), release(), or unpickled) or
        where they now hold another number of rows."""
        if self.shares_cuts_with(ref):
            return self
        source = self.source()
        if source is None:
            raise ValueError(f"{name} was quantised with cuts of its own, and daskgb holds no data to bin it again "
                             "with the training cuts (the matrix came from take(), was released or unpickled): "
                             "build it with DaskQuantileMatrix(..., ref=dtrain)")
        if ref.n_features != self.n_features:
            raise ValueError(f"{name} has {self.n_features} features, dtrain has {ref.n_features}")
        binned = DaskQuantileMatrix(self.client, **source, max_bin=ref.max_bin, ref=ref)
        if binned.n_rows != self.n_rows:
            binned.release()
            raise ValueError(f"{name} had {self.n_rows} rows when it was built; its X has {binned.n_rows} now")
        return binned

    def take(self, rows) -> "DaskQuantileMatrix":
        """The given rows (numbered in X's row order) as a matrix of their own, binned as this one:
        each worker gathers its own rows from its quantised matrix (QuantileMatrix.take), so
        nothing is quantised again and no row moves between workers. The new matrix's rows are
        in the order given. The two matrices share their cuts, so either may be the other's eval
        set; a cross-validation split (what scikit-learn's GridSearchCV asks for, through
        m[indices]) is this."""
        if self.released:
            raise ValueError("this DaskQuantileMatrix was released (release() freed its rows)")
        from ..matrix import row_indices

        idx = row_indices(rows, self.n_rows, self.has_groups)
        if idx.size == 0:
            raise ValueError("take() of no rows: a matrix needs at least one row")
        table = self._span_table()
        span = np.searchsorted(table[:, 0], idx, side="right") - 1
        owner, local = table[span, 2], table[span, 3] + idx - table[span, 0]
        out = object.__new__(DaskQuantileMatrix)
        out.__dict__.update(self.__dict__)
        out._local, out.rows_per_worker, out.nbytes_per_worker, out._row_spans = {}, {}, {}, {}
        for w, a in enumerate(self.workers):
            mine = np.flatnonzero(owner == w)  # the new matrix's rows this worker holds, in order
            out._row_spans[a] = _runs(mine)
            # Every worker keeps a matrix, even of no rows: it still takes part in training.
            out._local[a] = self.client.submit(_take_local, self._local[a], local[mine],
                                               [tuple(map(int, r)) for r in out._row_spans[a]], workers=[a],
                                               allow_other_workers=False, pure=False)
            out.rows_per_worker[a] = int(mine.size)
        out.n_rows = int(idx.size)
        out._source = None  # its rows are a selection of X's: not an eval set without ref=
        sizes = gather_watching(self.client, [self.client.submit(_size, out._local[a], workers=[a],
                                                                 allow_other_workers=False, pure=False)
                                              for a in self.workers], self.workers, "take")
        out.nbytes_per_worker = {a: b for a, (b, _) in zip(self.workers, sizes)}
        out.timings = {}
        return out

    def _span_table(self) -> np.ndarray:
        """Every run of rows of every worker as (first row in X's order, rows, worker's index,
        first row in the worker's matrix), sorted by the first: the runs tile 0..n_rows-1."""
        entries = []
        for w, a in enumerate(self.workers):
            spans = self._row_spans[a]
            local = np.concatenate([[0], np.cumsum(spans[:, 1])[:-1]]) if len(spans) else np.zeros(0, np.int64)
            entries.append(np.column_stack([spans[:, 0], spans[:, 1], np.full(len(spans), w), local]))
        table = np.concatenate(entries).astype(np.int64) if entries else np.zeros((0, 4), np.int64)
        return table[np.argsort(table[:, 0], kind="stable")]

    def in_row_order(self, per_worker: dict):
        """One dask array of the rows in X's order from {worker: a dask array of its rows in the
        order of its matrix}: slices of the workers' arrays, a chunk for each run of rows (a
        partition of X, or several neighbouring ones on one worker); where take() scattered the
        rows into many short runs, one gather by a permutation instead."""
        import dask.array as da

        table = self._span_table()
        table = table[table[:, 1] > 0]
        if len(table) <= _MAX_RUNS:
            return da.concatenate([per_worker[self.workers[w]][local : local + n] for _, n, w, local in table.tolist()])
        holders = [a for a in self.workers if self.rows_per_worker[a]]
        offset = dict(zip(holders, np.cumsum([0] + [self.rows_per_worker[a] for a in holders])))
        source = np.array([offset[self.workers[w]] for w in table[:, 2]], dtype=np.int64) + table[:, 3]
        order = np.arange(self.n_rows) + np.repeat(source - table[:, 0], table[:, 1])
        return da.concatenate([per_worker[a] for a in holders])[order]

    def labels(self):
        """The labels as a lazy dask array, in the matrix's row order (X's, or the order take()
        was given); None without labels."""
        return self._vector("label") if self.has_labels else None

    def weights(self):
        """The weights as a lazy dask array in row order; None without weights."""
        return self._vector("weight")

    def _vector(self, name: str):
        import dask.array as da

        if self.released:
            raise ValueError("this DaskQuantileMatrix was released (release() freed its rows)")
        parts = [self.client.submit(_local_vector, self._local[a], name, workers=[a], allow_other_workers=False,
                                    pure=False) for a in self.workers if self.rows_per_worker[a]]
        kinds = gather_watching(self.client, [self.client.submit(_vector_kind, f, pure=False) for f in parts],
                                [a for a in self.workers if self.rows_per_worker[a]], "reading the matrix")
        if any(k is None for k in kinds):
            return None
        meta = _empty_like_kind(kinds[0])
        holders = [a for a in self.workers if self.rows_per_worker[a]]
        return self.in_row_order({a: da.from_delayed(f, shape=(self.rows_per_worker[a],), dtype=np.float32, meta=meta)
                                  for f, a in zip(parts, holders)})

    def __getitem__(self, key):
        """m[rows] (and m[rows, ...], as scikit-learn indexes arrays): take(rows)."""
        if isinstance(key, tuple):
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise IndexError("a DaskQuantileMatrix is indexed by rows only: m[rows]")
        if isinstance(key, slice):
            key = np.arange(self.n_rows)[key]
        return self.take(key)

    def __getstate__(self):
        """A pickled matrix (sent to another process, e.g. by scikit-learn's process-based
        parallel search) travels without its client: its futures are keys, and the scheduler's
        address comes along so that the other process attaches to the same cluster."""
        state = dict(self.__dict__)
        state["client"] = None
        state["_source"] = None  # the graphs stay here: an unpickled matrix is not rebinned
        state["_scheduler_address"] = self.client.scheduler.address
        return state

    def __setstate__(self, state):
        address = state.pop("_scheduler_address", None)
        self.__dict__.update(state)
        self.client = _client_for(address)
        for f in self._local.values():
            f.bind_client(self.client)

    def release(self) -> None:
        """Free this matrix's memory on the workers now, rather than when the client's garbage
        collector drops its futures; the matrix cannot be trained on afterwards."""
        futures, self._local = list(self._local.values()), {}
        self.released, self._source = True, None
        if futures:
            self.client.cancel(futures)

    def __repr__(self):
        groups = f", query_groups={self.n_groups}" if self.has_groups else ""
        return (f"DaskQuantileMatrix(n_rows={self.n_rows}, n_features={self.n_features}, max_bin={self.max_bin}, "
                f"device={self.device!r}, workers={len(self.workers)}{groups})")


def _second(pair):
    return pair[1]


def _group_blocks(group, X, n_blocks):
    """DaskQuantileMatrix(group=...) cut at X's partition boundaries: one _GroupSizes per partition.
    A group that crosses a boundary is an error; empty groups go with the partition where they sit."""
    from ..ranking import host_integers

    sizes = host_integers(group, "group", "group sizes")
    rows = _partition_rows(X)
    if int(sizes.sum()) != int(rows.sum()):
        raise ValueError(f"group sizes sum to {int(sizes.sum())} but X has {int(rows.sum())} rows; each row must "
                         "be in exactly one query group")
    bounds = np.concatenate([[0], np.cumsum(rows)])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    # The partition holding each group: the one its first row falls in (an empty group at a boundary
    # goes with the partition after it, or the last one).
    home = np.minimum(np.searchsorted(bounds, starts[:-1], side="right") - 1, n_blocks - 1)
    crossing = np.flatnonzero(starts[1:] > bounds[home + 1])
    if crossing.size:
        g = int(crossing[0])
        raise ValueError(f"query group {g} (rows {starts[g]}..{starts[g + 1] - 1}) crosses a partition boundary; "
                         "every query group must lie whole in one partition: repartition X (and y, ...) on "
                         "group boundaries first")
    first = np.searchsorted(home, np.arange(n_blocks), side="left")
    last = np.searchsorted(home, np.arange(n_blocks), side="right")
    return [_GroupSizes(sizes[a:b], a) for a, b in zip(first, last)]


def _partition_rows(X):
    """Rows per partition of a dask array or dataframe (computed when dask does not know them)."""
    import dask.array as da

    if isinstance(X, da.Array):
        rows = np.asarray(X.chunks[0], dtype=np.float64)
        if not np.all(np.isfinite(rows)):
            rows = np.asarray(X.map_blocks(lambda b: np.array([b.shape[0]]), chunks=(1,), drop_axis=1,
                                           dtype=np.int64).compute())
        return rows.astype(np.int64)
    return np.asarray(X.map_partitions(len).compute(), dtype=np.int64)


def _group_ordinals(holder, infos, from_sizes: bool):
    """Every partition's groups numbered 0..G-1 across the data set (qids in ascending order, as one
    XGBoost DMatrix holding all rows would number them), and G. A qid found in two partitions
    is an error: its rows would be ranked as two queries."""
    keys = {f.key: k for a in holder for f, k in zip(holder[a], infos[a]["group_keys"])}
    everything = np.concatenate(list(keys.values())) if keys else np.zeros(0, np.int64)
    if from_sizes:
        return keys, int(everything.max()) + 1 if everything.size else 0
    unique, counts = np.unique(everything, return_counts=True)
    if np.any(counts > 1):
        q = int(unique[counts > 1][0])
        raise ValueError(f"qid {q} is in more than one partition (or worker); every query group must lie whole "
                         "in one partition. Repartition on query boundaries first (e.g. a dask dataframe indexed "
                         "by qid: df.set_index('qid'))")
    return {k: np.searchsorted(unique, v) for k, v in keys.items()}, int(unique.size)


def _size(m) -> tuple[int, int]:
    """The ELLPACK bytes and the rows a worker's matrix holds (what is waited on, small to send back)."""
    return int(m.ellpack.nbytes), int(m.n_rows)


def _local_vector(m, name):
    return getattr(m, name)


def _vector_kind(v):
    """"cupy" or "numpy" for a worker's vector (None when it has none): the dask array's meta."""
    if v is None:
        return None
    return "numpy" if isinstance(v, np.ndarray) else "cupy"


def _empty_like_kind(kind: str):
    if kind == "cupy":
        import cupy

        return cupy.empty(0, dtype=np.float32)
    return np.empty(0, dtype=np.float32)


def _take_local(m, rows, row_spans):
    """A worker's share of DaskQuantileMatrix.take: its matrix's rows `rows` (local indices), whose
    places in the new matrix are row_spans (row sampling is keyed by them: training/fit.py)."""
    out = m.take(rows)
    out.row_spans = row_spans
    return out


def _runs(rows: np.ndarray) -> np.ndarray:
    """Ascending row numbers as runs of consecutive ones: (k, 2) of (first, length)."""
    if rows.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = np.concatenate([[0], breaks])
    lengths = np.diff(np.concatenate([starts, [rows.size]]))
    return np.column_stack([rows[starts], lengths]).astype(np.int64)


def _raise_first_error(futures) -> None:
    for f in futures:
        if f.status == "error":
            f.result()


def _balanced(holder: dict, rows_of: dict, position: dict, tolerance: float) -> dict:
    """holder (worker -> partition futures) with whole partitions moved from the busiest worker
    to the idlest while the busiest holds more than tolerance x the mean rows and a move lowers
    it (tolerance 0: as it is). Every round waits for the slowest worker: partitions placed 170K
    rows to 30K made a 2-worker round take ~1.7x a balanced one. A move is chosen to leave the
    pair most even; each lowers the sum of the loads' squares, so the moves end. Only the
    assignment changes here: Dask copies a moved partition to its new worker when the first
    task there needs it, so the receiving worker ends with no more rows than the busiest had.
    Each worker's list stays in collection order (position), which row_spans and the ranks
    follow; the model depends on the partitions alone, not on which worker holds which."""
    out = {a: sorted(fs, key=lambda f: position[f.key]) for a, fs in holder.items()}
    if tolerance <= 0 or len(out) < 2:
        return out
    load = {a: sum(rows_of[f.key] for f in fs) for a, fs in out.items()}
    mean = sum(load.values()) / len(load)
    order = sorted(out)  # ties broken by address: every client moves alike
    while True:
        busiest = max(order, key=lambda a: load[a])
        idlest = min(order, key=lambda a: load[a])
        if load[busiest] <= tolerance * mean:
            break
        best = None
        for f in out[busiest]:
            r = rows_of[f.key]
            after = max(load[busiest] - r, load[idlest] + r)
            if r > 0 and after < load[busiest] and (best is None or after < best[0]):
                best = (after, f)
        if best is None:  # no single partition lowers the busiest (one large partition)
            break
        f = best[1]
        out[busiest].remove(f)
        out[idlest].append(f)
        load[busiest] -= rows_of[f.key]
        load[idlest] += rows_of[f.key]
    return {a: sorted(fs, key=lambda f: position[f.key]) for a, fs in out.items()}


def _even_rows(holder: dict, rows_of: dict, first_row_of: dict, order: list, tolerance: float) -> dict | None:
    """Where whole partitions cannot even the workers' rows (the quickstart's seven partitions on
    two workers: 110K and 90K rows at best), the rows themselves: while the busiest worker holds
    more than tolerance x the mean, each worker over its share gives its last rows (the tail of
    its last partitions) to the workers under theirs, in rank order (order), so that every worker
    ends within a row of the mean. A partition cut this way becomes two pieces, each a run of its
    rows. Returns {worker: [(future, lo, hi)]}, each worker's pieces in collection order (a
    whole partition: lo 0, hi its rows), or None where nothing is to be cut. Only the placement
    changes: the sketch was made of the partitions (the cuts are theirs), and training keys its
    row sampling by a row's place in the collection."""
    load = {a: sum(rows_of[f.key] for f in holder.get(a, [])) for a in order}
    total, n = sum(load.values()), len(order)
    if tolerance <= 0 or n < 2 or max(load.values()) <= tolerance * total / n:
        return None
    # Shares differing by at most a row, the larger ones to the workers holding the most (fewer cuts).
    share = {a: total // n for a in order}
    for a in sorted(order, key=lambda a: (-load[a], order.index(a)))[: total % n]:
        share[a] += 1
    pieces = {a: [(f, 0, rows_of[f.key]) for f in sorted(holder.get(a, []), key=lambda f: first_row_of[f.key])]
              for a in order}
    spare: list = []  # (future, lo, hi) given up, in the order taken
    for a in order:
        extra = load[a] - share[a]
        while extra > 0:
            f, lo, hi = pieces[a].pop()
            take = min(extra, hi - lo)
            if take < hi - lo:
                pieces[a].append((f, lo, hi - take))
            spare.append((f, hi - take, hi))
            extra -= take
    for a in order:
        need = share[a] - load[a]
        while need > 0:
            f, lo, hi = spare.pop(0)
            give = min(need, hi - lo)
            pieces[a].append((f, lo, lo + give))
            if give < hi - lo:
                spare.insert(0, (f, lo + give, hi))
            need -= give
    return {a: sorted(ps, key=lambda p: (first_row_of[p[0].key], p[1])) for a, ps in pieces.items()}


def _cut_to_even(client, holder: dict, rows_of: dict, first_row_of: dict, order: list, tolerance: float) -> dict:
    """holder with _even_rows' pieces in place of whole partitions: each piece a task on the
    worker the partition was dealt to (so only the piece moves), its rows and first row entered
    in rows_of and first_row_of. holder as it was where _even_rows cuts nothing."""
    plan = _even_rows(holder, rows_of, first_row_of, order, tolerance)
    if plan is None:
        return holder
    dealt = {f.key: a for a, fs in holder.items() for f in fs}
    out: dict = {}
    for a, pieces in plan.items():
        out[a] = []
        for f, lo, hi in pieces:
            if lo == 0 and hi == rows_of[f.key]:
                out[a].append(f)
                continue
            piece = client.submit(_slice_part, f, lo, hi, workers=[dealt[f.key]], allow_other_workers=True,
                                  pure=False)
            rows_of[piece.key] = hi - lo
            first_row_of[piece.key] = first_row_of[f.key] + lo
            out[a].append(piece)
    return out


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

