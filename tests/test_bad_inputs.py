"""The bad-input battery, in one process: every bad input is an error (or, where the answer is still
right, a warning) whose message names the problem, raised before any tree grows.

One case per bad input, each asserting the exception type and a fragment of its message. The Dask
cases (partitioning, query groups across partitions, predict on dask collections) are in
tests/dask/test_bad_inputs_on_dask.py.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import daskgb

N, F = 50, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, F)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=N)).astype(np.float32)
    return X, y


def matrix(X, y=None, **kw):
    return daskgb.QuantileMatrix(X, y, device="cpu", **kw)


def fit(params, X, y, rounds=1, **kw):
    return daskgb.train({"device": "cpu", **params}, matrix(X, y), rounds, verbose_eval=False, **kw)


@pytest.fixture(scope="module")
def named_model(data):
    X, y = data
    return daskgb.train({"device": "cpu"}, matrix(pd.DataFrame(X, columns=["a", "b", "c"]), y), 3,
                        verbose_eval=False)


# ------------------------------------------------------------------ X: shapes and dtypes

def _strings_as_objects(X):
    out = X.astype(object)
    out[4, 1] = "n/a"
    return out


def _dict_as_object(X):
    out = X.astype(object)
    out[0, 0] = {"foo": "bar"}
    return out


def _string_column(X):
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["city"] = "Oslo"
    return df


def _with_inf(X):
    out = X.copy()
    out[3, 2] = np.inf
    return out


@pytest.mark.parametrize("make_X, error, match", [
    (lambda X: X[:, 0], ValueError, r"X must be 2-dimensional \(rows x features\), got 1 dimension"),
    (lambda X: X[:, :, None], ValueError, r"X must be 2-dimensional \(rows x features\), got 3 dimension"),
    (_strings_as_objects, ValueError, r"X must be numeric: it has dtype object and holds str values \(e.g. 'n/a'\)"),
    (_dict_as_object, TypeError, r"X must be numeric: it has dtype object and holds dict values"),
    (lambda X: X.astype(np.complex64), ValueError, r"Complex data not supported: X has dtype complex64"),
    (lambda X: X.astype(str), ValueError, r"X has non-numeric dtype <U"),
    (_string_column, ValueError, r"X has non-numeric columns: \['city'\]"),
    (lambda X: X[:0], ValueError, r"X has no rows"),
    (lambda X: X[:, :0], ValueError, r"X has no features"),
    (lambda X: None, ValueError, r"X is None"),
    # XGBoost's rule: inf is no number to bin; it is data only as the missing marker (missing=inf).
    (_with_inf, ValueError, r"input contains inf; use missing=inf"),
], ids=["1d", "3d", "object-strings", "object-dict", "complex", "string-dtype", "string-column", "no-rows",
        "no-features", "none", "inf-in-X"])
def test_bad_X(data, make_X, error, match):
    X, y = data
    with pytest.raises(error, match=match):
        matrix(make_X(X), y)


# ------------------------------------------------------------------ labels, weights, margins

def _put(v, at, value):
    v = np.asarray(v, dtype=np.float64).copy()
    v[at] = value
    return v


@pytest.mark.parametrize("make_y, match", [
    (lambda y: y[:-1], r"y \(labels\) has 49 entries but X has 50 rows"),
    (lambda y: np.array(["1.5"] * N), r"y \(labels\) must be numeric, got dtype <U3"),
    (lambda y: np.array(["high"] * N, dtype=object), r"y \(labels\) must be numeric: it has dtype object and "
                                                      r"holds str values"),
    (lambda y: _put(y, 3, np.nan), r"y \(labels\) has 1 NaN or infinite values"),
    (lambda y: _put(y, [3, 7], -np.inf), r"y \(labels\) has 2 NaN or infinite values: it contains NaN, infinity "
                                          r"or a value too large"),  # scikit-learn's words, which XGBoost's tests ask for
    (lambda y: np.stack([y, y], axis=1), r"y \(labels\) must be 1-dimensional, got shape \(50, 2\)"),
], ids=["length", "string-dtype", "object-strings", "nan", "inf", "2d"])
def test_bad_labels(data, make_y, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        matrix(X, make_y(y))


@pytest.mark.parametrize("kw, match", [
    ({"weight": _put(np.ones(N), [1, 7], -0.5)}, r"weight has 2 negative values"),
    ({"weight": _put(np.ones(N), 5, np.nan)}, r"weight has 1 NaN or infinite values"),
    ({"weight": _put(np.ones(N), 5, np.inf)}, r"weight has 1 NaN or infinite values"),
    ({"weight": np.ones(10)}, r"weight has 10 entries but X has 50 rows"),
    ({"weight": np.zeros(N)}, r"the weights are all zero"),
    ({"base_margin": np.zeros((N, 3))}, r"base_margin has shape \(50, 3\)"),
    ({"base_margin": np.zeros(N + 1)}, r"base_margin has shape \(51,\), expected \(50,\)"),
], ids=["weight-negative", "weight-nan", "weight-inf", "weight-length", "weight-all-zero", "margin-columns",
        "margin-length"])
def test_bad_weights_and_margins(data, kw, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        daskgb.train({"device": "cpu"}, matrix(X, y, **kw), 1, verbose_eval=False)


# ------------------------------------------------------------------ labels the objective cannot fit

@pytest.mark.parametrize("params, labels, match", [
    ({"objective": "binary:logistic"}, lambda y: _put(y > 0, 0, 2.0), r"binary:logistic needs labels in \{0, 1\}; "
                                                                       r"1 labels are not"),
    ({"objective": "reg:logistic"}, lambda y: _put(np.full(N, 0.5), 0, 1.5), r"reg:logistic needs labels in \[0, 1\]"),
    ({"objective": "count:poisson"}, lambda y: _put(np.ones(N), [0, 1], -1.0), r"count:poisson needs non-negative "
                                                                               r"labels; 2 labels are negative"),
    ({"objective": "reg:gamma"}, lambda y: _put(np.ones(N), 0, 0.0), r"reg:gamma needs positive labels; 1 labels"),
    ({"objective": "reg:tweedie"}, lambda y: _put(np.ones(N), 0, -2.0), r"reg:tweedie needs non-negative labels"),
    ({"objective": "multi:softmax", "num_class": 3}, lambda y: _put(np.zeros(N), 0, 1.5),
     r"multi:softmax needs integer labels in \[0, num_class=3\); 1 labels are not"),
    ({"objective": "multi:softprob", "num_class": 3}, lambda y: _put(np.zeros(N), [0, 1], 3.0),
     r"multi:softprob needs integer labels in \[0, num_class=3\); 2 labels are not"),
], ids=["binary-logistic-2", "reg-logistic-1.5", "poisson-negative", "gamma-zero", "tweedie-negative",
        "softmax-fraction", "softprob-label-is-num_class"])
def test_labels_outside_the_objectives_domain(data, params, labels, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        fit(params, X, labels(y))


def test_eval_set_labels_outside_the_objectives_domain(data):
    X, y = data
    dtrain = matrix(X, (y > 0).astype(np.float32))
    deval = matrix(X, np.full(N, -1.0), ref=dtrain)
    with pytest.raises(ValueError, match=r"binary:logistic needs labels in \{0, 1\}; 50 labels are not"):
        daskgb.train({"objective": "binary:logistic", "device": "cpu"}, dtrain, 1, evals=[(deval, "eval")],
                     verbose_eval=False)


@pytest.mark.parametrize("labels, match", [
    (lambda y: np.zeros(N), r"y has one class \(0\.0\); GBClassifier needs two or more"),
    (lambda y: y, r"Unknown label type: continuous"),
    (lambda y: _put(y > 0, 0, np.nan), r"label y contains NaN or inf"),
], ids=["one-class", "continuous", "nan"])
def test_classifier_labels(data, labels, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        daskgb.GBClassifier(n_estimators=1, device="cpu").fit(X, labels(y))


# ------------------------------------------------------------------ parameters

@pytest.mark.parametrize("params, match", [
    # XGBoost warns and trains without an unknown name; a misspelt one would change nothing silently.
    ({"max_dept": 3}, r"unknown parameter 'max_dept' \(did you mean 'max_depth'\?\)"),
    ({"frobnicate": 1}, r"unknown parameter 'frobnicate'$"),
    ({"eta": 0}, r"learning_rate must be > 0.0, got 0"),
    ({"learning_rate": -0.1}, r"learning_rate must be > 0.0, got -0.1"),
    ({"learning_rate": float("nan")}, r"learning_rate must be a finite number"),
    ({"max_depth": -1}, r"max_depth must be >= 0, got -1"),
    ({"max_depth": "6"}, r"max_depth must be an integer, got '6'"),
    ({"subsample": 1.5}, r"subsample must be in \(0, 1\], got 1.5"),
    ({"subsample": 0}, r"subsample must be > 0.0, got 0"),
    ({"max_bin": 1}, r"max_bin must be >= 2, got 1"),
    ({"colsample_bytree": 1.5}, r"colsample_bytree must be in \(0, 1\]"),
    ({"reg_lambda": -1}, r"reg_lambda must be >= 0.0"),
    ({"objective": "multi:softprob"}, r"multi:softprob needs num_class >= 2 \(the number of classes\), got 0"),
    ({"objective": "reg:squarederorr"}, r"objective must be one of \[.*\], got 'reg:squarederorr'"),
    ({"eval_metric": "rsme"}, r"eval_metric must be one of \[.*\], got 'rsme'"),
    ({"objective": "reg:tweedie", "tweedie_variance_power": 2.0}, r"tweedie_variance_power must be in \[1, 2\)"),
    ({"objective": "reg:quantileerror"}, r"objective reg:quantileerror need\(s\) quantile_alpha"),
    ({"objective": "reg:quantileerror", "quantile_alpha": 1.5}, r"quantile_alpha must be in \[0, 1\], got 1.5"),
    ({"objective": "binary:logistic", "base_score": 1.0}, r"base_score must be in \(0, 1\) for binary:logistic"),
    ({"eta": 0.1, "learning_rate": 0.2}, r"parameter 'learning_rate' given twice"),
    ({"device": "tpu"}, r"device must be one of .*got 'tpu'"),
], ids=["unknown-typo", "unknown", "eta-0", "eta-negative", "eta-nan", "max_depth-negative", "max_depth-string",
        "subsample-above-1", "subsample-0", "max_bin-1", "colsample-above-1", "lambda-negative",
        "softprob-without-num_class", "objective-typo", "metric-typo", "tweedie-power-2", "quantile-without-alpha",
        "quantile-alpha-1.5", "base_score-1-logistic", "alias-twice", "device"])
def test_bad_parameters(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        fit(params, X, y)


def test_num_class_for_a_single_output_objective(data):
    X, y = data
    with pytest.raises(ValueError, match=r"num_class=3 is for multi:softprob and multi:softmax .*not reg:squarederror"):
        fit({"num_class": 3}, X, y)


def test_max_bin_differs_from_the_matrix(data):
    """A matrix whose X is gone cannot be binned again with the parameters' max_bin
    (tests/test_inputs_eval_sets.py: one whose X lives is)."""
    X, y = data
    with pytest.raises(ValueError, match=r"params max_bin=64 differs from the QuantileMatrix's max_bin=256, and "
                                         r"daskgb holds no data to bin it again"):
        daskgb.train({"device": "cpu", "max_bin": 64}, matrix(X.copy(), y), 1, verbose_eval=False)


@pytest.mark.parametrize("rounds, match", [(-1, r"num_boost_round must be an integer >= 0, got -1"),
                                           (2.5, r"num_boost_round must be an integer >= 0, got 2.5")])
def test_bad_num_boost_round(data, rounds, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        daskgb.train({"device": "cpu"}, matrix(X, y), rounds)


def test_quantile_matrix_max_bin(data):
    X, y = data
    with pytest.raises(ValueError, match=r"max_bin must be an integer >= 2, got 1"):
        matrix(X, y, max_bin=1)


def test_estimator_parameter_checked_at_fit(data):
    X, y = data
    with pytest.raises(ValueError, match=r"max_depth must be >= 0, got -2"):
        daskgb.GBRegressor(n_estimators=1, max_depth=-2, device="cpu").fit(X, y)


# ------------------------------------------------------------------ predict: features

@pytest.mark.parametrize("width", [2, 4])
def test_predict_with_another_feature_count(data, named_model, width):
    X, _ = data
    with pytest.raises(ValueError, match=f"the model was trained on 3 features, the data has {width}"):
        named_model.predict(np.zeros((5, width), dtype=np.float32))


@pytest.mark.parametrize("columns, match", [
    (["c", "b", "a"], r"feature_names mismatch: the model has \['a', 'b', 'c'\], the data has \['c', 'b', 'a'\] "
                      r"\(the same names in another order"),
    (["a", "b", "z"], r"feature_names mismatch: .*the data lacks \['c'\]; the model lacks \['z'\]"),
], ids=["reordered", "renamed"])
def test_predict_with_other_feature_names(data, named_model, columns, match):
    """Columns are matched by position; under other names (renamed, or the same names reordered) the
    prediction would be silently wrong. A numpy array has no names: it is matched by position."""
    X, _ = data
    with pytest.raises(ValueError, match=match):
        named_model.predict(pd.DataFrame(X, columns=columns))
    named_model.predict(X)  # no names to compare: accepted


def test_estimator_predict_with_reordered_columns(data):
    X, y = data
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    model = daskgb.GBRegressor(n_estimators=2, device="cpu").fit(df, y)
    with pytest.raises(ValueError, match=r"feature_names mismatch.*another order"):
        model.predict(df[["b", "a", "c"]])


def test_predict_on_a_matrix_with_other_cuts(data):
    """A matrix with cuts of its own is predicted from its X while X lives (as XGBoost predicts any
    DMatrix); once X is gone, its bins cannot be read with the model's cuts: a clear error."""
    import gc

    X, y = data
    booster = fit({}, X, y, rounds=3)
    Xc = X.copy()
    own = matrix(Xc, y)
    np.testing.assert_array_equal(booster.predict(own), booster.predict(X))
    np.testing.assert_array_equal(booster.predict(own, pred_contribs=True), booster.predict(X, pred_contribs=True))
    # One built with ref= another matrix (an eval set of another fit) too.
    np.testing.assert_array_equal(booster.predict(matrix(Xc, y, ref=own)), booster.predict(X))
    del Xc
    gc.collect()
    with pytest.raises(ValueError, match=r"build it with ref=the training matrix, or keep its X"):
        booster.predict(own)


