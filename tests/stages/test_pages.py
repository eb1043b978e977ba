"""Out-of-core matrices (daskgb/ellpack/pages.py): pages in host memory or spill files train the in-core model.

Tests taking `backend` (tests/stages/conftest.py) quantise and gather pages on every backend
(numpy in CI, CuPy too on a GPU) against the same rows quantised in core.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from exact_data import make_data

import daskgb
from daskgb.ellpack.pages import PagedEllpack, SpillDirectory, rows_per_page

BUDGET = 2048  # bytes: a 600 x 6 matrix (5-7 bits a symbol) takes ~3 KB, so pages of ~350 rows or fewer


def assert_same_model(a, b):
    assert a.num_boosted_rounds() == b.num_boosted_rounds()
    for i, (ta, tb) in enumerate(zip(a.trees, b.trees)):
        for name in ("left", "right", "feature", "bin", "threshold", "default_left"):
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name), err_msg=f"tree {i} {name}")
        np.testing.assert_allclose(ta.value, tb.value, rtol=1e-6, atol=1e-7, err_msg=f"tree {i} values")


def assert_trains_the_same(params, paged, in_core, rounds=8):
    """Both matrices train the same model, with the same training metric every round."""
    res_p, res_c = {}, {}
    a = daskgb.train(params, paged, rounds, evals=[(paged, "train")], evals_result=res_p, verbose_eval=False)
    b = daskgb.train(params, in_core, rounds, evals=[(in_core, "train")], evals_result=res_c, verbose_eval=False)
    assert_same_model(a, b)
    for k in res_c["train"]:
        np.testing.assert_allclose(res_p["train"][k], res_c["train"][k], rtol=1e-6)


CASES = [
    ("reg:squarederror", False, {}),
    ("binary:logistic", True, {"max_depth": 4, "min_child_weight": 0.5}),
    ("reg:squarederror", True, {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0}),
    ("multi:softprob", True, {"num_class": 3, "max_depth": 3}),
    ("reg:squarederror", False, {"subsample": 0.5, "sampling_method": "gradient_based", "colsample_bylevel": 0.7}),
    ("multi:softprob", True, {"num_class": 3, "max_depth": 3, "num_parallel_tree": 2, "subsample": 0.6}),
    ("reg:squarederror", False, {"max_depth": 3, "num_parallel_tree": 3}),
]


@pytest.mark.parametrize("spill", [False, True], ids=["host-pages", "spill-files"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_paged_training_equals_in_core(case, spill, tmp_path):
    objective, with_nan, extra = CASES[case]
    X, y = make_data(case, "reg:squarederror" if objective != "binary:logistic" else objective, with_nan)
    if objective == "multi:softprob":
        y = np.digitize(y, [-1.0, 1.5]).astype(np.float32)
    params = {"objective": objective, "device": "cpu", "eta": 0.3, "seed": 2, **extra}
    kw = {"spill_dir": tmp_path} if spill else {}
    paged = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET, **kw)
    assert paged.paged and paged.ellpack.n_pages >= 2
    assert isinstance(paged.ellpack, PagedEllpack)
    if spill:
        files = os.listdir(paged.ellpack.spill.path)
        assert len(files) == paged.ellpack.n_pages and all(f.endswith(".npy") for f in files)
    in_core = daskgb.QuantileMatrix(X, y, device="cpu")
    assert not in_core.paged
    assert_trains_the_same(params, paged, in_core)
    # An eval set that is paged too (binned with the training cuts).
    ev = daskgb.QuantileMatrix(X[:300], y[:300], ref=in_core, device="cpu", device_memory_budget=BUDGET // 2)
    assert ev.paged
    res = {}
    daskgb.train(params, in_core, 3, evals=[(ev, "ev")], evals_result=res, verbose_eval=False)
    ev_core = daskgb.QuantileMatrix(X[:300], y[:300], ref=in_core, device="cpu")
    res2 = {}
    daskgb.train(params, in_core, 3, evals=[(ev_core, "ev")], evals_result=res2, verbose_eval=False)
    for k in res2["ev"]:
        np.testing.assert_allclose(res["ev"][k], res2["ev"][k], rtol=1e-6)


def test_sparse_input_pages():
    sp = pytest.importorskip("scipy.sparse")
    X, y = make_data(9, "reg:squarederror", False)
    X[np.random.default_rng(0).random(X.shape) < 0.5] = 0.0
    csr = sp.csr_matrix(X)
    paged = daskgb.QuantileMatrix(csr, y, device="cpu", device_memory_budget=BUDGET)
    assert paged.paged
    a = daskgb.train({"device": "cpu", "max_depth": 5}, paged, 6, verbose_eval=False)
    b = daskgb.train({"device": "cpu", "max_depth": 5}, daskgb.QuantileMatrix(csr, y, device="cpu"), 6,
                     verbose_eval=False)
    assert_same_model(a, b)
    # Chunks of CSR rows joined in core (the packed matrix fits, the dense rows would not).
    joined = daskgb.QuantileMatrix(csr, y, device="cpu", device_memory_budget=4000)
    assert not joined.paged
    assert_same_model(daskgb.train({"device": "cpu", "max_depth": 5}, joined, 6, verbose_eval=False), b)


def test_a_matrix_within_budget_stays_in_core():
    X, y = make_data(1, "reg:squarederror", False)
    assert not daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=10**9).paged


def test_budget_too_small_for_one_page():
    X, y = make_data(1, "reg:squarederror", False)
    with pytest.raises(ValueError, match="too small for even one page"):
        daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=8)
    ell = daskgb.QuantileMatrix(X, y, device="cpu").ellpack
    # A page gets a quarter of the budget: 600 bytes here, 4800 bits of symbols.
    assert rows_per_page(ell.row_stride, ell.bits, 4 * 600) == 4800 // (ell.row_stride * ell.bits)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "1GB"])
def test_budget_must_be_a_positive_byte_count(bad):
    X, y = make_data(1, "reg:squarederror", False)
    with pytest.raises(ValueError, match="device_memory_budget"):
        daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=bad)


def test_spill_dir_errors(tmp_path):
    X, y = make_data(1, "reg:squarederror", False)
    with pytest.raises(ValueError, match="not a directory"):
        daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET, spill_dir=tmp_path / "missing")
    with pytest.raises(ValueError, match="device_memory_budget"):
        daskgb.QuantileMatrix(X, y, device="cpu", spill_dir=tmp_path)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            with pytest.raises(ValueError, match="not writable"):
                daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET, spill_dir=locked)
        finally:
            locked.chmod(0o700)


def test_a_failed_page_write_leaves_nothing(tmp_path, monkeypatch):
    X, y = make_data(1, "reg:squarederror", False)
    calls = []
    real_save = np.save

    def save_then_fail(f, a, *args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_save(f, a, *args, **kw)

    monkeypatch.setattr(np, "save", save_then_fail)
    with pytest.raises(OSError, match="is the disk full"):
        daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET, spill_dir=tmp_path)
    assert os.listdir(tmp_path) == []


def test_spill_files_go_with_the_matrix(tmp_path):
    X, y = make_data(1, "reg:squarederror", False)
    m = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET, spill_dir=tmp_path)
    path = m.ellpack.spill.path
    assert os.path.isdir(path)
    m.ellpack.spill.remove()
    assert not os.path.exists(path)
    s = SpillDirectory(tmp_path)
    assert os.path.isdir(s.path)
    del s
    assert os.listdir(tmp_path) == []


@pytest.mark.gpu
@pytest.mark.parametrize("case", [0, 1, 3, 4])
def test_paged_training_equals_in_core_on_the_gpu(case, tmp_path):
    """On the GPU the pages stay on the host and each step copies them to the device; the
    int64 histograms summed over pages are exact, so the trees are the in-core ones."""
    import cupy

    objective, with_nan, extra = CASES[case]
    X, y = make_data(case, "reg:squarederror" if objective != "binary:logistic" else objective, with_nan, n=5000)
    if objective == "multi:softprob":
        y = np.digitize(y, [-1.0, 1.5]).astype(np.float32)
    params = {"objective": objective, "device": "cuda", "eta": 0.3, "seed": 2, **extra}
    Xd, yd = cupy.asarray(X), cupy.asarray(y)
    paged = daskgb.QuantileMatrix(Xd, yd, device="cuda", device_memory_budget=16_384, spill_dir=tmp_path)
    assert paged.paged and paged.ellpack.n_pages >= 2
    a = daskgb.train(params, paged, 6, verbose_eval=False)
    b = daskgb.train(params, daskgb.QuantileMatrix(Xd, yd, device="cuda"), 6, verbose_eval=False)
    for ta, tb in zip(a.trees, b.trees):
        for name in ("left", "right", "feature", "bin", "threshold", "default_left", "value"):
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name))


@pytest.mark.parametrize("compact", [True, False], ids=["compacted", "streamed"])
@pytest.mark.parametrize("sampling", [
    {"subsample": 0.4, "sampling_method": "gradient_based"},
    {"subsample": 0.6},
    {"subsample": 0.5, "sampling_method": "gradient_based", "objective": "multi:softprob", "num_class": 3},
], ids=["mvs", "uniform", "mvs-multiclass"])
def test_sampled_rows_compacted_or_streamed_train_the_in_core_model(compact, sampling, settings):
    """With sampling, a tree trains on its sampled rows gathered into one in-core matrix
    (the compacted-pages path) or on every page in turn: both are the in-core model."""
    settings({"training.compact-sampled-pages": compact})
    X, y = make_data(21, "reg:squarederror", True)
    if sampling.get("objective") == "multi:softprob":
        y = np.digitize(y, [-1.0, 1.5]).astype(np.float32)
    params = {"device": "cpu", "eta": 0.3, "seed": 4, "max_depth": 4, **sampling}
    paged = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET)
    in_core = daskgb.QuantileMatrix(X, y, device="cpu")
    assert_trains_the_same(params, paged, in_core)


def test_chunked_quantisation_joins_into_the_same_matrix():
    """Within the budget, chunks of 32 rows are packed one by one and joined: the very words
    a whole-matrix quantisation makes (cuts exact here, so the merged sketch's are the same)."""
    X, y = make_data(3, "reg:squarederror", True)
    whole = daskgb.QuantileMatrix(X, y, device="cpu")
    budget = 4000  # raw rows 14.4 KB, chunks of 32 rows; the packed matrix (~3 KB) fits
    chunked = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=budget)
    assert not chunked.paged and whole.ellpack.nbytes <= budget < X.nbytes
    for name in ("bits", "row_stride", "is_dense", "has_missing", "null_symbol", "n_rows"):
        assert getattr(chunked.ellpack, name) == getattr(whole.ellpack, name), name
    np.testing.assert_array_equal(chunked.ellpack.words, whole.ellpack.words)
    np.testing.assert_array_equal(chunked.cuts.values, whole.cuts.values)


