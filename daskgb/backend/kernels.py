"""Kernels: kernels/*.cu as cupy.RawModules (templates by name expression), cached per device, launched.

Every stage's CUDA launcher (<stage>/cuda.py) declares the kernels it uses from a .cu file
(declare(), at import) and gets and launches them through here: function() loads a .cu
file's module on first use -- the shipped cubin where it matches the sources
(backend/shipped.py), else compiled by NVRTC -- and caches the kernel per device;
launch_1d() sizes a grid-stride launch; sm_count() reads the device.
"""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent

# An installed wheel carries the kernels inside the package (daskgb/kernels); an
# editable install or a source checkout has them at the repository's top level.
_CANDIDATES = (_PACKAGE / "kernels", _PACKAGE.parent / "kernels")

# --fmad=false: no fused multiply-add contraction, so float arithmetic rounds as
# numpy's does and the CUDA and numpy backends agree bit for bit.
COMPILE_OPTIONS = ("-std=c++17", "--fmad=false")


def kernel_dir() -> Path:
    """The folder holding the CUDA sources."""
    for d in _CANDIDATES:
        if (d / "common.cuh").is_file():
            return d
    raise FileNotFoundError(
        "daskgb's CUDA kernels were not found (looked in "
        + ", ".join(str(d) for d in _CANDIDATES)
        + "); reinstall daskgb"
    )


def load_source(name: str) -> str:
    """The text of kernels/<name>, with the kernel folder on the include path."""
    return (kernel_dir() / name).read_text()


# filename -> the name expressions its launcher compiles it with: what backend/shipped.py builds.
DECLARED: dict[str, tuple[str, ...]] = {}


def declare(filename: str, name_expressions) -> tuple[str, ...]:
    """Record that kernels/<filename> is built with these name expressions (one set a file, so
    that one shipped binary serves every caller); returns them, for the launcher's _KERNELS."""
    names = tuple(name_expressions)
    if DECLARED.setdefault(filename, names) != names:
        raise ValueError(f"kernels/{filename} is declared twice with different kernels")
    return names


def _module_uncached(filename: str, name_expressions: tuple[str, ...]):
    import cupy

    from . import shipped

    module = shipped.load(kernel_dir(), filename, name_expressions, COMPILE_OPTIONS)
    if module is not None:
        return module
    options = COMPILE_OPTIONS + (f"-I{kernel_dir()}",)
    return cupy.RawModule(
        code=load_source(filename), options=options, name_expressions=list(name_expressions)
    )


_cache: dict = {}


def get_module(filename: str, name_expressions: tuple[str, ...]):
    """The compiled module of kernels/<filename>: compiled on first use, cached per device."""
    import cupy

    key = (cupy.cuda.runtime.getDevice(), filename, name_expressions)
    mod = _cache.get(key)
    if mod is None:
        mod = _cache[key] = _module_uncached(filename, name_expressions)
    return mod


def get_function(filename: str, name_expressions: tuple[str, ...], name: str):
    """One kernel (a name from name_expressions) of kernels/<filename>."""
    return get_module(filename, name_expressions).get_function(name)


# Threads of a grid-stride launch (launch_1d).
THREADS = 256

_functions: dict = {}


def function(filename: str, name_expressions: tuple[str, ...], name: str):
    """The kernel `name` of kernels/<filename> (compiled with name_expressions), looked up once per device."""
    import cupy

    key = (cupy.cuda.runtime.getDevice(), filename, name)
    fn = _functions.get(key)
    if fn is None:
        fn = _functions[key] = get_function(filename, name_expressions, name)
    return fn


def launch_1d(fn, n: int, args, threads: int = THREADS) -> None:
    """Launch a grid-stride kernel over n items (nothing when n == 0)."""
    if n > 0:
        fn((min((n + threads - 1) // threads, 2**31 - 1),), (threads,), args)


@functools.lru_cache(maxsize=None)
def _sm_count_of(device: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])


def sm_count() -> int:
    """The current device's streaming multiprocessors."""
    import cupy

    return _sm_count_of(cupy.cuda.runtime.getDevice())


def template_flag(flag: bool) -> str:
    """A C++ bool template argument."""
    return "true" if flag else "false"
