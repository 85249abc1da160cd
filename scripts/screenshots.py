"""Screenshots of the real app for the README and the docs: Compare, Meta-Chunking, Summary and Tune.

Starts ``streamlit run app.py`` in demo mode (``CHUNKLAB_DEMO=1``: the bundled narrative sample with the
demo configurations, every model output read from the shipped ``assets/demo/cache``, so no model runs and
the pictures are the same on any machine) with a fresh data folder and output cache, opens each page in
headless Chromium (Debian's ``/usr/bin/chromium`` through Playwright, as the browser tests do), waits until
the page is drawn — no script run, spinner or progress bar left and the page's charts present — and writes
one PNG per page:

- ``compare.png``: the statistics table, the boundary strip and the side-by-side text with its chunk badges;
- ``meta-chunking.png``: the per-sentence perplexity curve with θ and the boundaries, and the document view;
- ``summary.png``: the verdict and the two tables of numbers;
- ``tune.png``: the answer of a short real tuning run on the demo document (the model-free families
  ``recursive`` and ``fixed_token``, 60 generated model-free questions, a 60 s budget capped at 40 trials):
  the verdict, the pick with its held-out interval, the comparisons and the Pareto front.

    .venv/bin/python scripts/screenshots.py [--out docs/assets/screenshots] [--timeout 180] [--only Tune ...]

The server is the benchmarks' (``bench/appserver.py``); the waits are ``bench/bench_demo.py``'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from appserver import free_port, start_app, stop_app  # noqa: E402  (bench/ is not a package)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUT = ROOT / "docs" / "assets" / "screenshots"
VIEWPORT = {"width": 1680, "height": 3200}  # tall: every part a picture needs is laid out at once
BUSY = "[data-testid=stStatusWidget], [data-testid=stSpinner], [data-testid=stProgress]"


@dataclass(frozen=True)
class Shot:
    """One page's picture: its sidebar link, the elements that make it drawn, the file, and the part of the main pane.

    The picture is the main pane's width, from ``top`` (a selector; its element's top edge, less ``margin``
    pixels) down ``height`` pixels, or, when ``bottom`` (a selector) is given, down to its element's bottom
    edge plus ``margin``.
    """

    link: str
    drawn: tuple[str, ...]
    file: str
    top: str
    height: int
    margin: int = 24
    bottom: str | None = None


SHOTS = (
    Shot("Compare", ("[data-testid=stDataFrame]", ".st-key-cmp_strip .main-svg", "[class*='st-key-cmp_view_'] .cl-badge"),
         "compare.png", top=":is(h2, h3):has-text('Chunk boundaries')", height=1240, margin=8),
    Shot("Meta-Chunking", (".st-key-ppl_chart .main-svg",), "meta-chunking.png", top="h1", height=770),
    Shot("Summary", ("[data-testid=stDataFrame]:has(th:has-text('IoU'))",), "summary.png", top="h1", height=1180),
    Shot("Tune", (".st-key-tune_done_pareto .main-svg", ".st-key-tune_done_pareto .scatterlayer .points path"),
         "tune.png", top="h3:has-text('Result')", height=0, margin=8, bottom=".st-key-tune_done_pareto"),
)
TUNE_FAMILIES = ("recursive", "fixed_token")  # model-free: the run needs no model but the bundled embedder
TUNE_BUDGET = "60s"
TUNE_QUESTIONS = 60  # generated on the document: 20 held out, so the intervals are not the narrowest "small" ones
TUNE_TRIALS = 40


def _drawn(page, selectors: tuple[str, ...], timeout_ms: int) -> None:
    """Wait until every selector is visible and nothing runs (two idle checks 300 ms apart), then let plots settle."""
    for selector in selectors:
        page.locator(selector).first.wait_for(state="visible", timeout=timeout_ms)
    for _ in range(2):
        page.wait_for_function(f"() => !document.querySelector('{BUSY}')", timeout=timeout_ms)
        page.wait_for_timeout(300)
    page.wait_for_timeout(1000)  # Plotly's transitions and the data grid's first paint


def _hide_tour(page) -> None:
    """Press demo mode's "Hide the tour" when it shows (it hides the tour for the rest of the session)."""
    hide = page.get_by_role("button", name="Hide the tour")
    if hide.count():
        hide.first.click()


def _open_middle_chunk(page) -> None:
    """Click a chunk in the middle of row B of the boundary strip, as a user would.

    The chunk inspector then marks that chunk, and the chunks at its offset in the other rows, in the
    side-by-side text; left alone it marks every row's first chunk, which hides where they end.
    """
    bars = page.locator(".st-key-cmp_strip .trace.bars").nth(1).locator(".point")
    middle = bars.count() // 2
    print(f"  opening chunk {middle} of B", file=sys.stderr, flush=True)
    bars.nth(middle).click(force=True)
    page.wait_for_timeout(1000)  # the click's rerun starts; _drawn then waits for it to end


