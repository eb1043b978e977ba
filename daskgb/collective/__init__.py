"""Communicators: how workers sum histograms and agree on values (one process, Dask comms, NCCL).

Training is SPMD: one long-running task per worker, ranks ``0..n-1``, meeting only in
collectives, every rank calling the same collectives in the same order. Three
implementations of one contract (:class:`Communicator`, base.py), one module each:

- :class:`LocalCommunicator` (local.py) -- one process; every collective returns its input.
- :class:`DaskCommunicator` (dask_comms.py) -- CPU workers, over Dask's own comms, a star
  through rank 0 that reduces in rank order, so results are bit-identical on every rank and
  the same from run to run; ``start_root`` / ``stop_root`` run the rendezvous that starts a job.
- :class:`NcclCommunicator` (nccl.py) -- GPU workers: cupy arrays reduced by NCCL, everything
  else through a host communicator (a :class:`DaskCommunicator`); communicators kept between
  fits (``release_kept_nccl``).

What they keep between calls (rendezvous, kept NCCL communicators) is a worker's
:class:`CollectiveState` (state.py), held by the worker's daskgb plugin.

Failures raise ``RuntimeError`` on every surviving rank, naming the rank at fault: a peer
process that dies is seen within milliseconds (its sockets close); a peer that hangs is
reported after the per-operation timeout (the daskgb setting ``collective.timeout``, 600 s
by default; ``resolve_timeout``).

This package is below the Dask layer: daskgb.dask imports it, never the reverse.
"""

from .base import Communicator, reduce_in_rank_order, resolve_timeout
from .dask_comms import DaskCommunicator, start_root, stop_root
from .local import LocalCommunicator
from .nccl import NcclCommunicator, release_kept_nccl
from .state import CollectiveState

__all__ = ["Communicator", "LocalCommunicator", "DaskCommunicator", "NcclCommunicator", "CollectiveState",
           "reduce_in_rank_order", "resolve_timeout", "start_root", "stop_root", "release_kept_nccl"]
