"""Helpers for tests that look at the project's pages in a real browser.

- :func:`serve_directory` serves a directory over HTTP on 127.0.0.1 (a free port, a
  thread of this process), stopped when the block ends;
- :func:`open_page` loads a URL in headless Chromium (Debian's `/usr/bin/chromium`,
  installed by `make chromium`; driven by playwright, which downloads no browser) and
  records every console error and uncaught page error;
- :func:`render_report` opens a generated observability report (`python_jobs.tools.report`)
  and returns what each chart rendered, for any test that wants to check one.

Everything the browser writes (profile, caches, temporary files) goes to a scratch
directory that is removed afterwards: under ``$LAKEHOUSE_HOME/tmp``, or under /tmp when
that path is too long for Chromium's singleton socket; nothing stays in /tmp or the
user's home.
"""

from __future__ import annotations

import base64
import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from python_jobs.spark import environment, paths

CHROMIUM = "/usr/bin/chromium"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 at a free port; yields the base URL (ending in `/`)."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"cannot serve {root}: not a directory")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="serve-directory", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class BrowserPage:
    """An open page and what went wrong on it so far."""

    page: object  # playwright.sync_api.Page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)  # "<status> <url>"

    def errors(self) -> list[str]:
        return (
            [f"console: {e}" for e in self.console_errors]
            + [f"page: {e}" for e in self.page_errors]
            + [f"request: {e}" for e in self.failed_requests]
        )

    def screenshot(self, path: Path, selector: str | None = None) -> bytes:
        """A PNG of the whole page (or of one element) saved at `path`; returns it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        target = self.page.locator(selector) if selector else self.page
        options = {} if selector else {"full_page": True}
        return target.screenshot(path=str(path), **options)

    def image_stats(self, png: bytes) -> dict[str, int]:
        """Width, height and number of distinct colours of a PNG, decoded by the browser
        (a blank or one-colour screenshot has a handful of colours)."""
        return self.page.evaluate(_IMAGE_STATS, base64.b64encode(png).decode("ascii"))


_IMAGE_STATS = """
async (b64) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes], {type: 'image/png'}));
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const context = canvas.getContext('2d');
  context.drawImage(bitmap, 0, 0);
  const data = context.getImageData(0, 0, bitmap.width, bitmap.height).data;
  const colours = new Set();
  for (let i = 0; i < data.length; i += 4) {
    colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
  }
  return {width: bitmap.width, height: bitmap.height, colours: colours.size};
}
"""


# Chromium puts its singleton socket at <TMPDIR>/org.chromium.Chromium.XXXXXX/SingletonSocket,
# and a Unix socket path has at most 107 bytes.
_SOCKET_SUFFIX = len("/browser-xxxxxxxx/org.chromium.Chromium.xxxxxx/SingletonSocket")


def _scratch_dir() -> Path:
    """A fresh directory for the browser's profile and temporary files: under the
    lakehouse's tmp, or, when that path is too long for Chromium's socket (a deep
    checkout, as in CI), a `lakehouse-test-browser-*` directory in the system's temp
    root, like the suite's own homes (removed after each page)."""
    base = paths()["tmp"]
    if len(str(base)) + _SOCKET_SUFFIX > 107:
        return Path(tempfile.mkdtemp(prefix="lakehouse-test-browser-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="browser-", dir=base))


@contextmanager
def open_page(url: str, width: int = 1400, height: int = 900) -> Iterator[BrowserPage]:
    """Load `url` in headless Chromium; yields a :class:`BrowserPage` once it loaded."""
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        raise FileNotFoundError(f"{CHROMIUM} is missing: run `make chromium` (Debian's chromium)")
    scratch = _scratch_dir()
    home = scratch / "home"
    browser_env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
    }
    try:
        # The playwright driver (a node process) takes its environment from ours when it
        # starts: its temporary files and the browser's profile then go to `scratch`.
        with environment(TMPDIR=str(scratch)):
            manager = sync_playwright().start()
        try:
            browser = manager.chromium.launch(
                executable_path=CHROMIUM, headless=True, env=browser_env
            )
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                opened = BrowserPage(page)
                page.on(
                    "console",
                    lambda m: opened.console_errors.append(m.text) if m.type == "error" else None,
                )
                page.on("pageerror", lambda e: opened.page_errors.append(str(e)))
                page.on(
                    "response",
                    lambda r: (
                        opened.failed_requests.append(f"{r.status} {r.url}")
                        if r.status >= 400
                        else None
                    ),
                )
                page.on(
                    "requestfailed",
                    lambda r: opened.failed_requests.append(f"failed {r.url}: {r.failure}"),
                )
                page.goto(url, wait_until="load")
                yield opened
            finally:
                browser.close()
        finally:
            manager.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class ChartView:
    """One chart panel of the report as the browser rendered it."""

    chart: str
    title: str
    points: int  # the svg's data-points attribute (-1 without an svg)
    series: int  # the svg's data-series attribute
    drawn: int  # data marks (points, bars) actually in the svg
    legend: int  # legend entries
    values: tuple[float, ...]  # the marks' data-value, in drawing order
    empty: bool  # the panel says "no data yet"
    text: str  # the panel's visible text


_READ_CHARTS = """
() => Array.from(document.querySelectorAll('[data-chart]')).map(panel => {
  const svg = panel.querySelector('svg');
  const marks = svg ? Array.from(svg.querySelectorAll('.point, .bar')) : [];
  return {
    chart: panel.dataset.chart,
    title: (panel.querySelector('h2') || {}).textContent || '',
    points: svg ? Number(svg.getAttribute('data-points')) : -1,
    series: svg ? Number(svg.getAttribute('data-series')) : 0,
    drawn: marks.length,
    legend: svg ? svg.querySelectorAll('.legend-entry').length : 0,
    values: marks.filter(m => m.hasAttribute('data-value'))
                 .map(m => Number(m.getAttribute('data-value'))),
    empty: panel.querySelector('.no-data') !== null,
    text: panel.innerText,
    width: svg ? svg.getBoundingClientRect().width : 0,
  };
})
"""


@dataclass(frozen=True)
class ReportView:
    charts: dict[str, ChartView]  # by chart id, in page order
    screenshot: dict[str, int] | None  # image_stats of the screenshot, when one was asked


def render_report(report_dir: Path, screenshot: Path | None = None) -> ReportView:
    """Open a generated observability report (`index.html` in `report_dir`, see
    `python_jobs.tools.report`) in Chromium over HTTP. Fails on any console, page or request
    error, and on a chart drawn with no size or with another number of marks than its
    data-points says; returns each chart's view, and saves a full-page screenshot (with
    its size and colour count) when asked."""
    if not (Path(report_dir) / "index.html").is_file():
        raise FileNotFoundError(f"no report at {report_dir}/index.html")
    image = None
    with serve_directory(report_dir) as base, open_page(base + "index.html") as opened:
        raw = opened.page.evaluate(_READ_CHARTS)
        if screenshot is not None:
            image = opened.image_stats(opened.screenshot(screenshot))
        errors = opened.errors()
    if errors:
        raise AssertionError(f"the report has errors in the browser: {errors}")
    if not raw:
        raise AssertionError(f"the report in {report_dir} has no chart panels")
    views = {}
    for item in raw:
        if not item["empty"] and (item["width"] <= 0 or item["drawn"] != item["points"]):
            raise AssertionError(f"chart {item['chart']} is not drawn as stated: {item}")
        views[item["chart"]] = ChartView(
            chart=item["chart"],
            title=item["title"].strip(),
            points=item["points"],
            series=item["series"],
            drawn=item["drawn"],
            legend=item["legend"],
            values=tuple(item["values"]),
            empty=item["empty"],
            text=item["text"],
        )
    return ReportView(views, image)
