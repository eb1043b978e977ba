"""train(): a fit's rounds, as a short loop over the planned path's rounds."""

from __future__ import annotations

from ..callback import ranked
from ..collective import LocalCommunicator
from ..cpu import buffers
from ..matrix import QuantileMatrix, eval_sets_binned_like
from ..out_of_memory import explained
from .fit import Fit
from .options import TrainingOptions
from .plan import logger
from .rounds import make_rounds


@explained("training", "dtrain")
def train(params: dict, dtrain, num_boost_round: int = 10, evals=(), verbose_eval=True,
          evals_result: dict | None = None, comm=None, *, obj=None, custom_metric=None,
          early_stopping_rounds: int | None = None, maximize: bool | None = None, callbacks=(),
          checkpoint_dir=None, checkpoint_every: int | None = None, resume: bool = False, xgb_model=None):
    """Train a booster in this process (XGBoost's xgboost.train, for QuantileMatrix data).

    evals: (QuantileMatrix, name) pairs, evaluated after every round; one built without
    ref=dtrain is binned again with dtrain's cuts from its X (while X lives). verbose_eval: True, False, or
    print every n-th round. evals_result: a dict to fill with
    {name: {metric: [value per round]}}.

    obj: a custom objective, ``obj(margin, dtrain) -> (grad, hess)`` with arrays of
    the training device (numpy, or cupy on CUDA); as in XGBoost it applies the
    weights itself, base_score defaults to 0.5 and is not estimated, and
    predictions are raw margins unless params name an objective to transform them.
    custom_metric: ``custom_metric(predt, dmatrix) -> (name, value)``, reported
    beside the built-in metrics (set disable_default_eval_metric to drop the
    default one); predt is the raw margin with a custom objective and the output
    otherwise. On several workers it sees every worker's rows.

    early_stopping_rounds: stop once the last metric of the last eval set has not
    improved for that many rounds (XGBoost's rule; ``maximize`` defaults to True for
    auc); the booster keeps every tree, records best_iteration and best_score, and
    predicts with the trees up to best_iteration unless told otherwise.

    callbacks: daskgb.callback.TrainingCallback objects (EarlyStopping,
    EvaluationMonitor, LearningRateScheduler, or your own), called as XGBoost calls
    them; any of them may stop training. On Dask they run on every worker.

    checkpoint_dir / checkpoint_every: write the model and eval history to that directory
    every n rounds (and at the end), atomically; resume=True goes on from the newest
    checkpoint there, and the finished model equals an unbroken run's (daskgb/checkpoint.py).

    xgb_model: a model to go on from (a daskgb Booster, or the path of a model saved by daskgb
    or XGBoost): num_boost_round more rounds are trained from its margins, and the returned
    booster holds its trees, then the new ones; evals_result holds the new rounds. Its trees
    must route rows by dtrain's bins (continued.py says when they can; else ValueError).

    The booster's attributes() say which way its rounds were trained ("training_path"; see
    daskgb/training/plan.py) and why each faster way was not taken.
    """
    evals = list(evals or [])
    options = TrainingOptions.create(params, num_boost_round, verbose_eval=verbose_eval, obj=obj,
                                     custom_metric=custom_metric, early_stopping_rounds=early_stopping_rounds,
                                     maximize=maximize, callbacks=callbacks, checkpoint_dir=checkpoint_dir,
                                     checkpoint_every=checkpoint_every, resume=resume, has_evals=bool(evals),
                                     xgb_model=xgb_model)
    if isinstance(dtrain, QuantileMatrix) and "max_bin" in options.params:
        # A matrix with cuts of its own takes the parameters' max_bin (as XGBoost bins a DMatrix).
        dtrain = dtrain.with_max_bin(options.train_params.max_bin)
    # An eval set built without ref=dtrain is binned with dtrain's cuts (as XGBoost bins a DMatrix's).
    evals = eval_sets_binned_like(evals, dtrain)
    return run(options, dtrain, evals, comm=comm, evals_result=evals_result)


@explained("training", "dtrain")
def run(options: TrainingOptions, dtrain, evals=(), *, comm=None, evals_result: dict | None = None,
        after_round=None):
    """Train with options on dtrain (a QuantileMatrix), watching evals: in process, or as one
    rank of a Dask fit (comm: the collective; after_round(round, history): the Dask layer's
    reports). Returns the Booster."""
    comm = comm or LocalCommunicator()
    with ranked(comm.rank):  # the callbacks' training_rank(): what writes files writes on rank 0
        return _run(options, dtrain, evals, comm, evals_result, after_round)


def _run(options, dtrain, evals, comm, evals_result, after_round):
    fit = Fit(options, dtrain, list(evals or []), comm, evals_result)
    plan = fit.plan()
    rounds = make_rounds(plan, fit)
    taken = []  # (first round, Rounds) of each path the rounds took
    try:
        for it in range(fit.first_round, options.num_boost_round):
            if fit.start_round(it):
                break
            if fit.booster.params is not rounds.params:  # a callback changed them: the path may change too
                plan, rounds = _replan(fit, rounds, it)
            if not taken or taken[-1][1] is not rounds:
                taken.append((it, rounds))
            grads = fit.gradients(it, out=rounds.gradient_buffer())
            first_tree = len(fit.booster.trees) + rounds.pending * fit.booster.trees_per_round
            stop = False
            for done, trees, scores in rounds.submit(it, grads, first_tree):
                stop = fit.finish_round(done, trees, after_round, scores) or stop
            if stop:
                rounds.discard()  # a round queued after the one that stopped is not the model's
                break
        for done, trees, scores in rounds.drain():
            fit.finish_round(done, trees, after_round, scores)
    finally:
        rounds.close()
        buffers.release()  # the compiled CPU path's histograms: a fit's memory goes back when it ends
    fit.booster.set_attr(training_path=_path_taken(taken, rounds), training_path_refused=plan.refusals())
    return fit.after_training()


def _replan(fit, rounds, it: int):
    """(plan, rounds) for the booster's changed params, from round it on."""
    plan = fit.plan()
    if plan == rounds.plan:
        rounds.params = fit.booster.params
        return plan, rounds
    logger.debug("daskgb round %d: the params changed, the path is now %s", it, plan.path)
    for done, trees, scores in rounds.drain():  # none: a path that queues runs no callback that writes
        fit.finish_round(done, trees, scores=scores)
    rounds.close()
    return plan, make_rounds(plan, fit)


def _path_taken(taken: list, last) -> str:
    """The path the rounds took, or the paths with their rounds where a callback's change of
    params moved them (e.g. "device-levels (rounds 0-4), host-levels (rounds 5-)")."""
    if len(taken) <= 1:
        return last.taken
    parts = []
    for i, (first, rounds) in enumerate(taken):
        end = taken[i + 1][0] - 1 if i + 1 < len(taken) else None
        span = f"rounds {first}-{end}" if end is not None else f"rounds {first}-"
        parts.append(f"{rounds.taken} ({span})")
    return ", ".join(parts)
