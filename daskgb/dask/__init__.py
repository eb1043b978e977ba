"""Training and prediction on a Dask cluster: one long-running task per worker, histograms summed by collectives."""

from __future__ import annotations

import uuid
import weakref

import numpy as np

from ..inputs import check_feature_names
from ..training.options import TrainingOptions
from . import dashboard, plugin, progress
from .data import DaskQuantileMatrix, _categorical_frame
from .fit_lock import WorkersBusyError, workers_held
from .watch import gather_watching, live_workers
from .worker import checkpoint_dir_ready, interrupt_job, start_collective, train_on_worker

__all__ = ["DaskQuantileMatrix", "WorkerLostError", "WorkersBusyError", "train", "predict", "release_nccl"]

def train(client, params: dict, dtrain: DaskQuantileMatrix, num_boost_round: int = 10, evals=(),
          verbose_eval=True, *, obj=None, custom_metric=None, early_stopping_rounds=None, maximize=None,
          callbacks=(), checkpoint_dir=None, checkpoint_every=None, resume=False, xgb_model=None) -> dict:
    """Train on the workers holding dtrain's rows.

    Returns {"booster": Booster, "history": {eval name: {metric: [per round]}},
    "training_path": the way the rounds were trained (daskgb/training/plan.py; the booster's
    attributes() also say why faster ways were not taken), "collective": [per-rank
    communicator statistics]}.

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
    within seconds; training never hangs on it. A fit on workers another fit is training on
    waits for it to end (dask/fit_lock.py; WorkersBusyError after the setting
    dask.wait-for-busy-workers).

    xgb_model: a model to go on from, as in daskgb.train.

    checkpoint_dir / checkpoint_every / resume: as in daskgb.train. Rank 0's worker writes the
    checkpoints, so the directory must be a path it can write. After a lost worker, build the
    DaskQuantileMatrix again and call train with the same arguments and resume=True: the
    finished model equals an unbroken run's.
    """
    evals = list(evals or [])
    options = TrainingOptions.create(params, num_boost_round, verbose_eval=verbose_eval, obj=obj,
                                     custom_metric=custom_metric, early_stopping_rounds=early_stopping_rounds,
                                     maximize=maximize, callbacks=callbacks, checkpoint_dir=checkpoint_dir,
                                     checkpoint_every=checkpoint_every, resume=resume, has_evals=bool(evals),
                                     xgb_model=xgb_model)
    return run(client, options, dtrain, evals)


def run(client, options: TrainingOptions, dtrain: DaskQuantileMatrix, evals=()) -> dict:
    """train() with its options made (the estimators call this): checks the matrices on the
    client, then trains on their workers, once no other fit trains there; returns train()'s dict."""
    evals = list(evals or [])
    options.check(dtrain, evals, DaskQuantileMatrix)
    device = _device(options.train_params.device, dtrain.device)
    # The workers train on the data's device and print nothing: the client shows the progress.
    worker_options = options.for_workers(device)
    plugin.register(client)
    workers = dtrain.workers
    alive = live_workers(client)
    missing = [a for a in workers if a not in alive]
    if missing:
        raise RuntimeError(f"workers holding training data have left the cluster: {missing}")
    with workers_held(client, workers):
        return _train(client, options, worker_options, dtrain, evals)


