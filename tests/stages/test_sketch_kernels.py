"""kernels/sketch.cu against the sketch's array steps, bit for bit, on fresh random input (GPU only).

The numpy path is the oracle: sketch/reference.py's summarize_dense for a dense block's
summaries, and sketch/__init__.py's prune (summary.prune_with), merge (with _fix_error), make_cuts
and _concat_features, which take sketch/cuda.py's kernels when the summaries are CuPy arrays. The
last test checks what the kernels are for: a fresh process sketches and cuts device input with no
compile but kernels/sketch.cu's (CuPy's element-wise operations compile on first use).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from daskgb import sketch as sketch_mod
from daskgb.arrays import to_host
from daskgb.sketch import Summary, make_cuts, merge, prune, summarize

pytestmark = pytest.mark.gpu


@pytest.fixture
def cupy(cb):
    """CuPy, where the CUDA backend runs (cb skips without a GPU)."""
    import cupy

    return cupy


def assert_same_bits(got: Summary, want: Summary):
    np.testing.assert_array_equal(got.ptrs, want.ptrs)
    assert isinstance(got.ptrs, np.ndarray) and got.ptrs.dtype == np.int64
    for name in ("value", "rmin", "rmax", "wmin"):
        g, w = to_host(getattr(got, name)), np.asarray(getattr(want, name))
        assert g.dtype == w.dtype, name
        assert g.tobytes() == w.tobytes(), (name, g, w)


def random_columns(rng, rows: int, k: int, budget: int, missing: float):
    """A (rows, k) float32 block whose columns are, at random: fewer distinct values than the
    budget, more, one value, all NaN, all `missing`; NaN, `missing` and -0.0 scattered through."""
    X = np.empty((rows, k), dtype=np.float32)
    for c in range(k):
        kind = rng.integers(0, 6)
        if kind == 0:  # fewer values than the budget
            X[:, c] = rng.choice(rng.normal(size=max(1, budget - 1)) * 100, rows)
        elif kind == 1:  # more, with ties
            X[:, c] = np.round(rng.standard_t(2, rows) * 10 ** rng.integers(0, 4)) / 10
        elif kind == 2:  # continuous
            X[:, c] = rng.lognormal(0, 3, rows) * rng.choice([-1, 1], rows)
        elif kind == 3:
            X[:, c] = 7.25
        elif kind == 4:
            X[:, c] = np.nan
        else:
            X[:, c] = np.float32(0.0 if np.isnan(missing) else missing)
    X[rng.random(X.shape) < 0.1] = np.nan
    if not np.isnan(missing):
        X[rng.random(X.shape) < 0.05] = missing
    X[rng.random(X.shape) < 0.02] = -0.0
    return X


@pytest.mark.parametrize(
    "rows,k,budget",
    [(10_000, 1, 5), (10_000, 1, None), (4097, 1, 4096), (2049, 3, 2), (3000, 7, 17), (700, 9, 300), (50, 400, 3),
     (50, 400, None), (1, 30, 2), (6000, 2, 3585)],
)
@pytest.mark.parametrize("missing", [np.nan, 0.0, -1.0], ids=["nan", "zero", "minus1"])
def test_block_summaries_equal_the_array_steps(oracle, cb, rows, k, budget, missing):
    """summarize_dense's kernels (keys, sort, runs found in tiles, each column's first run,
    candidates, their distinct ones) against the array steps: one and many columns, runs
    spanning many 2048-key tiles, budgets from 2 to above every column's count."""
    import cupy

    rng = np.random.default_rng([rows, k, budget or 0, int(np.isnan(missing))])
    X = random_columns(rng, rows, k, budget or 64, missing)
    want = oracle.summarize_dense(X, missing, budget)
    assert_same_bits(cb.summarize_dense(cupy.asarray(X), missing, budget), want)
    # A strided view: every other row of a Fortran-ordered copy.
    Xf = cupy.asarray(np.asfortranarray(np.repeat(X, 2, axis=0)))[::2]
    assert_same_bits(cb.summarize_dense(Xf, missing, budget), want)


def random_summaries(rng, n_features: int, rows: int):
    """Exact weighted summaries, and merged pruned ones, of columns with few and many values,
    some empty."""
    X = random_columns(rng, rows, n_features, 12, np.nan)
    w = rng.exponential(size=rows).astype(np.float32)
    w[rng.random(rows) < 0.1] = 0.0
    half = rows // 2
    merged = merge(summarize(X[:half], w[:half], budget=40), summarize(X[half:], w[half:], budget=25))
    return [summarize(X, w), summarize(X), merged]


def loose_bounds(rng, s: Summary) -> Summary:
    """s with rank bounds widened (rmax raised, kept monotone): a feature's first rmax can pass
    its last rmin, and then the queries' picks descend (the kernels sort them)."""
    rmax = s.rmax + rng.random(s.rmax.size) * 3 * max(1.0, float(s.rmax.max(initial=0)))
    for lo, hi in zip(s.ptrs[:-1], s.ptrs[1:]):
        rmax[lo:hi] = np.maximum.accumulate(rmax[lo:hi])
    return Summary(s.ptrs, s.value, s.rmin, rmax, s.wmin)


