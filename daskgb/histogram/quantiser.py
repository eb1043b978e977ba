"""The gradient quantiser (XGBoost's GradientQuantiser): a round's gradient pairs as the histograms sum them.

On the GPU the histograms sum int64 fixed point, so that their sums are exact whatever the
order of the adds (backend prepare_gradients says how a scale is sized and applied). Every
worker must quantise with the same scale, or the sums they allreduce would mean different
things: the scale is sized by the sums of |gradient| and |hessian| over every worker's rows,
summed here by the collective. Every training path sizes it through quantise(); nothing
else computes it.
"""

from __future__ import annotations

from ..phases import ALLREDUCE, OTHER, mark


def abs_sums(backend, gpair, comm):
    """The (2,) sums of |gradient| and |hessian| over every worker's rows of gpair (on the
    device for the CUDA backend: NCCL sums them there)."""
    local = backend.gradient_abs_sums(gpair)
    if comm.world_size == 1:
        return local
    mark(ALLREDUCE)
    total = comm.allreduce(local)
    mark(OTHER)
    return total


def quantise(backend, gpair, comm, *, wait: bool, abs_sum=None):
    """(the pairs in the histograms' type, the (2,) scale back to double) for gpair, with the
    scale every worker shares: sized by abs_sum where given (e.g. by more rows than gpair's:
    a paged matrix's sampled rows are quantised as all of them), else by abs_sums (by the
    backend itself, from the same rows, on one worker).
    wait=False: the CUDA backend makes the scale on the device without waiting for it (the
    device grower reads it there; FixedGradients.check_finite then checks it later)."""
    if abs_sum is None and comm.world_size > 1:
        abs_sum = abs_sums(backend, gpair, comm)
    return backend.prepare_gradients(gpair, abs_sum=abs_sum, wait=wait)
