"""End to end: a page opened by its URL on a fresh server answers the user's first click.

Streamlit starts each server process in its legacy multipage mode, so the first run of
``/models`` runs the page file without the router; widget ids then differ from the routed
runs that follow, and the first click used to be dropped. ``ensure_routed`` reruns the
session through the router once; this test keeps it that way. It needs its own server
process (the ``server`` fixture is per module), and must be its module's first request.
"""

from __future__ import annotations

import pytest

from tests.app.test_e2e_browser import browser_app, offline_page, wait_idle


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """A fresh server of this module's own (the shared one has had requests already)."""
    yield from browser_app(tmp_path_factory, "e2e_direct_url")


def test_first_click_on_a_directly_opened_page_is_not_lost(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        with offline_page(p, {"width": 1400, "height": 1600}, timeout_ms=30_000) as (page, offline):
            page.goto(f"{server}/models")
            expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
            wait_idle(page)
            page.locator(".st-key-models_clear_cache button").first.click()
            expect(page.get_by_text("cached entr").first).to_be_visible()  # "Removed N cached entries."
    offline.assert_clean()
