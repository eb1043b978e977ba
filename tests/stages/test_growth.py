"""Trees grown on the device (growth/device.py) equal the host grower's, the reference (GPU only).

Every field of every tree must be equal bit for bit, and so must the rows' leaves (the
training margins): the device decides what the host's driver and grower decide, with
the same arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest

import daskgb

pytestmark = pytest.mark.gpu

CASES = [
    dict(objective="reg:squarederror", max_depth=6, max_bin=64),
    dict(objective="binary:logistic", max_depth=8, max_bin=256, reg_alpha=0.5, min_child_weight=2),
    dict(objective="reg:logistic", max_depth=4, max_bin=16, gamma=0.2, reg_lambda=5),
    dict(objective="binary:logistic", max_depth=5, max_bin=128, max_delta_step=0.7),
    dict(objective="reg:squarederror", max_depth=1, max_bin=32),
    dict(objective="reg:squarederror", max_depth=10, max_bin=32, min_child_weight=0),
    # Few valid splits: whole levels end early, some nodes stay leaves at every depth.
    dict(objective="binary:logistic", max_depth=7, max_bin=64, min_child_weight=60, gamma=1.0),
    dict(objective="reg:squarederror", max_depth=6, max_bin=64, colsample_bytree=0.7, colsample_bylevel=0.6),
    dict(objective="reg:pseudohubererror", max_depth=6, max_bin=48, subsample=0.7),
    # A tree per class, grown one after another (the host grower grows them together).
    dict(objective="multi:softprob", num_class=3, max_depth=6, max_bin=64, colsample_bytree=0.8),
]


def _data(seed, n, f=10, layout="dense"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3] * 2)
    if layout == "missing":
        X[rng.random(X.shape) < 0.2] = np.nan
    elif layout == "sparse":
        X[rng.random(X.shape) < 0.7] = 0.0
    Z = np.nan_to_num(X)
    score = Z[:, 0] - Z[:, 1] * Z[:, 2] + np.sin(Z[:, 3]) + rng.normal(size=n) * 0.5
    return X, score


def _matrix(X, score, objective, layout, weight=None, max_bin=256):
    import cupy
    import scipy.sparse as sp

    y = (score > 0).astype(np.float32) if objective == "binary:logistic" else score.astype(np.float32)
    if objective == "multi:softprob":
        y = np.digitize(score, [-0.5, 0.7]).astype(np.float32)
    if objective == "reg:logistic":
        y = (1 / (1 + np.exp(-score))).astype(np.float32)
    data = sp.csr_matrix(X) if layout == "sparse" else cupy.asarray(X)
    return daskgb.QuantileMatrix(data, cupy.asarray(y), weight=None if weight is None else cupy.asarray(weight),
                                 max_bin=max_bin, device="cuda")


def _train_both(params, m, X, rounds):
    """(boosters, training-metric histories, predictions on X): device grower first, host second.
    The training metric comes from the margins training keeps, which the rows' leaves move."""
    import dask.config

    boosters, histories, preds = [], [], []
    for enabled, path in ((True, "device-levels"), (False, "host-levels")):
        res = {}
        with dask.config.set({"daskgb.training.device-growth": enabled}):
            b = daskgb.train({**params, "device": "cuda", "seed": 3}, m, rounds, evals=[(m, "train")],
                             evals_result=res, verbose_eval=False)
        assert b.attr("training_path") == path
        boosters.append(b)
        histories.append(res["train"])
        preds.append(np.asarray(b.predict(X, output_margin=True)))
    return boosters, histories, preds


def assert_identical(a, b):
    assert a.num_boosted_rounds() == b.num_boosted_rounds()
    for i, (ta, tb) in enumerate(zip(a.trees, b.trees)):
        for name in ("left", "right", "parent", "feature", "bin", "threshold", "default_left", "value",
                     "base_weight", "gain", "cover", "depth"):
            x, y = getattr(ta, name), getattr(tb, name)
            assert x.dtype == y.dtype, f"tree {i} {name}: {x.dtype} != {y.dtype}"
            np.testing.assert_array_equal(x, y, err_msg=f"tree {i} {name}")


