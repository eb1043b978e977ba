"""Learning to rank: rank:pairwise / rank:ndcg / rank:map and the ndcg / map / pre metrics against xgboost `hist`.

On exact-cut data our models must equal XGBoost's (predictions within 1e-5, every
round's metric within 1e-6 relative) in each pair construction: topk, and mean,
whose random pairs we draw from XGBoost's own stream (std::minstd_rand seeded per
query, libstdc++'s uniform_int_distribution), so they are XGBoost's pairs. The
vectorised gradient is also checked against a per-query loop transcription of
XGBoost's LambdaRankObj, and the metrics against XGBoost's on the same predictions.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

import daskgb
from daskgb import ranking
from daskgb.metric import evaluate
from daskgb.params import TrainParams

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
ROUNDS = 10


@pytest.fixture(scope="module")
def xgb():
    """The reference; tests that need it skip without it (the CUDA-vs-numpy tests do not)."""
    return pytest.importorskip("xgboost")


def make(seed=0, n_queries=40, n_features=5, binary=False, max_size=40):
    """Queries of 1..max_size documents, features on a quarter grid (exact cuts), graded labels 0-4."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_size, n_queries)
    n = int(sizes.sum())
    qid = np.repeat(np.arange(n_queries) * 2 + 3, sizes)
    X = (np.round(rng.normal(size=(n, n_features)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    y = np.clip(np.round(Z[:, 0] - 0.5 * Z[:, 1] + 0.3 * Z[:, 2] * Z[:, 3] + rng.normal(size=n) + 1), 0, 4)
    if binary:
        y = (y >= 2).astype(np.float32)
    return X, y.astype(np.float32), qid, sizes


# (objective, extra parameters) in their deterministic configurations: all of them are.
CONFIGS = [
    ("rank:ndcg", {}),
    ("rank:ndcg", {"lambdarank_num_pair_per_sample": 3}),
    ("rank:ndcg", {"ndcg_exp_gain": False}),
    ("rank:ndcg", {"lambdarank_normalization": False, "lambdarank_score_normalization": False}),
    ("rank:ndcg", {"lambdarank_pair_method": "mean"}),
    ("rank:ndcg", {"lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 3}),
    ("rank:pairwise", {}),
    ("rank:pairwise", {"lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 2}),
    ("rank:map", {}),
    ("rank:map", {"lambdarank_num_pair_per_sample": 5, "lambdarank_score_normalization": False}),
    ("rank:map", {"lambdarank_pair_method": "mean"}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("objective, extra", CONFIGS, ids=[f"{o}-{json.dumps(e)}" for o, e in CONFIGS])
def test_parity_with_xgboost(objective, extra, device, xgb):
    X, y, qid, sizes = make(binary=objective == "rank:map")
    w = np.random.default_rng(4).uniform(0.5, 2.0, sizes.size).astype(np.float32)
    failures = []
    for weighted, depth in itertools.product([False, True], [2, 6]):
        weight = w if weighted else None
        params = {"objective": objective, "max_depth": depth, "eta": 0.3, **extra}
        dm = xgb.DMatrix(X, y, qid=qid, weight=weight)
        rx, ro = {}, {}
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dm, ROUNDS, evals=[(dm, "t")],
                       evals_result=rx, verbose_eval=False)
        m = daskgb.QuantileMatrix(X, y, qid=qid, weight=weight)
        bo = daskgb.train({**params, "device": device}, m, ROUNDS, evals=[(m, "t")], evals_result=ro,
                          verbose_eval=False)
        label = f"weighted={weighted} depth={depth}"
        diff = float(np.max(np.abs(bx.predict(xgb.DMatrix(X), output_margin=True) - bo.predict(X, output_margin=True))))
        if diff > 1e-5:
            failures.append(f"{label}: max |margin diff| {diff:.3e}")
        (metric, values), = rx["t"].items()
        if list(ro["t"]) != [metric]:
            failures.append(f"{label}: metrics {list(ro['t'])}, XGBoost reports {metric!r}")
        elif not np.allclose(ro["t"][metric], values, rtol=1e-6, atol=0):
            failures.append(f"{label}: {metric} {ro['t'][metric]} vs {values}")
    assert not failures, "\n".join(failures)


def test_rows_without_query_ids_are_one_query_as_in_xgboost(xgb):
    X, y, _, _ = make(seed=1, n_queries=3)
    params = {"objective": "rank:ndcg", "max_depth": 3}
    bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, xgb.DMatrix(X, y), 5)
    bo = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y), 5, verbose_eval=False)
    np.testing.assert_allclose(bo.predict(X), bx.predict(xgb.DMatrix(X)), atol=1e-5)


def test_group_sizes_equal_qid():
    X, y, qid, sizes = make(seed=2)
    params = {"objective": "rank:pairwise", "lambdarank_pair_method": "mean", "max_depth": 3, "device": "cpu"}
    by_qid = daskgb.train(params, daskgb.QuantileMatrix(X, y, qid=qid), 5, verbose_eval=False)
    by_group = daskgb.train(params, daskgb.QuantileMatrix(X, y, group=sizes), 5, verbose_eval=False)
    np.testing.assert_array_equal(by_qid.predict(X), by_group.predict(X))
    m = daskgb.QuantileMatrix(X, y, group=sizes)
    np.testing.assert_array_equal(m.get_group(), sizes)


@pytest.mark.parametrize("objective", ["rank:pairwise", "rank:ndcg", "rank:map"])
def test_default_metric_and_base_score_match_xgboost(objective, xgb):
    X, y, qid, _ = make(seed=3, binary=objective == "rank:map")
    for extra in ({}, {"lambdarank_pair_method": "mean"}, {"lambdarank_num_pair_per_sample": 7}):
        params = {"objective": objective, **extra}
        bx = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, qid=qid), 1)
        learner = json.loads(bx.save_config())["learner"]
        ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y, qid=qid), 1, verbose_eval=False)
        assert ours.objective.default_metric == learner["metrics"][0]["name"]
        # One Newton step from 0 on gradients that cancel pair by pair: rounding noise, in both.
        expected = float(learner["learner_model_param"]["base_score"].strip("[]"))
        assert abs(ours.base_score) < 1e-6 and abs(expected) < 1e-6


def test_lambdarank_defaults_match_xgboost(xgb):
    bx = xgb.train({"objective": "rank:ndcg"}, xgb.DMatrix(*make(seed=4)[:2], qid=make(seed=4)[2]), 1)
    saved = json.loads(bx.save_config())["learner"]["objective"]["lambdarank_param"]
    p = TrainParams.from_dict({"objective": "rank:ndcg"})
    assert saved["lambdarank_pair_method"] == p.lambdarank_pair_method == "topk"
    assert int(saved["lambdarank_num_pair_per_sample"]) == 2**32 - 1 and p.lambdarank_num_pair_per_sample is None
    for name in ("lambdarank_normalization", "lambdarank_score_normalization", "ndcg_exp_gain", "lambdarank_unbiased"):
        assert bool(int(saved[name])) == getattr(p, name), name
    assert float(saved["lambdarank_bias_norm"]) == p.lambdarank_bias_norm


# --------------------------------------------------------------------------- the gradient, query by query


class _MinStd:
    """std::minstd_rand."""

    def __init__(self, seed):
        self.x = seed % 2147483647 or 1

    def __call__(self):
        self.x = self.x * 48271 % 2147483647
        return self.x


def _uniform_int(rng, n):
    """libstdc++'s uniform_int_distribution(0, n - 1) on minstd_rand: downscaling with rejection."""
    scaling = (2147483647 - 2) // n
    while True:
        ret = rng() - 1
        if ret < n * scaling:
            return ret // scaling


def _loop_gradient(kind, pred, y, ptr, w, pair_method, num_pair, norm, score_norm, exp_gain, iteration):
    """XGBoost's LambdaRankObj::CalcLambdaForGroup and MakePairs, transcribed one query at a time."""
    out = np.zeros((y.size, 2), np.float32)
    n_groups = ptr.size - 1
    w_norm = 1.0 if w is None else n_groups / float(np.sum(w.astype(np.float64)))

    def gain(v):
        return float((1 << int(v)) - 1) if exp_gain else float(v)

    for g in range(n_groups):
        a, b = ptr[g], ptr[g + 1]
        cnt = b - a
        if cnt == 0:
            continue
        p, lab = pred[a:b], y[a:b]
        rank = np.argsort(-p, kind="stable")
        disc = 1.0 / np.log2(np.arange(cnt) + 2.0)
        k = cnt if pair_method == "mean" else min(cnt, num_pair)
        idcg = sum(disc[i] * gain(v) for i, v in enumerate(np.sort(lab)[::-1][:k]))
        nrel = np.cumsum(lab[rank].astype(np.float64))
        acc = np.cumsum(lab[rank] / np.arange(1.0, cnt + 1))
        gg, hh = np.zeros(cnt, np.float32), np.zeros(cnt, np.float32)
        sum_lambda = 0.0

        def delta(yh, yl, rh, rl):
            if kind == "pairwise":
                return 1.0
            if kind == "ndcg":
                return ((gain(yh) * disc[rh] + gain(yl) * disc[rl]) - (gain(yl) * disc[rh] + gain(yh) * disc[rl])) * (
                    0.0 if idcg == 0 else 1.0 / idcg)
            if rh > rl:
                rh, rl, yh, yl = rl, rh, yl, yh
            between = acc[rl - 1] - acc[rh]
            if yh < yl:
                return (nrel[rl] / (rl + 1.0) - (nrel[rh] + 1.0) / (rh + 1.0) - between) / nrel[-1]
            return (nrel[rh] / (rh + 1.0) - nrel[rl] / (rl + 1.0) + between) / nrel[-1]

        def pair(rh, rl):
            nonlocal sum_lambda
            if lab[rank[rh]] == lab[rank[rl]]:
                return
            if lab[rank[rh]] < lab[rank[rl]]:
                rh, rl = rl, rh
            ih, il = rank[rh], rank[rl]
            diff = np.float32(p[ih] - p[il])
            sig = float(np.float32(1) / (np.exp(np.float32(min(-diff, np.float32(88.7))), dtype=np.float32) + np.float32(1)))
            dm = abs(delta(lab[ih], lab[il], rh, rl))
            if score_norm and p[rank[0]] != p[rank[-1]]:
                dm /= float(abs(diff)) + 0.01
            lam = np.float32((sig - 1.0) * dm)
            hs = np.float32(max(sig * (1.0 - sig), 1e-16) * dm * 2.0)
            gg[ih] += lam
            hh[ih] += hs
            gg[il] -= lam
            hh[il] += hs
            sum_lambda += -2.0 * float(lam)

        if pair_method == "topk":
            for i in range(k):
                for j in range(i + 1, cnt):
                    pair(i, j)
        else:
            rng = _MinStd(((iteration + 1) * n_groups + g) % 2**32)
            by_label = np.argsort(-lab[rank], kind="stable")
            i = 0
            while i < cnt:
                j = i + 1
                while j < cnt and lab[rank[by_label[i]]] == lab[rank[by_label[j]]]:
                    j += 1
                if i + cnt - j > 0:
                    for _ in range(num_pair):
                        for slot in range(i, j):
                            r = _uniform_int(rng, i + cnt - j)
                            pair(by_label[slot], by_label[r if r < i else r - i + j])
                i = j
        f = 1.0
        if norm:
            f = 1.0 / num_pair if pair_method == "mean" else (
                np.log2(1.0 + sum_lambda) / sum_lambda if sum_lambda > 0 else 1.0)
        wg = np.float32(1.0 if w is None else w[g])
        for col, v in ((0, gg), (1, hh)):
            v = (v.astype(np.float64) * f).astype(np.float32) * wg
            out[a:b, col] = (v.astype(np.float64) * w_norm).astype(np.float32)
    return out


def _ranking_data(seed, binary):
    """Queries with ties in predictions, single documents, empty groups and all-equal labels."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 25, 30)
    sizes[:3] = [1, 0, 6]
    n = int(sizes.sum())
    y = rng.integers(0, 2 if binary else 5, n).astype(np.float32)
    y[1:7] = 1.0  # the third query: one label only
    pred = np.round(rng.normal(size=n), 1).astype(np.float32)
    return sizes, y, pred, rng.uniform(0.5, 2.0, sizes.size).astype(np.float32)


@pytest.mark.parametrize("kind", ["pairwise", "ndcg", "map"])
@pytest.mark.parametrize("pair_method, num_pair", [("topk", 32), ("topk", 4), ("mean", 1), ("mean", 3)])
def test_vectorised_gradient_equals_per_query_loops(kind, pair_method, num_pair):
    for seed, weighted, flags in itertools.product([0, 1], [False, True], [(True, True, True), (False, False, False)]):
        sizes, y, pred, w = _ranking_data(seed, kind == "map")
        norm, score_norm, exp_gain = flags
        m = daskgb.QuantileMatrix(np.zeros((y.size, 1), np.float32), y, group=sizes, weight=w if weighted else None)
        obj = ranking.RANKING_OBJECTIVES[f"rank:{kind}"](pair_method, num_pair, norm, score_norm, exp_gain)
        obj.prepare(np, m, None)
        got = obj.gradient_of(np, pred, m, iteration=3)
        expected = _loop_gradient(kind, pred, y, m.groups.ptr, w if weighted else None, pair_method, num_pair, norm,
                                  score_norm, exp_gain, iteration=3)
        # Pairs accumulate in float64 here and one by one in float in XGBoost: a few float ulps of
        # the summed |lambda| apart.
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"seed={seed} weighted={weighted} "
                                                                            f"flags={flags}")


def test_minstd_draws_match_the_scalar_stream_through_rejections():
    # With n near 2^30, about half of the raw outputs are rejected: every draw after one shifts.
    rng = np.random.default_rng(0)
    seeds = rng.integers(0, 2**32, 40, dtype=np.uint64)
    counts = rng.integers(1, 10, 40)
    choices = [rng.choice([3, 7, 2**30 + 7, 1_500_000_000], size=c) for c in counts]
    expected = []
    for s, ns in zip(seeds, choices):
        stream = _MinStd(int(s))
        expected += [_uniform_int(stream, int(n)) for n in ns]
    state = seeds % np.uint64(2147483647)
    state[state == 0] = 1
    group = np.repeat(np.arange(40), counts)
    draw = np.concatenate([np.arange(c) for c in counts])
    got = ranking._minstd_uniform(np, state[group], draw, np.concatenate(choices).astype(np.int64), group)
    np.testing.assert_array_equal(got, expected)


def test_gradient_does_not_depend_on_how_queries_are_chunked(monkeypatch):
    sizes, y, pred, _ = _ranking_data(5, False)
    m = daskgb.QuantileMatrix(np.zeros((y.size, 1), np.float32), y, group=sizes)
    results = []
    for chunk in (ranking.PAIR_CHUNK, 97):
        monkeypatch.setattr(ranking, "PAIR_CHUNK", chunk)
        for method in ("topk", "mean"):
            obj = ranking.NDCG(method, 2)
            obj.prepare(np, m, None)
            results.append(obj.gradient_of(np, pred, m, 0))
    np.testing.assert_allclose(results[0], results[2], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(results[1], results[3], rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------- metrics


def _xgb_metric(xgb, metric, y, pred, sizes, w=None, exp_gain=True):
    """XGBoost's value of `metric` for these predictions (a 0-round model scores its base margins)."""
    d = xgb.DMatrix(np.zeros((y.size, 1)), y, group=sizes, weight=w, base_margin=pred)
    objective = "rank:map" if metric.startswith(("map", "pre")) else "rank:ndcg"
    b = xgb.train({"objective": objective, "base_score": 0.0, "eval_metric": metric, "ndcg_exp_gain": exp_gain}, d, 0)
    return float(b.eval(d).split(":")[1])


def test_metrics_match_xgboost_on_the_same_predictions(xgb):
    rng = np.random.default_rng(2)
    names = ["ndcg", "ndcg@3", "ndcg@3-", "ndcg-", "ndcg@20", "map", "map@3", "map@3-", "map-", "pre@3", "pre",
             "pre@5-"]
    checked = 0
    for trial in range(30):
        sizes = rng.integers(0 if trial % 4 == 0 else 1, 12, rng.integers(1, 8))
        sizes[0] = max(sizes[0], 2)
        n = int(sizes.sum())
        graded = rng.integers(0, 4, n).astype(np.float32)
        pred = np.round(rng.normal(size=n), 0).astype(np.float32)  # ties
        w = rng.uniform(0.5, 2, sizes.size).astype(np.float32) if trial % 2 else None
        exp_gain = trial % 3 != 0
        if not exp_gain:
            graded = graded * 0.75
        groups = ranking.groups_from_sizes(sizes, n)
        groups.weight = w
        for name in names:
            y = graded if name.startswith("ndcg") else (graded > 1).astype(np.float32)
            if name.startswith("pre") and (sizes == 0).any():
                continue  # XGBoost rejects its own score for empty queries under pre
            if name in ("ndcg", "ndcg@3", "ndcg@20") and w is not None and _has_query_without_relevance(y, sizes):
                continue  # the deviation tested below
            got = evaluate(name, np, y, pred, groups=groups, ndcg_exp_gain=exp_gain)
            assert got == pytest.approx(_xgb_metric(xgb, name, y, pred, sizes, w, exp_gain), rel=1e-12, abs=1e-12), \
                (trial, name)
            checked += 1
    assert checked > 250


def _has_query_without_relevance(y, sizes):
    return any(not (part > 0).any() for part in np.split(y, np.cumsum(sizes)[:-1]))


def test_weighted_ndcg_of_a_query_without_relevant_documents_deviates_on_purpose(xgb):
    # XGBoost scores such a query 1 without its weight, inside a weighted mean (so a lone
    # query of weight 0.5 scores 2 and trips XGBoost's own "score <= 1" check). We weight it
    # like every other query: sum(w * ndcg) / sum(w), always in [0, 1].
    y = np.array([0, 0, 0, 1, 0, 2], np.float32)
    pred = np.array([3, 2, 1, 0, 1, 2], np.float32)
    groups = ranking.groups_from_sizes([3, 3], 6)
    groups.weight = np.array([2.0, 1.0], np.float32)
    second = (3.0 / np.log2(2) + 1.0 / np.log2(4)) / (3.0 / np.log2(2) + 1.0 / np.log2(3))
    assert evaluate("ndcg", np, y, pred, groups=groups) == pytest.approx((2.0 * 1.0 + second) / 3.0, rel=1e-12)
    assert _xgb_metric(xgb, "ndcg", y, pred, [3, 3], groups.weight) == pytest.approx((1.0 + second) / 3.0, rel=1e-12)
    # The "-" form scores such a query 0: there both agree.
    assert evaluate("ndcg-", np, y, pred, groups=groups) == pytest.approx(second / 3.0, rel=1e-12)
    assert _xgb_metric(xgb, "ndcg-", y, pred, [3, 3], groups.weight) == pytest.approx(second / 3.0, rel=1e-12)


def test_ranking_metrics_on_other_objectives_and_early_stopping(xgb):
    X, y, qid, _ = make(seed=6)
    Xv, yv, qv, _ = make(seed=7, n_queries=15)
    params = {"objective": "reg:squarederror", "eval_metric": ["rmse", "ndcg@5-"], "max_depth": 3, "eta": 0.3}
    dm, dv = xgb.DMatrix(X, y, qid=qid), xgb.DMatrix(Xv, yv, qid=qv)
    rx, ro = {}, {}
    xgb.train({**params, "tree_method": "hist", "nthread": 1}, dm, 30, evals=[(dv, "v")], evals_result=rx,
              verbose_eval=False, early_stopping_rounds=3)
    m = daskgb.QuantileMatrix(X, y, qid=qid)
    b = daskgb.train({**params, "device": "cpu"}, m, 30, evals=[(daskgb.QuantileMatrix(Xv, yv, qid=qv, ref=m), "v")],
                     evals_result=ro, verbose_eval=False, early_stopping_rounds=3)
    # ndcg@5- is maximised (XGBoost matches metric names by prefix), so both stop at the same round.
    np.testing.assert_allclose(ro["v"]["ndcg@5-"], rx["v"]["ndcg@5-"], rtol=1e-6)
    assert b.num_boosted_rounds() == len(rx["v"]["rmse"])


# --------------------------------------------------------------------------- bad input


def test_bad_query_ids_and_groups_fail_early():
    X, y, qid, sizes = make(seed=8, n_queries=5)
    with pytest.raises(ValueError, match="non-decreasing"):
        daskgb.QuantileMatrix(X, y, qid=qid[::-1])
    with pytest.raises(ValueError, match="non-negative"):
        daskgb.QuantileMatrix(X, y, qid=qid - 100)
    with pytest.raises(ValueError, match="integer query ids"):
        daskgb.QuantileMatrix(X, y, qid=qid + 0.5)
    with pytest.raises(ValueError, match="qid has"):
        daskgb.QuantileMatrix(X, y, qid=qid[1:])
    with pytest.raises(ValueError, match="sum to"):
        daskgb.QuantileMatrix(X, y, group=np.append(sizes, 1))
    with pytest.raises(ValueError, match="non-negative"):
        daskgb.QuantileMatrix(X, y, group=np.append(sizes, [-1, 1]))
    with pytest.raises(ValueError, match="one of qid= and group="):
        daskgb.QuantileMatrix(X, y, qid=qid, group=sizes)
    with pytest.raises(ValueError, match="per query group"):
        daskgb.QuantileMatrix(X, y, qid=qid, weight=np.ones(y.size))
    with pytest.raises(ValueError, match="NaN or infinite"):
        daskgb.QuantileMatrix(X, y, qid=qid, weight=np.full(sizes.size, np.nan))
    with pytest.raises(ValueError, match="per query group"):  # no groups: XGBoost takes no weights either
        daskgb.train({"objective": "rank:ndcg", "device": "cpu"}, daskgb.QuantileMatrix(X, y, weight=np.ones(y.size)),
                     1)


def test_bad_labels_and_parameters_fail_before_training():
    X, y, qid, _ = make(seed=9, n_queries=6)
    m = daskgb.QuantileMatrix(X, y + 0.5, qid=qid)
    with pytest.raises(ValueError, match="relevance degrees"):
        daskgb.train({"objective": "rank:ndcg", "device": "cpu"}, m, 1)
    with pytest.raises(ValueError, match="<= 31"):
        daskgb.train({"objective": "rank:ndcg", "device": "cpu"}, daskgb.QuantileMatrix(X, y * 10, qid=qid), 1)
    with pytest.raises(ValueError, match="binary"):
        daskgb.train({"objective": "rank:map", "device": "cpu"}, daskgb.QuantileMatrix(X, y, qid=qid), 1)
    # Fractional labels train with linear gains, but the default metric ndcg@32 cannot score them.
    daskgb.train({"objective": "rank:ndcg", "ndcg_exp_gain": False, "device": "cpu"}, m, 1)
    with pytest.raises(ValueError, match="eval_metric 'ndcg@32'"):
        daskgb.train({"objective": "rank:pairwise", "device": "cpu"}, m, 1, evals=[(m, "t")])
    with pytest.raises(ValueError, match="eval_metric 'map@2'"):
        graded = daskgb.QuantileMatrix(X, y, qid=qid)
        daskgb.train({"objective": "rank:ndcg", "eval_metric": "map@2", "device": "cpu"}, graded, 1,
                     evals=[(graded, "t")])
    with pytest.raises(ValueError, match="'auc' on data with query groups"):
        graded = daskgb.QuantileMatrix(X, y, qid=qid)
        daskgb.train({"objective": "rank:ndcg", "eval_metric": "auc", "device": "cpu"}, graded, 1,
                     evals=[(graded, "t")])
    for bad, match in [({"lambdarank_pair_method": "random"}, "lambdarank_pair_method"),
                       ({"lambdarank_num_pair_per_sample": 0}, "lambdarank_num_pair_per_sample"),
                       ({"lambdarank_unbiased": True}, "not supported"),
                       ({"ndcg_exp_gain": "yes"}, "ndcg_exp_gain"),
                       ({"lambdarank_bias_norm": -1}, "lambdarank_bias_norm"),
                       ({"eval_metric": "ndcg@0"}, "cut-off"),
                       ({"eval_metric": "ndcg@x"}, "eval_metric")]:
        with pytest.raises(ValueError, match=match):
            daskgb.train({"objective": "rank:ndcg", "device": "cpu", **bad}, daskgb.QuantileMatrix(X, y, qid=qid), 1)


# --------------------------------------------------------------------------- GBRanker


def test_gbranker_equals_xgbranker(xgb):
    X, y, qid, _ = make(seed=10, n_queries=50)
    Xv, yv, qv, sv = make(seed=11, n_queries=15)
    ours = daskgb.GBRanker(n_estimators=8, max_depth=4, device="cpu")
    theirs = xgb.XGBRanker(n_estimators=8, max_depth=4, tree_method="hist", n_jobs=1)
    assert ours.fit(X, y, qid=qid, eval_set=[(Xv, yv)], eval_qid=[qv]) is ours
    theirs.fit(X, y, qid=qid, eval_set=[(Xv, yv)], eval_qid=[qv])
    np.testing.assert_allclose(ours.predict(Xv), theirs.predict(Xv), atol=1e-5)
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["ndcg@32"],
                               theirs.evals_result()["validation_0"]["ndcg@32"], rtol=1e-6)
    df = pd.DataFrame(Xv, columns=[f"f{i}" for i in range(Xv.shape[1])]).assign(qid=qv)
    assert ours.score(df, yv) == pytest.approx(theirs.score(df, yv), rel=1e-6)
    # group sizes, per-group weights and a qid column give the same model as XGBRanker's
    w = np.random.default_rng(0).uniform(0.5, 2, sv.size).astype(np.float32)
    ours.set_params(objective="rank:pairwise", eval_metric=["ndcg@3", "ndcg@5-"])
    theirs.set_params(objective="rank:pairwise", eval_metric=["ndcg@3", "ndcg@5-"])
    ours.fit(df, yv, sample_weight=w)
    theirs.fit(df, yv, sample_weight=w)
    assert list(ours.feature_names_in_) == [f"f{i}" for i in range(Xv.shape[1])]
    np.testing.assert_allclose(ours.predict(df), theirs.predict(df), atol=1e-5)
    assert ours.score(df, yv) == pytest.approx(theirs.score(df, yv), rel=1e-6)


