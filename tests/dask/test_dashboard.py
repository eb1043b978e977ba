"""The daskgb dashboard page: the reports' way to the scheduler, the Bokeh document, and the
page live in a headless Chromium during a LocalCluster training run (the phase clock that
times the rounds: tests/test_phases.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import daskgb.dask as dgb
from daskgb import phases
from daskgb.callback import TrainingCallback
from daskgb.dask import dashboard

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import headless  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PARAMS = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.1, "device": "cpu"}


def data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n) > 0).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def dash_client():
    """2 worker processes and a scheduler with a dashboard (the page needs one)."""
    pytest.importorskip("bokeh")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0") as c:
        with distributed.Client(c) as cl:
            yield cl


def matrices(client, n=4000):
    X, y = data(n)
    Xv, yv = data(n // 4, seed=1)
    dtrain = dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=n // 4), da.from_array(y, chunks=n // 4))
    dvalid = dgb.DaskQuantileMatrix(client, da.from_array(Xv, chunks=n // 8), da.from_array(yv, chunks=n // 8),
                                    ref=dtrain)
    return dtrain, dvalid


# ---------------------------------------------------------------- the scheduler's store

def report(store, job, rank, rounds, world=2, metrics=True, rows=100, memory=1000):
    items = [(r, [0.001, 0.002, 0.003, 0.004], {"valid-logloss": 1.0 / (r + 1)} if metrics and rank == 0 else None)
             for r in rounds]
    store.report(worker=f"tcp://w{rank}", job=job, rank=rank, world=world, rounds=10, device="cpu", rows=rows,
                 memory=memory, memory_kind="process memory (RSS)", items=items)


def test_store_rounds_complete_once_every_worker_reported():
    store = dashboard.TrainingStore()
    report(store, "a", 0, range(3))
    fit = store.latest()
    assert fit.complete == -1 and fit.rounds_after(-1)["round"] == []  # rank 1 not heard from yet
    report(store, "a", 1, range(2))
    cols = fit.rounds_after(-1)
    assert cols["round"] == [0, 1]
    assert cols["metrics"] == {"valid-logloss": [1.0, 0.5]}
    assert cols["histogram"] == pytest.approx([0.001, 0.001])  # the mean over the workers
    report(store, "a", 1, [2])
    assert fit.rounds_after(1)["round"] == [2]
    w = fit.worker_rows()
    assert w["worker"] == ["0: tcp://w0", "1: tcp://w1"] and w["rows"] == [100, 100]
    assert w["other"] == pytest.approx([0.004, 0.004])


def test_store_is_bounded(monkeypatch):
    monkeypatch.setattr(dashboard, "MAX_ROUNDS", 50)
    store = dashboard.TrainingStore()
    for f in range(dashboard.MAX_FITS + 2):
        report(store, f"fit{f}", 0, range(10), world=1)
    assert list(store.fits) == [f"fit{f}" for f in range(2, dashboard.MAX_FITS + 2)]
    report(store, "long", 0, range(120), world=1)
    fit = store.latest()
    assert fit.job == "long" and fit.complete == 119
    cols = fit.rounds_after(-1)
    assert cols["round"] == list(range(70, 120))  # the latest MAX_ROUNDS rounds


# ---------------------------------------------------------------- the page's document

def test_page_document_builds_from_a_store():
    pytest.importorskip("bokeh")
    from bokeh.core.json_encoder import serialize_json
    from bokeh.document import Document

    from daskgb.dask.dashboard_page import TrainingPage, training_doc

    store = dashboard.TrainingStore()
    page = TrainingPage(lambda: store)
    page.update()  # no fit yet
    assert page.phase_source.data["round"] == []
    report(store, "a", 0, range(4))
    report(store, "a", 1, range(3))
    page.update()
    assert list(page.phase_source.data["round"]) == [0, 1, 2]
    assert list(page.curves_source.data["valid-logloss"]) == pytest.approx([1.0, 0.5, 1 / 3])
    assert page.phase_source.data["split"] == pytest.approx([3.0] * 3)  # milliseconds
    assert list(page.worker_source.data["rows"]) == [100, 100]
    assert "round 3 of 10" in page.title
    report(store, "a", 1, [3])
    page.update()  # only the new round is streamed
    assert list(page.phase_source.data["round"]) == [0, 1, 2, 3]
    report(store, "b", 0, range(2), world=1)
    page.update()  # a new fit starts the page again
    assert list(page.phase_source.data["round"]) == [0, 1]
    assert "fit b" in page.title

    doc = Document()
    training_doc(lambda: store, doc)
    assert doc.roots and doc.title.startswith("daskgb: round 2 of 10")
    assert "daskgb-phases" in serialize_json(doc.to_json())  # a document a browser can be sent


def test_each_metric_has_its_own_axis():
    """logloss and AUC differ in scale: each metric is a figure of its own (its y axis), its eval
    sets' lines in it, the legend beside the curves rather than over them."""
    pytest.importorskip("bokeh")
    from daskgb.dask.dashboard_page import TrainingPage

    store = dashboard.TrainingStore()
    page = TrainingPage(lambda: store)
    metric_of = {"train-logloss": "logloss", "valid-logloss": "logloss", "valid-auc": "auc",
                 "my-set-aft-nloglik": "aft-nloglik"}  # names holding '-' themselves
    items = [(r, [0.001] * 4, {"train-logloss": 0.6 / (r + 1), "valid-logloss": 0.7 / (r + 1),
                                "valid-auc": 0.9, "my-set-aft-nloglik": 5.0}) for r in range(3)]
    store.report(worker="tcp://w0", job="a", rank=0, world=1, rounds=10, items=items, metric_of=metric_of)
    page.update()
    figs = page.curves.children
    assert [f.yaxis[0].axis_label for f in figs] == ["logloss", "auc", "aft-nloglik"]
    assert [sorted(r.name for r in f.renderers) for f in figs] == [["train-logloss", "valid-logloss"], ["valid-auc"],
                                                                   ["my-set-aft-nloglik"]]
    for f in figs:
        assert f.legend[0] in f.right and f.legend[0] not in f.center
        assert f.x_range is page.curves_x  # zoomed together
    assert list(page.curves_source.data["valid-auc"]) == pytest.approx([0.9] * 3)
    # Without the worker's word (an older report), the metric is the text after the set's name.
    assert store.latest().metric_of_series("valid-rmse") == "rmse"


