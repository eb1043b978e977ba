"""The estimators' XGBoost names (issue 24), each against xgboost's estimators (xgboost-cpu,
tree_method="hist") on data whose features have fewer distinct values than max_bin, so that
the models are the same tree for tree."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import daskgb
from daskgb import GBClassifier, GBRegressor

xgb = pytest.importorskip("xgboost")


def binary_data(n=600, f=6, seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, f)), 1).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=n) > 0.8).astype(np.int64)
    return X, y


def same_trees(a, b, X, atol=1e-5):
    np.testing.assert_allclose(a.predict(X, output_margin=True),
                               b.get_booster().inplace_predict(X, predict_type="margin"), atol=atol)


def test_unset_parameters_are_none_as_xgboost():
    from sklearn.base import clone

    ours, theirs = GBRegressor(max_depth=3), xgb.XGBRegressor(max_depth=3)
    p, q = ours.get_params(), theirs.get_params()
    for name, value in q.items():
        if name not in ("enable_categorical",):
            assert name in p, name
            assert (p[name] is None) == (value is None) or name == "missing", name
    assert p["max_depth"] == 3 and p["learning_rate"] is None and p["n_estimators"] is None
    assert set(ours.get_xgb_params()) == set(theirs.get_xgb_params())
    assert GBRegressor(random_state=np.random.RandomState(3)).get_xgb_params()["random_state"] >= 0
    assert clone(ours).get_params()["max_depth"] == 3
    assert GBRegressor().get_num_boosting_rounds() == 100


def test_default_model_equals_xgboost_and_the_explicit_defaults():
    X, y = binary_data()
    ours = GBClassifier(n_estimators=5, device="cpu").fit(X, y)
    same_trees(ours, xgb.XGBClassifier(n_estimators=5, tree_method="hist").fit(X, y), X)
    explicit = GBClassifier(n_estimators=5, device="cpu", learning_rate=0.3, max_depth=6, reg_lambda=1,
                            min_child_weight=1).fit(X, y)
    np.testing.assert_array_equal(ours.predict_proba(X), explicit.predict_proba(X))


@pytest.mark.parametrize("importance_type", ["weight", "gain", "cover", "total_gain", "total_cover"])
def test_feature_importances_of_every_type(importance_type):
    X, y = binary_data()
    ours = GBClassifier(n_estimators=4, max_depth=3, device="cpu", importance_type=importance_type).fit(X, y)
    theirs = xgb.XGBClassifier(n_estimators=4, max_depth=3, tree_method="hist", importance_type=importance_type)
    np.testing.assert_allclose(ours.feature_importances_, theirs.fit(X, y).feature_importances_, rtol=1e-4,
                               atol=1e-6)
    with pytest.raises(ValueError, match="importance_type"):
        ours.set_params(importance_type="foo").feature_importances_


def test_intercept_coef_and_apply_as_xgboost():
    X, y = binary_data()
    ours = GBClassifier(n_estimators=3, device="cpu").fit(X, y)
    theirs = xgb.XGBClassifier(n_estimators=3, tree_method="hist").fit(X, y)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-6)
    assert ours.intercept_.shape == (1,) and ours.intercept_.dtype == np.float32
    with pytest.raises(AttributeError, match="Coefficients are not defined for Booster type None"):
        ours.coef_
    assert not hasattr(ours, "coef_")
    np.testing.assert_array_equal(ours.apply(X), theirs.apply(X))


def test_save_and_load_model(tmp_path):
    X, y = binary_data()
    labels = np.where(y == 1, "yes", "no")
    clf = GBClassifier(n_estimators=3, device="cpu").fit(X, labels)
    path = tmp_path / "model.json"
    clf.save_model(path)
    assert clf.get_booster().attr("scikit_learn") is None  # written to the file only
    loaded = GBClassifier()
    loaded.load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)
    assert loaded.n_classes_ == 2 and loaded.n_features_in_ == X.shape[1]
    assert loaded.get_params()["n_estimators"] is None and loaded.objective == "binary:logistic"
    with pytest.raises(TypeError, match="different type"):
        GBRegressor().load_model(path)
    # XGBoost's own JSON, and ours in XGBoost's format, load both ways.
    xpath = tmp_path / "xgb.json"
    xgb.XGBClassifier(n_estimators=3, tree_method="hist").fit(X, y).save_model(xpath)
    from_xgb = GBClassifier()
    from_xgb.load_model(xpath)
    np.testing.assert_array_equal(from_xgb.classes_, [0, 1])
    clf.save_model(tmp_path / "ours_as_xgb.json", format="xgboost")
    theirs = xgb.XGBClassifier()
    theirs.load_model(tmp_path / "ours_as_xgb.json")
    np.testing.assert_allclose(theirs.predict_proba(X), clf.predict_proba(X), atol=1e-6)


def logregobj(y_true, y_pred):
    p = 1.0 / (1.0 + np.exp(-y_pred))
    return p - y_true, p * (1.0 - p)


def test_callable_objective_as_xgboost():
    X, y = binary_data()
    ours = GBClassifier(n_estimators=4, device="cpu", objective=logregobj, base_score=0.5).fit(X, y)
    theirs = xgb.XGBClassifier(n_estimators=4, tree_method="hist", objective=logregobj, base_score=0.5).fit(X, y)
    same_trees(ours, theirs, X)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)

    def weighted(y_true, y_pred, sample_weight):
        g, h = logregobj(y_true, y_pred)
        return g * sample_weight, h * sample_weight

    w = np.random.default_rng(1).uniform(0.5, 2, y.size)
    a = GBClassifier(n_estimators=3, device="cpu", objective=weighted, base_score=0.5).fit(X, y, sample_weight=w)
    b = xgb.XGBClassifier(n_estimators=3, tree_method="hist", objective=weighted, base_score=0.5)
    same_trees(a, b.fit(X, y, sample_weight=w), X)
    with pytest.raises(ValueError, match="sample_weight"):
        GBClassifier(n_estimators=1, device="cpu", objective=logregobj).fit(X, y, sample_weight=w)

    class Called(Exception):
        pass

    def fails(y_true, y_pred):
        raise Called

    with pytest.raises(Called):
        GBRegressor(n_estimators=1, device="cpu", objective=fails).fit(X, y)


def test_callable_eval_metric_as_xgboost():
    from sklearn.metrics import log_loss, mean_absolute_error

    X, y = binary_data()
    ours = GBRegressor(n_estimators=4, device="cpu", eval_metric=mean_absolute_error).fit(X, y, eval_set=[(X, y)])
    theirs = xgb.XGBRegressor(n_estimators=4, tree_method="hist", eval_metric=mean_absolute_error)
    theirs.fit(X, y, eval_set=[(X, y)], verbose=False)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["mean_absolute_error"],
                               theirs.evals_result()["validation_0"]["mean_absolute_error"], rtol=1e-5)
    mixed = GBClassifier(n_estimators=2, device="cpu", eval_metric=["logloss", log_loss]).fit(X, y, eval_set=[(X, y)])
    assert set(mixed.evals_result()["validation_0"]) == {"logloss", "log_loss"}
    with pytest.raises(NotImplementedError, match="multiple custom metrics"):
        GBClassifier(n_estimators=1, device="cpu", eval_metric=[log_loss, mean_absolute_error]).fit(X, y)
    with pytest.raises(TypeError, match="Invalid type for the `eval_metric`"):
        GBClassifier(n_estimators=1, device="cpu", eval_metric=[123, log_loss]).fit(X, y)


def test_scale_pos_weight_as_xgboost():
    X, y = binary_data()
    ours = GBClassifier(n_estimators=4, device="cpu", scale_pos_weight=3.0).fit(X, y)
    theirs = xgb.XGBClassifier(n_estimators=4, tree_method="hist", scale_pos_weight=3.0).fit(X, y)
    same_trees(ours, theirs, X)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-6)
    plain = GBClassifier(n_estimators=4, device="cpu").fit(X, y)
    assert not np.allclose(plain.predict_proba(X), ours.predict_proba(X))


def split_features(model) -> set:
    return {int(f) for t in model.get_booster().trees for f in t.feature[~t.is_leaf]}


def test_feature_weights_steer_column_sampling():
    rng = np.random.default_rng(2)
    X = np.round(rng.normal(size=(800, 12)), 1).astype(np.float32)
    y = X.sum(axis=1) + rng.normal(size=800)
    fw = np.r_[np.zeros(6), np.ones(6)]  # the first half drawn only after the second: never, at 0.5
    ours = GBRegressor(n_estimators=6, device="cpu", colsample_bynode=0.5, feature_weights=fw).fit(X, y)
    assert split_features(ours) <= set(range(6, 12))
    theirs = xgb.XGBRegressor(n_estimators=6, tree_method="hist", colsample_bynode=0.5, feature_weights=fw).fit(X, y)
    used = {int(f[1:]) for f in theirs.get_booster().get_score(importance_type="weight")}
    assert used == split_features(ours) or used <= set(range(6, 12))
    by_fit = GBRegressor(n_estimators=6, device="cpu", colsample_bytree=0.5).fit(X, y, feature_weights=fw)
    assert split_features(by_fit) <= set(range(6, 12))
    unweighted = GBRegressor(n_estimators=6, device="cpu", colsample_bynode=0.5).fit(X, y)
    assert split_features(unweighted) & set(range(6))
    with pytest.raises(ValueError, match="feature_weights has 3 weights for data with 12 features"):
        GBRegressor(n_estimators=1, device="cpu", colsample_bytree=0.5, feature_weights=[1, 2, 3]).fit(X, y)
    with pytest.raises(ValueError, match="feature_weights must be >= 0"):
        GBRegressor(n_estimators=1, device="cpu", feature_weights=-fw).fit(X, y)


def test_a_logitraw_classifier_as_xgboost():
    """XGBClassifier(objective="binary:logitraw"): its predict_proba columns are 1 - margin and
    the margin, its predict the margin above 0.5, as XGBoost's (which reads the margins as
    probabilities)."""
    X, y = binary_data()
    ours = GBClassifier(n_estimators=3, device="cpu", objective="binary:logitraw").fit(X, y)
    theirs = xgb.XGBClassifier(n_estimators=3, tree_method="hist", objective="binary:logitraw").fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


@pytest.mark.gpu
def test_scale_pos_weight_and_feature_weights_on_the_gpu():
    """The GPU paths of both: scale_pos_weight's weights and base score, and the feature
    weights steering the device-grown trees' level samples."""
    X, y = binary_data()
    ours = GBClassifier(n_estimators=4, device="cuda", scale_pos_weight=3.0).fit(X, y)
    theirs = xgb.XGBClassifier(n_estimators=4, tree_method="hist", scale_pos_weight=3.0).fit(X, y)
    same_trees(ours, theirs, X)
    rng = np.random.default_rng(2)
    Xr = np.round(rng.normal(size=(800, 12)), 1).astype(np.float32)
    yr = Xr.sum(axis=1) + rng.normal(size=800)
    fw = np.r_[np.zeros(6), np.ones(6)]
    weighted = GBRegressor(n_estimators=6, device="cuda", colsample_bylevel=0.5, feature_weights=fw).fit(Xr, yr)
    assert weighted.get_booster().attr("training_path") == "queued-rounds"
    assert split_features(weighted) <= set(range(6, 12))


