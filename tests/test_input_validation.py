"""Bad input is a ValueError that names the problem, raised before any training starts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import daskgb
from daskgb.arrays import cuda_available


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    return X, y


def test_length_mismatch(data):
    X, y = data
    with pytest.raises(ValueError, match=r"y \(labels\) has 49 entries but X has 50 rows"):
        daskgb.QuantileMatrix(X, y[:-1], device="cpu")


def test_weight_length_mismatch(data):
    X, y = data
    with pytest.raises(ValueError, match="weight has 10 entries but X has 50 rows"):
        daskgb.QuantileMatrix(X, y, weight=np.ones(10), device="cpu")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_labels(data, bad):
    X, y = data
    y = y.copy()
    y[3] = bad
    with pytest.raises(ValueError, match=r"y \(labels\) has 1 NaN or infinite values"):
        daskgb.QuantileMatrix(X, y, device="cpu")


def test_binary_logistic_labels_outside_0_1_raised_by_train(data):
    X, y = data
    y = y.copy()
    y[:2] = 2.0
    dtrain = daskgb.QuantileMatrix(X, y, device="cpu")  # valid labels for some objective
    with pytest.raises(ValueError, match=r"binary:logistic needs labels in \{0, 1\}"):
        daskgb.train({"objective": "binary:logistic", "device": "cpu"}, dtrain, num_boost_round=1)


def test_binary_logistic_labels_in_eval_set_checked(data):
    X, y = data
    dtrain = daskgb.QuantileMatrix(X, y, device="cpu")
    deval = daskgb.QuantileMatrix(X, np.full(len(y), -1.0), ref=dtrain, device="cpu")
    with pytest.raises(ValueError, match="binary:logistic"):
        daskgb.train({"objective": "binary:logistic", "device": "cpu"}, dtrain, 1, evals=[(deval, "eval")])


def test_non_numeric_pandas_columns():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "city": ["x", "y", "z"], "b": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"non-numeric columns: \['city'\]"):
        daskgb.QuantileMatrix(df, np.array([0.0, 1.0, 0.0]), device="cpu")


def test_numeric_pandas_columns_accepted():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [1, 2, 3], "c": pd.array([1, None, 3], dtype="Int64")})
    m = daskgb.QuantileMatrix(df, np.array([0.0, 1.0, 0.0]), device="cpu")
    assert m.feature_names == ["a", "b", "c"]
    assert (m.n_rows, m.n_features) == (3, 3)


@pytest.mark.parametrize("shape, what", [((0, 0), "no rows"), ((0, 3), "no rows"), ((5, 0), "no features")])
def test_empty_X(shape, what):
    with pytest.raises(ValueError, match=what):
        daskgb.QuantileMatrix(np.empty(shape, dtype=np.float32), device="cpu")


def test_empty_dataframe():
    with pytest.raises(ValueError, match="no rows"):
        daskgb.QuantileMatrix(pd.DataFrame(), device="cpu")


def test_negative_weights(data):
    X, y = data
    w = np.ones(len(y))
    w[[1, 7]] = -0.5
    with pytest.raises(ValueError, match="weight has 2 negative values"):
        daskgb.QuantileMatrix(X, y, weight=w, device="cpu")


def test_predict_with_a_different_number_of_features(data):
    X, y = data
    booster = daskgb.train({"device": "cpu"}, daskgb.QuantileMatrix(X, y, device="cpu"), num_boost_round=2)
    with pytest.raises(ValueError, match="trained on 3 features, the data has 4"):
        booster.predict(np.zeros((5, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="trained on 3 features, the data has 2"):
        booster.predict(np.zeros((5, 2), dtype=np.float32))


def test_estimator_predict_with_a_different_number_of_features(data):
    X, y = data
    model = daskgb.GBRegressor(n_estimators=2, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="X has 4 features, but GBRegressor is expecting 3 features as input"):
        model.predict(np.zeros((5, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="trained on 3 features, the data has 4"):
        model.get_booster().predict(np.zeros((5, 4), dtype=np.float32))


def test_eval_set_without_ref_is_binned_with_the_training_cuts(data):
    X, y = data
    dtrain = daskgb.QuantileMatrix(X, y, device="cpu")
    deval = daskgb.QuantileMatrix(X, y, device="cpu")
    got, want = {}, {}
    daskgb.train({"device": "cpu"}, dtrain, 2, evals=[(deval, "eval")], evals_result=got, verbose_eval=False)
    daskgb.train({"device": "cpu"}, dtrain, 2, evals=[(dtrain, "eval")], evals_result=want, verbose_eval=False)
    assert got == want


def test_unknown_parameter_reaches_train(data):
    X, y = data
    dtrain = daskgb.QuantileMatrix(X, y, device="cpu")
    with pytest.raises(ValueError, match="unknown parameter 'max_leaves_typo'"):
        daskgb.train({"max_leaves_typo": 3}, dtrain, 1)


@pytest.mark.skipif(cuda_available(), reason="checks the error raised where there is no GPU")
def test_cuda_without_a_gpu_is_a_clear_runtime_error(data):
    X, y = data
    with pytest.raises(RuntimeError, match="device='cuda'.*no GPU"):
        daskgb.QuantileMatrix(X, y, device="cuda")
    dtrain = daskgb.QuantileMatrix(X, y, device="cpu")
    with pytest.raises(RuntimeError, match="device='cuda'.*no GPU"):
        daskgb.train({"device": "cuda"}, dtrain, 1)
    with pytest.raises(RuntimeError, match="device='cuda'.*no GPU"):
        daskgb.GBClassifier(n_estimators=1, device="cuda").fit(X, y)


def test_single_row_trains():
    # XGBoost trains on one row (a single leaf); the sketch must not fail on it.
    X = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    booster = daskgb.train({"device": "cpu"}, daskgb.QuantileMatrix(X, np.array([4.0]), device="cpu"), 2)
    assert booster.predict(X).shape == (1,)


def test_estimator_empty_y():
    with pytest.raises(ValueError, match="empty"):
        daskgb.GBClassifier(device="cpu").fit(np.zeros((0, 3)), np.zeros(0))
    with pytest.raises(ValueError, match="y is None"):
        daskgb.GBRegressor(device="cpu").fit(np.zeros((3, 3)), None)
