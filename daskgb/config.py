"""daskgb's settings: read from dask.config under "daskgb.", when they are used (never at import).

Set them as any Dask setting: ``dask.config.set({"daskgb.collective.timeout": "30s"})``, a
YAML file in Dask's config folders, or an environment variable through Dask's own mapping
(``DASK_DASKGB__COLLECTIVE__TIMEOUT=30s``; Dask reads those as it is imported). A Dask
worker reads its own process's settings, so a setting for the workers goes in their
environment or config files.

The environment variables daskgb read before (``DASKGB_COLLECTIVE_TIMEOUT`` and the others
in ``LEGACY_ENVIRONMENT``) still work, read when the setting is used; a value set in
dask.config wins over them.
"""

from __future__ import annotations

import os

# Every setting, with its default and meaning.
DEFAULTS = {
    # Seconds an operation of the collective waits for a peer before it fails naming it.
    "collective.timeout": 600.0,
    # Keep a multi-GPU fit's NCCL communicator for the next fit on the same workers.
    "collective.keep-nccl": True,
    # CPU workers on tcp:// clusters: collectives on plain sockets between the ranks, opened
    # once the ranks joined over Dask's comms (collective/sockets.py); off: Dask's comms carry them.
    "collective.direct-links": True,
    # Seconds a GPU worker waits after a fit for the next daskgb task before it gives back
    # its cached device memory (0: at once).
    "worker.give-back-after": 2.0,
    # Seconds a Dask fit waits for workers another fit is training on before it gives up,
    # naming them (dask/fit_lock.py: fits on the same workers queue, one at a time).
    "dask.wait-for-busy-workers": 3600.0,
    # Where the busiest worker holds more than this many times the workers' mean rows, a fit
    # moves whole partitions from the busiest to the idlest (dask/data.py _balanced), then, if
    # still above it, cuts partitions so that each worker holds the mean to a row (_even_rows;
    # not for ranking's query groups). Every round waits for the slowest worker. 0: partitions
    # stay where they are.
    "dask.balance-rows": 1.02,
    # The training paths (training/plan.py): off, a path is never planned.
    "training.device-growth": True,  # depthwise trees grown on the device, one host wait a round
    "training.queue-rounds": True,  # round i + 1 queued before round i's trees are read
    "training.cuda-graphs": True,  # each queued round replayed as one CUDA graph
    "training.compact-sampled-pages": True,  # paged rows with sampling: each tree's rows gathered in core
    "training.split-kernel": True,  # split evaluation in kernels/split.cu (off: the array-operation reference)
}

LEGACY_ENVIRONMENT = {
    "collective.timeout": "DASKGB_COLLECTIVE_TIMEOUT",
    "collective.keep-nccl": "DASKGB_KEEP_NCCL",
    "worker.give-back-after": "DASKGB_GIVE_BACK_AFTER_S",
    "training.queue-rounds": "DASKGB_QUEUE_ROUNDS",
    "training.cuda-graphs": "DASKGB_CUDA_GRAPHS",
}

# Settings that are plain numbers (the others are booleans or seconds).
NUMBERS = {"dask.balance-rows"}

_UNSET = object()


def get(key: str):
    """The setting `key` (a name of DEFAULTS, without "daskgb."), converted to its default's type."""
    if key not in DEFAULTS:
        raise KeyError(f"daskgb has no setting {key!r}; its settings are {sorted(DEFAULTS)}")
    import dask.config

    value = dask.config.get(f"daskgb.{key}", _UNSET)
    where = f"dask.config daskgb.{key}"
    if value is _UNSET:
        env = LEGACY_ENVIRONMENT.get(key)
        value = os.environ.get(env) if env else None
        where = env
        if value is None or (isinstance(value, str) and not value.strip()):
            return DEFAULTS[key]
    default = DEFAULTS[key]
    if isinstance(default, bool):
        return _boolean(value, where)
    if key in NUMBERS:
        return _number(value, where)
    return _seconds(value, where)


def _boolean(value, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{where}={value!r} is not a boolean (true/false, 1/0)")


def _number(value, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}={value!r} is not a number") from None
    if not number >= 0:
        raise ValueError(f"{where}={value!r} must not be negative")
    return number


def _seconds(value, where: str) -> float:
    from dask.utils import parse_timedelta

    try:
        seconds = float(parse_timedelta(value, default="seconds"))
    except (TypeError, ValueError, KeyError):
        raise ValueError(f"{where}={value!r} is not a number of seconds") from None
    if not seconds >= 0:
        raise ValueError(f"{where}={value!r} must not be negative")
    return seconds