def test_booster_multi_strategy_and_tuning_parameters():
    X, y = binary_data()
    base = GBClassifier(n_estimators=3, device="cpu").fit(X, y)
    tuned = GBClassifier(n_estimators=3, device="cpu", booster="gbtree", multi_strategy="one_output_per_tree",
                         tree_method="hist", n_jobs=2, verbosity=0, validate_parameters=True,
                         max_cached_hist_node=128, sparse_threshold=0.3, debug_synchronize=True).fit(X, y)
    np.testing.assert_array_equal(base.predict_proba(X), tuned.predict_proba(X))
    for bad in ("gblinear", "dart"):
        with pytest.raises(ValueError, match=f"booster='{bad}' is not supported"):
            GBClassifier(n_estimators=1, device="cpu", booster=bad).fit(X, y)
    with pytest.raises(ValueError, match="multi_output_tree"):
        GBClassifier(n_estimators=1, device="cpu", multi_strategy="multi_output_tree").fit(X, y)
    with pytest.raises(ValueError, match="unknown parameter 'max_cached_hist_nodes' \\(did you mean 'max_cached_hist_node'"):
        GBClassifier(n_estimators=1, device="cpu", max_cached_hist_nodes=1).fit(X, y)


def test_named_model_refuses_other_width_or_names():
    pd = pytest.importorskip("pandas")
    X, y = binary_data()
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    model = GBClassifier(n_estimators=2, device="cpu").fit(frame, y)
    np.testing.assert_array_equal(model.predict_proba(X), model.predict_proba(frame))  # unnamed, same width: as XGBoost
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :4])
    with pytest.raises(ValueError, match="feature_names mismatch"):
        model.predict(frame.rename(columns={"c0": "z"}))
    with pytest.raises(ValueError, match="feature_names mismatch"):
        model.predict(frame[frame.columns[::-1]])
    loaded = pickle.loads(pickle.dumps(model))
    with pytest.raises(ValueError, match="features"):
        loaded.predict(X[:, :4])


