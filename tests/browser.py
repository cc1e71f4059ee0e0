"""Open a local HTML file in a real browser and report what a reader would have met.

A helper for tests, not a test file. `open_page` loads the file in Debian's Chromium
(/usr/bin/chromium, installed by `./run setup` as root), headless, through Playwright's
sync API; Playwright's own browser downloads are never used. It collects console errors
and warnings, uncaught page errors and failed requests, waits for the load event and
for network idle, evaluates a caller-given JavaScript expression, and takes a full-page
screenshot. The browser always runs with a fresh profile dir (--user-data-dir) in a
temporary dir that also holds its XDG config and cache dirs (Chromium's crash handler
writes under the default config dir whatever the profile); the dir is removed after.

A self-contained page needs nothing but its own file: every request that is not
file:, data:, blob: or about: is aborted (so it shows as a failed request), whatever
network the machine has. Every wait is bounded: Playwright's own timeouts come from
one deadline, and a watchdog kills this visit's browser processes if a step outlives
the deadline anyway (a page script that never returns blocks `evaluate` otherwise).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Request, Route
    from playwright.sync_api import Error as PlaywrightError

CHROMIUM = Path("/usr/bin/chromium")

# Headless, root-safe, and quiet on the network: without the background-networking
# flags Chromium's own connections (updates, sync, field trials) are refused by a
# closed network and show up as noise or delays.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
)

# The watchdog fires this long after the deadline: Playwright's own timeouts, with
# clearer messages, come first.
WATCHDOG_GRACE = 3.0

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

FIX = "fix: ./run setup as root, or apt-get install --no-install-recommends chromium"


class BrowserUnavailable(RuntimeError):
    """Chromium or Playwright is missing, or Chromium would not start."""


class BrowserTimeout(RuntimeError):
    """The page did not finish within the time allowed; the browser was killed."""


@dataclass(frozen=True)
class ConsoleEntry:
    type: str  # "error" or "warning"
    text: str
    location: str  # url:line:column, or "" when the browser gives none


@dataclass(frozen=True)
class FailedRequest:
    url: str
    failure: str  # Chromium's net error, e.g. net::ERR_FILE_NOT_FOUND


@dataclass
class PageReport:
    url: str
    title: str = ""
    console: list[ConsoleEntry] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[FailedRequest] = field(default_factory=list)
    crashed: bool = False
    value: Any = None  # what the caller's expression evaluated to (JSON-like)
    screenshot: Path | None = None
    seconds: float = 0.0
    temp_dir: Path | None = None  # the browser's profile and config, removed after

    @property
    def console_errors(self) -> list[ConsoleEntry]:
        return [c for c in self.console if c.type == "error"]

    @property
    def console_warnings(self) -> list[ConsoleEntry]:
        return [c for c in self.console if c.type == "warning"]

    @property
    def problems(self) -> list[str]:
        """Everything a self-contained, correct page must not produce, one line each."""
        out = [f"console {c.type}: {c.text} ({c.location})" for c in self.console]
        out += [f"uncaught error: {e}" for e in self.page_errors]
        out += [f"failed request: {r.url} ({r.failure})" for r in self.failed_requests]
        if self.crashed:
            out.append("the page crashed")
        return out


def open_page(
    html_path: Path,
    screenshot: Path | None = None,
    *,
    evaluate: str | None = None,
    wait_for: str | None = None,
    timeout: float = 60.0,
    network_idle_timeout: float = 15.0,
    viewport: tuple[int, int] = (1280, 900),
) -> PageReport:
    """Load `html_path` in headless Chromium and report on it.

    `wait_for`: a JavaScript expression waited for (polled) until truthy, after network
    idle, e.g. "document.querySelector('.js-plotly-plot .main-svg')".
    `evaluate`: a JavaScript expression whose JSON-like value goes to `PageReport.value`,
    e.g. "document.querySelectorAll('.js-plotly-plot .main-svg').length".
    `screenshot`: where to write a full-page PNG (parent dirs are made).
    `timeout`: seconds for the whole visit, browser start and close included.

    Raises BrowserUnavailable (with the fix) when Chromium or Playwright is missing,
    BrowserTimeout when the deadline passes, FileNotFoundError for a missing page.
    Console messages, page errors and failed requests are reported, not raised.
    """
    html_path = Path(html_path).resolve()
    if not html_path.is_file():
        raise FileNotFoundError(f"no HTML file to open: {html_path}")
    check_chromium()
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise BrowserUnavailable(
            f"Playwright is not installed in this Python ({exc}); fix: ./run setup"
        ) from exc

    started = time.monotonic()
    deadline = started + timeout
    temp_dir = Path(tempfile.mkdtemp(prefix="syncrep-chromium-"))
    profile = temp_dir / "profile"
    profile.mkdir()
    env: dict[str, str | float | bool] = {
        **os.environ,
        "XDG_CONFIG_HOME": str(temp_dir / "config"),
        "XDG_CACHE_HOME": str(temp_dir / "cache"),
    }
    report = PageReport(url=html_path.as_uri(), temp_dir=temp_dir)
    watchdog = _Watchdog(temp_dir, seconds=timeout + WATCHDOG_GRACE)

    def ms_left() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrowserTimeout(f"{html_path}: {step} passed the {timeout:g} s limit")
        return left * 1000.0

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type in ("error", "warning"):
            loc = msg.location
            where = f"{loc['url']}:{loc['lineNumber']}:{loc['columnNumber']}" if loc else ""
            report.console.append(ConsoleEntry(msg.type, msg.text, where))

    def on_page_error(err: PlaywrightError) -> None:
        report.page_errors.append(f"{err.name or 'Error'}: {err.message}")

    def on_request_failed(req: Request) -> None:
        report.failed_requests.append(FailedRequest(req.url, req.failure or "unknown"))

    def on_crash(_page: object) -> None:
        report.crashed = True

    def block(route: Route) -> None:
        route.abort("blockedbyclient")

    def not_local(url: str) -> bool:
        return not url.startswith(LOCAL_SCHEMES)

    step = "starting Chromium"
    watchdog.start()
    try:
        with sync_playwright() as pw:
            try:
                context = pw.chromium.launch_persistent_context(
                    str(profile),
                    executable_path=str(CHROMIUM),
                    headless=True,
                    args=list(CHROMIUM_ARGS),
                    env=env,
                    viewport={"width": viewport[0], "height": viewport[1]},
                    timeout=min(ms_left(), 30_000.0),
                )
            except PlaywrightError as exc:
                if watchdog.fired or isinstance(exc, PlaywrightTimeoutError):
                    msg = f"{CHROMIUM} did not start in time: {exc.message}"
                    raise BrowserTimeout(msg) from exc
                raise BrowserUnavailable(
                    f"{CHROMIUM} would not start: {exc.message}\n({FIX})"
                ) from exc
            try:
                context.set_default_timeout(ms_left())
                context.route(not_local, block)
                page = context.pages[0] if context.pages else context.new_page()
                page.on("console", on_console)
                page.on("pageerror", on_page_error)
                page.on("requestfailed", on_request_failed)
                page.on("crash", on_crash)
                step = "waiting for the load event"
                page.goto(report.url, wait_until="load", timeout=ms_left())
                step = "waiting for network idle"
                page.wait_for_load_state(
                    "networkidle", timeout=min(ms_left(), network_idle_timeout * 1000.0)
                )
                if wait_for is not None:
                    step = f"waiting for {wait_for!r}"
                    page.wait_for_function(wait_for, timeout=ms_left())
                if evaluate is not None:
                    step = f"evaluating {evaluate!r}"
                    ms_left()  # evaluate has no timeout of its own: the watchdog bounds it
                    report.value = page.evaluate(evaluate)
                report.title = page.title()
                step = "taking the screenshot"
                if screenshot is not None:
                    screenshot = Path(screenshot).resolve()
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=screenshot, full_page=True, timeout=ms_left())
                    report.screenshot = screenshot
            except PlaywrightError as exc:
                if watchdog.fired or isinstance(exc, PlaywrightTimeoutError):
                    raise BrowserTimeout(
                        f"{html_path}: {step} took too long (limit {timeout:g} s for the"
                        f" whole visit); the browser was closed: {exc.message}"
                    ) from exc
                raise
            finally:
                # Already gone when killed by the watchdog or crashed: nothing to close.
                with contextlib.suppress(PlaywrightError):
                    context.close()
    finally:
        watchdog.stop()
        _kill_processes_using(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        report.seconds = time.monotonic() - started
    return report


def check_chromium() -> None:
    """Raise BrowserUnavailable, naming the fix, unless Debian's Chromium is installed."""
    if not CHROMIUM.exists():
        raise BrowserUnavailable(f"{CHROMIUM} is missing, so no browser tests ({FIX})")
    if not os.access(CHROMIUM, os.X_OK):
        raise BrowserUnavailable(f"{CHROMIUM} is not executable ({FIX})")


