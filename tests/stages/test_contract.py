"""The backend contract (daskgb/backend/contract.py): every backend offers what it declares, and nothing else picks one.

1. Every member the Backend Protocol declares (its annotated facts and its methods) exists
   on numpy_backend and on cupy_backend, each function with the Protocol's parameter names
   (self aside) and defaults on the same parameters. cupy_backend imports CuPy, so on a
   machine without a GPU its source is read instead (ast): the names it defines or imports,
   each import followed to the def it names, so CPU CI checks the CUDA backend too; on a GPU
   the imported module is checked as well.
2. Nothing outside daskgb/backend/ chooses an implementation by the name of a device:
   see test_no_code_outside_the_backends_compares_device_names for the rule.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import daskgb
from daskgb.backend import contract, numpy_backend

PACKAGE = Path(daskgb.__file__).parent
DEVICE_NAMES = {"cpu", "cuda", "gpu"}


def protocol_facts() -> list[str]:
    """The Protocol's annotated attributes: name, xp, histogram_dtype, grows_on_device, splits_by_category."""
    return list(contract.Backend.__annotations__)


def protocol_methods() -> dict[str, inspect.Signature]:
    """The Protocol's methods, in declaration order."""
    return {name: inspect.signature(value) for name, value in vars(contract.Backend).items()
            if inspect.isfunction(value) and not name.startswith("_")}


