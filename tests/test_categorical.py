"""Categorical features in one process: XGBoost's split rules, tree for tree, and the inputs users bring.

Parity: numeric features with at most max_bin distinct values next to categorical ones
(one-hot below max_cat_to_onehot categories, partitions above it, max_cat_threshold
reached or not, missing categories) give XGBoost hist's trees: the same split features and
category sets, and predictions within 1e-5.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import daskgb

xgb = pytest.importorskip("xgboost")
pd = pytest.importorskip("pandas")


def make_data(seed: int, n: int = 2000, cardinalities=(3, 12, 90), with_nan: bool = True, objective="reg"):
    """Categorical columns of the given cardinalities (some categories rare, some absent),
    then two few-valued numeric columns; a target that depends on both."""
    rng = np.random.default_rng(seed)
    cols, score = [], np.zeros(n)
    for card in cardinalities:
        p = rng.dirichlet(np.full(card, 0.7))  # skewed: some categories rare
        c = rng.choice(card, size=n, p=p).astype(np.float32)
        score += rng.normal(size=card)[c.astype(int)]
        cols.append(c)
    x1 = rng.integers(0, 30, n).astype(np.float32)
    x2 = np.round(rng.normal(size=n), 1).astype(np.float32)
    score += 0.05 * x1 - x2
    X = np.stack(cols + [x1, x2], axis=1)
    if with_nan:
        for j in range(X.shape[1]):
            X[rng.random(n) < 0.08 * (j % 2 + 1), j] = np.nan
    types = ["c"] * len(cardinalities) + ["q", "q"]
    y = score + rng.normal(size=n) * 0.3
    if objective == "binary":
        y = (y > np.median(y)).astype(np.float32)
    elif objective == "multi":
        y = np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(np.float32)
    return X, y.astype(np.float32), types


def xgb_trees(bst) -> list[dict]:
    return json.loads(bst.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]


def assert_same_trees(ours, theirs_json):
    """Split features and category sets equal, node by node (XGBoost numbers nodes as we do)."""
    assert len(ours.trees) == len(theirs_json)
    for i, (t, x) in enumerate(zip(ours.trees, theirs_json)):
        feature = np.where(np.asarray(x["left_children"]) < 0, -1, np.asarray(x["split_indices"]))
        np.testing.assert_array_equal(np.where(t.is_leaf, -1, t.feature), feature, err_msg=f"tree {i}")
        segs, sizes, nodes = x["categories_segments"], x["categories_sizes"], x["categories_nodes"]
        theirs = {n: x["categories"][s : s + z] for n, s, z in zip(nodes, segs, sizes)}
        assert sorted(t.categories) == sorted(theirs), f"tree {i}"
        for n, cats in theirs.items():
            assert t.categories[n].tolist() == cats, f"tree {i} node {n}"


@pytest.mark.parametrize("objective,params", [
    ("reg:squarederror", {}),
    ("binary:logistic", {}),
    ("reg:squarederror", {"max_cat_to_onehot": 16}),  # the 12-category feature one-hot too
    ("reg:squarederror", {"max_cat_threshold": 5, "reg_lambda": 0.5, "min_child_weight": 3}),
    ("reg:squarederror", {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0}),
    ("multi:softprob", {"num_class": 3}),
])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_categorical_splits_equal_xgboost_hist(objective, params, device):
    kind = {"reg:squarederror": "reg", "binary:logistic": "binary", "multi:softprob": "multi"}[objective]
    X, y, types = make_data(11 + len(params), objective=kind)
    p = {"objective": objective, "max_depth": 5, "learning_rate": 0.3, "max_bin": 256, **params}
    dx = xgb.DMatrix(X, y, feature_types=types, enable_categorical=True)
    bx = xgb.train({**p, "tree_method": "hist", "nthread": 1}, dx, 8)
    dm = daskgb.QuantileMatrix(X, y, feature_types=types, enable_categorical=True, device=device)
    bd = daskgb.train({**p, "device": device}, dm, 8, verbose_eval=False)
    if device == "cuda":  # the trees grew on the device, rounds replayed as graphs
        assert bd.attr("training_path") == "cuda-graphs", bd.attr("training_path_refused")
    assert_same_trees(bd, xgb_trees(bx))
    split_features = {int(t.feature[n]) for t in bd.trees for n in t.categories}
    assert {0, 2} <= split_features  # one-hot and partition splits were both made
    np.testing.assert_allclose(bd.predict(X, output_margin=True), bx.predict(dx, output_margin=True),
                               rtol=1e-5, atol=1e-5)
    # The training margins (from bins) agree with prediction from the raw values.
    np.testing.assert_allclose(bd.predict(dm, output_margin=True), bd.predict(X, output_margin=True), atol=1e-5)


def test_a_category_column_of_a_dataframe_is_categorical_and_recoded_at_predict():
    X, y, types = make_data(3, with_nan=True)
    names = np.array([f"k{i:03d}" for i in range(90)])
    frame = pd.DataFrame({
        "small": pd.Categorical.from_codes(np.nan_to_num(X[:, 0], nan=-1).astype(int), ["a", "b", "c"]),
        "mid": pd.Categorical.from_codes(np.nan_to_num(X[:, 1], nan=-1).astype(int), [f"m{i}" for i in range(12)]),
        "big": pd.Categorical.from_codes(np.nan_to_num(X[:, 2], nan=-1).astype(int), names),
        "x1": X[:, 3], "x2": X[:, 4]})
    with pytest.raises(ValueError, match="enable_categorical=True"):
        daskgb.QuantileMatrix(frame, y, device="cpu")
    dm = daskgb.QuantileMatrix(frame, y, enable_categorical=True, device="cpu")
    assert dm.feature_types == types
    params = {"max_depth": 4, "device": "cpu"}
    bd = daskgb.train(params, dm, 5, verbose_eval=False)
    # The same model as from the codes with feature_types.
    by_codes = daskgb.train(params, daskgb.QuantileMatrix(X, y, feature_types=types, device="cpu"), 5,
                            verbose_eval=False)
    want = by_codes.predict(X)
    np.testing.assert_allclose(bd.predict(frame), want, atol=1e-6)
    # New data whose categories are listed in another order (and lack some) is recoded by name.
    shuffled = frame.copy()
    order = list(reversed(names[:60])) + list(names[60:])
    shuffled["big"] = pd.Categorical(frame["big"].astype(object), categories=order)
    np.testing.assert_allclose(bd.predict(shuffled), want, atol=1e-6)
    # An unseen category goes the way missing values go.
    unseen = frame.iloc[:50].copy()
    unseen["big"] = pd.Categorical(["never-seen"] * 50)
    as_missing = frame.iloc[:50].copy()
    as_missing["big"] = pd.Categorical([None] * 50, categories=names)
    np.testing.assert_allclose(bd.predict(unseen), bd.predict(as_missing), atol=0)
    # Eval sets built with ref= take the training data's codes.
    ev = daskgb.QuantileMatrix(shuffled, y, ref=dm)
    res = {}
    daskgb.train(params, dm, 3, evals=[(ev, "shuffled"), (dm, "train")], evals_result=res, verbose_eval=False)
    np.testing.assert_allclose(res["shuffled"]["rmse"], res["train"]["rmse"], rtol=1e-6)


def test_categories_beyond_the_training_ones_go_left_as_in_xgboost():
    X, y, types = make_data(5, with_nan=False)
    dx = xgb.DMatrix(X, y, feature_types=types, enable_categorical=True)
    bx = xgb.train({"tree_method": "hist", "max_depth": 4, "nthread": 1}, dx, 5)
    bd = daskgb.train({"max_depth": 4, "device": "cpu"},
                      daskgb.QuantileMatrix(X, y, feature_types=types, device="cpu"), 5, verbose_eval=False)
    T = X[:200].copy()
    T[:, 2] = 500.0  # a code above every training category
    T[:100, 1] = 2.7  # not an integer: truncated, as XGBoost does
    dt = xgb.DMatrix(T, feature_types=types, enable_categorical=True)
    np.testing.assert_allclose(bd.predict(T, output_margin=True), bx.predict(dt, output_margin=True), atol=1e-5)


def test_the_model_keeps_its_categories_through_save_and_load(tmp_path):
    X, y, types = make_data(7)
    frame = pd.DataFrame({"c": pd.Categorical.from_codes(np.nan_to_num(X[:, 1], nan=-1).astype(int),
                                                         [f"v{i}" for i in range(12)]), "x": X[:, 3]})
    bd = daskgb.train({"max_depth": 3, "device": "cpu"}, daskgb.QuantileMatrix(frame, y, enable_categorical=True),
                      4, verbose_eval=False)
    assert any(t.categories for t in bd.trees)
    path = tmp_path / "m.json"
    bd.save_model(path)
    loaded = daskgb.Booster().load_model(path)
    assert loaded.feature_types == ["c", "q"] and loaded.categories == {0: [f"v{i}" for i in range(12)]}
    np.testing.assert_array_equal(loaded.predict(frame), bd.predict(frame))
    d = json.loads(path.read_text())
    d["trees"][0]["categories"]["sets"][0] = [-3]
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="category"):
        daskgb.Booster().load_model(path)


def test_bad_categorical_inputs_are_named():
    X, y, types = make_data(1, n=200, with_nan=False)
    bad = X.copy()
    bad[5, 1] = -2.0
    with pytest.raises(ValueError, match=r"column 1 is categorical.*-2"):
        daskgb.QuantileMatrix(bad, y, feature_types=types, device="cpu")
    bad[5, 1] = 3e7
    with pytest.raises(ValueError, match="column 1 is categorical"):
        daskgb.QuantileMatrix(bad, y, feature_types=types, device="cpu")
    with pytest.raises(ValueError, match="feature_types holds 'x'"):
        daskgb.QuantileMatrix(X, y, feature_types=["x"] * 5, device="cpu")
    with pytest.raises(ValueError, match="one type per feature"):
        daskgb.QuantileMatrix(X, y, feature_types=["c"], device="cpu")
    dm = daskgb.QuantileMatrix(X, y, feature_types=types, device="cpu")
    with pytest.raises(ValueError, match="monotone_constraints constrain categorical feature 0"):
        daskgb.train({"monotone_constraints": "(1,0,0,0,0)", "device": "cpu"}, dm, 1)
    with pytest.raises(ValueError, match="max_cat_to_onehot must be"):
        daskgb.train({"max_cat_to_onehot": 0, "device": "cpu"}, dm, 1)
    # An eval set must say the same features are categorical.
    with pytest.raises(ValueError, match="feature_types differ"):
        daskgb.QuantileMatrix(X, y, ref=dm, feature_types=["q"] * 5)


@pytest.mark.gpu
@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "max_depth": 6},
    {"objective": "reg:squarederror", "max_depth": 4, "max_cat_threshold": 6, "colsample_bylevel": 0.7},
    {"objective": "reg:squarederror", "grow_policy": "lossguide", "max_leaves": 20, "max_depth": 0},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 5},
], ids=["binary", "threshold-bylevel", "lossguide", "multi"])
def test_device_grown_categorical_trees_equal_host_grown_ones(params, settings):
    """Every GPU path grows the host grower's trees (growth/host.py on the CUDA backend, the
    reference of growth.cu), categories and all; eval sets and predictions read them alike."""
    cupy = pytest.importorskip("cupy")
    kind = {"binary:logistic": "binary", "reg:squarederror": "reg", "multi:softprob": "multi"}[params["objective"]]
    X, y, types = make_data(21, n=6000, cardinalities=(3, 12, 90, 700), objective=kind)
    dm = daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y), feature_types=types, device="cuda")
    models, histories = [], []
    for device_growth in (True, False):
        settings({"training.device-growth": device_growth})
        res = {}
        models.append(daskgb.train({**params, "device": "cuda", "seed": 5}, dm, 6, evals=[(dm, "train")],
                                   evals_result=res, verbose_eval=False))
        histories.append(res["train"])
    on_device, on_host = models
    assert on_host.attr("training_path") == "host-levels"
    assert on_device.attr("training_path") != "host-levels"
    assert any(t.categories for t in on_device.trees)
    for i, (a, b) in enumerate(zip(on_device.trees, on_host.trees)):
        for name in ("left", "right", "feature", "bin", "threshold", "default_left", "value", "gain", "cover"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"tree {i} {name}")
        assert sorted(a.categories) == sorted(b.categories)
        for n in a.categories:
            np.testing.assert_array_equal(a.categories[n], b.categories[n], err_msg=f"tree {i} node {n}")
    assert histories[0] == histories[1]
    got = on_device.predict(cupy.asarray(X), output_margin=True)
    assert isinstance(got, cupy.ndarray)
    # The host walks the same trees (device='cpu' predicts with the numpy oracle).
    on_cpu = pickle.loads(pickle.dumps(on_device))
    on_cpu.set_param("device", "cpu")
    np.testing.assert_allclose(cupy.asnumpy(got), on_cpu.predict(X, output_margin=True), atol=1e-5)
    np.testing.assert_allclose(cupy.asnumpy(on_device.predict(dm, output_margin=True)), cupy.asnumpy(got), atol=1e-5)


@pytest.mark.gpu
def test_features_of_too_many_categories_for_the_device_sort_grow_by_host_levels():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(4)
    n = 40000
    c = rng.integers(0, 20000, n).astype(np.float32)
    x = rng.normal(size=n).astype(np.float32)
    # 40 of the categories set the label apart: a partition split isolates them.
    y = (5.0 * (c < 40) + 0.1 * x + rng.normal(size=n) * 0.1).astype(np.float32)
    X = np.stack([c, x], axis=1)
    dm = daskgb.QuantileMatrix(X, y, feature_types=["c", "q"], device="cuda")
    bd = daskgb.train({"device": "cuda", "max_depth": 3}, dm, 2, verbose_eval=False)
    assert bd.attr("training_path") == "host-levels"
    assert "categories (the device sorts at most 16384" in bd.attr("training_path_refused")
    assert any(t.categories for t in bd.trees)
    cpu = daskgb.train({"device": "cpu", "max_depth": 3},
                       daskgb.QuantileMatrix(X, y, feature_types=["c", "q"], device="cpu"), 2, verbose_eval=False)
    np.testing.assert_allclose(cupy.asnumpy(bd.predict(cupy.asarray(X))), cpu.predict(X), atol=1e-4)


def test_estimators_take_categorical_dataframes_as_xgboost_does():
    X, y, types = make_data(9, objective="binary")
    frame = pd.DataFrame({
        "small": pd.Categorical.from_codes(np.nan_to_num(X[:, 0], nan=-1).astype(int), ["a", "b", "c"]),
        "big": pd.Categorical.from_codes(np.nan_to_num(X[:, 2], nan=-1).astype(int), [f"k{i}" for i in range(90)]),
        "x1": X[:, 3]})
    kw = dict(n_estimators=6, max_depth=4, enable_categorical=True, max_cat_to_onehot=4, max_cat_threshold=32)
    ours = daskgb.GBClassifier(device="cpu", **kw).fit(frame, y, eval_set=[(frame, y)])
    theirs = xgb.XGBClassifier(tree_method="hist", n_jobs=1, **kw).fit(frame, y)
    np.testing.assert_allclose(ours.predict_proba(frame), theirs.predict_proba(frame), atol=1e-5)
    assert ours.get_params()["enable_categorical"] is True
    # Arrays of codes with feature_types.
    reg = daskgb.GBRegressor(device="cpu", n_estimators=4, feature_types=types).fit(X, y)
    assert reg.get_booster().feature_types == types


def test_training_goes_on_from_a_categorical_model():
    X, y, types = make_data(6)
    p = {"max_depth": 3, "device": "cpu"}
    first = daskgb.train(p, daskgb.QuantileMatrix(X, y, feature_types=types), 3, verbose_eval=False)
    # Through a saved model (no training bins), on a matrix of its own cuts.
    import tempfile, os

    with tempfile.TemporaryDirectory() as d:
        first.save_model(os.path.join(d, "m.json"))
        more = daskgb.train(p, daskgb.QuantileMatrix(X, y, feature_types=types), 2, verbose_eval=False,
                            xgb_model=os.path.join(d, "m.json"))
    whole = daskgb.train(p, daskgb.QuantileMatrix(X, y, feature_types=types), 5, verbose_eval=False)
    np.testing.assert_allclose(more.predict(X), whole.predict(X), atol=1e-5)


@pytest.fixture
def gpu_routes_categories(monkeypatch):
    """cupy_backend as it will be once its stages route categorical splits
    (splits_by_category), with its predict_margin and add_leaf_values counted: the calls
    that carry category sets, and all calls."""
    pytest.importorskip("cupy")
    from daskgb.arrays import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from daskgb.backend import cupy_backend

    calls = {"predict_margin": 0, "categorical predict_margin": 0, "add_leaf_values": 0}
    predict_margin, add_leaf_values = cupy_backend.predict_margin, cupy_backend.add_leaf_values

    def counted_predict_margin(*args, categories=None, **kw):
        calls["predict_margin"] += 1
        calls["categorical predict_margin"] += categories is not None
        return predict_margin(*args, categories=categories, **kw)

    def counted_add_leaf_values(*args):
        calls["add_leaf_values"] += 1
        return add_leaf_values(*args)

    monkeypatch.setattr(cupy_backend, "splits_by_category", True)
    monkeypatch.setattr(cupy_backend, "predict_margin", counted_predict_margin)
    monkeypatch.setattr(cupy_backend, "add_leaf_values", counted_add_leaf_values)
    return calls


@pytest.mark.gpu
@pytest.mark.parametrize("objective,params", [("reg:squarederror", {}), ("multi:softprob", {"num_class": 3})])
def test_a_categorical_model_predicts_on_the_gpu_as_on_the_host(gpu_routes_categories, objective, params):
    """Raw cupy rows (unseen and non-integer categories too) and a QuantileMatrix on the GPU:
    the device walks the categorical splits, and gives the host's predictions."""
    import cupy

    kind = {"reg:squarederror": "reg", "multi:softprob": "multi"}[objective]
    X, y, types = make_data(12, objective=kind)
    dm = daskgb.QuantileMatrix(X, y, feature_types=types, device="cpu")
    bd = daskgb.train({"objective": objective, "max_depth": 5, "device": "cpu", **params}, dm, 6,
                      verbose_eval=False)
    assert bd.has_categorical_splits
    T = X.copy()
    T[::7, 2] = 500.0  # above every training category
    T[::5, 1] = 2.7  # truncated, as XGBoost does
    expected = bd.predict(T, output_margin=True)
    got = bd.predict(cupy.asarray(T), output_margin=True)
    assert isinstance(got, cupy.ndarray) and got.shape == expected.shape
    np.testing.assert_allclose(cupy.asnumpy(got), expected, rtol=1e-6, atol=1e-6)
    groups_with_sets = sum(any(t.categories for t, g in zip(bd.trees, bd.tree_info) if g == k)
                           for k in range(bd.n_groups))
    assert groups_with_sets > 0 and gpu_routes_categories["categorical predict_margin"] == groups_with_sets
    # The training matrix by its bins, on the GPU.
    on_host = bd.predict(dm, output_margin=True)
    bd.set_param("device", "cuda")
    np.testing.assert_allclose(bd.predict(dm, output_margin=True), on_host, rtol=1e-6, atol=1e-6)
    assert gpu_routes_categories["add_leaf_values"] == len(bd.trees)
