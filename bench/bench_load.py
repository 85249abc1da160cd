"""Under load: N browser sessions driving one real Chunk Lab server at once.

Starts ``streamlit run app.py`` (headless, a free 127.0.0.1 port, a fresh ``CHUNKLAB_DATA_DIR``
and ``CHUNKLAB_CACHE_DIR`` in a temporary folder) and drives it with Playwright and Debian's
Chromium: one browser, one context per session (separate cookies and storage, so separate
Streamlit sessions). Every session walks the same script on its own document:

1. ``open``: the app's landing page drawn.
2. ``upload``: its document (a uniquely named and marked copy, see below) on the Document page.
3. ``navigate``: each switch to another page, until its title and content are drawn.
4. ``add_config``: a model-free configuration (sentence, chunk_size 60) added on Compare.
5. ``add_model_config``: ``ppl`` (the bundled SmolLM2 scores the document in a background job).
6. ``theta``: the θ slider on the Meta-Chunking page moved a step (three times), until the
   page has re-chunked.
7. ``chat_model``: an OpenAI-compatible chat model named after the session, with a made-up
   API key, chosen on the Models page (nothing connects: it is only named).
8. ``query``: a live query on the Retrieval page (Chroma, the bundled MiniLM), until the top
   chunks are shown.
9. ``save_question``: the answer excerpt marked and the query saved to the session's question set.

Documents: session *i* gets format ``i mod 4`` of PDF (reportlab, the Kestrel sample's text),
DOCX (python-docx, the clockmaker sample's text), Chinese text (the teahouse sample) and HTML
(the release-notes sample), cut to about 2,500 characters so that the model-backed run (ppl on
CPU) stays short, each opened by a sentence naming the session's marker (``LoadMark`` + its
number + a random tag). Its file name, chat model name, query and key carry the marker too.

Checks, after every interaction of every session:

- errors: a Playwright timeout or failure, an exception or error box on the page, or a
  traceback in the server's log. Must be 0.
- cross-talk: the page's text and HTML must never hold another session's marker (document,
  file name, chunks, query, question set, chat model) nor any session's API key (its own
  included: a key is never shown). Must be 0. As a control, each session must see its own
  marker where it belongs (else the check itself would pass by seeing nothing).
  Dataframes are drawn on a canvas: their cells are not in the page text and are not checked.

Timing: seconds per interaction, p50 and p95 over all sessions; peak memory is the largest
RSS sum of the server's process tree, sampled every 0.25 s. Baseline: after a warm-up session
(unmeasured: it loads the models), one session alone walks the same script on the same server;
then N sessions at once. The ratio line compares the p50s.

    .venv/bin/python bench/bench_load.py [--sessions 8] [--port P] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from appserver import free_port, start_app, stop_app

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "assets" / "samples"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
KINDS = ("pdf", "docx", "zh", "html")
DOC_CHARS = 2500
BUSY = "[data-testid=stStatusWidget], [data-testid=stSpinner], [data-testid=stProgress]"
FAILURES = "[data-testid=stException], [data-testid=stAlertContentError]"
_PASSWORD_INPUT = re.compile(r"<input\b[^>]*\btype=\"password\"[^>]*>")
INTERACTIONS = ("open", "upload", "navigate", "add_config", "add_model_config", "theta", "chat_model", "query",
                "save_question")


# --- documents ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """One browser session's identity: its number, format, marker, file and made-up key."""

    n: int
    kind: str
    marker: str
    path: Path

    @property
    def key(self) -> str:
        return f"sk-{self.marker}-secret"

    @property
    def chat_model(self) -> str:
        return f"chat-{self.marker}"

    @property
    def sentence(self) -> str:
        return f"This copy belongs to {self.marker} alone."

    @property
    def query(self) -> str:
        return f"Which session does {self.marker} belong to?"


def _plain(text: str, limit: int) -> list[str]:
    """The first ``limit`` characters of a sample as paragraphs (Markdown marks dropped)."""
    paragraphs = [re.sub(r"[#*`>|_-]+", " ", p).strip() for p in text.split("\n\n")]
    out, size = [], 0
    for p in paragraphs:
        if p and size < limit:
            out.append(" ".join(p.split()))
            size += len(p)
    return out