def test_predict_beyond_the_trained_rounds(data):
    X, y = data
    with pytest.raises(ValueError, match=r"iteration_range \(0, 5\) is outside the model's 2 rounds"):
        fit({}, X, y, rounds=2).predict(X, iteration_range=(0, 5))


# ------------------------------------------------------------------ eval sets

def test_empty_eval_set(data):
    X, y = data
    with pytest.raises(ValueError, match=r"X has no rows: 0 sample\(s\)"):
        matrix(X[:0], y[:0], ref=matrix(X, y))


def test_estimator_empty_eval_set(data):
    X, y = data
    with pytest.raises(ValueError, match=r"X has no rows"):
        daskgb.GBRegressor(n_estimators=1, device="cpu").fit(X, y, eval_set=[(X[:0], y[:0])])


def test_eval_set_with_another_feature_count(data):
    X, y = data
    with pytest.raises(ValueError, match=r"ref has 3 features, this data has 4"):
        matrix(np.hstack([X, X[:, :1]]), y, ref=matrix(X, y))


def test_eval_set_with_other_feature_names(data):
    X, y = data
    dtrain = matrix(pd.DataFrame(X, columns=["a", "b", "c"]), y)
    with pytest.raises(ValueError, match=r"feature_names mismatch: ref \(the training matrix\) has .*another order"):
        matrix(pd.DataFrame(X, columns=["a", "c", "b"]), y, ref=dtrain)


