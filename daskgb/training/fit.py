"""One fit's state and the host's work around its rounds: set-up, gradients, each round's model, log and checkpoint."""

from __future__ import annotations

import logging

import numpy as np

from .. import checkpoint as _checkpoint
from .. import metric as _metric
from ..backend import get_backend, resolve_device
from ..booster import Booster, initial_margin
from ..callback import only_read
from ..predict import add_tree_binned
from .evaluation import EvalSets
from .gradients import round_gradients
from .plan import PlanFacts, RoundPlan, logger, plan_rounds
from .resume import resume


class Fit:
    """A fit of options on dtrain (a QuantileMatrix: in process, or a worker's share), watched
    on evals, with comm's collectives: everything set up before the first round, in the
    order every rank runs the same collectives."""

    def __init__(self, options, dtrain, evals, comm, evals_result: dict | None):
        from ..matrix import QuantileMatrix

        self.options, self.comm = options, comm
        self.interaction, self.monotone = options.check(dtrain, evals, QuantileMatrix)
        p = options.train_params
        self.device = resolve_device(p.device)
        self.backend = backend = get_backend(self.device)
        threads = p.nthread if p.nthread else _worker_threads()
        backend.set_threads(threads)
        if getattr(dtrain, "feature_types", None) is not None and not backend.splits_by_category:
            raise ValueError(f"categorical features do not train on the {backend.name} backend")
        self.xp = xp = backend.xp
        self.dtrain = dtrain = dtrain.on(self.device)
        # One objective object for the whole fit: prepare() may keep per-data state in it.
        self.objective = objective = options.objective
        self.n_groups = objective.n_groups
        obj = options.obj
        if obj is None:  # a custom objective decides for itself which labels it accepts
            objective.check_labels(xp, dtrain.label)
            for m, _ in evals:
                objective.check_labels(xp, m.on(self.device).label)
            objective.prepare(xp, dtrain, comm)
        base = options.xgb_model
        if base is not None:
            from .continued import check_base

            check_base(base, self.n_groups, dtrain)
            base_score = base.base_score  # the model's intercept: its margins go on from it
        elif p.base_score is not None:
            base_score = p.base_score
        elif obj is not None:
            base_score = 0.5  # XGBoost cannot fit an intercept for a loss it does not know
        else:
            base_score = objective.estimate_base_score(xp, dtrain.label, dtrain.weight, comm)
        base_score = float(np.float32(base_score)) if np.ndim(base_score) == 0 else \
            [float(v) for v in np.float32(base_score)]
        self.booster = Booster(options.params, [], base_score, dtrain.n_features, dtrain.feature_names,
                               feature_types=dtrain.feature_types, categories=dtrain.categories)
        self.booster._train_cuts_token = dtrain.cuts_token
        if threads and not p.nthread:  # as xgboost.dask's fits: the worker's threads are the model's nthread
            self.booster.set_param("nthread", threads)
        for m, _ in evals:  # labels a metric cannot score are an error before the first round
            for k in options.metrics:
                _metric.check_labels(k, xp, m.on(self.device).label, p.ndcg_exp_gain, m.groups, comm)

        self.margin = self.start_margin(dtrain)
        self.evals = EvalSets(evals, self.device, self.start_margin, dtrain, options, evals_result, comm)
        self.first_round = 0
        if base is not None:
            self._go_on_from(base)
        self.callbacks = options.callbacks_for_run()
        for cb in self.callbacks:
            self.booster = cb.before_training(self.booster) or self.booster
        verbose = options.verbose_eval
        self.print_every = 1 if verbose is True else (int(verbose) if verbose else 0)
        if comm.rank != 0:
            self.print_every = 0
        # Row sampling is keyed by a row's global index, so a row's draws do not depend on how
        # rows are partitioned or placed: a Dask worker's matrix knows its rows' places in the
        # collection (row_spans: runs of global indices); otherwise this worker's first row in
        # the concatenation of all workers' rows (rank order).
        self.row_offset, self.n_rows_total = 0, dtrain.n_rows
        if comm.world_size > 1:
            counts = comm.allgather(dtrain.n_rows)
            self.row_offset, self.n_rows_total = int(sum(counts[: comm.rank])), int(sum(counts))
        spans = getattr(dtrain, "row_spans", None)
        if spans:
            self.row_offset = tuple(spans)
        # Every worker must sum the root the same way, so the choice is made for all at once.
        ell = dtrain.ellpack
        self.root_from_bins = bool(comm.allreduce(np.array([int(ell.is_dense and not ell.has_missing)]), "min")[0])
        self.checkpoints, self.fingerprint = None, None
        if options.checkpoint_dir is not None:
            self.fingerprint = _checkpoint.fingerprint(options.params, dtrain.cuts, self.n_rows_total,
                                                       dtrain.n_features, dtrain.feature_names)
            self.checkpoints = _checkpoint.Checkpoints(options.checkpoint_dir, options.checkpoint_every,
                                                       self.fingerprint, options.num_boost_round)
            if comm.rank == 0:  # rank 0 writes them
                _checkpoint.check_writable(options.checkpoint_dir)
            if options.resume:
                self.first_round = resume(self)

    def _go_on_from(self, base) -> None:
        """Continued training: base's trees first in the model, the margins (training's and the
        eval sets') moved by them, and the rounds numbered on from base's."""
        from .continued import trees_in_bins
        from .evaluation import column

        trees = trees_in_bins(base, self.dtrain.cuts, self.dtrain.cuts_token, getattr(self.dtrain, "categories", None))
        self.booster.trees[:], self.booster.tree_info[:] = trees, list(base.tree_info)
        for tree, group in zip(trees, base.tree_info):
            add_tree_binned(self.backend, self.dtrain.ellpack, tree, column(self.margin, group))
            self.evals.add_tree(self.backend, tree, group)
        self.first_round = self.options.base_rounds

    def start_margin(self, m):
        """The margins a matrix starts from: its base_margin, else the model's base score."""
        xp = self.xp
        if m.base_margin is not None:
            return m.base_margin.astype(xp.float32).copy()
        return initial_margin(xp, self.objective, self.booster.base_score, m.n_rows)

    def plan(self, params=None) -> RoundPlan:
        """The rounds' path for these params (the booster's own by default: a callback may change them)."""
        options = self.options
        params = params or self.booster.params
        facts = PlanFacts.of(params, device=self.device, paged=self.dtrain.paged,
                             n_trees_per_round=self.n_groups * params.num_parallel_tree,
                             custom_objective=options.obj is not None,
                             refits_leaves=options.refits_leaves,
                             custom_metric=bool(self.evals) and options.custom_metric is not None,
                             writing_callbacks=not only_read(self.callbacks),
                             interaction=self.interaction, monotone=self.monotone, comm=self.comm,
                             widest_categorical=self.dtrain.cuts.widest_categorical)
        plan = plan_rounds(facts)
        if self.comm.rank == 0 and logger.isEnabledFor(logging.DEBUG):
            logger.debug("daskgb training path: %s", plan.describe())
        return plan

    # ---------------------------------------------------------------- each round
    def start_round(self, it: int) -> bool:
        """Round it begins: the communicator learns which (a collective that fails then says
        the round, and the Dask layer reads it off the error); True if a callback stops here."""
        comm = self.comm
        comm.training_round = it
        host = getattr(comm, "host_comm", None)
        if host is not None:
            host.training_round = it
        return self.agree([cb.before_iteration(self.booster, it, self.evals.history) for cb in self.callbacks])

    def gradients(self, it: int, out=None):
        """Round it's gradient pairs, one (n_rows, 2) array per output group, sampled for each of
        the round's trees (gradients.RoundGradients; round_gradients says when they are written
        into out)."""
        return round_gradients(self.backend, self.objective, self.options.obj, self.margin, self.dtrain, it,
                               self.n_groups, self.booster.params, self.n_rows_total, self.row_offset, self.comm,
                               out=out)

    def score_round(self, trees, groups):
        """The eval sets' margins moved by a round's trees (host Trees or device words; tree c
        of output group groups[c]) and their metrics queued (None without eval sets): for a
        path that reads later."""
        if not self.evals:
            return None
        self.evals.add_trees(self.backend, trees, groups)
        return self.score()

    def score(self):
        """The eval sets' metrics for the model so far, queued (None without eval sets)."""
        if not self.evals:
            return None
        return self.evals.score(self.xp, self.objective, self.margin, self.comm)

    def round_groups(self) -> list[int]:
        """The output group of each of a round's trees, in the model's order (tree_info's)."""
        npt = self.booster.params.num_parallel_tree
        return [group for group in range(self.n_groups) for _ in range(npt)]

    def finish_round(self, it: int, new_trees, after_round=None, scores=None) -> bool:
        """The host's part of round it, once its trees are known: the model, the eval log, the
        callbacks and the checkpoint. scores: the round's eval scores where the path made them
        already (score_round), else they are made here. True to stop."""
        booster, history, options = self.booster, self.evals.history, self.options
        groups = self.round_groups()
        booster.trees.extend(new_trees)
        booster.tree_info.extend(groups)
        every = self.print_every
        if self.evals:
            if scores is None:
                scores = self.score_round(new_trees, groups)
            line = [f"[{it}]"] + self.evals.record(scores)
            if every and (it % every == 0 or it == options.num_boost_round - 1):
                print("\t".join(line), flush=True)
        if after_round is not None:  # the Dask layer's progress and dashboard reports (dask/worker.py)
            after_round(it, history)
        # Every callback runs (none is skipped because an earlier one asked to stop), as in XGBoost.
        stop = self.agree([cb.after_iteration(booster, it, history) for cb in self.callbacks])
        checkpoints = self.checkpoints
        if checkpoints is not None and self.comm.rank == 0 and (stop or it + 1 == options.num_boost_round
                                                                or checkpoints.due(it + 1)):
            checkpoints.save(booster, history, it + 1, options.num_boost_round, self.fingerprint)
        if stop:
            from ..callback import EarlyStopping

            for cb in self.callbacks:
                if every and isinstance(cb, EarlyStopping) and cb.best_round is not None:
                    print(f"Stopping. Best iteration: [{cb.best_round}] {cb.metric}:{cb.best:.5f}", flush=True)
        return stop

    def agree(self, votes) -> bool:
        """True if any callback on any worker asked to stop: all workers stop at the same round.

        Every worker runs the same callbacks, so with none there is nothing to agree on and no
        collective is made: a host round trip per round is a large share of a short round."""
        if not votes:
            return False
        stop = any(votes)
        if self.comm.world_size > 1:
            stop = bool(self.comm.allreduce(np.array([int(stop)], dtype=np.int64), "max")[0])
        return stop

    def after_training(self) -> Booster:
        for cb in self.callbacks:
            self.booster = cb.after_training(self.booster) or self.booster
        return self.booster


def _worker_threads() -> int | None:
    """A Dask worker's thread count, as xgboost.dask gives its workers' fits; None (every core)
    in process."""
    try:
        from distributed import get_worker

        return get_worker().state.nthreads
    except (ImportError, ValueError):
        return None
