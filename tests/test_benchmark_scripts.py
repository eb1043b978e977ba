"""The measuring and profiling scripts (benchmarks/, examples/) run: a refactor cannot break them unseen.

Each script runs as a subprocess with its smoke arguments (tiny data, a round or two), the
repository root on PYTHONPATH; the test checks its exit status and one line of its output.
Scripts whose subject exists on the CPU run there, on every machine (CI's included); those
whose subject is GPU-only (kernels, CUDA graphs, NCCL, device memory) are marked gpu and
skipped without a GPU. So that the GPU-only scripts are not only checked where a GPU is,
every daskgb name a script imports, reads or patches (module.NAME, module.Class.NAME, and a
(module, "NAME") pair as the scripts' wrappers take them) is also looked up in the source
(test_names_exist), without importing anything.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120
# A GPU run may compile kernels first (NVRTC, once a machine: CuPy caches them on disk).
GPU_TIMEOUT_S = 240

# (script, arguments, a line its output holds); "{tmp}" is the test's own folder.
CPU_RUNS = [
    ("benchmarks/determinism_runs.py", ["--device", "cpu", "--smoke"], "byte-identical"),
    ("benchmarks/cpu_speed.py", ["--cases", "higgs,higgs-eval,higgs-predict", "--repeats", "1", "--rounds", "3",
                                 "--rows-scale", "0.004"], "| higgs-predict: 200 rows, 3 trees (seconds to predict) |"),
    ("benchmarks/host_memory_batches.py", ["--device", "cpu", "--smoke"], "host allocations traced"),
    ("benchmarks/repeated_fits.py", ["--cpu", "--smoke"], "| worker | figure | after fit 1 | after fit 2 |"),
    ("benchmarks/model_digests.py", ["--device", "cpu", "--rounds", "2", "--rows", "500"], "cpu binary-depthwise"),
    ("benchmarks/profile_train.py", ["--device", "cpu", "--smoke", "--host"],
     "host grower (no added syncs)"),
    ("benchmarks/profile_external.py", ["--device", "cpu", "--smoke", "--path", "compact"], "path compacted-pages:"),
    ("benchmarks/profile_external.py", ["--device", "cpu", "--smoke", "--path", "stream"], "path streamed-pages:"),
    ("benchmarks/profile_quantise.py", ["--device", "cpu", "--smoke"], "| higgs | 2,000 x 28 |"),
    ("benchmarks/profile_dask.py", ["--device", "cpu", "--smoke", "--sync-allreduce"], '"path": "host-levels"'),
    ("benchmarks/dask_overhead.py", ["--device", "cpu", "--smoke"], "training path: host-levels"),
    ("benchmarks/placement_balance.py", ["--smoke"], "same model: True"),
    ("benchmarks/quickstart_fresh.py", ["--smoke"], "medians of 1: daskgb"),
    ("benchmarks/skewed_columns.py", ["--smoke"], "features read by their other entries"),
    ("benchmarks/eval_auc_dask.py", ["--device", "cpu", "--smoke"], "| auc |"),
    ("benchmarks/training_paths.py", ["--device", "cpu", "--smoke"], '"case": "lossguide", "rows": 20000'),
    ("examples/user_paths.py", ["--device", "cpu", "--smoke", "--cases",
                                "eval set watched,estimators + early stopping,predict,ranking"],
     "| the same through GBClassifier / XGBClassifier: fit(eval_set=..., early_stopping_rounds=20) |"),
    ("examples/benchmark.py", ["--sets", "higgs,ranking", "--rows", "2000", "--rounds", "2", "--device", "cpu",
                               "--skip-xgboost", "--sweep", "--sweep-rounds", "2", "--out", "{tmp}"],
     "| higgs | 2,000 x 28 |"),
    ("examples/benchmark_external.py", ["--rows", "20000", "--rounds", "2", "--device", "cpu", "--rates", "1.0,0.5",
                                        "--paths", "both"], "| out of core | 0.5 | 13 | stream |"),
    ("examples/benchmark_external.py", ["--rows", "4000", "--rounds", "2", "--device", "cpu", "--rates", "0.5",
                                        "--dask", "2"], "through Dask (2 workers, device cpu)"),
    ("examples/benchmark_categorical.py", ["--device", "cpu", "--smoke"], "ratio daskgb / XGBoost: first fit"),
    ("examples/benchmark_scaling.py", ["--device", "cpu", "--gpus", "2", "--rows-per-gpu", "2000", "--strong-rows",
                                       "3000", "--same-rows", "3000", "--eval-rows", "1000", "--rounds", "2",
                                       "--depth", "3", "--plot", "{tmp}/scaling.png"], "| 2 | 4,000 | weak |"),
]
# examples/quickstart.py is left out: it has no smaller size, and its fit (200,000 rows, 100
# rounds on 2 CPU workers) takes about 30 s on a 2-core machine.

# GPU-only subjects, and the GPU side of the scripts above; one GPU is enough for each.
GPU_RUNS = [
    ("benchmarks/bench_levels.py", ["--smoke"], "tree totals: histograms"),
    ("benchmarks/hist_variants.py", ["--smoke"], "| carry | default | 1024 | 8 |"),
    ("benchmarks/memory_peaks.py", ["--smoke"], "train 2 rounds ("),
    ("benchmarks/nccl_bandwidth.py", ["--smoke"], "| 114,688 |"),
    ("benchmarks/nccl_probe.py", ["--smoke"], '"host_16B_us"'),
    ("benchmarks/shap_speed.py", ["--smoke"], "| pred_contribs |"),
    ("benchmarks/profile_sketch.py", ["--smoke"], "cuts equal: True"),
    ("benchmarks/queued_rounds.py", ["--smoke"], "models equal"),
    ("benchmarks/setting_sweep.py", ["--smoke"], "| year |"),
    ("benchmarks/stamp_rounds.py", ["--smoke"], "## 1 worker(s)"),
    ("benchmarks/training_paths.py", ["--smoke"], '"path": "cuda-graphs"'),
    ("examples/user_paths.py", ["--smoke"], "| cold start 2000 rows, 20 rounds |"),
    ("benchmarks/determinism_runs.py", ["--device", "cuda", "--smoke"], "byte-identical"),
    ("benchmarks/host_memory_batches.py", ["--device", "cuda", "--smoke"], "host allocations traced"),
    ("benchmarks/repeated_fits.py", ["--smoke"], "| worker | figure | after fit 1 | after fit 2 |"),
    ("benchmarks/model_digests.py", ["--device", "cuda", "--rounds", "2", "--rows", "500"], "cuda binary-depthwise"),
    ("benchmarks/profile_train.py", ["--device", "cuda", "--smoke", "--host"], "host grower (no added syncs)"),
    ("benchmarks/profile_external.py", ["--device", "cuda", "--smoke"], "host to device from page memory"),
    ("benchmarks/profile_quantise.py", ["--device", "cuda", "--smoke"], "| higgs | 2,000 x 28 |"),
    ("benchmarks/profile_cold_start.py", ["--rows", "2000", "--rounds", "2", "--top", "3"], " compiles, "),
    ("benchmarks/profile_dask.py", ["--workers", "1", "--smoke", "--sync-allreduce"], '"path": "device-levels"'),
    ("benchmarks/profile_dask.py", ["--workers", "1", "--smoke", "--events"], '"total without setup"'),
    ("benchmarks/dask_overhead.py", ["--workers", "1", "--smoke"], "training path:"),
    ("examples/benchmark.py", ["--sets", "higgs", "--rows", "2000", "--rounds", "2", "--device", "cuda",
                               "--skip-xgboost", "--out", "{tmp}"], "| higgs | 2,000 x 28 |"),
    ("examples/benchmark_external.py", ["--rows", "20000", "--rounds", "2", "--device", "cuda", "--rates", "0.5"],
     "| out of core | 0.5 |"),
    ("examples/benchmark_categorical.py", ["--smoke"], "| daskgb |"),
]


def _id(run) -> str:
    script, args, _ = run
    return " ".join([Path(script).stem] + [a for a in args if a != "{tmp}"])


def run_script(script: str, args: list, expect: str, tmp_path: Path, timeout: float = TIMEOUT_S) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("MPLBACKEND", "Agg")
    command = [sys.executable, str(ROOT / script)] + [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    said = f"$ {' '.join(command)}\n--- stdout (end)\n{proc.stdout[-3000:]}\n--- stderr (end)\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{said}"
    assert expect in proc.stdout, f"the output lacks {expect!r}\n{said}"


@pytest.mark.parametrize("run", CPU_RUNS, ids=[_id(r) for r in CPU_RUNS])
def test_script_runs_on_cpu(run, tmp_path):
    run_script(*run, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("run", GPU_RUNS, ids=[_id(r) for r in GPU_RUNS])
def test_script_runs_on_gpu(run, tmp_path):
    if Path(run[0]).stem == "user_paths":  # it times both libraries, always
        pytest.importorskip("xgboost")
    run_script(*run, tmp_path, timeout=GPU_TIMEOUT_S)


def test_every_script_is_run():
    """A new script in benchmarks/ gets a smoke run here (CPU or GPU) as it is added."""
    scripts = {p.relative_to(ROOT).as_posix() for p in (ROOT / "benchmarks").glob("*.py")}
    run = {s for s, _, _ in CPU_RUNS + GPU_RUNS}
    assert scripts - run == set(), f"scripts with no smoke run in tests/test_benchmark_scripts.py: {scripts - run}"


# ------------------------------------------------------------------------------ names in the source


def _module_path(name: str) -> Path | None:
    """The source of a daskgb module, or of an examples/ module the scripts import (by its bare name)."""
    if name == "daskgb" or name.startswith("daskgb."):
        base = ROOT.joinpath(*name.split("."))
        for path in (base / "__init__.py", base.with_suffix(".py")):
            if path.is_file():
                return path
        return None
    path = ROOT / "examples" / f"{name}.py"
    return path if "." not in name and path.is_file() else None


_PARSED: dict = {}


def _definitions(module: str) -> dict:
    """Top-level names of a module: name -> ("node", its ast node) or ("import", module, name or None)."""
    if module in _PARSED:
        return _PARSED[module]
    path = _module_path(module)
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: dict = {}

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names[node.name] = ("node", node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            names[n.id] = ("node", node)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        names[alias.asname] = ("import", alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        names[top] = ("import", top, None)
            elif isinstance(node, ast.ImportFrom):
                origin = _absolute(node, package)
                for alias in node.names:
                    names[alias.asname or alias.name] = ("import", origin, alias.name)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    _PARSED[module] = names
    return names


def _all_of(module: str) -> list:
    """The names a module's __all__ lists (a literal list or tuple), or none."""
    found = _definitions(module).get("__all__")
    if found is None or found[0] != "node" or not isinstance(found[1], ast.Assign):
        return []
    try:
        return list(ast.literal_eval(found[1].value))
    except ValueError:
        return []


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(module: str) -> bool:
    return _module_path(module) is not None


