"""Text data files named as XGBoost's DMatrix names them (``path?format=libsvm``, ``path?format=csv``) read into arrays.

LIBSVM rows are ``label [qid:q] index:value ...`` with 0-based feature indices (XGBoost's
default indexing_mode); an entry a row does not list is missing, as XGBoost reads it, so the
rows come as a CSR matrix with as many features as the largest index + 1. CSV rows are dense,
their label in the column ``label_column=`` names (none without it).
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs

import numpy as np


def is_text_uri(X) -> bool:
    return isinstance(X, (str, os.PathLike))


def read_text_uri(uri) -> tuple:
    """(X, y, qid) from ``path?format=libsvm`` or ``path?format=csv[&label_column=k]``; y and
    qid None where the file holds none. ValueError names what is wrong with the URI or a line."""
    text = os.fspath(uri)
    path, _, query = text.partition("?")
    args = {k: v[-1] for k, v in parse_qs(query).items()}
    fmt = args.get("format")
    if fmt is None:
        raise ValueError(f"the format of text data must be named, as XGBoost requires: {path}?format=libsvm or "
                         f"{path}?format=csv")
    if not os.path.isfile(path):
        raise ValueError(f"no such data file: {path!r}")
    if fmt == "libsvm":
        return _libsvm(path)
    if fmt == "csv":
        return _csv(path, args.get("label_column"))
    raise ValueError(f"unknown text data format {fmt!r} (libsvm or csv)")


def _libsvm(path: str) -> tuple:
    import scipy.sparse as sparse

    labels, qids, indptr, indices, values = [], [], [0], [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            try:
                labels.append(float(fields[0].split(":")[0]))
                for field in fields[1:]:
                    key, _, value = field.partition(":")
                    if key == "qid":
                        qids.append(int(value))
                        continue
                    indices.append(int(key))
                    values.append(float(value))
            except ValueError:
                raise ValueError(f"{path}, line {number}: not a LIBSVM row (label [qid:q] index:value ...): "
                                 f"{line[:80]!r}") from None
            if qids and len(qids) != len(labels):
                raise ValueError(f"{path}, line {number}: some rows have a qid and others not")
            indptr.append(len(indices))
    if not labels:
        raise ValueError(f"{path} holds no rows")
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and idx.min() < 0:
        raise ValueError(f"{path}: negative feature index {int(idx.min())}")
    n_features = int(idx.max()) + 1 if idx.size else 0
    X = sparse.csr_matrix((np.asarray(values, dtype=np.float32), idx, np.asarray(indptr, dtype=np.int64)),
                          shape=(len(labels), n_features))
    return X, np.asarray(labels, dtype=np.float32), (np.asarray(qids, dtype=np.int64) if qids else None)


def _csv(path: str, label_column) -> tuple:
    table = np.loadtxt(path, delimiter=",", dtype=np.float32, ndmin=2)
    if label_column is None:
        return table, None, None
    k = int(label_column)
    if not 0 <= k < table.shape[1]:
        raise ValueError(f"label_column={k} is not a column of {path} ({table.shape[1]} columns)")
    return np.delete(table, k, axis=1), table[:, k].copy(), None
