"""The CPU path's loops compiled into numba's cache before a first fit needs them (``python -m daskgb warm-up``).

A process compiles each compiled loop (cpu.jit) the first time it runs it, and numba keeps the
machine code in its cache (beside daskgb's modules, or in NUMBA_CACHE_DIR), so only a machine's
very first fit pays (the quickstart's took 16-18 s instead of 7 on a 2-core machine, every
worker process compiling the same loops). A cluster
whose workers start from an image (a container, a fresh virtual machine) pays it on every new
worker unless the image holds the cache: running ``python -m daskgb warm-up`` where the image
is built writes it there. numba keys its cache by the CPU it compiled for, so a worker on
another CPU model compiles again (NUMBA_CPU_NAME=generic, set both where the image is built and
where it runs, keys it by no CPU model, at the cost of the newer instructions).

warm_up() trains and predicts tiny models of the data kinds fits meet, so that every loop they
run is compiled (or found in the cache) with the argument types a fit of that kind gives it:
dense rows with and without missing values (one byte a bin and two), mostly missing and one-hot
columns (read by their listed entries), sparse rows (two and four bytes a global bin), deep
levels (walked node by node), forests of several trees (multiclass), ranking, and the
objectives', metrics' and prediction's loops. A fit of a kind not among them compiles what it
adds itself, as before.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np


def _dense(rng, n_rows, n_features, missing_share=0.0, distinct=None):
    """Rows of continuous features (distinct: each column rounded to that many values)."""
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    if distinct is not None:
        X = np.round((X - X.min()) / np.ptp(X) * (distinct - 1)).astype(np.float32)
    if missing_share:
        X[rng.random(X.shape) < missing_share] = np.nan
    return X


def _mostly_missing(rng, n_rows, distinct=None):
    """Columns that miss most rows (Bosch's stations) and one-hot columns beside dense ones."""
    dense = _dense(rng, n_rows, 4, 0.05, distinct)
    station = _dense(rng, n_rows, 12, distinct=distinct)
    station[rng.random(n_rows) < 0.8, :6] = np.nan
    station[rng.random(n_rows) < 0.8, 6:] = np.nan
    one_hot = np.eye(4, dtype=np.float32)[rng.integers(0, 4, n_rows)]
    return np.hstack([dense, station, one_hot])


def _cases(rng):
    """(what, params, X, y, qid) of each kind of fit the warm-up runs. 24 features of 256 bins
    make the deep levels walk node by node (their nodes' histograms out of cache together)."""
    n = 4096
    X = _dense(rng, n, 24, 0.05)  # 256 bins and a missing symbol: two bytes a bin
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1] * X[:, 2]) + rng.normal(size=n)
    binary = (score > 0).astype(np.float32)
    deep = {"max_depth": 7, "eta": 0.3}
    full = _dense(rng, n, 24)  # no missing value: a byte a bin
    yield ("dense rows with missing values, binary", {"objective": "binary:logistic", **deep,
                                                       "eval_metric": ["logloss", "auc", "error"]}, X, binary, None)
    yield ("dense rows without missing values, regression", {"objective": "reg:squarederror", **deep,
                                                            "eval_metric": ["rmse", "mae"]},
           full, full[:, 0] * 0.5 + rng.normal(size=n).astype(np.float32), None)
    yield ("multiclass (a forest of 3 trees a round)", {"objective": "multi:softprob", "num_class": 3, **deep,
                                                        "eval_metric": ["mlogloss", "merror"]},
           X, np.digitize(score, [-0.5, 0.5]).astype(np.float32), None)
    for what, wide in (("mostly missing and one-hot columns", _mostly_missing(rng, n)),
                       ("mostly missing few-valued columns", _mostly_missing(rng, n, distinct=16))):
        yield (what, {"objective": "binary:logistic", **deep, "eval_metric": ["logloss", "auc"]},
               wide, (np.nan_to_num(wide[:, 0]) + wide[:, -1] > 0.5).astype(np.float32), None)
    # Rows missing most entries are quantised into the sparse layout, from dense or CSR input;
    # 320 features of 256 bins need four bytes a global bin (Bosch's), the CSR's 24 two.
    sparse_rows = _dense(rng, n, 320, 0.85)
    yield ("sparse rows", {"objective": "binary:logistic", **deep}, sparse_rows,
           (np.nan_to_num(sparse_rows[:, 0]) > 0).astype(np.float32), None)
    try:  # (not a dependency: CSR input needs it, and without it there is none to warm up for)
        import scipy.sparse
    except ImportError:
        pass
    else:
        csr = scipy.sparse.random(n, 24, density=0.15, format="csr", dtype=np.float32, random_state=0)
        yield ("CSR rows", {"objective": "binary:logistic", **deep}, csr,
               (np.asarray(csr[:, 0].todense()).ravel() > 0.5).astype(np.float32), None)
    yield ("ranking", {"objective": "rank:ndcg", "max_depth": 4, "eval_metric": ["ndcg"]}, X,
           rng.integers(0, 4, n).astype(np.float32), np.repeat(np.arange(n // 32), 32))


@contextlib.contextmanager
def compiles():
    """A list that collects the qualified name of every loop numba compiles (not loads from its
    cache) inside the with block."""
    from numba.core import event

    compiled: list[str] = []

    class _Count(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

    with event.install_listener("numba:compile", _Count()):
        yield compiled


def warm_up(threads: int | None = None, verbose: bool = False) -> dict:
    """Compile (or load from numba's cache) the CPU loops that fits of the common data kinds run.

    threads: the loops' threads while warming up (None: every core). Returns {"cases": n,
    "compiled": loops compiled now (0 where the cache already held them all), "seconds": s}.
    """
    import daskgb
    from daskgb import backend

    if backend.get_backend("cpu").__name__.rsplit(".", 1)[-1] != "compiled_backend":
        raise RuntimeError("the compiled CPU path is off (numba is not installed, or DASKGB_CPU_KERNELS=numpy): "
                           "nothing to compile")
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    n_cases = 0
    with compiles() as compiled:
        for what, params, X, y, qid in _cases(rng):
            t = time.perf_counter()
            cut = X.shape[0] * 3 // 4
            params = {**params, "nthread": threads or 0, "max_bin": 256}
            train = daskgb.QuantileMatrix(X[:cut], y[:cut], qid=None if qid is None else qid[:cut])
            evals = daskgb.QuantileMatrix(X[cut:], y[cut:], ref=train, qid=None if qid is None else qid[cut:])
            booster = daskgb.train(params, train, 3, evals=[(evals, "eval")], verbose_eval=False)
            booster.predict(X[cut:])
            booster.predict(evals, output_margin=True)
            n_cases += 1
            if verbose:
                print(f"daskgb warm-up: {what}: {time.perf_counter() - t:.1f} s", flush=True)
    return {"cases": n_cases, "compiled": len(compiled), "seconds": time.perf_counter() - started}
