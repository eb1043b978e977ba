"""Training and prediction on a Dask cluster: one long-running task per worker, histograms summed by collectives."""

from __future__ import annotations

import uuid

import numpy as np

from ..feature_sets import interaction_sets
from ..inputs import check_feature_names
from ..monotone import monotone_vector
from ..params import TrainParams
from . import dashboard, progress
from .data import DaskQuantileMatrix
from .watch import gather_watching, live_workers
from .worker import checkpoint_dir_ready, interrupt_job, start_collective, train_on_worker

__all__ = ["DaskQuantileMatrix", "WorkerLostError", "train", "predict", "release_nccl"]

def train(client, params: dict, dtrain: DaskQuantileMatrix, num_boost_round: int = 10, evals=(),
          verbose_eval=True, *, obj=None, custom_metric=None, early_stopping_rounds=None, maximize=None,
          callbacks=(), checkpoint_dir=None, checkpoint_every=None, resume=False) -> dict:
    """Train on the workers holding dtrain's rows.

    Returns {"booster": Booster, "history": {eval name: {metric: [per round]}},
    "collective": [per-rank communicator statistics]}.

    verbose_eval: True (every round), an int n (every n-th round and the last) or False:
    a progress bar on the client (a widget in a notebook) with the latest metrics, and the
    eval log printed on the client at that cadence (dask/progress.py); False shows nothing.

    evals: (DaskQuantileMatrix, name) pairs built with ref=dtrain. obj and
    custom_metric as in daskgb.train: the objective runs on each worker's rows,
    the metric sees all rows. early_stopping_rounds / maximize as in
    daskgb.train: every worker sees the same global metrics, so all stop together. callbacks
    (daskgb.callback.TrainingCallback objects) run on every worker; a stop asked on any
    worker stops all of them at the same round. The device
    follows the workers (dask-cuda workers: CUDA; plain workers: CPU) unless
    params say "cpu" or "cuda". A worker that dies mid-training is an error
    within seconds; training never hangs on it.

    checkpoint_dir / checkpoint_every / resume: as in daskgb.train. Rank 0's worker writes the
    checkpoints, so the directory must be a path it can write. After a lost worker, build the
    DaskQuantileMatrix again and call train with the same arguments and resume=True: the
    finished model equals an unbroken run's.
    """
    from ..checkpoint import check_options

    checkpoint_path = check_options(checkpoint_dir, checkpoint_every, resume)
    p = TrainParams.from_dict(params)
    from ..callback import TrainingCallback

    for cb in callbacks or ():
        if not isinstance(cb, TrainingCallback):
            raise ValueError(f"callbacks must be daskgb.callback.TrainingCallback objects, got {type(cb).__name__}")
    if not isinstance(dtrain, DaskQuantileMatrix):
        raise ValueError("dtrain must be a daskgb.dask.DaskQuantileMatrix")
    if not dtrain._has_labels:
        raise ValueError("dtrain has no labels (y)")
    evals = list(evals or [])
    for item in evals:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], DaskQuantileMatrix)):
            raise ValueError("evals must be a list of (DaskQuantileMatrix, name) pairs")
    for m in [dtrain] + [m for m, _ in evals]:
        if m.released:
            raise ValueError("a DaskQuantileMatrix given to train was released (release() freed its rows)")
    for item in evals:
        if item[0].cuts_token != dtrain.cuts_token:
            raise ValueError(f"eval set {item[1]!r} has its own cuts; build it with DaskQuantileMatrix(..., ref=dtrain)")
        if not item[0]._has_labels:
            raise ValueError(f"eval set {item[1]!r} has no labels")
    _check_query_groups(p, dtrain, evals, obj)
    # Constraints are checked here, on the client: a bad index or name fails before any worker starts.
    interaction_sets(p.interaction_constraints, dtrain.n_features, dtrain.feature_names)
    monotone_vector(p.monotone_constraints, dtrain.n_features, dtrain.feature_names)
    device = _device(p.device, dtrain.device)
    params = {**params, "device": device}
    workers = dtrain.workers
    alive = live_workers(client)
    missing = [a for a in workers if a not in alive]
    if missing:
        raise RuntimeError(f"workers holding training data have left the cluster: {missing}")

    if checkpoint_path is not None:  # a bad directory fails here, before any training
        client.submit(checkpoint_dir_ready, str(checkpoint_path), workers=[workers[0]], allow_other_workers=False,
                      pure=False).result()
    job = uuid.uuid4().hex
    root = client.submit(start_collective, job, workers=[workers[0]], allow_other_workers=False,
                         pure=False).result()
    timeout = None  # the workers' DASKGB_COLLECTIVE_TIMEOUT, else the communicator's default
    # Progress and the eval log are shown here, on the client (dask/progress.py); the workers
    # print nothing. Rank 0 reports only when someone shows it: the scheduler keeps every
    # topic's events, and a search's many fits would pile them up there.
    every = 1 if verbose_eval is True else (int(verbose_eval) if verbose_eval else 0)
    topic = progress.topic_of(job)
    display = progress.ProgressDisplay(num_boost_round, every) if verbose_eval else None
    if display is not None:
        client.subscribe_topic(topic, display.on_event)
    # Every worker reports its rounds to the scheduler's daskgb page, where it is served.
    board = dashboard.register(client) is not None
    results = None
    try:
        futures = [
            client.submit(train_on_worker, job, root, rank, len(workers), params, dtrain._local[a],
                          [(m._local[a], name) for m, name in evals], num_boost_round, False, timeout,
                          obj, custom_metric, early_stopping_rounds, maximize, list(callbacks or ()),
                          topic if display is not None else None, dashboard=board,
                          checkpoint=(None if checkpoint_path is None else str(checkpoint_path), checkpoint_every,
                                      bool(resume)),
                          workers=[a], allow_other_workers=False, pure=False, key=f"daskgb-train-{rank}-{job}")
            for rank, a in enumerate(workers)
        ]
        try:
            results = gather_watching(client, futures, workers, "training",
                                      on_error=lambda e: _interrupt(client, job, workers, f"training failed: {e}"))
        except Exception as exc:
            alive = live_workers(client)
            lost = [a for a in workers if a not in alive]
            # A rank whose NCCL kernels wait on the failed one would hold its worker until the
            # watchdog's timeout: release it now (dask/worker.py interrupt_job).
            rounds = _interrupt(client, job, [a for a in workers if a in alive], f"training failed elsewhere: {exc}")
            if not lost:
                raise
            r = getattr(exc, "daskgb_round", None)
            if r is None and rounds:  # a survivor held in NCCL said where it was
                r = max(rounds)
            raise WorkerLostError(_lost_message(r, lost, workers, num_boost_round, checkpoint_path),
                                  lost, r) from exc
    finally:
        if display is not None:
            client.unsubscribe_topic(topic)
            booster = results[0]["booster"] if results else None
            history = results[0]["history"] if results else None
            stopped = booster is not None and booster.best_iteration is not None and \
                booster.num_boosted_rounds() < num_boost_round
            display.close(history, None if booster is None else booster.best_iteration, stopped)
    return {"booster": results[0]["booster"], "history": results[0]["history"],
            "collective": [r["collective"] for r in results]}


