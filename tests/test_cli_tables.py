"""The daskgb command on a person's own parquet, written by pandas: string columns (categorical
features), a row id, NaNs and nullable integers, a column subset; run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import daskgb
from daskgb.cli import main

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("distributed")

NUMERIC = [f"f{j}" for j in range(8)]
CITIES = ["lima", "oslo", "paris", "rome"]
EFFECT = {"lima": -2.0, "oslo": 1.5, "paris": 0.0, "rome": 3.0}


def _frame(rng, n: int, first_id: int, cities) -> "pd.DataFrame":
    df = pd.DataFrame(rng.normal(size=(n, len(NUMERIC))).astype(np.float32), columns=NUMERIC)
    df.loc[rng.random(n) < 0.1, "f1"] = np.nan
    city = rng.choice(cities, n).astype(object)
    city[rng.random(n) < 0.05] = None  # a missing string
    df["city"] = pd.array(city, dtype="string")
    visits = pd.array(rng.integers(0, 5, n), dtype="Int64")  # a nullable integer, with missing entries
    visits[rng.random(n) < 0.1] = pd.NA
    df["visits"] = visits
    df["id"] = np.arange(first_id, first_id + n, dtype=np.int64)
    df["when"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(n), unit="min")
    effect = pd.Series(city).map(EFFECT).fillna(0.0).to_numpy()
    df["y"] = (effect + df["f0"].to_numpy() + rng.normal(scale=0.1, size=n)).astype(np.float32)
    return df


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A parquet folder of three files, as pandas writes them; 'lima' only in the last file
    (so a file's own categories are not the column's). And an eval file."""
    root = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(1)
    data = root / "train"
    data.mkdir()
    frames = []
    for i in range(3):
        df = _frame(rng, 1500, 1500 * i, CITIES if i == 2 else CITIES[1:])
        df.to_parquet(data / f"part-{i}.parquet")
        frames.append(df)
    (root / "eval").mkdir()
    _frame(rng, 800, 10**6, CITIES).to_parquet(root / "eval" / "part-0.parquet")
    return root, pd.concat(frames, ignore_index=True)