def test_gbranker_protocol_and_errors():
    from sklearn.base import clone

    X, y, qid, sizes = make(seed=12, n_queries=8)
    model = daskgb.GBRanker(n_estimators=3, lambdarank_pair_method="mean", device="cpu")
    twin = clone(model)
    assert twin.get_params()["lambdarank_pair_method"] == "mean"
    np.testing.assert_array_equal(model.fit(X, y, group=sizes).predict(X), twin.fit(X, y, qid=qid).predict(X))
    # Without query groups the rows are one query (scikit-learn's fit(X, y)).
    one = daskgb.GBRanker(n_estimators=3, device="cpu")
    np.testing.assert_array_equal(one.fit(X, y).predict(X), clone(one).fit(X, y, group=[len(X)]).predict(X))
    wrong = daskgb.GBRanker(objective="reg:squarederror")  # stored; checked by fit, as scikit-learn asks
    with pytest.raises(ValueError, match="ranking objective"):
        wrong.fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="eval_set\\[0\\] has no query groups. Either `group` or `qid`"):
        daskgb.GBRanker(n_estimators=1, device="cpu").fit(X, y, qid=qid, eval_set=[(X, y)])
    with pytest.raises(ValueError, match="eval_qid has 2 entries"):
        daskgb.GBRanker(n_estimators=1, device="cpu").fit(X, y, qid=qid, eval_set=[(X, y)], eval_qid=[qid, qid])


