"""Histogram cuts: each feature's bin boundaries, the sketch's product and what every stage after it reads."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..arrays import to_host


def _as_xp(xp, a):
    """The array `a` in module xp (a device->host copy when xp is numpy)."""
    return to_host(a) if xp is np else xp.asarray(a)



@dataclass
class Cuts:
    """Histogram bin boundaries: feature f owns global bins ptrs[f]:ptrs[f+1]; values[b] is bin b's upper
    bound (exclusive)."""

    ptrs: Any  # (n_features + 1,) int32
    values: Any  # float32
    min_values: Any  # (n_features,) float32
    # Host bool (n_features,): the categorical features (None: none). Such a feature's bin c
    # holds category c: its values are c + 1 (bin c's exclusive upper bound) for c = 0..its
    # largest category, so binning (the values searched, side="right") maps a category to its
    # own bin, truncating as XGBoost's AsCat does, and a category above the largest seen
    # falls in the last bin, as in XGBoost's SearchCatBin.
    categorical: Any = None

    @property
    def has_categorical(self) -> bool:
        return self.categorical is not None and bool(np.any(self.categorical))

    @cached_property
    def _host_ptrs(self) -> np.ndarray:
        return to_host(self.ptrs).astype(np.int64)

    @property
    def n_features(self) -> int:
        return len(self._host_ptrs) - 1

    @property
    def total_bins(self) -> int:
        return int(self._host_ptrs[-1])

    @cached_property
    def widest_categorical(self) -> int:
        """The most categories (bins) of a categorical feature; 0 without one."""
        if not self.has_categorical:
            return 0
        return int(np.diff(self._host_ptrs)[np.asarray(self.categorical, dtype=bool)].max())

    @cached_property
    def max_bins_per_feature(self) -> int:
        return int(np.diff(self._host_ptrs).max(initial=0))

    def to(self, xp) -> "Cuts":
        """The same cuts with their arrays in module xp (numpy or cupy)."""
        return Cuts(_as_xp(xp, self.ptrs), _as_xp(xp, self.values), _as_xp(xp, self.min_values), self.categorical)


def with_categories(cuts: Cuts, largest, categorical) -> Cuts:
    """The cuts with each categorical feature's bins replaced by one bin per category
    0..largest[f] (XGBoost's AddCategories: every category up to the largest seen, seen or
    not). largest: (n_features,) each feature's largest value (NaN where it has none);
    categorical: bool (n_features,), or None for no categorical feature."""
    if categorical is None or not np.any(categorical):
        return cuts
    categorical = np.asarray(categorical, dtype=bool)
    xp_is_np = isinstance(cuts.values, np.ndarray)
    ptrs = to_host(cuts.ptrs).astype(np.int64)
    values = to_host(cuts.values).astype(np.float32)
    min_values = to_host(cuts.min_values).astype(np.float32).copy()
    largest = np.asarray(largest, dtype=np.float64)
    parts, new_ptrs = [], [0]
    for f in range(ptrs.size - 1):
        if categorical[f]:
            top = int(largest[f]) if np.isfinite(largest[f]) else 0
            seg = np.arange(1, top + 2, dtype=np.float32)
            min_values[f] = 0.0
        else:
            seg = values[ptrs[f] : ptrs[f + 1]]
        parts.append(seg)
        new_ptrs.append(new_ptrs[-1] + seg.size)
    out = Cuts(np.asarray(new_ptrs, dtype=np.int32), np.concatenate(parts).astype(np.float32), min_values,
               categorical)
    if xp_is_np:
        return out
    from ..arrays import array_module

    return out.to(array_module(cuts.values))
