"""How each path of training/plan.py grows a round's trees from its gradient pairs, and moves the training margins.

Every path grows the same trees, bit for bit; they differ in where the decisions are made
and when the host reads the trees. A Rounds object takes each round's gradients (submit)
and hands back the rounds whose trees are known, as (round, trees, scores): at once for
every path but the queued ones, which hand a round back once the next is queued (drain()
gives the last; discard() drops it, when training stops at the round before). scores are
the round's eval scores where the path queued them with the round (Fit.score), else
None (Fit.finish_round scores the trees). Each takes the round's gradient pairs
(gradients.RoundGradients) a layer at a time: a layer is one tree per output group, and a
round of num_parallel_tree trees a group has that many layers, grown one after another from
the same pairs, each sampled for its trees, with the learning rate divided among them
(TrainParams.parallel_tree_params). Tree (group, layer) is the round's tree
group * num_parallel_tree + layer (XGBoost's order), and its index in the model keys its
column samples. A layer's float gradients are freed before its trees grow unless the leaves
are refitted from them.
"""

from __future__ import annotations

from ..adaptive import refresh_leaves
from ..ellpack.pages import compact_rows
from ..growth import host as host_growth
from ..histogram.quantiser import abs_sums, quantise
from ..phases import cut as cut_phase_clock
from ..predict import add_tree_binned
from .evaluation import column
from .gradients import stacked_groups
from .leaf_margins import add_leaf_values
from .plan import Path


def make_rounds(plan, fit) -> "Rounds":
    """The Rounds of a plan's path."""
    if plan.path in (Path.CUDA_GRAPHS, Path.QUEUED_ROUNDS):
        return QueuedRounds(plan, fit)
    if plan.path is Path.COMPACTED_PAGES:
        return CompactedRounds(plan, fit)
    return LevelRounds(plan, fit)


class Rounds:
    """The common part: the plan's path, and the trees' growth it uses."""

    def __init__(self, plan, fit):
        self.plan, self.fit = plan, fit
        self.params = fit.booster.params  # the params the plan was made for
        self.pending = 0  # rounds submitted whose trees the host has not read yet
        if plan.device_levels:
            from ..growth import device as device_growth

            self.grow_forest = device_growth.grow_forest
        else:
            self.grow_forest = host_growth.grow_forest

    @property
    def taken(self) -> str:
        """The path the rounds took (the plan's, unless something made them leave it)."""
        return str(self.plan.path)

    def gradient_buffer(self):
        """An array the next round's gradient pairs may be written into (None: arrays of their own)."""
        return None

    def submit(self, it: int, gpairs: list, first_tree: int) -> list:
        raise NotImplementedError

    def drain(self) -> list:
        return []

    def discard(self) -> None:
        """Training stops: a round queued after the last one handed back is dropped."""

    def close(self) -> None:
        pass

    def _grow(self, ell, gnative, scale, params, tree_indices):
        fit = self.fit
        if self.plan.device_levels:
            return self.grow_forest(ell, gnative, scale, params, fit.comm, fit.root_from_bins, tree_indices)
        return self.grow_forest(fit.backend, ell, gnative, scale, params, fit.comm, fit.root_from_bins,
                                tree_indices=tree_indices, interaction=fit.interaction, monotone=fit.monotone)


class LevelRounds(Rounds):
    """HOST_LEVELS, STREAMED_PAGES and DEVICE_LEVELS: a layer's trees grown together on
    dtrain's matrix (the host waiting for them), the training margins moved by the rows' leaves."""

    def submit(self, it, grads, first_tree):
        fit = self.fit
        backend, xp, ell, n_groups, layers = fit.backend, fit.xp, fit.dtrain.ellpack, grads.n_groups, len(grads)
        p = fit.booster.params.parallel_tree_params()
        refits = fit.options.refits_leaves
        # Refitted leaves read the residuals of the margins the round started from, for every
        # parallel tree (XGBoost's UpdateTreeLeaf): kept, where later layers move the margins.
        before = fit.margin.copy() if refits and layers > 1 else fit.margin
        trees = [None] * (n_groups * layers)
        n = ell.n_rows
        for layer in range(layers):
            gpairs = grads.next_layer()
            gpair = stacked_groups(xp, gpairs)
            # The device grower reads the scale on the device: no host wait for it here.
            gnative, scale = quantise(backend, gpair, fit.comm, wait=not self.plan.device_levels)
            # Device memory: the float gradients are done with unless leaves are refitted below.
            del gpair
            if not refits:
                gpairs = None
            new_trees, positions = self._grow(ell, gnative, scale, p,
                                              [first_tree + g * layers + layer for g in range(n_groups)])
            del gnative
            for group, tree in enumerate(new_trees):
                alpha = fit.objective.leaf_quantile_alpha(group) if fit.options.obj is None else None
                if alpha is not None:
                    # Quantile objectives refit the leaves to their rows' residuals (before the margins move).
                    leaves = positions if n_groups == 1 else positions[group * n : (group + 1) * n] // n_groups
                    refresh_leaves(xp, tree, leaves, column(before, group), fit.dtrain.label, gpairs[group][:, 1],
                                   fit.dtrain.weight, alpha, p.learning_rate, fit.comm)
                # Training margins come from the rows' final leaves: no re-prediction.
                add_leaf_values(backend, xp, fit.margin, group, tree.value, positions, n, n_groups)
                trees[group * layers + layer] = tree
        return [(it, trees, None)]