def test_matrices_take_xgboost_keywords_and_fit_builds_one_for_its_own_training_data():
    """QuantileMatrix(data=, label=) as DMatrix takes them; fit builds its matrices by keyword and
    reuses the training matrix for an eval_set entry of the same objects (xgboost.testing's own
    check, with daskgb's classes)."""
    from xgboost.testing.shared import validate_data_initialization

    X, y = binary_data()
    by_name = daskgb.train({"device": "cpu"}, daskgb.QuantileMatrix(data=X, label=y), 3, verbose_eval=False)
    positional = daskgb.train({"device": "cpu"}, daskgb.QuantileMatrix(X, y), 3, verbose_eval=False)
    np.testing.assert_array_equal(by_name.predict(X), positional.predict(X))
    with pytest.raises(ValueError, match=r"give X or data= \(XGBoost's name for it\), not both"):
        daskgb.QuantileMatrix(X, data=X)
    with pytest.raises(ValueError, match=r"give y or label= \(XGBoost's name for it\), not both"):
        daskgb.QuantileMatrix(X, y, label=y)
    init = daskgb.QuantileMatrix.__init__
    try:
        validate_data_initialization(daskgb.QuantileMatrix, GBClassifier, X, y)
    finally:
        daskgb.QuantileMatrix.__init__ = init


