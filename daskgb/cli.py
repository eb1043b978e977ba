"""The daskgb command: train a model on parquet or CSV files through a Dask cluster, and
predict with one.

    daskgb train --data 'data/train/*.parquet' --label y --objective binary:logistic -o model.json
    daskgb train --data data/train/ --label y --scheduler tcp://10.0.0.1:8786 --rounds 500 --set max_depth=8
    daskgb predict --model model.json --data data/test/ --output predictions.parquet
    daskgb warm-up       # compile the CPU path's loops into numba's cache (e.g. where an image is built)

Data are read with dask.dataframe (read_parquet for a folder or *.parquet, read_csv for
*.csv; globs work for both), so rows stay on the workers. A string (or `category`) column
is a categorical feature: its categories are the union over the files, and predict recodes
a table's categories by name to the model's. --id names a row id column: never a feature,
kept beside the predictions; an integer feature column unique to every row is trained on,
with a warning that it looks like an id. --scheduler local (the default)
starts a LocalCluster on this machine, local-cuda a LocalCUDACluster (one worker per
GPU), anything else is the address of a running scheduler. Training shows the client's
progress bar and eval log (daskgb.dask.train).

No file of the user's is written over unless they ask: a model file that exists, or an
output folder that is not empty, needs --overwrite (the folder is then replaced whole); an
output that is (or holds, or lies in) the data read is refused. Paths are checked before
any work, and a user's mistake (no such data, a folder without parquet, an output folder
whose parent is missing) is one line on stderr, not a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import sys


def _value(text: str):
    """A --set value: JSON where it parses (numbers, true/false, lists), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _key_values(items) -> dict:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"daskgb: --set takes KEY=VALUE, got {item!r}")
        out[key.strip()] = _value(value.strip())
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="daskgb", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{train,predict,warm-up}")

    def cluster_options(p):
        p.add_argument("--scheduler", default="local", metavar="ADDRESS",
                       help="'local' (a LocalCluster here; the default), 'local-cuda' (a LocalCUDACluster: one worker "
                            "per GPU) or a scheduler address such as tcp://host:8786")
        p.add_argument("--workers", type=int, default=None,
                       help="workers of a local cluster (default: dask's choice for this machine)")
        p.add_argument("--format", choices=("auto", "parquet", "csv"), default="auto",
                       help="input format (auto: csv for paths ending .csv, else parquet)")

    t = sub.add_parser("train", help="train a model and write it as JSON",
                       description="Train on a labelled table (parquet or CSV) and write the model as JSON.")
    t.add_argument("--data", required=True, help="a parquet folder or file, or a glob of parquet or CSV files")
    t.add_argument("--label", required=True, metavar="COL", help="the label column")
    t.add_argument("--weight", metavar="COL", help="a column of row weights")
    t.add_argument("--qid", metavar="COL", help="a query id column (ranking objectives)")
    t.add_argument("--features", metavar="COL", nargs="+",
                   help="the feature columns (default: every column but the label, weight, qid, --id and --drop)")
    t.add_argument("--drop", metavar="COL", nargs="+", default=[],
                   help="columns of the data that are not features (e.g. a timestamp), left out of training")
    t.add_argument("--id", metavar="COL",
                   help="a row id column: never a feature (predict --id keeps it beside the predictions)")
    t.add_argument("--eval-data", metavar="PATH", help="a table to evaluate on after every round (same columns)")
    t.add_argument("--objective", default="reg:squarederror", help="an XGBoost objective (default reg:squarederror)")
    t.add_argument("--rounds", type=int, default=100, help="boosting rounds (default 100)")
    t.add_argument("--max-depth", type=int, default=6, help="tree depth (default 6)")
    t.add_argument("--eta", type=float, default=0.3, help="learning rate (default 0.3)")
    t.add_argument("--max-bin", type=int, default=256, help="histogram bins per feature (default 256)")
    t.add_argument("--eval-metric", metavar="METRIC", nargs="+", help="metrics to report (XGBoost names)")
    t.add_argument("--early-stopping-rounds", type=int, default=None,
                   help="stop when the last eval metric of --eval-data has not improved for this many rounds")
    t.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                   help="any other XGBoost training parameter, e.g. --set subsample=0.8 --set num_class=3 (repeatable)")
    t.add_argument("-o", "--output", default="model.json", help="where to write the model (default model.json)")
    t.add_argument("--model-format", choices=("daskgb", "xgboost"), default="daskgb",
                   help="daskgb's JSON or XGBoost's JSON model format (default daskgb)")
    t.add_argument("--quiet", action="store_true", help="no progress bar and no eval log")
    t.add_argument("--overwrite", action="store_true", help="replace the model file if it exists")
    cluster_options(t)

    p = sub.add_parser("predict", help="predict with a model and write parquet",
                       description="Predict with a model (daskgb's or XGBoost's JSON) and write the predictions "
                                   "as parquet, one part per input partition.")
    p.add_argument("--model", required=True, help="a model JSON file")
    p.add_argument("--data", required=True, help="a parquet folder or file, or a glob of parquet or CSV files")
    p.add_argument("--output", required=True, help="the parquet folder to write")
    p.add_argument("--drop", metavar="COL", nargs="+", default=[],
                   help="columns of the data that are not features (a label, ids), left out of prediction")
    p.add_argument("--keep", metavar="COL", nargs="+", default=[],
                   help="columns of the data copied into the output beside the predictions (e.g. an id)")
    p.add_argument("--id", metavar="COL",
                   help="a row id column: copied into the output before the predictions, never a feature")
    p.add_argument("--output-margin", action="store_true", help="raw margins instead of transformed predictions")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the output if it exists (a folder is deleted whole first)")
    cluster_options(p)

    w = sub.add_parser("warm-up", help="compile the CPU path's loops into numba's cache",
                       description="Compile the loops that CPU fits of the common data kinds run into numba's "
                                   "cache, so that a first fit (every worker's, on a cluster started from an image "
                                   "built after this) loads them instead (daskgb/cpu/warm_up.py).")
    w.add_argument("--threads", type=int, default=None, help="threads while warming up (default: every core)")
    return ap


