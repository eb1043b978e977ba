"""The names an XGBoost user reaches for on xgboost.Booster, each against xgboost-cpu's behaviour
on data where the models are equal (exact cuts: exact_data)."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

import daskgb
from daskgb.arrays import array_module
from exact_data import make_data

xgb = pytest.importorskip("xgboost")
pd = pytest.importorskip("pandas")

PARAMS = dict(max_depth=3, eta=0.3, base_score=0.5, max_bin=256)
ROUNDS = 8
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def models(objective="reg:squarederror", with_nan=True, device="cpu", **extra):
    X, y = make_data(5, objective, with_nan)
    params = {**PARAMS, "objective": objective, **extra}
    dx, dq = xgb.DMatrix(X, y), daskgb.QuantileMatrix(X, y)
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dx, ROUNDS)
    bd = daskgb.train({**params, "device": device}, dq, ROUNDS, verbose_eval=False)
    return X, y, dx, dq, bx, bd


def numbers_close(a: str, b: str, rtol=1e-5) -> bool:
    """Two dumps equal but for the last digits of their numbers (gains are sums made in
    another order) and the sign of a zero threshold."""
    pattern = r"-?\d+\.?\d*(?:e[-+]?\d+)?"
    if re.sub(pattern, "#", a) != re.sub(pattern, "#", b):
        return False
    x = np.array([float(v) for v in re.findall(pattern, a)])
    y = np.array([float(v) for v in re.findall(pattern, b)])
    return x.shape == y.shape and np.allclose(x, y, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_slices_predict_as_xgboost_slices(device):
    X, _, dx, _, bx, bd = models(device=device)
    for sl in [slice(1, 3), slice(3, 7), slice(1, 7, 2), slice(2, None), slice(None, 5), slice(0, 8, 8)]:
        np.testing.assert_allclose(bd[sl].predict(X, output_margin=True), bx[sl].predict(dx, output_margin=True),
                                   atol=1e-5)
        assert bd[sl].num_boosted_rounds() == bx[sl].num_boosted_rounds()
    np.testing.assert_allclose(bd[3].predict(X, output_margin=True), bx[3].predict(dx, output_margin=True), atol=1e-5)
    assert bd[...].num_boosted_rounds() == ROUNDS
    assert bd[np.int32(2)].num_boosted_rounds() == 1
    assert [b.num_boosted_rounds() for b in bd] == [1] * ROUNDS
    # A slice predicts as the whole model on its rounds.
    np.testing.assert_allclose(bd[1:7].predict(X), bd.predict(X, iteration_range=(1, 7)), atol=1e-6)


def test_slice_errors_as_xgboost():
    _, _, _, _, bx, bd = models()
    cases = [(lambda b: b[-1:0], ValueError, r">= 0"), (lambda b: b[1:1], ValueError, "Empty slice"),
             (lambda b: b[3:0], ValueError, "Invalid"), (lambda b: b[3:-1], ValueError, "Invalid"),
             (lambda b: b[0:2:-1], ValueError, ">= 1"), (lambda b: b[0:2:0], ValueError, ">= 1"),
             (lambda b: b["wrong"], TypeError, None), (lambda b: b[1.5], TypeError, None),
             (lambda b: b[:ROUNDS + 1], IndexError, None), (lambda b: b[ROUNDS], IndexError, None),
             (lambda b: b[0:8:9], IndexError, None), (lambda b: b[1, 2], ValueError, None)]
    for make, kind, match in cases:
        with pytest.raises(kind, match=match):
            make(bx)
        with pytest.raises(kind, match=match):
            make(bd)
    with pytest.raises(TypeError):
        bd[:2] = bd


def test_slice_keeps_attributes_but_best_iteration():
    X, y = make_data(2, "reg:squarederror", False)
    dq = daskgb.QuantileMatrix(X, y)
    bd = daskgb.train(PARAMS, dq, 20, evals=[(dq, "t")], early_stopping_rounds=2, verbose_eval=False)
    bd.set_attr(note="kept")
    sliced = bd[0:2]
    assert sliced.best_iteration is None and sliced.best_score is None
    assert sliced.attr("note") == "kept" and "best_iteration" not in sliced.attributes()
    assert sliced.attr("training_path") == bd.attr("training_path")


def test_multiclass_forest_slices():
    X, y = make_data(4, "binary:logistic", False)
    y = (X[:, 1]).astype(np.float32)  # 3 classes
    params = {**PARAMS, "objective": "multi:softprob", "num_class": 3, "num_parallel_tree": 2}
    dx = xgb.DMatrix(X, y)
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dx, 6)
    bd = daskgb.train(params, daskgb.QuantileMatrix(X, y), 6, verbose_eval=False)
    for sl in [slice(1, 4), slice(0, 6, 2), slice(3, None)]:
        assert len(bd[sl].get_dump()) == len(bx[sl].get_dump())
        np.testing.assert_allclose(bd[sl].predict(X), bx[sl].predict(dx), atol=1e-5)


def test_copy_is_deep():
    X, _, _, _, _, bd = models()
    before = bd.predict(X)
    for other in (bd.copy(), copy.copy(bd), copy.deepcopy(bd)):
        assert other is not bd
        other.trees[0].value[:] += 1.0
        other.set_attr(mine="x")
        np.testing.assert_array_equal(bd.predict(X), before)
        assert bd.attr("mine") is None
    np.testing.assert_array_equal(daskgb.Booster(model_file=bd).predict(X), before)


@pytest.mark.parametrize("with_stats", [False, True])
@pytest.mark.parametrize("dump_format", ["text", "json", "dot"])
def test_get_dump_as_xgboost(dump_format, with_stats):
    _, _, _, _, bx, bd = models()
    ours, theirs = bd.get_dump(with_stats=with_stats, dump_format=dump_format), \
        bx.get_dump(with_stats=with_stats, dump_format=dump_format)
    assert len(ours) == len(theirs) == ROUNDS
    for a, b in zip(ours, theirs):
        assert numbers_close(a, b), f"{a}\n---\n{b}"
    if dump_format == "json":
        for tree in ours:
            json.loads(tree)


def test_dump_feature_names_fmap_and_dump_model(tmp_path):
    X, y = make_data(6, "reg:squarederror", False)
    names = ['"feature 0"', "\tfeature\n1", 'feature "2".', "d", "e", "f"]
    bx = xgb.train({**PARAMS, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y, feature_names=names), 3)
    bd = daskgb.train(PARAMS, daskgb.QuantileMatrix(X, y, feature_names=names), 3, verbose_eval=False)
    for fmt in ("text", "json", "dot"):
        for a, b in zip(bd.get_dump(dump_format=fmt), bx.get_dump(dump_format=fmt)):
            assert numbers_close(a, b)
    fmap = tmp_path / "fmap.txt"
    fmap.write_text("".join(f"{i} n{i} {'int' if i == 0 else 'q'}\n" for i in range(6)))
    for fmt in ("text", "json", "dot"):
        for a, b in zip(bd.get_dump(fmap=str(fmap), dump_format=fmt), bx.get_dump(fmap=str(fmap), dump_format=fmt)):
            assert numbers_close(a, b)
    for fmt in ("text", "json", "dot"):
        bd.dump_model(tmp_path / "ours.txt", with_stats=True, dump_format=fmt)
        bx.dump_model(str(tmp_path / "theirs.txt"), with_stats=True, dump_format=fmt)
        assert numbers_close((tmp_path / "ours.txt").read_text(), (tmp_path / "theirs.txt").read_text())
    with pytest.raises(ValueError, match="dump_format"):
        bd.get_dump(dump_format="yaml")


def test_trees_to_dataframe_as_xgboost():
    _, _, _, _, bx, bd = models()
    pd.testing.assert_frame_equal(bd.trees_to_dataframe(), bx.trees_to_dataframe(), check_exact=False, rtol=1e-5)


def test_categorical_dump_and_dataframe():
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({"c": pd.Categorical(rng.integers(0, 5, n)), "x": rng.integers(0, 8, n).astype(np.float32)})
    y = (frame["c"].cat.codes.isin([1, 3]) * 2.0 + frame["x"] * 0.1 + rng.normal(size=n) * 0.1).astype(np.float32)
    params = {**PARAMS, "max_cat_to_onehot": 1}
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(frame, y, enable_categorical=True), 3)
    bd = daskgb.train(params, daskgb.QuantileMatrix(frame, y, enable_categorical=True), 3, verbose_eval=False)
    for fmt in ("text", "json", "dot"):
        for a, b in zip(bd.get_dump(with_stats=True, dump_format=fmt), bx.get_dump(with_stats=True, dump_format=fmt)):
            assert numbers_close(a, b, rtol=1e-4), f"{a}\n---\n{b}"  # gains: float sums in another order
    pd.testing.assert_frame_equal(bd.trees_to_dataframe(), bx.trees_to_dataframe(), check_exact=False, rtol=1e-4)


@pytest.mark.parametrize("raw_format", ["ubj", "json"])
def test_save_raw_and_load_bytes(raw_format, tmp_path):
    X, _, dx, _, bx, bd = models()
    bd.set_attr(note="kept")
    raw = bd.save_raw(raw_format)
    assert isinstance(raw, bytearray)
    back = daskgb.Booster(model_file=raw)
    np.testing.assert_array_equal(back.predict(X), bd.predict(X))
    assert back.attr("note") == "kept" and back.trees[0].bin.tolist() == bd.trees[0].bin.tolist()
    np.testing.assert_array_equal(daskgb.Booster().load_model(raw).predict(X), bd.predict(X))
    # XGBoost's format both ways, through bytes.
    theirs = xgb.Booster(model_file=bd.save_raw(raw_format, format="xgboost"))
    np.testing.assert_allclose(theirs.predict(dx), bd.predict(X), atol=1e-6)
    ours = daskgb.Booster(model_file=bx.save_raw(raw_format))
    np.testing.assert_allclose(ours.predict(X), bx.predict(dx), atol=1e-6)
    with pytest.raises(ValueError, match="raw_format"):
        bd.save_raw("pickle")
    with pytest.raises(TypeError):
        daskgb.Booster().load_model(123)


def test_ubj_files_both_ways(tmp_path):
    X, _, dx, _, bx, bd = models()
    bd.save_model(tmp_path / "ours.ubj")
    assert (tmp_path / "ours.ubj").read_bytes()[:2] == b"{L"
    np.testing.assert_array_equal(daskgb.Booster().load_model(tmp_path / "ours.ubj").predict(X), bd.predict(X))
    bd.save_model(str(tmp_path / "xgb.ubj"), format="xgboost")
    np.testing.assert_allclose(xgb.Booster(model_file=str(tmp_path / "xgb.ubj")).predict(dx), bd.predict(X),
                               atol=1e-6)
    bx.save_model(str(tmp_path / "theirs.ubj"))
    np.testing.assert_allclose(daskgb.Booster(model_file=str(tmp_path / "theirs.ubj")).predict(X), bx.predict(dx),
                               atol=1e-6)
    (tmp_path / "cut.ubj").write_bytes((tmp_path / "ours.ubj").read_bytes()[:200])
    with pytest.raises(ValueError, match="UBJSON"):
        daskgb.Booster().load_model(tmp_path / "cut.ubj")


def test_ubjson_values_round_trip():
    from daskgb import ubjson

    value = {"a": [1, -200, 70000, 2 ** 40, 1.5, -0.25, True, False, None, "é"], "b": {}, "c": [], "d": "x" * 300}
    assert ubjson.loads(ubjson.dumps(value)) == value
    with pytest.raises(ValueError):
        ubjson.dumps({"a": object()})


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_predict_as_xgboost(device):
    import scipy.sparse

    X, _, _, _, bx, bd = models(objective="binary:logistic", device=device)
    margin = np.linspace(-1, 1, 50).astype(np.float32)
    for data in (X[:50], pd.DataFrame(X[:50]), scipy.sparse.csr_matrix(np.nan_to_num(X[:50]))):
        for kw in ({}, {"predict_type": "margin"}, {"iteration_range": (1, 4)}, {"base_margin": margin},
                   {"missing": 0.0}, {"strict_shape": True}):
            np.testing.assert_allclose(bd.inplace_predict(data, **kw), bx.inplace_predict(data, **kw), atol=1e-5,
                                       err_msg=str(kw))
    with pytest.raises(ValueError, match="Feature shape mismatch"):
        bd.inplace_predict(X[:, :3])
    with pytest.raises(ValueError, match="predict_type"):
        bd.inplace_predict(X, predict_type="leaf")


@pytest.mark.gpu
def test_inplace_predict_cupy_gives_cupy():
    import cupy

    X, _, _, _, bx, bd = models(device="cuda")
    out = bd.inplace_predict(cupy.asarray(X), predict_type="margin")
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(out), bx.inplace_predict(X, predict_type="margin"), atol=1e-5)


def test_set_param_forms():
    _, _, _, _, _, bd = models()
    bd.set_param("max_depth", 2)
    bd.set_param({"eta": 0.1, "lambda": 2.0})
    bd.set_param([("eval_metric", "mae"), ("eval_metric", "rmse")])
    assert bd.params.max_depth == 2 and bd.params.learning_rate == pytest.approx(0.1)
    assert bd.params.reg_lambda == 2.0 and list(bd.params.eval_metric) == ["mae", "rmse"]
    with pytest.raises(ValueError, match="needs a value"):
        bd.set_param("max_depth")
    with pytest.raises(ValueError):
        bd.set_param({"max_depth": -3})


def test_attributes_as_xgboost():
    _, _, _, _, bx, bd = models()
    for b in (bx, bd):
        b.set_attr(a="1", b="2")
        b.set_attr(a=None)
        assert b.attr("a") is None and b.attr("b") == "2" and b.attr("missing") is None
    assert set(bx.attributes()) <= set(bd.attributes())


def test_num_features_and_feature_info_setters():
    _, _, _, _, bx, bd = models()
    assert bd.num_features() == bx.num_features() == 6
    names = list("abcdef")
    bd.feature_names = names
    bx.feature_names = names
    assert bd.feature_names == bx.feature_names == names
    bd.feature_types = ["q", "int", "float", "q", "q", "i"]
    assert bd.feature_types == ["q", "int", "float", "q", "q", "i"]
    bd.feature_types = None
    bd.feature_names = None
    assert bd.feature_names is None and bd.feature_types is None
    with pytest.raises(ValueError, match="same length"):
        bd.feature_names = ["a", "b"]
    with pytest.raises(ValueError, match="unique"):
        bd.feature_names = list("aabcde")
    with pytest.raises(ValueError, match="must be string"):
        bd.feature_names = ["a", "b", "c", "d", "e", 6]
    with pytest.raises(ValueError, match="may not contain"):
        bd.feature_names = ["a[0]", "b", "c", "d", "e", "f"]
    with pytest.raises(TypeError):
        bd.feature_names = "abcdef"
    with pytest.raises(ValueError, match="feature_types holds 'x'"):
        bd.feature_types = ["q", "x", "q", "q", "q", "q"]


def test_named_model_predicts_with_names_after_setter(tmp_path):
    X, _, _, _, _, bd = models()
    bd.feature_names = list("abcdef")
    frame = pd.DataFrame(X, columns=list("abcdef"))
    np.testing.assert_array_equal(bd.predict(frame), bd.predict(X))
    with pytest.raises(ValueError, match="feature_names mismatch"):
        bd.predict(pd.DataFrame(X, columns=list("uvwxyz")))
    bd.save_model(tmp_path / "m.json")
    assert daskgb.Booster().load_model(tmp_path / "m.json").feature_names == list("abcdef")


def test_eval_and_eval_set_strings():
    _, _, dx, dq, bx, bd = models()
    ours, theirs = bd.eval(dq), bx.eval(dx)
    assert re.fullmatch(r"\[0\]\teval-rmse:\d+\.\d{17}", ours)
    assert float(ours.split(":")[1]) == pytest.approx(float(theirs.split(":")[1]), rel=1e-6)
    bd.set_param("eval_metric", ["rmse", "mae"])
    bx.set_param([("eval_metric", "rmse"), ("eval_metric", "mae")])
    feval = lambda predt, m: ("m", 1.5)
    ours = bd.eval_set([(dq, "a"), (dq, "b")], 5, feval=feval)
    theirs = bx.eval_set([(dx, "a"), (dx, "b")], 5, feval=feval)
    assert [p.split(":")[0] for p in ours.split("\t")] == [p.split(":")[0] for p in theirs.split("\t")]
    assert ours.endswith("\ta-m:1.500000\tb-m:1.500000")
    np.testing.assert_allclose([float(p.split(":")[1]) for p in ours.split("\t")[1:]],
                               [float(p.split(":")[1]) for p in theirs.split("\t")[1:]], rtol=1e-6)
    with pytest.raises(TypeError, match="expected QuantileMatrix"):
        bd.eval_set([(dx, "a")])
    with pytest.raises(TypeError, match="expected string"):
        bd.eval_set([(dq, 1)])


@pytest.mark.parametrize("device", DEVICES)
def test_update_and_boost_rounds_as_xgboost(device):
    X, y = make_data(7, "binary:logistic", True)
    params = {**PARAMS, "objective": "binary:logistic"}
    dx, dq = xgb.DMatrix(X, y), daskgb.QuantileMatrix(X, y)
    bx = xgb.Booster({**params, "tree_method": "hist", "nthread": 1}, [dx])
    bd = daskgb.Booster({**params, "device": device}, [dq])
    assert bd.num_features() == 6
    for i in range(4):
        bx.update(dx, i)
        bd.update(dq, i)
    np.testing.assert_allclose(bd.predict(X, output_margin=True), bx.predict(dx, output_margin=True), atol=1e-5)
    # The same model as one fit.
    whole = daskgb.train({**params, "device": device}, dq, 4, verbose_eval=False)
    np.testing.assert_allclose(bd.predict(X, output_margin=True), whole.predict(X, output_margin=True), atol=1e-6)
    # A round from given gradient pairs, and one from a custom objective.
    p = bx.predict(dx)
    grad, hess = (p - y).astype(np.float32), (p * (1 - p)).astype(np.float32)
    bx.boost(dx, 4, grad=grad, hess=hess)
    bd.boost(dq, 4, grad=grad, hess=hess)

    def logistic(margin, m):
        # Where the margins are: numpy from XGBoost, cupy from daskgb on a GPU (its labels too).
        xp = array_module(margin)
        prob = 1 / (1 + xp.exp(-margin.astype(xp.float64)))
        label = xp.asarray(m.get_label())
        return prob - label, prob * (1 - prob)

    bx.update(dx, 5, fobj=logistic)
    bd.update(dq, 5, fobj=logistic)
    assert bd.num_boosted_rounds() == bx.num_boosted_rounds() == 6
    np.testing.assert_allclose(bd.predict(X, output_margin=True), bx.predict(dx, output_margin=True), atol=1e-5)
    with pytest.raises(ValueError, match="not both"):
        bd.boost(dq, 6, grad=grad, hess=hess, fobj=logistic)
    with pytest.raises(ValueError, match="Either the gradient"):
        bd.boost(dq, 6)
    with pytest.raises(ValueError, match="grad has shape"):
        bd.boost(dq, 6, grad=grad[:5], hess=hess[:5])
    with pytest.raises(TypeError, match="Invalid training matrix"):
        bd.update(X, 6)


def test_update_keeps_attributes():
    X, y = make_data(8, "reg:squarederror", False)
    dq = daskgb.QuantileMatrix(X, y)
    bd = daskgb.train(PARAMS, dq, 2, verbose_eval=False)
    bd.set_attr(note="kept")
    bd.update(dq, 2)
    assert bd.num_boosted_rounds() == 3 and bd.attr("note") == "kept" and bd.attr("training_path")


KINDS = [{}, {"output_margin": True}, {"pred_leaf": True}, {"pred_contribs": True}, {"pred_interactions": True}]


@pytest.mark.parametrize("objective, extra", [("reg:squarederror", {}), ("multi:softprob", {"num_class": 3}),
                                              ("multi:softmax", {"num_class": 3}),
                                              ("reg:squarederror", {"num_parallel_tree": 2})],
                         ids=["one-output", "softprob", "softmax", "forest"])
def test_strict_shape_as_xgboost(objective, extra):
    """strict_shape=True: XGBoost's shapes (leaf ids (n, rounds, groups, num_parallel_tree), ...),
    and the same numbers as without it."""
    rng = np.random.default_rng(1)
    X = np.round(rng.normal(size=(60, 4)), 1).astype(np.float32)
    y = rng.integers(0, 3, 60).astype(np.float32) if "num_class" in extra else X[:, 0]
    params = {"objective": objective, "max_depth": 2, **extra}
    bx = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), 3)
    m = daskgb.QuantileMatrix(X, y)
    bd = daskgb.train({**params, "device": "cpu"}, m, 3, verbose_eval=False)
    for kw in KINDS:
        for iteration_range in ((0, 0), (0, 2)):
            want = bx.predict(xgb.DMatrix(X), strict_shape=True, iteration_range=iteration_range, **kw)
            got = bd.predict(X, strict_shape=True, iteration_range=iteration_range, **kw)
            assert got.shape == want.shape, kw
            np.testing.assert_array_equal(got.ravel(), bd.predict(X, iteration_range=iteration_range, **kw).ravel())
    for predict_type in ("value", "margin"):
        assert bd.inplace_predict(X, predict_type=predict_type, strict_shape=True).shape == \
            bx.inplace_predict(X, predict_type=predict_type, strict_shape=True).shape
    for kw in KINDS:  # a matrix, of the training cuts or its own (predicted from its X)
        for matrix in (m, daskgb.QuantileMatrix(X, y)):
            assert bd.predict(matrix, strict_shape=True, **kw).shape == \
                bx.predict(xgb.DMatrix(X), strict_shape=True, **kw).shape


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


@pytest.mark.parametrize("params", [
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "interaction_constraints": "[[0,1]]"},
    {"objective": "count:poisson", "nthread": 2, "eta": 0.1, "tree_method": "hist", "num_parallel_tree": 2},
    {"objective": "reg:tweedie", "tweedie_variance_power": 1.3, "monotone_constraints": "(1,0,-1)", "gamma": 0.5},
], ids=["multiclass", "poisson-forest", "tweedie"])
def test_save_config_is_xgboosts_and_load_config_reads_it(params):
    """save_config: XGBoost's JSON layout, every entry XGBoost writes for these parameters, with
    its value; load_config takes XGBoost's back into a daskgb booster."""
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(80, 3)), 1).astype(np.float32)
    y = rng.integers(0, 3, 80).astype(np.float32) + (params["objective"] != "multi:softprob")
    bx = xgb.train(params, xgb.DMatrix(X, y), 2)
    bd = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 2, verbose_eval=False)
    theirs, ours = _flat(json.loads(bx.save_config())), _flat(json.loads(bd.save_config()))
    assert set(ours) == set(theirs)
    differ = {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]}
    # The intercept is estimated (exact for the multiclass margins); daskgb's device default is "auto".
    assert set(differ) <= {"learner.learner_model_param.base_score", "learner.generic_param.device"}, differ
    fresh = daskgb.Booster()
    fresh.load_config(bx.save_config())
    reread = _flat(json.loads(fresh.save_config()))
    for key in ("tree_train_param.eta", "tree_train_param.max_depth", "tree_train_param.interaction_constraints",
                "tree_train_param.monotone_constraints", "learner_train_param.objective", "gbtree_model_param"
                ".num_parallel_tree", "generic_param.nthread"):
        full = next(k for k in theirs if k.endswith(key))
        assert reread[full] == theirs[full], key
    with pytest.raises(ValueError, match="booster='gblinear'"):
        fresh.load_config(json.dumps({"learner": {"learner_train_param": {"booster": "gblinear"}}}))


