"""`daskgb warm-up`: the CPU path's loops compiled into numba's cache, so that a first fit compiles none."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

# A first fit of each kind in a fresh process, counting the loops numba compiles (none should
# be: warm-up left them in the cache). The shapes are the benchmarks' (cpu_speed.py), smaller.
FITS = textwrap.dedent("""
    import sys
    import numpy as np

    sys.path.insert(0, "examples")
    import daskgb
    from daskgb.cpu.warm_up import compiles
    from synthetic import make_bosch, make_covertype, make_higgs

    rng = np.random.default_rng(1)
    X = rng.normal(size=(20000, 20)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    sets = [("quickstart", {"objective": "binary:logistic", "max_depth": 6, "eval_metric": "logloss"},
             X, (np.nan_to_num(X[:, 0]) > 0).astype(np.float32)),
            ("higgs", {"objective": "binary:logistic", "max_depth": 8, "eval_metric": "auc"},
             *make_higgs(np, 20000, 1)[:2]),
            ("covertype", {"objective": "multi:softprob", "num_class": 7, "max_depth": 8},
             *make_covertype(np, 20000, 1)[:2]),
            ("bosch", {"objective": "binary:logistic", "max_depth": 6, "eval_metric": "auc"},
             *make_bosch(np, 5000, 1)[:2])]
    with compiles() as compiled:
        for name, params, X, y in sets:
            n = X.shape[0] * 9 // 10
            train = daskgb.QuantileMatrix(X[:n], y[:n])
            evals = daskgb.QuantileMatrix(X[n:], y[n:], ref=train)
            booster = daskgb.train({**params, "nthread": 2}, train, 3, evals=[(evals, "eval")], verbose_eval=False)
            booster.predict(X[n:])
            print(name, "compiled", compiled)
            assert not compiled, (name, compiled)
""")


def _run(args, cache, **env):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(cache), **env})


def test_after_warm_up_a_first_fit_of_each_kind_compiles_nothing(tmp_path):
    cache = tmp_path / "numba"
    warm = _run(["-m", "daskgb", "warm-up"], cache, DASKGB_CPU_KERNELS="compiled")
    assert warm.returncode == 0, warm.stderr
    assert "8 kinds of fit warmed up" in warm.stderr and "0 loops compiled" not in warm.stderr, warm.stderr
    fits = _run(["-c", FITS], cache, DASKGB_CPU_KERNELS="compiled")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert fits.stdout.count("compiled []") == 4, fits.stdout
    again = _run(["-m", "daskgb", "warm-up"], cache, DASKGB_CPU_KERNELS="compiled")
    assert again.returncode == 0 and "0 loops compiled now" in again.stderr, again.stderr


def test_warm_up_says_so_where_the_compiled_path_is_off(tmp_path):
    out = _run(["-m", "daskgb", "warm-up"], tmp_path, DASKGB_CPU_KERNELS="numpy")
    assert out.returncode == 1
    assert out.stderr.strip() == ("daskgb: the compiled CPU path is off (numba is not installed, or "
                                  "DASKGB_CPU_KERNELS=numpy): nothing to compile")
