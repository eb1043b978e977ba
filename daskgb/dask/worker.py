"""The SPMD task each worker runs: join the collective, train on local rows in lock-step, return the model."""

from __future__ import annotations


def start_collective(job_id: str) -> str:
    """Run on rank 0's worker before training: open the rendezvous and return its address."""
    from ..collective import start_root

    return start_root(job_id)


def train_on_worker(job_id, root_address, rank, world_size, params, dtrain, evals, num_boost_round, verbose_eval,
                    timeout, obj=None, custom_metric=None, early_stopping_rounds=None, maximize=None, callbacks=()):
    """One worker's share of training. Every rank grows the same trees (the histograms are summed
    across ranks before any decision), so rank 0's booster is the model."""
    from ..booster import train
    from ..collective import DaskCommunicator, NcclCommunicator

    comm = DaskCommunicator.connect(job_id, root_address, rank, world_size, timeout=timeout)
    if params.get("device") == "cuda" and world_size > 1:
        comm = NcclCommunicator(comm)
    # As a context manager the communicator aborts on an exception, so the other
    # ranks fail at once with this rank's error rather than a bare lost connection.
    with comm:
        history: dict = {}
        booster = train(params, dtrain, num_boost_round, evals=evals, verbose_eval=verbose_eval,
                        evals_result=history, comm=comm, obj=obj, custom_metric=custom_metric,
                        early_stopping_rounds=early_stopping_rounds, maximize=maximize, callbacks=callbacks)
    stats = {"rank": rank, "communicator": type(comm).__name__,
             "nccl_allreduce_calls": getattr(comm, "nccl_allreduce_calls", 0),
             "nccl_allreduce_bytes": getattr(comm, "nccl_allreduce_bytes", 0)}
    return {"booster": booster if rank == 0 else None, "history": history, "collective": stats}
