"""The browser harness (tests/browser.py) on real pages in Debian's headless Chromium:
a plotly chart drawn from the plotly.js bundled in the plotly package renders with no
console errors, and a broken page's errors and failed requests are all reported, so the
harness's checks can fail. Screenshots go to test-artifacts/ at the repo root."""

from __future__ import annotations

import importlib.resources
import json
import time
from pathlib import Path

import pytest

from . import browser
from .browser import ARTIFACTS, BrowserTimeout, BrowserUnavailable, open_page

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# What the report's test will ask too: how many plotly charts drew their SVG.
COUNT_CHARTS = "document.querySelectorAll('.js-plotly-plot .main-svg').length"


def plotly_js() -> str:
    """The plotly.js the report inlines: the one bundled in the plotly package."""
    path = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"
    return path.read_text(encoding="utf-8")


def chart_page(tmp_path: Path) -> Path:
    trace = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": "commits/s",
        "x": [1, 2, 4, 8, 16],
        "y": [900, 1700, 2900, 3100, 3150],
    }
    layout = {"title": {"text": "harness check"}, "width": 700, "height": 400}
    page = tmp_path / "chart.html"
    page.write_text(
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>chart</title>\n"
        f"<script>{plotly_js()}</script></head>\n"
        "<body><div id='chart'></div>\n<script>\n"
        f"Plotly.newPlot('chart', [{json.dumps(trace)}], {json.dumps(layout)},"
        " {staticPlot: false, displaylogo: false});\n"
        "</script></body></html>\n",
        encoding="utf-8",
    )
    return page


def assert_cleaned_up(report: browser.PageReport) -> None:
    assert report.temp_dir is not None
    assert not report.temp_dir.exists(), "the browser's temporary dir was left behind"
    assert browser.browser_pids(report.temp_dir) == []


def assert_png(path: Path | None, min_bytes: int) -> None:
    assert path is not None and path.is_file()
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes, f"{path} is only {len(data)} bytes"


def test_plotly_chart_renders_without_errors(tmp_path: Path) -> None:
    shot = ARTIFACTS / "harness-plotly-chart.png"
    shot.unlink(missing_ok=True)
    report = open_page(
        chart_page(tmp_path),
        shot,
        wait_for="document.querySelector('.js-plotly-plot .scatterlayer .trace')",
        evaluate="""({
            charts: document.querySelectorAll('.js-plotly-plot .main-svg').length,
            traces: document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length,
            line: document.querySelector('.scatterlayer .trace path.js-line')
                ?.getAttribute('d') ?? '',
            points: document.querySelectorAll('.scatterlayer .trace .points path').length,
            plotlyVersion: Plotly.version,
            userAgent: navigator.userAgent,
        })""",
    )
    assert report.problems == []
    assert report.title == "chart"
    value = report.value
    assert value["charts"] >= 1  # plotly draws its main SVG plus an overlay one
    assert value["traces"] == 1
    assert value["line"].startswith("M") and value["line"].count("L") == 4
    assert value["points"] == 5
    assert value["plotlyVersion"] in plotly_js()[:200]
    assert "HeadlessChrome" in value["userAgent"]
    assert_png(report.screenshot, min_bytes=10_000)
    assert report.screenshot == shot.resolve()
    assert_cleaned_up(report)


def test_count_charts_expression(tmp_path: Path) -> None:
    report = open_page(chart_page(tmp_path), None, evaluate=COUNT_CHARTS)
    assert report.value >= 1
    assert report.screenshot is None
    assert report.problems == []


def test_errors_and_failed_requests_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>broken</title>\n"
        # a page that is not self-contained: both requests must fail
        "<script src='https://cdn.example.invalid/plotly.min.js'></script>\n"
        "</head><body><p>broken on purpose</p><img src='missing.png' alt='gone'>\n"
        "<script>\n"
        "console.error('report error: no rows');\n"
        "console.warn('report warning: one cell skipped');\n"
        "console.log('not collected');\n"
        "throw new Error('boom');\n"
        "</script></body></html>\n",
        encoding="utf-8",
    )
    shot = ARTIFACTS / "harness-broken-page.png"
    shot.unlink(missing_ok=True)
    report = open_page(page, shot, evaluate="document.querySelectorAll('p').length")

    assert report.page_errors == ["Error: boom"]
    errors = [c.text for c in report.console_errors]
    assert "report error: no rows" in errors
    assert [c.text for c in report.console_warnings] == ["report warning: one cell skipped"]
    assert all("not collected" not in c.text for c in report.console)
    where = next(c.location for c in report.console_errors if c.text == "report error: no rows")
    assert where.startswith(page.as_uri())

    failed = {r.url: r.failure for r in report.failed_requests}
    assert failed.get("https://cdn.example.invalid/plotly.min.js", "").startswith(
        "net::ERR_BLOCKED_BY_CLIENT"
    )
    assert failed.get((tmp_path / "missing.png").as_uri()) == "net::ERR_FILE_NOT_FOUND"

    problems = report.problems
    assert any("boom" in p for p in problems)
    assert any("no rows" in p for p in problems)
    assert any("cdn.example.invalid" in p for p in problems)
    # the page still rendered and was evaluated after its error
    assert report.value == 1
    assert_png(report.screenshot, min_bytes=1_000)
    assert_cleaned_up(report)


def test_missing_chromium_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "p.html"
    page.write_text("<p>x</p>", encoding="utf-8")
    monkeypatch.setattr(browser, "CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(BrowserUnavailable, match=r"missing.*\./run setup.*apt-get install"):
        open_page(page, None)


# A visit's whole limit in the two tests of a step that never ends: the browser's start
# and the steps before the one that hangs must fit in it on a loaded machine (in a suite
# beside other tests, the start and a one-line page's load took 2.7 s of a 3 s limit,
# and the limit struck while waiting for network idle rather than in the evaluation).
HANG_LIMIT = 10.0


def test_a_page_that_never_loads_times_out(tmp_path: Path) -> None:
    page = tmp_path / "hang.html"
    page.write_text("<script>while (true) {}</script><p>never</p>", encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(BrowserTimeout, match="load event"):
        open_page(page, None, timeout=HANG_LIMIT)
    assert time.monotonic() - started < HANG_LIMIT + browser.WATCHDOG_GRACE + 10.0


def test_an_expression_that_never_returns_is_killed(tmp_path: Path) -> None:
    page = tmp_path / "ok.html"
    page.write_text("<p>fine</p>", encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(BrowserTimeout, match="evaluating"):
        open_page(page, None, evaluate="(() => { while (true) {} })()", timeout=HANG_LIMIT)
    assert time.monotonic() - started < HANG_LIMIT + browser.WATCHDOG_GRACE + 10.0