def _train(client, options: TrainingOptions, worker_options: TrainingOptions, dtrain: DaskQuantileMatrix,
           evals: list) -> dict:
    """run()'s training, on workers this fit holds."""
    num_boost_round, checkpoint_path = options.num_boost_round, options.checkpoint_dir
    workers = dtrain.workers
    if checkpoint_path is not None:  # a bad directory fails here, before any training
        client.submit(checkpoint_dir_ready, str(checkpoint_path), workers=[workers[0]], allow_other_workers=False,
                      pure=False).result()
    job = uuid.uuid4().hex
    root = client.submit(start_collective, job, workers=[workers[0]], allow_other_workers=False,
                         pure=False).result()
    timeout = None  # each worker's setting collective.timeout (daskgb/config.py)
    # Progress and the eval log are shown here, on the client (dask/progress.py); the workers
    # print nothing. Rank 0 reports only when someone shows it: the scheduler keeps every
    # topic's events, and a search's many fits would pile them up there.
    verbose_eval = options.verbose_eval
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
            client.submit(train_on_worker, job, root, rank, len(workers), worker_options, dtrain._local[a],
                          [(m._local[a], name) for m, name in evals], timeout=timeout,
                          progress_topic=topic if display is not None else None, dashboard=board,
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
    booster = results[0]["booster"]
    return {"booster": booster, "history": results[0]["history"], "training_path": booster.attr("training_path"),
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
    on the same workers, which then skips NCCL's setup and teardown (collective/nccl.py; the
    setting collective.keep-nccl false turns keeping off). A kept communicator holds NCCL's
    buffers in device memory until this is called or the worker ends."""
    plugin.register(client)
    return client.run(_release_kept_nccl)


def _release_kept_nccl(dask_worker) -> int:
    """Client.run function: free what this worker's collective state keeps."""
    from ..collective import release_kept_nccl

    return release_kept_nccl(dask_worker)


def _interrupt(client, job: str, workers: list, reason: str) -> list:
    """Release the NCCL waits of the job's ranks on these workers (dask/worker.py
    interrupt_job), within a few seconds at most; the rounds they were in."""
    if not workers:
        return []
    try:  # callback_timeout: Client.run hands it to Client.sync, which bounds the whole call
        answers = client.run(interrupt_job, job, reason, workers=workers, on_error="return", callback_timeout=5)
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


def predict(client, booster, X, output_margin: bool = False, iteration_range=(0, 0), *, pred_leaf: bool = False,
            pred_contribs: bool = False, approx_contribs: bool = False, pred_interactions: bool = False):
    """Lazy predictions for a dask array or dataframe: a dask array, one block per partition.

    The booster travels to each worker once (scattered), never with every block.
    pred_contribs and pred_interactions (either with approx_contribs) and pred_leaf as
    Booster.predict's, block by block: (n, n_features + 1) contributions, (n, n_features + 1,
    n_features + 1) interactions (a group axis after the rows for several outputs), (n,
    n_trees) leaf ids.
    """
    import dask.array as da

    plugin.register(client)
    explain = pred_leaf or pred_contribs or approx_contribs or pred_interactions
    if isinstance(X, DaskQuantileMatrix):
        if explain:
            raise ValueError("pred_contribs and pred_leaf take raw features (a DaskQuantileMatrix holds bins); "
                             "pass the dask array or dataframe instead")
        return _predict_matrix(client, booster, X, output_margin, iteration_range)
    if approx_contribs and not (pred_contribs or pred_interactions):
        raise ValueError("approx_contribs=True is a kind of pred_contribs=True; pass both")
    if sum(map(bool, (pred_leaf, pred_contribs, pred_interactions))) > 1:
        raise ValueError("pred_leaf, pred_contribs and pred_interactions are different outputs; ask for one")
    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got {X.ndim} dimension(s)")
        if X.shape[1] != booster.n_features:
            raise ValueError(f"the model was trained on {booster.n_features} features, X has {X.shape[1]}")
        arr = X.rechunk({1: -1})
    elif hasattr(X, "to_dask_array"):
        if len(X.columns) != booster.n_features:
            raise ValueError(f"the model was trained on {booster.n_features} features, X has {len(X.columns)}")
        # The blocks go to the workers as arrays, without their column names: checked here.
        check_feature_names(booster.feature_names, list(X.columns), "the model", "X")
        # Category columns as codes of the model's categories (by name), as Booster.predict recodes.
        X, _, _ = _categorical_frame(X, booster.feature_types is not None, booster.categories or {})
        arr = X.to_dask_array()
    else:
        raise ValueError(f"X must be a dask array or dataframe, got {type(X).__name__}")
    handle = _scattered(client, booster)
    from dask.array.utils import meta_from_array

    if explain:
        start, end = booster._tree_slice(iteration_range)  # checked here, before any block runs
        k, f = booster.n_groups, booster.n_features
        kind = "leaf" if pred_leaf else ("inter" if pred_interactions else "contribs")
        if pred_leaf:
            shape = ((end - start,),)
        else:
            shape = ((k,),) if k > 1 else ()
            shape += ((f + 1,), (f + 1,)) if pred_interactions else ((f + 1,),)
        meta = meta_from_array(arr._meta, ndim=1 + len(shape), dtype=np.float32)
        new_axis = list(range(2, 1 + len(shape))) or None
        return arr.map_blocks(_explain_block, handle, tuple(iteration_range), kind, bool(approx_contribs),
                              chunks=(arr.chunks[0],) + shape,
                              new_axis=new_axis, dtype=np.float32, meta=meta)
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
    if m.n_features != booster.n_features:
        raise ValueError(f"the model was trained on {booster.n_features} features, the matrix has {m.n_features}")
    handle = _scattered(client, booster)
    k = booster.n_groups
    columns = k if k > 1 and (output_margin or getattr(booster.objective, "output_prob", True)) else 0
    meta = _empty_like_kind("cupy" if m.device == "cuda" else "numpy")
    holders = [a for a in m.workers if m.rows_per_worker[a]]
    futures = [client.submit(_predict_local, handle, m._local[a], output_margin, tuple(iteration_range), workers=[a],
                             allow_other_workers=False, pure=False) for a in holders]
    # The rows stay on their workers, so the predictions are made there and waited for here:
    # a task pinned to a worker that died (before or during the predict) would wait for ever,
    # and the wait raises within seconds naming the worker instead (dask/watch.py).
    gather_watching(client, [client.submit(_rows_of, f, workers=[a], allow_other_workers=False, pure=False)
                             for f, a in zip(futures, holders)], holders, "prediction")
    return da.concatenate([da.from_delayed(f, shape=(m.rows_per_worker[a], columns) if columns
                                           else (m.rows_per_worker[a],), dtype=np.float32,
                                           meta=meta.reshape((0, 0)) if columns else meta)
                           for f, a in zip(futures, holders)])


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


def _explain_block(block, booster, iteration_range, kind, approx):
    """A block's contributions ("contribs"), interactions ("inter") or leaf ids ("leaf")."""
    return booster.predict(block, iteration_range=iteration_range, pred_leaf=kind == "leaf",
                           pred_contribs=kind == "contribs", pred_interactions=kind == "inter",
                           approx_contribs=approx)


def _predict_block(block, booster, output_margin, iteration_range, columns):
    if block.shape[0] == 0:
        xp = np if isinstance(block, np.ndarray) else __import__("cupy")
        return xp.zeros((0, columns) if columns else 0, dtype=np.float32)
    return booster.predict(block, output_margin=output_margin, iteration_range=iteration_range)