def _local(path: str) -> bool:
    """A path of this machine's file system (not a URL such as s3://, which dask reads itself)."""
    return "://" not in path


def _data_files(path: str, fmt: str) -> list[str]:
    """The local paths `path` reads (a file; a folder of parquet files, and its files; a
    glob's files); a user's mistake there ends the command with one line."""
    if not _local(path):
        return []
    if glob.has_magic(path):
        files = sorted(glob.glob(path))
        if not files:
            raise SystemExit(f"daskgb: no files match {path}")
        return files
    if not os.path.exists(path):
        raise SystemExit(f"daskgb: {path} does not exist")
    if os.path.isdir(path):
        if fmt == "csv":
            raise SystemExit(f"daskgb: {path} is a folder; give its CSV files as a glob, e.g. '{path}/*.csv'")
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith((".parquet", ".parq")) or f == "_metadata")
        if not files:
            raise SystemExit(f"daskgb: {path} holds no parquet files")
        return [path] + files
    return [path]


def _overlaps(out: str, inputs: list[str]) -> bool:
    """Whether writing `out` (a file, or a folder replaced whole) could touch an input: out is
    an input, holds one, or lies in an input folder (read_parquet reads a folder's subfolders)."""
    o = os.path.realpath(out)
    for p in inputs:
        p = os.path.realpath(p)
        if os.path.commonpath([o, p]) == o or (os.path.isdir(p) and os.path.commonpath([o, p]) == p):
            return True
    return False


def _check_model_output(path: str, inputs: list[str], overwrite: bool) -> None:
    """train's model file: its folder exists, it is not an input, and it exists only with --overwrite."""
    if not _local(path):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise SystemExit(f"daskgb: the folder of the output {path} does not exist")
    if os.path.isdir(path):
        raise SystemExit(f"daskgb: the output {path} is a folder; give the model file's name")
    if _overlaps(path, inputs):
        raise SystemExit(f"daskgb: the output {path} is data this command reads; write the model elsewhere")
    if os.path.exists(path) and not overwrite:
        raise SystemExit(f"daskgb: {path} exists; pass --overwrite to replace it")


