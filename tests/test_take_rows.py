"""QuantileMatrix.take: rows of a quantised matrix as a matrix of their own, nothing quantised again."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskgb


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 7)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(np.float32)
    w = rng.uniform(0.5, 2.0, n).astype(np.float32)
    return X, y, w


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("paged", [False, True], ids=["in-core", "paged"])
def test_take_equals_the_rows_binned_with_the_same_cuts(device, paged):
    xp = np
    if device == "cuda":
        import cupy as xp
    X, y, w = _data()
    kw = {"device_memory_budget": 4096} if paged else {}
    m = daskgb.QuantileMatrix(xp.asarray(X), xp.asarray(y), weight=xp.asarray(w), device=device, **kw)
    assert m.paged == paged
    rows = np.random.default_rng(1).permutation(600)[:350]
    if paged:
        rows = np.sort(rows)  # a paged matrix gives its rows in ascending order
    sub = m.take(rows)
    same = daskgb.QuantileMatrix(xp.asarray(X[rows]), xp.asarray(y[rows]), weight=xp.asarray(w[rows]), ref=m,
                                 device=device)
    assert sub.shares_cuts_with(m) and sub.n_rows == 350 and not sub.paged
    params = {"objective": "binary:logistic", "max_depth": 4, "device": device}
    a = daskgb.train(params, sub, 6, verbose_eval=False)
    b = daskgb.train(params, same, 6, verbose_eval=False)
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    np.testing.assert_array_equal(a.predict(sub), b.predict(same))


def test_masks_negative_indices_and_errors():
    X, y, _ = _data(n=50)
    m = daskgb.QuantileMatrix(X, y, device="cpu")
    mask = np.zeros(50, dtype=bool)
    mask[[3, 7, 49]] = True
    np.testing.assert_array_equal(m.take(mask).label, y[[3, 7, 49]])
    np.testing.assert_array_equal(m.take(np.array([-1, 0])).label, y[[49, 0]])
    with pytest.raises(ValueError, match=r"row indices must lie in \[-50, 50\)"):
        m.take(np.array([50]))
    with pytest.raises(ValueError, match="a boolean row mask must have 50 entries"):
        m.take(np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="1-D array of row indices"):
        m.take(np.array([[1, 2]]))
    ranked = daskgb.QuantileMatrix(X, y, qid=np.repeat(np.arange(5), 10), device="cpu")
    with pytest.raises(ValueError, match="would cut the groups apart"):
        ranked.take(np.arange(10))
