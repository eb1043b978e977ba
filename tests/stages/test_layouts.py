"""Layouts declared once (daskgb/layouts.py) are what the kernels compile: the generated header is
current, a C++ compiler and the GPU lay every struct out at the Python offsets, and every
kernel compiles against them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from daskgb import layouts
from daskgb.backend.kernels import kernel_dir

KERNELS = Path(kernel_dir())


def test_the_header_is_the_one_layouts_py_generates():
    assert (KERNELS / "layouts.cuh").read_text() == layouts.header(), (
        "kernels/layouts.cuh is stale: run python -c \"import daskgb.layouts as l; l.write_header()\"")


def test_no_kernel_restates_a_layout():
    for path in list(KERNELS.glob("*.cu")) + [p for p in KERNELS.glob("*.cuh") if p.name != "layouts.cuh"]:
        text = path.read_text()
        for s in layouts.STRUCTS:
            assert f"struct {s.name} " not in text and f"struct {s.name}{{" not in text, (path.name, s.name)
        for name, *_ in layouts.CONSTANTS:
            assert f"constexpr int {name} =" not in text and f"constexpr double {name} =" not in text, (path.name, name)


def _offsets_program(stride: int) -> str:
    """C++ printing every struct's size and field offsets, and the strided layouts' offsets."""
    lines = ['#include "layouts.cuh"', "#include <cstdio>", "int main() {"]
    for s in layouts.STRUCTS:
        lines.append(f'  std::printf("{s.name} size %zu\\n", sizeof({s.name}));')
        for f, _ in s.fields:
            lines.append(f'  std::printf("{s.name} {f} %zu\\n", (size_t)__builtin_offsetof({s.name}, {f}));')
    for layout in (layouts.PARTITION_INFO, layouts.LABEL_INFO, layouts.CHILDREN_INFO):
        lines.append(f"  {{ const {layout.name} at({stride});")
        for f in layout.offsets(stride):
            lines.append(f'    std::printf("{layout.name} {f} %lld\\n", at.{f});')
        lines.append("  }")
    lines.append("  return 0;\n}")
    return "\n".join(lines)


def _expected(stride: int) -> list[str]:
    out = []
    for s in layouts.STRUCTS:
        out.append(f"{s.name} size {s.dtype.itemsize}")
        out += [f"{s.name} {f} {s.dtype.fields[f][1]}" for f, _ in s.fields]
    for layout in (layouts.PARTITION_INFO, layouts.LABEL_INFO, layouts.CHILDREN_INFO):
        out += [f"{layout.name} {f} {o}" for f, o in layout.offsets(stride).items()]
    return out


def test_a_host_compiler_lays_out_every_struct_and_buffer_as_python(tmp_path):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "offsets.cpp"
    src.write_text(_offsets_program(stride=7))
    exe = tmp_path / "offsets"
    subprocess.run([compiler, "-std=c++17", f"-I{KERNELS}", str(src), "-o", str(exe)], check=True, capture_output=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    assert got[:-1] == _expected(stride=7)


def test_every_kernel_compiles_against_the_layouts(tmp_path):
    """nvcc's front end over each kernel file (its templates instantiated): a kernel that reads a
    field or constant the layouts no longer declare fails here, on a machine without a GPU."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    procs = {path.name: subprocess.Popen(
        [nvcc, "-std=c++17", "--fmad=false", "-DDASKGB_NVCC_CHECK", "--cuda", str(path), "-o",
         str(tmp_path / (path.stem + ".ii"))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for path in sorted(KERNELS.glob("*.cu"))}
    failed = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        if proc.returncode:
            failed[name] = out[-2000:]
    assert not failed, failed