class CompactedRounds(Rounds):
    """COMPACTED_PAGES: tree `group` grows on the rows its sampling kept, gathered into one
    in-core matrix (ellpack pages' compact_rows; dropped rows have zero gradients, so the tree
    is the one streaming the pages would grow), then every row's margin moves by the tree
    routed through its bins, page by page."""

    def submit(self, it, grads, first_tree):
        fit = self.fit
        backend, xp, paged = fit.backend, fit.xp, fit.dtrain.ellpack
        p = fit.booster.params.parallel_tree_params()
        n_groups, layers = grads.n_groups, len(grads)
        trees = [None] * (n_groups * layers)
        for layer in range(layers):
            pending = grads.next_layer()
            # One fixed-point scale for the layer's trees, sized as the other paths size it (all
            # groups' rows, all workers'), so that the trees are the ones they grow, bit for bit.
            abs_sum = abs_sums(backend, stacked_groups(xp, pending), fit.comm)
            for group in range(n_groups):
                gpair, pending[group] = pending[group], None
                kept = xp.flatnonzero((gpair[:, 0] != 0) | (gpair[:, 1] != 0))
                ell = compact_rows(backend, paged, kept)
                g = gpair[kept]
                gnative, scale = quantise(backend, g, fit.comm, wait=not self.plan.device_levels, abs_sum=abs_sum)
                (tree,), _ = self._grow(ell, gnative, scale, p, (first_tree + group * layers + layer,))
                del ell, g, gnative, gpair, kept
                add_tree_binned(backend, paged, tree, column(fit.margin, group))
                trees[group * layers + layer] = tree
        return [(it, trees, None)]


class QueuedRounds(Rounds):
    """QUEUED_ROUNDS and CUDA_GRAPHS: each round's trees queued on the device (as one CUDA
    graph replayed, for CUDA_GRAPHS; the graph also makes the fixed-point pairs) and the
    training margins moved there by their leaves, nothing waited for; the eval sets' margins
    are moved by the trees as the device holds them and their metrics queued after them; the
    host reads a round's trees and scores once the next round is queued."""

    def __init__(self, plan, fit):
        super().__init__(plan, fit)
        from ..growth.graphs import ForestGraphs

        self.graphs = ForestGraphs(enabled=plan.path is Path.CUDA_GRAPHS)
        # (round, its layers' QueuedForests, scores): a round on the device whose trees the host has not read
        self.queued = None

    @property
    def taken(self) -> str:
        if self.plan.path is Path.CUDA_GRAPHS and self.graphs.failure is not None:
            return f"{Path.QUEUED_ROUNDS} (the CUDA graph capture failed: {self.graphs.failure})"
        return str(self.plan.path)

    def gradient_buffer(self):
        """The gradient pairs the round's CUDA graph reads, once it is captured: written there,
        they need no copy, and the device holds one (n, 2) array of them, not two. Not with
        parallel trees: each layer's sample of the pairs is copied there, and the next needs them."""
        if self.fit.booster.params.num_parallel_tree > 1:
            return None
        return self.graphs.values_of(self.fit.dtrain.n_rows * self.fit.n_groups)

    def submit(self, it, grads, first_tree):
        fit = self.fit
        p = fit.booster.params.parallel_tree_params()
        n_groups, layers = grads.n_groups, len(grads)
        forests = []
        for layer in range(layers):  # each layer the same launches (one graph replayed)
            gpairs = grads.next_layer()
            gpair = stacked_groups(fit.xp, gpairs)
            del gpairs
            forest = self.graphs.queue(fit.dtrain.ellpack, gpair, p, fit.comm, fit.root_from_bins,
                                       [first_tree + g * layers + layer for g in range(n_groups)])
            del gpair
            # The trees' words are read in stream order now, before the next replay rewrites them.
            words = forest.words
            forest.add_to(fit.margin)
            if fit.evals:
                fit.evals.add_trees(fit.backend, [words[c] for c in range(n_groups)], range(n_groups))
            del words
            forests.append(forest)
        scores = fit.score()
        cut_phase_clock()  # the round's work ends here in stream order: its lap, read with its trees
        done = self.drain()
        self.queued, self.pending = (it, forests, scores), 1
        return done

    def drain(self):
        if self.queued is None:
            return []
        (it, forests, scores), self.queued, self.pending = self.queued, None, 0
        layers = [forest.trees() for forest in forests]
        # The model's order: a group's trees of every layer, group after group.
        return [(it, [trees[group] for group in range(len(layers[0])) for trees in layers], scores)]

    def discard(self):
        self.queued, self.pending = None, 0

    def close(self):
        self.graphs.close()
