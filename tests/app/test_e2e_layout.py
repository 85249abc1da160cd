"""End to end at 1440×900 (issue 23): the Summary table fits, demo mode is complete, deep links and the log are clean.

A real app server and Debian's Chromium through Playwright, as in ``test_e2e_browser.py``, on a
1440×900 screen (the wide layout's main pane is then about 980 pixels):

- the Summary table's last column is in view without scrolling sideways: the data grid's
  scroller is no wider than its box, and its right edge is inside the window;
- demo mode's Summary shows no "not computed yet" and no Compute button (a demo shows everything);
- a ``/compare?…`` deep link makes no request fail, the two base-path probes
  (``/compare/_stcore/health``, ``/compare/_stcore/host-config``) included;
- the server's log carries no Streamlit widget warning ("created with a default value but also had
  its value set via the Session State API") after Compare and Benchmark are used, in plain and in
  demo mode.

Each server is this module's own (its log is read here), started like a user's:
``streamlit run app.py`` with ``.streamlit/config.toml``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.app.test_e2e_browser import CHROMIUM, in_ci, offline_page, wait_idle
from tests.support.app_server import serve_app
from tests.support.browser import ScriptRuns

SCREEN = {"width": 1440, "height": 900}
WIDGET_WARNING = "had its value set via the Session State API"
DEEP_LINK = "/compare?sample=narrative&configs=recursive:chunk_size=300;fixed_token:chunk_overlap=125"


@dataclass(frozen=True)
class Server:
    url: str
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def _serve(tmp: Path, **env: str) -> Iterator[Server]:
    """``streamlit run app.py`` on a free port with ``env`` added; its output goes to a log file read by the tests."""
    if not CHROMIUM.exists():
        if in_ci():
            pytest.fail(f"{CHROMIUM} is missing and CI is set: install Debian's 'chromium' package")
        pytest.skip(f"{CHROMIUM} is missing (install Debian's 'chromium' package)")
    log_path = tmp / "streamlit.log"
    with serve_app(log_path, env) as url:
        yield Server(url, log_path)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with _serve(tmp_path_factory.mktemp("e2e-layout")) as server:
        yield server


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with _serve(tmp_path_factory.mktemp("e2e-layout-demo"), CHUNKLAB_DEMO="1") as server:
        yield server


def _settle(page, runs: ScriptRuns, action) -> None:
    """Do ``action`` (a click), wait until the script run it started has finished, then until the page is idle."""
    runs.after(page, action)
    wait_idle(page)


def _go(page, runs: ScriptRuns, name: str) -> None:
    """Open a page from the sidebar's navigation, as a user does (the session is kept)."""
    _settle(page, runs, page.get_by_role("link", name=name, exact=True).first.click)


# The Summary's table: in a container keyed sum_table if there is one, else the page's first data grid
# (st.dataframe: its scroller) or HTML table (its wrapper), whichever the page draws.
_TABLE = """(() => {
    const main = document.querySelector('[data-testid=stMain]') || document;
    const box = main.querySelector('.st-key-sum_table') || main.querySelector('[data-testid=stDataFrame]')
        || main.querySelector('table')?.parentElement;
    return box;
})()"""
_TABLE_FIT = """() => {
    const box = """ + _TABLE + """;
    if (!box) return null;
    const scroller = box.querySelector('.dvn-scroller') || box.querySelector('table')?.parentElement || box;
    const rect = scroller.getBoundingClientRect();
    return {scrollWidth: scroller.scrollWidth, clientWidth: scroller.clientWidth,
            right: rect.right, viewport: window.innerWidth};
}"""
# True once _TABLE_FIT has read the same numbers for 10 animation frames in a row (the grid has laid itself out).
_TABLE_STILL = """() => {
    const fit = JSON.stringify((""" + _TABLE_FIT + """)());
    const w = window.__fitSeen = window.__fitSeen || {last: null, frames: 0};
    w.frames = fit === w.last ? w.frames + 1 : 0;
    w.last = fit;
    return w.frames >= 10;
}"""


