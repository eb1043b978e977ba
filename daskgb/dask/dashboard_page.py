"""The daskgb dashboard page (Bokeh): learning curves, time per round by phase, rows and memory per worker.

Imports bokeh; dask/dashboard.py imports this module only on a scheduler that has it. The
page is a Bokeh application served by distributed's own Bokeh server (the one behind the
dashboard's other pages), added to it after the scheduler started: add_pages.
"""

from __future__ import annotations

import functools
import html
import math

from bokeh.application import Application
from bokeh.application.handlers.document_lifecycle import DocumentLifecycleHandler
from bokeh.application.handlers.function import FunctionHandler
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, DataRange1d, Div, FactorRange, HoverTool, NumeralTickFormatter
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from .. import phases

UPDATE_MS = 500
# histogram, allreduce, split, other
PHASE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#a0a0a0")


def add_pages(scheduler, routes, get_store) -> bool:
    """Serve the page at each route (e.g. "/daskgb") of the scheduler's running dashboard;
    False where it has none. get_store() gives the TrainingStore at each update.

    The page joins distributed's Bokeh server rather than a server of its own, so that it
    shares the dashboard's prefix and websocket origins, and so that its "/individual-..."
    route is listed in individual-plots.json, the list JupyterLab's Dask extension shows.
    Bokeh builds an application's routes only in its server's constructor; here the same
    routes are added to the running server (tornado's add_handlers) and the application's
    context is entered where the server keeps its applications (BokehTornado.applications,
    whence app_paths, which individual-plots.json lists).
    """
    from bokeh.server.contexts import ApplicationContext
    from bokeh.server.tornado import BokehTornado, create_static_handler
    from bokeh.server.urls import per_app_patterns
    from bokeh.server.views.ws import WSHandler

    http = getattr(scheduler, "http_application", None)
    server = next((a for a in getattr(http, "applications", ()) if isinstance(a, BokehTornado)), None)
    if server is None:
        return False
    contexts = server.applications  # the server's own dict (its app_paths)
    menu = _join_menu(scheduler, routes, server.prefix)
    for url in routes:
        if url in contexts:
            continue  # added by an earlier plugin on this scheduler: it reads the store through get_store
        # The page proper wears the dashboard's frame (its menu: the way back to the status page);
        # the "/individual-..." one is bare, as distributed's are, for JupyterLab's panes.
        frame = None if url.startswith("/individual-") else menu
        app = Application(FunctionHandler(functools.partial(training_doc, get_store, frame=frame)),
                          DocumentLifecycleHandler())
        ctx = ApplicationContext(app, io_loop=server.io_loop, url=url)
        handlers = []
        for pattern, handler in per_app_patterns:
            kwargs = {"application_context": ctx}
            if issubclass(handler, WSHandler):
                kwargs.update(compression_level=None, mem_level=None)
            handlers.append((server.prefix + url + pattern, handler, kwargs))
        websocket = next(h[0] for h in handlers if h[0].endswith("/ws"))
        for h in handlers:
            h[2]["bokeh_websocket_path"] = websocket
        handlers.append(create_static_handler(server.prefix, url, app))
        server.add_handlers(r".*", handlers)
        contexts[url] = ctx
    return True


def _join_menu(scheduler, routes, prefix: str) -> dict | None:
    """List the page in the dashboard's menu, and return the template variables its pages are
    drawn with (None where this distributed keeps them elsewhere: the page is then unframed).

    distributed draws every page's menu from one list per scheduler (dashboard/scheduler.py
    template_variables, memoized; each page's document copies the dict, not the list): the
    page's name added there shows in the menu of every page opened after, and its
    "/individual-..." route in the "More..." list."""
    try:
        from distributed.dashboard.scheduler import template_variables

        variables = template_variables(scheduler)
        pages, plots = variables["pages"], variables["plots"]
    except Exception:  # another layout of distributed's dashboard: no menu entry, the page still works
        return None
    for url in routes:
        name = url.strip("/")
        if name.startswith("individual-"):
            if not any(p.get("url") == name for p in plots):
                plots.append({"url": name, "name": name[len("individual-"):].title()})
        elif name not in pages:
            pages.append(name)
    p = (prefix or "").strip("/")
    return {**variables, "prefix": f"/{p}/" if p else "/"}


