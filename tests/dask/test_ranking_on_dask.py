"""Learning to rank on a LocalCluster of 2 worker processes: the same model and metrics as in process.

Every query group lies whole in one partition (checked, never assumed), so each
worker computes its groups' gradients locally; sampled pairs (the mean method)
are drawn per global group number, so they match in-process training exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import daskgb
import daskgb.dask as dgb

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from placement import on_workers  # noqa: E402


def ranking_data(n_queries=60, seed=0):
    """Queries of 1..29 documents (ids 5, 8, 11, ...), exact-cut features, graded labels 0-4."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 30, n_queries)
    n = int(sizes.sum())
    qid = np.repeat(np.arange(n_queries) * 3 + 5, sizes)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    y = np.clip(np.round(X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n) + 1), 0, 4).astype(np.float32)
    return X, y, qid, sizes


def query_chunks(sizes, cuts):
    """Partition row counts that cut between the given query indices."""
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    return np.diff(np.concatenate([[0], ptr[cuts], [ptr[-1]]])).tolist()


@pytest.mark.parametrize("objective, pair_method", [("rank:ndcg", "topk"), ("rank:pairwise", "mean"),
                                                    ("rank:map", "mean")])
def test_ranking_model_equals_in_process(client, objective, pair_method):
    X, y, qid, sizes = ranking_data()
    if objective == "rank:map":
        y = (y >= 2).astype(np.float32)
    w = np.random.default_rng(1).uniform(0.5, 2, sizes.size).astype(np.float32)
    # Worker 0 holds the first and last partitions, worker 1 the middle ones: neither holds
    # its queries in qid order, and the sampled pairs must not care.
    chunks, placement = query_chunks(sizes, [10, 25, 40]), [0, 1, 1, 0]
    parts = [on_workers(client, v, chunks, placement) for v in (X, y, qid, np.repeat(w, sizes))]
    dtrain = dgb.DaskQuantileMatrix(client, parts[0], parts[1], qid=parts[2], weight=parts[3])
    assert dtrain.n_groups == sizes.size and len(dtrain.workers) == 2
    params = {"objective": objective, "lambdarank_pair_method": pair_method, "max_depth": 4, "device": "cpu",
              "eval_metric": ["ndcg@5", "map@3" if objective == "rank:map" else "ndcg"]}
    out = dgb.train(client, params, dtrain, 8, evals=[(dtrain, "t")], verbose_eval=False)
    m = daskgb.QuantileMatrix(X, y, qid=qid, weight=w)
    res = {}
    local = daskgb.train(params, m, 8, evals=[(m, "t")], evals_result=res, verbose_eval=False)
    np.testing.assert_allclose(out["booster"].predict(X), local.predict(X), atol=1e-6)
    for name, values in res["t"].items():  # every query counted once, weighted as in process
        np.testing.assert_allclose(out["history"]["t"][name], values, rtol=1e-12)


def test_ranking_group_sizes_on_dask_equal_qid(client):
    X, y, qid, sizes = ranking_data(seed=2)
    chunks, placement = query_chunks(sizes, [0, 30]), [0, 0, 1]  # an empty first partition
    Xd, yd = on_workers(client, X, chunks, placement), on_workers(client, y, chunks, placement)
    params = {"objective": "rank:ndcg", "lambdarank_pair_method": "mean", "max_depth": 3, "device": "cpu"}
    by_group = dgb.train(client, params, dgb.DaskQuantileMatrix(client, Xd, yd, group=sizes), 5, verbose_eval=False)
    local = daskgb.train(params, daskgb.QuantileMatrix(X, y, group=sizes), 5, verbose_eval=False)
    np.testing.assert_allclose(by_group["booster"].predict(X), local.predict(X), atol=1e-6)


def test_ranking_groups_must_lie_whole_in_a_partition(client):
    X, y, qid, sizes = ranking_data(seed=3, n_queries=20)
    chunks = query_chunks(sizes, [8])
    chunks = [chunks[0] + 1, chunks[1] - 1]  # query 8's first row ends partition 0
    Xd, yd, qd = (on_workers(client, v, chunks, [0, 1]) for v in (X, y, qid))
    with pytest.raises(ValueError, match=f"qid {qid[sum(chunks[:1]) - 1]} is in more than one partition"):
        dgb.DaskQuantileMatrix(client, Xd, yd, qid=qd)
    with pytest.raises(ValueError, match="query group 8 .* crosses a partition boundary"):
        dgb.DaskQuantileMatrix(client, Xd, yd, group=sizes)
    good = query_chunks(sizes, [8])
    Xd, yd = on_workers(client, X, good, [0, 1]), on_workers(client, y, good, [0, 1])
    with pytest.raises(ValueError, match="non-decreasing"):
        dgb.DaskQuantileMatrix(client, Xd, yd, qid=on_workers(client, qid[::-1].copy(), good, [0, 1]))
    w = np.random.default_rng(0).uniform(size=y.size).astype(np.float32)
    with pytest.raises(ValueError, match="differs within a query group"):
        dgb.DaskQuantileMatrix(client, Xd, yd, qid=on_workers(client, qid, good, [0, 1]),
                               weight=on_workers(client, w, good, [0, 1]))
    with pytest.raises(ValueError, match="needs query groups"):
        dgb.train(client, {"objective": "rank:ndcg"}, dgb.DaskQuantileMatrix(client, Xd, yd), 1)
    dtrain = dgb.DaskQuantileMatrix(client, Xd, yd, qid=on_workers(client, qid, good, [0, 1]))
    with pytest.raises(ValueError, match="eval set 'v' with qid"):
        dgb.train(client, {"objective": "rank:ndcg"}, dtrain, 1, evals=[(dgb.DaskQuantileMatrix(
            client, Xd, yd, ref=dtrain), "v")])


