"""The one planner: which way a fit trains its rounds (a Path), and why each faster way was refused.

Paths, fastest first (CUDA_GRAPHS needs all QUEUED_ROUNDS needs, which needs all
DEVICE_LEVELS needs):

  CUDA_GRAPHS            QUEUED_ROUNDS, each round replayed as one captured CUDA graph
                         (growth/graphs.py; the first round runs launch by launch, to compile)
  QUEUED_ROUNDS          DEVICE_LEVELS, the host queueing round i + 1 before it reads round
                         i's trees, so that the device never waits for the host; eval sets
                         are scored on the device in stream order and read with the trees,
                         and callbacks that only read run one round behind
  DEVICE_LEVELS          trees grown on the device, the host waiting once a round
                         (growth/device.py): depthwise level by level, lossguide expansion
                         by expansion
  HOST_LEVELS            the host decides every level (growth/host.py): every option, on
                         either backend
  COMPACTED_PAGES        a paged matrix with row sampling: each tree grows on its sampled rows
                         gathered into one in-core matrix (ellpack/pages.py), by device levels
                         where DEVICE_LEVELS would apply, else host levels
  STREAMED_PAGES         a paged matrix: host levels, every step streaming the pages

plan_rounds() is pure: it reads the facts of a fit (PlanFacts) and the settings, never the
data, so every decision is tested on any machine (tests/test_training_plan.py). The plan is
logged at debug level (logger "daskgb.training"), and the path a model was trained on is
kept as its attribute "training_path" (Booster.attributes()).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from .. import config
from ..layouts import MAX_DEVICE_DEPTH, MAX_DEVICE_LEAVES, MAX_SORTED_CATEGORIES

logger = logging.getLogger("daskgb.training")


class Path(enum.Enum):
    """How a fit trains its rounds (see the module docstring)."""

    CUDA_GRAPHS = "cuda-graphs"
    QUEUED_ROUNDS = "queued-rounds"
    DEVICE_LEVELS = "device-levels"
    HOST_LEVELS = "host-levels"
    COMPACTED_PAGES = "compacted-pages"
    STREAMED_PAGES = "streamed-pages"

    def __str__(self) -> str:
        return self.value


# The in-core paths, fastest first.
_IN_CORE = (Path.CUDA_GRAPHS, Path.QUEUED_ROUNDS, Path.DEVICE_LEVELS, Path.HOST_LEVELS)


@dataclass(frozen=True)
class PlanFacts:
    """What the choice of path depends on, read off a fit before its first round."""

    device: str  # "cpu" or "cuda": the backend that trains
    paged: bool  # the training matrix is a PagedEllpack
    grow_policy: str
    max_depth: int
    max_leaves: int
    colsample_bytree: float
    colsample_bylevel: float
    colsample_bynode: float
    subsample: float
    n_trees_per_round: int
    custom_objective: bool
    refits_leaves: bool
    custom_metric: bool  # a custom metric reads each round's predictions on the host
    writing_callbacks: bool  # a callback may change the training (not every one says reads_only)
    interaction_constraints: bool
    monotone_constraints: bool
    allreduce_on_device: bool  # one process, or NCCL: histograms are summed where they are
    widest_categorical: int = 0  # the most categories of a categorical feature (0: none)

    @classmethod
    def of(cls, params, *, device: str, paged: bool, n_trees_per_round: int, custom_objective: bool,
           refits_leaves: bool, custom_metric: bool, writing_callbacks: bool, interaction,
           monotone, comm, widest_categorical: int = 0) -> "PlanFacts":
        return cls(device=device, paged=paged, grow_policy=params.grow_policy, max_depth=int(params.max_depth),
                   max_leaves=int(params.max_leaves), colsample_bytree=float(params.colsample_bytree),
                   colsample_bylevel=float(params.colsample_bylevel),
                   colsample_bynode=float(params.colsample_bynode), subsample=float(params.subsample),
                   n_trees_per_round=int(n_trees_per_round), custom_objective=custom_objective,
                   refits_leaves=refits_leaves, custom_metric=custom_metric, writing_callbacks=writing_callbacks,
                   interaction_constraints=interaction is not None,
                   monotone_constraints=monotone is not None,
                   allreduce_on_device=comm.world_size == 1 or bool(getattr(comm, "reduces_on_device", False)),
                   widest_categorical=int(widest_categorical))


@dataclass(frozen=True)
class RoundPlan:
    """The path a fit's rounds take, whether its trees grow by device levels (also inside
    COMPACTED_PAGES), and for each faster path the reason it was refused."""

    path: Path
    device_levels: bool
    refused: dict = field(default_factory=dict)  # Path -> reason, fastest first

    def refusals(self) -> str:
        """Why each faster path was not taken, as one line ("" when none was faster)."""
        return "; ".join(f"{p}: {why}" for p, why in self.refused.items())

    def describe(self) -> str:
        """One line: the path, then why each faster one was not taken."""
        text = str(self.path)
        if self.path is Path.COMPACTED_PAGES:
            text += f" (trees by {'device' if self.device_levels else 'host'} levels)"
        if self.refused:
            text += "; not " + "; not ".join(f"{p}: {why}" for p, why in self.refused.items())
        return text


def device_levels_refusal(facts: PlanFacts, *, in_core_matrix: bool = True) -> str | None:
    """Why depthwise trees cannot grow by device levels here (None: they can). in_core_matrix:
    whether the trees grow on an in-core matrix (a compacted one is, whatever the data)."""
    if facts.device != "cuda":
        return "the CPU backend trains (device='cpu')"
    if not in_core_matrix:
        return "the matrix is paged (device_memory_budget): its pages stream through every level"
    if not config.get("training.device-growth"):
        return "turned off (daskgb.training.device-growth)"
    if not config.get("training.split-kernel"):
        return "the split kernel is off (daskgb.training.split-kernel)"
    if facts.grow_policy == "lossguide":
        # growth/device.py grow_lossguide_tree: one open leaf's histogram per slot, max_leaves slots.
        if facts.max_leaves <= 0:
            return "grow_policy='lossguide' without max_leaves (the device grows lossguide trees to a leaf limit)"
        if facts.max_leaves > MAX_DEVICE_LEAVES:
            return f"max_leaves={facts.max_leaves} > {MAX_DEVICE_LEAVES} (lossguide on the device)"
        if facts.colsample_bytree != 1.0 or facts.colsample_bylevel != 1.0:
            return "colsample_bytree or colsample_bylevel < 1 with grow_policy='lossguide'"
    elif facts.grow_policy != "depthwise":
        return f"grow_policy={facts.grow_policy!r}"
    elif facts.max_depth <= 0:
        return "max_depth=0 (no depth limit)"
    elif facts.max_depth > MAX_DEVICE_DEPTH:
        return f"max_depth={facts.max_depth} > {MAX_DEVICE_DEPTH}"
    elif facts.max_leaves != 0:
        return f"max_leaves={facts.max_leaves} with grow_policy='depthwise' (a leaf limit on a level)"
    if facts.interaction_constraints:
        return "interaction_constraints are set"
    if facts.monotone_constraints:
        return "monotone_constraints are set"
    if facts.colsample_bynode != 1.0:
        return f"colsample_bynode={facts.colsample_bynode} (features drawn per node)"
    if not facts.allreduce_on_device:
        return "the workers sum histograms through the host (Dask comms between CPU workers)"
    if facts.widest_categorical > MAX_SORTED_CATEGORIES:
        return (f"a categorical feature has {facts.widest_categorical} categories (the device sorts at most "
                f"{MAX_SORTED_CATEGORIES} a node)")
    return None


def queued_rounds_refusal(facts: PlanFacts) -> str | None:
    """Why the host cannot queue a round before it reads the last one's trees (beyond
    device_levels_refusal's reasons)."""
    if not config.get("training.queue-rounds"):
        return "turned off (daskgb.training.queue-rounds)"
    if facts.custom_objective:
        return "a custom objective (obj=) computes each round's gradients on the host"
    if facts.refits_leaves:
        return "the objective refits each tree's leaves (reg:absoluteerror, reg:quantileerror)"
    if facts.custom_metric:
        return "a custom metric (custom_metric=) reads each round's predictions on the host"
    if facts.writing_callbacks:
        return ("a callback may change the training between rounds (callbacks=; one that only reads says "
                "reads_only = True)")
    return None


