"""A headless Chromium driven over the DevTools protocol, for tests that look at the dashboard.

Chromium's command line (--screenshot, --dump-dom) takes one picture at a time it picks
itself; a Bokeh server page fills in over a websocket after it loads, so the tests open the
page, ask the live page for its Bokeh document's data until it is there, and then take the
screenshot: both from the same browser at the same moment.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

# Flags that let headless Chromium run as root in a container on a machine with no network:
# without the background-networking ones it tries to reach Google and the closed network
# refuses it.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-allow-origins=*")


def find_chromium() -> str | None:
    """Debian's chromium (or another Chromium/Chrome on PATH), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, binary: str, width: int = 1400, height: int = 1000):
        self.binary, self.width, self.height = binary, width, height
        self._profile = None
        self._proc = None
        self._ws = None
        self._next_id = 0

    async def __aenter__(self):
        from tornado.websocket import websocket_connect

        self._profile = tempfile.mkdtemp(prefix="daskgb-chromium-")
        self._proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = await self._devtools_port()
        targets = await asyncio.to_thread(_get_json, f"http://127.0.0.1:{port}/json/list")
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await websocket_connect(page["webSocketDebuggerUrl"], max_message_size=256 << 20)
        await self.call("Emulation.setDeviceMetricsOverride",
                        width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc):
        if self._ws is not None:
            self._ws.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)
        return False

    async def _devtools_port(self, timeout: float = 60) -> int:
        """The port Chromium chose (it writes it into the profile once it listens)."""
        path = Path(self._profile) / "DevToolsActivePort"
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._proc.poll() is not None:
                raise RuntimeError(f"chromium exited at start with status {self._proc.returncode}")
            if path.exists():
                lines = path.read_text().split()
                if lines:
                    return int(lines[0])
            await asyncio.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    async def call(self, method: str, **params):
        """One DevTools command; its result (events that arrive in between are skipped)."""
        self._next_id += 1
        ident = self._next_id
        await self._ws.write_message(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            raw = await self._ws.read_message()
            if raw is None:
                raise RuntimeError("chromium closed the DevTools connection")
            msg = json.loads(raw)
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-able values)."""
        out = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"page script failed: {out['exceptionDetails']}")
        return out["result"].get("value")

    async def screenshot(self, path) -> None:
        out = await self.call("Page.captureScreenshot", format="png")
        Path(path).write_bytes(base64.b64decode(out["data"]))


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


# The page's Bokeh data sources by name, as plain arrays (BokehJS keeps columns in a Map or
# an object, as typed arrays or plain ones, depending on its version).
BOKEH_SOURCES_JS = """
(() => {
  const docs = (window.Bokeh && window.Bokeh.documents) || [];
  if (!docs.length) return null;
  const out = {title: document.title, sources: {}};
  for (const model of docs[0].all_models) {
    if (!model.name || !model.data) continue;
    const data = model.data;
    const keys = data instanceof Map ? [...data.keys()] : Object.keys(data);
    const cols = {};
    for (const k of keys) {
      const v = data instanceof Map ? data.get(k) : data[k];
      cols[k] = Array.from(v, x => (typeof x === "number" && !Number.isFinite(x)) ? null : x);
    }
    out.sources[model.name] = cols;
  }
  return out;
})()
"""


def run(coro):
    """Run a coroutine on a fresh event loop (the test's thread has none)."""
    return asyncio.run(coro)


def require_env() -> bool:
    """Whether a missing Chromium is a failure rather than a skip (CI sets it)."""
    return os.environ.get("DASKGB_REQUIRE_CHROMIUM") == "1"
