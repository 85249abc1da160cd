"""End to end: θ set on the Meta-Chunking page is still there after a visit to another page, in a real browser.

The bug this keeps fixed was seen in Chromium: θ went back to 0.5 each time the user left the
Meta-Chunking page (1.32 and 164 chunks became 0.5 and 231), because the θ input's value was
dropped with the widget. θ is now the session's setting ``ppl.threshold``. The test uploads a
short text (the bundled SmolLM2 scores it in a few seconds), sets θ, opens Compare, comes back,
and reads the same θ and the same chunk count. Its server is the test process's shared one
(``test_e2e_browser.server``): where test_e2e_browser.py ran before it, the bundled SmolLM2 is loaded already.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.app.test_e2e_browser import SHORT, offline_page, server, wait_idle  # noqa: F401  (fixture)

_CHUNKS = re.compile(r"([\d,]+) chunks? · mean")


def _nav(page, link: str) -> None:
    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=link, exact=True).click()


def _chunks(page) -> int:
    line = page.locator("[data-testid=stMarkdown]").filter(has_text="re-chunked in").first.inner_text()
    return int(_CHUNKS.search(line).group(1).replace(",", ""))


def test_theta_survives_leaving_the_meta_chunking_page(server: str, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    upload = tmp_path / "keeper.txt"
    upload.write_text(SHORT, encoding="utf-8")
    with sync_playwright() as p:
        with offline_page(p, {"width": 1500, "height": 2400}, timeout_ms=30_000) as (page, offline):
            page.goto(server)
            expect(page.get_by_role("heading", name="Document", exact=True)).to_be_visible()
            page.locator(".st-key-docpage_upload_0 input[type=file]").set_input_files(str(upload))
            expect(page.locator("[data-testid=stSidebar]")).to_contain_text("keeper.txt")
            wait_idle(page)

            _nav(page, "Meta-Chunking")
            theta = page.locator(".st-key-ppl_threshold input")
            expect(theta).to_be_visible(timeout=300_000)  # the model loads and scores the text first
            wait_idle(page)
            assert float(theta.input_value()) == 0.5  # the ppl chunker's default
            theta.fill("0")
            theta.press("Enter")
            wait_idle(page)
            value, chunks = theta.input_value(), _chunks(page)
            assert float(value) == 0.0

            _nav(page, "Compare")
            expect(page.get_by_role("heading", name="Compare chunkers")).to_be_visible()
            wait_idle(page)
            _nav(page, "Meta-Chunking")
            expect(page.get_by_role("heading", name="Meta-Chunking", exact=True)).to_be_visible()
            wait_idle(page)
            expect(theta).to_have_value(value)
            assert _chunks(page) == chunks
    offline.assert_clean()
