"""Monotone constraints: XGBoost's monotone_constraints, as per-node bounds on leaf weights.

A feature with constraint +1 (-1) may split a node only where the left child's weight
is <= (>=) the right child's. Weights are clipped to the node's [lower, upper] bounds
before the gain is computed from them, so a split's gain is that of the weights the
tree would actually get; after a split on a constrained feature the children's
bounds meet at the midpoint of their two weights (XGBoost's TreeEvaluator), so the
whole subtree on the left stays below (above) the one on the right. Split evaluation
applies the constraints (split.evaluate_splits); this module parses them and keeps
each tree's bounds.

As in XGBoost, giving the parameter at all (even all zeros) switches every gain to
the weight form -(2 G w + (H + lambda) w^2) in float, which rounds differently from
the closed form used without constraints.
"""

from __future__ import annotations

import json
import numbers

import numpy as np

# XGBoost's initial bounds: the largest finite float32, not infinity.
_FLT_MAX = float(np.finfo(np.float32).max)


def parse_monotone_constraints(value):
    """None, or the constraints as a list of ints (by position) or a dict {name or index: int}.

    Takes XGBoost's forms: the string "(1,0,-1)", a list or tuple (or 1-D array) of
    ints, or a dict keyed by feature name or index. Values must be -1, 0 or 1.
    Positions and names are checked against the data by monotone_vector().
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("(") and text.endswith(")"):
            text = "[" + text[1:-1] + "]"
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"monotone_constraints is not a valid tuple of -1, 0, 1: {value!r}") from None
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _index(k): _direction(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"monotone_constraints must be a tuple, list or dict of -1, 0, 1, got {value!r}")
    return [_direction(v) for v in value]


def _direction(v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or v not in (-1, 0, 1):
        raise ValueError(f"monotone_constraints values must be -1, 0 or 1, got {v!r}")
    return int(v)


def _index(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"monotone_constraints keys must be feature names or indices, got {k!r}")
    return int(k)


def monotone_vector(constraints, n_features: int, feature_names=None) -> np.ndarray | None:
    """(n_features,) int8 directions, or None without constraints.

    A list shorter than the features is padded with zeros (XGBoost does the same);
    a longer one, an index out of range or an unknown name is a ValueError.
    """
    if constraints is None:
        return None
    out = np.zeros(n_features, dtype=np.int8)
    if isinstance(constraints, dict):
        index = {str(n): i for i, n in enumerate(feature_names)} if feature_names is not None else {}
        for key, c in constraints.items():
            if isinstance(key, str):
                if key not in index:
                    raise ValueError(f"monotone_constraints names feature {key!r}, which the data does not have"
                                     + (f" (its features: {list(index)})" if index else " (it has no feature names)"))
                key = index[key]
            elif not 0 <= key < n_features:
                raise ValueError(f"monotone_constraints names feature index {key}, outside [0, {n_features})")
            out[key] = c
        return out
    if len(constraints) > n_features:
        raise ValueError(f"monotone_constraints has {len(constraints)} entries for data with {n_features} features")
    out[: len(constraints)] = constraints
    return out


class NodeBounds:
    """[lower, upper] bounds on the weights of each node of one tree."""

    def __init__(self, monotone: np.ndarray):
        self.monotone = monotone
        self._bounds = {0: (-_FLT_MAX, _FLT_MAX)}

    def of(self, nids) -> np.ndarray:
        """(k, 2) float32 bounds of the nodes."""
        return np.array([self._bounds[int(n)] for n in nids], dtype=np.float32).reshape(-1, 2)

    def split(self, nids, features, left_weights, right_weights, lids, rids) -> None:
        """Children's bounds from their parent's and, on a constrained feature, the midpoint of their weights."""
        for nid, f, wl, wr, lid, rid in zip(nids, features, left_weights, right_weights, lids, rids):
            lo, hi = self._bounds[int(nid)]
            left, right = [lo, hi], [lo, hi]
            c = self.monotone[int(f)]
            if c != 0:
                mid = float((np.float32(wl) + np.float32(wr)) / np.float32(2))  # in float, as XGBoost
                if c > 0:
                    left[1], right[0] = mid, mid
                else:
                    left[0], right[1] = mid, mid
            self._bounds[int(lid)], self._bounds[int(rid)] = tuple(left), tuple(right)
