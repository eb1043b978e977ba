"""The eval sets a fit watches: their margins kept up to date tree by tree, and each round's metrics in the history."""

from __future__ import annotations

import numpy as np

from .. import metric as _metric
from ..arrays import HostCopy, to_host
from ..predict import add_tree_binned


class EvalSets:
    """The (matrix, name) pairs of evals= on the training device, each with its margins (None
    for dtrain itself, whose margins are training's own), and the history of their metrics:
    {name: {metric: [value per round]}} (the evals_result the caller passed, cleared).

    A round's scores are made where the margins are (metric.metric_parts: on the device,
    nothing waits for them) and read later (Scores.values): a path that queues rounds scores
    round i in stream order and reads the numbers with round i's trees."""

    def __init__(self, evals, device: str, start_margin, dtrain, options, history: dict | None, comm):
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
        # Each set's row count on every worker (the AUCs gather the rows by them): one host collective each, now.
        self.spans = [_metric.row_span(comm, m.n_rows) for m, _, _ in self.sets]

    def __bool__(self) -> bool:
        return bool(self.sets)

    def add_trees(self, backend, trees, groups) -> None:
        """Move every eval row's margin by trees (tree c: output group groups[c]), routed by
        its bins: host Trees, or trees grown on the device in growth.cu's layout."""
        for tree, group in zip(trees, groups):
            self.add_tree(backend, tree, group)

    def add_tree(self, backend, tree, group: int) -> None:
        """Move every eval row's margin by one tree of output group `group`."""
        for m, _, em in self.sets:
            if em is not None:
                add_tree_binned(backend, m.ellpack, tree, column(em, group))

    def score(self, xp, objective, train_margin, comm) -> "Scores":
        """Every set's metrics for the model so far, queued where the margins are (a custom
        metric runs now, on the host)."""
        p, custom = self.options.train_params, self.options.custom_metric
        parts, named, customs = [], [], {}
        for (m, name, em), span in zip(self.sets, self.spans):
            em = train_margin if em is None else em
            out = objective.eval_transform(xp, em)
            for k in self.metrics:
                # Each (set, metric) in turn gathers its rows on the next rank (the AUCs sort there).
                parts.append(_metric.metric_parts(k, xp, m.label, out, m.weight, comm, quantile_alpha=p.quantile_alpha,
                                                  groups=m.groups, ndcg_exp_gain=p.ndcg_exp_gain,
                                                  rank_default_k=self.options.rank_default_k, span=span,
                                                  root=len(parts), label_bounds=(getattr(m, "label_lower_bound", None),
                                                                                 getattr(m, "label_upper_bound", None)),
                                                  aft=(p.aft_loss_distribution, p.aft_loss_distribution_scale)))
                named.append((name, k))
            if custom is not None:
                # What predict gives (XGBoost's custom metric reads predict's output: multi:softmax's
                # classes, not the probabilities its built-in metrics read); margins with a custom objective.
                predt = em if self.options.obj is not None else objective.transform(xp, em)
                customs[name] = custom_metric(custom, predt, m, comm)
        return Scores(HostCopy(_stack(xp, parts)) if parts else None, named, customs)

    def record(self, scores: "Scores") -> list[str]:
        """A round's scores appended to the history (waiting for their copy only); returns the
        log line's parts ("name-metric:value")."""
        values = scores.values()
        line = []
        for _, name, _ in self.sets:
            for k in self.metrics:
                v = values[(name, k)]
                self.history[name][k].append(v)
                line.append(f"{name}-{k}:{v:.5f}")
            if name in scores.customs:
                k, v = scores.customs[name]
                self.history[name].setdefault(k, []).append(v)
                line.append(f"{name}-{k}:{v:.5f}")
        return line


class Scores:
    """A round's metrics: the built-in ones' (num, den) on their way to the host, and the
    custom metric's values, by set name."""

    def __init__(self, parts, named: list, customs: dict):
        self.parts, self.named, self.customs = parts, named, customs

    def values(self) -> dict:
        """{(set name, metric): value}."""
        if self.parts is None:
            return {}
        parts = self.parts.get()
        return {(name, k): _metric.finish(k, parts[i]) for i, (name, k) in enumerate(self.named)}


def column(margin, group: int):
    """The margins of one output group: a view, so adding to it updates margin."""
    return margin if margin.ndim == 1 else margin[:, group]


class _Rows:
    """The rows of all workers, as a custom metric sees them (XGBoost's DMatrix getters)."""

    def __init__(self, label, weight, groups=None):
        self.label, self.weight, self.groups = label, weight, groups

    def get_label(self):
        return self.label

    def get_weight(self):
        return self.weight if self.weight is not None else np.zeros(0, dtype=np.float32)

    def get_group(self):
        """Query group sizes in the rows' order (each worker's groups lie whole on it)."""
        return self.groups if self.groups is not None else np.zeros(0, dtype=np.int64)


def custom_metric(fn, predt, m, comm):
    """(name, value) of the user's metric over every worker's rows of m."""
    if comm.world_size == 1:
        name, value = fn(predt, m)
    else:
        parts = comm.allgather((to_host(predt), to_host(m.label),
                                None if m.weight is None else to_host(m.weight),
                                None if getattr(m, "groups", None) is None else m.get_group()))
        preds, labels, weights, sizes = zip(*parts)
        weight = None if all(w is None for w in weights) else np.concatenate(
            [np.ones(len(y), np.float32) if w is None else w for y, w in zip(labels, weights)])
        groups = None if all(g is None for g in sizes) else np.concatenate(
            [np.zeros(0, np.int64) if g is None else g for g in sizes])
        name, value = fn(np.concatenate(preds), _Rows(np.concatenate(labels), weight, groups))
    return str(name), float(value)


def _stack(xp, parts):
    """The metrics' parts as one array: on a GPU by device copies where they are device arrays of
    one shape (cupy.stack would compile a kernel in a fresh process), else xp.stack."""
    if xp is not np and all(isinstance(a, xp.ndarray) and a.shape == parts[0].shape for a in parts):
        from ..device_arrays import stack

        return stack(parts)
    return xp.stack(parts)