def cuda_graphs_refusal(facts: PlanFacts) -> str | None:
    """Why queued rounds cannot be replayed as CUDA graphs (beyond queued_rounds_refusal's)."""
    if not config.get("training.cuda-graphs"):
        return "turned off (daskgb.training.cuda-graphs)"
    if facts.colsample_bytree != 1.0 or facts.colsample_bylevel != 1.0:
        return "colsample_bytree or colsample_bylevel < 1 (each tree draws its own columns)"
    return None


def plan_rounds(facts: PlanFacts) -> RoundPlan:
    """The fastest path the facts allow, and why each faster one was refused."""
    if facts.paged:
        refused = {p: "the matrix is paged (device_memory_budget): its rows are not all on the device"
                   for p in _IN_CORE}
        if facts.subsample < 1.0 and not facts.refits_leaves and config.get("training.compact-sampled-pages"):
            grows = device_levels_refusal(facts, in_core_matrix=True) is None
            return RoundPlan(Path.COMPACTED_PAGES, grows, refused)
        if facts.subsample >= 1.0:
            refused[Path.COMPACTED_PAGES] = "subsample=1 (every row trains every tree: nothing to compact)"
        elif facts.refits_leaves:
            refused[Path.COMPACTED_PAGES] = "the objective refits each tree's leaves from every row"
        else:
            refused[Path.COMPACTED_PAGES] = "turned off (daskgb.training.compact-sampled-pages)"
        return RoundPlan(Path.STREAMED_PAGES, False, refused)
    refused: dict = {}
    why = device_levels_refusal(facts)
    if why is not None:
        for p in (Path.CUDA_GRAPHS, Path.QUEUED_ROUNDS, Path.DEVICE_LEVELS):
            refused[p] = why
        return RoundPlan(Path.HOST_LEVELS, False, refused)
    why = queued_rounds_refusal(facts)
    if why is not None:
        refused[Path.CUDA_GRAPHS] = refused[Path.QUEUED_ROUNDS] = why
        return RoundPlan(Path.DEVICE_LEVELS, True, refused)
    why = cuda_graphs_refusal(facts)
    if why is not None:
        refused[Path.CUDA_GRAPHS] = why
        return RoundPlan(Path.QUEUED_ROUNDS, True, refused)
    return RoundPlan(Path.CUDA_GRAPHS, True, refused)