def test_set_params_reaches_a_fitted_models_booster():
    """As XGBModel.set_params: the fitted booster takes the new training parameters."""
    X = np.random.default_rng(0).normal(size=(60, 3)).astype(np.float32)
    clf = daskgb.GBClassifier(n_estimators=1, nthread=4).fit(X, (X[:, 0] > 0).astype(int))
    assert json.loads(clf.get_booster().save_config())["learner"]["generic_param"]["nthread"] == "4"
    clf.set_params(nthread=16, n_estimators=3)
    assert json.loads(clf.get_booster().save_config())["learner"]["generic_param"]["nthread"] == "16"
    assert json.loads(clf.get_booster().save_config())["learner"]["gradient_booster"]["gbtree_train_param"][
        "tree_method"] == "auto"  # unset: XGBoost keeps "auto"


def test_split_value_histogram_as_xgboost():
    _, _, _, _, bx, bd = models()
    assert len(bd.get_split_value_histogram("f0")) > 1
    for feature in ("f0", "f2", "not_there"):
        for bins in (None, 0, 1, 2, 5):
            ours = bd.get_split_value_histogram(feature, bins=bins)
            theirs = bx.get_split_value_histogram(feature, bins=bins)
            pd.testing.assert_frame_equal(ours, theirs, check_exact=False, rtol=1e-6)
            np.testing.assert_allclose(bd.get_split_value_histogram(feature, bins=bins, as_pandas=False),
                                       theirs.to_numpy(), rtol=1e-6)
