"""The bad-input battery on a Dask cluster: collections partitioned unlike X, query groups across
partitions, empty or mismatched eval sets, predict on the wrong features. Each is an error naming
the problem, raised on the client or by the first task that sees it, before any training task
starts (or, for labels an objective cannot fit, before the first round), and never a hang.

The in-process cases are in tests/test_bad_inputs.py.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import daskgb.dask as dgb
from daskgb.dask.estimators import DaskGBClassifier, DaskGBRegressor

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from placement import on_workers  # noqa: E402

N, F = 200, 4
CHUNKS = ((100, 100), (F,))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, F)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=N)).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def dtrain(client, data):
    X, y = data
    return dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=CHUNKS), da.from_array(y, chunks=100))


@pytest.fixture(scope="module")
def frames(data):
    X, y = data
    return (dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=2),
            dd.from_pandas(pd.Series(y), npartitions=2))


@pytest.fixture(scope="module")
def named(client, frames):
    Xf, yf = frames
    return dgb.DaskQuantileMatrix(client, Xf, yf)


def vector(v, chunks=100):
    return da.from_array(v, chunks=chunks)


# ------------------------------------------------------------------ partitioning

@pytest.mark.parametrize("kw", [
    {"y": (np.arange(N), (50, 150))}, {"y": (np.arange(N), 50)}, {"weight": (np.ones(N), (150, 50))},
    {"base_margin": (np.zeros(N), 40)}, {"qid": (np.repeat(np.arange(20), 10), (90, 110))},
], ids=["y-chunks", "y-partition-count", "weight-chunks", "margin-partition-count", "qid-chunks"])
def test_vectors_partitioned_unlike_X_are_rechunked_to_X(client, data, kw):
    """Vectors of X's rows in other chunks meet X's rows by position (dask/data.py _aligned)."""
    X, y = data
    args = {"y": vector(y)}
    args.update({k: vector(v, chunks) for k, (v, chunks) in kw.items()})
    m = dgb.DaskQuantileMatrix(client, vector(X, CHUNKS), args.pop("y"), **args)
    np.testing.assert_array_equal(m.labels().compute(), kw["y"][0] if "y" in kw else y)


@pytest.mark.parametrize("kw, match", [
    ({"y": (np.arange(N + 10), (100, 110))}, r"y has 210 rows but X has 200"),
    ({"weight": (np.ones(N - 1), (150, 49))}, r"weight has 199 rows but X has 200"),
], ids=["y-longer", "weight-shorter"])
def test_vectors_of_other_rows_are_named(client, data, kw, match):
    X, y = data
    args = {"y": vector(y)}
    args.update({k: vector(v, chunks) for k, (v, chunks) in kw.items()})
    with pytest.raises(ValueError, match=match):
        dgb.DaskQuantileMatrix(client, vector(X, CHUNKS), args.pop("y"), **args)


def test_rows_that_differ_within_partitions_are_named(client, data):
    """Sizes dask does not know on either side, as many partitions: each is checked where it lies."""
    X, y = data
    Xf = dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=2).clear_divisions()
    yf = dd.from_pandas(pd.Series(y), npartitions=2).clear_divisions()
    with pytest.raises(ValueError, match=r"a partition has 100 rows of X but (99|100|101) of y"):
        dgb.DaskQuantileMatrix(client, Xf, yf.map_partitions(lambda p: p.iloc[:-1] if p.index[0] == 0 else p))


def test_labels_as_a_series_partitioned_unlike_a_dataframe_meet_by_index(client, frames, data):
    Xf, _ = frames
    _, y = data
    m = dgb.DaskQuantileMatrix(client, Xf, dd.from_pandas(pd.Series(y), npartitions=3))
    np.testing.assert_array_equal(m.labels().compute(), y)


# ------------------------------------------------------------------ X itself

def _string_frame(X):
    df = pd.DataFrame(X, columns=list("abcd"))
    df["city"] = "Oslo"
    return dd.from_pandas(df, npartitions=2)


@pytest.mark.parametrize("make_X, match", [
    (lambda X: X, r"X must be a dask array or a dask dataframe, got ndarray"),
    (lambda X: vector(X[:, 0]), r"X must be 2-dimensional \(rows x features\), got 1 dimension"),
    (lambda X: da.from_array(X[:, :, None], chunks=(100, F, 1)), r"X must be 2-dimensional .*got 3 dimension"),
    (lambda X: vector(X.astype(object), CHUNKS), r"X has non-numeric dtype object"),
    (_string_frame, r"X has non-numeric columns: \['city'\]"),
], ids=["numpy", "1d", "3d", "object", "string-column"])
def test_bad_X(client, data, make_X, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        dgb.DaskQuantileMatrix(client, make_X(X), vector(y))


def test_no_rows(client):
    with pytest.raises(ValueError, match=r"X has no rows \(every partition is empty\)"):
        dgb.DaskQuantileMatrix(client, da.zeros((0, F), chunks=(10, F)), da.zeros(0, chunks=10))


@pytest.mark.parametrize("what, match", [("y", r"y \(labels\) has 1 NaN or infinite values"),
                                         ("weight", r"weight has 1 NaN or infinite values")])
def test_nan_on_one_worker(client, data, what, match):
    X, y = data
    bad = {"y": y.copy(), "weight": np.ones(N)}
    bad[what][150] = np.nan  # in the second partition, on the second worker
    Xd = on_workers(client, X, [100, 100], [0, 1])
    with pytest.raises(ValueError, match=match):
        dgb.DaskQuantileMatrix(client, Xd, on_workers(client, bad["y"], [100, 100], [0, 1]),
                               weight=on_workers(client, bad["weight"], [100, 100], [0, 1]))


# ------------------------------------------------------------------ query groups

def test_qid_split_across_partitions(client, data):
    X, y = data
    qid = np.repeat(np.arange(20), 10)
    chunks = [95, 105]  # query 9 (rows 90..99) is cut in two
    Xd, yd, qd = (on_workers(client, v, chunks, [0, 1]) for v in (X, y, qid))
    with pytest.raises(ValueError, match=r"qid 9 is in more than one partition \(or worker\); every query group "
                                         r"must lie whole in one partition"):
        dgb.DaskQuantileMatrix(client, Xd, yd, qid=qd)


def test_group_crossing_a_partition_boundary(client, data):
    X, y = data
    with pytest.raises(ValueError, match=r"query group 9 \(rows 90..99\) crosses a partition boundary"):
        dgb.DaskQuantileMatrix(client, vector(X, ((95, 105), (F,))), vector(y, (95, 105)), group=[10] * 20)


def test_qid_not_sorted_within_a_partition(client, data):
    X, y = data
    qid = np.repeat(np.arange(20), 10)[::-1].copy()
    with pytest.raises(ValueError, match=r"qid must be sorted in non-decreasing order"):
        dgb.DaskQuantileMatrix(client, vector(X, CHUNKS), vector(y), qid=vector(qid))


def test_ranking_without_query_groups(client, dtrain):
    with pytest.raises(ValueError, match=r"objective 'rank:ndcg' on Dask needs query groups"):
        dgb.train(client, {"objective": "rank:ndcg"}, dtrain, 1, verbose_eval=False)


# ------------------------------------------------------------------ eval sets

def test_empty_eval_set(client, dtrain):
    with pytest.raises(ValueError, match=r"X has no rows \(every partition is empty\)"):
        dgb.DaskQuantileMatrix(client, da.zeros((0, F), chunks=(10, F)), da.zeros(0, chunks=10), ref=dtrain)


def test_estimator_empty_eval_set(client, data):
    X, y = data
    with pytest.raises(ValueError, match=r"X has no rows \(every partition is empty\)"):
        DaskGBRegressor(client=client, n_estimators=1).fit(
            vector(X, CHUNKS), vector(y), eval_set=[(da.zeros((0, F), chunks=(10, F)), da.zeros(0, chunks=10))],
            verbose=False)


def test_eval_set_with_another_feature_count(client, data, dtrain):
    X, y = data
    with pytest.raises(ValueError, match=r"ref has 4 features, this data has 3"):
        dgb.DaskQuantileMatrix(client, vector(X[:, :3], ((100, 100), (3,))), vector(y), ref=dtrain)


def test_eval_set_with_other_feature_names(client, frames, named):
    Xf, yf = frames
    with pytest.raises(ValueError, match=r"feature_names mismatch: ref \(the training matrix\) has \['a', 'b', 'c', "
                                         r"'d'\], this data has \['z', 'b', 'c', 'd'\]"):
        dgb.DaskQuantileMatrix(client, Xf.rename(columns={"a": "z"}), yf, ref=named)


def test_eval_set_with_its_own_cuts_and_no_data_to_bin_again(client, data, dtrain):
    """An eval set without ref= is binned again from its collections (tests/dask/test_train.py);
    one that keeps none (a take() of another matrix, or released) cannot be, and says so."""
    X, y = data
    other = dgb.DaskQuantileMatrix(client, vector(X, CHUNKS), vector(y))
    taken = other.take(np.arange(50))
    with pytest.raises(ValueError, match=r"eval set 'x' was quantised with cuts of its own, and daskgb holds no data "
                                         r"to bin it again .*DaskQuantileMatrix\(..., ref=dtrain\)"):
        dgb.train(client, {}, dtrain, 1, evals=[(taken, "x")], verbose_eval=False)
    other.release()
    with pytest.raises(ValueError, match=r"a DaskQuantileMatrix given to train was released"):
        dgb.train(client, {}, dtrain, 1, evals=[(other, "x")], verbose_eval=False)


def test_eval_labels_that_are_not_training_classes(client, data):
    X, y = data
    labels = (y > 0).astype(np.float32)
    with pytest.raises(ValueError, match=r"eval_set labels \[2.0\] are not among the training classes \[0.0, 1.0\]"):
        DaskGBClassifier(client=client, n_estimators=1).fit(
            vector(X, CHUNKS), vector(labels), eval_set=[(vector(X, CHUNKS), vector(labels + 1))], verbose=False)


# ------------------------------------------------------------------ parameters and labels at train

def test_unknown_parameter(client, dtrain):
    with pytest.raises(ValueError, match=r"unknown parameter 'max_dept' \(did you mean 'max_depth'\?\)"):
        dgb.train(client, {"max_dept": 3}, dtrain, 1, verbose_eval=False)


def test_cuda_asked_of_cpu_workers(client, dtrain):
    with pytest.raises(ValueError, match=r"device='cuda' was asked for, but the workers holding the data are CPU "
                                         r"workers"):
        dgb.train(client, {"device": "cuda"}, dtrain, 1, verbose_eval=False)


@pytest.mark.parametrize("params, label, match", [
    ({"objective": "count:poisson"}, -1.0, r"count:poisson needs non-negative labels; 50 labels are negative"),
    ({"objective": "multi:softmax", "num_class": 2}, 2.0, r"multi:softmax needs integer labels in "
                                                          r"\[0, num_class=2\); 50 labels are not"),
], ids=["poisson-negative", "softmax-label-is-num_class"])
def test_labels_the_objective_cannot_fit_on_one_worker(client, data, params, label, match):
    """Only the second worker holds the bad labels: it raises, and the first, waiting for it in a
    collective, is released at once instead of waiting out the collective's timeout."""
    X, y = data
    labels = np.ones(N, dtype=np.float32)
    labels[150:] = label
    dm = dgb.DaskQuantileMatrix(client, on_workers(client, X, [100, 100], [0, 1]),
                                on_workers(client, labels, [100, 100], [0, 1]))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        dgb.train(client, params, dm, 2, verbose_eval=False)
    assert time.perf_counter() - start < 30