def _lookup(module: str, name: str, depth: int = 0):
    """What `module.name` is: ("module", name), ("class", module, ClassDef), ("other",), or None
    (it does not exist). Follows imports between checked modules."""
    if _known(f"{module}.{name}"):
        return ("module", f"{module}.{name}")
    definitions = _definitions(module)
    found = definitions.get(name)
    if found is None:
        # A module __getattr__ (daskgb's lazy estimators) serves the names its __all__ lists.
        return ("other",) if "__getattr__" in definitions and name in _all_of(module) else None
    if found[0] == "node":
        node = found[1]
        if isinstance(node, ast.ClassDef):
            return ("class", module, node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return ("function", module, node)
        return ("other",)
    _, origin, attr = found
    if attr is None:
        return ("module", origin) if _known(origin) else ("other",)
    if not _known(origin) or depth > 10:
        return ("other",)  # an outside module's name: not ours to check
    return _lookup(origin, attr, depth + 1)


def _class_has(module: str, cls: ast.ClassDef, name: str, depth: int = 0) -> bool:
    """Whether a class defines `name` in its body or might inherit it (a base not found in
    the checked sources counts as having it)."""
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id == "object":
            continue
        found = _lookup(module, base.id) if isinstance(base, ast.Name) and depth <= 10 else None
        if found is None or found[0] != "class":
            return True  # a base outside the checked sources: it may have the name
        if _class_has(found[1], found[2], name, depth + 1):
            return True
    return False


def _script_names(path: Path) -> list[str]:
    """What a script names that is not there, one "path:line: what" each: the daskgb (and
    examples/) names it imports, module.NAME and module.Class.NAME it reads or sets, (module or
    class, "NAME") pairs in a call or tuple (its wrappers' arguments), calls of daskgb
    functions that cannot bind their arguments, and "daskgb.<setting>" keys that are no
    setting. Names bound to anything else too in the script are not followed."""
    tree = ast.parse(path.read_text(), str(path))
    shown_path = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    aliases: dict = {}
    rebound: set = set()
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = ("module", alias.name)
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = ("module", top)
                if _known(alias.name.split(".")[0]):
                    parts = alias.name.split(".")
                    for i in range(1, len(parts)):
                        imports.append((".".join(parts[:i]), parts[i], node.lineno))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = ("from", node.module, alias.name)
                if _known(node.module):
                    imports.append((node.module, alias.name, node.lineno))
                elif node.module.split(".")[0] == "daskgb":
                    imports.append((node.module.rpartition(".")[0], node.module.rpartition(".")[2], node.lineno))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            rebound.add(node.id)
        elif isinstance(node, ast.arg):
            rebound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            rebound.add(node.name)
    for name in rebound:
        aliases.pop(name, None)  # a name also bound to something else: not checked

    def target(expr):
        """What an expression names: ("module", m) or ("class", m, ClassDef), or None."""
        if isinstance(expr, ast.Name):
            bound = aliases.get(expr.id)
            if bound is None:
                return None
            if bound[0] == "module":
                return ("module", bound[1]) if _known(bound[1]) else None
            _, module, name = bound
            return _lookup(module, name) if _known(module) else None
        if isinstance(expr, ast.Attribute):
            outer = target(expr.value)
            if outer is None or outer[0] not in ("module", "class"):
                return None
            if outer[0] == "module":
                return _lookup(outer[1], expr.attr)
            return ("other",) if _class_has(outer[1], outer[2], expr.attr) else None
        return None

    missing = []

    def check(owner_expr, name: str, line: int, shown: str):
        owner = target(owner_expr)
        if owner is None or owner[0] not in ("module", "class"):
            return
        if owner[0] == "module":
            ok = _lookup(owner[1], name) is not None
        else:
            ok = _class_has(owner[1], owner[2], name)
        if not ok:
            missing.append(f"{shown_path}:{line}: {shown}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            check(node.value, node.attr, node.lineno, ast.unparse(node))
        if isinstance(node, ast.Call):
            callee = target(node.func)
            if callee is not None and callee[0] == "function":
                why = _call_mismatch(callee[2], node)
                if why:
                    missing.append(f"{shown_path}:{node.lineno}: {ast.unparse(node.func)}(...): {why}")
        items = node.args if isinstance(node, ast.Call) else node.elts if isinstance(node, (ast.Tuple, ast.List)) \
            else []
        for owner, name in zip(items, items[1:]):
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier():
                check(owner, name.value, node.lineno, f"{ast.unparse(owner)}, {name.value!r}")
        if isinstance(node, ast.Dict):  # dask.config.set({"daskgb.<setting>": ...})
            for key in node.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("daskgb.") \
                        and key.value[len("daskgb."):] not in _settings():
                    missing.append(f"{shown_path}:{key.lineno}: the setting {key.value!r}")
    for module, name, line in imports:
        if not _known(module) or _lookup(module, name) is None:
            missing.append(f"{shown_path}:{line}: from {module} import {name}")
    return missing


def _settings() -> set:
    """daskgb's settings (daskgb/config.py DEFAULTS), read from the source."""
    found = _definitions("daskgb.config")["DEFAULTS"][1]
    return set(ast.literal_eval(found.value))


def _call_mismatch(fn: ast.FunctionDef, call: ast.Call) -> str | None:
    """Why a call cannot bind to a function's parameters (None: it can, or cannot be told)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    a = fn.args
    positional = [x.arg for x in a.posonlyargs + a.args]
    named = {x.arg for x in a.args + a.kwonlyargs}
    if len(call.args) > len(positional) and a.vararg is None:
        return f"{len(call.args)} positional arguments, the function takes {len(positional)}"
    given = set(positional[: len(call.args)])
    for k in call.keywords:
        if k.arg not in named and a.kwarg is None:
            return f"no parameter {k.arg!r}"
        given.add(k.arg)
    required = positional[: len(positional) - len(a.defaults)]
    required += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    lacking = [r for r in required if r not in given]
    return f"no value for {', '.join(lacking)}" if lacking else None


SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for d in ("benchmarks", "examples") for p in (ROOT / d).glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_names_exist(script):
    """Every daskgb (and examples/) name the script imports, reads, sets or wraps exists."""
    missing = _script_names(ROOT / script)
    assert not missing, "names that are not there (moved or removed?):\n" + "\n".join(missing)


def test_names_check_finds_a_stale_name(tmp_path):
    """The check above sees what the refactor broke in these scripts: a moved module, a removed
    module flag, a method wrapped by name; and passes what is there."""
    script = tmp_path / "stale.py"
    script.write_text("from daskgb.backend import cuda_growth\n"
                      "from daskgb.histogram import cuda as histogram\n"
                      "from daskgb.growth import graphs\n"
                      "import daskgb.booster as booster\n"
                      "histogram.HIST_WINDOW = False\n"
                      "booster._QUEUE_ROUNDS = False\n"
                      "wrap(graphs.ForestGraphs, 'queue')\n"
                      "wrap(graphs.ForestGraphs, 'queue_round')\n"
                      "from daskgb.dask.worker import train_on_worker\n"
                      "train_on_worker('job', 'root', 0, 1, {}, None, [], 10, False, None)\n"
                      "dask.config.set({'daskgb.training.queue-rounds': False, 'daskgb.training.graphs': False})\n")
    text = "\n".join(_script_names(script))
    assert "from daskgb.backend import cuda_growth" in text
    assert "booster._QUEUE_ROUNDS" in text
    assert "'queue_round'" in text
    assert "train_on_worker(...): 10 positional arguments" in text
    assert "the setting 'daskgb.training.graphs'" in text and "queue-rounds" not in text
    assert "HIST_WINDOW" not in text and "'queue'" not in text
