"""The one-file report in a real browser: opened from disk in headless Chromium with every network request cut off.

The report is written by :func:`backend.report.html.report_html` with every kind of figure
(boundary strip, agreement, size histograms, perplexity values and a curve, BC, CS against K,
stickiness graphs, benchmark bars and heat maps), from the same stand-in data as the HTML
tests, so no model runs. Every request that leaves the page is aborted and recorded
(:class:`~tests.app.test_e2e_browser.Offline`): none may be attempted and the console may show
no error, and every figure must be drawn by the inlined plotly.js. Skipped only where Chromium
is missing outside CI, like the app's browser tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_e2e_browser import CHROMIUM, in_ci, offline_page
from tests.backend.report.test_report_html import (  # noqa: F401  (fixtures)
    CREATED,
    PAYLOAD,
    benchmark,
    chunkings,
    configs,
    curves,
    doc,
    ppl,
    quality,
    summary,
)
from backend.report.html import report_html


@pytest.fixture()
def report_file(tmp_path: Path, summary, doc, chunkings, quality, benchmark, ppl, curves) -> Path:  # noqa: F811
    path = tmp_path / "report.html"
    page = report_html(summary, doc, chunkings, benchmark=benchmark, quality=quality, ppl=ppl, curves=curves,
                       created=CREATED)
    path.write_text(page, encoding="utf-8")
    return path


def test_report_opens_offline_and_draws_every_figure(report_file: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        if in_ci():
            pytest.fail(f"{CHROMIUM} is missing and CI is set: install Debian's 'chromium' package")
        pytest.skip(f"{CHROMIUM} is missing (install Debian's 'chromium' package)")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        with offline_page(p, {"width": 1280, "height": 1600}, timeout_ms=30_000) as (page, offline):
            # The page's own route comes before the context's (which would abort file:// too):
            # the report's own file is served, anything else is recorded as external and aborted.
            own = report_file.as_uri()
            page.route("**/*", lambda r: r.continue_() if r.request.url == own else (
                offline.external.append(r.request.url), r.abort("internetdisconnected")))
            page.context.set_offline(True)
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(own)
            figures = page.locator("div[id^=figure-]")
            count = figures.count()
            assert count >= 10
            # Each figure div becomes a Plotly graph with its SVG layers once plotly.js has run.
            expect(page.locator("div[id^=figure-].js-plotly-plot")).to_have_count(count)
            drawn = page.evaluate(
                "() => [...document.querySelectorAll('div[id^=figure-]')]"
                ".filter(d => d.querySelector('.main-svg') && d.querySelector('.plot-container')).length"
            )
            assert drawn == count
            expect(page.locator("section#verdict li").first).to_be_visible()
            expect(page.locator("h1")).to_contain_text(PAYLOAD)  # the document's name, as text
            assert dialogs == []  # the document's <script>alert(1)</script> stayed text
            page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
    assert offline.external == [], f"the report tried to reach: {sorted(set(offline.external))}"
    assert offline.console_errors == [], offline.console_errors
    assert offline.failed == [], offline.failed