# ------------------------------------------------------------------ predict

@pytest.fixture(scope="module")
def boosters(client, dtrain, named):
    return (dgb.train(client, {"max_depth": 2}, dtrain, 2, verbose_eval=False)["booster"],
            dgb.train(client, {"max_depth": 2}, named, 2, verbose_eval=False)["booster"])


@pytest.mark.parametrize("make_X, match", [
    (lambda X: vector(np.hstack([X, X[:, :1]]), ((100, 100), (F + 1,))), r"the model was trained on 4 features, "
                                                                        r"X has 5"),
    (lambda X: vector(X[:, :3], ((100, 100), (3,))), r"the model was trained on 4 features, X has 3"),
    (lambda X: vector(X[:, 0]), r"X must be 2-dimensional, got 1 dimension"),
    (lambda X: X, r"X must be a dask array or dataframe, got ndarray"),
], ids=["5-features", "3-features", "1d", "numpy"])
def test_predict_on_the_wrong_features(client, data, boosters, make_X, match):
    X, _ = data
    with pytest.raises(ValueError, match=match):
        dgb.predict(client, boosters[0], make_X(X))


@pytest.mark.parametrize("columns, match", [
    (list("dcba"), r"feature_names mismatch: the model has \['a', 'b', 'c', 'd'\], X has \['d', 'c', 'b', 'a'\] "
                   r"\(the same names in another order"),
    (list("abce"), r"feature_names mismatch: .*X lacks \['d'\]; the model lacks \['e'\]"),
], ids=["reordered", "renamed"])
def test_predict_on_a_dataframe_with_other_column_names(client, frames, boosters, columns, match):
    """The blocks reach the workers as arrays without names, so the names are compared on the client."""
    Xf, _ = frames
    renamed = Xf.rename(columns=dict(zip("abcd", columns)))
    with pytest.raises(ValueError, match=match):
        dgb.predict(client, boosters[1], renamed)


def test_repeated_column_names_are_refused(client, data):
    X, y = data
    Xf = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "a", "d"]), npartitions=2)
    with pytest.raises(ValueError, match=r"feature names must be unique; repeated: \['a'\]"):
        dgb.DaskQuantileMatrix(client, Xf, dd.from_pandas(pd.Series(y), npartitions=2))


def test_a_closed_client_is_named(data):
    """A fit or a matrix with a client that was closed says so (it raised AttributeError)."""
    from distributed import Client, LocalCluster

    X, y = data
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        c = Client(cluster)
        m = dgb.DaskQuantileMatrix(c, da.from_array(X, chunks=CHUNKS), da.from_array(y, chunks=100))
        c.close()
        with pytest.raises(ValueError, match="the Dask client was closed"):
            dgb.train(c, {"device": "cpu"}, m, 2)
        with pytest.raises(ValueError, match="the Dask client was closed"):
            dgb.DaskQuantileMatrix(c, da.from_array(X, chunks=CHUNKS), da.from_array(y, chunks=100))
