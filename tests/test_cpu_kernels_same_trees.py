"""The CPU's compiled loops (backend/compiled_backend.py) grow the numpy oracle's trees, bit for bit.

Each case trains twice in one process on the same data: once on the numpy backend
(DASKGB_CPU_KERNELS=numpy, the oracle) and once on the compiled one, through the public API,
and compares the models' trees field by field, leaf values included, and their predictions,
exactly: the compiled loops sum, scan and route in the oracle's order and arithmetic. The
cases are the GPU suite's (test_backends_same_trees.py: rules, lossguide, column sampling,
interaction and monotone constraints) plus multiclass, CSR input and a few threads.
"""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
from daskgb import cpu
from test_backends_same_trees import CASES, make

pytestmark = pytest.mark.skipif(not cpu.available(), reason="numba is not installed")


def assert_identical(a, b):
    assert a.num_boosted_rounds() == b.num_boosted_rounds()
    assert len(a.trees) == len(b.trees)
    for i, (ta, tb) in enumerate(zip(a.trees, b.trees)):
        for name in ("left", "right", "feature", "bin", "default_left", "threshold", "value"):
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name), err_msg=f"tree {i} {name}")


def both(monkeypatch, params, X, y, rounds, **matrix):
    """(oracle's model, compiled model) of the same fit."""
    models = []
    for kernels in ("numpy", "compiled"):
        monkeypatch.setenv("DASKGB_CPU_KERNELS", kernels)
        m = daskgb.QuantileMatrix(X, y, max_bin=params.get("max_bin", 256), device="cpu", **matrix)
        models.append(daskgb.train({**params, "device": "cpu"}, m, rounds, verbose_eval=False))
    from daskgb.backend import get_backend

    assert get_backend("cpu").__name__.endswith("compiled_backend")
    return models


@pytest.mark.parametrize("case", range(len(CASES)))
def test_compiled_loops_grow_the_oracles_trees(monkeypatch, case):
    params = {**CASES[case], "nthread": 1 + case % 3}
    X, score = make(case, n=2500)
    y = (score > 0).astype(np.float32) if "logistic" in params["objective"] else score.astype(np.float32)
    if params["objective"] == "reg:logistic":
        y = 1 / (1 + np.exp(-score)).astype(np.float32)
    w = np.random.default_rng(9).uniform(0.5, 2, y.size).astype(np.float32)
    a, b = both(monkeypatch, params, X, y, 12, weight=w)
    assert_identical(a, b)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_multiclass_and_csr_grow_the_oracles_trees(monkeypatch):
    sp = pytest.importorskip("scipy.sparse")
    X, score = make(11, n=2500)
    y = np.digitize(score, np.quantile(score, [0.25, 0.5, 0.75])).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 6, "max_bin": 64, "nthread": 2}
    a, b = both(monkeypatch, params, X, y, 8)
    assert_identical(a, b)
    Xs, score = make(7, n=2500, sparse=True)
    ys = (score > 0).astype(np.float32)
    a, b = both(monkeypatch, {"objective": "binary:logistic", "max_depth": 6, "nthread": 2}, sp.csr_matrix(Xs), ys, 10)
    assert_identical(a, b)
    np.testing.assert_array_equal(a.predict(Xs), b.predict(Xs))


@pytest.mark.parametrize("budget", [1 << 15, 300], ids=["rows-as-listed", "node-by-node"])
def test_mostly_missing_columns_grow_the_oracles_trees(monkeypatch, budget):
    """Columns missing in blocks, ~75% in all (Bosch's shape), read by their present entries
    (histogram/compiled.py entry_layout): a level's rows walked as listed, and (a small cache
    budget) node by node in blocks of bins."""
    from daskgb.histogram import compiled as hist_compiled

    monkeypatch.setattr(hist_compiled, "_HIST_BUDGET", budget)
    rng = np.random.default_rng(17)
    n, n_features, per_station = 2500, 48, 6
    X = np.round(rng.standard_normal((n, n_features)) * 8).astype(np.float32) / 8
    visits = rng.random((n, n_features // per_station)) < 0.25
    visits[0] = True  # one whole row: the dense layout, as wide rows with a few whole rows get
    X[~np.repeat(visits, per_station, axis=1)] = np.nan
    Z = np.nan_to_num(X)
    y = (Z[:, 3] - Z[:, 20] * Z[:, 21] + 0.8 * visits[:, 5] + 0.3 * rng.standard_normal(n) > 0.2).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 6, "max_bin": 64, "nthread": 2}
    a, b = both(monkeypatch, params, X, y, 10)
    ell = daskgb.QuantileMatrix(X, y, max_bin=64, device="cpu").ellpack
    layout = hist_compiled.entry_layout(ell)
    assert ell.is_dense and layout is not None and layout.dense.size == 0, "every column read by its present entries"
    assert budget > 10**4 or layout.block_first.size > 3
    assert_identical(a, b)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
