"""`daskgb warm-up`: the CPU path's loops compiled into numba's cache, so that a first fit compiles none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

# Every compiled loop this process has run, with the argument types: the overloads of daskgb's
# numba dispatchers (compiled here or loaded from the cache), as JSON on the last line of stdout.
USED = textwrap.dedent("""
    import gc, json
    from numba.core.dispatcher import Dispatcher

    used = sorted({f"{d.py_func.__module__}.{d.py_func.__qualname__}{tuple(str(t) for t in sig)}"
                   for d in gc.get_objects() if isinstance(d, Dispatcher)
                   and d.py_func.__module__.startswith("daskgb") for sig in d.overloads})
    print(json.dumps(used))
""")

# The warm-up as the command runs it, then what it ran.
WARM_UP = "from daskgb.cli import main\nmain(['warm-up'])\n" + USED

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
""") + USED


def _run(args, **env):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})


def test_after_warm_up_a_first_fit_of_each_kind_compiles_nothing():
    # numba's cache is the one the rest of the suite fills (a cold one of its own made CI compile
    # every loop twice, ~25 s). So that loops other tests left there cannot stand in for the
    # warm-up's, the fits must run only loops the warm-up ran itself (compiled or loaded), and
    # then compile none: everything the warm-up ran is in the cache once it is done.
    warm = _run(["-c", WARM_UP], DASKGB_CPU_KERNELS="compiled")
    assert warm.returncode == 0, warm.stderr
    assert "8 kinds of fit warmed up" in warm.stderr, warm.stderr
    warmed = set(json.loads(warm.stdout.splitlines()[-1]))
    fits = _run(["-c", FITS], DASKGB_CPU_KERNELS="compiled")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert fits.stdout.count("compiled []") == 4, fits.stdout
    ran = set(json.loads(fits.stdout.splitlines()[-1]))
    assert ran and ran <= warmed, sorted(ran - warmed)
    again = _run(["-m", "daskgb", "warm-up"], DASKGB_CPU_KERNELS="compiled")
    assert again.returncode == 0 and "0 loops compiled now" in again.stderr, again.stderr


def test_warm_up_says_so_where_the_compiled_path_is_off():
    out = _run(["-m", "daskgb", "warm-up"], DASKGB_CPU_KERNELS="numpy")
    assert out.returncode == 1
    assert out.stderr.strip() == ("daskgb: the compiled CPU path is off (numba is not installed, or "
                                  "DASKGB_CPU_KERNELS=numpy): nothing to compile")
