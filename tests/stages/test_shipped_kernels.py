"""The shipped cubins (kernels/cubin, daskgb/backend/shipped.py) are built from today's sources and
declarations, and on a GPU they load, run as the source-compiled modules do, and a first fit in a
fresh process with an empty CuPy cache waits for no compiler."""

from __future__ import annotations

import ast
import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from daskgb.backend import kernels, shipped

KERNELS = Path(kernels.kernel_dir())
PACKAGE = Path(kernels.__file__).resolve().parent.parent
REBUILD = "rebuild them: python -m daskgb.backend.build_cubins (CuPy and NVRTC, no GPU needed)"


def _manifest() -> dict:
    return json.loads((shipped.cubin_dir(KERNELS) / "manifest.json").read_text())


def _declarations() -> dict[str, tuple[str, ...]]:
    """Every kernels.declare(file, names) call in daskgb's sources, read without importing them
    (their modules import CuPy): the names are evaluated with builtins only."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "declare"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "kernels"):
                filename = ast.literal_eval(node.args[0])
                names = tuple(eval(compile(ast.Expression(node.args[1]), str(path), "eval"), {}))
                assert found.setdefault(filename, names) == names, f"{filename} declared twice, differently"
    return found


def test_every_kernel_file_is_declared_by_its_launcher_and_shipped():
    declared = _declarations()
    sources = sorted(p.name for p in KERNELS.glob("*.cu"))
    assert sorted(declared) == sources, "every kernels/*.cu is declared once by the launcher that uses it"
    modules = _manifest()["modules"]
    assert sorted(modules) == sources, f"the shipped cubins are not those of kernels/*.cu: {REBUILD}"
    for filename, names in declared.items():
        assert tuple(modules[filename]["name_expressions"]) == names, f"{filename}'s kernels changed: {REBUILD}"
        assert set(modules[filename]["lowered"]) == set(names)


def test_the_shipped_cubins_are_built_from_todays_sources():
    manifest = _manifest()
    assert tuple(manifest["options"]) == kernels.COMPILE_OPTIONS
    stale = [f for f, e in manifest["modules"].items()
             if e["digest"] != shipped.source_digest(KERNELS, f, kernels.COMPILE_OPTIONS)]
    assert not stale, f"kernels/{', '.join(stale)} changed since their cubins were built: {REBUILD}"
    for arch in manifest["archs"]:
        for filename in manifest["modules"]:
            packed = (shipped.cubin_dir(KERNELS) / f"sm_{arch}" / (Path(filename).stem + ".cubin.gz")).read_bytes()
            assert gzip.decompress(packed)[:4] == b"\x7fELF", (arch, filename)


def test_a_source_edit_changes_the_digest(tmp_path):
    for p in list(KERNELS.glob("*.cu")) + list(KERNELS.glob("*.cuh")):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    before = shipped.source_digest(tmp_path, "split.cu", kernels.COMPILE_OPTIONS)
    header = tmp_path / "common.cuh"
    header.write_text(header.read_text() + "\n// an edit\n")
    assert shipped.source_digest(tmp_path, "split.cu", kernels.COMPILE_OPTIONS) != before
    assert shipped.source_digest(tmp_path, "split.cu", ("-std=c++17",)) != shipped.source_digest(
        tmp_path, "split.cu", kernels.COMPILE_OPTIONS)


@pytest.mark.parametrize("cc, arch", [("75", "75"), ("80", "80"), ("86", "80"), ("87", "80"), ("89", "80"),
                                      ("90", "90"), ("100", "100"), ("103", "100"), ("120", "120"),
                                      ("121", "120"), ("70", None), ("110", None)])
def test_a_device_runs_the_cubin_of_its_generation(cc, arch):
    assert shipped.arch_for(cc) == arch


# ----------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_every_module_loads_shipped_on_this_gpu():
    for filename, entry in _manifest()["modules"].items():
        module = shipped.load(KERNELS, filename, tuple(entry["name_expressions"]), kernels.COMPILE_OPTIONS)
        assert isinstance(module, shipped.ShippedModule), filename
        for name in entry["name_expressions"]:
            module.get_function(name)


def _fit_dump(monkeypatch, from_source: bool):
    import cupy

    import daskgb

    monkeypatch.setenv("DASKGB_KERNELS_FROM_SOURCE", "1" if from_source else "0")
    monkeypatch.setattr(kernels, "_cache", {})
    monkeypatch.setattr(kernels, "_functions", {})
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(size=3000) > 0).astype(np.float32)
    m = daskgb.QuantileMatrix(cupy.asarray(X), cupy.asarray(y))
    booster = daskgb.train({"objective": "binary:logistic", "device": "cuda", "max_depth": 4}, m, 5)
    modules = [type(v).__name__ for v in kernels._cache.values()]
    return json.dumps(booster.to_dict(), sort_keys=True, default=str), cupy.asnumpy(booster.predict(cupy.asarray(X))), modules


@pytest.mark.gpu
def test_shipped_and_source_compiled_kernels_fit_the_same_model(monkeypatch):
    dump_shipped, pred_shipped, kinds_shipped = _fit_dump(monkeypatch, from_source=False)
    dump_source, pred_source, kinds_source = _fit_dump(monkeypatch, from_source=True)
    assert set(kinds_shipped) == {"ShippedModule"} and "ShippedModule" not in kinds_source
    assert dump_shipped == dump_source
    np.testing.assert_array_equal(pred_shipped, pred_source)


# A first fit in a fresh process (missing values in some columns, an eval set watched with auc and
# logloss, a predict), every NVRTC compile logged with the kernels it holds.
_COLD = textwrap.dedent("""
    import json, re, sys, time
    t0 = time.perf_counter()
    import cupy, numpy as np
    import cupy.cuda.compiler as compiler
    import daskgb
    imported = time.perf_counter() - t0
    compiled = []
    inner = compiler.compile_using_nvrtc
    def logged(source, *a, **k):
        t = time.perf_counter()
        out = inner(source, *a, **k)
        compiled.append([round(time.perf_counter() - t, 3)] + re.findall(r"__global__\\s+void\\s+(\\w+)", source)[:2])
        return out
    compiler.compile_using_nvrtc = logged
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100_000, 20)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=100_000) > 0).astype(np.float32)
    X[:, 5:8][rng.random((100_000, 3)) < 0.2] = np.nan  # some columns with missing values, as real tables
    Xd, yd = cupy.asarray(X), cupy.asarray(y)
    cupy.cuda.Device().synchronize()
    t1 = time.perf_counter()
    dtrain = daskgb.QuantileMatrix(Xd[:90_000], yd[:90_000])
    deval = daskgb.QuantileMatrix(Xd[90_000:], yd[90_000:], ref=dtrain)
    booster = daskgb.train({"objective": "binary:logistic", "device": "cuda", "max_depth": 6,
                            "eval_metric": ["auc", "logloss"]}, dtrain, 10, evals=[(deval, "eval")],
                           verbose_eval=False)
    booster.predict(Xd)
    cupy.cuda.Device().synchronize()
    print(json.dumps({"import_s": imported, "first_fit_s": time.perf_counter() - t1,
                      "whole_s": time.perf_counter() - t0, "compiled": compiled}))
""")


@pytest.mark.gpu
def test_a_first_fit_in_a_fresh_process_compiles_nothing(tmp_path, record_property):
    env = {**os.environ, "CUPY_CACHE_DIR": str(tmp_path)}
    env.pop("DASKGB_KERNELS_FROM_SOURCE", None)
    out = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("import_s", "first_fit_s", "whole_s"):
        record_property(key, round(result[key], 3))
    print(f"fresh process: import {result['import_s']:.2f} s, first fit {result['first_fit_s']:.2f} s, "
          f"whole {result['whole_s']:.2f} s; compiled {result['compiled']}")
    assert result["compiled"] == [], "a first fit waited for NVRTC"
