"""The daskgb command (daskgb/cli.py): train on a parquet folder or CSV files on a LocalCluster,
predict to parquet."""

from __future__ import annotations

import re
import shutil

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


# --------------------------------------------------------------------------- the user's files are safe
@pytest.fixture
def trained(table, tmp_path_factory):
    """A model of the table (trained once for the tests below)."""
    root, _ = table
    model = tmp_path_factory.mktemp("model") / "model.json"
    main(["train", "--data", str(root / "parquet"), "--label", "y", "--features", *FEATURES, "--rounds", "2",
          "--workers", "1", "--quiet", "-o", str(model)])
    return model


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _no_training(monkeypatch):
    """Fail the test if a command gets as far as training or predicting."""
    import daskgb.dask as dgb

    def refuse(*a, **k):
        raise AssertionError("the command did work before checking its paths")

    monkeypatch.setattr(dgb, "train", refuse)
    monkeypatch.setattr(daskgb.Booster, "load_model", refuse)


def test_predict_never_writes_over_its_input(table, trained, tmp_path, monkeypatch):
    root, _ = table
    data = tmp_path / "data"
    shutil.copytree(root / "parquet", data)
    before = _snapshot(data)
    _no_training(monkeypatch)
    for output, flags in ((data, []), (data, ["--overwrite"]), (data / "predictions", ["--overwrite"]),
                          (data / "part-0.parquet", ["--overwrite"])):
        with pytest.raises(SystemExit, match="is \\(or holds, or lies in\\) the data this command reads"):
            main(["predict", "--model", str(trained), "--data", str(data), "--drop", "y", "--output", str(output),
                  "--workers", "1", *flags])
    assert _snapshot(data) == before


def test_predict_into_a_folder_that_is_not_empty_needs_overwrite(table, trained, tmp_path):
    root, rows = table
    out = tmp_path / "pred"
    out.mkdir()
    stale = pd.DataFrame({"other": np.arange(3000)})
    stale.to_parquet(out / "part.9.parquet")
    args = ["predict", "--model", str(trained), "--data", str(root / "parquet"), "--drop", "y", "--keep", "id",
            "--output", str(out), "--workers", "1"]
    with pytest.raises(SystemExit, match="exists and is not an empty folder; pass --overwrite"):
        main(args)
    assert _snapshot(out) == {"part.9.parquet": (out / "part.9.parquet").read_bytes()}
    main(args + ["--overwrite"])
    pred = pd.read_parquet(out)  # the whole folder replaced: no stale part beside the new ones
    assert len(pred) == len(rows) and list(pred.columns) == ["id", "prediction"]


def test_train_checks_its_model_path_before_training(table, tmp_path, monkeypatch):
    root, _ = table
    args = ["train", "--data", str(root / "parquet"), "--label", "y", "--rounds", "2", "--workers", "1", "--quiet"]
    existing = tmp_path / "model.json"
    existing.write_text("the user's file")
    _no_training(monkeypatch)
    with pytest.raises(SystemExit, match=r"the folder of the output .*missing.*model\.json does not exist"):
        main(args + ["-o", str(tmp_path / "missing" / "model.json")])
    with pytest.raises(SystemExit, match="model.json exists; pass --overwrite to replace it"):
        main(args + ["-o", str(existing)])
    with pytest.raises(SystemExit, match="is data this command reads"):
        main(args + ["-o", str(root / "parquet" / "part-0.parquet"), "--overwrite"])
    assert existing.read_text() == "the user's file"
    monkeypatch.undo()
    main(args + ["-o", str(existing), "--overwrite"])
    assert daskgb.Booster().load_model(existing).num_boosted_rounds() == 2


def test_a_users_mistake_in_a_path_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for data, message in ((tmp_path / "nowhere", "does not exist"), (tmp_path / "empty", "holds no parquet files"),
                          (tmp_path / "*.parquet", "no files match")):
        with pytest.raises(SystemExit, match=message) as info:
            main(["train", "--data", str(data), "--label", "y", "-o", str(tmp_path / "m.json")])
        assert str(info.value).startswith("daskgb: ") and "\n" not in str(info.value)
    with pytest.raises(SystemExit, match="the model .* does not exist"):
        main(["predict", "--model", str(tmp_path / "no.json"), "--data", str(tmp_path / "empty"), "--output",
              str(tmp_path / "out")])
