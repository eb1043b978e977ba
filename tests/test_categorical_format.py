"""Categorical splits in the model formats: XGBoost's JSON (daskgb models that xgboost.Booster
loads and predicts the same with, XGBoost models daskgb reads and predicts the same with,
category names that both recode a dataframe by) and daskgb's own (a round trip keeps them);
malformed categorical fields in either give a ValueError naming them."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

import daskgb

xgb = pytest.importorskip("xgboost")
pd = pytest.importorskip("pandas")

N = 800
TYPES = ["q", "c", "c", "q"]  # feature 1: 5 categories (one-hot), feature 2: 30 (partitions)
PARAMS = {"max_depth": 4, "eta": 0.3, "max_cat_to_onehot": 6, "min_child_weight": 0.5}
CASES = {"binary:logistic": {}, "multi:softprob": {"num_class": 3}, "reg:squarederror": {}}


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = np.c_[rng.normal(size=N), rng.integers(0, 5, N), rng.integers(0, 30, N), rng.normal(size=N)]
    X = X.astype(np.float32)
    X[rng.random(N) < 0.1, 1] = np.nan
    X[rng.random(N) < 0.1, 2] = np.nan
    X[rng.random(N) < 0.05, 0] = np.nan
    # The label depends on each categorical feature through a mapping no threshold reproduces.
    signal = np.nan_to_num(np.array([0.0, 2.0, -1.0, 1.5, -2.0])[np.nan_to_num(X[:, 1], nan=0).astype(int)]) \
        + np.nan_to_num(np.sin(np.nan_to_num(X[:, 2], nan=0) * 1.7) * 2) + 0.5 * np.nan_to_num(X[:, 0])
    return rng, X, signal


def labels(rng, signal, objective):
    if objective == "binary:logistic":
        return (signal + rng.normal(size=N) > 0).astype(np.float32)
    if objective == "multi:softprob":
        return np.digitize(signal + rng.normal(size=N) * 0.5, [-1.0, 1.0]).astype(np.float32)
    return (signal + rng.normal(size=N) * 0.3).astype(np.float32)


def xgb_matrix(X, y=None, types=TYPES):
    return xgb.DMatrix(X, y, feature_types=types, enable_categorical=True)


def train_daskgb(X, y, objective, rounds=5):
    m = daskgb.QuantileMatrix(X, y, feature_types=TYPES, enable_categorical=True, device="cpu")
    return daskgb.train({"objective": objective, "device": "cpu", **PARAMS, **CASES[objective]}, m, rounds,
                        verbose_eval=False)


def set_sizes(booster):
    return [s.size for t in booster.trees for s in t.categories.values()]


@pytest.mark.parametrize("objective", sorted(CASES))
def test_xgboost_predicts_an_exported_categorical_model(objective, tmp_path):
    rng, X, signal = data(1)
    y = labels(rng, signal, objective)
    b = train_daskgb(X, y, objective)
    sizes = set_sizes(b)
    assert 1 in sizes and max(sizes) > 1  # one-hot and partition splits both exported
    path = tmp_path / "model.json"
    b.save_model(path, format="xgboost")
    xb = xgb.Booster(model_file=str(path))
    for margin in (False, True):
        ours = b.predict(X, output_margin=margin)
        theirs = xb.predict(xgb_matrix(X), output_margin=margin).reshape(ours.shape)
        np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)
    # The file's trees are XGBoost's own: XGBoost hist grows the same trees on this data, and
    # writes the same categorical fields and the same dump.
    reference = xgb.train({"objective": objective, "tree_method": "hist", **PARAMS, **CASES[objective]},
                          xgb_matrix(X, y), 5)
    ref = json.loads(reference.save_raw("json"))["learner"]
    ours_json = json.loads(path.read_text())["learner"]
    assert ours_json["feature_types"] == ref["feature_types"] == TYPES
    for t, u in zip(ours_json["gradient_booster"]["model"]["trees"], ref["gradient_booster"]["model"]["trees"]):
        for key in ("split_type", "categories_nodes", "categories_segments", "categories_sizes", "categories",
                    "split_indices", "default_left", "left_children"):
            assert t[key] == u[key], key
        np.testing.assert_allclose(t["split_conditions"], u["split_conditions"], rtol=1e-5, atol=1e-6)
        # XGBoost's placeholder at categorical splits, to the bit (as float32, which both read).
        ours_cond = np.float32([t["split_conditions"][i] for i in t["categories_nodes"]])
        theirs_cond = np.float32([u["split_conditions"][i] for i in u["categories_nodes"]])
        np.testing.assert_array_equal(ours_cond.view(np.int32), theirs_cond.view(np.int32))
    assert numbers_out(xb.get_dump()) == numbers_out(reference.get_dump())


def numbers_out(dump):
    """A text dump without its leaf values and thresholds (compared above within 1e-5; the dump
    prints float32's last digits): the structure and the category sets."""
    return [re.sub(r"(leaf=|<)[-+0-9.e]+", r"\1", tree) for tree in dump]


@pytest.mark.parametrize("objective", sorted(CASES))
def test_daskgb_reads_an_xgboost_categorical_model(objective, tmp_path):
    rng, X, signal = data(2)
    y = labels(rng, signal, objective)
    xb = xgb.train({"objective": objective, "tree_method": "hist", **PARAMS, **CASES[objective]},
                   xgb_matrix(X, y), 6)
    path = tmp_path / "xgb.json"
    xb.save_model(str(path))
    b = daskgb.Booster().load_model(path)
    assert b.feature_types == TYPES and b.categories is None
    sizes = set_sizes(b)
    assert 1 in sizes and max(sizes) > 1
    for margin in (False, True):
        ours = b.predict(X, output_margin=margin)
        theirs = xb.predict(xgb_matrix(X), output_margin=margin).reshape(ours.shape)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    # Written back, XGBoost reads the same model.
    b.save_model(tmp_path / "back.json", format="xgboost")
    again = xgb.Booster(model_file=str(tmp_path / "back.json"))
    assert again.get_dump() == xb.get_dump()


def frame(seed=3, n=N):
    rng = np.random.default_rng(seed)
    color = rng.choice(["red", "green", "blue", "teal"], n).astype(object)
    color[rng.random(n) < 0.1] = None
    # Categories in an order of their own: the names' codes are not their sorted order.
    city = pd.Categorical(rng.choice(["zurich", "oslo", "bern", "rome", "lima", "cairo", "pune", "kyiv"], n),
                          categories=["zurich", "oslo", "bern", "rome", "lima", "cairo", "pune", "kyiv"])
    size = pd.Categorical(rng.choice([40, -3, 7, 12, 100, 5, 8, 9, 10], n))
    df = pd.DataFrame({"x": rng.normal(size=n).astype(np.float32), "color": pd.Categorical(color), "city": city,
                       "size": size})
    effect = {"red": 1.0, "green": -1.0, "blue": 0.5, "teal": -0.5}
    y = (df["color"].map(effect).astype(float).fillna(0).to_numpy() + (df["city"].cat.codes % 3 == 0)
         - (df["size"].astype(int) % 2) + 0.3 * df["x"].to_numpy() + rng.normal(size=n) * 0.2)
    return df, y.astype(np.float32)


def shuffled_categories(df):
    """The same rows, each categorical column's categories listed in another order (other codes)."""
    out = df.copy()
    for col in ("color", "city", "size"):
        out[col] = out[col].cat.reorder_categories(list(reversed(out[col].cat.categories)))
    return out


def test_category_names_travel_to_xgboost_and_back(tmp_path):
    df, y = frame()
    m = daskgb.QuantileMatrix(df, y, enable_categorical=True, device="cpu")
    b = daskgb.train({"device": "cpu", **PARAMS}, m, 5, verbose_eval=False)
    assert b.categories is not None and b.has_categorical_splits
    path = tmp_path / "model.json"
    b.save_model(path, format="xgboost")
    # The encoder is XGBoost's own for this frame: names, segments and sorted order.
    reference = xgb.train({"tree_method": "hist", **PARAMS}, xgb.DMatrix(df, y, enable_categorical=True), 5)
    ref = json.loads(reference.save_raw("json"))["learner"]["gradient_booster"]["model"]["cats"]
    assert json.loads(path.read_text())["learner"]["gradient_booster"]["model"]["cats"] == ref
    xb = xgb.Booster(model_file=str(path))
    ours = b.predict(df)
    other = shuffled_categories(df)
    np.testing.assert_allclose(b.predict(other), ours, rtol=0, atol=0)  # daskgb recodes by name
    for data in (df, other):  # and so does XGBoost, from the names in the file
        np.testing.assert_allclose(xb.predict(xgb.DMatrix(data, enable_categorical=True)), ours, rtol=1e-5,
                                   atol=1e-5)
    back = daskgb.Booster().load_model(path)
    assert back.feature_types == b.feature_types
    assert {f: [v.item() if hasattr(v, "item") else v for v in names] for f, names in back.categories.items()} \
        == b.categories
    np.testing.assert_allclose(back.predict(other), ours, rtol=1e-6, atol=1e-6)


def test_daskgb_reads_the_names_of_an_xgboost_model(tmp_path):
    df, y = frame(4)
    df["size"] = df["size"].cat.set_categories(df["size"].cat.categories.astype(np.int32))
    xb = xgb.train({"tree_method": "hist", **PARAMS}, xgb.DMatrix(df, y, enable_categorical=True), 5)
    xb.save_model(str(tmp_path / "xgb.json"))
    b = daskgb.Booster().load_model(tmp_path / "xgb.json")
    assert b.feature_types == ["q", "c", "c", "c"]
    assert b.categories[1] == list(df["color"].cat.categories)
    other = shuffled_categories(df)
    theirs = xb.predict(xgb.DMatrix(df, enable_categorical=True))
    for data in (df, other):
        np.testing.assert_allclose(b.predict(data), theirs, rtol=1e-5, atol=1e-5)
    # The int32 names keep their type written back: XGBoost recodes an int32 column by them.
    b.save_model(tmp_path / "back.json", format="xgboost")
    enc = json.loads((tmp_path / "back.json").read_text())["learner"]["gradient_booster"]["model"]["cats"]["enc"]
    assert enc[3]["type"] == 13
    np.testing.assert_allclose(xgb.Booster(model_file=str(tmp_path / "back.json")).predict(
        xgb.DMatrix(other, enable_categorical=True)), theirs, rtol=1e-5, atol=1e-5)


def test_daskgb_format_round_trip_keeps_categories(tmp_path):
    df, y = frame(5)
    b = daskgb.train({"device": "cpu", "objective": "reg:squarederror", **PARAMS},
                     daskgb.QuantileMatrix(df, y, enable_categorical=True, device="cpu"), 4, verbose_eval=False)
    b.save_model(tmp_path / "m.json")
    back = daskgb.Booster().load_model(tmp_path / "m.json")
    assert back.feature_types == b.feature_types and back.categories == b.categories
    for t, u in zip(b.trees, back.trees):
        assert sorted(t.categories) == sorted(u.categories)
        for node in t.categories:
            np.testing.assert_array_equal(u.categories[node], t.categories[node])
    other = shuffled_categories(df)
    np.testing.assert_array_equal(back.predict(other), b.predict(df))


def test_float_category_names_cannot_be_exported(tmp_path):
    rng, X, signal = data(6)
    b = train_daskgb(X, labels(rng, signal, "reg:squarederror"), "reg:squarederror", rounds=1)
    b.categories = {1: [0.5, 1.5, 2.5, 3.5, 4.5]}
    with pytest.raises(ValueError, match="feature 1's category names are \\['float'\\].*string or integer"):
        b.save_model(tmp_path / "m.json", format="xgboost")
    b.categories = {1: ["a", 2, "c", "d", "e"]}
    with pytest.raises(ValueError, match="string or integer"):
        b.save_model(tmp_path / "m.json", format="xgboost")


# ---------------------------------------------------------------------------- malformed files

@pytest.fixture(scope="module")
def daskgb_model():
    df, y = frame(7, n=400)
    b = daskgb.train({"device": "cpu", **PARAMS}, daskgb.QuantileMatrix(df, y, enable_categorical=True,
                                                                       device="cpu"), 2, verbose_eval=False)
    return b.to_dict()


def _first_categorical(d, trees_key="trees"):
    for i, t in enumerate(d[trees_key]):
        if "categories" in t:
            return i, t
    raise AssertionError("no categorical split")


def _daskgb_cases():
    def leaf(d):
        i, t = _first_categorical(d)
        t["categories"]["nodes"][0] = t["left"].index(-1)

    def empty(d):
        _first_categorical(d)[1]["categories"]["sets"][0] = []

    def fractional(d):
        _first_categorical(d)[1]["categories"]["sets"][0] = [0.5]

    def too_large(d):
        _first_categorical(d)[1]["categories"]["sets"][0] = [1 << 24]

    def shape(d):
        _first_categorical(d)[1]["categories"] = {"nodes": [0]}

    def numeric_feature(d):
        i, t = _first_categorical(d)
        d["feature_types"][t["feature"][t["categories"]["nodes"][0]]] = "q"

    def no_types(d):
        d["feature_types"] = None

    def names_of_a_numeric_feature(d):
        d["categories"]["0"] = ["a", "b"]

    def names_twice(d):
        d["categories"]["1"] = ["red", "red"]

    return {"on a leaf": (leaf, "not a split node"), "empty set": (empty, "empty"),
            "fractional": (fractional, "not an integer"), "too large": (too_large, "outside 0..2\\^24-1"),
            "bad shape": (shape, "one set per node"), "numeric feature": (numeric_feature, "does not say it is "
                                                                                           "categorical"),
            "no types": (no_types, "does not say it is categorical"),
            "names of a numeric feature": (names_of_a_numeric_feature, "not one of its categorical"),
            "names twice": (names_twice, "twice")}


@pytest.mark.parametrize("case", sorted(_daskgb_cases()))
def test_malformed_categories_in_a_daskgb_file_are_named(daskgb_model, case, tmp_path):
    spoil, match = _daskgb_cases()[case]
    d = copy.deepcopy(daskgb_model)
    spoil(d)
    (tmp_path / "m.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match=match):
        daskgb.Booster().load_model(tmp_path / "m.json")


@pytest.fixture(scope="module")
def xgboost_model():
    df, y = frame(8, n=400)
    xb = xgb.train({"tree_method": "hist", **PARAMS}, xgb.DMatrix(df, y, enable_categorical=True), 2)
    return json.loads(xb.save_raw("json"))


def _xgb_tree(d):
    trees = d["learner"]["gradient_booster"]["model"]["trees"]
    return next(t for t in trees if t["categories_nodes"])


def _cats(d):
    return d["learner"]["gradient_booster"]["model"]["cats"]


def _xgboost_cases():
    def split_type_length(d):
        _xgb_tree(d)["split_type"].append(0)

    def split_type_value(d):
        _xgb_tree(d)["split_type"][0] = 2

    def nodes_mismatch(d):
        t = _xgb_tree(d)
        t["split_type"][t["categories_nodes"][0]] = 0

    def lengths(d):
        _xgb_tree(d)["categories_sizes"].append(1)

    def segment_out(d):
        t = _xgb_tree(d)
        t["categories_segments"][-1] = len(t["categories"])

    def empty_segment(d):
        _xgb_tree(d)["categories_sizes"][0] = 0

    def negative(d):
        _xgb_tree(d)["categories"][0] = -1

    def not_integers(d):
        _xgb_tree(d)["categories"][0] = 1.5

    def numeric_type(d):
        t = _xgb_tree(d)
        d["learner"]["feature_types"][t["split_indices"][t["categories_nodes"][0]]] = "float"

    def unknown_type(d):
        d["learner"]["feature_types"][0] = "x"

    def types_length(d):
        d["learner"]["feature_types"].append("q")

    def enc_length(d):
        _cats(d)["enc"].pop()

    def segments(d):
        _cats(d)["feature_segments"][-1] += 1

    def float_names(d):
        _cats(d)["enc"][3]["type"] = 8

    def unknown_name_type(d):
        _cats(d)["enc"][3]["type"] = 99

    def offsets(d):
        _cats(d)["enc"][1]["offsets"][1] = 100

    def not_bytes(d):
        _cats(d)["enc"][1]["values"][0] = 300

    def names_twice(d):
        enc = _cats(d)["enc"][3]
        enc["values"][1] = enc["values"][0]

    def names_of_a_numeric_feature(d):
        cats = _cats(d)
        cats["enc"][0] = {"type": 15, "values": [1]}
        cats["feature_segments"] = [0] + [v + 1 for v in cats["feature_segments"][1:]]

    return {"split_type length": (split_type_length, "differ in length: split_type has"),
            "split_type value": (split_type_value, "other than 0"),
            "nodes mismatch": (nodes_mismatch, "are not the nodes whose split_type is 1"),
            "lengths": (lengths, "differ in length"),
            "segment out of range": (segment_out, "outside its"),
            "empty segment": (empty_segment, "is empty"),
            "negative": (negative, "outside 0.."),
            "not integers": (not_integers, "categories is not a list of integers"),
            "numeric feature": (numeric_type, "splits feature .* by category.*not 'c'"),
            "unknown type": (unknown_type, "feature_types holds 'x'"),
            "types length": (types_length, "feature_types has"),
            "enc length": (enc_length, "cats.enc has"),
            "segments": (segments, "feature_segments"),
            "float names": (float_names, "floats"),
            "unknown name type": (unknown_name_type, "type 99"),
            "offsets": (offsets, "offsets"),
            "not bytes": (not_bytes, "not a byte"),
            "names twice": (names_twice, "twice"),
            "names of a numeric feature": (names_of_a_numeric_feature, "not say is categorical")}


@pytest.mark.parametrize("case", sorted(_xgboost_cases()))
def test_malformed_categories_in_an_xgboost_file_are_named(xgboost_model, case, tmp_path):
    spoil, match = _xgboost_cases()[case]
    d = copy.deepcopy(xgboost_model)
    spoil(d)
    (tmp_path / "m.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match="corrupted XGBoost model: .*" + match):
        daskgb.Booster().load_model(tmp_path / "m.json")


def test_names_that_are_not_utf8_are_dropped_with_a_warning(xgboost_model, tmp_path):
    """XGBoost 3.2's Python package counts a non-ASCII name in characters and cuts its bytes:
    such names cannot be read back, and the model is read without them."""
    d = copy.deepcopy(xgboost_model)
    enc = _cats(d)["enc"][1]
    enc["values"][0] = -61  # 0xC3 followed by an ASCII byte: not UTF-8
    (tmp_path / "m.json").write_text(json.dumps(d))
    with pytest.warns(UserWarning, match="feature 1 are not UTF-8"):
        b = daskgb.Booster().load_model(tmp_path / "m.json")
    assert 1 not in b.categories and 2 in b.categories


@pytest.mark.gpu
def test_an_xgboost_categorical_model_predicts_cupy_input(tmp_path):
    cupy = pytest.importorskip("cupy")
    rng, X, signal = data(9)
    xb = xgb.train({"tree_method": "hist", **PARAMS}, xgb_matrix(X, labels(rng, signal, "reg:squarederror")), 4)
    xb.save_model(str(tmp_path / "xgb.json"))
    b = daskgb.Booster().load_model(tmp_path / "xgb.json")
    out = b.predict(cupy.asarray(X))
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(out), xb.predict(xgb_matrix(X)), rtol=1e-5, atol=1e-5)