def test_deep_link_to_compare_makes_no_404(plain: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p, offline_page(p, SCREEN, timeout_ms=60_000) as (page, offline):
        page.goto(plain.url + DEEP_LINK)
        expect(page.get_by_role("heading", name="Compare chunkers", exact=True)).to_be_visible()
        wait_idle(page)
        expect(page.get_by_text("2 configuration(s)").first).to_be_visible()  # the link's configurations
    probes = [u for u in offline.local if "/compare/_stcore/" in u]
    assert probes == [], f"the browser probed the page's path as the base path: {probes}"
    assert offline.http_errors == [], f"requests failed: {offline.http_errors}"
    assert [m for m in offline.console_errors if "404" in m] == []
    offline.assert_clean()


def test_compare_and_benchmark_log_no_widget_warning(plain: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p, offline_page(p, SCREEN, timeout_ms=60_000) as (page, offline):
        runs = ScriptRuns.attach(page)
        page.goto(plain.url + "/compare")
        expect(page.get_by_role("heading", name="Compare chunkers", exact=True)).to_be_visible()
        runs.wait_beyond(page, 0)
        wait_idle(page)
        strip = page.locator(".st-key-cmp_show_strip label").first
        # off, then on: the setting's key written by the widget, never beside a default
        _settle(page, runs, strip.click)
        _settle(page, runs, strip.click)
        _go(page, runs, "Benchmark")
        expect(page.get_by_role("heading", name="Benchmark", exact=True)).to_be_visible()
        # By name: the first button in the segmented control's box is its help icon, and "Session set" is chosen.
        sources = page.locator(".st-key-bm_source")
        _settle(page, runs, sources.locator("button", has_text="Bundled sample set").click)
        _settle(page, runs, sources.locator("button", has_text="Session set").click)
        _go(page, runs, "Compare")
        _go(page, runs, "Benchmark")
    assert WIDGET_WARNING not in plain.log_text()
    offline.assert_clean()


def test_summary_table_last_column_in_view_without_scrolling(plain: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p, offline_page(p, SCREEN, timeout_ms=60_000) as (page, offline):
        page.goto(plain.url + "/summary")
        expect(page.get_by_role("heading", name="Summary", exact=True)).to_be_visible()
        wait_idle(page)
        page.wait_for_function("() => !!" + _TABLE)
        page.evaluate("() => " + _TABLE + ".scrollIntoView()")
        page.wait_for_function(_TABLE_STILL, polling="raf")
        wait_idle(page)
        fit = page.evaluate(_TABLE_FIT)
    assert fit is not None, "the Summary table was not found"
    assert fit["scrollWidth"] <= fit["clientWidth"] + 1, f"the table scrolls sideways at 1440×900: {fit}"
    assert fit["right"] <= fit["viewport"], f"the table's right edge is outside the window: {fit}"
    offline.assert_clean()


def test_demo_summary_is_complete_and_logs_no_widget_warning(demo: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p, offline_page(p, SCREEN, timeout_ms=90_000) as (page, offline):
        runs = ScriptRuns.attach(page)
        page.goto(demo.url + "/summary")
        expect(page.get_by_role("heading", name="Summary", exact=True)).to_be_visible()
        page.wait_for_function("() => !!" + _TABLE)
        runs.wait_beyond(page, 0, timeout=90)  # the page's first run is over: the Summary is drawn whole
        wait_idle(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        compute = page.get_by_role("button", name="Compute").count()
        _go(page, runs, "Compare")
        _go(page, runs, "Benchmark")
        _go(page, runs, "Compare")
    assert "not computed yet" not in body.lower(), "demo mode's Summary still waits for something"
    assert compute == 0, "demo mode's Summary offers a Compute button"
    assert WIDGET_WARNING not in demo.log_text()
    offline.assert_clean()
