"""Training on a Dask cluster: one long-running task per worker, histograms summed by collectives."""

from __future__ import annotations

import uuid

from ..training.options import TrainingOptions
from . import dashboard, plugin, progress
from .data import DaskQuantileMatrix
from .fit_lock import workers_held
from .watch import gather_watching, live_workers, silent_workers
from .worker import checkpoint_dir_ready, interrupt_job, start_collective, train_on_worker

__all__ = ["train", "run", "WorkerLostError", "WorkerUnresponsiveError", "release_nccl"]


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

    evals: (DaskQuantileMatrix, name) pairs; one built without ref=dtrain is binned again with
    dtrain's cuts on dtrain's workers from the collections it was built from. obj and
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
    # An eval set built without ref=dtrain is binned with dtrain's cuts on dtrain's workers (as
    # XGBoost bins a DaskDMatrix eval set); the matrices made for it are this fit's, freed after it.
    given = list(evals or [])
    made = []
    p = options.train_params
    if isinstance(dtrain, DaskQuantileMatrix) and "max_bin" in options.params and dtrain.max_bin != p.max_bin \
            and dtrain.source() is not None:
        # A matrix with cuts of its own takes the parameters' max_bin (as XGBoost bins a DaskDMatrix).
        dtrain = DaskQuantileMatrix(dtrain.client, **dtrain.source(), max_bin=p.max_bin)
        made.append(dtrain)
    evals = _eval_sets_binned_like(given, dtrain)
    made += [m for (m, _), item in zip(evals, given) if m is not item[0]]
    try:
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
    finally:
        for m in made:
            m.release()


def _eval_sets_binned_like(evals: list, dtrain) -> list:
    """The eval sets, each binned with dtrain's cuts (DaskQuantileMatrix.binned_like); pairs
    that are not (DaskQuantileMatrix, name) are left for the options' checks to name."""
    if not isinstance(dtrain, DaskQuantileMatrix) or dtrain.released:
        return list(evals)
    out = []
    for item in evals:
        if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], DaskQuantileMatrix) \
                and not item[0].released and not item[0].shares_cuts_with(dtrain) \
                and item[0].n_features == dtrain.n_features:
            item = (item[0].binned_like(dtrain, f"eval set {item[1]!r}"), item[1])
        out.append(item)
    return out


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
            r = getattr(exc, "daskgb_round", None)
            if r is None and rounds:  # a survivor held in NCCL said where it was
                r = max(rounds)
            if lost:
                raise WorkerLostError(_lost_message(r, lost, workers, num_boost_round, checkpoint_path),
                                      lost, r) from exc
            # Alive to the scheduler but silent (stopped, frozen): its peers' collectives gave up on
            # it after the collective timeout, with an error that cannot say which rank (NCCL's).
            # Only a collective's failure (a RuntimeError) is put down to it: a rank's own error
            # (bad input, say) is raised as it is.
            silent = silent_workers(client, workers) if type(exc) is RuntimeError else {}
            if not silent:
                raise
            raise WorkerUnresponsiveError(_silent_message(r, silent, workers, num_boost_round, exc),
                                          list(silent), r) from exc
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


class WorkerUnresponsiveError(RuntimeError):
    """Training stopped because a worker it ran on stopped answering (stopped, frozen, its event
    loop blocked) while the scheduler still counted it alive: its peers' collectives gave up on it
    after the collective timeout (the setting collective.timeout).

    workers: the silent workers' addresses; round: the round training was in, where known."""

    def __init__(self, message: str, workers=(), round: int | None = None):
        super().__init__(message)
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
    interrupt_job), within a few seconds at most; the rounds they were in. Silent workers
    (dask/watch.py silent_workers) are passed over, as they cannot answer (Client.run waits for
    every worker's answer, even with wait=False); when one wakes, its NCCL watchdog finds its
    wait long past the timeout, and its host collectives read the failure rank 0 sent them."""
    workers = [a for a in workers if a not in silent_workers(client, workers)]
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


def _silent_message(r, silent: dict, workers, num_boost_round, exc) -> str:
    """Which worker stopped answering, when, and what to do."""
    names = ", ".join(f"{a} (rank {workers.index(a)}; the scheduler has not heard from it for {s:g} s)"
                      for a, s in silent.items())
    when = f"in round {r} of {num_boost_round}" if r is not None else "during training"
    return (f"daskgb: worker {names} stopped answering {when}, so training stopped: its peers gave up waiting "
            f"for it ({exc}). Its rows are still there: once it answers again, train again (with "
            "checkpoint_dir= and resume=True to go on from the newest checkpoint); if it stays stopped, restart it "
            "and build the DaskQuantileMatrix again")


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

