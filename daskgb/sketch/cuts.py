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
    def max_bins_per_feature(self) -> int:
        return int(np.diff(self._host_ptrs).max(initial=0))

    def to(self, xp) -> "Cuts":
        """The same cuts with their arrays in module xp (numpy or cupy)."""
        return Cuts(_as_xp(xp, self.ptrs), _as_xp(xp, self.values), _as_xp(xp, self.min_values))
