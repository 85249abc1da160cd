"""End to end: a tuning run on an uploaded PDF in headless Chromium, its Pareto front filling, "Use this" → Compare.

Uploads the bundled technical PDF under another name (so it is an upload, not the sample), opens the Tune
page, keeps two model-free families (recursive, fixed_token), generated model-free questions, a budget far
longer than the test (so the run is still going whenever the page polls, however loaded the machine), an
output folder of the test's own, and presses Start. While the job runs, the live Pareto front gets its points
(read from the run's ``trials.jsonl``); then Cancel ends the search between trials, the held-out scoring still
runs, the pick's line shows with the cancellation said, and "Use this" adds the pick to Compare's
configurations and opens Compare, where its card shows its family and parameters. The server,
browser and offline setup are those of test_e2e_browser.py (its server is the test process's shared one).
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from backend.samples import get_sample
from tests.app.test_e2e_browser import offline_page, server, wait_idle  # noqa: F401  (fixture)

FAMILIES = ("recursive", "fixed_token")
BUDGET = "10m"  # never spent: the test cancels once the front has points (a trial cap could end before a poll)
# Whichever comes first once Start is pressed: the live front's points, the run's end, or an error shown.
_LIVE_OR_END = """() => document.querySelectorAll('.st-key-tune_live_pareto .scatterlayer .points path').length >= 2
    || document.querySelector('[data-testid=stAlertContentError], [data-testid=stException]') !== null
    || [...document.querySelectorAll('button')].some(b => b.innerText.includes('Use this'))"""
_PICK = re.compile(r"Pick: (\w+)\(([^)]*)\) ·")


def _pareto_points(page) -> int:
    """Markers drawn in the live Pareto front (every trace's points, the baseline's ring included)."""
    return page.locator(".st-key-tune_live_pareto .scatterlayer .points path").count()


def test_a_tuning_run_fills_its_pareto_front_and_use_this_adds_the_pick_to_compare(
    server: str, tmp_path: Path  # noqa: F811
) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect, sync_playwright

    upload = tmp_path / "kestrel_manual.pdf"
    shutil.copy(get_sample("technical-pdf").path, upload)
    out = tmp_path / "tune-run"
    with sync_playwright() as p:
        with offline_page(p, {"width": 1500, "height": 2400}, timeout_ms=30_000) as (page, offline):
            page.goto(server)
            expect(page.get_by_role("heading", name="Document", exact=True)).to_be_visible()
            page.locator(".st-key-docpage_upload_0 input[type=file]").set_input_files(str(upload))
            expect(page.locator("[data-testid=stSidebar]")).to_contain_text(upload.name)
            wait_idle(page)
            page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Tune", exact=True).click()
            expect(page.get_by_role("heading", name="Tune", exact=True)).to_be_visible()
            expect(page.get_by_text(f"Document: {upload.name}")).to_be_visible()
            wait_idle(page)

            # Families: every default but the two model-free ones removed (each tag has its "Remove NAME" button).
            tags = page.locator(".st-key-tune_families [data-tag]")
            expect(tags.first).to_be_attached()
            for name in [n for n in tags.evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
                         if n not in FAMILIES]:
                page.locator(f'.st-key-tune_families button[aria-label="Remove {name}"]').click()
                wait_idle(page)
            expect(tags).to_have_count(len(FAMILIES))
            wait_idle(page)
            budget = page.locator(".st-key-tune_budget input")
            budget.fill(BUDGET)
            budget.press("Enter")
            wait_idle(page)
            path = page.locator(".st-key-tune_out input")
            path.fill(str(out))
            path.press("Enter")
            wait_idle(page)

            t0 = time.perf_counter()
            page.locator(".st-key-tune_start button").click()
            # The live front fills as trials end (each a marker; the baseline, trial 0, also gets its ring).
            page.wait_for_function(_LIVE_OR_END, timeout=180_000)
            seen = _pareto_points(page)
            errors = page.locator("[data-testid=stAlertContentError], [data-testid=stException]")
            assert errors.count() == 0, f"the run failed: {errors.first.inner_text()}"
            assert seen >= 2, f"the run ended before the page showed its live front: {page.inner_text('main')[:800]}"
            first_points = time.perf_counter() - t0
            # Cancel, unless the search already converged and ended (a warm embedding cache makes trials quick).
            try:
                page.locator(".st-key-tune_cancel button").click(timeout=5_000)
                cancelled = True
            except PlaywrightTimeout:
                cancelled = False
            expect(page.get_by_role("button", name="Use this").first).to_be_visible(timeout=120_000)
            done = time.perf_counter() - t0
            print(f"first points of the Pareto front after {first_points:.1f} s ({seen} markers); "
                  f"the answer {'after Cancel ' if cancelled else ''}at {done:.1f} s")
            assert (out / "result.json").is_file() and (out / "trials.jsonl").is_file()
            wait_idle(page)
            line = page.get_by_text(re.compile(r"^Pick: ")).first.inner_text()
            match = _PICK.search(line)
            assert match is not None, line
            family, params = match.group(1), [p.strip() for p in match.group(2).split(",") if p.strip()]
            assert family in FAMILIES and "held-out IoU" in line
            if cancelled:
                expect(page.get_by_text("cancelled: the search stopped before its budget").first).to_be_visible()
            expect(page.locator(".st-key-tune_done_pareto .scatterlayer .points path").first).to_be_attached()
            shot = tmp_path / "tune.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")

            page.get_by_role("button", name="Use this").first.click()
            expect(page.get_by_role("heading", name="Compare chunkers")).to_be_visible()
            card = page.locator(".st-key-cmp_card_2")  # after the two default configurations
            expect(card).to_contain_text(family)
            for param in params:
                name, value = param.split("=")
                expect(card).to_contain_text(f"{name} = {value}")
            wait_idle(page)
    offline.assert_clean()