class WorkerLostError(RuntimeError):
    """Training stopped because a worker it ran on died or left the cluster.

    workers: the lost workers' addresses; round: the round training was in, where known."""

    def __init__(self, message: str, workers=(), round: int | None = None):
        super().__init__(message)  # args = (message,): it pickles, its attributes with it
        self.workers, self.round = list(workers), round


def release_nccl(client) -> dict:
    """Free the NCCL communicators the workers keep between fits ({worker: how many}).

    A multi-GPU fit that ends cleanly leaves its communicator on each worker for the next fit
    on the same workers, which then skips NCCL's setup and teardown (daskgb.collective
    KEEP_NCCL; DASKGB_KEEP_NCCL=0 turns keeping off). A kept communicator holds NCCL's
    buffers in device memory until this is called or the worker ends."""
    from ..collective import release_kept_nccl

    return client.run(release_kept_nccl)


def _interrupt(client, job: str, workers: list, reason: str) -> list:
    """Release the NCCL waits of the job's ranks on these workers (dask/worker.py
    interrupt_job), within a few seconds at most; the rounds they were in."""
    if not workers:
        return []
    try:
        answers = client.sync(client._run, interrupt_job, job, reason, workers=workers, nanny=False,
                              on_error="return", callback_timeout=5)
    except Exception:
        return []
    return [r for r in answers.values() if isinstance(r, int)]


def _lost_message(r, lost, workers, num_boost_round, checkpoint_path) -> str:
    """Which worker, which round, and how to go on."""
    names = ", ".join(f"{a} (rank {workers.index(a)})" for a in lost)
    when = f"in round {r} of {num_boost_round}" if r is not None else "during training"
    text = f"daskgb: worker {names} died or left the cluster {when}; its rows are gone, so training stopped"
    if checkpoint_path is None:
        return (text + ". No checkpoint_dir was given, so training must start again; pass checkpoint_dir= "
                "(and checkpoint_every=) to be able to resume after a lost worker")
    from ..checkpoint import Checkpoints

    try:
        saved = Checkpoints(checkpoint_path, None).files()
    except OSError:
        saved = []
    last = (f"the newest checkpoint in {str(checkpoint_path)!r} holds {saved[0][0]} rounds" if saved
            else f"checkpoint_dir is {str(checkpoint_path)!r}")
    return (text + f". To go on: {last}; build the DaskQuantileMatrix again from the same data and call train with "
            "the same arguments and resume=True")