def test_no_page_without_bokeh_on_the_scheduler(monkeypatch):
    monkeypatch.setitem(sys.modules, "bokeh.server.tornado", object())  # past the check for a running dashboard
    monkeypatch.setitem(sys.modules, "daskgb.dask.dashboard_page", None)  # its import fails as without bokeh

    class Scheduler:
        plugins: dict = {}

    plugin = dashboard.DashboardPlugin()
    asyncio.run(plugin.start(Scheduler()))
    assert plugin.served is False


def test_a_scheduler_without_a_dashboard_imports_no_bokeh(monkeypatch):
    # A scheduler that serves a dashboard imported Bokeh's server as it started: without it there is
    # nothing to join, and the page's module (which imports Bokeh, ~0.5 s) is left alone.
    monkeypatch.delitem(sys.modules, "bokeh.server.tornado", raising=False)
    monkeypatch.delitem(sys.modules, "daskgb.dask.dashboard_page", raising=False)

    class Scheduler:
        plugins: dict = {}

    plugin = dashboard.DashboardPlugin()
    asyncio.run(plugin.start(Scheduler()))
    assert plugin.served is False and plugin.store is not None
    assert "daskgb.dask.dashboard_page" not in sys.modules and "bokeh.server.tornado" not in sys.modules


# ---------------------------------------------------------------- on a cluster

def test_no_page_where_the_scheduler_has_no_dashboard(client):
    assert dashboard.register(client) is None
    X, y = data(600)
    dtrain = dgb.DaskQuantileMatrix(client, da.from_array(X, chunks=300), da.from_array(y, chunks=300))
    out = dgb.train(client, PARAMS, dtrain, 3, verbose_eval=False)
    assert out["booster"].num_boosted_rounds() == 3


