"""The daskgb command (daskgb/cli.py): train on a parquet folder or CSV files on a LocalCluster,
predict to parquet."""

from __future__ import annotations

import re

import numpy as np
import pytest

import daskgb
from daskgb.cli import _parser, main

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("distributed")

FEATURES = [f"f{j}" for j in range(5)]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A parquet folder of three files and the same rows as CSV files."""
    root = tmp_path_factory.mktemp("data")
    (root / "parquet").mkdir()
    (root / "csv").mkdir()
    rng = np.random.default_rng(0)
    frames = []
    for i in range(3):
        X = rng.normal(size=(700, 5)).astype(np.float32)
        X[rng.random(X.shape) < 0.05] = np.nan
        df = pd.DataFrame(X, columns=FEATURES)
        df["y"] = rng.integers(0, 3, 700).astype(np.float32) * (np.nan_to_num(X[:, 0]) > -0.5)
        df["id"] = np.arange(700) + 700 * i
        df.to_parquet(root / "parquet" / f"part-{i}.parquet")
        df.to_csv(root / "csv" / f"part-{i}.csv", index=False)
        frames.append(df)
    return root, pd.concat(frames, ignore_index=True)


def test_help_documents_every_option(capsys):
    for command in ("train", "predict"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        sub = _parser()._subparsers._group_actions[0].choices[command]
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text
            assert action.help, f"{command} {action.option_strings} has no help"


def test_train_then_predict_on_a_local_cluster(table, tmp_path, capsys):
    root, rows = table
    model = tmp_path / "model.json"
    main(["train", "--data", str(root / "parquet"), "--label", "y", "--features", *FEATURES, "--objective",
          "multi:softprob", "--set", "num_class=3", "--rounds", "8", "--max-depth", "4", "--workers", "2",
          "-o", str(model)])
    err = capsys.readouterr().err
    assert re.search(r"\[7\]\ttrain-mlogloss:\d\.\d{5}", err) and "8/8" in err  # the eval log and the bar
    booster = daskgb.Booster().load_model(model)
    assert booster.num_boosted_rounds() == 8 and booster.feature_names == FEATURES
    out = tmp_path / "pred"
    main(["predict", "--model", str(model), "--data", str(root / "parquet"), "--drop", "y", "--keep", "id",
          "--output", str(out), "--workers", "2"])
    pred = pd.read_parquet(out).sort_values("id")
    assert list(pred.columns) == ["id", "prediction_0", "prediction_1", "prediction_2"]
    expected = booster.predict(rows.sort_values("id")[FEATURES].to_numpy(np.float32))
    np.testing.assert_allclose(pred[["prediction_0", "prediction_1", "prediction_2"]].to_numpy(), expected,
                               rtol=1e-6, atol=1e-7)


def test_csv_input_eval_data_and_xgboost_output(table, tmp_path, capsys):
    xgb = pytest.importorskip("xgboost")
    root, rows = table
    model = tmp_path / "xgb.json"
    main(["train", "--data", str(root / "csv" / "*.csv"), "--eval-data", str(root / "csv" / "part-0.csv"),
          "--label", "y", "--features", *FEATURES, "--rounds", "5", "--eval-metric", "rmse", "mae",
          "--model-format", "xgboost", "--workers", "2", "--quiet", "-o", str(model)])
    assert capsys.readouterr().err == ""  # --quiet
    X = rows[FEATURES].to_numpy(np.float32)
    ours = daskgb.Booster().load_model(model).predict(X)
    theirs = xgb.Booster(model_file=str(model)).predict(xgb.DMatrix(X, feature_names=FEATURES))
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-6)


def test_bad_columns_are_named(table, tmp_path):
    root, _ = table
    with pytest.raises(SystemExit, match=r"columns \['label'\] not among the data's columns"):
        main(["train", "--data", str(root / "parquet"), "--label", "label", "--workers", "1"])
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        main(["train", "--data", str(root / "parquet"), "--label", "y", "--set", "max_depth"])