def test_pages_share_one_layout_when_only_late_rows_miss_values():
    X, y = make_data(4, "reg:squarederror", False)
    X[550:, 2] = np.nan  # only the last page has missing values
    paged = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET)
    assert paged.paged and paged.ellpack.has_missing
    assert len({(p.bits, p.row_stride, p.null_symbol, p.is_dense) for p in paged.ellpack._pages}) == 1
    a = daskgb.train({"device": "cpu", "max_depth": 4}, paged, 5, verbose_eval=False)
    b = daskgb.train({"device": "cpu", "max_depth": 4}, daskgb.QuantileMatrix(X, y, device="cpu"), 5,
                     verbose_eval=False)
    assert_same_model(a, b)


def test_continuous_data_sketched_by_chunks():
    """Many distinct values: the chunks' merged sketch gives cuts close to the whole sketch's,
    and the paged model trains as well as the in-core one."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(6000, 5)).astype(np.float32)
    y = (X[:, 0] - 2 * X[:, 1] * X[:, 2] + rng.normal(size=6000) * 0.3).astype(np.float32)
    paged = daskgb.QuantileMatrix(X, y, device="cpu", max_bin=64, device_memory_budget=8192)
    whole = daskgb.QuantileMatrix(X, y, device="cpu", max_bin=64)
    assert paged.paged
    np.testing.assert_array_equal(paged.cuts.ptrs, whole.cuts.ptrs)
    # Cut values agree to within a few ranks of 6000 (the sketch's error bound).
    for f in range(5):
        lo, hi = int(whole.cuts.ptrs[f]), int(whole.cuts.ptrs[f + 1])
        ranks_p = np.searchsorted(np.sort(X[:, f]), paged.cuts.values[lo:hi - 1])
        ranks_w = np.searchsorted(np.sort(X[:, f]), whole.cuts.values[lo:hi - 1])
        assert np.max(np.abs(ranks_p - ranks_w)) <= 6000 / 64
    res_p, res_w = {}, {}
    daskgb.train({"device": "cpu"}, paged, 20, evals=[(paged, "t")], evals_result=res_p, verbose_eval=False)
    daskgb.train({"device": "cpu"}, whole, 20, evals=[(whole, "t")], evals_result=res_w, verbose_eval=False)
    assert res_p["t"]["rmse"][-1] == pytest.approx(res_w["t"]["rmse"][-1], rel=0.05)


def test_auto_budget():
    from daskgb.ellpack.pages import AUTO_FREE_FRACTION, auto_budget

    # 1M x 28 at 256 bins: 9 bits a value, about 31.5 MB.
    assert auto_budget(1_000_000, 28, 256, free_bytes=10**9) is None
    assert auto_budget(1_000_000, 28, 256, free_bytes=40 * 10**6) == int(40 * 10**6 * AUTO_FREE_FRACTION)
    assert auto_budget(0, 28, 256, free_bytes=0) is None


@pytest.mark.gpu
def test_a_gpu_matrix_too_large_for_free_memory_pages_itself(monkeypatch):
    import cupy

    X, y = make_data(2, "reg:squarederror", False, n=5000)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (8192, 2**30))
    with pytest.warns(UserWarning, match=r"keeping them as \d+ pages in host memory"):
        m = daskgb.QuantileMatrix(X, y, device="cuda")
    assert m.paged


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["in memory", "batches"])
def test_a_gpu_matrix_the_estimate_doubts_but_that_fits_stays_in_core_and_says_nothing(monkeypatch, how):
    """The automatic budget is sized by an upper bound (the widest symbols max_bin allows); rows
    that pack smaller and fit stay in core, with no warning that they were paged."""
    import warnings

    import cupy

    from daskgb.ellpack import pages as external
    from daskgb.ellpack import bits_for

    X, y = make_data(2, "reg:squarederror", False, n=5000)

    def build():
        if how == "in memory":
            return daskgb.QuantileMatrix(X, y, device="cuda")
        return daskgb.QuantileMatrix.from_batches(lambda: iter([(X[:3000], y[:3000]), (X[3000:], y[3000:])]),
                                                  device="cuda")

    whole = build()
    assert whole.ellpack.bits < bits_for(whole.max_bin + 1), "the rows must pack smaller than the estimate"
    share = whole.ellpack.nbytes + 64
    assert external.auto_budget(whole.n_rows, whole.n_features, whole.max_bin, 2 * share) is not None
    monkeypatch.setattr(external, "AUTO_FREE_FRACTION", 0.5)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (2 * share, 2**30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = build()
    assert not m.paged
    from daskgb.ellpack.reference import unpack_symbols

    def unpacked(e):
        return unpack_symbols(cupy.asnumpy(e.words), e.bits, e.n_rows * e.row_stride)

    np.testing.assert_array_equal(unpacked(m.ellpack), unpacked(whole.ellpack))


def test_the_budget_can_be_chosen_once_the_rows_are_counted(backend):
    """quantise_blocks(budget_for=...) learns the row count on its first pass and pages under
    the budget it returns (from_batches' automatic paging on a GPU), or stays in core."""
    from daskgb.ellpack.reference import symbols
    from daskgb.ellpack.pages import quantise_blocks

    X, y = make_data(3, "reg:squarederror", False)
    seen = []

    def blocks():
        return iter([(X[:250], None), (X[250:], None)])

    _, paged = quantise_blocks(backend, blocks, X.shape[1], np.nan, 256, None,
                               budget_for=lambda n: seen.append(n) or BUDGET)
    _, whole = quantise_blocks(backend, blocks, X.shape[1], np.nan, 256, None, budget_for=lambda n: None)
    assert seen == [len(X)] and isinstance(paged, PagedEllpack) and not isinstance(whole, PagedEllpack)
    rows = [symbols(paged.page(i, np)) for i in range(paged.n_pages)]
    np.testing.assert_array_equal(np.concatenate(rows), symbols(whole.to(np)))


def test_compact_rows_are_those_rows_of_the_whole_matrix(backend, xp):
    """compact_rows gathers sampled rows from each page's packed words (a page with none
    among them, one row, every row) into an in-core matrix: those rows of the whole one."""
    from daskgb.ellpack.pages import compact_rows, quantise_blocks
    from daskgb.ellpack.reference import symbols

    X, _ = make_data(6, "reg:squarederror", True)
    blocks = lambda: iter([(X, None)])  # noqa: E731
    _, paged = quantise_blocks(backend, blocks, X.shape[1], np.nan, 256, BUDGET)
    _, whole = quantise_blocks(backend, blocks, X.shape[1], np.nan, 256, None)
    assert isinstance(paged, PagedEllpack) and paged.n_pages >= 3
    _, (a1, _), (a2, b2) = paged.row_ranges[:3]
    rng = np.random.default_rng(6)
    rest = np.arange(b2, len(X))
    rows = np.concatenate([[a1], np.arange(a2, b2), np.sort(rng.choice(rest, rest.size // 3, replace=False))])
    compact = compact_rows(backend, paged, xp.asarray(rows))
    assert compact.n_rows == rows.size and (compact.bits, compact.row_stride) == (whole.bits, whole.row_stride)
    np.testing.assert_array_equal(symbols(compact.to(np)), symbols(whole.to(np))[rows])


@pytest.mark.gpu
def test_batches_too_large_for_free_memory_page_themselves(monkeypatch):
    import cupy

    X, y = make_data(2, "reg:squarederror", False, n=5000)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (8192, 2**30))
    with pytest.warns(UserWarning, match=r"keeping them as \d+ pages in host memory"):
        m = daskgb.QuantileMatrix.from_batches(lambda: iter([(X[:3000], y[:3000]), (X[3000:], y[3000:])]),
                                               device="cuda")
    assert m.paged and m.n_rows == 5000


def test_a_streamed_step_copies_each_page_once(monkeypatch):
    """A step applies its splits to a page and builds its histograms from it in one visit."""
    X, y = make_data(5, "reg:squarederror", False)
    paged = daskgb.QuantileMatrix(X, y, device="cpu", device_memory_budget=BUDGET)
    loads = []
    real = PagedEllpack.page
    monkeypatch.setattr(PagedEllpack, "page", lambda self, i, xp: loads.append(i) or real(self, i, xp))
    b = daskgb.train({"device": "cpu", "max_depth": 3}, paged, 1, verbose_eval=False)
    assert b.trees[0].depth.max() == 3  # every level split
    # The root's histograms, two levels' children, and the last level's splits.
    assert len(loads) == 4 * paged.ellpack.n_pages


def _batches(X, y, sizes, w=None):
    cuts = np.cumsum([0, *sizes])

    def batches():
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield (X[a:b], y[a:b]) if w is None else (X[a:b], y[a:b], w[a:b])

    return batches


@pytest.mark.parametrize("budget", [None, BUDGET], ids=["in-core", "paged"])
def test_a_matrix_from_batches_trains_the_in_core_model(budget, tmp_path):
    X, y = make_data(13, "reg:squarederror", True)
    w = np.random.default_rng(1).uniform(0.5, 2, y.size).astype(np.float32)
    sizes = [37, 0, 200, 163, 200]  # uneven, one empty
    kw = {} if budget is None else {"device_memory_budget": budget, "spill_dir": tmp_path}
    m = daskgb.QuantileMatrix.from_batches(_batches(X, y, sizes, w), device="cpu", **kw)
    whole = daskgb.QuantileMatrix(X, y, weight=w, device="cpu")
    assert m.n_rows == 600 and m.paged == (budget is not None)
    np.testing.assert_array_equal(m.cuts.values, whole.cuts.values)
    np.testing.assert_array_equal(m.get_label(), y)
    np.testing.assert_array_equal(m.get_weight(), w)
    if budget is None:
        np.testing.assert_array_equal(m.ellpack.words, whole.ellpack.words)
    params = {"device": "cpu", "max_depth": 4, "subsample": 0.6, "sampling_method": "gradient_based", "seed": 1}
    assert_trains_the_same(params, m, whole, rounds=5)


def test_batches_of_csr_rows():
    sp = pytest.importorskip("scipy.sparse")
    X, y = make_data(14, "reg:squarederror", False)
    X[np.random.default_rng(2).random(X.shape) < 0.5] = 0.0
    csr = sp.csr_matrix(X)

    def batches():
        for a in range(0, 600, 250):
            yield csr[a : a + 250], y[a : a + 250]

    m = daskgb.QuantileMatrix.from_batches(batches, device="cpu", device_memory_budget=BUDGET)
    assert m.paged
    assert_trains_the_same({"device": "cpu", "max_depth": 4}, m, daskgb.QuantileMatrix(csr, y, device="cpu"),
                           rounds=5)


def test_bad_batches():
    X, y = make_data(1, "reg:squarederror", False)
    with pytest.raises(ValueError, match="no batches"):
        daskgb.QuantileMatrix.from_batches(lambda: iter([]), device="cpu")
    with pytest.raises(ValueError, match="features"):
        daskgb.QuantileMatrix.from_batches(lambda: iter([(X[:10], y[:10]), (X[10:20, :4], y[10:20])]), device="cpu")
    with pytest.raises(ValueError, match="tuple"):
        daskgb.QuantileMatrix.from_batches(lambda: iter([X[:10]]), device="cpu")
    with pytest.raises(ValueError, match="every batch or with none"):
        daskgb.QuantileMatrix.from_batches(lambda: iter([(X[:10], y[:10], np.ones(10)), (X[10:20], y[10:20])]),
                                           device="cpu")


def test_batches_of_pandas_frames_and_series():
    """A batch may be a DataFrame with Series labels and weights (their get() is not CuPy's)."""
    pd = pytest.importorskip("pandas")
    X, y = make_data(13, "reg:squarederror", True)
    w = np.random.default_rng(3).uniform(0.5, 2, y.size).astype(np.float32)
    frame, labels, weights = pd.DataFrame(X), pd.Series(y), pd.Series(w)
    m = daskgb.QuantileMatrix.from_batches(_batches(frame, labels, [250, 350], weights), device="cpu",
                                           device_memory_budget=BUDGET)
    whole = daskgb.QuantileMatrix(X, y, weight=w, device="cpu")
    np.testing.assert_array_equal(m.get_label(), y)
    np.testing.assert_array_equal(m.get_weight(), w)
    assert_trains_the_same({"device": "cpu", "max_depth": 4}, m, whole, rounds=3)


def test_bad_labels_in_batches_fail_before_the_rows_are_quantised():
    """The labels are checked as the first pass (the sketch) ends, so the second never runs."""
    X, y = make_data(1, "reg:squarederror", False)
    y = y.copy()
    y[150] = np.nan
    calls = []

    def batches():
        calls.append(1)
        return _batches(X, y, [100, 100, 100])()

    with pytest.raises(ValueError, match=r"y \(labels\) has 1 NaN or infinite values"):
        daskgb.QuantileMatrix.from_batches(batches, device="cpu", device_memory_budget=BUDGET)
    assert len(calls) == 2  # the first batch peeked at, then the first pass


def test_a_matrix_keeps_its_own_labels():
    """Labels are copied where they are kept (from one batch or a whole array alike): changing
    the caller's array afterwards does not change the matrix."""
    X, y = make_data(1, "reg:squarederror", False)
    y = y.astype(np.float32)
    kept = y.copy()
    for m in (daskgb.QuantileMatrix.from_batches(lambda: iter([(X, y)]), device="cpu"),
              daskgb.QuantileMatrix(X, y, device="cpu")):
        y[:] = -1.0
        np.testing.assert_array_equal(m.get_label(), kept)
        y[:] = kept


@pytest.mark.parametrize("last", [120, 80])
@pytest.mark.parametrize("budget", [None, BUDGET])
def test_batches_that_change_between_passes(budget, last):
    """batches() gives the labels and the sketch on one pass and is quantised on the next:
    rows that differ from one pass to the next are an error, not a matrix whose rows and
    labels disagree."""
    X, y = make_data(1, "reg:squarederror", False)
    calls = []

    def batches():  # the first call only shows its first batch
        calls.append(1)
        n = 100 if len(calls) < 3 else last
        yield X[:n], y[:n]

    with pytest.raises(ValueError, match="same rows every time"):
        daskgb.QuantileMatrix.from_batches(batches, device="cpu", device_memory_budget=budget)


def test_batches_binned_with_given_cuts():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(900, 4)).astype(np.float32)  # continuous: sketches of pieces differ from the whole's
    y = X[:, 0].copy()
    whole = daskgb.QuantileMatrix(X, y, device="cpu", max_bin=32)
    for kw in ({"cuts": whole.cuts}, {"ref": whole}):
        m = daskgb.QuantileMatrix.from_batches(_batches(X, y, [300, 300, 300]), device="cpu", **kw)
        np.testing.assert_array_equal(m.ellpack.words, whole.ellpack.words)
    assert daskgb.QuantileMatrix.from_batches(_batches(X, y, [300, 300, 300]), device="cpu",
                                              ref=whole).shares_cuts_with(whole)
    with pytest.raises(ValueError, match="not both"):
        daskgb.QuantileMatrix.from_batches(_batches(X, y, [900]), device="cpu", ref=whole, cuts=whole.cuts)