def test_reports_reach_the_scheduler(dash_client):
    import dask

    with dask.config.set({"daskgb.dashboard": False}):
        assert dashboard.register(dash_client) is None
    url = dashboard.register(dash_client)
    assert url is not None and url.endswith("/daskgb")
    assert dashboard.register(dash_client) == url  # idempotent
    dtrain, dvalid = matrices(dash_client)
    out = dgb.train(dash_client, PARAMS, dtrain, 6, evals=[(dtrain, "train"), (dvalid, "valid")], verbose_eval=False)

    def latest(dask_scheduler):
        fit = dashboard.store_of(dask_scheduler).latest()
        return fit.complete, fit.world, fit.rounds_after(-1), fit.worker_rows()

    complete, world, cols, workers = dash_client.run_on_scheduler(latest)
    assert (complete, world) == (5, 2)
    assert cols["round"] == list(range(6))
    assert cols["metrics"]["valid-logloss"] == pytest.approx(out["history"]["valid"]["logloss"])
    assert all(cols[p][r] >= 0 for p in phases.PHASES for r in range(6))
    assert all(cols["histogram"][r] > 0 and cols["split"][r] > 0 for r in range(6))
    assert sum(workers["rows"]) == dtrain.n_rows and min(workers["memory"]) > 0

    # The page is on the scheduler's dashboard, and in the list JupyterLab's Dask extension reads.
    base = url[: -len("daskgb")]
    with urllib.request.urlopen(base + "individual-plots.json", timeout=10) as r:
        plots = json.loads(r.read())
    assert "/individual-daskgb" in plots.values()
    for route in ("daskgb", "individual-daskgb"):
        with urllib.request.urlopen(base + route, timeout=10) as r:
            assert r.status == 200 and b"bokeh" in r.read().lower()
    # In the dashboard's own menu (and "More..." list), and the page in the dashboard's frame:
    # its menu leads back to the status page.
    with urllib.request.urlopen(base + "status", timeout=10) as r:
        status = r.read().decode()
    assert '<a href="daskgb">Daskgb</a>' in status and '<a href="individual-daskgb">Daskgb</a>' in status
    with urllib.request.urlopen(base + "daskgb", timeout=10) as r:
        page = r.read().decode()
    assert '<a href="status">Status</a>' in page and '<a href="workers">Workers</a>' in page


# ---------------------------------------------------------------- in a browser

class SlowRounds(TrainingCallback):
    """Slows each round down a little and stops training once the test says so (a file)."""

    def __init__(self, stop_file: str, delay: float):
        self.stop_file, self.delay = stop_file, delay

    def after_iteration(self, model, epoch, evals_log) -> bool:
        time.sleep(self.delay)
        return os.path.exists(self.stop_file)


def test_page_shows_live_training_in_headless_chromium(dash_client, tmp_path):
    binary = headless.find_chromium()
    if binary is None:
        message = "needs Chromium (Debian: apt-get install chromium)"
        if headless.require_env():
            pytest.fail(message + "; DASKGB_REQUIRE_CHROMIUM=1 is set")
        pytest.skip(message)
    url = dashboard.register(dash_client)
    assert url is not None
    dtrain, dvalid = matrices(dash_client)
    stop_file = tmp_path / "stop"
    result: dict = {}

    def fit():
        try:
            result["out"] = dgb.train(dash_client, PARAMS, dtrain, 2000, evals=[(dtrain, "train"), (dvalid, "valid")],
                                      verbose_eval=False, callbacks=[SlowRounds(str(stop_file), 0.03)])
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            result["error"] = e

    trainer = threading.Thread(target=fit, daemon=True)
    trainer.start()
    shot = tmp_path / "dashboard.png"
    try:
        seen = headless.run(_watch(binary, url, shot, trainer))
    finally:
        stop_file.touch()
        trainer.join(120)
    assert not trainer.is_alive(), "training did not stop"
    assert "error" not in result, result.get("error")

    first, last = seen
    # Live: the page's own data sources grew while the fit ran, and hold its numbers.
    assert len(last["sources"]["daskgb-phases"]["round"]) > len(first["sources"]["daskgb-phases"]["round"]) >= 3
    curves = last["sources"]["daskgb-curves"]
    assert {"train-logloss", "valid-logloss"} <= set(curves)
    assert all(v is not None and 0 < v < 1 for v in curves["valid-logloss"])
    workers = last["sources"]["daskgb-workers"]
    assert len(workers["worker"]) == 2 and sum(workers["rows"]) == dtrain.n_rows and min(workers["memory"]) > 0
    assert sum(last["sources"]["daskgb-phases"]["histogram"]) > 0
    assert last["title"].startswith("daskgb: round ")

    assert shot.stat().st_size > 10_000  # a drawn page, not a blank one
    ARTIFACTS.mkdir(exist_ok=True)
    kept = ARTIFACTS / "dashboard.png"
    shutil.copyfile(shot, kept)
    print(f"\ndashboard screenshot: {shot}\n                 and: {kept}")


