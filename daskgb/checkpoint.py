"""Checkpoints of a training run, so that a run cut short goes on where it stopped.

Every ``checkpoint_every`` rounds (and at the end) the model so far and its eval history
are written to ``checkpoint_dir`` as one JSON file, atomically: the file is written under
a temporary name, flushed to disk and renamed, so a crash mid-write leaves the previous
checkpoint intact and never a half-written one under a checkpoint's name.

A checkpoint can't lie: it carries a SHA-256 checksum of its content, and a reader checks
the checksum and the structure against the header (the trees and the eval history hold as
many rounds as it says). One that fails is passed over with a warning for the one before it.

Runs keep apart: a file's name holds its run's id (``checkpoint-<run>-<rounds>.json``), a
digest of the run's fingerprint (below) and num_boost_round, so a run keeps the newest
``KEEP`` checkpoints of its own and never deletes another run's in the same directory.

``resume=True`` starts from the newest good checkpoint of its own run, else from the newest
of another run with the same fingerprint (the same parameters and data: the same trees; say,
a finished run trained on for more rounds): its trees are put back, each
training and eval row's margin is rebuilt by adding the trees' leaf values one tree at a
time in round order (the same float32 additions training made), the eval history is
restored and EarlyStopping callbacks are replayed over it. Row sampling, column sampling
and learning-rate schedules are keyed by the round and the seed, so the rounds after the
checkpoint grow the trees an unbroken run grows, and the resumed model equals it.
Callbacks of the user's own start afresh at the resumed round.

A checkpoint records a fingerprint of what shapes the model: the parameters, the cuts
the data was quantised with, the number of rows and the features. Resuming with other
parameters or other data is an error that says which of them differs.

On Dask, rank 0 writes and reads the checkpoints on its worker and sends what it read to
the other ranks, so ``checkpoint_dir`` must be a path that rank 0's worker can write (on
a cluster of several hosts, storage they share if rank 0 may land on another host).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np

from .arrays import to_host

FORMAT = "daskgb-checkpoint"
VERSION = 2  # 2: a run id in the name and the file, and a checksum (1: neither; still read)
KEEP = 2
# checkpoint-<run>-<rounds>.json (a version-1 file has no run id).
_NAME = re.compile(r"^checkpoint-(?:([0-9a-f]{16})-)?(\d{8})\.json$")

# Parameters that do not change the trees a round grows: a resumed run may set them anew.
_NOT_IN_FINGERPRINT = {"verbosity", "nthread", "n_jobs", "silent"}


def check_options(checkpoint_dir, checkpoint_every, resume) -> Path | None:
    """The checkpoint directory as a Path (None without one); bad options are a ValueError."""
    if not isinstance(resume, (bool, np.bool_)):
        raise ValueError(f"resume must be True or False, got {resume!r}")
    if checkpoint_dir is None:
        if resume:
            raise ValueError("resume=True needs checkpoint_dir: the directory the interrupted run wrote "
                             "its checkpoints to")
        if checkpoint_every is not None:
            raise ValueError("checkpoint_every needs checkpoint_dir")
        return None
    if not isinstance(checkpoint_dir, (str, os.PathLike)) or str(checkpoint_dir) == "":
        raise ValueError(f"checkpoint_dir must be a path, got {checkpoint_dir!r}")
    if checkpoint_every is not None and (isinstance(checkpoint_every, bool)
                                         or not isinstance(checkpoint_every, (int, np.integer))
                                         or checkpoint_every < 1):
        raise ValueError(f"checkpoint_every must be an integer >= 1 (rounds), got {checkpoint_every!r}")
    return Path(checkpoint_dir)


def check_writable(directory: Path) -> None:
    """Make the directory and prove it takes a file, so that a bad path fails before training."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"checkpoint_dir {str(directory)!r} is not a writable directory: {exc}") from None


def fingerprint(params: dict, cuts, n_rows: int, n_features: int, feature_names) -> dict:
    """What a resumed run must share with the run that wrote the checkpoint, as short digests."""
    kept = {str(k): v for k, v in (params or {}).items() if k not in _NOT_IN_FINGERPRINT}
    cut_bytes = np.asarray(to_host(cuts.ptrs), dtype=np.int64).tobytes() + np.asarray(
        to_host(cuts.values), dtype=np.float32).tobytes()
    return {
        "params": _digest(json.dumps(kept, sort_keys=True, default=_jsonable).encode()),
        "cuts": _digest(cut_bytes),
        "rows": int(n_rows),
        "features": int(n_features),
        "feature_names": None if feature_names is None else [str(n) for n in feature_names],
    }


def mismatch(saved: dict, now: dict) -> str | None:
    """A sentence naming what differs between a checkpoint's fingerprint and this run's, or None."""
    what = {"params": "the parameters", "cuts": "the data's quantile cuts (other rows or max_bin)",
            "rows": "the number of training rows", "features": "the number of features",
            "feature_names": "the feature names"}
    differs = [what[k] for k in what if saved.get(k) != now.get(k)]
    return None if not differs else " and ".join(differs)


def run_id(fp: dict, num_boost_round: int) -> str:
    """The id of a run: what shapes its model (its fingerprint) and its length."""
    return _digest(json.dumps({"fingerprint": fp, "num_boost_round": int(num_boost_round)}, sort_keys=True,
                              default=_jsonable).encode())


