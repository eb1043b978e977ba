"""QuantileMatrix: training data quantised once into an ELLPACK matrix, with its labels and weights."""

from __future__ import annotations

import uuid
import warnings
import weakref
from dataclasses import replace as _dc_replace

import numpy as np

from . import ellpack as _ellpack
from .ellpack import pages
from . import sketch
from .arrays import array_module, to_host
from .backend import get_backend, resolve_device
from .inputs import as_features, as_margin, as_vector, check_categorical_values, check_feature_names
from .out_of_memory import explained
from .text_files import is_text_uri, read_text_uri


class QuantileMatrix:
    """Features quantised to histogram bins (ELLPACK), plus labels, weights and base margins.

    X may be numpy, pandas (numeric columns), cupy or scipy CSR; ``missing``
    marks missing entries besides NaN. The matrix is built on the device of X
    (cupy input: the GPU) unless ``device`` says otherwise, and moves to another
    device when training asks for it. ``ref`` reuses another matrix's cuts, as
    eval sets must, so that both are binned alike (an eval set built without it is binned
    again with the training cuts when training starts, from its X, as XGBoost bins a DMatrix
    eval set: while X lives, for the matrix holds it only weakly). ``cuts`` (a sketch.Cuts) skips
    sketching and bins with the given cuts: the Dask layer passes the cuts it
    merged across workers.

    ``device_memory_budget`` (bytes) keeps the quantised matrix within that much device
    memory: when it is larger, it is held as pages of rows on the host, or in files under
    ``spill_dir``, and training streams them to the device (ellpack/pages.py; the model is the
    same). The input is then quantised a chunk at a time where it lies (its sketch merged
    from the chunks' sketches; a chunk of CSR rows is made dense on the way).

    ``data=`` and ``label=`` (XGBoost's DMatrix names) may stand for X and y. X may also be a
    text file named as XGBoost names one, ``"train.txt?format=libsvm"`` or
    ``"train.csv?format=csv&label_column=0"`` (text_files.py): its labels (and LIBSVM qids) are
    the matrix's unless y (qid, group) are given.

    Ranking data name its query groups with ``qid`` (a query id per row,
    non-decreasing, the rows of a query contiguous) or ``group`` (group sizes in
    row order), as XGBoost's DMatrix does; then ``weight`` holds one weight per
    query group, XGBoost's rule for ranking.
    """

    public_name = "daskgb.QuantileMatrix"

    @explained("quantising")
    def __init__(self, X=None, y=None, weight=None, base_margin=None, missing=np.nan, max_bin=256, ref=None,
                 feature_names=None, device=None, *, qid=None, group=None, cuts=None, _cuts_token=None,
                 _allow_empty=False, _groups=None, device_memory_budget=None, spill_dir=None,
                 label_lower_bound=None, label_upper_bound=None, feature_types=None, enable_categorical=False,
                 data=None, label=None, _hold_features=False):
        X, y = xgboost_names(X, y, data, label)
        # A text file's rows (XGBoost's "path?format=libsvm" data) are this matrix's own, and a
        # DMatrix keeps its X: held strongly.
        owned = X if _hold_features else None
        if is_text_uri(X):
            X, file_y, file_qid = read_text_uri(X)
            owned = X
            y = file_y if y is None else y
            qid = file_qid if qid is None and group is None else qid
        if isinstance(max_bin, bool) or not isinstance(max_bin, (int, np.integer)) or max_bin < 2:
            raise ValueError(f"max_bin must be an integer >= 2, got {max_bin!r}")
        try:
            missing = float(missing)
        except (TypeError, ValueError):
            raise ValueError(f"missing must be a number, got {missing!r}") from None
        check_paging(device_memory_budget, spill_dir)
        if ref is not None and isinstance(ref, QuantileMatrix):
            # Eval data take the training data's feature types and category codes.
            feature_types = ref.feature_types if feature_types is None else feature_types
            enable_categorical = enable_categorical or ref.feature_types is not None
        features = as_features(X, feature_names, allow_empty=_allow_empty, feature_types=feature_types,
                               enable_categorical=enable_categorical,
                               categories=getattr(ref, "categories", None) if ref is not None else None)
        check_categorical_values(features, missing)
        if device is None:
            device = "cuda" if array_module(features.data if features.is_sparse else features.dense) is not np else "cpu"
        device = resolve_device(device)
        backend = get_backend(device)
        xp = backend.xp
        n = features.n_rows
        self.groups = _query_groups(qid, group, _groups, n)
        self.label_lower_bound, self.label_upper_bound = _survival_bounds(label_lower_bound, label_upper_bound, n, xp)
        if y is None and self.label_lower_bound is not None:
            y = self.label_lower_bound  # survival:aft reads the bounds; the label is there for the checks
        if getattr(y, "ndim", 1) == 2 and y.shape[1] > 1:
            raise ValueError(f"y (labels) must be 1-dimensional, got shape {tuple(y.shape)}: several targets a row "
                             "(multi-output) are not supported by daskgb; train a model per column")
        self.label = as_vector(y, n, "y (labels)", xp)
        if self.groups is not None and weight is not None:
            # Ranking weights are per group; rows carry their group's weight (for the sketch).
            from .ranking import group_weights

            gw = as_vector(group_weights(weight, self.groups), self.groups.n_groups, "weight", xp,
                           nonnegative=True)
            self.groups.weight = gw
            weight = gw[self.groups.device_arrays(xp)[1]]
        self.weight = as_vector(weight, n, "weight", xp, nonnegative=True)
        self.base_margin = as_margin(base_margin, n, None, xp)
        if self.weight is not None and float(self.weight.sum()) <= 0:
            raise ValueError("the weights are all zero (they sum to 0): no row carries any weight")
        self.n_rows = n
        self.n_features = features.n_features
        self.feature_names = features.feature_names
        self.feature_types = features.feature_types
        self.categories = features.categories
        self.missing = missing
        self.max_bin = int(max_bin)
        self.device = device

        auto = None  # the budget the matrix chose itself, and the free memory it was sized by
        if device_memory_budget is None and not features.is_sparse:
            auto = _auto_budget(backend, features.n_rows, features.n_features, self.max_bin)
            device_memory_budget = None if auto is None else auto[0]
        # With a budget, dense rows are quantised a chunk at a time where they are (ellpack/pages.py dense_pages).
        chunked = device_memory_budget is not None
        if not chunked:
            features = features.to(xp)
        if ref is not None and cuts is not None:
            raise ValueError("give ref= or cuts=, not both")
        sketched = ref is None and cuts is None
        if ref is not None:
            if not isinstance(ref, QuantileMatrix):
                raise ValueError("ref must be a QuantileMatrix")
            if ref.n_features != self.n_features:
                raise ValueError(f"ref has {ref.n_features} features, this data has {self.n_features}")
            cuts = ref.cuts.to(xp)
            self.max_bin = ref.max_bin
            if self.feature_names is None:
                self.feature_names = ref.feature_names
            check_feature_names(ref.feature_names, self.feature_names, "ref (the training matrix)", "this data")
            if self.feature_types != ref.feature_types:
                raise ValueError(f"feature_types differ: ref (the training matrix) has {ref.feature_types}, this data "
                                 f"has {self.feature_types}")
            token = ref.cuts_token
        elif cuts is not None:
            if cuts.n_features != self.n_features:
                raise ValueError(f"cuts are for {cuts.n_features} features, this data has {self.n_features}")
            if cuts.has_categorical != (self.feature_types is not None):
                raise ValueError("the cuts and this data disagree on which features are categorical")
            cuts = cuts.to(xp)
            token = _cuts_token or uuid.uuid4().hex
        else:
            if chunked and self.feature_types is not None:
                raise ValueError("categorical features in a paged matrix (device_memory_budget, or data larger than "
                                 "the device's free memory) are not supported yet: give a matrix that fits in "
                                 "device memory")
            cuts = None if chunked else _make_cuts(features, self.weight, missing, self.max_bin)
            token = uuid.uuid4().hex
        # Matrices binned with the same cuts share this token (through ref= or the Dask layer).
        self.cuts_token = token
        # A matrix with cuts of its own may be given to train as an eval set without ref=: it is then
        # binned again, from X, with the training cuts (binned_like); and any matrix is predicted
        # from X by a model of other cuts. X is held weakly, so that a matrix never keeps the user's
        # data alive (the rows are quantised: X may be dropped); a DMatrix holds it.
        self._source = None
        if sketched or ref is not None:
            self._source = (_weakly(X) if owned is None else lambda: owned,
                            dict(feature_names=feature_names, feature_types=feature_types,
                                             enable_categorical=enable_categorical))
        if chunked:

            rows = pages.CsrRows(features) if features.is_sparse else features.dense
            _, self.ellpack = pages.dense_pages(backend, rows, self.weight, missing, self.max_bin,
                                                   device_memory_budget, spill_dir, cuts)
        elif features.is_sparse:
            self.ellpack = _ellpack.from_csr(backend, features.indptr, features.indices, features.data, n, cuts,
                                             missing)
        else:
            self.ellpack = _ellpack.from_dense(backend, features.dense, cuts, missing)
        if sketched:
            _check_sentinel(features, self.cuts, missing, self.feature_names)
        _say_if_paged(self.ellpack, auto)
        self._on = {device: self}
        backend.release_cached_memory()  # quantising's working memory, not held through training

    @classmethod
    @explained("quantising")
    def from_batches(cls, batches, *, missing=np.nan, max_bin=256, feature_names=None, device=None,
                     device_memory_budget=None, spill_dir=None, ref=None, cuts=None) -> "QuantileMatrix":
        """A matrix from batches of rows that need not fit in memory together (XGBoost's DataIter).

        batches: a callable returning a fresh iterator of (X, y) or (X, y, weight) batches
        (numpy or cupy arrays, dataframes or CSR matrices; any number of rows each). It is
        called twice (and once more, for its first batch only): to take the labels, sketch the
        cuts and find the layout, then to quantise. Only the labels and weights are kept whole; the quantised rows are paged beyond
        device_memory_budget (in host memory, or in files under spill_dir), and with no
        budget a GPU matrix that would not fit half the free device memory pages itself.
        ref: a matrix whose cuts to bin with (as an eval set's); cuts: a sketch.Cuts to bin with.
        """

        check_paging(device_memory_budget, spill_dir)
        if isinstance(max_bin, bool) or not isinstance(max_bin, (int, np.integer)) or max_bin < 2:
            raise ValueError(f"max_bin must be an integer >= 2, got {max_bin!r}")
        missing = float(missing)
        shape = {}

        def rows():
            for k, batch in enumerate(batches()):
                if not isinstance(batch, tuple) or len(batch) not in (2, 3):
                    raise ValueError(f"batch {k} is not an (X, y) or (X, y, weight) tuple")
                f = as_features(batch[0], feature_names, allow_empty=True)
                if shape.setdefault("features", f.n_features) != f.n_features:
                    raise ValueError(f"batch {k} has {f.n_features} features, the first had {shape['features']}")
                shape.setdefault("names", f.feature_names)
                yield f, batch

        peek = next(iter(rows()), None)  # the first batch: the features and, if not given, the device
        if peek is None:
            raise ValueError("batches() gave no batches")
        n_features = shape["features"]
        if device is None:
            device = "cuda" if peek[0].xp is not np else "cpu"
        del peek
        device = resolve_device(device)
        backend = get_backend(device)
        xp = backend.xp
        if ref is not None and cuts is not None:
            raise ValueError("give ref= or cuts=, not both")
        if cuts is not None and cuts.n_features != n_features:
            raise ValueError(f"cuts are for {cuts.n_features} features, the batches have {n_features}")
        if ref is not None and (not isinstance(ref, QuantileMatrix) or ref.n_features != n_features):
            raise ValueError(f"ref must be a QuantileMatrix of {n_features} features")
        m = object.__new__(cls)
        m.max_bin, m.cuts_token = int(max_bin), uuid.uuid4().hex
        if ref is not None:
            m.cuts_token, cuts, m.max_bin = ref.cuts_token, ref.cuts, ref.max_bin

        # The labels and weights are taken on the first of the two passes quantise_blocks makes
        # (the sketch), so that the batches are read twice in all. On a GPU they are kept on the
        # device from the start, and they are joined as that pass ends, before the second makes
        # the pages: the host never holds them beside the pages (at 2.6B rows, it held 34 GiB of
        # labels, their copies and their checks with 68 GiB of pages).
        labels, weights, passes, taken = [], [], [], {}

        def take():
            n = int(sum(v.size for v in labels))
            taken["n"] = n
            taken["label"] = as_vector(_joined(labels), n, "y (labels)", xp, copy=False)
            taken["weight"] = None if not weights or weights[0] is None else \
                as_vector(_joined(weights), n, "weight", xp, nonnegative=True, copy=False)
            labels.clear()
            weights.clear()

        def blocks():
            passes.append(1)
            first = len(passes) == 1
            for f, batch in rows():
                w = None if len(batch) < 3 or batch[2] is None else _batch_vector(batch[2], xp)
                if first:
                    if weights and (w is None) != (weights[0] is None):
                        raise ValueError("give a weight with every batch or with none")
                    labels.append(_batch_vector(batch[1], xp))
                    weights.append(w)
                yield (pages.CsrRows(f) if f.is_sparse else f.dense), w
            if first:
                take()

        auto = []

        def budget_for(n):  # no budget given: page on the GPU only what would not fit
            auto.append(_auto_budget(backend, n, n_features, m.max_bin))
            return None if auto[-1] is None else auto[-1][0]

        _, m.ellpack = pages.quantise_blocks(backend, blocks, n_features, missing, m.max_bin,
                                                device_memory_budget, spill_dir, cuts,
                                                budget_for=None if device_memory_budget is not None else budget_for)
        _say_if_paged(m.ellpack, auto[-1] if auto else None)
        n = taken["n"]
        if m.ellpack.n_rows != n:
            raise ValueError(f"batches() gave {n} rows with their labels, then {m.ellpack.n_rows}: it must give the "
                             "same rows every time it is called")
        m.groups, m.base_margin = None, None
        m.label_lower_bound = m.label_upper_bound = None
        m.label, m.weight = taken["label"], taken["weight"]
        m.n_rows, m.n_features, m.feature_names = n, n_features, shape.get("names")
        m.feature_types, m.categories = None, None  # batches are numeric: no categorical features
        m.missing, m.device = missing, device
        m._source = None  # batches are read again only through their callable: not an eval set without ref
        m._on = {device: m}
        backend.release_cached_memory()  # quantising's working memory, not held through training
        return m

    @property
    def has_labels(self) -> bool:
        return self.label is not None

    @property
    def has_survival_bounds(self) -> bool:
        """Whether the rows carry survival intervals (label_lower_bound, label_upper_bound)."""
        return self.label_lower_bound is not None

    def get_label(self):
        """The labels (XGBoost's DMatrix.get_label), as stored: numpy, or cupy on the GPU."""
        return self.label

    def get_group(self):
        """Query group sizes (numpy), empty without query groups."""
        return np.diff(self.groups.ptr) if self.groups is not None else np.zeros(0, dtype=np.int64)

    def get_weight(self):
        """The weights, or an empty array when there are none (as XGBoost's DMatrix.get_weight)."""
        return self.weight if self.weight is not None else np.zeros(0, dtype=np.float32)

    def get_base_margin(self):
        """The base margins, or an empty array when there are none (XGBoost's DMatrix.get_base_margin)."""
        return self.base_margin if self.base_margin is not None else np.zeros(0, dtype=np.float32)

    def num_row(self) -> int:
        return self.n_rows

    def num_col(self) -> int:
        return self.n_features

    def set_label(self, label) -> None:
        """Replace the labels (XGBoost's DMatrix.set_label), checked as the constructor checks them."""
        self._set("label", as_vector(label, self.n_rows, "y (labels)", self._xp()))

    def set_weight(self, weight) -> None:
        """Replace the weights (XGBoost's DMatrix.set_weight); None removes them. Not for a matrix
        with query groups, whose weights are one per group: build it again with weight=."""
        if self.groups is not None:
            raise ValueError("set_weight() of a matrix with query groups: its weights are one per group; build it "
                             "again with weight=")
        w = as_vector(weight, self.n_rows, "weight", self._xp(), nonnegative=True)
        if w is not None and float(w.sum()) <= 0:
            raise ValueError("weights are all zero: no row carries any weight")
        self._set("weight", w)

    def set_base_margin(self, margin) -> None:
        """Replace the base margins each row starts from (XGBoost's DMatrix.set_base_margin): a
        length-n vector, or (n, K) for K outputs; None removes them."""
        self._set("base_margin", as_margin(margin, self.n_rows, None, self._xp()))

    def set_info(self, *, label=None, weight=None, base_margin=None, feature_names=None, **others) -> None:
        """Set several of the rows' vectors at once (XGBoost's DMatrix.set_info): label, weight,
        base_margin, feature_names; those left None are kept. Query groups, survival bounds and
        feature types are set when the matrix is built."""
        given = sorted(k for k, v in others.items() if v is not None)
        if given:
            raise ValueError(f"set_info sets label, weight, base_margin and feature_names; give {given} when "
                             "building the matrix")
        if label is not None:
            self.set_label(label)
        if weight is not None:
            self.set_weight(weight)
        if base_margin is not None:
            self.set_base_margin(base_margin)
        if feature_names is not None:
            names = [str(n) for n in feature_names]
            if len(names) != self.n_features:
                raise ValueError(f"feature_names has {len(names)} names for {self.n_features} features")
            from .inputs import check_unique_names

            check_unique_names(names)
            self._set("feature_names", names)

    def _xp(self):
        return get_backend(self.device).xp

    def _set(self, name: str, value) -> None:
        setattr(self, name, value)
        self._on = {self.device: self}  # copies on other devices hold the old vector

    @property
    def cuts(self):
        return self.ellpack.cuts

    @property
    def paged(self) -> bool:
        """Whether the quantised rows are held as pages beyond the device (ellpack/pages.py)."""

        return isinstance(self.ellpack, pages.PagedEllpack)

    def shares_cuts_with(self, other: "QuantileMatrix") -> bool:
        """True when both matrices were binned with the same cuts (one built with ref= the other)."""
        return self.cuts_token == other.cuts_token

    def raw_features(self):
        """The X this matrix was binned from, while it lives (held weakly; a DMatrix holds it); None
        once it is gone, or for a matrix binned with cuts= (the Dask layer's), from batches or by take()."""
        return self._source[0]() if getattr(self, "_source", None) is not None else None

    def binned_like(self, ref: "QuantileMatrix", name: str = "the matrix") -> "QuantileMatrix":
        """This matrix binned with ref's cuts (itself where it is already): its rows quantised
        again from its X, its labels, weights, margins and groups kept. What train does with an
        eval set built without ref=, as XGBoost bins a DMatrix eval set with the training cuts.
        ValueError where X is gone (the matrix held it weakly) or cannot be read again."""
        if self.shares_cuts_with(ref):
            return self
        X = self.raw_features()
        if X is None:
            raise ValueError(f"{name} was quantised with cuts of its own, and daskgb holds no data to bin it again "
                             "with the training cuts (its X is gone, or the matrix came from batches or take()): "
                             "build it with QuantileMatrix(..., ref=dtrain), or keep its X while training")
        binned = QuantileMatrix(X, missing=self.missing, ref=ref, device=self.device, _allow_empty=True,
                                **self._source[1])
        if binned.n_rows != self.n_rows:
            raise ValueError(f"{name} had {self.n_rows} rows when it was built; its X has {binned.n_rows} now")
        m = object.__new__(QuantileMatrix)
        m.__dict__.update(self.__dict__)
        for key in ("ellpack", "cuts_token", "max_bin", "feature_names", "feature_types", "categories"):
            setattr(m, key, getattr(binned, key))
        m._source = None
        m._on = {m.device: m}
        return m

    def with_max_bin(self, max_bin: int) -> "QuantileMatrix":
        """This matrix sketched and binned again from its X with max_bin bins a feature (itself
        where it has them, or where its X is gone: training then names the difference). What
        train does when the parameters' max_bin differs, as XGBoost bins a DMatrix with the
        training parameters' max_bin. Labels, weights, margins and groups are kept."""
        X = self.raw_features()
        if max_bin == self.max_bin or X is None:
            return self
        binned = QuantileMatrix(X, weight=self.weight, missing=self.missing, max_bin=max_bin, device=self.device,
                                _allow_empty=True, **self._source[1])
        m = object.__new__(type(self))
        m.__dict__.update(self.__dict__)
        for key in ("ellpack", "cuts_token", "max_bin"):
            setattr(m, key, getattr(binned, key))
        m._on = {m.device: m}
        return m

    def on(self, device: str) -> "QuantileMatrix":
        """This matrix on another device (moved once, then cached)."""
        m = self._on.get(device)
        if m is None:
            xp = get_backend(device).xp
            m = object.__new__(QuantileMatrix)
            m.__dict__.update(self.__dict__)
            m.device = device
            m.ellpack = self.ellpack.to(xp)
            for name in ("label", "weight", "base_margin", "label_lower_bound", "label_upper_bound"):
                v = getattr(self, name, None)
                setattr(m, name, None if v is None else (xp.asarray(v) if xp is not np else to_host(v)))
            m.groups = None if self.groups is None else self.groups.to(xp)
            self._on[device] = m
        return m

    def take(self, rows) -> "QuantileMatrix":
        """The given rows (indices into this matrix's rows, in the order given) as a matrix of
        their own, binned as this one: nothing is quantised again, and the two share their cuts
        (shares_cuts_with), so either may be the other's eval set. The packed rows are gathered
        without unpacking (backend.gather_rows). A paged matrix gives its rows in ascending
        order, as one in-core matrix. A cross-validation split of a matrix is this.

        Not for ranking matrices: a subset of rows would cut query groups apart (take_groups
        takes whole query groups)."""
        return self._take_rows(row_indices(rows, self.n_rows, self.groups is not None))

    def take_groups(self, groups) -> "QuantileMatrix":
        """The given query groups (indices into this matrix's groups, in the order given) as a
        matrix of their own, their rows in that order and each group whole, numbered 0.. in the
        new matrix (as XGBoost's DMatrix.slice(rows, allow_groups=True) then set_group does): a
        cross-validation fold of a ranking matrix."""
        from .ranking import Groups

        if self.groups is None:
            raise ValueError("take_groups() of a matrix without query groups: use take()")
        g = np.asarray(to_host(groups))
        if g.ndim != 1 or (g.size and g.dtype.kind not in "iu"):
            raise ValueError("take_groups() takes a 1-d array of query group indices")
        n_groups = self.groups.n_groups
        if g.size == 0:
            raise ValueError("take_groups() of no groups: a matrix needs at least one row")
        if g.min() < 0 or g.max() >= n_groups:
            raise ValueError(f"query group index out of range: the matrix has {n_groups} groups")
        ptr = self.groups.ptr
        sizes = (ptr[1:] - ptr[:-1])[g]
        starts = np.repeat(ptr[g] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
        m = self._take_rows(np.arange(int(sizes.sum()), dtype=np.int64) + starts)
        weight = self.groups.weight
        m.groups = Groups(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                          weight=None if weight is None else weight[get_backend(self.device).xp.asarray(g)])
        return m

    def _take_rows(self, idx: np.ndarray) -> "QuantileMatrix":
        """take() of checked host row indices (query groups are the caller's to keep whole)."""
        backend = get_backend(self.device)
        xp = backend.xp
        if self.paged:

            idx = np.sort(idx)
            ellpack = pages.compact_rows(backend, self.ellpack, xp.asarray(idx))
        else:
            ell = self.ellpack
            words = xp.zeros(_ellpack.n_words(idx.size * ell.row_stride, ell.bits), dtype=xp.uint32)
            backend.gather_rows(ell, xp.asarray(idx), words, 0)
            ellpack = _dc_replace(ell, words=words, n_rows=int(idx.size))
        m = object.__new__(QuantileMatrix)
        m.__dict__.update(self.__dict__)
        m.ellpack, m.n_rows = ellpack, int(idx.size)
        m._source = None  # X's rows are not these
        rows_d = xp.asarray(idx)
        for name in ("label", "weight", "base_margin", "label_lower_bound", "label_upper_bound"):
            v = getattr(self, name, None)
            setattr(m, name, None if v is None else v[rows_d])
        if m.weight is not None and idx.size and float(m.weight.sum()) <= 0:
            raise ValueError("the rows taken have weights that are all zero: no row carries any weight")
        m._on = {self.device: m}
        return m

    def __getstate__(self):
        # X's weak reference does not travel (a copy elsewhere cannot reach X): the copy is binned as it is.
        state = dict(self.__dict__, _source=None)
        state["_on"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._on = {self.device: self}

    def __repr__(self):
        pages = f" in {self.ellpack.n_pages} pages" if self.paged else ""
        return (f"QuantileMatrix(n_rows={self.n_rows}, n_features={self.n_features}, max_bin={self.max_bin}, "
                f"device={self.device!r}, ellpack={self.ellpack.nbytes / 2**20:.1f} MiB{pages})")


class DMatrix(QuantileMatrix):
    """XGBoost's DMatrix: a QuantileMatrix that keeps the X it was built from (held, where a
    QuantileMatrix holds it weakly), as XGBoost's DMatrix keeps its data. So it is predicted
    exactly, and binned again with the training cuts as an eval set built without ref=, whatever
    becomes of the caller's X (a temporary, say: DMatrix(X.compute())). It costs X's memory for
    the matrix's life; a QuantileMatrix (XGBoost's QuantileDMatrix) does not keep it."""

    public_name = "daskgb.DMatrix"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, _hold_features=True, **kwargs)


def _weakly(X):
    """A callable giving X back while it lives (None after); None where X takes no weak reference."""
    try:
        return weakref.ref(X)
    except TypeError:  # lists, tuples and the like: not kept
        return lambda: None


def xgboost_names(X, y, data, label):
    """(X, y) from a matrix's arguments, where data= and label= (XGBoost's DMatrix names) may
    stand for X and y."""
    for ours, theirs, name in ((X, data, "X"), (y, label, "y")):
        if ours is not None and theirs is not None:
            raise ValueError(f"give {name} or {'data' if name == 'X' else 'label'}= (XGBoost's name for it), not both")
    return data if X is None else X, label if y is None else y


def eval_sets_binned_like(evals, dtrain) -> list:
    """train's eval sets, each binned with dtrain's cuts (QuantileMatrix.binned_like); pairs that
    are not (QuantileMatrix, name) are left for the options' checks to name."""
    if not isinstance(dtrain, QuantileMatrix):
        return list(evals)
    out = []
    for item in evals:
        if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], QuantileMatrix) \
                and not item[0].shares_cuts_with(dtrain) and item[0].n_features == dtrain.n_features:
            item = (item[0].binned_like(dtrain, f"eval set {item[1]!r}"), item[1])
        out.append(item)
    return out