def _check_folder_output(path: str, inputs: list[str], overwrite: bool) -> None:
    """predict's output folder: never the data read, or in it; empty, or replaced whole with --overwrite."""
    if not _local(path):
        return
    if _overlaps(path, inputs):
        raise SystemExit(f"daskgb: the output {path} is (or holds, or lies in) the data this command reads; "
                         "write the predictions elsewhere")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise SystemExit(f"daskgb: the folder {parent} for the output {path} does not exist")
    if os.path.isfile(path) or (os.path.isdir(path) and os.listdir(path)):
        if not overwrite:
            raise SystemExit(f"daskgb: the output {path} exists and is not an empty folder; pass --overwrite to "
                             "replace it whole")


def _clear_output(path: str) -> None:
    """An output --overwrite replaces: gone before the new one is written, so no stale part stays."""
    if not _local(path):
        return
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


def _read(path: str, fmt: str):
    _require_tables()
    import dask.dataframe as dd

    if fmt == "csv" or (fmt == "auto" and path.lower().endswith(".csv")):
        return dd.read_csv(path)
    return dd.read_parquet(path)


def _require_tables() -> None:
    """The command reads tables with pandas and pyarrow (dask.dataframe): daskgb's dependencies,
    missing only from an install made without them (pip --no-deps)."""
    missing = []
    for module in ("pandas", "pyarrow"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise SystemExit(f"daskgb: the command reads tables with {' and '.join(missing)}, which this Python lacks: "
                         f"pip install {' '.join(missing)} (or reinstall daskgb with its dependencies)")


@contextlib.contextmanager
def _client(scheduler: str, workers: int | None):
    from distributed import Client, LocalCluster

    if scheduler == "local":
        kw = {} if workers is None else {"n_workers": workers}
        with LocalCluster(threads_per_worker=1, **kw) as cluster, Client(cluster) as client:
            yield client
    elif scheduler == "local-cuda":
        from dask_cuda import LocalCUDACluster

        with LocalCUDACluster() as cluster, Client(cluster) as client:
            yield client
    else:
        with Client(scheduler) as client:
            yield client


def _columns(df, wanted, what: str) -> None:
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise SystemExit(f"daskgb: {what} {missing} not among the data's columns {list(df.columns)}")


def _is_categorical(dtype) -> bool:
    """A column the command treats as categorical: strings (object or string dtype) or `category`."""
    import pandas as pd

    return (str(dtype) == "category" or pd.api.types.is_string_dtype(dtype)
            or pd.api.types.is_object_dtype(dtype))


def _check_feature_dtypes(df, features) -> list:
    """The categorical features (strings or `category`); a feature that is neither a number nor
    one of those (a date, a timestamp) ends the command with one line naming it."""
    from .inputs import is_numeric_dtype

    categorical = [c for c in features if _is_categorical(df.dtypes[c])]
    bad = [f"{c} ({df.dtypes[c]})" for c in features if c not in categorical and not is_numeric_dtype(df.dtypes[c])]
    if bad:
        raise SystemExit(f"daskgb: the feature columns {bad} are neither numbers nor strings; leave them out with "
                         "--drop or convert them")
    return categorical


def _select(part, columns):
    return part[columns]


def _persisted(client, df, columns):
    """df's columns, computed and held on the workers, in df's own partitions.

    Selected inside a task (map_partitions) rather than as df[columns]: dask pushes a column
    selection into read_parquet, which then fuses files into fewer partitions than the frame it
    persists says it has, and the persisted frame's tasks fail with 'lost dependencies'. The
    file is still read whole and cut to the columns in the same task."""
    from distributed import wait

    frame = client.persist(df.map_partitions(_select, list(columns), meta=df._meta[list(columns)]))
    wait(frame)
    return frame


def _category_dtypes(frame, columns) -> dict:
    """{column: a CategoricalDtype of the column's values over all partitions, sorted}."""
    import dask
    import pandas as pd

    if not columns:
        return {}
    values = dask.compute(*[frame[c].dropna().astype(object).unique(split_out=1) for c in columns])
    out = {}
    for c, v in zip(columns, values):
        v = list(v)
        try:
            v = sorted(v)
        except TypeError:  # mixed types: ordered by their text
            v = sorted(v, key=str)
        out[c] = pd.CategoricalDtype(v)
    return out


def _warn_row_ids(frame, features) -> None:
    """One line on stderr for each integer feature whose value is different on every row: an id
    trained on as a feature fits noise; --id or --drop leaves it out."""
    import dask
    import pandas as pd

    ints = [c for c in features if pd.api.types.is_integer_dtype(frame.dtypes[c])]
    if not ints:
        return
    n, *counts = dask.compute(frame.map_partitions(len).sum(), *[frame[c].nunique(split_out=1) for c in ints])
    for c, k in zip(ints, counts):
        if n > 1 and k == n:
            print(f"daskgb: warning: column {c!r} is an integer unique to every row, as a row id is; it is trained "
                  f"on as a feature. If it is an id, pass --id {c} (or --drop {c})", file=sys.stderr)


def train(args) -> None:
    import daskgb.dask as dgb

    params = {"objective": args.objective, "max_depth": args.max_depth, "eta": args.eta, "max_bin": args.max_bin}
    if args.eval_metric:
        params["eval_metric"] = args.eval_metric
    params.update(_key_values(args.set))
    inputs = _data_files(args.data, args.format) + (_data_files(args.eval_data, args.format) if args.eval_data else [])
    _check_model_output(args.output, inputs, args.overwrite)
    df = _read(args.data, args.format)
    special = [c for c in (args.label, args.weight, args.qid) if c]
    _columns(df, special, "columns")
    not_features = {"the label": [args.label], "--weight": [args.weight], "--qid": [args.qid], "--id": [args.id],
                    "--drop": args.drop}
    _columns(df, [c for cols in not_features.values() for c in cols if c], "columns")
    if args.features:
        features = list(args.features)
        for what, cols in not_features.items():
            clash = [c for c in features if c in cols]
            if clash:
                raise SystemExit(f"daskgb: --features names {clash}, which is {what}: a column is a feature or not")
    else:
        left_out = {c for cols in not_features.values() for c in cols if c}
        features = [c for c in df.columns if c not in left_out]
    _columns(df, features, "feature columns")
    if not features:
        raise SystemExit("daskgb: the data has no feature columns besides the label")
    categorical = _check_feature_dtypes(df, features)
    deval = None
    if args.eval_data:
        deval = _read(args.eval_data, args.format)
        _columns(deval, features + special, "columns")

    def matrix(frame, ref=None):
        return dgb.DaskQuantileMatrix(client, frame[features], frame[args.label],
                                      weight=frame[args.weight] if args.weight else None,
                                      qid=frame[args.qid] if args.qid else None, max_bin=args.max_bin, ref=ref,
                                      enable_categorical=bool(categorical))

    with _client(args.scheduler, args.workers) as client:
        # Held once on the workers, so that the features and the label are cut into the same partitions
        # (dask may fuse a single column's partitions when it reads them on their own).
        frame = _persisted(client, df, features + special)
        # A string column's categories: the union over all files, the same for the eval data.
        dtypes = _category_dtypes(frame, categorical)
        if dtypes:
            frame = frame.astype(dtypes)
        _warn_row_ids(frame, features)
        dtrain = matrix(frame)
        evals = [(dtrain, "train")]
        if deval is not None:
            eval_frame = _persisted(client, deval, features + special)
            if dtypes:
                eval_frame = eval_frame.astype(dtypes)
            evals.append((matrix(eval_frame, ref=dtrain), "eval"))
        out = dgb.train(client, params, dtrain, args.rounds, evals=evals, verbose_eval=not args.quiet,
                        early_stopping_rounds=args.early_stopping_rounds)
    out["booster"].save_model(args.output, format=args.model_format)
    if not args.quiet:
        print(f"daskgb: wrote {args.output} ({out['booster'].num_boosted_rounds()} rounds)", file=sys.stderr)


def _predict_part(part, booster, features, keep, output_margin, names, categorical):
    """One partition's predictions as a pandas frame: the kept columns, then the predictions.
    categorical: the model's categorical features, given to it as a frame of `category` columns
    (the model recodes them by name to its own categories)."""
    import numpy as np
    import pandas as pd

    from .arrays import to_host

    if len(part):
        if categorical:
            X = part[features].astype({c: "category" for c in categorical})
        else:
            X = part[features].to_numpy(dtype=np.float32, na_value=np.nan)
        values = booster.predict(X, output_margin=output_margin)
        values = np.asarray(to_host(values), dtype=np.float32).reshape(len(part), len(names))
    else:  # an empty partition (or dask's metadata)
        values = np.zeros((0, len(names)), dtype=np.float32)
    out = part[keep].reset_index(drop=True) if keep else pd.DataFrame(index=pd.RangeIndex(len(part)))
    for i, name in enumerate(names):
        out[name] = values[:, i]
    return out


def predict(args) -> None:
    import numpy as np

    import daskgb

    if _local(args.model) and not os.path.isfile(args.model):
        raise SystemExit(f"daskgb: the model {args.model} does not exist")
    inputs = _data_files(args.data, args.format)
    _check_folder_output(args.output, inputs + ([args.model] if _local(args.model) else []), args.overwrite)
    booster = daskgb.Booster().load_model(args.model)
    df = _read(args.data, args.format)
    keep = ([args.id] if args.id and args.id not in args.keep else []) + list(args.keep)
    _columns(df, args.drop + keep, "columns")
    if booster.feature_names:
        _columns(df, booster.feature_names, "the model's features")
        features = list(booster.feature_names)
        if args.id in features:
            raise SystemExit(f"daskgb: the model takes the --id column {args.id!r} as a feature")
    else:
        features = [c for c in df.columns if c not in set(args.drop) | set(keep)]
    if len(features) != booster.n_features:
        raise SystemExit(f"daskgb: the model takes {booster.n_features} features; the data has {len(features)} "
                         f"besides --drop, --keep and --id: {features}")
    types = booster.feature_types or ["q"] * len(features)
    categorical = [c for c, t in zip(features, types) if t == "c"]
    numeric_only = [c for c in _check_feature_dtypes(df, features) if c not in categorical]
    if numeric_only:
        raise SystemExit(f"daskgb: the columns {numeric_only} hold strings, but the model takes them as numbers")
    width = np.asarray(booster.predict(np.zeros((1, len(features)), np.float32),
                                       output_margin=args.output_margin)).reshape(1, -1).shape[1]
    names = ["prediction"] if width == 1 else [f"prediction_{i}" for i in range(width)]
    meta = _predict_part(df._meta, booster, features, keep, args.output_margin, names, categorical)
    with _client(args.scheduler, args.workers) as client:
        shared = client.scatter(booster, broadcast=True)  # once per worker, not once per partition
        out = df.map_partitions(_predict_part, shared, features, keep, args.output_margin, names, categorical,
                                meta=meta)
        if args.overwrite:
            _clear_output(args.output)
        out.to_parquet(args.output, write_index=False)
    print(f"daskgb: wrote {args.output}", file=sys.stderr)


def warm_up(args) -> None:
    from .cpu.warm_up import warm_up as compile_loops

    try:
        done = compile_loops(args.threads, verbose=True)
    except RuntimeError as exc:
        raise SystemExit(f"daskgb: {exc}") from None
    print(f"daskgb: {done['cases']} kinds of fit warmed up in {done['seconds']:.1f} s; {done['compiled']} loops "
          "compiled now (0: numba's cache held them all)", file=sys.stderr)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    {"train": train, "predict": predict, "warm-up": warm_up}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
