"""Which features a tree node may split on: column sampling and interaction constraints.

Both end as one boolean row per node (True: the node may split on the feature);
split evaluation takes the rows of all nodes it evaluates as one (k, n_features) mask.

Column sampling follows XGBoost's ColumnSampler: colsample_bytree draws the tree's
features from all features, colsample_bylevel draws each depth's features from the
tree's, colsample_bynode draws each node's features from its depth's. A draw keeps
max(1, int(rate * n)) of the n features it draws from, the product taken in float32
as XGBoost's C++ takes it. The draws come from a host RNG keyed by (seed, tree index,
depth or node id): every worker draws the same sets without communicating, and the
sets do not depend on the order nodes are evaluated in. They are not XGBoost's random
stream (its mt19937 state carries over from tree to tree), so a sampled model equals
XGBoost's only in distribution, not tree for tree. With feature weights (XGBoost's
feature_weights), each draw is XGBoost's WeightedSamplingWithoutReplacement: every
feature of the set draws the key log(u) / max(w, 1e-6), u uniform in [0, 1), and the
draw keeps the features of the largest keys, so a feature is drawn first with
probability proportional to its weight.

Interaction constraints follow XGBoost's FeatureInteractionConstraintHost: the root
may split on any feature; after a split on feature f, a child may split on the
features used on its path (f included) and on every feature of each constraint set
that contains all of them. A feature that is in no set can therefore be used only
where nothing else has been, and then only it (and the path's features) below it.
"""

from __future__ import annotations

import json
import numbers

import numpy as np


# --------------------------------------------------------------------------- column sampling
def sample_count(n: int, rate: float) -> int:
    """How many of n features one draw keeps: XGBoost's max(1, int(colsample * n)) in float32."""
    return max(1, int(np.float32(rate) * np.float32(n)))


# XGBoost's kRtEps: the least weight a feature draws with, so that a weight of 0 is drawn last.
_MIN_WEIGHT = np.float32(1e-6)


def _draw(features: np.ndarray, rate: float, rng: np.random.Generator, weights: np.ndarray | None = None) -> np.ndarray:
    if rate == 1.0:
        return features
    n = sample_count(features.size, rate)
    if weights is None:
        keep = rng.choice(features.size, n, replace=False)
    else:
        # Efraimidis and Spirakis's weighted sampling without replacement, in float32 as XGBoost's.
        u = rng.random(features.size, dtype=np.float32)
        with np.errstate(divide="ignore"):  # u = 0 draws the key -inf: last
            keys = np.log(u) / np.maximum(weights[features], _MIN_WEIGHT)
        keep = np.argsort(-keys, kind="stable")[:n]
    return np.sort(features[keep])


def check_feature_weights(weights, n_features: int) -> np.ndarray | None:
    """The feature weights as float32, checked against the data's feature count."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float32)
    if w.shape != (n_features,):
        raise ValueError(f"feature_weights has {w.size} weights for data with {n_features} features; give one "
                         "weight per feature")
    return w


class ColumnSampler:
    """The feature sets of one tree: its own, each depth's and each node's (sorted feature indices)."""

    # Stream ids within a tree's key, so that tree, level and node draws never share a stream.
    _TREE, _LEVEL, _NODE = 0, 1, 2

    def __init__(self, n_features: int, bytree: float, bylevel: float, bynode: float, seed: int,
                 tree_index: int, weights=None):
        self.bylevel, self.bynode = float(bylevel), float(bynode)
        self.weights = check_feature_weights(weights, n_features)
        # SeedSequence takes non-negative integers; XGBoost's seed may be negative.
        self._key = (int(seed) % 2**64, int(tree_index))
        self.tree_set = _draw(np.arange(n_features), float(bytree), self._rng(self._TREE), self.weights)
        self._levels: dict[int, np.ndarray] = {}

    def _rng(self, *stream) -> np.random.Generator:
        return np.random.default_rng([*self._key, *stream])

    def level_set(self, depth: int) -> np.ndarray:
        s = self._levels.get(depth)
        if s is None:
            s = self._levels[depth] = _draw(self.tree_set, self.bylevel, self._rng(self._LEVEL, depth), self.weights)
        return s

    def node_set(self, nid: int, depth: int) -> np.ndarray:
        return _draw(self.level_set(depth), self.bynode, self._rng(self._NODE, nid), self.weights)


# --------------------------------------------------------------------------- interaction constraints
def parse_interaction_constraints(value):
    """XGBoost's interaction_constraints as a list of lists of feature indices (int) or names (str).

    Takes None or "" (no constraints), the string form "[[0, 1], [2, 3]]", or a list of
    lists (tuples, sets) of indices or names. Only the form is checked here; indices and
    names are checked against the data by interaction_sets(). An empty list is kept:
    as in XGBoost it enables the constraints with no sets, so each branch of a tree
    uses one feature only.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"interaction_constraints is not a valid list of lists: {value!r} ({e})") from None
    if isinstance(value, np.ndarray):  # equal-sized groups as a 2-D array
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"interaction_constraints must be a list of lists of feature indices or names, "
                         f"got {value!r}")
    sets = []
    for group in value:
        if isinstance(group, np.ndarray):
            group = group.tolist()
        if isinstance(group, (str, bytes)) or not isinstance(group, (list, tuple, set, frozenset)):
            raise ValueError(f"interaction_constraints must be a list of lists; {group!r} is not a list")
        items = []
        for f in group:
            if isinstance(f, str):
                items.append(f)
            elif isinstance(f, numbers.Real) and not isinstance(f, bool) and float(f).is_integer():
                items.append(int(f))
            else:
                raise ValueError(f"interaction_constraints entries must be feature indices or names, got {f!r}")
        sets.append(items)
    return sets


