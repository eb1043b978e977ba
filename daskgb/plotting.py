"""Plots with matplotlib (XGBoost's plot_importance, plot_metric's learning curves and plot_tree).

Each takes a daskgb Booster or a fitted estimator (plot_metric also an evals_result dict),
draws on the given matplotlib Axes or a new one, and returns the Axes. matplotlib is
imported when a plot is drawn: it is not a dependency of daskgb. plot_tree draws the tree
with matplotlib itself (XGBoost's needs graphviz).
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_importance", "plot_metric", "plot_tree"]


def _booster(model):
    from .booster import Booster

    if isinstance(model, Booster):
        return model
    if hasattr(model, "get_booster"):
        return model.get_booster()
    raise TypeError(f"expected a daskgb Booster or a fitted daskgb estimator, got {type(model).__name__}")


def _axes(ax, figsize=None):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_importance(model, ax=None, *, importance_type: str = "weight", max_num_features: int | None = None,
                    height: float = 0.2, xlim=None, ylim=None, title: str = "Feature importance",
                    xlabel: str | None = None, ylabel: str = "Features", grid: bool = True,
                    show_values: bool = True, values_format: str = "{v}", **kwargs):
    """Horizontal bars of each feature's importance (Booster.get_score(importance_type)),
    largest at the top, as xgboost.plot_importance; kwargs go to Axes.barh."""
    scores = _booster(model).get_score(importance_type=importance_type)
    if not scores:
        raise ValueError("the model has no splits: no feature importance to plot")
    items = sorted(scores.items(), key=lambda kv: kv[1])
    if max_num_features is not None:
        items = items[-int(max_num_features):]
    names, values = zip(*items)
    ax = _axes(ax)
    ylocs = np.arange(len(values))
    ax.barh(ylocs, values, align="center", height=height, **kwargs)
    if show_values:
        for x, y in zip(values, ylocs):
            v = round(x, 2) if isinstance(x, float) and importance_type != "weight" else int(x)
            ax.text(x + 1 if importance_type == "weight" else x * 1.01, y, values_format.format(v=v), va="center")
    ax.set_yticks(ylocs)
    ax.set_yticklabels(names)
    ax.set_xlim(xlim if xlim is not None else (0, max(values) * 1.1))
    ax.set_ylim(ylim if ylim is not None else (-1, len(values)))
    ax.set_title(title)
    ax.set_xlabel(xlabel if xlabel is not None else {"weight": "F score"}.get(importance_type, importance_type))
    ax.set_ylabel(ylabel)
    ax.grid(grid)
    return ax


def plot_metric(evals_result, metric: str | None = None, ax=None, *, title: str = "Learning curves",
                xlabel: str = "Boosting round", ylabel: str | None = None, grid: bool = True):
    """One line per eval set of a metric per round, as xgboost.plot_metric. evals_result: the
    dict daskgb.train fills (daskgb.dask.train returns it as "history"), or an estimator fitted
    with an eval_set (a Booster keeps no history). metric: the metric's name, needed when the
    sets report several. An estimator's best_iteration is marked."""
    best = None
    if hasattr(evals_result, "evals_result"):
        best = getattr(evals_result.get_booster(), "best_iteration", None)
        evals_result = evals_result.evals_result()
    if not isinstance(evals_result, dict) or not evals_result:
        raise ValueError("plot_metric needs an evals_result dict ({set: {metric: [per round]}}) or an estimator "
                         "fitted with an eval_set")
    available = sorted({m for d in evals_result.values() for m in d})
    if metric is None:
        if len(available) != 1:
            raise ValueError(f"the eval sets report {available}; pass metric= one of them")
        metric = available[0]
    if metric not in available:
        raise ValueError(f"metric {metric!r} is not in the evals_result (it has {available})")
    ax = _axes(ax)
    for name, metrics in evals_result.items():
        if metric in metrics:
            ax.plot(np.arange(len(metrics[metric])), metrics[metric], label=name)
    if best is not None:
        ax.axvline(best, color="grey", linestyle="--", linewidth=1, label=f"best iteration ({best})")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel if ylabel is not None else metric)
    ax.grid(grid)
    ax.legend()
    return ax


