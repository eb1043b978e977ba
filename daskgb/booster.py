"""Booster (trees, parameters, prediction, save/load) and the in-process train() loop."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from . import metric as _metric
from ._types import PREDICT_NODE_DTYPE
from .adaptive import refresh_leaves
from . import phases as _phases
from .arrays import to_host
from .backend import get_backend, resolve_device
from .callback import EarlyStopping, TrainingCallback
from .collective import LocalCommunicator
from . import checkpoint as _checkpoint
from . import external as _external
from .external import PagedEllpack
from .feature_sets import interaction_sets
from .grower import grow_forest
from .inputs import as_features, check_feature_names
from .matrix import QuantileMatrix
from .monotone import monotone_vector
from .objective import QuantileError, Softmax, get_objective
from .out_of_memory import explained
from .params import TrainParams
from .sampling import mvs_sample, row_sample
from .ranking import DEFAULT_METRIC_K
from .tree import Tree

MODEL_FORMAT = "daskgb-model"
MODEL_VERSION = 1


# Off (DASKGB_QUEUE_ROUNDS=0): the host reads each round's trees before it queues the next
# round, as every other training path does; for comparing the two (docs/performance_notes.md).
_QUEUE_ROUNDS = os.environ.get("DASKGB_QUEUE_ROUNDS", "1") != "0"


class Booster:
    """A trained gradient-boosted tree ensemble."""

    def __init__(self, params: dict | None = None, trees=None, base_score=0.5, n_features: int = 0,
                 feature_names=None, tree_info=None):
        self.params = TrainParams.from_dict(params or {})
        self._raw_params = dict(params or {})
        self.trees: list[Tree] = list(trees or [])
        # Output group of each tree: its class for multiclass models (K trees per round, in class order).
        self.tree_info: list[int] = list(tree_info) if tree_info is not None else [0] * len(self.trees)
        if len(self.tree_info) != len(self.trees):
            raise ValueError(f"tree_info has {len(self.tree_info)} entries for {len(self.trees)} trees")
        # One number, or for multiclass the K class margins.
        self.base_score = float(base_score) if np.ndim(base_score) == 0 else [float(v) for v in base_score]
        self.n_features = int(n_features)
        self.feature_names = feature_names
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        self._packed = None  # (n_trees, nodes, offsets) cache for prediction

    # ------------------------------------------------------------------ introspection
    @property
    def objective(self):
        return get_objective(self.params.objective, self.params)

    @property
    def num_features(self) -> int:
        return self.n_features

    @property
    def n_groups(self) -> int:
        """Outputs per row (trees per round): num_class for multiclass models, the number of
        quantile_alpha values for reg:quantileerror, else 1."""
        return self.objective.n_groups

    def num_boosted_rounds(self) -> int:
        return len(self.trees) // self.n_groups

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

    def set_param(self, key: str, value) -> None:
        """Set one training parameter (XGBoost name or alias), checked; e.g. by a callback between rounds."""
        from .params import ALIASES

        name = ALIASES.get(key, key)
        raw = {k: v for k, v in self._raw_params.items() if ALIASES.get(k, k) != name}
        raw[key] = value
        self.params = TrainParams.from_dict(raw)
        self._raw_params = raw

    def keep_rounds(self, n: int) -> None:
        """Drop the trees of every round after the first n."""
        k = self.n_groups
        del self.trees[n * k :], self.tree_info[n * k :]
        if self.best_iteration is not None:
            self.best_iteration = min(self.best_iteration, n - 1)
        self._packed = None

    # ------------------------------------------------------------------ prediction
    def _tree_slice(self, iteration_range) -> tuple[int, int]:
        """The trees [first, last) of a range of boosting rounds (K trees a round for K classes)."""
        rounds = self.num_boosted_rounds()
        start, end = iteration_range or (0, 0)
        if end == 0:
            end = rounds if self.best_iteration is None else self.best_iteration + 1
        if not 0 <= start <= end <= rounds:
            raise ValueError(f"iteration_range {iteration_range} is outside the model's {rounds} rounds")
        return start * self.n_groups, end * self.n_groups

    def _packed_trees(self, trees):
        nodes = [t.predict_nodes() for t in trees]
        offsets = np.zeros(len(nodes) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([n.size for n in nodes])
        flat = np.concatenate(nodes) if nodes else np.zeros(0, dtype=PREDICT_NODE_DTYPE)
        return flat, offsets

    def predict(self, data, output_margin: bool = False, iteration_range=(0, 0), missing=np.nan,
                base_margin=None):
        """Predictions for raw features (numpy, pandas, cupy, scipy CSR) or a QuantileMatrix.

        Returns numpy for host input and cupy for cupy input. Missing values (NaN
        or `missing`) take each split's default direction.
        """
        start, end = self._tree_slice(iteration_range)
        if isinstance(data, QuantileMatrix):
            return self._predict_matrix(data, output_margin, start, end)
        features = as_features(data)
        if features.n_features != self.n_features:
            raise ValueError(f"the model was trained on {self.n_features} features, the data has "
                             f"{features.n_features}")
        check_feature_names(self.feature_names, features.feature_names, "the model", "the data")
        on_gpu = features.xp is not np
        device = "cuda" if on_gpu else resolve_device(self.params.device)
        backend = get_backend(device)
        xp = backend.xp
        X = features.to(xp).densify(missing)
        margin = self._initial_margin(xp, features.n_rows, base_margin)
        for group in range(self.n_groups):
            trees = [t for t, g in zip(self.trees[start:end], self.tree_info[start:end]) if g == group]
            if not trees:
                continue
            nodes, offsets = self._packed_trees(trees)
            if margin.ndim == 1:
                backend.predict_margin(X, nodes, offsets, margin, float(missing))
            else:
                column = xp.ascontiguousarray(margin[:, group])
                backend.predict_margin(X, nodes, offsets, column, float(missing))
                margin[:, group] = column
        out = margin if output_margin else self.objective.transform(xp, margin)
        return out if on_gpu else to_host(out)

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
            raise ValueError("a QuantileMatrix can be predicted only with the cuts the model was trained on "
                             "(build it with ref=the training matrix); pass the raw features instead")
        device = resolve_device(self.params.device)
        backend = get_backend(device)
        m = m.on(device)
        margin = m.base_margin.copy() if m.base_margin is not None else self._initial_margin(backend.xp, m.n_rows)
        for t, group in zip(self.trees[start:end], self.tree_info[start:end]):
            add_tree_binned(backend, m.ellpack, t, margin if margin.ndim == 1 else margin[:, group])
        out = margin if output_margin else self.objective.transform(backend.xp, margin)
        return to_host(out)

    # ------------------------------------------------------------------ save / load
    def to_dict(self) -> dict:
        return {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "params": self._raw_params,
            "objective": self.params.objective,
            "base_score": self.base_score,
            "num_features": self.n_features,
            "feature_names": self.feature_names,
            "best_iteration": self.best_iteration,
            "best_score": self.best_score,
            "trees": [t.to_dict() for t in self.trees],
            "tree_info": list(self.tree_info),
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
                             f"version {MODEL_VERSION}: upgrade daskgb to load it")
        if version != MODEL_VERSION:
            raise ValueError(f"daskgb model version {version!r} is not supported (this daskgb reads version "
                             f"{MODEL_VERSION})")
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
        b = cls(d["params"], trees, d["base_score"], n_features, d["feature_names"], d.get("tree_info"))
        b.best_iteration = d.get("best_iteration")
        b.best_score = d.get("best_score")
        return b

    def save_model(self, path, format: str = "daskgb") -> None:
        """Write the model as JSON: daskgb's format (docs/model_format.md), or with
        format="xgboost" XGBoost's JSON model format, which xgboost.Booster(model_file=path)
        loads and predicts with (daskgb/xgboost_format.py says what it carries)."""
        if format == "daskgb":
            d = self.to_dict()
        elif format == "xgboost":
            from .xgboost_format import to_xgboost_json

            d = to_xgboost_json(self)
        else:
            raise ValueError(f"format must be 'daskgb' or 'xgboost', got {format!r}")
        Path(path).write_text(json.dumps(d))

    def load_model(self, path) -> "Booster":
        """Replace this booster's content with the model in a JSON file: daskgb's format or
        XGBoost's JSON model format (whichever the file holds; a model read from XGBoost's is
        for prediction: its trees carry no training bins)."""
        from .xgboost_format import from_xgboost_json, is_xgboost_model

        try:
            d = json.loads(Path(path).read_text())
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not a JSON model (an XGBoost .ubj model? save it with a .json name "
                             "to read it here)") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON (a truncated or corrupted model file?): {exc}") from None
        try:
            other = from_xgboost_json(d) if is_xgboost_model(d) else Booster.from_dict(d)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:  # a layout other than the format's
            what = f"it lacks {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
            kind = "an XGBoost" if is_xgboost_model(d) else "a daskgb"
            raise ValueError(f"{path} is {kind} model file that is corrupted: {what}") from None
        self.__dict__.update(other.__dict__)
        return self


def initial_margin(xp, objective, base_score, n: int):
    """(n,) float32 margins of base_score, or (n, K) for an objective with K outputs."""
    m = objective.base_score_to_margin(base_score)
    if objective.n_groups == 1:
        return xp.full(n, m, dtype=xp.float32)
    if np.ndim(m) == 0:
        return xp.full((n, objective.n_groups), m, dtype=xp.float32)
    return xp.tile(xp.asarray(m, dtype=xp.float32)[None, :], (n, 1))


def add_tree_binned(backend, ell, tree: Tree, margin) -> None:
    """margin += the tree's leaf value for each row, routing rows by their bins (page by
    page for a paged matrix).

    Valid only for matrices binned with the training cuts: rows go where training's
    partition sent them.
    """
    if ell.n_rows == 0:
        return
    if isinstance(ell, PagedEllpack):
        for i, (a, b) in enumerate(ell.row_ranges):
            backend.add_leaf_values(ell.page(i, backend.xp), tree, margin[a:b])
        return
    backend.add_leaf_values(ell, tree, margin)


@explained("training", "dtrain")
def train(params: dict, dtrain: QuantileMatrix, num_boost_round: int = 10, evals=(), verbose_eval=True,
          evals_result: dict | None = None, comm=None, *, obj=None, custom_metric=None,
          early_stopping_rounds: int | None = None, maximize: bool | None = None, callbacks=(),
          checkpoint_dir=None, checkpoint_every: int | None = None, resume: bool = False,
          _after_round=None) -> Booster:
    """Train a booster in this process (XGBoost's xgboost.train, for QuantileMatrix data).

    evals: (QuantileMatrix, name) pairs, evaluated after every round; each must
    be dtrain itself or built with ref=dtrain. verbose_eval: True, False, or
    print every n-th round. evals_result: a dict to fill with
    {name: {metric: [value per round]}}.

    obj: a custom objective, ``obj(margin, dtrain) -> (grad, hess)`` with arrays of
    the training device (numpy, or cupy on CUDA); as in XGBoost it applies the
    weights itself, base_score defaults to 0.5 and is not estimated, and
    predictions are raw margins unless params name an objective to transform them.
    custom_metric: ``custom_metric(predt, dmatrix) -> (name, value)``, reported
    beside the built-in metrics (set disable_default_eval_metric to drop the
    default one); predt is the raw margin with a custom objective and the output
    otherwise. On several workers it sees every worker's rows.

    early_stopping_rounds: stop once the last metric of the last eval set has not
    improved for that many rounds (XGBoost's rule; ``maximize`` defaults to True for
    auc); the booster keeps every tree, records best_iteration and best_score, and
    predicts with the trees up to best_iteration unless told otherwise.

    callbacks: daskgb.callback.TrainingCallback objects (EarlyStopping,
    EvaluationMonitor, LearningRateScheduler, or your own), called as XGBoost calls
    them; any of them may stop training. On Dask they run on every worker.

    checkpoint_dir / checkpoint_every: write the model and eval history to that directory
    every n rounds (and at the end), atomically; resume=True goes on from the newest
    checkpoint there, and the finished model equals an unbroken run's (daskgb/checkpoint.py).
    """
    checkpoint_path = _checkpoint.check_options(checkpoint_dir, checkpoint_every, resume)
    if obj is not None and not callable(obj):
        raise ValueError("obj must be a callable obj(margin, dtrain) -> (grad, hess)")
    if custom_metric is not None and not callable(custom_metric):
        raise ValueError("custom_metric must be a callable custom_metric(predt, dmatrix) -> (name, value)")
    p = TrainParams.from_dict(params)
    if early_stopping_rounds is not None:
        EarlyStopping(early_stopping_rounds)  # checks the value
        if not evals:
            raise ValueError("early stopping needs at least one eval set in evals")
    callbacks = list(callbacks or [])
    for cb in callbacks:
        if not isinstance(cb, TrainingCallback):
            raise ValueError(f"callbacks must be daskgb.callback.TrainingCallback objects, got {type(cb).__name__}")
        if isinstance(cb, EarlyStopping) and not evals:
            raise ValueError("early stopping needs at least one eval set in evals")
    if not isinstance(dtrain, QuantileMatrix):
        raise ValueError("dtrain must be a daskgb.QuantileMatrix")
    if isinstance(num_boost_round, bool) or not isinstance(num_boost_round, (int, np.integer)) or num_boost_round < 0:
        raise ValueError(f"num_boost_round must be an integer >= 0, got {num_boost_round!r}")
    if dtrain.label is None:
        raise ValueError("dtrain has no labels (y)")
    evals = list(evals or [])
    for item in evals:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], QuantileMatrix)):
            raise ValueError("evals must be a list of (QuantileMatrix, name) pairs")
        m, name = item
        if m.label is None:
            raise ValueError(f"eval set {name!r} has no labels")
        if m.n_features != dtrain.n_features:
            raise ValueError(f"eval set {name!r} has {m.n_features} features, dtrain has {dtrain.n_features}")
        if not m.shares_cuts_with(dtrain):
            raise ValueError(f"eval set {name!r} was quantised with its own cuts; build it with "
                             f"QuantileMatrix(..., ref=dtrain)")
    if dtrain.max_bin != p.max_bin and "max_bin" in (params or {}):
        raise ValueError(f"params max_bin={p.max_bin} differs from the QuantileMatrix's max_bin={dtrain.max_bin}")
    # Constraints are checked against the data before any work: indices in range, names it has.
    interaction = interaction_sets(p.interaction_constraints, dtrain.n_features, dtrain.feature_names)
    monotone = monotone_vector(p.monotone_constraints, dtrain.n_features, dtrain.feature_names)
    objective = get_objective(p.objective, p)
    n_groups = objective.n_groups
    if obj is None and p.num_class > 1 and not isinstance(objective, Softmax):
        raise ValueError(f"num_class={p.num_class} is for multi:softprob and multi:softmax (or a custom "
                         f"objective), not {p.objective}")
    metrics = p.eval_metric or ([] if custom_metric is not None and _truthy((params or {}).get(
        "disable_default_eval_metric")) else [objective.default_metric])
    if obj is not None and n_groups > 1 and not p.eval_metric:
        metrics = []  # the named objective's default metric reads one output per row: name one instead
    for k in metrics:
        if n_groups > 1 and isinstance(objective, QuantileError) and k != "quantile":
            raise ValueError(f"eval_metric {k!r} reads one output per row; a model of several quantile_alpha "
                             "values takes 'quantile'")
        _metric.check_metric(k, n_groups, p.quantile_alpha)
    for m in [dtrain] + [m for m, _ in evals]:
        if m.base_margin is not None and _margin_groups(m.base_margin) != n_groups:
            raise ValueError(f"base_margin has shape {tuple(m.base_margin.shape)}; this model needs "
                             f"{'one margin per row' if n_groups == 1 else f'(n_rows, {n_groups}) margins'}")
    device = resolve_device(p.device)
    backend = get_backend(device)
    xp = backend.xp
    comm = comm or LocalCommunicator()

    dtrain = dtrain.on(device)
    if obj is None:  # a custom objective decides for itself which labels it accepts
        objective.check_labels(xp, dtrain.label)
        for m, _ in evals:
            objective.check_labels(xp, m.on(device).label)
        objective.prepare(xp, dtrain, comm)
    if p.base_score is not None:
        base_score = p.base_score
    elif obj is not None:
        base_score = 0.5  # XGBoost cannot fit an intercept for a loss it does not know
    else:
        base_score = objective.estimate_base_score(xp, dtrain.label, dtrain.weight, comm)
    base_score = float(np.float32(base_score)) if np.ndim(base_score) == 0 else \
        [float(v) for v in np.float32(base_score)]
    booster = Booster(params, [], base_score, dtrain.n_features, dtrain.feature_names)
    booster._train_cuts_token = dtrain.cuts_token
    # An unsuffixed ranking metric is cut at XGBoost's default k, unless it is the objective's own default.
    rank_k = getattr(objective, "default_metric_k", DEFAULT_METRIC_K) if not p.eval_metric else DEFAULT_METRIC_K
    for m, _ in evals:  # labels a metric cannot score are an error before the first round
        for k in metrics:
            _metric.check_labels(k, xp, m.on(device).label, p.ndcg_exp_gain, m.groups, comm)

    def start_margin(m):
        if m.base_margin is not None:
            return m.base_margin.astype(xp.float32).copy()
        return initial_margin(xp, objective, base_score, m.n_rows)

    margin = start_margin(dtrain)
    eval_state = []
    for m, name in evals:
        m = m.on(device)
        eval_state.append((m, name, None if m is dtrain else start_margin(m)))
    history: dict = evals_result if evals_result is not None else {}
    history.clear()
    for _, name, _ in eval_state:
        history[name] = {k: [] for k in metrics}

    callbacks = list(callbacks)
    if early_stopping_rounds is not None:  # as XGBoost: the stopping callback runs after the user's
        callbacks.append(EarlyStopping(early_stopping_rounds, maximize=maximize))
    for cb in callbacks:
        booster = cb.before_training(booster) or booster
    every = 1 if verbose_eval is True else (int(verbose_eval) if verbose_eval else 0)
    if comm.rank != 0:
        every = 0
    ell = dtrain.ellpack
    # This worker's first row in the concatenation of all workers' rows (rank order): row
    # sampling is keyed by it, so a row's draws do not depend on how rows are partitioned.
    row_offset, n_rows_total = 0, dtrain.n_rows
    if comm.world_size > 1:
        counts = comm.allgather(dtrain.n_rows)
        row_offset, n_rows_total = int(sum(counts[: comm.rank])), int(sum(counts))
    # Every worker must sum the root the same way, so the choice is made for all at once.
    root_from_bins = bool(comm.allreduce(np.array([int(ell.is_dense and not ell.has_missing)]), "min")[0])
    first_round, checkpoints, fingerprint = 0, None, None
    if checkpoint_path is not None:
        checkpoints = _checkpoint.Checkpoints(checkpoint_path, checkpoint_every)
        if comm.rank == 0:  # rank 0 writes them
            _checkpoint.check_writable(checkpoint_path)
        fingerprint = _checkpoint.fingerprint(params, dtrain.cuts, n_rows_total, dtrain.n_features,
                                              dtrain.feature_names)
        if resume:
            first_round = _resume(comm, checkpoints, fingerprint, num_boost_round, booster, history, backend,
                                  dtrain, margin, eval_state, callbacks)
    refit = obj is None and any(objective.leaf_quantile_alpha(g) is not None for g in range(n_groups))
    # With nothing to look at between rounds, the host queues round it+1 before it reads round
    # it's trees, so the device never idles while the host turns trees into Python objects.
    queue_rounds = (_QUEUE_ROUNDS and backend.name == "cuda" and not dtrain.paged and obj is None and not refit
                    and not eval_state and not callbacks and not _phases.clock_running()
                    and backend.grows_on_device(p, n_groups, interaction, monotone, comm))

    def finish_round(it, new_trees) -> bool:
        """The host's part of round it, once its trees are known: the model, the eval log, the
        callbacks and the checkpoint. True to stop."""
        for group, tree in enumerate(new_trees):
            booster.trees.append(tree)
            booster.tree_info.append(group)
        line = [f"[{it}]"]
        for m, name, em in eval_state:
            if em is None:
                em = margin
            else:
                for group, tree in enumerate(new_trees):
                    add_tree_binned(backend, m.ellpack, tree, _column(em, group))
            out = objective.eval_transform(xp, em)
            for k in metrics:
                v = _metric.evaluate(k, xp, m.label, out, m.weight, comm, quantile_alpha=p.quantile_alpha,
                                     groups=m.groups, ndcg_exp_gain=p.ndcg_exp_gain, rank_default_k=rank_k)
                history[name][k].append(v)
                line.append(f"{name}-{k}:{v:.5f}")
            if custom_metric is not None:
                k, v = _custom_metric(custom_metric, em if obj is not None else out, m, comm)
                history[name].setdefault(k, []).append(v)
                line.append(f"{name}-{k}:{v:.5f}")
        if every and eval_state and (it % every == 0 or it == num_boost_round - 1):
            print("\t".join(line), flush=True)
        if _after_round is not None:  # the Dask layer's progress and dashboard reports (dask/worker.py)
            _after_round(it, history)
        # Every callback runs (none is skipped because an earlier one asked to stop), as in XGBoost.
        stop = _agree(comm, [cb.after_iteration(booster, it, history) for cb in callbacks])
        if checkpoints is not None and comm.rank == 0 and (stop or it + 1 == num_boost_round
                                                           or checkpoints.due(it + 1)):
            checkpoints.save(booster, history, it + 1, num_boost_round, fingerprint)
        if stop:
            for cb in callbacks:
                if every and isinstance(cb, EarlyStopping) and cb.best_round is not None:
                    print(f"Stopping. Best iteration: [{cb.best_round}] {cb.metric}:{cb.best:.5f}", flush=True)
        return stop

    graphs = None
    if queue_rounds:
        from .backend import cuda_growth

        graphs = cuda_growth.ForestGraphs()
    try:
        queued = None  # (round, QueuedForest): a round on the device whose trees the host has not read
        for it in range(first_round, num_boost_round):
            _mark_round(comm, it)
            if _agree(comm, [cb.before_iteration(booster, it, history) for cb in callbacks]):
                break
            p = booster.params  # a callback may have changed the learning rate
            gpairs = _round_gradients(xp, objective, obj, margin, dtrain, it, n_groups, p, n_rows_total, row_offset,
                                      comm)
            first = len(booster.trees) + (n_groups if queued is not None else 0)  # the round's first tree index
            if queue_rounds:
                forest = _queue_round(backend, dtrain, gpairs, margin, p, comm, root_from_bins, first, graphs)
                if queued is not None:
                    finish_round(queued[0], queued[1].trees())  # no callbacks: nothing can stop here
                queued = (it, forest)
                continue
            if dtrain.paged and p.subsample < 1.0 and not refit and _external.COMPACT_SAMPLED:
                # Out of core with sampling: each tree trains on its sampled rows gathered into one
                # in-core matrix (external.compact_rows); every row then moves by its bins.
                new_trees = _grow_compacted(backend, dtrain, gpairs, margin, p, comm, root_from_bins, first,
                                            interaction, monotone)
            else:
                new_trees = _grow_round(backend, dtrain, gpairs, margin, p, comm, root_from_bins, first, objective,
                                        obj, refit, interaction, monotone)
            if finish_round(it, new_trees):
                break
        if queued is not None:
            finish_round(queued[0], queued[1].trees())
    finally:
        if graphs is not None:
            graphs.close()
    for cb in callbacks:
        booster = cb.after_training(booster) or booster
    return booster


def _mark_round(comm, it: int) -> None:
    """Tell the communicator (and the host one under NCCL's) which round runs: a collective
    that fails then says the round, and the Dask layer reads it off the error."""
    comm.training_round = it
    host = getattr(comm, "host_comm", None)
    if host is not None:
        host.training_round = it


def _resume(comm, checkpoints, fingerprint, num_boost_round, booster, history, backend, dtrain, margin, eval_state,
            callbacks) -> int:
    """Put the newest checkpoint back into this run (see daskgb/checkpoint.py); returns the
    rounds it holds (0 without one). Rank 0 reads it and sends it to the other ranks."""
    state = None
    if comm.rank == 0:
        try:
            state = ("ok", checkpoints.latest())
        except Exception as exc:  # every rank must hear of it, not wait for rank 0
            state = ("error", f"{type(exc).__name__}: {exc}")
    if comm.world_size > 1:
        state = comm.broadcast(state, root=0)
    status, state = state
    if status != "ok":
        raise ValueError(f"resume: {state}")
    if state is None:
        return 0
    where = state.get("path", str(checkpoints.directory))
    differs = _checkpoint.mismatch(state.get("fingerprint") or {}, fingerprint)
    if differs:
        raise ValueError(f"resume: the checkpoint {where} was written by a run with other {differs}; resume with "
                         "the same data and parameters, or start afresh (resume=False, or another checkpoint_dir)")
    rounds = int(state["rounds"])
    if rounds > num_boost_round:
        raise ValueError(f"resume: the checkpoint {where} holds {rounds} rounds, more than num_boost_round="
                         f"{num_boost_round}")
    saved = Booster.from_dict(state["model"])
    if saved.base_score != booster.base_score:
        raise ValueError(f"resume: the checkpoint {where} has base_score {saved.base_score}, this run estimates "
                         f"{booster.base_score} from its labels: the labels differ from the interrupted run's")
    if set(state["history"]) != set(history):
        raise ValueError(f"resume: the checkpoint {where} has eval sets {sorted(state['history'])}, this run "
                         f"{sorted(history)}: give the same evals")
    booster.trees[:], booster.tree_info[:] = saved.trees, saved.tree_info
    booster.best_iteration, booster.best_score = saved.best_iteration, saved.best_score
    # The margins training had: the trees' leaf values added one tree at a time, in order.
    for tree, group in zip(saved.trees, saved.tree_info):
        add_tree_binned(backend, dtrain.ellpack, tree, _column(margin, group))
        for m, _, em in eval_state:
            if em is not None:
                add_tree_binned(backend, m.ellpack, tree, _column(em, group))
    for name, metrics in state["history"].items():
        history[name].clear()
        history[name].update({k: list(v) for k, v in metrics.items()})
    # Early stopping's best score and round, as the rounds before the checkpoint left them.
    for cb in callbacks:
        if isinstance(cb, EarlyStopping):
            for r in range(rounds):
                cb.after_iteration(booster, r, {n: {k: v[: r + 1] for k, v in ms.items()}
                                                for n, ms in history.items()})
    return rounds


def _round_gradients(xp, objective, obj, margin, dtrain, it, n_groups, p, n_rows_total, row_offset, comm) -> list:
    """Round it's gradient pairs, one (n_rows, 2) array per output group, sampled as p says."""
    if obj is None:
        gpair_all = objective.gradient_of(xp, margin, dtrain, it)
    else:
        gpair_all = _custom_gradient(xp, obj, margin, dtrain)
    # One tree per output group (class), each from its own column of gradients; the
    # groups' trees grow together, sharing each step's backend calls (grower.grow_forest).
    gpairs = []
    for group in range(n_groups):
        gpair = gpair_all if n_groups == 1 else gpair_all[:, group]
        if p.subsample < 1.0 and p.sampling_method == "gradient_based":
            # One output: the pairs are this round's own, sampled where they lie (device memory).
            gpair = mvs_sample(xp, gpair, p.subsample, n_rows_total, row_offset, p.seed, it * n_groups + group,
                               comm, inplace=n_groups == 1)
        elif p.subsample < 1.0:
            gpair = gpair * row_sample(xp, dtrain.n_rows, row_offset, p.seed, it * n_groups + group,
                                       p.subsample)[:, None]
        gpairs.append(gpair)
    return gpairs


def _fixed_gradients(backend, gpair, comm, wait: bool):
    """prepare_gradients of the round's gradient pairs with the scale every worker shares."""
    abs_sum = None
    if comm.world_size > 1:
        # The fixed-point scale must be the same on every worker: size it from global sums.
        abs_sum = comm.allreduce(backend.gradient_abs_sums(gpair))
    return backend.prepare_gradients(gpair, abs_sum=abs_sum, wait=wait)


def _queue_round(backend, dtrain, gpairs, margin, p, comm, root_from_bins, first, graphs):
    """_grow_round's trees queued on the device (graphs: a backend/cuda_growth.ForestGraphs,
    which also makes the fixed-point pairs) and the training margins moved there by their
    leaves, nothing waited for: returns the QueuedForest, whose trees() the host reads later.
    It empties the list gpairs."""
    gpair = gpairs[0] if len(gpairs) == 1 else backend.xp.concatenate(gpairs)
    n_groups = len(gpairs)
    gpairs.clear()
    forest = graphs.queue(dtrain.ellpack, gpair, p, comm, root_from_bins, range(first, first + n_groups))
    del gpair
    forest.add_to(margin)
    return forest


def _grow_round(backend, dtrain, gpairs, margin, p, comm, root_from_bins, first, objective, obj, refit,
                interaction, monotone):
    """A round's trees (model indices first, first + 1, ...) from each group's (sampled)
    gradient pairs, grown together on dtrain's matrix (grower.grow_forest); the training
    margins moved by the rows' leaves. Returns the trees. It empties the list gpairs, so
    that the float gradients are freed before the trees grow unless the leaves are refitted
    from them."""
    xp, ell, n_groups = backend.xp, dtrain.ellpack, len(gpairs)
    gpairs, given = list(gpairs), gpairs
    given.clear()
    gpair = gpairs[0] if n_groups == 1 else xp.concatenate(gpairs)
    # The device grower reads the scale on the device: no host wait for it here.
    on_device = (backend.name == "cuda" and not dtrain.paged
                 and backend.grows_on_device(p, n_groups, interaction, monotone, comm))
    gnative, scale = _fixed_gradients(backend, gpair, comm, wait=not on_device)
    # Device memory: the float gradients are done with unless leaves are refitted below.
    del gpair
    if not refit:
        gpairs = None
    new_trees, positions = grow_forest(backend, ell, gnative, scale, p, comm, root_from_bins,
                                       tree_indices=range(first, first + n_groups), interaction=interaction,
                                       monotone=monotone)
    del gnative
    n = ell.n_rows
    for group, tree in enumerate(new_trees):
        leaves = positions if n_groups == 1 else positions[group * n : (group + 1) * n] // n_groups
        alpha = objective.leaf_quantile_alpha(group) if obj is None else None
        if alpha is not None:
            # Quantile objectives refit the leaves to their rows' residuals (before the margins move).
            refresh_leaves(xp, tree, leaves, _column(margin, group), dtrain.label, gpairs[group][:, 1],
                           dtrain.weight, alpha, p.learning_rate, comm)
        # Training margins come from the rows' final leaves: no re-prediction.
        _column(margin, group)[...] += backend.to_device(tree.value)[leaves]
    return new_trees


def _grow_compacted(backend, dtrain, gpairs, margin, p, comm, root_from_bins, first, interaction, monotone):
    """A round's trees on a paged matrix with row sampling: tree `group` grows on the rows its
    sampling kept, gathered into one in-core matrix (external.compact_rows; dropped rows have
    zero gradients, so the tree is the one streaming the pages would grow), then every row's
    margin moves by the tree routed through its bins, page by page. Returns the trees. It
    empties the list gpairs (each group's gradients are freed once its tree has grown)."""
    xp = backend.xp
    trees = []
    pending, given = list(gpairs), gpairs
    given.clear()
    # One fixed-point scale for the round's trees, sized as _grow_round sizes it (all groups'
    # rows, all workers'), so that the trees are the ones the other ways grow, bit for bit.
    abs_sum = backend.gradient_abs_sums(pending[0] if len(pending) == 1 else xp.concatenate(pending))
    if comm.world_size > 1:
        abs_sum = comm.allreduce(abs_sum)
    for group in range(len(pending)):
        gpair, pending[group] = pending[group], None
        kept = xp.flatnonzero((gpair[:, 0] != 0) | (gpair[:, 1] != 0))
        ell = _external.compact_rows(backend, dtrain.ellpack, kept)
        g = gpair[kept]
        on_device = backend.name == "cuda" and backend.grows_on_device(p, 1, interaction, monotone, comm)
        gnative, scale = backend.prepare_gradients(g, abs_sum=abs_sum, wait=not on_device)
        (tree,), _ = grow_forest(backend, ell, gnative, scale, p, comm, root_from_bins, tree_indices=(first + group,),
                                 interaction=interaction, monotone=monotone)
        del ell, g, gnative, gpair, kept
        add_tree_binned(backend, dtrain.ellpack, tree, _column(margin, group))
        trees.append(tree)
    return trees


def _agree(comm, votes) -> bool:
    """True if any callback on any worker asked to stop: all workers stop at the same round.

    Every worker runs the same callbacks, so with none there is nothing to agree on and no
    collective is made: a host round trip per round is a large share of a short round."""
    if not votes:
        return False
    stop = any(votes)
    if comm.world_size > 1:
        stop = bool(comm.allreduce(np.array([int(stop)], dtype=np.int64), "max")[0])
    return stop


def _column(margin, group: int):
    """The margins of one output group: a view, so adding to it updates margin."""
    return margin if margin.ndim == 1 else margin[:, group]


def _margin_groups(base_margin) -> int:
    return 1 if base_margin.ndim == 1 else int(base_margin.shape[1])


def _truthy(v) -> bool:
    return str(v).lower() in ("1", "true", "yes") if v is not None else False


def _custom_gradient(xp, obj, margin, dtrain):
    """(n, 2) float32 gradient pairs from a user's objective, checked; (n, K, 2) for K outputs."""
    grad, hess = obj(margin.copy(), dtrain)
    n = margin.shape[0]
    out = xp.empty(margin.shape + (2,), dtype=xp.float32)
    for j, (v, what) in enumerate(((grad, "gradient"), (hess, "hessian"))):
        v = xp.asarray(v, dtype=xp.float32)
        if v.size != margin.size:
            raise ValueError(f"the custom objective returned {v.size} {what} values for {n} rows"
                             + (f" x {margin.shape[1]} outputs" if margin.ndim == 2 else ""))
        out[..., j] = v.reshape(margin.shape)
    if not bool(xp.isfinite(out).all()):
        raise ValueError("the custom objective returned NaN or infinite gradients or hessians")
    return out


class _Rows:
    """The rows of all workers, as a custom metric sees them (XGBoost's DMatrix getters)."""

    def __init__(self, label, weight):
        self.label, self.weight = label, weight

    def get_label(self):
        return self.label

    def get_weight(self):
        return self.weight if self.weight is not None else np.zeros(0, dtype=np.float32)


def _custom_metric(fn, predt, m, comm):
    if comm.world_size == 1:
        name, value = fn(predt, m)
    else:
        parts = comm.allgather((to_host(predt), to_host(m.label),
                                None if m.weight is None else to_host(m.weight)))
        preds, labels, weights = zip(*parts)
        weight = None if all(w is None for w in weights) else np.concatenate(
            [np.ones(len(y), np.float32) if w is None else w for y, w in zip(labels, weights)])
        name, value = fn(np.concatenate(preds), _Rows(np.concatenate(labels), weight))
    return str(name), float(value)