class _Watchdog:
    """Kills this visit's browser processes if the visit outlives `seconds`."""

    def __init__(self, temp_dir: Path, seconds: float) -> None:
        self._temp_dir = temp_dir
        self._seconds = seconds
        self._done = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="browser-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        if not self._done.wait(self._seconds):
            self.fired = True
            _kill_processes_using(self._temp_dir)


def browser_pids(temp_dir: Path) -> list[int]:
    """Processes with this visit's (unique, random) temporary dir in their command line:
    its browser, the browser's children and its crash handlers, and nothing else."""
    needle = f"{temp_dir}/".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(needle in arg for arg in args):
            pids.append(int(entry.name))
    return pids


def _kill_processes_using(temp_dir: Path, wait: float = 3.0) -> None:
    for pid in browser_pids(temp_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + wait
    while browser_pids(temp_dir) and time.monotonic() < end:
        time.sleep(0.05)


# --- a report page, as a reader sees it ---------------------------------------------

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# What the page looks like to a reader once its scripts ran: every chart slot, how
# many of them plotly drew (an SVG with at least one trace in it), the section
# titles, and the flame graphs that decoded as images.
PAGE_STATE = """(() => {
  const slots = [...document.querySelectorAll('div.chart[data-chart]')];
  const drawn = slots.filter(d => d.classList.contains('js-plotly-plot')
      && d.querySelector('.main-svg')
      && d.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length > 0);
  return {
    slots: slots.map(d => d.dataset.chart),
    drawn: drawn.map(d => d.dataset.chart),
    specified: Object.keys(JSON.parse(document.getElementById('chart-data').textContent)),
    sections: [...document.querySelectorAll('main section h2')].map(h => h.textContent.trim()),
    flames: [...document.querySelectorAll('.flame img')].map(i => i.naturalWidth),
    text: document.body.innerText,
  };
})()"""

SECTIONS = ("1. Verdict", "2. Setup", "3. Throughput and latency", "4. Timeline",
            "5. Cost per commit", "6. Axes", "7. The seed", "8. Method")


def check_report_page(page_path: Path, name: str) -> dict[str, Any]:
    """A report opened in chromium: no error, every chart drawn, every section there,
    a screenshot kept in test-artifacts/; what the page showed (``PAGE_STATE``)."""
    page = open_page(page_path, ARTIFACTS / f"report-{name}.png", evaluate=PAGE_STATE,
                     wait_for="document.querySelectorAll('div.chart.js-plotly-plot').length > 0"
                              " || document.querySelectorAll('div.chart').length === 0",
                     timeout=90)
    assert page.problems == [], page.problems
    state: dict[str, Any] = page.value
    assert state["slots"], "the page has no chart at all"
    assert sorted(state["drawn"]) == sorted(state["slots"]), "some charts did not render"
    assert sorted(state["slots"]) == sorted(state["specified"])
    for title in SECTIONS:
        assert any(s.startswith(title) for s in state["sections"]), title
    assert page.screenshot is not None and page.screenshot.stat().st_size > 20_000
    return state