def training_doc(get_store, doc, frame: dict | None = None) -> None:
    """Build one browser tab's document (a Bokeh FunctionHandler's function). frame: the
    dashboard's template variables, to draw the page inside the dashboard's frame and menu."""
    page = TrainingPage(get_store)
    page.update()
    doc.add_periodic_callback(page.update, UPDATE_MS)
    doc.add_root(page.root)
    doc.title = page.title
    page.doc = doc
    try:  # distributed's look, where it is where this version keeps it
        from distributed.dashboard.components.scheduler import BOKEH_THEME

        doc.theme = BOKEH_THEME
    except ImportError:
        pass
    if frame is not None:
        try:
            from distributed.dashboard.components.scheduler import env

            doc.template = env.get_template("simple.html")
            doc.template_variables.update(frame, active_page="daskgb")
        except Exception:  # the page without the frame: the header's link still leads back
            pass


def _in_ms(cols: dict) -> dict:
    """The columns with the phases' seconds as milliseconds."""
    return {k: [1e3 * v for v in vs] if k in phases.PHASES else vs for k, vs in cols.items()}


class TrainingPage:
    """The page's figures and data sources; update() brings them to the latest fit's state."""

    def __init__(self, get_store):
        self.get_store = get_store
        self.doc = None
        self.job = None
        self.last_round = -1  # the last round streamed to the sources
        self.metric_names: list[str] = []
        self._workers: dict = {}
        self.title = "daskgb: no training yet"

        self.header = Div(text=self._header_html(), sizing_mode="stretch_width")
        self.curves_source = ColumnDataSource({"round": []}, name="daskgb-curves")
        # The learning curves: a figure per metric, each with its own y axis (logloss and AUC
        # differ in scale and direction), its eval sets' lines in it, the legend beside it.
        self.curve_figs: dict = {}  # metric -> its figure
        self.curves_x = DataRange1d()
        self.curves = column(self._curve_figure("Learning curves (eval metrics per round)"),
                             sizing_mode="stretch_both", min_height=250)

        self.phase_source = ColumnDataSource({"round": [], **{p: [] for p in phases.PHASES}}, name="daskgb-phases")
        self.phase_fig = figure(title="Time per round by phase (mean over workers)", x_axis_label="round",
                                y_axis_label="milliseconds", sizing_mode="stretch_both", min_height=250,
                                tools="pan,wheel_zoom,box_zoom,reset,save")
        self.phase_fig.vbar_stack(list(phases.PHASES), x="round", width=0.9, source=self.phase_source,
                                  color=list(PHASE_COLORS), legend_label=list(phases.PHASES))
        self.phase_fig.add_tools(HoverTool(tooltips=[("round", "@round"), *((p, f"@{p}{{0.00}} ms")
                                                                           for p in phases.PHASES)]))
        self.phase_fig.add_layout(self.phase_fig.legend[0], "right")  # beside the bars, not over them

        empty_workers = {"worker": [], "rows": [], "memory": [], **{p: [] for p in phases.PHASES}}
        self.worker_source = ColumnDataSource(empty_workers, name="daskgb-workers")
        self.worker_range = FactorRange()
        self.rows_fig = self._worker_bars("Rows per worker", "rows", "0,0")
        self.memory_fig = self._worker_bars("Memory per worker", "memory", "0.0 b")
        self.worker_phase_fig = figure(title="Mean time per round by phase, per worker", y_range=self.worker_range,
                                       x_axis_label="milliseconds", sizing_mode="stretch_both", min_height=200,
                                       tools="save")
        self.worker_phase_fig.hbar_stack(list(phases.PHASES), y="worker", height=0.7, source=self.worker_source,
                                         color=list(PHASE_COLORS))
        self.root = column(self.header, row(self.curves, self.phase_fig, sizing_mode="stretch_both"),
                           row(self.rows_fig, self.memory_fig, self.worker_phase_fig, sizing_mode="stretch_both"),
                           sizing_mode="stretch_both")

    def _header_html(self) -> str:
        # The only HTML the page renders: the reports' strings (a worker's device, the fit's id)
        # come from log_event, which anyone with a client can send, so they are escaped.
        # "status": the dashboard's status page, beside this one under the same prefix.
        return (f'<b>{html.escape(self.title)}</b> &nbsp; <a href="status" title="the Dask dashboard">'
                "&larr; Dask dashboard</a>")

    def _curve_figure(self, title: str, metric: str | None = None):
        fig = figure(title=title, x_axis_label="round", y_axis_label=metric or "metric", x_range=self.curves_x,
                     sizing_mode="stretch_both", min_height=150, tools="pan,wheel_zoom,box_zoom,reset,save")
        fig.add_tools(HoverTool(tooltips=[("round", "@round"), ("series", "$name"), ("value", "$y")]))
        return fig

    def _worker_bars(self, title: str, field: str, fmt: str):
        fig = figure(title=title, y_range=self.worker_range, sizing_mode="stretch_both", min_height=200,
                     tools="save")
        fig.hbar(y="worker", right=field, height=0.7, source=self.worker_source, color="#5b8db8")
        fig.xaxis.formatter = NumeralTickFormatter(format=fmt)
        fig.add_tools(HoverTool(tooltips=[("worker", "@worker"), (field, f"@{field}{{{fmt}}}")]))
        return fig

    def _reset(self, fit) -> None:
        """A new fit: empty sources, no curves."""
        self.job, self.last_round, self.metric_names = fit.job, -1, []
        self.curve_figs = {}
        self.curves.children = [self._curve_figure("Learning curves (eval metrics per round)")]
        self.curves_source.data = {"round": []}
        self.phase_source.data = {"round": [], **{p: [] for p in phases.PHASES}}

    def _add_curves(self, names, metric_of) -> None:
        """A figure per metric (in the order the series came), each series a line in its metric's."""
        self.curves_source.data = {"round": [], **{n: [] for n in names}}
        figs: dict = {}
        for i, name in enumerate(names):
            metric = metric_of(name)
            fig = figs.get(metric)
            if fig is None:
                fig = figs[metric] = self._curve_figure(metric, metric)
            fig.line("round", name, source=self.curves_source, legend_label=name, name=name,
                     color=Category10_10[i % 10], line_width=2)
        for fig in figs.values():
            fig.add_layout(fig.legend[0], "right")  # beside the curves, never over them
            fig.legend[0].click_policy = "hide"
        self.curve_figs = figs
        self.curves.children = list(figs.values())
        self.metric_names = list(names)

    def update(self) -> None:
        store = self.get_store()
        fit = None if store is None else store.latest()
        if fit is None:
            return
        if fit.job != self.job:
            self._reset(fit)
        cols = fit.rounds_after(self.last_round)
        if cols["round"]:
            metrics = cols.pop("metrics")
            if set(metrics) - set(self.metric_names):
                # A series seen for the first time (the first rounds): the curves start again with it.
                self._reset(fit)
                cols = fit.rounds_after(-1)
                metrics = cols.pop("metrics")
                self._add_curves(fit.metric_names(), fit.metric_of_series)
            curves = {"round": cols["round"],
                      **{n: metrics.get(n, [math.nan] * len(cols["round"])) for n in self.metric_names}}
            self.curves_source.stream(curves, rollover=store.max_rounds)
            self.phase_source.stream(_in_ms(cols), rollover=store.max_rounds)
            self.last_round = cols["round"][-1]
        workers = _in_ms(fit.worker_rows())
        if workers != self._workers:  # unchanged data is not sent to the browser again
            self._workers = workers
            self.worker_range.factors = workers["worker"]
            self.worker_source.data = dict(workers)
        kinds = {w.get("memory_kind") for w in fit.workers.values()} - {None, ""}
        self.memory_fig.title.text = "Memory per worker" + (f": {', '.join(sorted(kinds))}" if kinds else "")
        done = fit.complete + 1
        self.title = (f"daskgb: round {done} of {fit.rounds}, {fit.world} worker{'s' * (fit.world != 1)} "
                      f"({fit.device}), fit {fit.job[:8]}")
        self.header.text = self._header_html()
        if self.doc is not None:
            self.doc.title = self.title