def interaction_sets(constraints, n_features: int, feature_names=None) -> np.ndarray | None:
    """The constraint sets as an (n_sets, n_features) bool matrix, or None without constraints.

    Raises ValueError for an index outside [0, n_features) or a name the data does not have.
    """
    if constraints is None:
        return None
    index = {str(n): i for i, n in enumerate(feature_names)} if feature_names is not None else None
    out = np.zeros((len(constraints), n_features), dtype=bool)
    for s, group in enumerate(constraints):
        for f in group:
            if isinstance(f, str):
                if index is None:
                    raise ValueError(f"interaction_constraints names feature {f!r}, but the data has no "
                                     f"feature names; use feature indices")
                if f not in index:
                    raise ValueError(f"interaction_constraints names feature {f!r}, which the data does not have "
                                     f"(its features: {list(index)})")
                f = index[f]
            elif not 0 <= f < n_features:
                raise ValueError(f"interaction_constraints names feature index {f}, outside [0, {n_features}) "
                                 f"for data with {n_features} features")
            out[s, f] = True
    return out


class InteractionConstraints:
    """The features each node of one tree may split on under the constraint sets."""

    def __init__(self, sets: np.ndarray):
        self.sets = sets
        n_features = sets.shape[1]
        self._path = {0: np.zeros(n_features, dtype=bool)}  # features used above the node
        self._allowed = {0: np.ones(n_features, dtype=bool)}

    def allowed(self, nid: int) -> np.ndarray:
        return self._allowed[nid]

    def split(self, nid: int, feature: int, left: int, right: int) -> None:
        path = self._path[nid].copy()
        path[feature] = True
        # The sets holding every feature of the path: no path feature outside the set.
        relevant = ~(path[None, :] & ~self.sets).any(axis=1)
        allowed = path | self.sets[relevant].any(axis=0)
        for child in (left, right):
            self._path[child] = path
            self._allowed[child] = allowed


# --------------------------------------------------------------------------- both, per tree
class NodeFeatures:
    """Per tree: the (k, n_features) masks split evaluation applies, or None when nothing restricts."""

    def __init__(self, params, n_features: int, tree_index: int, interaction: np.ndarray | None = None):
        self.n_features = n_features
        rates = (params.colsample_bytree, params.colsample_bylevel, params.colsample_bynode)
        self.sampler = (ColumnSampler(n_features, *rates, params.seed, tree_index, params.feature_weights)
                        if any(r < 1.0 for r in rates) else None)
        self.interaction = InteractionConstraints(interaction) if interaction is not None else None

    @property
    def restricts(self) -> bool:
        """Whether any node may be denied a feature (else masks() is None)."""
        return self.sampler is not None or self.interaction is not None

    def masks(self, nids, depths) -> np.ndarray | None:
        if self.sampler is None and self.interaction is None:
            return None
        out = np.ones((len(nids), self.n_features), dtype=bool)
        for i, (nid, depth) in enumerate(zip(nids, depths)):
            if self.sampler is not None:
                out[i] = False
                out[i, self.sampler.node_set(int(nid), int(depth))] = True
            if self.interaction is not None:
                out[i] &= self.interaction.allowed(int(nid))
        return out

    def split(self, nids, features, lids, rids) -> None:
        if self.interaction is not None:
            for nid, f, lid, rid in zip(nids, features, lids, rids):
                self.interaction.split(int(nid), int(f), int(lid), int(rid))