def _run_tuning(page, timeout_ms: int) -> None:
    """On the Tune page, start a short model-free tuning run as a user would and wait for its answer.

    Keeps only :data:`TUNE_FAMILIES` (each other tag has its "Remove NAME" button), leaves the questions on
    "Generated (no model)" (:data:`TUNE_QUESTIONS` of them), sets the budget and the trial cap, presses Start and waits for "Use this".
    """
    page.get_by_role("heading", name="Tune", exact=True).wait_for(state="visible", timeout=timeout_ms)
    _drawn(page, (".st-key-tune_families [data-tag]",), timeout_ms)
    _hide_tour(page)
    _drawn(page, (".st-key-tune_families [data-tag]",), timeout_ms)
    tags = page.locator(".st-key-tune_families [data-tag]")
    for name in [n for n in tags.evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
                 if n not in TUNE_FAMILIES]:
        page.locator(f'.st-key-tune_families button[aria-label="Remove {name}"]').click()
        _drawn(page, (), timeout_ms)
    for key, value in (("tune_per_document", str(TUNE_QUESTIONS)), ("tune_budget", TUNE_BUDGET),
                       ("tune_trials", str(TUNE_TRIALS))):
        field = page.locator(f".st-key-{key} input")
        field.fill(value)
        field.press("Enter")
        _drawn(page, (), timeout_ms)
    print(f"  tuning {', '.join(TUNE_FAMILIES)} for {TUNE_BUDGET} (at most {TUNE_TRIALS} trials)", file=sys.stderr,
          flush=True)
    page.locator(".st-key-tune_start button").click()
    page.get_by_role("button", name="Use this").first.wait_for(state="visible", timeout=timeout_ms)


def take(out: Path, timeout_s: float, only: tuple[str, ...] = ()) -> list[Path]:
    """Start the demo app on a fresh data folder and write the :data:`SHOTS` pictures into ``out``.

    Args:
        out: The folder for the PNGs.
        timeout_s: Seconds allowed per page.
        only: The pages to capture (their sidebar links); empty: every one.
    """
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="chunklab-shots-") as tmp:
        env = dict(os.environ, CHUNKLAB_DEMO="1", CHUNKLAB_CACHE_DIR=f"{tmp}/cache", CHUNKLAB_DATA_DIR=f"{tmp}/data",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.pop("CHROMA_HOST", None)
        port = free_port()
        proc = start_app(env, port, timeout=90)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
                page.set_default_timeout(timeout_s * 1000)
                page.goto(f"http://127.0.0.1:{port}")
                _drawn(page, ("[data-testid=stMetric]",), int(timeout_s * 1000))
                for shot in SHOTS:
                    if only and shot.link not in only:
                        continue
                    print(f"{shot.link}: drawing", file=sys.stderr, flush=True)
                    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=shot.link, exact=True).click()
                    if shot.link == "Tune":
                        _run_tuning(page, int(timeout_s * 1000))
                    _drawn(page, shot.drawn, int(timeout_s * 1000))
                    _hide_tour(page)
                    _drawn(page, shot.drawn, int(timeout_s * 1000))
                    if shot.link == "Compare":
                        _open_middle_chunk(page)
                        _drawn(page, shot.drawn, int(timeout_s * 1000))
                    page.mouse.move(0, 0)  # no hover: Plotly's toolbar and tooltips stay hidden
                    page.wait_for_timeout(300)
                    main = page.get_by_test_id("stMain").bounding_box()
                    top = page.locator(shot.top).first.bounding_box()
                    y = max(0.0, top["y"] - shot.margin)
                    height = shot.height
                    if shot.bottom is not None:
                        end = page.locator(shot.bottom).first.bounding_box()
                        height = int(end["y"] + end["height"] + shot.margin - y)
                    path = out / shot.file
                    page.screenshot(path=str(path), clip={"x": main["x"] + 2, "y": y, "width": main["width"] - 2, "height": height})
                    written.append(path)
                browser.close()
        finally:
            stop_app(proc, timeout=10)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder for the PNGs (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--timeout", type=float, default=180, help="seconds allowed per page (default 180)")
    parser.add_argument("--only", nargs="+", choices=[shot.link for shot in SHOTS], default=[], metavar="PAGE",
                        help=f"capture only these pages ({', '.join(shot.link for shot in SHOTS)}; default: every one)")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing (install Debian's 'chromium' package)")
    for path in take(args.out, args.timeout, tuple(args.only)):
        print(f"{path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