def row_indices(rows, n_rows: int, has_groups: bool = False) -> np.ndarray:
    """take()'s rows as non-negative int64 host indices: indices (negative ones count from the
    end) or a boolean mask; a matrix with query groups refuses, as a subset would cut them."""
    if has_groups:
        raise ValueError("take() of a matrix with query groups would cut the groups apart; split by "
                         "query (e.g. GroupKFold on the qid) and build a matrix per split")
    idx = np.asarray(to_host(rows))
    if idx.dtype == bool:
        if idx.shape != (n_rows,):
            raise ValueError(f"a boolean row mask must have {n_rows} entries, got shape {idx.shape}")
        idx = np.flatnonzero(idx)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise ValueError(f"rows must be a 1-D array of row indices, got {idx.dtype} of shape {idx.shape}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < -n_rows or idx.max() >= n_rows):
        raise ValueError(f"row indices must lie in [-{n_rows}, {n_rows}), got {int(idx.min())}..{int(idx.max())}")
    return np.where(idx < 0, idx + n_rows, idx)


def _auto_budget(backend, n_rows: int, n_features: int, max_bin: int):
    """With no budget given: (budget, free bytes) when the quantised rows might not fit the
    device's free memory (ellpack/pages.py auto_budget), else None (also where the backend's
    memory is the host's: a CPU matrix never pages itself).

    The estimate is an upper bound (the widest symbols max_bin allows), made before the cuts
    exist; quantising then pages only if the rows, packed as they are, exceed the budget, and
    _say_if_paged says so once it is known."""
    free = backend.free_device_memory()
    if free is None:
        return None
    budget = pages.auto_budget(n_rows, n_features, max_bin, free)
    return None if budget is None else (budget, free)


def _say_if_paged(ell, auto) -> None:
    """Warn when a matrix paged itself under the budget it chose (auto: _auto_budget's)."""

    if auto is None or not isinstance(ell, pages.PagedEllpack):
        return
    budget, free = auto
    warnings.warn(f"daskgb: {ell.n_rows} x {ell.n_features} quantised rows take {ell.nbytes / 2**30:.1f} GiB, more "
                  f"than {pages.AUTO_FREE_FRACTION:.0%} of the GPU's {free / 2**30:.1f} GiB free memory; keeping "
                  f"them as {ell.n_pages} pages in host memory, streamed to the GPU (device_memory_budget={budget}; "
                  "pass device_memory_budget= and spill_dir= to choose)", stacklevel=3)


def check_paging(device_memory_budget, spill_dir) -> None:
    """The out-of-core arguments of QuantileMatrix (and DaskQuantileMatrix), checked before any work."""
    if device_memory_budget is not None and (isinstance(device_memory_budget, bool) or not isinstance(
            device_memory_budget, (int, np.integer)) or device_memory_budget <= 0):
        raise ValueError(f"device_memory_budget must be a positive number of bytes, got {device_memory_budget!r}")
    if spill_dir is not None and device_memory_budget is None:
        raise ValueError("spill_dir= holds pages of a matrix over its device_memory_budget; give "
                         "device_memory_budget= too")


def _query_groups(qid, group, groups, n_rows):
    """The matrix's query groups from qid= or group= (or the Dask layer's ready-made groups), or None."""
    given = [name for name, v in (("qid", qid), ("group", group), ("_groups", groups)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one of qid= and group=, not {' and '.join(given)}")
    from . import ranking

    if qid is not None:
        return ranking.groups_from_qid(qid, n_rows)
    if group is not None:
        return ranking.groups_from_sizes(group, n_rows)
    if groups is not None:
        if groups.n_rows != n_rows:
            raise ValueError(f"the query groups cover {groups.n_rows} rows but X has {n_rows}")
        return groups
    return None


def _check_sentinel(features, cuts, missing: float, names) -> None:
    """A `missing` sentinel (not NaN) that is every value of a feature leaves nothing to split
    on there: a warning naming the features, an error when it is so for every feature (the
    model could only be a constant). A sentinel that is one value among others is what
    XGBoost means by missing=: those entries take each split's learned default direction."""
    if np.isnan(missing):
        return
    # A feature with no present values has one (placeholder) cut; so has a constant one.
    candidates = np.flatnonzero(np.diff(to_host(cuts.ptrs)) <= 1)
    if candidates.size == 0:
        return
    xp, m = features.xp, np.float32(missing)
    dead = []
    for f in candidates.tolist():
        if features.is_sparse:
            col = features.data[features.indices == f]
        else:
            col = features.dense[:, f]
        is_sentinel = col == m
        if bool(is_sentinel.any()) and bool((is_sentinel | xp.isnan(col)).all()):
            dead.append(f)
    if not dead:
        return
    named = [names[f] if names else f for f in dead]
    if len(dead) == features.n_features:
        raise ValueError(f"every entry of X is missing: each is NaN or missing={missing!r}, so there is nothing to "
                         "split on. If that value is real data here, pass another missing= (np.nan by default)")
    warnings.warn(f"daskgb: missing={missing!r} is the only value of feature(s) {named[:10]} (every entry is it or "
                  "NaN): they are all missing and no split can use them. If it is a real value there, pass another "
                  "missing=", stacklevel=3)


def _batch_vector(v, xp):
    """A batch's labels or weights: flat float32 on xp's device (pandas or numpy through numpy)."""
    if array_module(v) is np or xp is np:
        v = np.asarray(to_host(v), dtype=np.float32)
    return xp.asarray(v, dtype=xp.float32).ravel()


def _joined(parts: list):
    """The parts as one new array (never one of them: a batch's array stays the caller's)."""
    if not parts:
        return np.zeros(0, dtype=np.float32)
    return array_module(parts[0]).concatenate(parts)


def _make_cuts(features, weight, missing, max_bin):
    budget = sketch.sketch_budget(features.n_rows, max_bin)
    if features.is_sparse:
        s = sketch.summarize_csr(features.indptr, features.indices, features.data, features.n_features, weight,
                                 missing, budget)
    else:
        s = sketch.summarize(features.dense, weight, missing, budget)
    return sketch.make_cuts(s, max_bin, categorical_mask(features.feature_types))


def categorical_mask(feature_types):
    """bool (n_features,) of the categorical features, or None when there are none."""
    if feature_types is None:
        return None
    return np.array([t == "c" for t in feature_types], dtype=bool)


def _survival_bounds(lower, upper, n: int, xp):
    """(label_lower_bound, label_upper_bound) as float32 vectors, checked (survival.py), or
    (None, None); one without the other is an error."""
    if lower is None and upper is None:
        return None, None
    if lower is None or upper is None:
        raise ValueError("label_lower_bound and label_upper_bound go together: give both (an observed time: "
                         "lower == upper; right-censored: upper = inf)")
    from .survival import check_bounds

    lo = as_vector(lower, n, "label_lower_bound", xp)
    hi = as_vector(upper, n, "label_upper_bound", xp, finite=False)
    check_bounds(to_host(lo), to_host(hi))
    return lo, hi
