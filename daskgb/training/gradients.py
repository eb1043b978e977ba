"""A round's gradient pairs: the objective's (or the user's obj's), one column per output group, sampled."""

from __future__ import annotations

from ..sampling import mvs_sample, row_sample


def round_gradients(backend, objective, obj, margin, dtrain, it: int, n_groups: int, p, n_rows_total: int,
                    row_offset, comm, out=None) -> list:
    """Round it's gradient pairs, one (n_rows, 2) array per output group, sampled as p says.
    n_rows_total: the rows of all workers; row_offset: this worker's first row among them, or
    its rows' runs of global indices (a row's sampling draws are keyed by its global index, so
    they do not depend on the partitioning).
    out: an (n_rows, 2) device array the pairs of a one-output built-in objective may be
    written into (training's CUDA graph reads them there); other pairs are arrays of their own."""
    xp = backend.xp
    if obj is None and out is not None and n_groups == 1 and objective.writes_gradients_into:
        gpair_all = objective.gradient_of(xp, margin, dtrain, it, out=out)
    elif obj is None:
        gpair_all = objective.gradient_of(xp, margin, dtrain, it)
    else:
        gpair_all = custom_gradient(xp, obj, margin, dtrain)
    # One tree per output group (class), each from its own column of gradients; the
    # groups' trees grow together, sharing each step's backend calls (growth/host.py).
    gpairs = []
    for group in range(n_groups):
        gpair = gpair_all if n_groups == 1 else gpair_all[:, group]
        if p.subsample < 1.0 and p.sampling_method == "gradient_based":
            # One output: the pairs are this round's own, sampled where they lie (device memory).
            gpair = mvs_sample(backend, gpair, p.subsample, n_rows_total, row_offset, p.seed, it * n_groups + group,
                               comm, inplace=n_groups == 1)
        elif p.subsample < 1.0:
            gpair = gpair * row_sample(xp, dtrain.n_rows, row_offset, p.seed, it * n_groups + group,
                                       p.subsample)[:, None]
        gpairs.append(gpair)
    return gpairs


def custom_gradient(xp, obj, margin, dtrain):
    """(n, 2) float32 gradient pairs from a user's objective, checked; (n, K, 2) for K outputs."""
    grad, hess = obj(margin.copy(), dtrain)
    n = margin.shape[0]
    out = xp.empty(margin.shape + (2,), dtype=xp.float32)
    for j, (v, what) in enumerate(((grad, "gradient"), (hess, "hessian"))):
        v = xp.asarray(v, dtype=xp.float32)
        if v.size != margin.size:
            raise ValueError(f"the custom objective returned {v.size} {what} values for {n} rows"
                             + (f" x {margin.shape[1]} outputs" if margin.ndim == 2 else ""))
        out[..., j] = v.reshape(margin.shape)
    if not bool(xp.isfinite(out).all()):
        raise ValueError("the custom objective returned NaN or infinite gradients or hessians")
    return out
