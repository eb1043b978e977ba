"""The eval sets a fit watches: their margins kept up to date tree by tree, and each round's metrics in the history."""

from __future__ import annotations

import numpy as np

from .. import metric as _metric
from ..arrays import to_host
from ..predict import add_tree_binned


class EvalSets:
    """The (matrix, name) pairs of evals= on the training device, each with its margins (None
    for dtrain itself, whose margins are training's own), and the history of their metrics:
    {name: {metric: [value per round]}} (the evals_result the caller passed, cleared)."""

    def __init__(self, evals, device: str, start_margin, dtrain, options, history: dict | None):
        self.sets = []
        for m, name in evals:
            m = m.on(device)
            self.sets.append((m, name, None if m is dtrain else start_margin(m)))
        self.options = options
        self.metrics = options.metrics
        self.history = history if history is not None else {}
        self.history.clear()
        for _, name, _ in self.sets:
            self.history[name] = {k: [] for k in self.metrics}

    def __bool__(self) -> bool:
        return bool(self.sets)

    def add_tree(self, backend, tree, group: int) -> None:
        """Move every eval row's margin by the tree (output group `group`), routed by its bins."""
        for m, _, em in self.sets:
            if em is not None:
                add_tree_binned(backend, m.ellpack, tree, column(em, group))

    def evaluate(self, xp, objective, train_margin, comm) -> list[str]:
        """Each eval set's metrics for the model so far, appended to the history; returns the
        log line's parts ("name-metric:value")."""
        p, custom = self.options.train_params, self.options.custom_metric
        line = []
        for m, name, em in self.sets:
            em = train_margin if em is None else em
            out = objective.eval_transform(xp, em)
            for k in self.metrics:
                v = _metric.evaluate(k, xp, m.label, out, m.weight, comm, quantile_alpha=p.quantile_alpha,
                                     groups=m.groups, ndcg_exp_gain=p.ndcg_exp_gain,
                                     rank_default_k=self.options.rank_default_k)
                self.history[name][k].append(v)
                line.append(f"{name}-{k}:{v:.5f}")
            if custom is not None:
                k, v = custom_metric(custom, em if self.options.obj is not None else out, m, comm)
                self.history[name].setdefault(k, []).append(v)
                line.append(f"{name}-{k}:{v:.5f}")
        return line


def column(margin, group: int):
    """The margins of one output group: a view, so adding to it updates margin."""
    return margin if margin.ndim == 1 else margin[:, group]


class _Rows:
    """The rows of all workers, as a custom metric sees them (XGBoost's DMatrix getters)."""

    def __init__(self, label, weight):
        self.label, self.weight = label, weight

    def get_label(self):
        return self.label

    def get_weight(self):
        return self.weight if self.weight is not None else np.zeros(0, dtype=np.float32)


def custom_metric(fn, predt, m, comm):
    """(name, value) of the user's metric over every worker's rows of m."""
    if comm.world_size == 1:
        name, value = fn(predt, m)
    else:
        parts = comm.allgather((to_host(predt), to_host(m.label),
                                None if m.weight is None else to_host(m.weight)))
        preds, labels, weights = zip(*parts)
        weight = None if all(w is None for w in weights) else np.concatenate(
            [np.ones(len(y), np.float32) if w is None else w for y, w in zip(labels, weights)])
        name, value = fn(np.concatenate(preds), _Rows(np.concatenate(labels), weight))
    return str(name), float(value)