def shape(sig: inspect.Signature) -> list[tuple[str, bool]]:
    """(name, has a default) of each parameter but self."""
    return [(p.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values() if p.name != "self"]


def test_the_protocol_declares_the_facts_and_the_stages_functions():
    assert protocol_facts() == ["name", "xp", "histogram_dtype", "grows_on_device", "splits_by_category"]
    methods = protocol_methods()
    assert len(methods) >= 20 and "build_histograms" in methods and "evaluate_splits" in methods


@pytest.mark.parametrize("method", list(protocol_methods()))
def test_numpy_backend_has_each_method_with_its_parameters(method):
    fn = getattr(numpy_backend, method, None)
    assert callable(fn), f"numpy_backend lacks {method}"
    assert shape(inspect.signature(fn)) == shape(protocol_methods()[method]), method


def test_numpy_backend_has_the_facts():
    import numpy as np

    assert numpy_backend.name == "cpu" and numpy_backend.xp is np
    assert numpy_backend.histogram_dtype == np.float64 and numpy_backend.grows_on_device is False


# --------------------------------------------------------------------------- cupy_backend, read as source
def _module_file(module: str) -> Path:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an `from ... import` in `module` names."""
    if not node.level:
        return node.module
    package = module.split(".")
    if _module_file(module).name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def defined(module: str, name: str, depth: int = 0):
    """The top-level statement of `module` (a daskgb module, read as source) that gives `name`:
    a def, a class or an assignment, imports followed to the module they name; None if none."""
    assert depth < 10, f"import chain too long for {module}.{name}"
    tree = ast.parse(_module_file(module).read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module, node)
                    if not source.startswith("daskgb"):
                        return node  # e.g. numpy's own function: exists, signature not ours to read
                    return defined(source, alias.name, depth + 1)
    return None


def ast_shape(fn: ast.FunctionDef) -> list[tuple[str, bool]]:
    """shape() of a def read as source."""
    a = fn.args
    positional = a.posonlyargs + a.args
    with_default = len(positional) - len(a.defaults)
    out = [(arg.arg, i >= with_default) for i, arg in enumerate(positional)]
    out += [(arg.arg, d is not None) for arg, d in zip(a.kwonlyargs, a.kw_defaults)]
    return [(n, d) for n, d in out if n != "self"]


@pytest.mark.parametrize("member", protocol_facts() + list(protocol_methods()))
def test_cupy_backend_source_gives_each_member(member):
    """Read as source (no CuPy needed): cupy_backend defines or imports each member, and each
    method is a def with the Protocol's parameters."""
    node = defined("daskgb.backend.cupy_backend", member)
    assert node is not None, f"cupy_backend neither defines nor imports {member}"
    methods = protocol_methods()
    if member in methods:
        assert isinstance(node, ast.FunctionDef), f"cupy_backend.{member} is not a function: {ast.dump(node)[:200]}"
        assert ast_shape(node) == shape(methods[member]), member
    else:
        assert isinstance(node, (ast.Assign, ast.AnnAssign)), f"cupy_backend.{member} is not a module fact"


def test_the_source_reader_finds_the_numpy_backend_as_imported():
    """The reader above, checked where the module can be imported: it gives every numpy_backend
    method the parameters inspect gives (so a passing read of cupy_backend means something)."""
    for method in protocol_methods():
        node = defined("daskgb.backend.numpy_backend", method)
        assert isinstance(node, ast.FunctionDef), method
        assert ast_shape(node) == shape(inspect.signature(getattr(numpy_backend, method))), method


@pytest.mark.gpu
def test_cupy_backend_has_each_member_with_its_parameters():
    import cupy
    import numpy as np

    from daskgb.backend import cupy_backend

    for method, sig in protocol_methods().items():
        fn = getattr(cupy_backend, method, None)
        assert callable(fn), f"cupy_backend lacks {method}"
        assert shape(inspect.signature(fn)) == shape(sig), method
    assert cupy_backend.name == "cuda" and cupy_backend.xp is cupy
    assert cupy_backend.histogram_dtype == np.int64 and cupy_backend.grows_on_device is True


# --------------------------------------------------------------------------- no device names outside the backends
# Comparisons with a device name outside daskgb/backend/ that are allowed: where the device is
# decided or planned, not where an implementation of a stage is picked.
ALLOWED = {
    # The planner reads facts.device (its facts are plain data, so each decision is tested anywhere).
    "daskgb/training/plan.py": "the planner decides training paths from the device",
    # The Dask layer chooses each worker's device, its communicator and its memory handling.
    "daskgb/dask/": "the Dask layer's device choice",
    # TrainParams checks the spelling of the device parameter (backend/__init__.py resolves it).
    "daskgb/params.py": "the device parameter's check",
}


def _is_device_name(node) -> bool:
    """A string constant naming a device, or a tuple / list / set of constants holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in DEVICE_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_device_name(e) for e in node.elts)
    return False


def _is_name_attribute(node) -> bool:
    """x.name (a backend's, or anything's), or x.name.lower() and the like."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return isinstance(node, ast.Attribute) and node.attr == "name"


def scan(tree) -> list[tuple[str, int, str, bool]]:
    """(enclosing function or class, line, source, whether a side is a `.name`) of each
    comparison (==, !=, in, not in, is, startswith, endswith) in a module's tree that has a
    device name on one side."""
    found = []
    for outer in ast.walk(tree):
        if not isinstance(outer, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        scope = getattr(outer, "name", "<module>")
        for node in ast.iter_child_nodes(outer):
            for sub in _walk_scope(node):
                if isinstance(sub, ast.Compare):
                    sides = [sub.left, *sub.comparators]
                elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                      and sub.func.attr in ("startswith", "endswith")):
                    sides = [sub.func.value, *sub.args]
                else:
                    continue
                if any(_is_device_name(s) for s in sides):
                    found.append((scope, sub.lineno, ast.unparse(sub), any(_is_name_attribute(s) for s in sides)))
    return found


def _walk_scope(node):
    """ast.walk, stopping at nested functions and classes (scan visits them as scopes of their own)."""
    yield node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_scope(child)


def device_comparisons():
    """(path, enclosing function, line, source, compares .name) of scan's comparisons in every
    module of daskgb/ outside daskgb/backend/."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if not rel.startswith("daskgb/backend/"):
            found += [(rel, *hit) for hit in scan(ast.parse(path.read_text()))]
    return found


def test_no_code_outside_the_backends_compares_device_names():
    """The rule: outside daskgb/backend/ (where backend/__init__.py resolves the device and
    picks the backend module), no code compares a `.name` (a backend's name) with a device
    name ("cpu", "cuda", "gpu"; by ==, !=, in, startswith...), and no code compares anything
    else with a device name either, except where the device is being decided or planned
    (ALLOWED: the planner training/plan.py, which reads facts.device; the Dask layer
    daskgb/dask/, which chooses each worker's device; params.py, checking the parameter's
    spelling). What differs between backends is a fact of the contract
    (histogram_dtype, grows_on_device, free_device_memory) or a function of it (phase_clock)."""
    by_name, unexpected = [], []
    for rel, scope, line, src, on_name in device_comparisons():
        where = f"{rel}:{line} ({scope}): {src}"
        if on_name:
            by_name.append(where)
        elif not any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED):
            unexpected.append(where)
    assert not by_name, "a backend's name compared with a device name outside daskgb/backend/:\n" + "\n".join(by_name)
    assert not unexpected, ("implementation chosen by a device name outside daskgb/backend/ (ask the backend "
                            "for a fact or a function instead):\n" + "\n".join(unexpected))


def test_the_rule_sees_what_it_forbids():
    """The scan itself, on the forms code writes such comparisons in (a lambda's belongs to its
    function; a nested function is a scope of its own; "numpy" is no device name)."""
    src = """
def pick(backend, device, xp):
    if backend.name == "cuda":
        pass
    if "cpu" != backend.name.lower():
        pass
    kind = (lambda d: d in ("cuda", "gpu"))(device)
    if backend.name.startswith("cu"):  # no device name: not seen
        pass
    if device.startswith("gpu"):
        pass

    def inner():
        return device == "CPU"

    return 1 if device == "numpy" else 2
"""
    hits = scan(ast.parse(src))
    assert [(scope, on_name) for scope, _, _, on_name in hits] == [("pick", True), ("pick", True), ("pick", False),
                                                                    ("pick", False), ("inner", False)]