def make_document(session_n: int, kind: str, folder: Path) -> Session:
    """Write session ``session_n``'s uniquely marked copy of the ``kind`` sample into ``folder``."""
    marker = f"LoadMark{session_n:02d}{secrets.token_hex(3)}"
    stem = f"{marker}_{kind}"
    probe = Session(session_n, kind, marker, folder)
    if kind == "pdf":
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import getSampleStyleSheet
        from reportlab.platypus import Paragraph, SimpleDocTemplate

        path = folder / f"{stem}.pdf"
        style = getSampleStyleSheet()["BodyText"]
        paragraphs = [probe.sentence, *_plain((SAMPLES / "technical_kestrel.md").read_text("utf-8"), DOC_CHARS)]
        SimpleDocTemplate(str(path), pagesize=A4).build([Paragraph(escape(p), style) for p in paragraphs])
    elif kind == "docx":
        import docx

        path = folder / f"{stem}.docx"
        document = docx.Document()
        document.add_heading(f"The clockmaker, {marker}", level=1)
        for p in [probe.sentence, *_plain((SAMPLES / "narrative_clockmaker.txt").read_text("utf-8"), DOC_CHARS)]:
            document.add_paragraph(p)
        document.save(str(path))
    elif kind == "zh":
        path = folder / f"{stem}.txt"
        text = (SAMPLES / "chinese_teahouse.txt").read_text("utf-8")[: DOC_CHARS // 2]
        path.write_text(f"{probe.sentence}\n\n这份茶馆的故事属于 {marker}。\n\n{text}", encoding="utf-8")
    elif kind == "html":
        path = folder / f"{stem}.html"
        html = (SAMPLES / "release_notes.html").read_text("utf-8")
        path.write_text(html.replace("<main>", f"<main>\n<p>{escape(probe.sentence)}</p>", 1), encoding="utf-8")
    else:
        raise ValueError(f"unknown document kind {kind!r}")
    return Session(session_n, kind, marker, path)


# --- the server -----------------------------------------------------------------------------------


def start_server(tmp: Path, port: int) -> subprocess.Popen:
    """``streamlit run app.py`` on ``port`` with its data and cache in ``tmp``; returns once healthy."""
    env = dict(os.environ, CHUNKLAB_DATA_DIR=str(tmp / "data"), CHUNKLAB_CACHE_DIR=str(tmp / "cache"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    for name in ("CHROMA_HOST", "CHROMA_PORT", "CHUNKLAB_DEMO", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CHUNKLAB_CHAT"):
        env.pop(name, None)
    log = open(tmp / "streamlit.log", "w")
    try:
        return start_app(env, port, log=log)
    except SystemExit as e:
        raise SystemExit(f"{e}; log: {tmp / 'streamlit.log'}") from None


def stop_server(proc: subprocess.Popen) -> None:
    stop_app(proc)


class MemorySampler:
    """The peak RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.25) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.every = every
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        import psutil

        total = 0
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            self._stop.wait(self.every)

    def __enter__(self) -> MemorySampler:
        self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# --- one session ----------------------------------------------------------------------------------


@dataclass
class Record:
    """What one walk measured and found."""

    times: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    crosstalk: list[str] = field(default_factory=list)
    seen_own: set[str] = field(default_factory=set)

    def add(self, other: Record) -> None:
        for k, v in other.times.items():
            self.times.setdefault(k, []).extend(v)
        self.errors += other.errors
        self.crosstalk += other.crosstalk


class Walker:
    """Drives one session through the script, timing each interaction and checking the page after it."""

    def __init__(
        self, page, me: Session, everyone: list[Session], timeout_ms: int, verbose: bool = False,
        shots: Path | None = None,
    ) -> None:
        self.page, self.me, self.timeout, self.verbose, self.shots = page, me, timeout_ms, verbose, shots
        self.others = [s.marker for s in everyone if s.marker != me.marker]
        self.keys = [s.key for s in everyone]
        self.rec = Record()

    async def idle(self) -> None:
        """Nothing running: no status widget, spinner or progress bar, twice 300 ms apart."""
        for _ in range(2):
            await self.page.wait_for_function(f"() => !document.querySelector('{BUSY}')", timeout=self.timeout)
            await self.page.wait_for_timeout(300)

    async def check(self, step: str) -> None:
        """Errors on the page, other sessions' markers or any key in its text or HTML."""
        page = self.page
        failures = page.locator(FAILURES)
        for i in range(await failures.count()):
            self.rec.errors.append(f"{self.me.marker} {step}: {(await failures.nth(i).inner_text())[:200]!r}")
        found = len(self.rec.crosstalk)
        text = await page.inner_text("body")
        html = await page.content()
        for marker in self.others:
            if marker in text or marker in html:
                self.rec.crosstalk.append(f"{self.me.marker} {step}: saw {marker}")
        # The session's own password field keeps what it typed (masked): the only place its key may be.
        unmasked = _PASSWORD_INPUT.sub("", html)
        for key in self.keys:
            if key in text or key in (unmasked if key == self.me.key else html):
                self.rec.crosstalk.append(f"{self.me.marker} {step}: a key is shown ({key[:12]}…)")
        if self.shots is not None and len(self.rec.crosstalk) > found:
            (self.shots / f"{self.me.marker}-crosstalk-{step.replace(' ', '_')}.html").write_text(html, encoding="utf-8")
        if self.me.marker in text or self.me.marker in html:  # html: input values (the saved-question picker)
            self.rec.seen_own.add(step)

    async def timed(self, kind: str, step: str, action) -> None:
        t0 = time.perf_counter()
        try:
            await action()
        except Exception as e:  # a timeout or a failed action: counted, and the walk goes on
            self.rec.errors.append(f"{self.me.marker} {step}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            print(f"  {self.me.marker} {step}: FAILED ({type(e).__name__})", file=sys.stderr, flush=True)
            if self.shots is not None:
                name = f"{self.me.marker}-{step.replace(' ', '_')}"
                with contextlib.suppress(Exception):  # a closed page has nothing left to show
                    await self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)
                    (self.shots / f"{name}.html").write_text(await self.page.content(), encoding="utf-8")
            return
        seconds = time.perf_counter() - t0
        self.rec.times.setdefault(kind, []).append(seconds)
        if self.verbose:
            print(f"  {self.me.marker} {step}: {seconds:.1f} s", file=sys.stderr, flush=True)
        await self.check(step)

    async def go(self, link: str, title: str) -> None:
        page = self.page

        async def action() -> None:
            await page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=link, exact=True).click()
            await page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=self.timeout)
            await self.idle()

        await self.timed("navigate", f"navigate {link}", action)

    async def walk(self, url: str) -> Record:
        page, me = self.page, self.me
        view = lambda uid: page.locator(f".st-key-cmp_view_{uid}")  # noqa: E731

        async def open_() -> None:
            await page.goto(url)
            await page.get_by_role("heading", name="Document", exact=True).wait_for(timeout=self.timeout)
            await page.locator("[data-testid=stMetric]").first.wait_for(timeout=self.timeout)
            await self.idle()

        async def upload() -> None:
            await page.locator(".st-key-docpage_upload_0 input[type=file]").set_input_files(str(me.path))
            await page.locator("[data-testid=stSidebar]").get_by_text(me.path.name).first.wait_for(timeout=self.timeout)
            await page.locator(".st-key-docpage_preview").get_by_text(me.marker).first.wait_for(timeout=self.timeout)
            await self.idle()

        async def add(option: str, card: int, size: str | None) -> None:
            await page.locator(".st-key-cmp_new_chunker").click()
            await page.get_by_role("option", name=option).click()
            if size is not None:
                await page.locator(".st-key-cmp_new_sentence_chunk_size input").fill(size)
            await page.locator(".st-key-cmp_new_submit button").click()
            await view(card).locator(".cl-badge").first.wait_for(timeout=self.timeout)
            await view(card).get_by_text(me.marker).first.wait_for(timeout=self.timeout)
            await self.idle()

        async def theta() -> None:
            number = page.locator(".st-key-ppl_threshold input")
            before = await number.input_value()
            await page.locator(".st-key-ppl_threshold_slider input[type=range]").focus()
            await page.keyboard.press("ArrowRight")
            await page.wait_for_function(
                "(b) => { const i = document.querySelector('.st-key-ppl_threshold input'); return i && i.value !== b; }",
                arg=before, timeout=self.timeout,
            )
            await self.idle()

        async def chat_model() -> None:
            await page.locator(".st-key-models_chat_source").get_by_text("OpenAI-compatible API").click()
            await page.locator(".st-key-models_chat_model input").wait_for(timeout=self.timeout)
            await page.locator(".st-key-models_chat_url input").fill("http://127.0.0.1:9/v1")
            await page.locator(".st-key-models_chat_model input").fill(me.chat_model)
            await page.locator(".st-key-models_chat_key_input input").fill(me.key)
            await page.locator(".st-key-models_chat_use button").click()
            await page.locator("[data-testid=stSidebar]").get_by_text(f"Chat: {me.chat_model} (API)").wait_for(
                timeout=self.timeout
            )
            await self.idle()

        async def query() -> None:
            await page.locator(".st-key-ret_query input").fill(me.query)
            await page.locator(".st-key-ret_search button").click()
            await page.get_by_role("heading", name="Top chunks").wait_for(timeout=self.timeout)
            await page.get_by_text(f"Query: {me.query}").first.wait_for(timeout=self.timeout)
            await self.idle()

        async def save_question() -> None:
            await page.locator(".st-key-ret_paste textarea").fill(me.sentence)
            await page.locator(".st-key-ret_mark button").click()
            save = page.locator(".st-key-ret_save button")
            await page.wait_for_function(
                "() => { const b = document.querySelector('.st-key-ret_save button'); return b && !b.disabled; }",
                timeout=self.timeout,
            )
            await save.click()
            # The saved question's picker names it (the set's table is a canvas: its text is not in the page).
            await page.wait_for_function(
                "(m) => { const i = document.querySelector('.st-key-ret_saved_pick input');"
                " return i && i.value.includes(m); }",
                arg=me.marker, timeout=self.timeout,
            )
            await self.idle()

        await self.timed("open", "open", open_)
        await self.timed("upload", "upload", upload)
        await self.go("Compare", "Compare chunkers")
        await self.timed("add_config", "add sentence", lambda: add("sentence · baseline", 2, "60"))
        await self.timed("add_model_config", "add ppl", lambda: add("ppl · meta-chunking", 3, None))
        await self.go("Meta-Chunking", "Meta-Chunking")
        for i in range(3):
            await self.timed("theta", f"theta {i + 1}", theta)
        await self.go("Models", "Models")
        await self.timed("chat_model", "chat model", chat_model)
        await self.go("Retrieval", "Retrieval")
        await self.timed("query", "query", query)
        await self.timed("save_question", "save question", save_question)
        for step in ("upload", "add sentence", "add ppl", "query", "save question"):
            if step not in self.rec.seen_own and not any(e.split(" ", 1)[1].startswith(step) for e in self.rec.errors):
                self.rec.errors.append(f"{me.marker} {step}: its own marker is not on the page (the check sees nothing)")
        return self.rec


async def run_sessions(
    url: str, sessions: list[Session], everyone: list[Session], timeout_s: float, verbose: bool = False,
    shots: Path | None = None,
) -> Record:
    """Walk ``sessions`` at once, each in its own browser context; their records merged."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:

            async def one(s: Session) -> Record:
                context = await browser.new_context(viewport={"width": 1400, "height": 1800})
                try:
                    page = await context.new_page()
                    page.set_default_timeout(timeout_s * 1000)
                    return await Walker(page, s, everyone, int(timeout_s * 1000), verbose, shots).walk(url)
                finally:
                    await context.close()

            records = await asyncio.gather(*(one(s) for s in sessions))
        finally:
            await browser.close()
    merged = Record()
    for r in records:
        merged.add(r)
    return merged


# --- the report -----------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def _tracebacks(log: Path) -> list[str]:
    text = log.read_text("utf-8", errors="replace") if log.exists() else ""
    return [line for line in text.splitlines() if line.startswith("Traceback")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8, help="concurrent browser sessions (default 8)")
    parser.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (documents, server log, data)")
    parser.add_argument("--verbose", action="store_true", help="print each interaction's time as it ends (stderr)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per interaction (default 600)")
    args = parser.parse_args()
    if args.sessions < 1:
        parser.error(f"--sessions ({args.sessions}) must be at least 1")
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still stops the server (the finally below)
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    docs = tmp / "docs"
    docs.mkdir()
    warm = make_document(90, "pdf", docs)
    base = [make_document(91, "docx", docs)]
    load = [make_document(i, KINDS[i % len(KINDS)], docs) for i in range(args.sessions)]
    everyone = [warm, *base, *load]
    shots = tmp if args.keep else None  # a failed step's screenshot and HTML, kept with the rest
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(tmp, port)
    try:
        with MemorySampler(proc.pid) as mem:
            t0 = time.perf_counter()
            warmup = asyncio.run(run_sessions(url, [warm], everyone, args.timeout, args.verbose, shots))
            print(f"warm-up session (models loaded, unmeasured): {time.perf_counter() - t0:.0f} s", flush=True)
            idle_rss = mem.rss()
            t0 = time.perf_counter()
            alone = asyncio.run(run_sessions(url, base, everyone, args.timeout, args.verbose, shots))
            alone_s = time.perf_counter() - t0
            peak_alone = mem.peak
            t0 = time.perf_counter()
            together = asyncio.run(run_sessions(url, load, everyone, args.timeout, args.verbose, shots))
            together_s = time.perf_counter() - t0
            peak = mem.peak
    finally:
        stop_server(proc)
    tracebacks = _tracebacks(tmp / "streamlit.log")
    errors = warmup.errors + alone.errors + together.errors + [f"server log: {t}" for t in tracebacks]
    crosstalk = warmup.crosstalk + alone.crosstalk + together.crosstalk

    print(f"{args.sessions} sessions at once: {together_s:.0f} s wall; 1 session alone: {alone_s:.0f} s "
          f"(load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'interaction':<18}{'n':>4}{'p50 s':>9}{'p95 s':>9}{'alone p50':>11}{'ratio':>8}")
    ratios = []
    for kind in INTERACTIONS:
        got, solo = together.times.get(kind, []), alone.times.get(kind, [])
        if not got:
            print(f"{kind:<18}{0:>4}{'—':>9}{'—':>9}")
            continue
        p50, p95 = statistics.median(got), _pct(got, 0.95)
        solo50 = statistics.median(solo) if solo else float("nan")
        ratio = p50 / solo50 if solo else float("nan")
        if solo:
            ratios.append(ratio)
        print(f"{kind:<18}{len(got):>4}{p50:>9.2f}{p95:>9.2f}{solo50:>11.2f}{ratio:>7.1f}x")
    print(f"peak RSS of the server's process tree: {peak / 2**20:,.0f} MiB with {args.sessions} sessions "
          f"(idle after the warm-up: {idle_rss / 2**20:,.0f} MiB; peak with 1 session: {peak_alone / 2**20:,.0f} MiB)")
    print(f"errors: {len(errors)}")
    for e in errors[:20]:
        print(f"  {e}")
    print(f"cross-talk: {len(crosstalk)}")
    for c in crosstalk[:20]:
        print(f"  {c}")
    if ratios:
        print(f"ratio: {args.sessions} sessions at once vs 1 alone, p50 per interaction: "
              f"{statistics.median(ratios):.1f}x median, {max(ratios):.1f}x worst "
              f"(the wall time: {together_s / alone_s:.1f}x for {args.sessions}x the work)")
    if args.keep:
        print(f"kept: {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if errors or crosstalk else 0


if __name__ == "__main__":
    raise SystemExit(main())