def test_kernel_args_packs_each_field_at_its_offset():
    class Device:  # a CuPy array's address, as kernel_args reads it
        class data:
            ptr = 0x1234_5678_9ABC

    a = layouts.kernel_args(layouts.HISTOGRAM_ARGS, ridx=Device, gpair=Device, inv_scale=None, tiles=Device,
                            segs=Device, groups=Device, hist=Device, tile_rows=70_000, total_bins=300,
                            threads_per_row=4, window=1)
    raw = a.tobytes()
    d = layouts.HISTOGRAM_ARGS.dtype

    def at(field, fmt):
        return np.frombuffer(raw, dtype=fmt, count=1, offset=d.fields[field][1])[0]

    assert a.shape == (1,) and len(raw) == d.itemsize == 80
    # Bytes without a field list: CuPy rebuilds a structured dtype's fields on every launch.
    assert a.dtype.fields is None and a.dtype == layouts.HISTOGRAM_ARGS.raw_dtype
    assert at("ridx", "<u8") == 0x1234_5678_9ABC and at("inv_scale", "<u8") == 0
    assert at("tile_rows", "<i8") == 70_000 and at("total_bins", "<i4") == 300 and at("window", "<i4") == 1
    with pytest.raises(TypeError, match=r"HistogramArgs needs \['gpair'"):
        layouts.kernel_args(layouts.HISTOGRAM_ARGS, ridx=None)


def test_strided_layouts_build_their_buffers_at_their_offsets():
    info = layouts.PARTITION_INFO.build(3, tail=[0, 0, 1, 2], k=[3], n_tiles=[4], start=[0, 10, 20], count=[5, 6, 7],
                                        first_tile=[0, 2, 3, 4])
    at = layouts.PARTITION_INFO.offsets(3)
    assert info[at["k"]] == 3 and info[at["n_tiles"]] == 4
    assert list(info[at["count"] : at["count"] + 3]) == [5, 6, 7]
    assert list(info[at["first_tile"] : at["first_tile"] + 4]) == [0, 2, 3, 4]
    assert list(info[at["tile_split"]:]) == [0, 0, 1, 2]
    assert info.size == layouts.PARTITION_INFO.size(3, 4) == 2 + 9 * 3 + 4 + 4
    with pytest.raises(ValueError, match=r"PartitionInfo.start: 4 values for its 3 entries"):
        layouts.PARTITION_INFO.build(3, start=[0, 1, 2, 3])
    with pytest.raises(TypeError, match=r"PartitionInfo has no fields \['starts'\]"):
        layouts.PARTITION_INFO.build(3, starts=[0])
    with pytest.raises(TypeError):  # a float is a mistake, not an offset to truncate
        layouts.PARTITION_INFO.build(3, start=np.array([0.5]))


def test_the_split_records_and_nodes_keep_their_layouts():
    assert layouts.SPLIT_DTYPE.itemsize == 56 and layouts.PREDICT_NODE_DTYPE.itemsize == 24
    assert layouts.CANDIDATE.dtype.itemsize == 48
    assert layouts.SPLIT_DTYPE.names[-1] == "categorical"


@pytest.mark.gpu
def test_the_device_lays_out_every_struct_as_python():
    """NVRTC (what CuPy compiles the kernels with) on the GPU: the size of every struct and the
    place of each field in one (NVRTC has no offsetof: addresses within an instance), written
    by a kernel, against the numpy dtypes."""
    import cupy

    from daskgb.backend.kernels import COMPILE_OPTIONS

    entries = [(s, None) for s in layouts.STRUCTS] + [(s, f) for s in layouts.STRUCTS for f, _ in s.fields]
    body = "\n".join(f"  {{ {s.name} v; out[{i}] = " + (f"sizeof({s.name}); }}" if f is None else
                                                     f"(unsigned long long)((const char*)&v.{f} - (const char*)&v); }}")
                     for i, (s, f) in enumerate(entries))
    code = f'#include "layouts.cuh"\nextern "C" __global__ void layout_of(unsigned long long* out) {{\n{body}\n}}\n'
    module = cupy.RawModule(code=code, options=COMPILE_OPTIONS + (f"-I{KERNELS}",))
    out = cupy.zeros(len(entries), dtype=cupy.uint64)
    module.get_function("layout_of")((1,), (1,), (out,))
    got = out.get().tolist()
    want = [s.dtype.itemsize if f is None else s.dtype.fields[f][1] for s, f in entries]
    assert got == want
