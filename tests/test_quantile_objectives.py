"""reg:absoluteerror, reg:quantileerror and the quantile and aucpr metrics against xgboost `hist` (exact cuts).

Predictions must agree to 1e-5 and every round's metric to 1e-5 relative, with and without
weights, over several alphas and depths: the leaf refresh (each leaf set to the alpha-quantile of
its rows' residuals) and the intercept (the labels' quantile) are XGBoost's to the bit.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import daskgb

xgb = pytest.importorskip("xgboost")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def make(seed=0, n=600, ties=False):
    rng = np.random.default_rng(seed)
    X = (np.round(rng.normal(size=(n, 5)) * 4) / 4).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    Z = np.nan_to_num(X)
    y = 2 * Z[:, 0] - Z[:, 1] ** 2 + rng.standard_t(2, n)
    if ties:
        y = np.round(y)
    return X, y.astype(np.float32), rng.uniform(0.5, 2, n).astype(np.float32)


def xgb_base_score(booster) -> float:
    return float(json.loads(booster.save_config())["learner"]["learner_model_param"]["base_score"].strip("[]"))


CASES = [("reg:absoluteerror", None)] + [("reg:quantileerror", a) for a in (0.1, 0.5, 0.9)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("objective,alpha", CASES)
def test_parity_with_xgboost(objective, alpha, device):
    failures = []
    for depth, lam, weighted, ties in itertools.product([2, 6], [1.0, 5.0], [False, True], [False, True]):
        X, y, w = make(depth * 10 + int(lam) + 3 * ties, ties=ties)
        params = dict(objective=objective, max_depth=depth, reg_lambda=lam, eta=0.3)
        if alpha is not None:
            params["quantile_alpha"] = alpha
        weight = w if weighted else None
        dm = xgb.DMatrix(X, y, weight=weight)
        rx, ro = {}, {}
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dm, 20, evals=[(dm, "t")],
                       evals_result=rx, verbose_eval=False)
        m = daskgb.QuantileMatrix(X, y, weight=weight)
        bo = daskgb.train({**params, "device": device}, m, 20, evals=[(m, "t")], evals_result=ro,
                          verbose_eval=False)
        label = f"depth={depth} lambda={lam} weighted={weighted} ties={ties}"
        if np.float32(bo.base_score) != np.float32(xgb_base_score(bx)):
            failures.append(f"{label}: base_score {bo.base_score!r} vs {xgb_base_score(bx)!r}")
        diff = float(np.max(np.abs(bx.predict(xgb.DMatrix(X), output_margin=True) - bo.predict(X, output_margin=True))))
        if diff > 1e-5:
            failures.append(f"{label}: max |margin diff| {diff:.3e}")
        metric = next(iter(rx["t"]))
        if metric not in ro["t"]:
            failures.append(f"{label}: default metric {metric!r} not reported (got {list(ro['t'])})")
        else:
            np.testing.assert_allclose(ro["t"][metric], rx["t"][metric], rtol=1e-5, err_msg=label)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("objective", ["reg:absoluteerror", "reg:quantileerror"])
def test_default_base_score_is_xgboosts_on_small_data(objective):
    # Few rows make every branch of XGBoost's quantile definitions show: the ends, interpolation
    # between neighbours, ties, zero weights, and the float round trip of the weighted median.
    rng = np.random.default_rng(5)
    mismatches = []
    for trial in range(40):
        n = int(rng.integers(1, 25))
        X = rng.normal(size=(n, 1)).astype(np.float32)
        y = np.round(rng.normal(size=n) * 3, 1).astype(np.float32)
        w = [None, rng.uniform(0.1, 2, n), rng.integers(0, 4, n)][trial % 3]
        if w is not None:
            w = w.astype(np.float32)
            w[0] = max(w[0], 1.0)
        params = {"objective": objective}
        if objective == "reg:quantileerror":
            params["quantile_alpha"] = float(rng.choice([0.0, 0.05, 0.3, 0.5, 0.75, 1.0]))
        expected = xgb_base_score(xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, weight=w), 1))
        ours = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y, weight=w), 1,
                            verbose_eval=False).base_score
        if np.float32(ours) != np.float32(expected):
            mismatches.append((n, params, w is not None, ours, expected))
    assert not mismatches, mismatches


def test_parity_across_regularisation_zero_weights_and_base_margin():
    # reg_lambda stays > 0: at 0, a node whose rows all have one gradient sign has split gains of
    # exactly 0 in exact arithmetic, and the float rounding of the sums (accumulated in another
    # order by XGBoost) decides whether a gain clears 1e-6 (see test_parity_xgboost.py). Zero
    # weights with alpha 0 check that zero-hessian rows take no part in the leaf quantile.
    rng = np.random.default_rng(11)
    failures = []
    for trial in range(16):
        n = int(rng.integers(60, 500))
        X = (np.round(rng.normal(size=(n, 4)) * 3) / 3).astype(np.float32)
        y = (2 * X[:, 0] + rng.standard_cauchy(n) * 0.3).astype(np.float32)
        w = [None, rng.integers(0, 4, n).astype(np.float32), rng.uniform(0, 3, n).astype(np.float32)][trial % 3]
        margin0 = rng.normal(size=n).astype(np.float32) if trial % 4 == 1 else None
        params = dict(objective=["reg:absoluteerror", "reg:quantileerror"][trial % 2], max_depth=int(rng.integers(1, 9)),
                      eta=float(rng.choice([0.1, 1.0])), reg_lambda=float(rng.choice([0.5, 1.0])),
                      reg_alpha=float(rng.choice([0.0, 0.5])), min_child_weight=float(rng.choice([0.0, 3.0])),
                      gamma=float(rng.choice([0.0, 0.1])))
        alpha = float(rng.choice([0.0, 0.2, 0.8, 1.0]))
        if params["objective"] == "reg:quantileerror":
            params["quantile_alpha"] = alpha
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1},
                       xgb.DMatrix(X, y, weight=w, base_margin=margin0), 10)
        bo = daskgb.train({**params, "device": "cpu"}, daskgb.QuantileMatrix(X, y, weight=w, base_margin=margin0), 10,
                          verbose_eval=False)
        diff = np.max(np.abs(bx.predict(xgb.DMatrix(X, base_margin=margin0), output_margin=True)
                             - bo.predict(X, output_margin=True, base_margin=margin0)))
        if diff > 1e-5:
            failures.append(f"{params} weights={trial % 3}: {diff:.3e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("device", DEVICES)
def test_several_alphas_give_one_output_each_as_xgboost(device, tmp_path):
    # quantile_alpha=[a1, ..., aK]: K outputs, one tree per alpha per round, K intercepts.
    X, y, w = make(13)
    for weight, alphas in ((None, [0.1, 0.5, 0.9]), (w, [0.9, 0.05])):
        params = {"objective": "reg:quantileerror", "quantile_alpha": alphas, "max_depth": 4}
        dm = xgb.DMatrix(X, y, weight=weight)
        rx, ro = {}, {}
        bx = xgb.train({**params, "tree_method": "hist", "nthread": 1}, dm, 10, evals=[(dm, "t")], evals_result=rx,
                       verbose_eval=False)
        m = daskgb.QuantileMatrix(X, y, weight=weight)
        bo = daskgb.train({**params, "device": device}, m, 10, evals=[(m, "t")], evals_result=ro, verbose_eval=False)
        expected_base = json.loads(bx.save_config())["learner"]["learner_model_param"]["base_score"]
        np.testing.assert_array_equal(np.float32(bo.base_score),
                                      np.float32([float(v) for v in expected_base.strip("[]").split(",")]))
        assert bo.num_boosted_rounds() == 10 and len(bo.trees) == 10 * len(alphas)
        for rounds in ((0, 0), (2, 7)):
            px = bx.predict(xgb.DMatrix(X), output_margin=True, iteration_range=rounds)
            po = bo.predict(X, output_margin=True, iteration_range=rounds)
            assert po.shape == (X.shape[0], len(alphas))
            np.testing.assert_allclose(po, px, atol=1e-5)
        np.testing.assert_allclose(ro["t"]["quantile"], rx["t"]["quantile"], rtol=1e-6)
        bo.save_model(tmp_path / "multi.json")
        np.testing.assert_array_equal(daskgb.Booster().load_model(tmp_path / "multi.json").predict(X), bo.predict(X))


def test_quantile_and_aucpr_metrics_match_xgboost():
    X, y, w = make(7)
    yb = (y > 0.5).astype(np.float32)
    for weight in (None, w):
        for params, labels in (
            ({"objective": "reg:squarederror", "eval_metric": ["quantile", "mae"], "quantile_alpha": 0.3}, y),
            ({"objective": "reg:absoluteerror", "eval_metric": "quantile", "quantile_alpha": 0.85}, y),
            ({"objective": "binary:logistic", "eval_metric": ["aucpr", "auc"]}, yb),
        ):
            params = {**params, "max_depth": 3, "base_score": 0.5}
            dm = xgb.DMatrix(X, labels, weight=weight)
            rx, ro = {}, {}
            xgb.train({**params, "tree_method": "hist", "nthread": 1}, dm, 8, evals=[(dm, "t")], evals_result=rx,
                      verbose_eval=False)
            m = daskgb.QuantileMatrix(X, labels, weight=weight)
            daskgb.train({**params, "device": "cpu"}, m, 8, evals=[(m, "t")], evals_result=ro, verbose_eval=False)
            for metric in rx["t"]:
                np.testing.assert_allclose(ro["t"][metric], rx["t"][metric], rtol=1e-9 if metric == "aucpr" else 1e-6,
                                           err_msg=f"{metric} weighted={weight is not None}")


def test_aucpr_of_hand_computed_cases():
    from daskgb.metric import aucpr_of

    # Perfect ranking: precision 1 at every recall.
    assert aucpr_of([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]) == pytest.approx(1.0)
    # All predictions tied: one segment from (recall 0) to (recall 1, precision 1/2), interpolated
    # non-linearly: (1 - b/a log((a + b)/b)) / a with h = 1, a = 2, b = 0 -> 1/2.
    assert aucpr_of([1, 0], [0.5, 0.5]) == pytest.approx(0.5)
    assert np.isnan(aucpr_of([1, 1], [0.2, 0.3]))
    assert np.isnan(aucpr_of([0, 0], [0.2, 0.3]))


def test_quantile_alpha_and_metric_errors_are_early_and_clear():
    X, y, _ = make()
    m = daskgb.QuantileMatrix(X, y)
    with pytest.raises(ValueError, match="quantile_alpha"):
        daskgb.train({"objective": "reg:quantileerror"}, m, 1)
    with pytest.raises(ValueError, match=r"quantile_alpha must be in \[0, 1\]"):
        daskgb.train({"objective": "reg:quantileerror", "quantile_alpha": 1.5}, m, 1)
    with pytest.raises(ValueError, match="quantile_alpha must be >= 0"):
        daskgb.train({"objective": "reg:quantileerror", "quantile_alpha": -0.1}, m, 1)
    with pytest.raises(ValueError, match="quantile_alpha is empty"):
        daskgb.train({"objective": "reg:quantileerror", "quantile_alpha": []}, m, 1)
    with pytest.raises(ValueError, match=r"quantile_alpha must be in \[0, 1\], got 2.0"):
        daskgb.train({"objective": "reg:quantileerror", "quantile_alpha": [0.5, 2.0]}, m, 1)
    with pytest.raises(ValueError, match="eval_metric 'quantile'"):
        daskgb.train({"objective": "reg:squarederror", "eval_metric": "quantile"}, m, 1)
    with pytest.raises(ValueError, match="2 quantile_alpha value"):
        daskgb.train({"objective": "reg:squarederror", "eval_metric": "quantile", "quantile_alpha": [0.1, 0.9]}, m, 1)
    with pytest.raises(ValueError, match="takes 'quantile'"):
        daskgb.train({"objective": "reg:quantileerror", "eval_metric": "mae", "quantile_alpha": [0.1, 0.9]}, m, 1)
    # A list of one alpha is one alpha, as in XGBoost.
    a = daskgb.train({"objective": "reg:quantileerror", "quantile_alpha": [0.3], "device": "cpu"}, m, 3,
                     verbose_eval=False)
    b = daskgb.train({"objective": "reg:quantileerror", "quantile_alpha": 0.3, "device": "cpu"}, m, 3,
                     verbose_eval=False)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_regressor_fits_quantiles_and_custom_objective_skips_the_refresh(tmp_path):
    X, y, _ = make(9, n=2000)
    lo = daskgb.GBRegressor(objective="reg:quantileerror", quantile_alpha=0.1, n_estimators=30, max_depth=3,
                            device="cpu").fit(X, y)
    hi = daskgb.GBRegressor(objective="reg:quantileerror", quantile_alpha=0.9, n_estimators=30, max_depth=3,
                            device="cpu").fit(X, y)
    below_lo, below_hi = np.mean(y < lo.predict(X)), np.mean(y < hi.predict(X))
    assert 0.05 < below_lo < 0.15 and 0.85 < below_hi < 0.95, (below_lo, below_hi)
    hi.get_booster().save_model(tmp_path / "q.json")
    loaded = daskgb.Booster().load_model(tmp_path / "q.json")
    np.testing.assert_array_equal(loaded.predict(X), hi.predict(X))
    # With obj= the user's gradients decide; XGBoost refits no leaves then, and neither do we.
    m = daskgb.QuantileMatrix(X, y)
    b = daskgb.train({"objective": "reg:absoluteerror", "base_score": 0.0, "device": "cpu", "max_depth": 2}, m, 1,
                     obj=lambda p, d: (np.sign(p - d.get_label()), np.ones_like(p)), verbose_eval=False)
    leaves = b.trees[0].is_leaf
    np.testing.assert_allclose(b.trees[0].value[leaves], b.trees[0].base_weight[leaves] * np.float32(0.3), rtol=1e-6)
