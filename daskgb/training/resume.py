"""Resuming a fit from its newest checkpoint (checkpoint.py): trees, margins, history and early stopping put back."""

from __future__ import annotations

from .. import checkpoint as _checkpoint
from ..callback import EarlyStopping
from ..predict import add_tree_binned
from .evaluation import column


def resume(fit) -> int:
    """Put the newest checkpoint back into the fit (a training.loop._Fit); returns the rounds
    it holds (0 without one). Rank 0 reads it and sends it to the other ranks."""
    from ..booster import Booster

    comm, checkpoints = fit.comm, fit.checkpoints
    state = None
    if comm.rank == 0:
        try:
            state = ("ok", checkpoints.latest())
        except Exception as exc:  # every rank must hear of it, not wait for rank 0
            state = ("error", f"{type(exc).__name__}: {exc}")
    if comm.world_size > 1:
        state = comm.broadcast(state, root=0)
    status, state = state
    if status != "ok":
        raise ValueError(f"resume: {state}")
    if state is None:
        return 0
    where = state.get("path", str(checkpoints.directory))
    differs = _checkpoint.mismatch(state.get("fingerprint") or {}, fit.fingerprint)
    if differs:
        raise ValueError(f"resume: the checkpoint {where} was written by a run with other {differs}; resume with "
                         "the same data and parameters, or start afresh (resume=False, or another checkpoint_dir)")
    rounds = int(state["rounds"])
    num_boost_round = fit.options.num_boost_round
    if rounds > num_boost_round:
        raise ValueError(f"resume: the checkpoint {where} holds {rounds} rounds, more than num_boost_round="
                         f"{num_boost_round}")
    booster, history = fit.booster, fit.evals.history
    saved = Booster.from_dict(state["model"])
    if saved.base_score != booster.base_score:
        raise ValueError(f"resume: the checkpoint {where} has base_score {saved.base_score}, this run estimates "
                         f"{booster.base_score} from its labels: the labels differ from the interrupted run's")
    if set(state["history"]) != set(history):
        raise ValueError(f"resume: the checkpoint {where} has eval sets {sorted(state['history'])}, this run "
                         f"{sorted(history)}: give the same evals")
    booster.trees[:], booster.tree_info[:] = saved.trees, saved.tree_info
    booster.best_iteration, booster.best_score = saved.best_iteration, saved.best_score
    # The margins training had: the trees' leaf values added one tree at a time, in order.
    for tree, group in zip(saved.trees, saved.tree_info):
        add_tree_binned(fit.backend, fit.dtrain.ellpack, tree, column(fit.margin, group))
        fit.evals.add_tree(fit.backend, tree, group)
    for name, metrics in state["history"].items():
        history[name].clear()
        history[name].update({k: list(v) for k, v in metrics.items()})
    # Early stopping's best score and round, as the rounds before the checkpoint left them.
    for cb in fit.callbacks:
        if isinstance(cb, EarlyStopping):
            for r in range(rounds):
                cb.after_iteration(booster, r, {n: {k: v[: r + 1] for k, v in ms.items()}
                                                for n, ms in history.items()})
    return rounds