def _run(args):
    """The command as a user runs it: python -m daskgb in a fresh process (this checkout's daskgb)."""
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "daskgb", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_the_base_install_reads_tables():
    """The command is installed by `pip install .`: what it reads tables with comes with it."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    from pathlib import Path

    from packaging.requirements import Requirement

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text())["project"]
    assert project["scripts"]["daskgb"] == "daskgb.cli:main"
    assert {"pandas", "pyarrow"} <= {Requirement(d).name for d in project["dependencies"]}


def test_a_missing_table_reader_is_one_line(monkeypatch, tmp_path):
    (tmp_path / "t.csv").write_text("x,y\n1,2\n")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # its import fails, as where it is not installed
    with pytest.raises(SystemExit, match=r"^daskgb: the command reads tables with pyarrow, which this Python "
                                         r"lacks: pip install pyarrow"):
        main(["train", "--data", str(tmp_path / "t.csv"), "--label", "y", "-o", str(tmp_path / "m.json")])


def test_string_column_feature_subset_and_id(folder, tmp_path):
    root, rows = folder
    model = tmp_path / "model.json"
    # --features picks a subset of the columns (it once lost the persisted data: 'lost dependencies').
    run = _run(["train", "--data", str(root / "train"), "--label", "y", "--features", *NUMERIC, "city", "visits",
                "--eval-data", str(root / "eval"), "--rounds", "20", "--workers", "2", "--quiet", "-o", str(model)])
    assert run.returncode == 0, run.stderr
    booster = daskgb.Booster().load_model(model)
    assert booster.feature_names == [*NUMERIC, "city", "visits"]
    assert booster.feature_types == ["q"] * 8 + ["c", "q"]
    assert booster.categories == {8: CITIES}  # the union over the files, sorted

    out = tmp_path / "pred"
    main(["predict", "--model", str(model), "--data", str(root / "train"), "--id", "id", "--output", str(out),
          "--workers", "2"])
    pred = pd.read_parquet(out).sort_values("id").reset_index(drop=True)
    assert list(pred.columns) == ["id", "prediction"]
    assert pred["id"].tolist() == list(range(len(rows)))
    X = rows[[*NUMERIC, "city", "visits"]].astype({"city": "category"})
    np.testing.assert_allclose(pred["prediction"].to_numpy(), booster.predict(X), rtol=1e-6, atol=1e-6)
    # The city is learnt as a category: rows differing only in it differ by its effect.
    probe = pd.DataFrame({**{f: [0.0] * 4 for f in NUMERIC}, "city": pd.Categorical(CITIES), "visits": [1.0] * 4})
    by_city = booster.predict(probe)
    effects = np.array([EFFECT[c] for c in CITIES])
    assert np.argsort(by_city).tolist() == np.argsort(effects).tolist()


def test_an_integer_column_unique_per_row_is_named(folder, tmp_path, capsys):
    root, _ = folder
    args = ["train", "--data", str(root / "train"), "--label", "y", "--drop", "when", "--rounds", "2",
            "--workers", "1", "--quiet"]
    main(args + ["-o", str(tmp_path / "a.json")])
    err = capsys.readouterr().err
    assert "column 'id' is an integer unique to every row" in err and "--id id" in err
    assert "'visits'" not in err  # repeated values: a feature, not an id
    assert "id" in daskgb.Booster().load_model(tmp_path / "a.json").feature_names

    main(args + ["--id", "id", "-o", str(tmp_path / "b.json")])
    assert "unique to every row" not in capsys.readouterr().err
    names = daskgb.Booster().load_model(tmp_path / "b.json").feature_names
    assert names == [*NUMERIC, "city", "visits"]  # neither the id nor the dropped column


def test_columns_that_cannot_be_features_are_named(folder, tmp_path):
    root, _ = folder
    base = ["train", "--data", str(root / "train"), "--label", "y", "--workers", "1", "-o", str(tmp_path / "m.json")]
    with pytest.raises(SystemExit, match=r"feature columns \['when \(datetime64.*neither numbers nor strings.*--drop"):
        main(base + ["--id", "id"])
    with pytest.raises(SystemExit, match=r"--features names \['id'\], which is --id"):
        main(base + ["--id", "id", "--features", "f0", "id"])
    with pytest.raises(SystemExit, match=r"columns \['nope'\] not among"):
        main(base + ["--drop", "nope"])
    assert not (tmp_path / "m.json").exists()


def test_predict_refuses_strings_for_a_numeric_feature(folder, tmp_path):
    root, rows = folder
    numeric = rows[NUMERIC + ["id", "y"]].copy()
    numeric["city"] = np.arange(len(rows), dtype=np.float32) % 3  # numbers where predict will find strings
    numeric.to_parquet(tmp_path / "numeric.parquet")
    model = tmp_path / "m.json"
    main(["train", "--data", str(tmp_path / "numeric.parquet"), "--label", "y", "--id", "id", "--rounds", "2",
          "--workers", "1", "--quiet", "-o", str(model)])
    with pytest.raises(SystemExit, match=r"columns \['city'\] hold strings, but the model takes them as numbers"):
        main(["predict", "--model", str(model), "--data", str(root / "train"), "--drop", "y", "visits", "when",
              "--id", "id", "--output", str(tmp_path / "pred"), "--workers", "1"])


def test_a_feature_subset_of_numeric_files(folder, tmp_path):
    """--features naming some of the columns of ordinary parquet files: dask fused the files it
    read for a column subset into fewer partitions than the persisted frame said it had, and
    training failed with 'lost dependencies'."""
    root, rows = folder
    data = tmp_path / "numeric"
    data.mkdir()
    numeric = rows.drop(columns=["city", "when"])
    for i in range(3):
        numeric.iloc[i * 1500:(i + 1) * 1500].to_parquet(data / f"part-{i}.parquet")
    model = tmp_path / "m.json"
    main(["train", "--data", str(data), "--label", "y", "--features", *NUMERIC, "--rounds", "3", "--workers", "2",
          "--quiet", "-o", str(model)])
    assert daskgb.Booster().load_model(model).feature_names == NUMERIC