def plot_tree(model, num_trees: int = 0, ax=None, *, rankdir: str = "TB", fontsize: float = 8.0, precision: int = 4,
              figsize=None):
    """Tree num_trees of the model as boxes and arrows: a split reads "f<threshold" (the
    feature's name where the model has names), a categorical split "f:{1,3,4}" (the category
    codes that go right, as XGBoost's dump writes it); its edges "yes" / "no" with ", missing"
    on the branch missing values take ("yes" is the left child of a numeric split, the right
    one of a categorical split, as in XGBoost); the left edge is blue, the right red; a leaf
    reads its value. rankdir "TB" grows down, "LR" right."""
    booster = _booster(model)
    if not 0 <= num_trees < len(booster.trees):
        raise ValueError(f"num_trees={num_trees} is outside the model's {len(booster.trees)} trees")
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"rankdir must be 'TB' or 'LR', got {rankdir!r}")
    tree = booster.trees[num_trees]
    names = booster.feature_names or [f"f{i}" for i in range(booster.n_features)]

    # Leaves take consecutive slots from left to right; a split sits over the middle of its
    # children. Walked with a stack, not recursion: a tree may be thousands of levels deep.
    pos: dict[int, tuple[float, int]] = {}
    slot = 0
    stack = [(0, False)]
    while stack:
        node, children_placed = stack.pop()
        left, right = int(tree.left[node]), int(tree.right[node])
        if left < 0:
            pos[node] = (float(slot), int(tree.depth[node]))
            slot += 1
        elif children_placed:
            pos[node] = ((pos[left][0] + pos[right][0]) / 2, int(tree.depth[node]))
        else:
            stack.extend([(node, True), (right, False), (left, False)])  # the left subtree first
    width, depth = max(slot, 1), int(tree.depth.max()) + 1

    def xy(node):
        x, d = pos[node]
        return (x, -d) if rankdir == "TB" else (d, -x)

    ax = _axes(ax, figsize=figsize or ((max(6, width * 1.4), max(3, depth * 1.2)) if rankdir == "TB"
                                       else (max(6, depth * 2.2), max(3, width * 0.6))))

    def label(node):
        if tree.left[node] < 0:
            return f"leaf={tree.value[node]:.{precision}g}"
        if node in tree.categories:
            return _split_label(names[tree.feature[node]], tree.categories[node])
        return f"{names[tree.feature[node]]}<{tree.threshold[node]:.{precision}g}"

    for node in pos:
        if tree.left[node] >= 0:
            # "yes" is the branch of rows that meet the split's test: v < threshold goes left,
            # a category in the set goes right.
            right_is_yes = node in tree.categories
            for child, left in ((int(tree.left[node]), True), (int(tree.right[node]), False)):
                yes = left != right_is_yes
                (x0, y0), (x1, y1) = xy(node), xy(child)
                ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                            arrowprops={"arrowstyle": "->", "color": "#1f77b4" if left else "#d62728", "lw": 1})
                missing = bool(tree.default_left[node]) == left
                ax.text((x0 + x1) / 2, (y0 + y1) / 2, ("yes" if yes else "no") + (", missing" if missing else ""),
                        fontsize=fontsize * 0.85, ha="center", va="center", color="#444444",
                        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    for node in pos:
        x, y = xy(node)
        leaf = tree.left[node] < 0
        ax.text(x, y, label(node), ha="center", va="center", fontsize=fontsize, zorder=3,
                bbox={"boxstyle": "round,pad=0.3", "fc": "#e8f4e8" if leaf else "#eef3fb",
                      "ec": "#2ca02c" if leaf else "#1f77b4"})
    xs, ys = zip(*(xy(n) for n in pos))
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    ax.set_axis_off()
    return ax


def _split_label(name: str, categories) -> str:
    """A categorical split as XGBoost's dump writes it: the feature, then the category codes
    that go right, e.g. "color:{1,3,4}"."""
    return f"{name}:{{{','.join(str(int(c)) for c in categories)}}}"
