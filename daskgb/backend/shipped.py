"""Kernels shipped compiled: the cubins under kernels/cubin/, whether they match the sources, loading and building them.

A first fit in a fresh process would otherwise wait for NVRTC to compile every module
(~0.1-0.8 s each, on every new machine, container and Dask worker). So the repository
carries each module of kernels/*.cu compiled for the GPU generations CuPy supports, and
kernels/cubin/manifest.json records, per module, the digest of the sources it was built
from (the .cu file, every header of kernels/, the compile options), the name expressions
it was built with and their mangled names. The cubins are stored gzipped (about 2 MB for all
of them) and loaded from memory.

A shipped cubin is used only when its digest equals the live sources' and it was built with
the name expressions the launcher declares: a source edited without rebuilding is compiled
from source as before (slower to start, never stale), and tests/stages/test_shipped_kernels.py
fails on the CPU until the cubins are rebuilt:

    python -m daskgb.backend.build_cubins   # needs CuPy and NVRTC (pip: cupy-cuda13x,
                                            # nvidia-cuda-nvrtc), no GPU

A cubin runs on GPUs of its major generation whose minor version is at least its own
(sm_80 on 8.0, 8.6, 8.7, 8.9), on any driver of the CUDA major version it was built with
(CUDA's minor version compatibility). Anything else -- another generation, an older driver
that refuses the binary, DASKGB_KERNELS_FROM_SOURCE=1 -- compiles from source.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
from pathlib import Path

# The generations shipped: one cubin per major version covers its later minors, so these
# are Turing, Ampere (and Ada: 8.9 runs sm_80), Hopper, Blackwell datacenter and consumer.
ARCHS = ("75", "80", "90", "100", "120")

_MANIFEST = "manifest.json"

# What CuPy adds to our options when it compiles a RawModule from source (cupy/cuda/compiler.py:
# _compile_with_cache_cuda and compile_using_nvrtc), the arch aside: a shipped binary is compiled
# as a source compile would be, flush-to-zero of float32 subnormals included.
CUPY_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")


def cubin_dir(kernel_dir: Path) -> Path:
    return kernel_dir / "cubin"


def source_digest(kernel_dir: Path, filename: str, options: tuple[str, ...]) -> str:
    """sha256 of what a module's binary depends on: its .cu file, every header of the folder
    (a header edit may change any module), and the compile options."""
    h = hashlib.sha256()
    h.update("\0".join(tuple(options) + CUPY_OPTIONS).encode())
    for path in [kernel_dir / filename] + sorted(kernel_dir.glob("*.cuh")):
        h.update(b"\0" + path.name.encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _manifest(kernel_dir: Path) -> dict:
    path = cubin_dir(kernel_dir) / _MANIFEST
    if not path.is_file():
        return {"modules": {}}
    return json.loads(path.read_text())


@functools.lru_cache(maxsize=None)
def _live_digest(kernel_dir: Path, filename: str, options: tuple[str, ...]) -> str:
    return source_digest(kernel_dir, filename, options)


def arch_for(compute_capability: str, archs=ARCHS) -> str | None:
    """The shipped arch a device of this compute capability ("89", "100") runs: the same major
    version, the highest minor not above the device's; None where no cubin fits."""
    major, minor = int(compute_capability[:-1]), int(compute_capability[-1])
    fits = [a for a in archs if int(a[:-1]) == major and int(a[-1]) <= minor]
    return max(fits, key=lambda a: int(a[-1])) if fits else None


class ShippedKernel:
    """A kernel of a shipped module: launched as a cupy.RawKernel is (the launchers cannot tell),
    from a driver function loaded out of the binary's bytes."""

    __slots__ = ("_function",)

    def __init__(self, function):
        self._function = function

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None):
        self._function(grid, block, args, shared_mem=shared_mem, stream=stream)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        from cupy.cuda import driver

        return driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self._function.ptr)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        from cupy.cuda import driver

        driver.funcSetAttribute(self._function.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value)


class ShippedModule:
    """A shipped cubin loaded on the current device, its kernels looked up by name expression."""

    def __init__(self, module, lowered: dict[str, str]):
        self._module = module
        self._lowered = lowered

    def get_function(self, name: str) -> ShippedKernel:
        return ShippedKernel(self._module.get_function(self._lowered[name]))


def load(kernel_dir: Path, filename: str, name_expressions: tuple[str, ...], options: tuple[str, ...]):
    """The shipped module of kernels/<filename> for the current device, or None where it
    must be compiled from source (see the module's docstring for when)."""
    if os.environ.get("DASKGB_KERNELS_FROM_SOURCE", "") not in ("", "0"):
        return None
    entry = _manifest(kernel_dir)["modules"].get(filename)
    if entry is None or tuple(entry["name_expressions"]) != tuple(name_expressions):
        return None
    if entry["digest"] != _live_digest(kernel_dir, filename, options):
        return None
    import cupy

    arch = arch_for(cupy.cuda.Device().compute_capability, tuple(_manifest(kernel_dir).get("archs", ())))
    if arch is None:
        return None
    path = cubin_dir(kernel_dir) / f"sm_{arch}" / (Path(filename).stem + ".cubin.gz")
    if not path.is_file():
        return None
    module = cupy.cuda.function.Module()
    try:  # a driver that refuses the binary (an older CUDA major version) means compile from source
        module.load(gzip.decompress(path.read_bytes()))
    except cupy.cuda.driver.CUDADriverError:
        return None
    return ShippedModule(module, entry["lowered"])


# ----------------------------------------------------------------------------- building
def build(kernel_dir: Path, declared: dict[str, tuple[str, ...]], options: tuple[str, ...], archs=ARCHS) -> dict:
    """Compile every declared module for every arch with NVRTC, write the cubins and the
    manifest under kernel_dir/cubin (replacing what was there); returns the manifest.
    Options are ours, then CuPy's for a RawModule (CUPY_OPTIONS) and the arch, so a shipped
    kernel is the one a source compile would give."""
    import shutil

    import cupy.cuda.compiler as compiler
    from cupy_backends.cuda.libs import nvrtc

    out = cubin_dir(kernel_dir)
    for sub in out.glob("sm_*"):
        shutil.rmtree(sub)
    modules = {}
    for filename, names in sorted(declared.items()):
        source = (kernel_dir / filename).read_text()
        lowered = None
        for arch in archs:
            program = compiler._NVRTCProgram(source, filename, name_expressions=list(names), method="cubin")
            binary, mapping = program.compile(
                tuple(options) + (f"-I{kernel_dir}", CUPY_OPTIONS[0], f"-arch=sm_{arch}") + CUPY_OPTIONS[1:])
            (out / f"sm_{arch}").mkdir(parents=True, exist_ok=True)
            # Compressed (a quarter of the size), with no time stamp: a rebuild of the same sources
            # writes the same bytes, so the repository changes only when a kernel does.
            (out / f"sm_{arch}" / (Path(filename).stem + ".cubin.gz")).write_bytes(
                gzip.compress(binary, compresslevel=9, mtime=0))
            lowered = dict(mapping)
        modules[filename] = {"digest": source_digest(kernel_dir, filename, options),
                             "name_expressions": list(names), "lowered": lowered}
    manifest = {"nvrtc": ".".join(map(str, nvrtc.getVersion())), "options": list(options),
                "cupy_options": list(CUPY_OPTIONS), "archs": list(archs),
                "modules": modules}
    (out / _MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest
