"""Booster: a trained model's trees and parameters, its prediction, attributes, and save/load."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import category_sets
from .arrays import to_host
from .backend import get_backend, resolve_device
from .inputs import as_features, check_feature_names
from .layouts import PREDICT_NODE_DTYPE
from .matrix import QuantileMatrix
from .objectives import get_objective
from .params import TrainParams
from .predict import add_tree_binned
from .tree import Tree
from . import ubjson

MODEL_FORMAT = "daskgb-model"
# Version 2 adds num_parallel_tree (trees per output group a round); a model of one tree a
# group is written as version 1, which daskgb releases before it read as well.
MODEL_VERSION = 2
# XGBoost's feature types: "c" categorical, the rest numeric.
_FEATURE_TYPES = ("q", "c", "float", "int", "i")


class Booster:
    """A trained gradient-boosted tree ensemble."""

    def __init__(self, params: dict | None = None, trees=None, base_score=0.5, n_features: int = 0,
                 feature_names=None, tree_info=None, feature_types=None, categories=None, *, model_file=None,
                 cache=None):
        """A booster of params (XGBoost's names) and trees. As xgboost.Booster: model_file= a
        model to load (a path, the bytes save_raw gives, or a Booster to copy), and cache= the
        matrices (a list of QuantileMatrix) whose features an empty booster takes, as
        Booster(params, [dtrain]) before update() rounds; a list of matrices as the second
        positional argument is read as cache."""
        if trees and all(isinstance(t, QuantileMatrix) for t in trees):
            cache, trees = trees, None
        params = _param_dict(params)
        self.params = TrainParams.from_dict(params)
        self._raw_params = params
        self.trees: list[Tree] = list(trees or [])
        # Output group of each tree: its class for multiclass models (K trees per round, in class order).
        self.tree_info: list[int] = list(tree_info) if tree_info is not None else [0] * len(self.trees)
        if len(self.tree_info) != len(self.trees):
            raise ValueError(f"tree_info has {len(self.tree_info)} entries for {len(self.trees)} trees")
        # One number, or for multiclass the K class margins.
        self.base_score = float(base_score) if np.ndim(base_score) == 0 else [float(v) for v in base_score]
        self.n_features = int(n_features)
        self._feature_names = None if feature_names is None else list(feature_names)
        # A type per feature (None: all numeric): "c" categorical, else XGBoost's numeric types
        # ("q", "float", "int", "i"); and a dataframe's categories by feature (category names in
        # code order), with which predict recodes a dataframe's categories.
        self._feature_types = None if feature_types is None else list(feature_types)
        self.categories = categories
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        # XGBoost's string attributes: the user's (set_attr) and training's ("training_path").
        self._attributes: dict[str, str] = {}
        self._packed = None  # (n_trees, {(start, end, group): (nodes, offsets)}): _packed_group's packs
        for m in cache or ():
            if not isinstance(m, QuantileMatrix):
                raise TypeError(f"Invalid cache item: {type(m).__name__} (cache holds QuantileMatrix objects)")
            if not self.trees and not self.n_features:
                self.n_features, self._feature_names = m.n_features, m.feature_names
                self._feature_types, self.categories = m.feature_types, m.categories
        if model_file is not None:
            if isinstance(model_file, Booster):
                self.__dict__.update(model_file.copy().__dict__)
            elif isinstance(model_file, (str, os.PathLike, bytes, bytearray)):
                self.load_model(model_file)
            else:
                raise TypeError(f"model_file must be a path, the bytes of a model or a Booster, got "
                                f"{type(model_file).__name__}")
            if params:
                self.set_param(params)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_packed"] = None  # a cache: a pickled model (sent to Dask workers) travels without it
        return state

    def __setstate__(self, state):
        for name in ("feature_names", "feature_types"):  # pickled before they were properties
            if name in state:
                state["_" + name] = state.pop(name)
        self.__dict__.update(state)

    # ------------------------------------------------------------------ copies and slices (XGBoost's)
    def __copy__(self) -> "Booster":
        return self.__deepcopy__({})

    def __deepcopy__(self, memo) -> "Booster":
        """A copy that shares nothing with this booster (XGBoost's copies are all deep)."""
        out = object.__new__(Booster)
        out.__dict__.update(copy.deepcopy(self.__getstate__(), memo))
        return out

    def copy(self) -> "Booster":
        """A copy of the booster (xgboost.Booster.copy)."""
        return self.__deepcopy__({})

    def __getitem__(self, val) -> "Booster":
        """The model of some boosting rounds, as XGBoost's slicing: booster[3:7] keeps rounds
        3..6 (each round's trees, every output group's), booster[1:7:2] rounds 1, 3, 5,
        booster[i] round i, booster[...] all; a stop of None or 0 means the last round. The
        slice drops best_iteration and best_score and keeps the other attributes, and predicts
        as this booster with iteration_range=(start, stop)."""
        if isinstance(val, (int, np.integer)) and not isinstance(val, (bool, np.bool_)):
            val = slice(int(val), int(val) + 1)
        if val is Ellipsis:
            val = slice(0, 0)
        if isinstance(val, tuple):
            raise ValueError("Only supports slicing through 1 dimension.")
        if not isinstance(val, slice):
            raise TypeError(f"Expecting int, slice, numpy.integer or Ellipsis to slice a Booster, got "
                            f"{type(val).__name__}")
        start = 0 if val.start is None or val.start is Ellipsis else int(val.start)
        stop = 0 if val.stop is None or val.stop is Ellipsis else int(val.stop)
        step = 1 if val.step is None else int(val.step)
        if val.stop is not None and val.stop is not Ellipsis and stop < start:
            raise ValueError(f"Invalid slice {val}: its stop is before its start")
        if start < 0:
            raise ValueError(f"Invalid slice {val}: start must be >= 0 (rounds are counted from 0)")
        if step < 1:
            raise ValueError(f"Invalid slice {val}: step must be >= 1")
        rounds = self.num_boosted_rounds()
        stop = rounds if stop == 0 else stop
        if stop == start:
            raise ValueError(f"Empty slice is not allowed: {val} holds no round")
        if stop > rounds or step > stop - start:
            raise IndexError(f"Layer index out of range: {val} of a model of {rounds} rounds")
        k = self.trees_per_round
        keep = [t for r in range(start, stop, step) for t in range(r * k, (r + 1) * k)]
        state = self.__getstate__()
        state.update(trees=[], tree_info=[], best_iteration=None, best_score=None)
        out = object.__new__(Booster)
        out.__dict__.update(copy.deepcopy(state))
        out.trees = [copy.deepcopy(self.trees[i]) for i in keep]
        out.tree_info = [self.tree_info[i] for i in keep]
        return out

    def __iter__(self):
        """Each boosting round as a model of its own (XGBoost's iteration over a Booster)."""
        for i in range(self.num_boosted_rounds()):
            yield self[i]

    # ------------------------------------------------------------------ introspection
    @property
    def objective(self):
        return get_objective(self.params.objective, self.params)

    def num_features(self) -> int:
        """The number of features the model takes (xgboost.Booster.num_features)."""
        return self.n_features

    @property
    def feature_names(self) -> list[str] | None:
        """The features' names (None: unnamed); settable, as XGBoost's: a list of one distinct
        string a feature, or None."""
        return self._feature_names

    @feature_names.setter
    def feature_names(self, names) -> None:
        if names is None:
            self._feature_names = None
            return
        names = _feature_info(names, self.n_features, "feature names")
        if len(set(names)) != len(names):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"feature_names must be unique. Duplicates found: {duplicates}")
        if not all(isinstance(n, str) and not any(c in n for c in "[]<") for n in names):
            raise ValueError("feature_names must be string, and may not contain [, ] or <")
        self._feature_names = names

    @property
    def feature_types(self) -> list[str] | None:
        """The features' types (None: all numeric): "c" categorical, "q", "float", "int" or "i"
        (XGBoost's numeric types); settable, as XGBoost's, to a list of one type a feature or
        None. The features the model splits by category must stay "c"."""
        return self._feature_types

    @feature_types.setter
    def feature_types(self, types) -> None:
        if types is not None:
            types = _feature_info(types, self.n_features, "feature types")
            bad = [t for t in types if t not in _FEATURE_TYPES]
            if bad:
                raise ValueError(f"feature_types holds {bad[0]!r}; a feature's type is one of {list(_FEATURE_TYPES)}")
        categorical = sorted({int(t.feature[node]) for t in self.trees for node in t.categories})
        lost = [f for f in categorical if types is None or types[f] != "c"]
        if lost:
            raise ValueError(f"the model splits feature {lost[0]} by category: its feature_types must keep it 'c'")
        self._feature_types = types

    @property
    def n_groups(self) -> int:
        """Outputs per row (trees per round): num_class for multiclass models, the number of
        quantile_alpha values for reg:quantileerror, else 1."""
        return self.objective.n_groups

    @property
    def trees_per_round(self) -> int:
        """Trees a boosting round adds: num_parallel_tree for each output group, group by group
        (XGBoost's layout: a round's trees of group 0, then group 1's, ...)."""
        return self.n_groups * self.params.num_parallel_tree

    def num_boosted_rounds(self) -> int:
        return len(self.trees) // self.trees_per_round

    def __len__(self) -> int:
        return self.num_boosted_rounds()

    def get_score(self, importance_type: str = "weight") -> dict:
        """Feature importance as XGBoost's get_score: weight (splits), gain and cover (mean per split),
        total_gain and total_cover."""
        kinds = ("weight", "gain", "cover", "total_gain", "total_cover")
        if importance_type not in kinds:
            raise ValueError(f"importance_type must be one of {kinds}, got {importance_type!r}")
        count = np.zeros(self.n_features)
        gain = np.zeros(self.n_features)
        cover = np.zeros(self.n_features)
        for t in self.trees:
            split = ~t.is_leaf
            np.add.at(count, t.feature[split], 1)
            np.add.at(gain, t.feature[split], t.gain[split].astype(np.float64))
            np.add.at(cover, t.feature[split], t.cover[split].astype(np.float64))
        names = self.feature_names or [f"f{i}" for i in range(self.n_features)]
        with np.errstate(invalid="ignore", divide="ignore"):
            value = {"weight": count, "gain": gain / count, "cover": cover / count, "total_gain": gain,
                     "total_cover": cover}[importance_type]
        return {names[i]: float(value[i]) for i in range(self.n_features) if count[i] > 0}

    def attributes(self) -> dict[str, str]:
        """The model's attributes, as XGBoost's Booster.attributes(): those set with set_attr,
        "training_path" (how training ran its rounds: daskgb/training/plan.py's paths) with
        "training_path_refused" (why each faster path was not taken), and best_iteration /
        best_score once early stopping set them."""
        out = dict(self._attributes)
        if self.best_iteration is not None:
            out["best_iteration"] = str(self.best_iteration)
        if self.best_score is not None:
            out["best_score"] = str(self.best_score)
        return out

    def attr(self, key: str) -> str | None:
        """One attribute (see attributes()), or None."""
        return self.attributes().get(key)

    def set_attr(self, **kwargs) -> None:
        """Set attributes to strings; None deletes one (XGBoost's Booster.set_attr)."""
        for key, value in kwargs.items():
            if value is None:
                self._attributes.pop(key, None)
            elif not isinstance(value, str):
                raise ValueError(f"attribute {key!r} must be a string (or None to delete it), got "
                                 f"{type(value).__name__}")
            else:
                self._attributes[key] = value

    def set_param(self, params, value=None) -> None:
        """Set training parameters (XGBoost names or aliases), checked: set_param(key, value),
        set_param({key: value, ...}) or set_param([(key, value), ...]) (xgboost.Booster.set_param);
        e.g. by a callback between rounds. Pairs naming eval_metric more than once add metrics."""
        from .params import ALIASES

        if isinstance(params, str):
            if value is None:
                raise ValueError(f"set_param({params!r}) needs a value: set_param(key, value)")
            pairs = [(params, value)]
        elif isinstance(params, Mapping):
            pairs = list(params.items())
        else:
            try:
                pairs = [(k, v) for k, v in params]
            except (TypeError, ValueError):
                raise ValueError("set_param takes (key, value), a dict or a list of (key, value) pairs") from None
        updates = {}
        for key, v in pairs:
            if v is None:
                continue
            if key == "eval_metric" and "eval_metric" in updates:
                before = updates["eval_metric"]
                v = (list(before) if isinstance(before, (list, tuple)) else [before]) + [v]
            updates[key] = v
        names = {ALIASES.get(k, k) for k in updates}
        raw = {k: v for k, v in self._raw_params.items() if ALIASES.get(k, k) not in names}
        raw.update(updates)
        params = TrainParams.from_dict(raw)
        if params.num_parallel_tree != self.params.num_parallel_tree and self.trees:
            # The model's rounds are counted in trees_per_round: every round must hold as many.
            raise ValueError(f"num_parallel_tree cannot change once the model has trees (it has "
                             f"{self.params.num_parallel_tree} a group in each of its rounds)")
        self.params = params
        self._raw_params = raw

    def save_config(self) -> str:
        """The training configuration as XGBoost's Booster.save_config gives it: a JSON string of
        XGBoost's layout (learner.generic_param, gradient_booster.tree_train_param, ...) holding
        the parameters daskgb has (xgboost_config.py)."""
        from .xgboost_config import save_config

        return save_config(self)

    def load_config(self, config: str) -> None:
        """Set the parameters a save_config() string (daskgb's or XGBoost's) holds, as
        xgboost.Booster.load_config; its metrics become eval_metric where they are not the
        objective's default one."""
        from .xgboost_config import params_of_config

        params = params_of_config(config)
        metrics = params.pop("eval_metric", None)
        self.set_param(params)
        if metrics and metrics != [self.objective.default_metric]:
            self.set_param({"eval_metric": metrics})

    def keep_rounds(self, n: int) -> None:
        """Drop the trees of every round after the first n."""
        k = self.trees_per_round
        del self.trees[n * k :], self.tree_info[n * k :]
        if self.best_iteration is not None:
            self.best_iteration = min(self.best_iteration, n - 1)
        self._packed = None

    # ------------------------------------------------------------------ prediction
    @property
    def has_categorical_splits(self) -> bool:
        return any(t.categories for t in self.trees)

    def _tree_slice(self, iteration_range) -> tuple[int, int]:
        """The trees [first, last) of a range of boosting rounds (trees_per_round a round)."""
        rounds = self.num_boosted_rounds()
        start, end = iteration_range or (0, 0)
        if end == 0:
            end = rounds if self.best_iteration is None else self.best_iteration + 1
        if not 0 <= start <= end <= rounds:
            raise ValueError(f"iteration_range {iteration_range} is outside the model's {rounds} rounds")
        return start * self.trees_per_round, end * self.trees_per_round

    def _packed_group(self, start: int, end: int, group: int):
        """(nodes, offsets) of output group `group`'s trees among trees [start, end), packed
        once per model (None: no such tree). The key holds the number of trees: training
        appends to them, and keep_rounds, the only other change, forgets the packs."""
        key = (start, end, group, len(self.trees))
        if self._packed is None or self._packed[0] != len(self.trees):
            self._packed = (len(self.trees), {})
        packs = self._packed[1]
        if key not in packs:
            trees = [t for t, g in zip(self.trees[start:end], self.tree_info[start:end]) if g == group]
            packs[key] = self._packed_trees(trees) if trees else None
        return packs[key]

    def _packed_trees(self, trees):
        """All the trees' nodes as one PREDICT_NODE_DTYPE array (field by field, not tree by
        tree: a model of 500 trees packs in about a millisecond) and each tree's first node."""
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        offsets = np.zeros(len(trees) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(sizes)
        flat = np.zeros(int(offsets[-1]), dtype=PREDICT_NODE_DTYPE)
        for name in ("left", "right", "feature", "default_left", "threshold", "value"):
            if trees:
                flat[name] = np.concatenate([getattr(t, name) for t in trees])
        return flat, offsets

    def predict(self, data, output_margin: bool = False, iteration_range=(0, 0), missing=np.nan,
                base_margin=None, *, pred_leaf: bool = False, pred_contribs: bool = False,
                approx_contribs: bool = False, pred_interactions: bool = False, strict_shape: bool = False):
        """Predictions for raw features (numpy, pandas, cupy, scipy CSR) or a QuantileMatrix.

        Returns numpy for host input and cupy for cupy input. Missing values (NaN
        or `missing`) take each split's default direction.

        As XGBoost's (raw features, or a QuantileMatrix binned with the model's cuts):
        - ``pred_contribs=True``: each feature's SHAP value (exact TreeSHAP) of each row's
          margin, and a last column holding the expected margin (the base margin included):
          (n_rows, n_features + 1), or (n_rows, n_groups, n_features + 1) for several outputs;
          a row's values sum to its margin. With ``approx_contribs=True``, Saabas's approximation
          (each split's change of the mean leaf value, credited to its feature).
        - ``pred_interactions=True``: SHAP interaction values, (n_rows, n_features + 1,
          n_features + 1) (a group axis after the rows for several outputs): entry (i, j) half
          the change of j's SHAP value when i is known, the diagonal each feature's own effect,
          so that a row's (i, :) sums to its SHAP value of i. With approx_contribs (as XGBoost),
          the diagonal holds Saabas's values and the rest is zero.
        - ``pred_leaf=True``: the id of the leaf each tree sends each row to, (n_rows, n_trees),
          as float32 (XGBoost's type).

        ``strict_shape=True`` gives XGBoost's shapes that do not depend on the model's outputs
        (strict_shape_of): (n_rows, outputs) predictions, (n_rows, groups, n_features + 1)
        contributions, (n_rows, groups, n_features + 1, n_features + 1) interactions and
        (n_rows, rounds, groups, num_parallel_tree) leaf ids.
        """
        out = self._predict(data, output_margin, iteration_range, missing, base_margin, pred_leaf=pred_leaf,
                            pred_contribs=pred_contribs, approx_contribs=approx_contribs,
                            pred_interactions=pred_interactions)
        if not strict_shape:
            return out
        kind = ("leaf" if pred_leaf else "contribs" if pred_contribs else
                "interactions" if pred_interactions else "value")
        return out.reshape(self.strict_shape_of(out.shape[0], kind, out.size // max(out.shape[0], 1)))

    def strict_shape_of(self, n_rows: int, kind: str, per_row: int) -> tuple:
        """The shape XGBoost's strict_shape=True gives n_rows predictions of a kind ("value" or
        "margin", "leaf", "contribs", "interactions") holding per_row numbers a row."""
        groups = self.n_groups
        if kind == "leaf":
            return (n_rows, per_row // self.trees_per_round, groups, self.params.num_parallel_tree)
        if kind == "contribs":
            return (n_rows, groups, self.n_features + 1)
        if kind == "interactions":
            return (n_rows, groups, self.n_features + 1, self.n_features + 1)
        if kind in ("value", "margin"):
            return (n_rows, per_row)
        raise ValueError(f"unknown kind of prediction {kind!r}")

    def _predict(self, data, output_margin, iteration_range, missing, base_margin, *, pred_leaf, pred_contribs,
                 approx_contribs, pred_interactions):
        """predict(), its shapes those of strict_shape=False."""
        start, end = self._tree_slice(iteration_range)
        if approx_contribs and not (pred_contribs or pred_interactions):
            raise ValueError("approx_contribs=True is a kind of pred_contribs=True; pass both")
        if sum(map(bool, (pred_leaf, pred_contribs, pred_interactions))) > 1:
            raise ValueError("pred_leaf, pred_contribs and pred_interactions are different outputs; ask for one")
        explain = pred_leaf or pred_contribs or pred_interactions
        if isinstance(data, QuantileMatrix):
            if self.feature_names is not None and data.feature_names != self.feature_names:
                # As XGBoost validates a DMatrix: a named model predicts only matrices of its names
                # (raw arrays without names are taken by position).
                raise ValueError(f"feature_names mismatch: the model has {self.feature_names}, the matrix has "
                                 f"{data.feature_names}")
            raw = data.raw_features() if getattr(self, "_train_cuts_token", None) != data.cuts_token else None
            if raw is not None:
                # Binned with cuts of its own: its rows as given (the matrix holds them weakly), as
                # XGBoost predicts any DMatrix, with the matrix's missing value and base margins.
                base_margin = data.base_margin if base_margin is None else base_margin
                data, missing = raw, data.missing
            elif not explain:
                return self._predict_matrix(data, output_margin, start, end)
            else:
                data, missing = self._representative_features(data), np.nan
        features = as_features(data, feature_types=self.feature_types if _is_frame(data) else None,
                               enable_categorical=self.feature_types is not None, categories=self.categories)
        if features.n_features != self.n_features:
            raise ValueError(f"the model was trained on {self.n_features} features, the data has "
                             f"{features.n_features}")
        check_feature_names(self.feature_names, features.feature_names, "the model", "the data")
        on_gpu = features.xp is not np
        device = "cuda" if on_gpu else resolve_device(self.params.device)
        if self.has_categorical_splits and not get_backend(device).splits_by_category:
            # A backend whose stages do not route categorical splits: the host walks them, and
            # the result goes back to the caller's device.
            out = self.predict(features.to(np).densify(missing), output_margin, iteration_range, missing,
                               None if base_margin is None else to_host(base_margin), pred_leaf=pred_leaf,
                               pred_contribs=pred_contribs, approx_contribs=approx_contribs,
                               pred_interactions=pred_interactions) if on_gpu else None
            if on_gpu:
                import cupy

                return cupy.asarray(out)
            device = "cpu"
        backend = get_backend(device)
        xp = backend.xp
        X = features.to(xp).densify(missing)
        if pred_leaf:
            out = self._leaf_indices(backend, X, start, end, float(missing))
            return out if on_gpu else to_host(out)
        if pred_contribs:
            out = self._contributions(backend, X, start, end, float(missing), base_margin, approx_contribs)
            return out if on_gpu else to_host(out)
        if pred_interactions:
            out = self._interactions(backend, X, start, end, float(missing), base_margin, approx_contribs)
            return out if on_gpu else to_host(out)
        margin = self._initial_margin(xp, features.n_rows, base_margin)
        for group in range(self.n_groups):
            packed = self._packed_group(start, end, group)
            if packed is None:
                continue
            nodes, offsets = packed
            cats = self._cached(("categories", start, end, group), lambda: category_sets.pack(
                [t for t, g in zip(self.trees[start:end], self.tree_info[start:end]) if g == group], offsets))
            if margin.ndim == 1:
                backend.predict_margin(X, nodes, offsets, margin, float(missing), categories=cats)
            elif xp is np:
                column = np.ascontiguousarray(margin[:, group])
                backend.predict_margin(X, nodes, offsets, column, float(missing), categories=cats)
                margin[:, group] = column
            else:  # daskgb's copies: CuPy's strided ones would be compiled at first use
                from . import device_arrays

                column = device_arrays.contiguous_float32(margin[:, group])
                backend.predict_margin(X, nodes, offsets, column, float(missing), categories=cats)
                device_arrays.copy_into(margin[:, group], column)
        out = margin if output_margin else self.objective.transform(xp, margin)
        return out if on_gpu else to_host(out)

    def _representative_features(self, m: QuantileMatrix):
        """A value for each row's bin of each feature, NaN where missing: the bin's lower edge (the
        feature's minimum for the first bin). Every split of a model trained on m's cuts is at a
        bin's upper edge, so these values take the paths m's rows took in training, and SHAP
        values and leaves can be read off a QuantileMatrix as off its raw features. On m's
        device (numpy or cupy)."""
        from .ellpack.reference import feature_bins

        if m.n_features != self.n_features:
            raise ValueError(f"the model was trained on {self.n_features} features, the matrix has {m.n_features}")
        if getattr(self, "_train_cuts_token", None) != m.cuts_token:
            raise ValueError("pred_contribs, pred_interactions and pred_leaf read a QuantileMatrix only with the "
                             "cuts the model was trained on (build it with ref=the training matrix); pass the raw "
                             "features instead")
        if m.paged:
            raise ValueError("pred_contribs, pred_interactions and pred_leaf take an in-core QuantileMatrix; pass "
                             "the raw features of a paged one")
        host = m.on("cpu")
        ell = host.ellpack
        ptrs = to_host(ell.cuts.ptrs).astype(np.int64)
        values, lows = to_host(ell.cuts.values), to_host(ell.cuts.min_values)
        rows = np.arange(m.n_rows)
        X = np.empty((m.n_rows, m.n_features), dtype=np.float32)
        for f in range(m.n_features):
            b = feature_bins(ell, rows, np.full(m.n_rows, f, dtype=np.int64))
            edges = np.concatenate([lows[f : f + 1], values[ptrs[f] : max(ptrs[f + 1] - 1, ptrs[f])]])
            X[:, f] = np.where(b < 0, np.float32(np.nan), edges[np.clip(b, 0, edges.size - 1)])
        return get_backend(m.device).to_device(X)

    def _leaf_indices(self, backend, X, start: int, end: int, missing: float):
        """(n_rows, trees [start, end)) float32: each tree's leaf id for each row."""
        xp = backend.xp
        nodes, offsets = self._cached(("all", start, end), lambda: self._packed_trees(self.trees[start:end]))
        cats = self._cached(("all categories", start, end), lambda: category_sets.pack(self.trees[start:end], offsets))
        ids = xp.zeros((X.shape[0], end - start), dtype=xp.int32)
        backend.leaf_indices(X, nodes, offsets, ids, missing, categories=cats)
        return ids.astype(xp.float32)

    def _contributions(self, backend, X, start: int, end: int, missing: float, base_margin, approx: bool):
        """(n_rows, n_features + 1) float32 SHAP (or Saabas) values with the expected margin
        last, or (n_rows, n_groups, n_features + 1): summed in float64, one output group at a time."""
        from .explain.paths import node_means, tree_paths

        xp = backend.xp
        n, f, k = X.shape[0], self.n_features, self.n_groups
        start_margin = self._initial_margin(xp, n, base_margin)
        out = xp.zeros((n, k, f + 1), dtype=xp.float32)
        for group in range(k):
            trees = [t for t, g in zip(self.trees[start:end], self.tree_info[start:end]) if g == group]
            phi = xp.zeros((n, f + 1), dtype=xp.float64)
            if approx:
                nodes, offsets = self._cached(("saabas", start, end, group), lambda: self._packed_trees(trees))
                means = self._cached(("means", start, end, group), lambda: np.concatenate(
                    [node_means(t) for t in trees]) if trees else np.zeros(0))
                cats = self._cached(("saabas categories", start, end, group),
                                    lambda: category_sets.pack(trees, offsets))
                backend.saabas_contributions(X, nodes, offsets, means, phi, missing, categories=cats)
            else:
                paths = self._cached(("paths", start, end, group), lambda: tree_paths(trees))
                backend.shap_contributions(X, paths, phi, missing)
            phi[:, f] += (start_margin if start_margin.ndim == 1 else start_margin[:, group]).astype(xp.float64)
            out[:, group, :] = phi.astype(xp.float32)
        return out[:, 0, :] if k == 1 else out

    def _interactions(self, backend, X, start: int, end: int, missing: float, base_margin, approx: bool):
        """(n_rows, F + 1, F + 1) float32 SHAP interaction values (a group axis after the rows
        for several outputs): the off-diagonal pairs path by path, the diagonal each feature's
        SHAP value less its row's pairs (XGBoost's definition)."""
        from .explain.paths import tree_paths

        xp = backend.xp
        n, f, k = X.shape[0], self.n_features, self.n_groups
        phi = self._contributions(backend, X, start, end, missing, base_margin, approx)
        phi = phi.reshape(n, k, f + 1)
        out = xp.zeros((n, k, f + 1, f + 1), dtype=xp.float32)
        diagonal = xp.arange(f + 1)
        for group in range(k):
            pairs = xp.zeros((n, f + 1, f + 1), dtype=xp.float64)
            if not approx:
                trees = [t for t, g in zip(self.trees[start:end], self.tree_info[start:end]) if g == group]
                paths = self._cached(("paths", start, end, group), lambda: tree_paths(trees))
                backend.shap_interactions(X, paths, pairs, missing)
            pairs[:, diagonal, diagonal] = phi[:, group, :].astype(xp.float64) - pairs.sum(axis=2)
            out[:, group] = pairs.astype(xp.float32)
        return out[:, 0] if k == 1 else out

    def _cached(self, key, make):
        """make(), kept with the packed trees (forgotten with them when the trees change)."""
        if self._packed is None or self._packed[0] != len(self.trees):
            self._packed = (len(self.trees), {})
        packs = self._packed[1]
        if key not in packs:
            packs[key] = make()
        return packs[key]

    def _initial_margin(self, xp, n: int, base_margin=None):
        """(n,) float32 initial margins, or (n, K) for multiclass models."""
        if base_margin is not None:
            from .inputs import as_margin

            return as_margin(base_margin, n, self.n_groups, xp).copy()
        return initial_margin(xp, self.objective, self.base_score, n)

    def _predict_matrix(self, m: QuantileMatrix, output_margin: bool, start: int, end: int):
        if m.n_features != self.n_features:
            raise ValueError(f"the model was trained on {self.n_features} features, the data has {m.n_features}")
        cuts_ok = getattr(self, "_train_cuts_token", None) == m.cuts_token
        if not cuts_ok:
            raise ValueError("a QuantileMatrix can be predicted only with the cuts the model was trained on, or "
                             "while the X it was built from lives (build it with ref=the training matrix, or keep "
                             "its X); pass the raw features instead")
        device = resolve_device(self.params.device)
        if self.has_categorical_splits and not get_backend(device).splits_by_category:
            device = "cpu"  # the host walks categorical splits
        backend = get_backend(device)
        m = m.on(device)
        margin = m.base_margin.copy() if m.base_margin is not None else self._initial_margin(backend.xp, m.n_rows)
        for t, group in zip(self.trees[start:end], self.tree_info[start:end]):
            add_tree_binned(backend, m.ellpack, t, margin if margin.ndim == 1 else margin[:, group])
        out = margin if output_margin else self.objective.transform(backend.xp, margin)
        return to_host(out)

    # ------------------------------------------------------------------ save / load
    def to_dict(self) -> dict:
        npt = self.params.num_parallel_tree
        parallel = {"num_parallel_tree": npt} if npt > 1 else {}
        return {
            "format": MODEL_FORMAT,
            # Version 1 for what a daskgb of version 1 reads right; a forest or categorical
            # splits (which it would read as numeric ones) make it refuse the file instead.
            "version": MODEL_VERSION if npt > 1 or self.has_categorical_splits else 1,
            **parallel,
            "params": self._raw_params,
            "objective": self.params.objective,
            "base_score": self.base_score,
            "num_features": self.n_features,
            "feature_names": self.feature_names,
            "feature_types": self.feature_types,
            "categories": None if self.categories is None else {
                str(f): [_json_name(v) for v in names] for f, names in self.categories.items()},
            "best_iteration": self.best_iteration,
            "best_score": self.best_score,
            "trees": [t.to_dict() for t in self.trees],
            "tree_info": list(self.tree_info),
            "attributes": dict(self._attributes),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Booster":
        if not isinstance(d, dict):
            raise ValueError(f"not a daskgb model: a JSON {type(d).__name__}, not an object")
        if d.get("format") != MODEL_FORMAT:
            raise ValueError(f"not a daskgb model (format {d.get('format')!r})")
        version = d.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and version > MODEL_VERSION:
            raise ValueError(f"daskgb model version {version} was written by a newer daskgb; this daskgb reads "
                             f"versions up to {MODEL_VERSION}: upgrade daskgb to load it")
        if version not in (1, MODEL_VERSION) or isinstance(version, bool):
            raise ValueError(f"daskgb model version {version!r} is not supported (this daskgb reads versions 1 "
                             f"to {MODEL_VERSION})")
        lacks = [k for k in ("params", "base_score", "num_features", "feature_names", "trees") if k not in d]
        if lacks:
            raise ValueError(f"corrupted daskgb model: it lacks {lacks}")
        if not isinstance(d["trees"], list):
            raise ValueError(f"corrupted daskgb model: trees is a {type(d['trees']).__name__}, not a list")
        n_features = d["num_features"]
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 0:
            raise ValueError(f"corrupted daskgb model: num_features is {n_features!r}")
        trees = []
        for i, t in enumerate(d["trees"]):
            try:
                trees.append(Tree.from_dict(t).checked(n_features))
            except (KeyError, TypeError, ValueError) as exc:
                what = f"it lacks {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ValueError(f"corrupted daskgb model: tree {i}: {what}") from None
        if not isinstance(d["params"], dict):
            raise ValueError("corrupted daskgb model: params is not an object")
        _check_header(d["base_score"], d["feature_names"], n_features, d.get("tree_info"), len(trees),
                      d.get("best_iteration"), d.get("best_score"), "daskgb")
        types, categories = _check_types(d.get("feature_types"), d.get("categories"), n_features, trees)
        b = cls(d["params"], trees, d["base_score"], n_features, d["feature_names"], d.get("tree_info"), types,
                categories)
        npt = d.get("num_parallel_tree", 1) if version >= 2 else 1
        if npt != b.params.num_parallel_tree:
            raise ValueError(f"corrupted daskgb model: num_parallel_tree is {npt!r}, its params say "
                             f"{b.params.num_parallel_tree}")
        b.best_iteration = d.get("best_iteration")
        b.best_score = d.get("best_score")
        attributes = d.get("attributes", {})
        if not (isinstance(attributes, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in attributes.items())):
            raise ValueError("corrupted daskgb model: attributes is not an object of strings")
        b._attributes = dict(attributes)
        b._check_groups("daskgb")
        return b

    def _check_groups(self, kind: str) -> None:
        """tree_info names output groups the objective has, and every round has its trees."""
        k = self.n_groups
        bad = [g for g in self.tree_info if not 0 <= g < k]
        if bad:
            raise ValueError(f"corrupted {kind} model: tree_info holds output group {bad[0]}, and the model's "
                             f"objective has {k}")
        if len(self.trees) % self.trees_per_round:
            raise ValueError(f"corrupted {kind} model: {len(self.trees)} trees are not whole rounds of "
                             f"{self.trees_per_round}")
        if self.best_iteration is not None and self.best_iteration >= self.num_boosted_rounds():
            raise ValueError(f"corrupted {kind} model: best_iteration {self.best_iteration} is beyond its "
                             f"{self.num_boosted_rounds()} rounds")

    @classmethod
    def _from_fields(cls, fields: dict) -> "Booster":
        """A Booster of xgboost_format.booster_fields' reading."""
        extra = {k: fields.pop(k) for k in ("best_iteration", "best_score", "attributes")}
        _check_header(fields["base_score"], fields["feature_names"], fields["n_features"], fields.get("tree_info"),
                      len(fields["trees"]), extra["best_iteration"], extra["best_score"], "XGBoost")
        b = cls(**fields)
        b.best_iteration, b.best_score = extra["best_iteration"], extra["best_score"]
        b.set_attr(**extra["attributes"])
        b._check_groups("XGBoost")
        return b

    def _saved(self, format: str) -> dict:
        if format == "daskgb":
            return self.to_dict()
        if format == "xgboost":
            from .xgboost_format import to_xgboost_json

            return to_xgboost_json(self)
        raise ValueError(f"format must be 'daskgb' or 'xgboost', got {format!r}")

    def save_model(self, path, format: str = "daskgb") -> None:
        """Write the model: daskgb's format (docs/model_format.md), or with format="xgboost"
        XGBoost's JSON model format, which xgboost.Booster(model_file=path) loads and predicts
        with (daskgb/xgboost_format.py says what it carries). A path ending in .ubj is written
        as UBJSON (XGBoost's binary JSON, daskgb/ubjson.py), any other as JSON text."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"fname must be a string or os PathLike, got {type(path).__name__}")
        path = Path(os.path.expanduser(os.fspath(path)))
        d = self._saved(format)
        if path.suffix == ".ubj":
            path.write_bytes(ubjson.dumps(d))
        else:
            path.write_text(json.dumps(d))

    def save_raw(self, raw_format: str = "ubj", format: str = "daskgb") -> bytearray:
        """The model as bytes (xgboost.Booster.save_raw): raw_format "ubj" (UBJSON) or "json";
        format as save_model's. Booster(model_file=raw) and load_model(raw) read them back."""
        d = self._saved(format)
        if raw_format == "json":
            return bytearray(json.dumps(d).encode("utf-8"))
        if raw_format == "ubj":
            return bytearray(ubjson.dumps(d))
        if raw_format == "deprecated":
            raise ValueError("raw_format='deprecated' (XGBoost's old binary format) is not supported; use 'ubj' "
                             "or 'json'")
        raise ValueError(f"raw_format must be 'ubj' or 'json', got {raw_format!r}")

    def load_model(self, fname) -> "Booster":
        """Replace this booster's content with a model: a file's path or the bytes save_raw
        gives (a bytearray), holding daskgb's format or XGBoost's JSON model format, as JSON
        text or UBJSON (whichever it holds; a model read from XGBoost's is for prediction: its
        trees carry no training bins)."""
        from .xgboost_format import booster_fields, is_xgboost_model

        if isinstance(fname, (bytes, bytearray)):
            raw, where = bytes(fname), "the model buffer"
        elif isinstance(fname, (str, os.PathLike)):
            path = Path(os.path.expanduser(os.fspath(fname)))
            raw, where = path.read_bytes(), str(fname)
        else:
            raise TypeError(f"Unknown file type: {type(fname).__name__} (load_model takes a path or a bytearray)")
        try:
            if ubjson.looks_like_ubjson(raw[:2]):
                d = ubjson.loads(raw)
            else:
                d = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise ValueError(f"{where} is not a model: its JSON is nested too deeply") from None
        except UnicodeDecodeError:
            raise ValueError(f"{where} is not a JSON model: neither JSON text nor UBJSON") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} is not valid JSON (a truncated or corrupted model file?): {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        try:
            other = Booster._from_fields(booster_fields(d)) if is_xgboost_model(d) else Booster.from_dict(d)
        except (KeyError, TypeError, IndexError, AttributeError, OverflowError) as exc:  # not the format's layout
            what = f"it lacks {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
            kind = "an XGBoost" if is_xgboost_model(d) else "a daskgb"
            raise ValueError(f"{where} is {kind} model file that is corrupted: {what}") from None
        self.__dict__.update(other.__dict__)
        return self

    # ------------------------------------------------------------------ dumps (model_dump.py)
    def get_dump(self, fmap="", with_stats: bool = False, dump_format: str = "text") -> list[str]:
        """Each tree as text, as xgboost.Booster.get_dump writes it: dump_format "text", "json" or
        "dot" (Graphviz), with_stats adding each node's gain and cover, fmap a feature map file."""
        from .model_dump import get_dump

        return get_dump(self, fmap, with_stats, dump_format)

    def get_split_value_histogram(self, feature: str, fmap="", bins=None, as_pandas: bool = True):
        """A histogram of the thresholds of the splits on a feature (XGBoost's): model_dump.py."""
        from .model_dump import split_value_histogram

        return split_value_histogram(self, feature, fmap, bins, as_pandas)

    def dump_model(self, fout, fmap="", with_stats: bool = False, dump_format: str = "text") -> None:
        """Write get_dump's trees to fout (a path or an open text file), as XGBoost's dump_model."""
        from .model_dump import dump_model

        dump_model(self, fout, fmap, with_stats, dump_format)

    def trees_to_dataframe(self, fmap=""):
        """The trees as a pandas DataFrame, a row per node (xgboost.Booster.trees_to_dataframe)."""
        from .model_dump import trees_to_dataframe

        return trees_to_dataframe(self, fmap)

    # ------------------------------------------------------------------ XGBoost's in-place prediction
    def inplace_predict(self, data, *, iteration_range=(0, 0), predict_type: str = "value", missing=np.nan,
                        validate_features: bool = True, base_margin=None, strict_shape: bool = False):
        """Predictions for raw features (numpy, pandas, cupy, scipy CSR), as
        xgboost.Booster.inplace_predict: predict_type "value" (transformed) or "margin";
        cupy in, cupy out. strict_shape gives (n_rows, outputs) even for one output."""
        if predict_type not in ("value", "margin"):
            raise ValueError(f"predict_type must be 'value' or 'margin', got {predict_type!r}")
        if isinstance(data, QuantileMatrix):
            raise TypeError("inplace_predict takes raw features (numpy, pandas, cupy, scipy CSR); use predict for a "
                            "QuantileMatrix")
        if isinstance(data, (list, tuple)):
            data = np.asarray(data)
        if validate_features and hasattr(data, "shape") and len(data.shape) == 2 \
                and data.shape[1] != self.n_features:
            raise ValueError(f"Feature shape mismatch, expected: {self.n_features}, got {data.shape[1]}")
        return self.predict(data, output_margin=predict_type == "margin", iteration_range=iteration_range,
                            missing=missing, base_margin=base_margin, strict_shape=strict_shape)

    # ------------------------------------------------------------------ rounds and evaluation (training/)
    def update(self, dtrain, iteration: int, fobj=None) -> None:
        """Train one more round on dtrain (a QuantileMatrix), as xgboost.Booster.update: with
        the booster's parameters, going on from its trees (an empty booster, Booster(params,
        [dtrain]), starts the model); fobj a custom objective fobj(margin, dtrain) -> (grad,
        hess). iteration is the round's number, as XGBoost counts it (the rounds so far)."""
        _training_api().update(self, dtrain, iteration, fobj)

    def boost(self, dtrain, iteration: int, *, grad=None, hess=None, fobj=None) -> None:
        """Train one more round from given gradients (grad, hess: one value per row, or
        (n_rows, outputs)) or a custom objective fobj, as xgboost.Booster.boost."""
        _training_api().boost(self, dtrain, iteration, grad, hess, fobj)

    def eval_set(self, evals, iteration: int = 0, feval=None, output_margin: bool = True) -> str:
        """The model's metrics on (QuantileMatrix, name) pairs as XGBoost's string,
        "[iteration]\tname-metric:value..." (xgboost.Booster.eval_set): the eval_metric
        parameters' metrics (or the objective's default), then feval(predt, matrix) -> (name,
        value) or a list of them for each set."""
        return _training_api().eval_set(self, evals, iteration, feval, output_margin)

    def eval(self, data, name: str = "eval", iteration: int = 0) -> str:
        """eval_set([(data, name)], iteration) (xgboost.Booster.eval)."""
        return self.eval_set([(data, name)], iteration)


# Training a round (update, boost) and evaluating (eval_set) are training/'s work, and training/
# sits above this module (it makes Boosters): it registers the module that does that work here
# (daskgb/__init__.py, so that `import daskgb` has it wired).
_TRAINING_API = []


def register_training_api(module) -> None:
    """Give Booster.update, boost and eval_set the module that does their work
    (daskgb/training/booster_rounds.py)."""
    _TRAINING_API[:] = [module]


def _training_api():
    if not _TRAINING_API:
        raise RuntimeError("Booster.update / boost / eval_set need daskgb's training: import daskgb")
    return _TRAINING_API[0]


def _param_dict(params) -> dict:
    """Parameters as a dict: XGBoost takes a dict or a list of (key, value) pairs, in which
    eval_metric may come more than once (each adds a metric)."""
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    out = {}
    try:
        pairs = [(k, v) for k, v in params]
    except (TypeError, ValueError):
        raise ValueError(f"params must be a dict or a list of (key, value) pairs, got {type(params).__name__}") \
            from None
    for key, v in pairs:
        if key == "eval_metric" and key in out:
            before = out[key]
            v = (list(before) if isinstance(before, (list, tuple)) else [before]) + [v]
        out[key] = v
    return out


def _feature_info(values, n_features: int, what: str) -> list:
    """feature names or types given to a Booster, as a list of one entry a feature (XGBoost's
    _validate_feature_info: a list or tuple, not a string)."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} must be a list of one entry a feature, got {type(values).__name__}")
    values = list(values)
    if len(values) != n_features:
        raise ValueError(f"{what} must have the same length as the model's features ({n_features}), got "
                         f"{len(values)}")
    return values


def _finite(v) -> bool:
    """A number that float32 holds (NaN, inf and 1e400, which JSON reads as inf, are not)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and \
        abs(float(v)) <= float(np.finfo(np.float32).max)


def _is_frame(data) -> bool:
    return hasattr(data, "dtypes") and hasattr(data, "columns")


def _json_name(v):
    """A category name as JSON holds it (numpy scalars as Python numbers)."""
    return v.item() if hasattr(v, "item") else v


def _check_types(types, categories, n_features: int, trees):
    """A saved model's feature_types and categories, checked: categorical splits only on
    categorical features."""
    if types is not None:
        if not isinstance(types, list) or len(types) != n_features or any(t not in _FEATURE_TYPES for t in types):
            raise ValueError(f"corrupted daskgb model: feature_types must be a list of {list(_FEATURE_TYPES)}, one "
                             "per feature")
    for i, t in enumerate(trees):
        for node in t.categories:
            if types is None or types[int(t.feature[node])] != "c":
                raise ValueError(f"corrupted daskgb model: tree {i} splits feature {int(t.feature[node])} by "
                                 "category, and feature_types does not say it is categorical")
    if categories is not None:
        if not isinstance(categories, dict) or not all(isinstance(v, list) for v in categories.values()):
            raise ValueError("corrupted daskgb model: categories must map features to lists of names")
        try:
            categories = {int(f): v for f, v in categories.items()}
        except ValueError:
            raise ValueError("corrupted daskgb model: categories is keyed by something other than feature "
                             "indices") from None
        for f, names in categories.items():
            # Prediction recodes a dataframe's column f by these names: f must be a categorical
            # feature, and a name twice would make a code ambiguous.
            if not 0 <= f < n_features or types is None or types[f] != "c":
                raise ValueError(f"corrupted daskgb model: categories names feature {f}, which is not one of its "
                                 "categorical features")
            if len({repr(v) for v in names}) != len(names):
                raise ValueError(f"corrupted daskgb model: the categories of feature {f} name a category twice")
    return types, categories


def _check_header(base_score, feature_names, n_features: int, tree_info, n_trees: int, best_iteration, best_score,
                  kind: str) -> None:
    """A model file's fields beside its trees, each problem a ValueError that names it."""
    what = f"corrupted {kind} model"
    scores = base_score if isinstance(base_score, list) else [base_score]
    if not scores or not all(_finite(v) for v in scores):
        raise ValueError(f"{what}: base_score is {base_score!r}, not a finite number (or list of them)")
    if feature_names is not None:
        if not isinstance(feature_names, list) or not all(isinstance(n, str) for n in feature_names):
            raise ValueError(f"{what}: feature_names is {type(feature_names).__name__}, not a list of strings")
        if len(feature_names) != n_features:
            raise ValueError(f"{what}: {len(feature_names)} feature_names for {n_features} features")
        if len(set(feature_names)) != len(feature_names):
            raise ValueError(f"{what}: its feature_names repeat a name")
    if tree_info is not None:
        if not isinstance(tree_info, list) or not all(
                isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in tree_info):
            raise ValueError(f"{what}: tree_info is not a list of integers")
        if len(tree_info) != n_trees:
            raise ValueError(f"tree_info has {len(tree_info)} entries for {n_trees} trees")
    if best_iteration is not None and (isinstance(best_iteration, bool) or not isinstance(best_iteration, int)
                                       or best_iteration < 0):
        raise ValueError(f"{what}: best_iteration is {best_iteration!r}, not a round number")
    if best_score is not None and not (isinstance(best_score, (int, float)) and not isinstance(best_score, bool)):
        raise ValueError(f"{what}: best_score is {best_score!r}, not a number")


def initial_margin(xp, objective, base_score, n: int):
    """(n,) float32 margins of base_score, or (n, K) for an objective with K outputs."""
    m = objective.base_score_to_margin(base_score)
    if xp is not np:  # daskgb's kernels: CuPy's fill and tile would be compiled at first use
        from . import device_arrays

        shape = n if objective.n_groups == 1 else (n, objective.n_groups)
        if objective.n_groups == 1 or np.ndim(m) == 0:
            return device_arrays.full(shape, np.float32(np.asarray(m).reshape(-1)[0]), xp.float32)
        return device_arrays.tile_row(np.asarray(m, dtype=np.float32), n)
    if objective.n_groups == 1:
        return xp.full(n, m, dtype=xp.float32)
    if np.ndim(m) == 0:
        return xp.full((n, objective.n_groups), m, dtype=xp.float32)
    return xp.tile(xp.asarray(m, dtype=xp.float32)[None, :], (n, 1))