def test_fit_prints_the_eval_log_by_default_as_xgboost(capsys):
    """XGBModel.fit's verbose defaults to True: one line a round for an eval set (none without one)."""
    X, y = binary_data()
    GBClassifier(n_estimators=4, device="cpu").fit(X, y, eval_set=[(X, y)])
    ours = capsys.readouterr().out.strip().splitlines()
    xgb.XGBClassifier(n_estimators=4, tree_method="hist").fit(X, y, eval_set=[(X, y)])
    theirs = capsys.readouterr().out.strip().splitlines()
    assert len(ours) == len(theirs) == 4
    assert [line.split(":")[0] for line in ours] == [line.split(":")[0] for line in theirs]
    GBClassifier(n_estimators=2, device="cpu").fit(X, y)
    GBClassifier(n_estimators=2, device="cpu").fit(X, y, eval_set=[(X, y)], verbose=False)
    assert capsys.readouterr().out == ""


def test_the_base_estimator_fits_as_xgbmodel():
    """xgboost.XGBModel is itself an estimator (a regressor of XGBoost's default objective, or the
    one given): so is daskgb's base, with the same model."""
    from daskgb.sklearn import _GBModel

    X, y = binary_data()
    ours = _GBModel(n_estimators=3, objective="binary:logistic", device="cpu").fit(X, y, eval_set=[(X, y)],
                                                                                 verbose=False)
    theirs = xgb.XGBModel(n_estimators=3, objective="binary:logistic", tree_method="hist").fit(
        X, y, eval_set=[(X, y)], verbose=False)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["logloss"],
                               theirs.evals_result()["validation_0"]["logloss"], rtol=1e-5)


def test_fit_without_data_and_predict_of_categories_unasked_are_xgboosts_errors():
    pd = pytest.importorskip("pandas")
    X, y = binary_data()
    with pytest.raises(TypeError, match="NoneType"):
        GBClassifier().fit(None, [0, 1])
    with pytest.raises(ValueError, match="Invalid classes"):
        GBClassifier().fit(X, None)
    with pytest.raises(ValueError, match="labels"):
        GBRegressor().fit(X, None)
    df = pd.DataFrame(X[:, :3], columns=["a", "b", "c"]).assign(
        d=pd.Series(np.asarray(["x", "y", "z"])[np.arange(len(X)) % 3], dtype="category"))
    model = GBClassifier(n_estimators=2, enable_categorical=True, device="cpu").fit(df, y, verbose=False)
    model.apply(df)
    model.set_params(enable_categorical=False)
    for method in (model.apply, model.predict):
        with pytest.raises(ValueError, match="`category` dtype.*`enable_categorical`"):
            method(df)


def test_positional_arguments_past_xgboosts_are_taken_with_its_future_warning():
    """XGBoost's _deprecate_positional_args: XGBRegressor(3) and fit(X, y, w) still work, with a
    FutureWarning naming the keyword the argument was taken as."""
    X, y = binary_data()
    w = np.random.default_rng(0).uniform(size=y.size)
    with pytest.warns(FutureWarning, match="Pass `objective` as keyword args"):
        assert GBRegressor("reg:absoluteerror").objective == "reg:absoluteerror"
    with pytest.warns(FutureWarning, match="Pass `learning_rate` as keyword args"):
        assert daskgb.GBRFRegressor(0.5).learning_rate == 0.5
    with pytest.warns(FutureWarning, match="Pass `sample_weight` as keyword args"):
        weighted = GBClassifier(n_estimators=2, device="cpu").fit(X, y, w)
    np.testing.assert_array_equal(weighted.predict_proba(X),
                                  GBClassifier(n_estimators=2, device="cpu").fit(X, y, sample_weight=w).predict_proba(X))
    with pytest.warns(FutureWarning, match="Pass `group` as keyword args"):
        daskgb.GBRanker(n_estimators=1, device="cpu").fit(X, y, [len(y)])
    with pytest.raises(TypeError, match="multiple values for argument 'sample_weight'"):
        GBClassifier(n_estimators=1).fit(X, y, w, sample_weight=w)
