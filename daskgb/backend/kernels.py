"""Finds kernels/*.cu, builds them with cupy.RawModule (templates through name_expressions), caches per device."""

from __future__ import annotations

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


def _module_uncached(filename: str, name_expressions: tuple[str, ...]):
    import cupy

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