def test_eval_set_with_its_own_cuts_and_no_data(data):
    # Binned again with the training cuts from its X while X lives (tests/test_inputs_eval_sets.py);
    # with X gone, the error says what to do.
    X, y = data
    deval = matrix(X.copy(), y)
    with pytest.raises(ValueError, match=r"eval set 'eval' was quantised with cuts of its own, and daskgb holds no "
                                         r"data to bin it again .*QuantileMatrix\(..., ref=dtrain\)"):
        daskgb.train({"device": "cpu"}, matrix(X, y), 1, evals=[(deval, "eval")])


def test_early_stopping_without_an_eval_set(data):
    X, y = data
    with pytest.raises(ValueError, match=r"early stopping needs at least one eval set in evals"):
        daskgb.train({"device": "cpu"}, matrix(X, y), 2, evals=[], early_stopping_rounds=1)


def test_evals_not_pairs(data):
    X, y = data
    dtrain = matrix(X, y)
    with pytest.raises(ValueError, match=r"evals must be a list of \(QuantileMatrix, name\) pairs"):
        daskgb.train({"device": "cpu"}, dtrain, 1, evals=[dtrain])


def test_eval_set_without_labels(data):
    X, y = data
    dtrain = matrix(X, y)
    with pytest.raises(ValueError, match=r"eval set 'e' has no labels"):
        daskgb.train({"device": "cpu"}, dtrain, 1, evals=[(matrix(X, ref=dtrain), "e")])