async def _watch(binary, url, shot, trainer, timeout=90):
    """Open the page; return its data twice, a few rounds apart, while training runs; screenshot
    the second time."""
    async with headless.Chromium(binary) as browser:
        await browser.goto(url)
        first = await _data_with_rounds(browser, 3, trainer, timeout)
        n = len(first["sources"]["daskgb-phases"]["round"])
        last = await _data_with_rounds(browser, n + 5, trainer, timeout)
        await asyncio.sleep(1.0)  # let the browser draw what it just received
        await browser.screenshot(shot)
        return first, last


async def _data_with_rounds(browser, rounds, trainer, timeout):
    end = time.monotonic() + timeout
    seen = None
    while time.monotonic() < end and trainer.is_alive():
        seen = await browser.evaluate(headless.BOKEH_SOURCES_JS)
        phases_seen = (seen or {}).get("sources", {}).get("daskgb-phases", {})
        if len(phases_seen.get("round", [])) >= rounds:
            return seen
        await asyncio.sleep(0.25)
    raise AssertionError(f"the page did not show {rounds} rounds (training alive: {trainer.is_alive()}); "
                         f"last seen: {json.dumps(seen)[:2000]}")


def test_a_crafted_report_shows_as_text_not_html():
    """Anyone with a client can send a report to the page's topic: the strings it shows are
    escaped, so HTML in them is shown, never run."""
    pytest.importorskip("bokeh")
    from daskgb.dask.dashboard_page import TrainingPage

    store = dashboard.TrainingStore()
    page = TrainingPage(lambda: store)
    crafted = '<img src=x onerror="alert(1)">'
    for rank in range(2):
        store.report(worker=f"tcp://w{rank}", job="<b>job</b>", rank=rank, world=2, rounds=10, device=crafted,
                     rows=100, memory=1000, memory_kind=crafted, items=[(0, [0.001] * 4, None)])
    page.update()
    assert "<img" not in page.header.text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page.header.text
    shown = page.header.text[len("<b>"):page.header.text.index("</b>")]
    assert page.header.text.startswith("<b>") and "<" not in shown
    assert page.header.text.endswith('<a href="status" title="the Dask dashboard">&larr; Dask dashboard</a>')


# ---------------------------------------------------------------- the quickstart

def test_the_base_install_serves_the_dashboard():
    """`pip install .` then the quickstart: distributed serves its dashboard (and so daskgb's
    page) only where the bokeh it asks for is installed, so the base install carries it."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")

    from distributed.versions import BOKEH_REQUIREMENT
    from packaging.requirements import Requirement

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    deps = [Requirement(d) for d in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    bokeh = next((d for d in deps if d.name == "bokeh"), None)
    assert bokeh is not None, "bokeh is not a dependency of the base install"
    # Every version the base install may bring is one distributed's dashboard accepts (at its lowest).
    from packaging.version import Version

    lowest = min(Version(s.version) for s in BOKEH_REQUIREMENT.specifier if s.operator == ">=")
    assert any(s.operator == ">=" and Version(s.version) >= lowest for s in bokeh.specifier), (bokeh,
                                                                                               BOKEH_REQUIREMENT)


@pytest.mark.slow
def test_quickstart_page_link_works_and_keep_open_holds_the_cluster(monkeypatch, capsys):
    """examples/quickstart.py (made small) prints a daskgb page that answers, and with --keep-open
    the cluster is still up, its links open, while it waits for Enter."""
    import builtins
    import importlib.util

    pytest.importorskip("bokeh")
    path = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"
    spec = importlib.util.spec_from_file_location("quickstart_example", path)
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    monkeypatch.setattr(quickstart, "N_TRAIN", 4000)
    monkeypatch.setattr(quickstart, "N_TEST", 1000)
    monkeypatch.setattr(quickstart, "start_cluster", lambda: (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0"), "cpu"))
    opened = []

    def enter(prompt=""):  # the user, before pressing Enter, opens the printed links
        out = capsys.readouterr().out
        page = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("daskgb page: "))
        for url in (page, page[: -len("daskgb")] + "status"):
            with urllib.request.urlopen(url, timeout=10) as r:
                opened.append((url, r.status, b"bokeh" in r.read().lower()))
        return ""

    monkeypatch.setattr(builtins, "input", enter)
    quickstart.main(["--keep-open"])
    assert len(opened) == 2 and all(status == 200 and bokeh for _, status, bokeh in opened), opened
    assert opened[0][0].startswith("http") and opened[0][0].endswith("/daskgb")
