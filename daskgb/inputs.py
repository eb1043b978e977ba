"""Input checks and conversion: features, labels and weights to float32 arrays, with errors that name the problem."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import array_module, to_host


@dataclass
class Features:
    """Feature data ready for quantising: dense (n, F) float32, or CSR arrays."""

    dense: object = None  # xp array (n_rows, n_features) float32, C-contiguous
    indptr: object = None
    indices: object = None
    data: object = None
    n_rows: int = 0
    n_features: int = 0
    feature_names: list | None = None
    # "q" (numeric) or "c" (categorical) per feature; None: all numeric.
    feature_types: list | None = None
    # A dataframe's categorical columns: feature index -> its category names, in code order
    # (a category's code, its position here, is its value in the rows).
    categories: dict | None = None

    @property
    def is_sparse(self) -> bool:
        return self.dense is None

    @property
    def xp(self):
        return array_module(self.dense if self.dense is not None else self.data)

    def to(self, xp) -> "Features":
        if self.xp is xp:
            return self
        move = (lambda a: to_host(a)) if xp is np else xp.asarray
        if self.is_sparse:
            return Features(None, move(self.indptr), move(self.indices), move(self.data), self.n_rows,
                            self.n_features, self.feature_names, self.feature_types, self.categories)
        return Features(move(self.dense), n_rows=self.n_rows, n_features=self.n_features,
                        feature_names=self.feature_names, feature_types=self.feature_types,
                        categories=self.categories)

    def densify(self, missing: float = np.nan):
        """Dense float32 copy (absent CSR entries become `missing`)."""
        if not self.is_sparse:
            return self.dense
        xp = self.xp
        out = xp.full((self.n_rows, self.n_features), xp.float32(missing), dtype=xp.float32)
        rows = xp.repeat(xp.arange(self.n_rows), xp.diff(self.indptr).astype(xp.int64))
        out[rows, self.indices] = self.data
        return out


def _is_pandas_series(X) -> bool:
    return type(X).__module__.startswith("pandas") and type(X).__name__ == "Series"


def _is_sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def as_features(X, feature_names=None, allow_empty: bool = False, feature_types=None,
                enable_categorical: bool = False, categories=None) -> Features:
    """Check and convert X (numpy, pandas, cupy, scipy/cupyx sparse, or array-like).

    feature_types: XGBoost's per-feature types ("q", "float", "int", "i": numeric; "c":
    categorical). A dataframe's `category` columns are categorical (enable_categorical must
    be set, as in XGBoost); their codes are the values, a missing entry NaN. categories:
    {feature index: category names} a model or training matrix learnt: a dataframe's
    categorical columns are recoded to those codes (recode_categories)."""
    names = None
    frame_types, frame_categories = None, None
    if X is None:
        raise ValueError("X is None: no feature data given")
    if _is_sparse(X):
        csr = X.tocsr()
        n_rows, n_features = csr.shape
        _check_shape(n_rows, n_features, allow_empty)
        if not np.issubdtype(np.dtype(csr.dtype), np.number) and csr.dtype != bool:
            raise ValueError(f"X has non-numeric dtype {csr.dtype}")
        xp = array_module(csr.data)
        f = Features(None, xp.asarray(csr.indptr, dtype=xp.int64), xp.asarray(csr.indices, dtype=xp.int64),
                     xp.asarray(csr.data, dtype=xp.float32), n_rows, n_features)
    else:
        if _is_pandas_series(X):  # one feature, named after the series (XGBoost: pd.DataFrame(series))
            X = X.to_frame()
        if hasattr(X, "dtypes") and hasattr(X, "columns"):  # a dataframe
            X = _dense_columns(X)
            X, frame_types, frame_categories = _categorical_columns(X, enable_categorical, categories)
            bad = [str(c) for c, t in zip(X.columns, X.dtypes) if not is_numeric_dtype(t)]
            if bad:
                raise ValueError(f"X has non-numeric columns: {bad[:10]}; convert or drop them first")
            names = [str(c) for c in X.columns]
            frame = X
            X = X.to_numpy(dtype=np.float32, na_value=np.nan) if hasattr(X, "to_numpy") else X.values
            if hasattr(frame, "to_numpy") and np.isinf(X).any():  # overflow, or infinities in the data?
                _check_float32_range(np, frame.to_numpy(dtype=np.float64, na_value=np.nan), X, names)
        xp = array_module(X)
        arr = xp.asarray(X) if xp is not np else np.asarray(X)
        if arr.dtype.kind == "O":  # numbers held as Python objects: as numbers
            arr = _objects_as_numbers(arr, "X")
        if arr.dtype.kind == "c":
            raise ValueError(f"Complex data not supported: X has dtype {arr.dtype}")
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"X has non-numeric dtype {arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(f"X must be 2-dimensional (rows x features), got {arr.ndim} dimension(s). Reshape your "
                             "data: X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one row")
        _check_shape(*arr.shape, allow_empty)
        wide = arr
        arr = xp.ascontiguousarray(arr, dtype=xp.float32)
        if wide.dtype.itemsize > 4 or wide.dtype.kind in "iu":
            _check_float32_range(xp, wide, arr, names)
        f = Features(arr, n_rows=arr.shape[0], n_features=arr.shape[1])
    if feature_names is not None:
        names = [str(n) for n in feature_names]
        if len(names) != f.n_features:
            raise ValueError(f"feature_names has {len(names)} names for {f.n_features} features")
    check_unique_names(names)
    f.feature_names = names
    f.feature_types = feature_types_of(feature_types, frame_types, f.n_features)
    f.categories = frame_categories
    return f


_NUMERIC_TYPES = ("q", "float", "int", "i")
# XGBoost's largest category code (src/common/categorical.h OutOfRangeCat: float32 holds every
# integer below it exactly).
MAX_CATEGORY = 16777216


def feature_types_of(given, from_frame, n_features: int):
    """The per-feature types ("q" or "c"), or None when every feature is numeric."""
    types = from_frame
    if given is not None:
        if isinstance(given, str) or len(given) != n_features:
            raise ValueError(f"feature_types must be a list of one type per feature ({n_features}), got {given!r}")
        bad = [t for t in given if t not in _NUMERIC_TYPES + ("c",)]
        if bad:
            raise ValueError(f"feature_types holds {bad[0]!r}; a feature's type is 'c' (categorical) or one of "
                             f"{list(_NUMERIC_TYPES)} (numeric)")
        given = ["c" if t == "c" else "q" for t in given]
        if from_frame is not None and any(b == "c" and a != "c" for a, b in zip(given, from_frame)):
            raise ValueError("feature_types says a `category` column of X is numeric; drop feature_types or "
                             "convert the column")
        types = given
    if types is None or "c" not in types:
        return None
    return list(types)


def category_columns(frame, enable_categorical: bool) -> list[int]:
    """The positions of a (pandas or dask) dataframe's `category` columns; an error naming them
    unless enable_categorical is set (XGBoost's rule)."""
    cat_cols = [i for i, t in enumerate(frame.dtypes) if str(t) == "category"]
    if cat_cols and not enable_categorical:
        names = [str(frame.columns[i]) for i in cat_cols]
        raise ValueError(f"X has categorical (`category` dtype) columns {names[:10]}: pass enable_categorical=True "
                         "(XGBoost's `enable_categorical`) to take them as categories, or convert them to numbers")
    return cat_cols


def _categorical_columns(frame, enable_categorical: bool, categories):
    """(the frame with its `category` columns as float codes, their types, their category
    names); types and names are None without such columns."""
    cat_cols = category_columns(frame, enable_categorical)
    if not cat_cols:
        return frame, None, None
    frame = frame.copy(deep=False)
    types = ["q"] * frame.shape[1]
    names = {}
    for i in cat_cols:
        col = frame.iloc[:, i]
        known = list(col.cat.categories)
        codes = col.cat.codes.to_numpy().astype(np.float32)
        if categories is not None and i in categories:
            codes = recode(codes, known, categories[i])
            known = list(categories[i])
        codes[codes < 0] = np.nan  # pandas' code of a missing entry
        frame.isetitem(i, codes)
        types[i] = "c"
        names[i] = known
    return frame, types, names


def recode(codes, names, reference) -> np.ndarray:
    """Codes of categories `names` re-expressed as codes of `reference` (the training data's
    categories, by name); a category the reference lacks becomes missing (NaN): unseen in
    training, it goes the way missing values go. (XGBoost raises an error there.)"""
    if list(names) == list(reference):
        out = np.asarray(codes, dtype=np.float32).copy()
        out[out < 0] = np.nan  # pandas' code of a missing entry
        return out
    index = {v: j for j, v in enumerate(reference)}
    table = np.array([index.get(v, -1) for v in names] + [-1], dtype=np.float32)
    codes = np.asarray(codes)
    out = table[np.where(codes >= 0, codes, -1).astype(np.int64)]
    out[out < 0] = np.nan
    return out


def check_categorical_values(features: Features, missing: float) -> None:
    """A categorical feature's values must be category codes: non-negative and below
    MAX_CATEGORY (XGBoost's rule), or missing. Else ValueError naming the column."""
    if features.feature_types is None:
        return
    xp = features.xp
    for f, t in enumerate(features.feature_types):
        if t != "c":
            continue
        if features.is_sparse:
            v = features.data[features.indices == f]
        else:
            v = features.dense[:, f]
        present = ~xp.isnan(v)
        if not np.isnan(missing):
            present &= v != xp.float32(missing)
        bad = present & ((v < 0) | (v >= MAX_CATEGORY))
        if bool(bad.any()):
            value = float(v[xp.flatnonzero(bad)[0]] if xp is not np else v[np.flatnonzero(bad)[0]])
            where = f"column {features.feature_names[f]!r}" if features.feature_names else f"column {f}"
            raise ValueError(f"{where} is categorical, so its values must be category codes (integers in "
                             f"0..{MAX_CATEGORY - 1}) or missing; it holds {value:g}")


def check_unique_names(names) -> None:
    """Feature names must be unique (as XGBoost requires): importance and the model's features
    are keyed by them, so a repeated name would credit one column's splits to another."""
    if names is None:
        return
    seen, repeated = set(), []
    for n in names:
        if n in seen and n not in repeated:
            repeated.append(n)
        seen.add(n)
    if repeated:
        raise ValueError(f"feature names must be unique; repeated: {repeated[:10]}. Rename or drop the repeated "
                         "columns")


def _check_float32_range(xp, wide, narrow, names) -> None:
    """Finite values that overflow float32 (features are stored as float32, as XGBoost stores
    them) are an error naming a column, not infinities read as data."""
    if not bool(xp.isinf(narrow).any()):
        return
    overflow = xp.isinf(narrow) & xp.isfinite(wide)
    if not bool(overflow.any()):
        return
    rows, cols = xp.nonzero(overflow)
    col = int(cols[0])
    value = float(wide[int(rows[0]), col])
    where = f"column {names[col]!r}" if names else f"column {col}"
    raise ValueError(f"X holds values beyond float32's range (e.g. {value:g} in {where}): features are stored as "
                     "float32, as XGBoost stores them; scale or clip them first")


def _objects_as_numbers(a, what: str):
    """An object array of numbers as float64; anything else is an error naming it: ValueError for
    strings that are not numbers, TypeError for other objects (numpy's words kept: scikit-learn's
    check_dtype_object looks for them)."""
    try:
        return a.astype(np.float64)
    except (TypeError, ValueError) as exc:
        bad = next((v for v in a.ravel() if not isinstance(v, (int, float, np.number))), None)
        said = f"{what} must be numeric: it has dtype object and holds {type(bad).__name__} values (e.g. {bad!r})"
        if isinstance(exc, TypeError):
            raise TypeError(f"{said}: {exc}") from None
        raise ValueError(f"{said}; convert them to numbers first") from None


def check_feature_names(expected, given, expected_what: str, given_what: str) -> None:
    """Feature names must agree where both sides have them: columns matched by position under
    other names (renamed or reordered) would silently give a wrong answer."""
    if expected is None or given is None:
        return
    expected, given = [str(n) for n in expected], [str(n) for n in given]
    if expected == given:
        return
    lacks = [n for n in expected if n not in set(given)]
    extra = [n for n in given if n not in set(expected)]
    if not lacks and not extra:
        detail = "the same names in another order: put the columns in the training order"
    else:
        detail = "; ".join(part for part in (f"{given_what} lacks {lacks[:10]}" if lacks else "",
                                              f"{expected_what} lacks {extra[:10]}" if extra else "") if part)
    raise ValueError(f"feature_names mismatch: {expected_what} has {expected[:10]}, {given_what} has {given[:10]} "
                     f"({detail})")


def _dense_columns(frame):
    """A pandas frame with its Sparse columns made dense (their fill value a value, as XGBoost
    reads pandas' sparse columns)."""
    sparse = [i for i, t in enumerate(frame.dtypes) if str(t).startswith("Sparse")]
    if not sparse:
        return frame
    import warnings

    warnings.warn("Sparse arrays from pandas are converted into dense.", UserWarning, stacklevel=4)  # XGBoost's words
    frame = frame.copy(deep=False)
    for i in sparse:
        frame.isetitem(i, frame.iloc[:, i].sparse.to_dense())
    return frame


def is_numeric_dtype(t) -> bool:
    try:
        return np.dtype(t).kind in "biuf"
    except TypeError:  # pandas extension types
        return str(t).lower().startswith(("int", "uint", "float", "bool"))


def _check_shape(n_rows: int, n_features: int, allow_empty: bool = False) -> None:
    if n_rows == 0 and not allow_empty:
        raise ValueError(f"X has no rows: 0 sample(s) (shape=({n_rows}, {n_features})) while a minimum of 1 is "
                         "required.")
    if n_features == 0:
        raise ValueError(f"X has no features: 0 feature(s) (shape=({n_rows}, {n_features})) while a minimum of 1 is "
                         "required.")


def _numeric(v, what: str):
    """(v as an array of its own module, that module); a one-column 2-D array becomes 1-D."""
    if hasattr(v, "to_numpy"):
        v = v.to_numpy()
    src = array_module(v)
    a = src.asarray(v)
    if a.dtype.kind == "O":  # numbers held as Python objects: as numbers
        a = _objects_as_numbers(a, what)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be numeric, got dtype {a.dtype}")
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    return a, src


def _checked_float32(a, src, what: str, xp, finite: bool = True, nonnegative: bool = False, copy: bool = True):
    # Copied only to stay apart from the caller's array: moving to another device copies anyway.
    copy = copy and src is xp
    checked = None
    if src is not np:  # one kernel converts and counts (device_arrays.checked_float32)
        from . import device_arrays

        checked = device_arrays.checked_float32(a, copy)
    if checked is not None:
        a, bad, neg = checked
    else:
        a = a.astype(src.float32, copy=copy)
        # counted only when some are not: one bool array, not two
        bad = int((~src.isfinite(a)).sum()) if finite and not bool(src.isfinite(a).all()) else 0
        neg = int((a < 0).sum()) if nonnegative else 0
    if finite and bad:
        # The words after the count are scikit-learn's (check_array), which XGBoost's tests look for.
        raise ValueError(f"{what} has {bad} NaN or infinite values: it contains NaN, infinity or a value too large "
                         "for float32")
    if nonnegative and neg:
        raise ValueError(f"{what} has {neg} negative values")
    return xp.asarray(a) if xp is not np else to_host(a)


def as_vector(v, n_rows: int, what: str, xp, *, finite: bool = True, nonnegative: bool = False,
              copy: bool = True):
    """A length-n float32 vector on xp's device, checked. copy=False: v is an array daskgb made
    and nobody else holds, so a float32 vector already on xp's device is kept as it is."""
    if v is None:
        return None
    a, src = _numeric(v, what)
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-dimensional, got shape {a.shape}")
    if a.shape[0] != n_rows:
        raise ValueError(f"{what} has {a.shape[0]} entries but X has {n_rows} rows")
    return _checked_float32(a, src, what, xp, finite, nonnegative, copy)


def as_margin(v, n_rows: int, n_groups, xp):
    """Base margins: a length-n float32 vector, or (n, K) for K outputs per row (n_groups=None:
    whichever shape v has; a flat n*K vector is taken as row-major (n, K), as XGBoost does)."""
    if v is None:
        return None
    a, src = _numeric(v, "base_margin")
    if n_groups is not None and n_groups > 1 and a.ndim == 1 and a.shape[0] == n_rows * n_groups:
        a = a.reshape(n_rows, n_groups)
    want = f"({n_rows},)" if not n_groups or n_groups == 1 else f"({n_rows}, {n_groups})"
    if a.ndim not in (1, 2) or a.shape[0] != n_rows or (n_groups is not None and a.ndim == 2
                                                        and a.shape[1] != n_groups):
        raise ValueError(f"base_margin has shape {a.shape}, expected {want}")
    if n_groups == 1 and a.ndim != 1:
        raise ValueError(f"base_margin has shape {a.shape}, expected {want}")
    return _checked_float32(a, src, "base_margin", xp)