@pytest.mark.parametrize("layout", ["dense", "missing", "sparse"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_device_trees_equal_host_trees(case, layout):
    params = dict(CASES[case])
    max_bin = params.pop("max_bin")
    X, score = _data(case, 3000, layout=layout)
    w = np.random.default_rng(case).uniform(0.5, 2, X.shape[0]).astype(np.float32) if case % 2 else None
    m = _matrix(X, score, params["objective"], layout, w, max_bin)
    (dev, host), (h_dev, h_host), (p_dev, p_host) = _train_both(params, m, X, 6)
    assert_identical(dev, host)
    assert h_dev == h_host
    np.testing.assert_array_equal(p_dev, p_host)


def test_root_only_trees():
    """A tree whose root does not split: one leaf, every row on it."""
    X, score = _data(5, 2000)
    m = _matrix(X, score, "reg:squarederror", "dense")
    (dev, host), (h_dev, h_host), _ = _train_both({"max_depth": 4, "gamma": 1e9}, m, X, 2)
    assert dev.trees[0].n_nodes == 1
    assert_identical(dev, host)
    assert h_dev == h_host


def test_cases_outside_its_scope_take_the_host_grower():
    """The planner's refusals (tests/test_training_plan.py tests each) on a real fit."""
    X, score = _data(4, 1000)
    m = _matrix(X, score, "reg:squarederror", "dense")
    for change, why in ((dict(grow_policy="lossguide", max_leaves=8), "grow_policy='lossguide'"),
                        (dict(colsample_bynode=0.5), "colsample_bynode=0.5"),
                        (dict(max_depth=13), "max_depth=13 > 12")):
        b = daskgb.train({"device": "cuda", "max_depth": 6, **change}, m, 2, verbose_eval=False)
        assert b.attr("training_path") == "host-levels", change
        assert f"device-levels: {why}" in b.attr("training_path_refused"), b.attr("training_path_refused")


def test_nan_gradients_are_an_error():
    """The device grower's scale is made on the device without a host wait; NaN gradients
    are still reported, once the round's trees are read back and before they are used."""
    import cupy

    from daskgb.backend import cupy_backend as cb
    from daskgb.collective import LocalCommunicator
    from daskgb.growth import device
    from daskgb.params import TrainParams

    X, score = _data(2, 1000)
    m = _matrix(X, score, "reg:squarederror", "dense")
    g = cupy.stack([cupy.asarray(score, dtype=cupy.float32), cupy.ones(1000, dtype=cupy.float32)], axis=1)
    g[5, 0] = cupy.nan
    fixed, scale = cb.prepare_gradients(g, wait=False)
    params = TrainParams.from_dict({"max_depth": 3})
    with pytest.raises(ValueError, match="NaN"):
        device.grow_forest(m.ellpack, fixed, scale, params, LocalCommunicator(), True)


@pytest.mark.parametrize("max_depth", range(1, 13))
def test_level_histograms_share_one_buffer_without_overlap(max_depth):
    """growth/device.py's _HistogramArena: at every level that builds, the parents' histograms, the
    built children's and all children's are disjoint views of one buffer; the children are
    the next level's parents; the buffer is no larger than what one level holds at once."""
    from daskgb.growth.device import _HistogramArena

    total_bins = 7
    arena = _HistogramArena(max_depth, total_bins)
    node = total_bins * 2 * 8
    base = arena.buf.data.ptr

    def span(view, nodes):
        assert view.shape == (nodes, total_bins, 2) and view.flags.c_contiguous
        lo = (view.data.ptr - base) // node
        assert 0 <= lo and lo + nodes <= arena.nodes
        return set(range(lo, lo + nodes))

    assert span(arena.hist(0), 1)
    most = 1
    for depth in range(max_depth - 1):  # the levels that build children
        k = 2**depth
        parents, built, children = span(arena.hist(depth), k), span(arena.built(depth), k), \
            span(arena.children(depth), 2 * k)
        assert not (parents & built) and not (parents & children) and not (built & children)
        assert arena.children(depth).data.ptr == arena.hist(depth + 1).data.ptr
        most = max(most, 4 * k)
    assert arena.nodes == most