class Checkpoints:
    """The checkpoints of one run in one directory (fingerprint and num_boost_round: the run's;
    without them, any run's, newest first)."""

    def __init__(self, directory: Path, every: int | None, fp: dict | None = None,
                 num_boost_round: int | None = None):
        self.directory = Path(directory)
        self.every = every
        self.fingerprint, self.num_boost_round = fp, num_boost_round
        self.run = None if fp is None else run_id(fp, num_boost_round)

    def due(self, rounds_done: int) -> bool:
        return self.every is not None and rounds_done % self.every == 0

    def files(self, run: str | None = None) -> list[tuple[int, Path]]:
        """(rounds done, path) of the checkpoint files here (of run `run` only, if given), newest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m and (run is None or m.group(1) == run):
                found.append((int(m.group(2)), p))
        return sorted(found, reverse=True)

    def latest(self) -> dict | None:
        """The checkpoint to resume from, or None: the newest good one of this run; else the
        newest good one of another run with this fingerprint (resume then checks its rounds
        against num_boost_round); else the newest good one of any run (resume then says what
        differs). A file that does
        not read (cut short by a full disk, say) or fails its checksum or structure is passed
        over with a warning for the one before it."""
        if self.run is None:
            return next(self._good(self.files()), None)
        mine = self.files(self.run)
        own = next(self._good(mine), None)
        if own is not None:
            return own
        other = None
        for state in self._good([f for f in self.files() if f not in mine]):
            if mismatch(state.get("fingerprint") or {}, self.fingerprint) is None:
                return state
            other = other or state
        return other

    def _good(self, files):
        """The states of the files that read whole and pass their checks, in the files' order."""
        for rounds, path in files:
            try:
                state = json.loads(path.read_text())
                if not isinstance(state, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                warnings.warn(f"daskgb: skipping checkpoint {path.name}: it does not read ({exc})", stacklevel=4)
                continue
            if state.get("format") != FORMAT:
                warnings.warn(f"daskgb: skipping {path.name}: not a daskgb checkpoint", stacklevel=4)
                continue
            version = state.get("version")
            if not isinstance(version, int) or version > VERSION:
                raise ValueError(f"checkpoint {path} has version {version!r}, written by a newer daskgb; this "
                                 f"daskgb reads version {VERSION}")
            problem = _problem(state, rounds)
            if problem is not None:
                warnings.warn(f"daskgb: skipping checkpoint {path.name}: {problem}", stacklevel=4)
                continue
            state["path"] = str(path)
            yield state

    def save(self, booster, history: dict, rounds_done: int, num_boost_round: int, fp: dict) -> Path:
        """Write the checkpoint after `rounds_done` rounds; keep this run's newest KEEP."""
        run = self.run or run_id(fp, num_boost_round)
        state = {"format": FORMAT, "version": VERSION, "run": run, "rounds": int(rounds_done),
                 "num_boost_round": int(num_boost_round), "fingerprint": fp,
                 "model": booster.to_dict(), "history": history}
        # The checksum covers the canonical text of everything else (sorted keys), which a
        # reader makes again from what it parsed: JSON numbers and strings read back the same.
        canonical = json.dumps(state, sort_keys=True, default=_jsonable)
        state = json.loads(canonical)
        state["checksum"] = hashlib.sha256(canonical.encode()).hexdigest()
        path = self.directory / f"checkpoint-{run}-{rounds_done:08d}.json"
        text = json.dumps(state)
        fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        for _, old in self.files(run)[KEEP:]:
            try:
                old.unlink()
            except OSError:
                pass
        return path


def _problem(state: dict, rounds: int) -> str | None:
    """Why a checkpoint's content can't be trusted (its file says `rounds`), or None."""
    if state.get("rounds") != rounds:
        return "its name and contents disagree"
    if state.get("version", 1) >= 2:
        body = {k: v for k, v in state.items() if k != "checksum"}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if state.get("checksum") != digest:
            return "its checksum does not match its content (edited or damaged)"
    model, history = state.get("model"), state.get("history")
    if not isinstance(model, dict) or not isinstance(history, dict) or not isinstance(state.get("fingerprint"), dict):
        return "it lacks its model, history or fingerprint"
    trees, info = model.get("trees"), model.get("tree_info")
    if not isinstance(trees, list) or not isinstance(info, list) or len(trees) != len(info):
        return "its trees and tree_info disagree"
    if not all(isinstance(g, int) and g >= 0 for g in info):
        return "its tree_info is not a list of output groups"
    groups = max(info) + 1 if info else 1
    per_group = model.get("num_parallel_tree", 1)  # trees of a group a round (Booster.to_dict)
    if not isinstance(per_group, int) or len(trees) != rounds * groups * per_group:
        return (f"it holds {len(trees)} trees, not the {rounds} rounds x {groups} groups x {per_group} parallel "
                "trees its header says")
    for name, metrics in history.items():
        if not isinstance(metrics, dict):
            return f"its history of {name!r} is not a table of metrics"
        for metric, values in metrics.items():
            if not isinstance(values, list) or len(values) != rounds:
                return f"its history of {name}-{metric} does not hold {rounds} values"
    return None


def _digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)