def _check_query_groups(p, dtrain, evals, obj) -> None:
    """Ranking needs query groups on every matrix it ranks: in one process the rows without qid are one
    query (XGBoost's reading), but spread over workers they would silently be one query per worker."""
    from ..objective import get_objective
    from ..ranking import RANKING_OBJECTIVES, parse_metric

    if obj is None and p.objective in RANKING_OBJECTIVES and not dtrain.has_groups:
        raise ValueError(f"objective {p.objective!r} on Dask needs query groups: build the DaskQuantileMatrix "
                         "with qid= (or group=)")
    metrics = p.eval_metric or ([] if obj is not None else [get_objective(p.objective, p).default_metric])
    ranking_metrics = [m for m in metrics if parse_metric(m) is not None]
    for m, name in evals:
        if ranking_metrics and not m.has_groups:
            raise ValueError(f"eval_metric {ranking_metrics[0]!r} on Dask needs query groups: build eval set "
                             f"{name!r} with qid= (or group=)")


def _device(asked: str, data_device: str) -> str:
    asked = asked.lower()
    if asked in ("cuda", "gpu") or asked.startswith("cuda"):
        if data_device != "cuda":
            raise ValueError("device='cuda' was asked for, but the workers holding the data are CPU workers "
                             "(start them with dask-cuda, e.g. LocalCUDACluster)")
        return "cuda"
    if asked == "cpu":
        return "cpu"
    return data_device


def predict(client, booster, X, output_margin: bool = False, iteration_range=(0, 0)):
    """Lazy predictions for a dask array or dataframe: a dask array, one block per partition.

    The booster travels to each worker once (scattered), never with every block.
    """
    import dask.array as da

    if isinstance(X, DaskQuantileMatrix):
        return _predict_matrix(client, booster, X, output_margin, iteration_range)
    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got {X.ndim} dimension(s)")
        if X.shape[1] != booster.num_features:
            raise ValueError(f"the model was trained on {booster.num_features} features, X has {X.shape[1]}")
        arr = X.rechunk({1: -1})
    elif hasattr(X, "to_dask_array"):
        if len(X.columns) != booster.num_features:
            raise ValueError(f"the model was trained on {booster.num_features} features, X has {len(X.columns)}")
        # The blocks go to the workers as arrays, without their column names: checked here.
        check_feature_names(booster.feature_names, list(X.columns), "the model", "X")
        arr = X.to_dask_array()
    else:
        raise ValueError(f"X must be a dask array or dataframe, got {type(X).__name__}")
    handle = client.scatter(booster, broadcast=True, hash=False)
    from dask.array.utils import meta_from_array

    # Multiclass models give (n, K) margins and probabilities; multi:softmax's classes are one column.
    k = booster.n_groups
    columns = k if k > 1 and (output_margin or getattr(booster.objective, "output_prob", True)) else 0
    if columns:
        meta = meta_from_array(arr._meta, ndim=2, dtype=np.float32)
        return arr.map_blocks(_predict_block, handle, output_margin, tuple(iteration_range), columns,
                              chunks=(arr.chunks[0], (columns,)), dtype=np.float32, meta=meta)
    meta = meta_from_array(arr._meta, ndim=1, dtype=np.float32)
    return arr.map_blocks(_predict_block, handle, output_margin, tuple(iteration_range), 0, drop_axis=1,
                          dtype=np.float32, meta=meta)


def _predict_matrix(client, booster, m, output_margin, iteration_range):
    """Predictions for a DaskQuantileMatrix built with the model's cuts (a split of the training
    matrix, or an eval set): each worker routes its binned rows, in the matrix's row order."""
    import dask.array as da

    from .data import _empty_like_kind

    if m.released:
        raise ValueError("this DaskQuantileMatrix was released (release() freed its rows)")
    if m.n_features != booster.num_features:
        raise ValueError(f"the model was trained on {booster.num_features} features, the matrix has {m.n_features}")
    handle = client.scatter(booster, broadcast=True, hash=False)
    k = booster.n_groups
    columns = k if k > 1 and (output_margin or getattr(booster.objective, "output_prob", True)) else 0
    meta = _empty_like_kind("cupy" if m.device == "cuda" else "numpy")
    parts = []
    for a in m.workers:
        n = m.rows_per_worker[a]
        if n == 0:
            continue
        fut = client.submit(_predict_local, handle, m._local[a], output_margin, tuple(iteration_range), workers=[a],
                            allow_other_workers=False, pure=False)
        parts.append(da.from_delayed(fut, shape=(n, columns) if columns else (n,), dtype=np.float32,
                                     meta=meta.reshape((0, 0)) if columns else meta))
    return da.concatenate(parts)


def _predict_local(booster, m, output_margin, iteration_range):
    return booster.predict(m, output_margin=output_margin, iteration_range=iteration_range)


def _predict_block(block, booster, output_margin, iteration_range, columns):
    if block.shape[0] == 0:
        xp = np if isinstance(block, np.ndarray) else __import__("cupy")
        return xp.zeros((0, columns) if columns else 0, dtype=np.float32)
    return booster.predict(block, output_margin=output_margin, iteration_range=iteration_range)