def test_dask_gbranker_equals_gbranker(client):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y, qid, sizes = ranking_data(seed=4)
    Xv, yv, qv, _ = ranking_data(seed=5, n_queries=20)
    cols = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=cols).assign(qid=qid, y=y)
    # Partitions cut on query boundaries: a dataframe indexed by qid keeps every query whole.
    df = dd.from_pandas(frame.set_index("qid", drop=False), npartitions=3, sort=True)
    vframe = pd.DataFrame(Xv, columns=cols).assign(qid=qv, y=yv)
    vdf = dd.from_pandas(vframe.set_index("qid", drop=False), npartitions=2, sort=True)
    ours = daskgb.DaskGBRanker(client=client, n_estimators=6, max_depth=4, device="cpu",
                               lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=2)
    ours.fit(df[cols + ["qid"]], df["y"], eval_set=[(vdf[cols + ["qid"]], vdf["y"])])
    local = daskgb.GBRanker(n_estimators=6, max_depth=4, device="cpu", lambdarank_pair_method="mean",
                            lambdarank_num_pair_per_sample=2)
    local.fit(pd.DataFrame(X, columns=cols), y, qid=qid, eval_set=[(Xv, yv)], eval_qid=[qv])
    np.testing.assert_allclose(ours.predict(df[cols]).compute(), local.predict(X), atol=1e-6)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["ndcg"],
                               local.evals_result()["validation_0"]["ndcg"], rtol=1e-12)
    assert ours.score(vdf[cols + ["qid"]], vdf["y"]) == pytest.approx(local.score(vframe[cols + ["qid"]], yv),
                                                                     rel=1e-12)


def test_dask_gbranker_on_dask_arrays_equals_gbranker(client):
    X, y, qid, sizes = ranking_data(seed=6)
    Xv, yv, qv, sv = ranking_data(seed=7, n_queries=20)
    chunks, placement = query_chunks(sizes, [20, 35]), [1, 0, 1]
    vchunks = query_chunks(sv, [12])
    w = np.random.default_rng(2).uniform(0.5, 2, sizes.size).astype(np.float32)
    Xd, yd, qd, wd = (on_workers(client, v, chunks, placement) for v in (X, y, qid, np.repeat(w, sizes)))
    Xvd, yvd, qvd = (on_workers(client, v, vchunks, [0, 1]) for v in (Xv, yv, qv))
    ours = daskgb.DaskGBRanker(client=client, n_estimators=6, max_depth=4, device="cpu", objective="rank:pairwise")
    assert ours.fit(Xd, yd, qid=qd, sample_weight=wd, eval_set=[(Xvd, yvd)], eval_qid=[qvd]) is ours
    local = daskgb.GBRanker(n_estimators=6, max_depth=4, device="cpu", objective="rank:pairwise")
    local.fit(X, y, qid=qid, sample_weight=w, eval_set=[(Xv, yv)], eval_qid=[qv])
    pred = ours.predict(Xvd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), local.predict(Xv), atol=1e-6)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["ndcg@32"],
                               local.evals_result()["validation_0"]["ndcg@32"], rtol=1e-12)
    import pandas as pd

    frame = pd.DataFrame(Xv).assign(qid=qv)
    assert ours.score(Xvd, yvd, qid=qvd) == pytest.approx(local.score(frame, yv), rel=1e-12)
    with pytest.raises(ValueError, match="query groups"):
        ours.fit(Xd, yd)
    with pytest.raises(ValueError, match="more than one partition"):
        ours.score(Xvd, yvd, qid=on_workers(client, np.zeros(yv.size, np.int64), vchunks, [0, 1]))


def test_a_rankers_callable_metric_on_dask_equals_in_process(client):
    """Each worker's query groups travel with its rows to the callable metric: the per-query
    average equals in-process's (and XGBRanker's: tests/test_ranking.py)."""
    X, y, qid, sizes = ranking_data(seed=8, n_queries=30)
    Xv, yv, qv, sv = ranking_data(seed=9, n_queries=16)
    chunks, vchunks = query_chunks(sizes, [12]), query_chunks(sv, [7])
    Xd, yd, qd = (on_workers(client, v, chunks, [0, 1]) for v in (X, y, qid))
    Xvd, yvd, qvd = (on_workers(client, v, vchunks, [1, 0]) for v in (Xv, yv, qv))

    def top_relevance(y_true, y_score):
        return float(y_true[np.argmax(y_score)])

    kw = dict(n_estimators=3, max_depth=3, device="cpu", eval_metric=top_relevance)
    ours = daskgb.DaskGBRanker(client=client, **kw).fit(Xd, yd, qid=qd, eval_set=[(Xvd, yvd)], eval_qid=[qvd])
    local = daskgb.GBRanker(**kw).fit(X, y, qid=qid, eval_set=[(Xv, yv)], eval_qid=[qv])
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["top_relevance"],
                               local.evals_result()["validation_0"]["top_relevance"], rtol=1e-12)