# --------------------------------------------------------------------------- the CUDA path


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["pairwise", "ndcg", "map"])
@pytest.mark.parametrize("pair_method", ["topk", "mean"])
def test_cupy_gradient_and_metrics_equal_numpy(kind, pair_method):
    import cupy as cp

    sizes, y, pred, w = _ranking_data(3, kind == "map")
    X = np.zeros((y.size, 1), np.float32)
    host = daskgb.QuantileMatrix(X, y, group=sizes, weight=w, device="cpu")
    dev = daskgb.QuantileMatrix(cp.asarray(X), cp.asarray(y), group=sizes, weight=cp.asarray(w), device="cuda")
    results = []
    for xp, m in ((np, host), (cp, dev)):
        obj = ranking.RANKING_OBJECTIVES[f"rank:{kind}"](pair_method, 2)
        obj.prepare(xp, m, None)
        results.append(daskgb.arrays.to_host(obj.gradient_of(xp, xp.asarray(pred), m, 1)))
        metric = "map@4" if kind == "map" else "ndcg@4"
        results.append(evaluate(metric, xp, m.label, xp.asarray(pred), groups=m.groups))
    np.testing.assert_allclose(results[0], results[2], rtol=1e-6, atol=1e-9)
    assert results[1] == pytest.approx(results[3], rel=1e-12)