@pytest.mark.parametrize("budget", [2, 3, 5, 17, 64])
@pytest.mark.parametrize("n_features,rows", [(4, 600), (300, 40)])
def test_prune_kernels_equal_prune_with(cupy, budget, n_features, rows):
    rng = np.random.default_rng([budget, n_features])
    for s in random_summaries(rng, n_features, rows) + [loose_bounds(rng, summarize(
            random_columns(rng, rows, n_features, 12, np.nan)))]:
        want = prune(s, budget)
        got = prune(s.to(cupy), budget)
        assert_same_bits(got, want)
    with pytest.raises(ValueError, match="budget must be >= 2"):
        prune(s.to(cupy), 1)


@pytest.mark.parametrize("budget", [3, 17, 64])
def test_prune_filled_on_the_device_equals_the_array_steps(cupy, budget):
    """prune_filled's device steps (the filled features taken out, filled on the host, spliced
    back by concat and a gather) give the array steps' bits."""
    rng = np.random.default_rng([budget, 5])
    for s in random_summaries(rng, 40, 800):
        assert_same_bits(sketch_mod.prune_filled(s.to(cupy), budget), sketch_mod.prune_filled(s, budget))


@pytest.mark.parametrize("n_features,rows", [(3, 500), (5, 7), (200, 30)])
def test_merge_kernels_equal_the_array_steps(cupy, n_features, rows):
    """merge's kernels (each side placed among the other's, both written in merged order, then
    FixError) against the array steps: empty features on either side, shared values, pruned
    sides, and ranks out of order for FixError to repair."""
    rng = np.random.default_rng([n_features, rows])
    for trial in range(6):
        X = random_columns(rng, rows, n_features, 10, np.nan)
        w = rng.integers(1, 5, rows).astype(np.float32) if trial % 2 else rng.random(rows).astype(np.float32)
        cut = int(rng.integers(1, rows))
        X[:cut, 0] = np.nan  # feature 0 empty in a
        X[cut:, -1] = np.nan  # the last empty in b
        budgets = (None, None) if trial < 2 else tuple(int(b) for b in rng.integers(3, 30, 2))
        a = summarize(X[:cut], w[:cut], budget=budgets[0])
        b = summarize(X[cut:], w[cut:], budget=budgets[1])
        if trial >= 4:
            a = Summary(a.ptrs, a.value, a.rmin * rng.uniform(0.5, 1.5, a.rmin.size),
                        a.rmax * rng.uniform(0.5, 1.5, a.rmax.size), a.wmin)
        if a.value.size == 0 or b.value.size == 0:
            continue
        for x, y in ((a, b), (b, a)):
            assert_same_bits(merge(x.to(cupy), y.to(cupy)), merge(x, y))


@pytest.mark.parametrize("max_bin", [2, 3, 16, 256])
def test_cut_kernels_equal_the_array_steps(cupy, max_bin):
    """make_cuts' kernel (the cut values, min values and sentinels, rounded once from double)
    against the array steps, after the prune to max_bin + 1: empty, constant, small and big
    features."""
    rng = np.random.default_rng(max_bin)
    for s in random_summaries(rng, 40, 900):
        want = make_cuts(s, max_bin)
        got = make_cuts(s.to(cupy), max_bin)
        for name in ("ptrs", "values", "min_values"):
            g, w = to_host(getattr(got, name)), getattr(want, name)
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), name


@pytest.mark.parametrize("block_entries", [300, 700, 5000])
def test_blocks_and_row_runs_equal_the_array_steps(cupy, monkeypatch, block_entries):
    """summarize in column blocks (joined by one launch) and row runs (merged, pruned once more)
    on the device against numpy's, then the cuts."""
    rng = np.random.default_rng(block_entries)
    X = random_columns(rng, 1500, 11, 64, -1.0)
    monkeypatch.setattr(sketch_mod, "_BLOCK_ENTRIES", block_entries)
    for budget in (None, 64, 5):
        want = summarize(X, missing=-1.0, budget=budget)
        got = summarize(cupy.asarray(X), missing=-1.0, budget=budget)
        assert_same_bits(got, want)
        want_cuts, got_cuts = make_cuts(want, 32), make_cuts(got, 32)
        for name in ("ptrs", "values", "min_values"):
            np.testing.assert_array_equal(to_host(getattr(got_cuts, name)), getattr(want_cuts, name))


_COLD_SKETCH = textwrap.dedent(
    """
    import os, re, sys, tempfile
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp()
    import numpy as np, cupy
    import cupy.cuda.compiler as compiler

    compiled = []
    original = compiler._compile_module_with_cache

    def spy(source, *args, **kwargs):
        compiled.append(source)
        return original(source, *args, **kwargs)

    compiler._compile_module_with_cache = spy
    from daskgb import sketch

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 2] = np.round(X[:, 2])
    X[:, 4] = np.nan
    Xd = cupy.asarray(X)
    sketch.make_cuts(sketch.summarize(Xd, budget=sketch.sketch_budget(3000, 64)), 64)
    sketch.make_cuts(sketch.summarize(Xd[:, :1], missing=0.0), 8)
    sketch._BLOCK_ENTRIES = 1000  # a block a column, runs of 1000 rows: joined, merged, pruned
    sketch.make_cuts(sketch.summarize(Xd, budget=100), 16)
    cupy.cuda.Device().synchronize()
    print([re.findall(r"__global__\\s+void\\s+(\\w+)", s)[:2] or s[:80] for s in compiled
           if "sketch_keys_impl" not in s])
    """
)


def test_a_cold_sketch_compiles_only_its_own_kernels(cb):
    """A fresh process with an empty CuPy cache sketches device input and makes cuts (one block,
    one column, blocks and row runs) compiling nothing but kernels/sketch.cu."""
    root = str(Path(sketch_mod.__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _COLD_SKETCH], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
