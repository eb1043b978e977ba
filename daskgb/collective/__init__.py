"""Communicators: how workers sum histograms and agree on values (one process, Dask comms, NCCL)."""

from .dask_comms import (  # noqa: F401
    Communicator,
    DaskCommunicator,
    LocalCommunicator,
    NcclCommunicator,
    _keep,
    _take_kept,
    reduce_in_rank_order,
    release_kept_nccl,
    resolve_timeout,
    start_root,
    stop_root,
)