def test_unsuffixed_metric_names_are_cut_at_32_as_in_xgboost(xgb):
    # XGBoost 3.2 reads "ndcg", "map" and "pre" as @32, except that the default metric of
    # rank:ndcg / rank:pairwise under the mean method ("ndcg") scores whole lists.
    rng = np.random.default_rng(13)
    sizes = np.array([60, 45, 10])
    y = (rng.random(sizes.sum()) < 0.3).astype(np.float32)
    pred = rng.normal(size=sizes.sum()).astype(np.float32)
    groups = ranking.groups_from_sizes(sizes, sizes.sum())
    for name in ("ndcg", "map", "pre"):
        expected = _xgb_metric(xgb, name, y, pred, sizes)
        assert evaluate(name, np, y, pred, groups=groups) == pytest.approx(expected, rel=1e-12)
        assert evaluate(f"{name}@32", np, y, pred, groups=groups) == pytest.approx(expected, rel=1e-12)
        assert evaluate(name, np, y, pred, groups=groups, rank_default_k=None) != pytest.approx(expected)
    X = np.zeros((y.size, 1), np.float32)
    for objective in ("rank:ndcg", "rank:pairwise", "rank:map"):
        params = {"objective": objective, "lambdarank_pair_method": "mean", "base_score": 0.0}
        d = xgb.DMatrix(X, y, group=sizes, base_margin=pred)
        expected = float(xgb.train(params, d, 0).eval(d).split(":")[1])
        m = daskgb.QuantileMatrix(X, y, group=sizes, base_margin=pred)
        res = {}
        daskgb.train({**params, "eta": 1e-30, "device": "cpu"}, m, 1, evals=[(m, "t")], evals_result=res,
                     verbose_eval=False)
        assert res["t"][objective.replace("rank:pairwise", "rank:ndcg")[5:]][0] == pytest.approx(expected, rel=1e-9)


