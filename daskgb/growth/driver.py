"""Which nodes a tree expands next: XGBoost's hist driver (src/tree/driver.h), for both grow policies.

A candidate is an evaluated node with its best split. The driver queues candidates
whose loss change exceeds RT_EPS and hands back the next batch to expand:

  depthwise: every queued node of the shallowest depth at once, in node id order;
  lossguide: the one node with the largest loss change (ties: the smaller node id,
             i.e. the older node).

A popped node is expanded only if its split is valid (split.splits_applied: loss
change > RT_EPS and >= min_split_loss, both children with hessian) and the tree is
within its limits: depth < max_depth and leaves < max_leaves (0: no limit), leaves
counted as nodes are popped. Under lossguide an invalid top ends the tree, as in
XGBoost, whose loop stops on an empty pop (the queue is ordered by loss change, so
behind a top that fails the gain or leaf tests everything fails them too). The
children of an expanded node are evaluated only while they could still be expanded
themselves (child_valid), which also spares their histograms.
"""

from __future__ import annotations

import heapq
from operator import attrgetter

import numpy as np

from ..layouts import SPLIT_DTYPE
from ..split import RT_EPS, SplitParams, splits_applied


class Candidate:
    """A node with its best split. `source` is (evaluation, row): the split record is
    evaluation.recs[row] (SPLIT_DTYPE), where the grower also keeps the node's histogram.
    Ordered as the lossguide queue pops: larger loss change first, then the smaller (older) node id."""

    __slots__ = ("nid", "depth", "loss_change", "source")

    def __init__(self, nid: int, depth: int, loss_change: float, source: tuple):
        self.nid, self.depth, self.loss_change, self.source = nid, depth, loss_change, source

    def __lt__(self, other: "Candidate") -> bool:
        if self.loss_change != other.loss_change:
            return self.loss_change > other.loss_change
        return self.nid < other.nid

    @property
    def split(self) -> np.void:
        ev, row = self.source
        return ev.recs[row]


def records(candidates) -> np.ndarray:
    """The candidates' split records as one SPLIT_DTYPE array (one gather when they share an evaluation)."""
    evs = {id(c.source[0]) for c in candidates}
    if len(evs) == 1:
        return candidates[0].source[0].recs[[c.source[1] for c in candidates]]
    return np.array([c.split for c in candidates], dtype=SPLIT_DTYPE)


_BY_NID = attrgetter("nid")


class Driver:
    """The expansion queue of one tree."""

    def __init__(self, grow_policy: str, max_depth: int, max_leaves: int, split_params: SplitParams):
        if grow_policy not in ("depthwise", "lossguide"):
            raise ValueError(f"grow_policy must be 'depthwise' or 'lossguide', got {grow_policy!r}")
        self.lossguide = grow_policy == "lossguide"
        self.max_depth, self.max_leaves = int(max_depth), int(max_leaves)
        self.split_params = split_params
        self.num_leaves = 1
        self._queue: list[Candidate] = []

    def push(self, candidates) -> None:
        for c in candidates:
            if c.loss_change > RT_EPS:
                if self.lossguide:
                    heapq.heappush(self._queue, c)
                else:
                    self._queue.append(c)

    def pop(self) -> list[Candidate]:
        """The next nodes to expand; empty when the tree is done."""
        if not self._queue:
            return []
        if self.lossguide:
            c = heapq.heappop(self._queue)
            if not self._valid(c):
                self._queue.clear()
                return []
            self.num_leaves += 1
            return [c]
        # Depthwise: the queue holds one depth (children are pushed only after their
        # whole level was popped); expand its valid nodes in id order, while leaves remain.
        level = sorted(self._queue, key=_BY_NID)
        self._queue = []
        ok = splits_applied(records(level), level[0].depth, self.max_depth, self.split_params)
        batch = [c for c, v in zip(level, ok.tolist()) if v]
        if self.max_leaves > 0:
            batch = batch[: max(0, self.max_leaves - self.num_leaves)]
        self.num_leaves += len(batch)
        return batch

    def child_valid(self, parent: Candidate) -> bool:
        """Could the children of this expanded node still be expanded (XGBoost's IsChildValid)?"""
        if self.max_depth > 0 and parent.depth + 1 >= self.max_depth:
            return False
        return not (self.max_leaves > 0 and self.num_leaves >= self.max_leaves)

    def _valid(self, c: Candidate) -> bool:
        if self.max_leaves > 0 and self.num_leaves >= self.max_leaves:
            return False
        return bool(splits_applied(records([c]), c.depth, self.max_depth, self.split_params)[0])