# ------------------------------------------------------------------ query groups

@pytest.mark.parametrize("kw, match", [
    ({"qid": np.arange(N)[::-1]}, r"qid must be sorted in non-decreasing order.*row 1 has qid 48 after 49"),
    ({"qid": np.zeros(N - 1)}, r"qid has 49 entries but X has 50 rows"),
    ({"qid": np.full(N, -1)}, r"qid must hold non-negative query ids"),
    ({"qid": np.full(N, 0.5)}, r"qid must hold integer query ids"),
    ({"group": [10, 10]}, r"group sizes sum to 20 but X has 50 rows"),
    ({"qid": np.zeros(N), "group": [N]}, r"give one of qid= and group=, not qid and group"),
], ids=["qid-unsorted", "qid-length", "qid-negative", "qid-fractional", "group-sum", "qid-and-group"])
def test_bad_query_groups(data, kw, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        matrix(X, y, **kw)


# ------------------------------------------------------------------ the missing value

@pytest.mark.parametrize("missing, match", [("NA", r"missing must be a number, got 'NA'"),
                                            (None, r"missing must be a number, got None")])
def test_missing_that_is_not_a_number(data, missing, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        matrix(X, y, missing=missing)


def test_missing_sentinel_that_is_every_value_of_a_feature(data):
    """missing=v means entries equal to v are missing (XGBoost's meaning); where v is one value
    among others, those entries take each split's learned default direction, which can send them
    with either side of any threshold, so the model loses nothing by it. Where v is every value
    of a feature (the rest NaN), the feature is all missing and no split can use it: if v was real
    data there (or NaN and v were to be told apart) the model would silently lack it, so it is
    said, by name; the model is still the one XGBoost trains, so a warning, not an error."""
    X, y = data
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["b"] = -999.0
    df.loc[:4, "b"] = np.nan
    with pytest.warns(UserWarning, match=r"missing=-999.0 is the only value of feature\(s\) \['b'\]"):
        matrix(df, y, missing=-999.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        matrix(df, y)  # without the sentinel, -999 is a value like any other: nothing to say


def test_missing_sentinel_that_is_every_entry(data):
    """A sentinel that makes every entry missing leaves nothing to split on: the model could only
    be a constant, a silently wrong answer for whoever meant the value as data. An error."""
    X, y = data
    with pytest.raises(ValueError, match=r"every entry of X is missing: each is NaN or missing=0.0"):
        matrix(np.zeros_like(X), y, missing=0.0)


def test_inf_as_the_missing_marker_is_accepted(data):
    """missing=inf is XGBoost's way to train on data holding inf (the inf-in-X case above says so):
    not a bad input."""
    X, y = data
    m = matrix(_with_inf(X), y, missing=np.inf)
    assert m.ellpack.has_missing


# ------------------------------------------------------------------ model files

@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    X, y = data
    booster = fit({"max_depth": 3}, X, y, rounds=3)
    path = tmp_path_factory.mktemp("model") / "model.json"
    booster.save_model(path)
    xgb_path = path.with_name("xgboost.json")
    booster.save_model(xgb_path, format="xgboost")
    return path.read_text(), xgb_path.read_text()


def _edited(text, edit):
    doc = json.loads(text)
    edit(doc)
    return json.dumps(doc)


def _set(**kw):
    return lambda d: d.update(kw)


def _own_child(tree):
    k = next(i for i in range(1, len(tree["left"])) if tree["left"][i] >= 0)  # a split below the root
    return tree["left"][:k] + [k] + tree["left"][k + 1:]


def _tree0(**kw):
    return lambda d: d["trees"][0].update({k: v(d["trees"][0]) for k, v in kw.items()})


@pytest.mark.parametrize("corrupt, match", [
    (lambda t: _edited(t, _set(version=3)), r"daskgb model version 3 was written by a newer daskgb; this daskgb "
                                            r"reads versions up to 2: upgrade daskgb"),
    (lambda t: _edited(t, _set(version=2, num_parallel_tree=2)), r"corrupted daskgb model: num_parallel_tree is 2, "
                                                                 r"its params say 1"),
    (lambda t: _edited(t, _set(version="1")), r"daskgb model version '1' is not supported"),
    (lambda t: _edited(t, _set(format="lightgbm")), r"not a daskgb model \(format 'lightgbm'\)"),
    (lambda t: t[: len(t) // 2], r"is not valid JSON \(a truncated or corrupted model file\?\)"),
    (lambda t: "", r"is not valid JSON"),
    (lambda t: bytes(range(256)), r"is not a JSON model"),
    (lambda t: "[1, 2, 3]", r"not a daskgb model: a JSON list, not an object"),
    (lambda t: _edited(t, lambda d: d.pop("trees")), r"corrupted daskgb model: it lacks \['trees'\]"),
    (lambda t: _edited(t, _set(trees={"0": []})), r"corrupted daskgb model: trees is a dict, not a list"),
    (lambda t: _edited(t, _tree0(left=lambda tr: tr["left"][:-1])), r"corrupted daskgb model: tree 0: its node "
                                                                     r"arrays differ in length"),
    (lambda t: _edited(t, lambda d: d["trees"][0].pop("threshold")), r"tree 0: it lacks 'threshold'"),
    (lambda t: _edited(t, _tree0(value=lambda tr: ["x"] * len(tr["value"]))), r"tree 0: could not convert"),
    (lambda t: _edited(t, _tree0(left=lambda tr: [99] + tr["left"][1:])), r"tree 0: a child id is outside"),
    # A split node that is its own child: prediction would walk that loop for ever.
    (lambda t: _edited(t, _tree0(left=_own_child)), r"tree 0: a node is the child of two nodes"),
    (lambda t: _edited(t, _tree0(feature=lambda tr: [7] + tr["feature"][1:])),
     r"tree 0: a split feature is outside 0..2 \(the model has 3 features\)"),
    (lambda t: _edited(t, _set(tree_info=[0])), r"tree_info has 1 entries for 3 trees"),
    (lambda t: _edited(t, _set(num_features="three")), r"corrupted daskgb model: num_features is 'three'"),
    (lambda t: "[" * 200_000 + "]" * 200_000, r"is not a model: its JSON is nested too deeply"),
    (lambda t: _edited(t, _tree0(feature=lambda tr: [2**40] + tr["feature"][1:])),
     r"tree 0: its feature holds a number beyond int32"),
    (lambda t: _edited(t, _tree0(bin=lambda tr: [1.5] + tr["bin"][1:])), r"tree 0: its bin holds a value that is not"),
    (lambda t: _edited(t, _tree0(value=lambda tr: tr["value"][:-1] + [123456.5])).replace("123456.5", "1e400"),
     r"tree 0: its value of node \d+ is not a finite float32"),
    (lambda t: _edited(t, _set(base_score=float("nan"))), r"base_score is nan, not a finite number"),
    (lambda t: _edited(t, _set(best_iteration=-1)), r"best_iteration is -1, not a round number"),
    (lambda t: _edited(t, _set(best_iteration="2")), r"best_iteration is '2', not a round number"),
    (lambda t: _edited(t, _set(best_iteration=3)), r"best_iteration 3 is beyond its 3 rounds"),
    (lambda t: _edited(t, _set(tree_info=[0, 0, 5])), r"tree_info holds output group 5, and the model's objective "
                                                       r"has 1"),
    (lambda t: _edited(t, _set(feature_names="abc")), r"feature_names is str, not a list of strings"),
    (lambda t: _edited(t, _set(feature_names=["a", "b"])), r"2 feature_names for 3 features"),
], ids=["newer-version", "parallel-trees-disagree", "version-string", "other-format", "truncated", "empty", "garbage-bytes", "json-list",
        "no-trees", "trees-not-a-list", "tree-array-length", "tree-field-missing", "tree-values-strings",
        "tree-child-out-of-range", "tree-link-cycle", "tree-feature-out-of-range", "tree_info-length",
        "num_features-string", "deeply-nested", "feature-beyond-int32", "bin-not-integer", "leaf-1e400",
        "base_score-nan", "best_iteration-negative", "best_iteration-string", "best_iteration-beyond",
        "tree_info-out-of-range", "feature_names-string", "feature_names-length"])
def test_bad_model_file(saved, tmp_path, corrupt, match):
    text = corrupt(saved[0])
    path = tmp_path / "model.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(ValueError, match=match):
        daskgb.Booster().load_model(path)


@pytest.mark.parametrize("corrupt, match", [
    (lambda d: d["learner"].pop("gradient_booster"), r"XGBoost model file that is corrupted: it lacks "
                                                     r"'gradient_booster'"),
    (lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0].update(left_children=[1]),
     r"corrupted XGBoost model: tree 0: its node arrays differ in length"),
    (lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0].update(
        split_indices=[9] * len(d["learner"]["gradient_booster"]["model"]["trees"][0]["split_indices"])),
     r"corrupted XGBoost model: tree 0: a split feature is outside 0..2"),
], ids=["no-gradient-booster", "tree-array-length", "tree-feature-out-of-range"])
def test_bad_xgboost_model_file(saved, tmp_path, corrupt, match):
    path = tmp_path / "model.json"
    path.write_text(_edited(saved[1], corrupt))
    with pytest.raises(ValueError, match=match):
        daskgb.Booster().load_model(path)


def test_save_in_an_unknown_format(data, tmp_path):
    X, y = data
    with pytest.raises(ValueError, match=r"format must be 'daskgb' or 'xgboost', got 'ubj'"):
        fit({}, X, y).save_model(tmp_path / "m.ubj", format="ubj")


# ------------------------------------------------------------------ names and ranges
def test_repeated_feature_names_are_refused(data):
    """A repeated name would credit one column's splits to another (get_score): refused, as
    XGBoost refuses it."""
    pd = pytest.importorskip("pandas")
    X, y = data
    with pytest.raises(ValueError, match=r"feature names must be unique; repeated: \['a'\]"):
        matrix(pd.DataFrame(X, columns=["a", "a", "b"]), y)
    with pytest.raises(ValueError, match=r"feature names must be unique; repeated: \['x'\]"):
        matrix(X, y, feature_names=["x", "y", "x"])
    booster = fit({}, X, y)
    with pytest.raises(ValueError, match="feature names must be unique"):
        booster.predict(pd.DataFrame(X, columns=["a", "a", "b"]))


def test_values_beyond_float32_are_named_not_read_as_inf(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    big = X.astype(np.float64)
    big[7, 1] = 1e300
    with pytest.raises(ValueError, match=r"beyond float32's range \(e\.g\. 1e\+300 in column 1\)"):
        matrix(big, y)
    with pytest.raises(ValueError, match=r"beyond float32's range \(e\.g\. 1e\+300 in column 'b'\)"):
        matrix(pd.DataFrame(big, columns=["a", "b", "c"]), y)
    with pytest.raises(ValueError, match=r"beyond float32's range"):
        matrix(np.array([[2**200], [1]], dtype=object), np.zeros(2, np.float32))
    real_inf = X.astype(np.float64)
    real_inf[3, 0] = np.inf  # an infinity in the data is still read as one
    with pytest.raises(ValueError, match="input contains inf; use missing=inf"):
        matrix(real_inf, y)


def test_a_named_model_predicts_only_matrices_of_its_names(data):
    """As XGBoost validates a DMatrix: a model trained on named features refuses a matrix without
    (or with other) names; raw arrays are taken by position."""
    X, y = data
    named = daskgb.train({"device": "cpu"}, matrix(X, y, feature_names=["a", "b", "c"]), 1, verbose_eval=False)
    named.predict(matrix(X, y, feature_names=["a", "b", "c"]))
    named.predict(X)
    for other in (matrix(X, y), matrix(X, y, feature_names=["a", "b", "d"])):
        with pytest.raises(ValueError, match=r"feature_names mismatch: the model has \['a', 'b', 'c'\]"):
            named.predict(other)
    unnamed = daskgb.train({"device": "cpu"}, matrix(X, y), 1, verbose_eval=False)
    unnamed.predict(matrix(X, y, feature_names=["a", "b", "c"]))


def test_several_targets_a_row_are_a_clear_error(data):
    X, _ = data
    Y = np.random.default_rng(0).integers(0, 2, size=(X.shape[0], 3)).astype(np.float32)
    with pytest.raises(ValueError, match=r"got shape \(50, 3\): several targets a row \(multi-output\) are not"):
        matrix(X, Y)
    for model in (daskgb.GBRegressor(n_estimators=1), daskgb.GBClassifier(n_estimators=1)):
        with pytest.raises(ValueError, match="y has 3 columns: multi-output regression and multi-label"):
            model.fit(X, Y)