def test_a_rankers_callable_metric_is_averaged_over_query_groups_as_xgbranker(xgb):
    """XGBRanker scores a callable eval_metric query by query (a query of one row: 1.0) and
    averages the scores weighted by the queries' sizes."""
    X, y, qid, _ = make(seed=12, n_queries=20)
    Xv, yv, qv, _ = make(seed=13, n_queries=9)
    qv = np.concatenate([qv, [qv.max() + 1]])  # a query of one row
    Xv, yv = np.concatenate([Xv, Xv[:1]]), np.concatenate([yv, yv[:1]])

    def top_relevance(y_true, y_score):
        return float(y_true[np.argmax(y_score)])

    ours = daskgb.GBRanker(n_estimators=4, max_depth=3, device="cpu", eval_metric=top_relevance)
    theirs = xgb.XGBRanker(n_estimators=4, max_depth=3, tree_method="hist", eval_metric=top_relevance)
    ours.fit(X, y, qid=qid, eval_set=[(Xv, yv)], eval_qid=[qv])
    theirs.fit(X, y, qid=qid, eval_set=[(Xv, yv)], eval_qid=[qv])
    np.testing.assert_allclose(ours.evals_result()["validation_0"]["top_relevance"],
                               theirs.evals_result()["validation_0"]["top_relevance"], rtol=1e-6)
    frame = pd.DataFrame(Xv, columns=[f"f{i}" for i in range(Xv.shape[1])]).assign(qid=qv)
    assert ours.score(frame, yv) == pytest.approx(theirs.score(frame, yv), rel=1e-6)  # score: the callable's too
    assert ours.score(frame, yv) == pytest.approx(ours.evals_result()["validation_0"]["top_relevance"][-1])
