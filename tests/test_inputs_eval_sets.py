"""Inputs as an XGBoost user gives them: an eval set built without ref= (binned with the training
cuts, as XGBoost bins a DMatrix eval set), and a pandas Series as X (one feature)."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

import daskgb
from daskgb import QuantileMatrix

xgb = pytest.importorskip("xgboost")
pd = pytest.importorskip("pandas")

PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "eval_metric": ["logloss", "auc"],
          "device": "cpu"}


def data(n, seed, levels=40):
    """Few distinct values per feature (every one its own bin: XGBoost's models are ours)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, size=(n, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(scale=8, size=n) > levels / 2).astype(np.float32)
    return X, y


def test_an_eval_set_without_ref_is_binned_with_the_training_cuts():
    X, y = data(3000, 0)
    Xe, ye = data(1000, 1, levels=60)  # values the training data lacks: its own cuts differ from the training's
    dtrain = QuantileMatrix(X, y)
    own = QuantileMatrix(Xe, ye)
    assert not own.shares_cuts_with(dtrain)
    got, want, ref_xgb = {}, {}, {}
    daskgb.train(PARAMS, dtrain, 10, evals=[(own, "e")], evals_result=got, verbose_eval=False)
    daskgb.train(PARAMS, dtrain, 10, evals=[(QuantileMatrix(Xe, ye, ref=dtrain), "e")], evals_result=want,
                 verbose_eval=False)
    assert got == want  # the same metrics, bit for bit, as with ref=dtrain
    xgb.train({**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, y), 10, evals=[(xgb.DMatrix(Xe, ye), "e")],
              evals_result=ref_xgb, verbose_eval=False)
    for metric in ("logloss", "auc"):
        np.testing.assert_allclose(got["e"][metric], ref_xgb["e"][metric], rtol=1e-5, atol=1e-6)
    assert not own.shares_cuts_with(dtrain)  # the user's matrix is left as it was


def test_an_eval_frame_without_ref_keeps_its_categories_by_name():
    rng = np.random.default_rng(2)
    names = ["a", "b", "c", "d"]

    def frame(n, order):
        city = pd.Categorical(rng.choice(names, n), categories=order)
        X = pd.DataFrame({"x": rng.normal(size=n).astype(np.float32), "city": city})
        y = (np.asarray(city.codes if order == names else pd.Categorical(city, categories=names).codes) % 2
             ).astype(np.float32)
        return X, y

    X, y = frame(2000, names)
    Xe, ye = frame(500, names[::-1])  # the same categories, coded in another order
    dtrain = QuantileMatrix(X, y, enable_categorical=True)
    got, want = {}, {}
    daskgb.train(PARAMS, dtrain, 5, evals=[(QuantileMatrix(Xe, ye, enable_categorical=True), "e")],
                 evals_result=got, verbose_eval=False)
    daskgb.train(PARAMS, dtrain, 5, evals=[(QuantileMatrix(Xe, ye, ref=dtrain), "e")], evals_result=want,
                 verbose_eval=False)
    assert got == want and got["e"]["auc"][-1] == 1.0


def test_an_eval_set_whose_data_is_gone_is_a_clear_error():
    X, y = data(1000, 0)
    dtrain = QuantileMatrix(X, y)
    Xe, ye = data(300, 1, levels=60)
    own = QuantileMatrix(Xe, ye)
    del Xe
    gc.collect()
    with pytest.raises(ValueError, match=r"eval set 'e' was quantised with cuts of its own, and daskgb holds no data "
                                         r"to bin it again .*ref=dtrain"):
        daskgb.train(PARAMS, dtrain, 2, evals=[(own, "e")], verbose_eval=False)
    # A pickled matrix keeps no reference to X, and still trains as itself.
    copy = pickle.loads(pickle.dumps(dtrain))
    assert copy.n_rows == dtrain.n_rows and copy.on("cpu") is copy
    daskgb.train(PARAMS, copy, 1, evals=[(copy, "train")], verbose_eval=False)


def test_a_series_is_one_feature():
    rng = np.random.default_rng(3)
    x = pd.Series(rng.normal(size=500).astype(np.float32), name="age")
    y = (x.to_numpy() > 0).astype(np.float32)
    m = QuantileMatrix(x, y)
    assert (m.n_rows, m.n_features, m.feature_names) == (500, 1, ["age"])
    ours = daskgb.train({"objective": "binary:logistic", "device": "cpu"}, m, 3, verbose_eval=False)
    theirs = xgb.train({"objective": "binary:logistic", "tree_method": "hist"}, xgb.DMatrix(x, y), 3)
    assert theirs.feature_names == ["age"]
    np.testing.assert_allclose(ours.predict(x), theirs.predict(xgb.DMatrix(x)), rtol=1e-5, atol=1e-6)
    unnamed = QuantileMatrix(pd.Series([1.0, 2.0, 3.0]), [0.0, 1.0, 0.0])
    assert unnamed.feature_names == [str(xgb.DMatrix(pd.Series([1.0, 2.0, 3.0])).feature_names[0])] == ["0"]
    clf = daskgb.GBClassifier(n_estimators=3).fit(x, y)  # the estimators too
    assert clf.predict_proba(x).shape == (500, 2)


@pytest.mark.gpu
def test_an_eval_set_without_ref_on_the_gpu():
    """cupy X: the eval matrix holds its X weakly too (cupy arrays take weak references) and is
    binned again on the device, with the same metrics as one built with ref=."""
    import cupy

    X, y = data(3000, 0)
    Xe, ye = data(1000, 1, levels=60)
    Xe_d = cupy.asarray(Xe)
    dtrain = QuantileMatrix(cupy.asarray(X), cupy.asarray(y))
    own = QuantileMatrix(Xe_d, cupy.asarray(ye))
    params = {**PARAMS, "device": "cuda"}
    got, want = {}, {}
    daskgb.train(params, dtrain, 10, evals=[(own, "e")], evals_result=got, verbose_eval=False)
    daskgb.train(params, dtrain, 10, evals=[(QuantileMatrix(Xe_d, cupy.asarray(ye), ref=dtrain), "e")],
                 evals_result=want, verbose_eval=False)
    assert got == want


def test_text_files_named_as_xgboost_names_them(tmp_path):
    """DMatrix("path?format=libsvm") / ("path?format=csv&label_column=0"): the same rows, labels
    and query ids as XGBoost reads, so the same model; a path without its format is refused."""
    import warnings

    rng = np.random.default_rng(4)
    X = np.round(rng.normal(size=(300, 6)), 1).astype(np.float32)
    X[rng.random(X.shape) < 0.4] = np.nan  # absent from the LIBSVM rows: missing
    y = (np.nan_to_num(X[:, 0]) > 0).astype(np.float32)
    qid = np.repeat(np.arange(30), 10)
    lines = [" ".join([f"{int(y[i])}", f"qid:{qid[i]}"] + [f"{j}:{v:g}" for j, v in enumerate(X[i]) if v == v])
             for i in range(300)]
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    np.savetxt(tmp_path / "train.csv", np.column_stack([y, np.nan_to_num(X)]), delimiter=",", fmt="%g")
    params = {"objective": "binary:logistic", "max_depth": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XGBoost deprecates text input since 3.1
        for uri in (f"{tmp_path / 'train.txt'}?format=libsvm", f"{tmp_path / 'train.csv'}?format=csv&label_column=0"):
            ours, theirs = QuantileMatrix(uri), xgb.DMatrix(uri)
            assert (ours.n_rows, ours.n_features) == (theirs.num_row(), theirs.num_col())
            np.testing.assert_array_equal(ours.get_label(), theirs.get_label())
            bd = daskgb.train({**params, "device": "cpu"}, ours, 5, verbose_eval=False)
            bx = xgb.train({**params, "tree_method": "hist"}, theirs, 5)
            np.testing.assert_allclose(bd.predict(ours), bx.predict(theirs), rtol=1e-5, atol=1e-6)
    ranked = QuantileMatrix(f"{tmp_path / 'train.txt'}?format=libsvm")
    np.testing.assert_array_equal(ranked.get_group(), np.full(30, 10))
    with pytest.raises(ValueError, match=r"the format of text data must be named.*\?format=libsvm"):
        QuantileMatrix(str(tmp_path / "train.txt"))
    with pytest.raises(ValueError, match="no such data file"):
        QuantileMatrix(f"{tmp_path / 'none.txt'}?format=libsvm")
    (tmp_path / "bad.txt").write_text("1 0:1\n1 x:2\n")
    with pytest.raises(ValueError, match=r"bad.txt, line 2: not a LIBSVM row"):
        QuantileMatrix(f"{tmp_path / 'bad.txt'}?format=libsvm")


def test_matrix_setters_as_xgboosts_dmatrix():
    """set_base_margin / set_label / set_weight, num_row / num_col: boosting from a first model's
    margins set on the matrix gives the two-round model, as XGBoost's test_boost_from_prediction."""
    X, y = data(800, 7)
    m = QuantileMatrix(X, y)
    assert (m.num_row(), m.num_col()) == (800, 5) and m.get_base_margin().size == 0
    params = {"objective": "binary:logistic", "max_depth": 3, "device": "cpu"}
    first = daskgb.train(params, m, 1, verbose_eval=False)
    m.set_base_margin(first.predict(m, output_margin=True))
    second = daskgb.train(params, m, 1, verbose_eval=False)
    both = daskgb.train(params, QuantileMatrix(X, y), 2, verbose_eval=False)
    np.testing.assert_allclose(second.predict(m), both.predict(X), rtol=1e-5, atol=1e-6)
    m.set_base_margin(None)
    m.set_label(1 - y)
    np.testing.assert_array_equal(m.get_label(), 1 - y)
    m.set_weight(np.full(800, 2.0))
    assert float(m.get_weight().sum()) == 1600.0
    with pytest.raises(ValueError, match="weight"):
        m.set_weight(np.ones(3))
    with pytest.raises(ValueError, match="query groups"):
        QuantileMatrix(X, y, group=[400, 400]).set_weight(np.ones(2))
    m.set_info(label=y, weight=np.ones(800), base_margin=np.zeros(800), feature_names=list("abcde"))
    assert m.feature_names == list("abcde") and float(m.get_weight().sum()) == 800.0
    np.testing.assert_array_equal(m.get_label(), y)
    with pytest.raises(ValueError, match=r"give \['qid'\] when building the matrix"):
        m.set_info(qid=np.zeros(800))


def test_estimators_predict_from_base_margins_as_xgboost():
    X, y = data(600, 8)
    margin = np.random.default_rng(0).normal(size=600).astype(np.float32)
    ours = daskgb.GBClassifier(n_estimators=3, device="cpu").fit(X, y, base_margin=margin)
    theirs = xgb.XGBClassifier(n_estimators=3, tree_method="hist").fit(X, y, base_margin=margin)
    for method in ("predict", "predict_proba"):
        np.testing.assert_allclose(getattr(ours, method)(X, base_margin=margin),
                                   getattr(theirs, method)(X, base_margin=margin), rtol=1e-5, atol=1e-6)
    ours = daskgb.GBRegressor(n_estimators=3, device="cpu").fit(X, y)
    theirs = xgb.XGBRegressor(n_estimators=3, tree_method="hist").fit(X, y)
    np.testing.assert_allclose(ours.predict(X, base_margin=margin), theirs.predict(X, base_margin=margin),
                               rtol=1e-5, atol=1e-5)


def test_a_frame_of_sparse_columns_is_read_as_xgboost_reads_it():
    """pandas' Sparse columns (DataFrame.sparse.from_spmatrix) are taken dense, fill values as
    values: the same model as XGBoost's and as of the dense frame."""
    import scipy.sparse

    rng = np.random.default_rng(9)
    X = np.round(rng.normal(size=(300, 3)), 1) * (rng.random((300, 3)) < 0.5)
    y = (X[:, 0] > 0).astype(np.float32)
    frame = pd.DataFrame.sparse.from_spmatrix(scipy.sparse.csr_matrix(X), columns=["a", "b", "c"])
    params = {"objective": "binary:logistic", "max_depth": 3}
    with pytest.warns(UserWarning, match="Sparse arrays from pandas are converted into dense"):  # XGBoost's warning
        ours = daskgb.train({**params, "device": "cpu"}, QuantileMatrix(frame, y), 4, verbose_eval=False)
    dense = daskgb.train({**params, "device": "cpu"}, QuantileMatrix(pd.DataFrame(X, columns=["a", "b", "c"]), y), 4,
                         verbose_eval=False)
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(frame, y), 4)
    np.testing.assert_array_equal(ours.predict(frame), dense.predict(X))
    np.testing.assert_allclose(ours.predict(frame), theirs.predict(xgb.DMatrix(frame)), rtol=1e-5, atol=1e-6)


def test_a_dmatrix_keeps_its_rows_as_xgboosts_does():
    """daskgb.DMatrix(X) holds X: built from a temporary, it is still predicted exactly and binned
    again as an eval set without ref= (a QuantileMatrix of a temporary cannot be: it holds X
    weakly); the same predictions and metrics as XGBoost's DMatrix."""
    X, y = data(1500, 10)
    Xe, ye = data(500, 11, levels=60)
    dtrain = daskgb.DMatrix(X, y)
    deval = daskgb.DMatrix(Xe.copy(), ye)  # the copy is gone once built
    gc.collect()
    got, theirs = {}, {}
    booster = daskgb.train(PARAMS, dtrain, 6, evals=[(deval, "e")], evals_result=got, verbose_eval=False)
    reference = xgb.train({**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, y), 6,
                          evals=[(xgb.DMatrix(Xe, ye), "e")], evals_result=theirs, verbose_eval=False)
    for metric in ("logloss", "auc"):
        np.testing.assert_allclose(got["e"][metric], theirs["e"][metric], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(booster.predict(daskgb.DMatrix(Xe.copy())), booster.predict(Xe))
    np.testing.assert_allclose(booster.predict(deval), reference.predict(xgb.DMatrix(Xe)), rtol=1e-5, atol=1e-6)
    assert isinstance(deval, QuantileMatrix)
    with pytest.raises(ValueError, match="keep its X"):
        booster.predict(QuantileMatrix(Xe.copy()))


def test_the_parameters_max_bin_bins_a_matrix_again():
    """train({"max_bin": 16}, QuantileMatrix(X, y)): the matrix is sketched again with 16 bins
    from its X, as XGBoost bins a DMatrix with the parameters' max_bin: the same model and eval
    history as a matrix built with max_bin=16."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(2000, 4)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=2000) > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 16, "device": "cpu"}
    Xe = X[:500]
    dtrain, deval = QuantileMatrix(X, y), QuantileMatrix(Xe, y[:500])
    got, want = {}, {}
    ours = daskgb.train(params, dtrain, 4, evals=[(deval, "e")], evals_result=got, verbose_eval=False)
    assert dtrain.max_bin == 256  # the user's matrix is left as it was
    direct_train = QuantileMatrix(X, y, max_bin=16)
    direct = daskgb.train(params, direct_train, 4, evals=[(QuantileMatrix(Xe, y[:500], ref=direct_train), "e")],
                          evals_result=want, verbose_eval=False)
    np.testing.assert_array_equal(ours.predict(X), direct.predict(X))
    assert got == want
