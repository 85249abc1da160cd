"""Demo mode: seconds from starting the app to every page fully drawn, in headless Chromium.

Starts ``streamlit run app.py`` with ``CHUNKLAB_DEMO=1`` and an empty output cache and Chroma
folder (a cold start: only the shipped ``assets/demo/cache`` holds model outputs), then opens
each page from the sidebar, in navigation order, and waits until it is drawn: no script run,
spinner or job progress bar left, and the page's key elements present (the tables, charts and
results its model-backed content is made of). Prints the seconds per page and in all, from the
server's start.

Baseline (``--baseline``): the same model work on a cold cache without the shipped entries —
``scripts/make_demo_cache.py --out TMP``, which runs the bundled models through the same backend
calls the pages' jobs make — timed in the same run, and the ratio. It is not a browser walk:
driving a non-demo session to the same content means adding the configurations, asking the
question, marking the answer and pressing Score and Run by hand, and its time is the models'.

    .venv/bin/python bench/bench_demo.py [--baseline]

Needs Playwright and /usr/bin/chromium (as ``tests/app/test_e2e_browser.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from appserver import free_port, start_app, stop_app

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# Page (its sidebar link) → the elements that make it "fully drawn" in demo mode.
PAGES: list[tuple[str, list[str]]] = [
    ("Document", ["[data-testid=stMetric]"]),
    ("Compare", ["[data-testid=stDataFrame]", ".st-key-cmp_strip .main-svg", ".st-key-cmp_hist .main-svg",
                 "[class*='st-key-cmp_view_'] .cl-badge"]),
    ("Meta-Chunking", [".st-key-ppl_chart .main-svg", ".st-key-ppl_drops .main-svg"]),
    ("Quality", ["[data-testid=stDataFrame]", ".st-key-qual_bc_chart .main-svg"]),
    ("Retrieval", ["[data-testid=stDataFrame]:has(th:has-text('IoU'))", ".st-key-ret_view"]),
    ("Benchmark", [".st-key-bm_bars .main-svg", ".st-key-bm_heat_q .main-svg", ".st-key-bm_coverage .main-svg"]),
    ("Models", ["h1"]),
]
BUSY = "[data-testid=stStatusWidget], [data-testid=stSpinner], [data-testid=stProgress]"


def _drawn(page, selectors: list[str], timeout_ms: int) -> None:
    """Wait until every selector is visible and nothing is running (two idle checks 300 ms apart)."""
    for selector in selectors:
        page.locator(selector).first.wait_for(state="visible", timeout=timeout_ms)
    for _ in range(2):
        page.wait_for_function(f"() => !document.querySelector('{BUSY}')", timeout=timeout_ms)
        page.wait_for_timeout(300)


def walk(timeout_s: float) -> tuple[float, list[tuple[str, float]]]:
    """Start the demo app cold and walk every page: (seconds to a healthy server, [(page, seconds since start)])."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        env = dict(os.environ, CHUNKLAB_DEMO="1", CHUNKLAB_CACHE_DIR=f"{tmp}/cache", CHUNKLAB_DATA_DIR=f"{tmp}/data",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.pop("CHROMA_HOST", None)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        proc = start_app(env, port, timeout=60)
        try:
            healthy = time.perf_counter() - t0
            times = []
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1500, "height": 2400})
                page.set_default_timeout(timeout_s * 1000)
                page.goto(url)
                for link, selectors in PAGES:
                    if link != "Document":
                        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=link, exact=True).click()
                    _drawn(page, selectors, int(timeout_s * 1000))
                    times.append((link, time.perf_counter() - t0))
                browser.close()
            return healthy, times
        finally:
            stop_app(proc, timeout=10)


def baseline() -> float:
    """Seconds of the demo's model work on a cold cache (``make_demo_cache.py --out`` a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="bench-demo-base-") as tmp:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "scripts/make_demo_cache.py", "--out", tmp], cwd=ROOT, check=True,
            env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", action="store_true", help="also time the same model work without the shipped cache")
    parser.add_argument("--timeout", type=float, default=120, help="seconds allowed per page (default 120)")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing")
    healthy, times = walk(args.timeout)
    print(f"server healthy after {healthy:6.2f} s")
    previous = healthy
    for link, at in times:
        print(f"{link:<14} drawn at {at:6.2f} s  (+{at - previous:5.2f} s)")
        previous = at
    total = times[-1][1]
    print(f"{'every page':<14} drawn at {total:6.2f} s from the server's start")
    if args.baseline:
        base = baseline()
        print(f"baseline: the same model work, cold, without the shipped cache: {base:6.1f} s "
              f"({base / total:.1f}x the demo's whole walk)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
