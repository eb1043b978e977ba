"""Build the shipped cubins (kernels/cubin): every module a launcher declares, for every arch.

    python -m daskgb.backend.build_cubins

Needs CuPy and NVRTC (pip: cupy-cuda13x, nvidia-cuda-nvrtc), not a GPU. Run it after any edit
of kernels/ or of a launcher's kernels.declare(); tests/stages/test_shipped_kernels.py fails
until it is run (backend/shipped.py says how the binaries are chosen at run time).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from . import kernels, shipped


def declared_modules() -> dict[str, tuple[str, ...]]:
    """Every module a launcher declares (kernels.declare), found by importing daskgb's modules
    that call it."""
    package = Path(__file__).resolve().parent.parent
    for path in sorted(package.rglob("*.py")):
        if "kernels.declare(" in path.read_text():
            rel = path.relative_to(package.parent).with_suffix("")
            importlib.import_module(".".join(rel.parts))
    return dict(kernels.DECLARED)


def main():
    declared = declared_modules()
    missing = sorted(p.name for p in kernels.kernel_dir().glob("*.cu") if p.name not in declared)
    if missing:
        raise SystemExit(f"kernels/{', '.join(missing)}: no launcher declares them (kernels.declare)")
    manifest = shipped.build(kernels.kernel_dir(), declared, kernels.COMPILE_OPTIONS)
    size = sum(p.stat().st_size for p in shipped.cubin_dir(kernels.kernel_dir()).rglob("*.cubin.gz"))
    print(f"{len(manifest['modules'])} modules x {len(manifest['archs'])} archs, NVRTC {manifest['nvrtc']}, "
          f"{size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
