"""Memory stays bounded: a 300-page PDF and a 30 MB single-line text through every model-free chunker.

Generates, in a temporary folder, a 300-page PDF (reportlab, as the loader tests make PDFs:
numbered paragraphs of prose, about 3,000 characters a page) and a 30 MB text that is one line
of words with no sentence punctuation and no newline (one sentence, one paragraph: the worst
case for splitters that fall back from paragraphs to sentences to words). Each model-free
chunker (the registry's chunkers that need no language model, embedder or chat model; what
``python -m backend chunkers`` lists with ``"needs": []``) then chunks each input with its
default parameters in its own process, ``python -m backend chunk FILE --chunker NAME``
(output discarded), and the process's peak RSS (``wait4``'s ``ru_maxrss``) and wall time are
recorded. ``python -m backend text FILE`` gives the loader's own share.

Baseline: the same runs on inputs a tenth the size (a 30-page PDF, a 3 MB line), in the same
run. The growth exponent ``log(t_full / t_tenth) / log(10)`` is about 1 for linear work and 2
for quadratic; the script flags any time exponent above 1.4 or any peak above the limit
(``--limit-mb``, default 3,000 MiB), and exits 1 when one is flagged.

    .venv/bin/python bench/bench_memory.py [--only NAME,NAME] [--keep] [--timeout S]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = 300
LINE_MB = 30


def make_pdf(path: Path, pages: int) -> None:
    """A ``pages``-page PDF of numbered prose paragraphs (reportlab's Platypus, one page break per page)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    style = getSampleStyleSheet()["BodyText"]
    story = []
    for page in range(pages):
        for k in range(6):
            story.append(Paragraph(
                f"Page {page + 1}, paragraph {k + 1}. The survey team logged the river's height at dawn and again "
                "at dusk, noting the colour of the water, the drift of the reeds and the number of herons on the "
                "sandbank. When the rains came early they moved the gauge upstream, and the readings of that week "
                "were marked as provisional until the old and new gauges had been compared for a full month.",
                style,
            ))
        story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=A4).build(story)


def make_line(path: Path, megabytes: float) -> None:
    """``megabytes`` MB of lowercase words separated by single spaces: no punctuation, no newline."""
    rnd = random.Random(0)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9))) for _ in range(5000)]
    target = int(megabytes * 1_000_000)
    with open(path, "w", encoding="ascii") as f:
        written = 0
        while written < target:
            piece = " ".join(rnd.choices(words, k=10_000)) + " "
            piece = piece[: target - written]
            f.write(piece)
            written += len(piece)


def model_free_chunkers() -> list[str]:
    """The registered chunkers that need no model (``needs`` empty)."""
    sys.path.insert(0, str(ROOT))
    from backend.chunkers import chunker_specs

    return [s["name"] for s in chunker_specs() if not s["needs"]]


def measure(args: list[str], timeout: float, log: Path) -> tuple[float, float, int]:
    """``(seconds, peak RSS in MiB, exit code)`` of ``python -m backend ARGS`` (stdout discarded, stderr to ``log``)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    t0 = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "backend", *args], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        _pid, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS, which Popen.wait does not give
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated chunker names (default: every model-free chunker)")
    parser.add_argument("--limit-mb", type=float, default=3000, help="peak RSS limit per run in MiB (default 3000)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per run (default 900)")
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs")
    args = parser.parse_args()
    names = model_free_chunkers()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"not model-free chunkers: {', '.join(unknown)} (model-free: {', '.join(names)})")
        names = wanted

    tmp = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        t0 = time.perf_counter()
        inputs = {
            "pdf": (tmp / "tenth.pdf", tmp / f"pages{PAGES}.pdf"),
            "line": (tmp / "tenth.txt", tmp / f"line{LINE_MB}mb.txt"),
        }
        make_pdf(inputs["pdf"][0], PAGES // 10)
        make_pdf(inputs["pdf"][1], PAGES)
        make_line(inputs["line"][0], LINE_MB / 10)
        make_line(inputs["line"][1], LINE_MB)
        print(f"inputs generated in {time.perf_counter() - t0:.0f} s: "
              + ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for pair in inputs.values() for p in pair))
        log = tmp / "stderr.log"
        _, floor_mb, _ = measure(["chunkers"], args.timeout, log)
        print(f"python -m backend chunkers (the interpreter's floor): {floor_mb:,.0f} MiB")
        print(f"{'input':<6}{'run':<13}{'tenth s':>9}{'full s':>9}{'t exp':>7}{'tenth MiB':>11}{'full MiB':>10}"
              f"{'m exp':>7}  verdict")
        flagged = 0
        for kind, (small, big) in inputs.items():
            for name in ["(loader)", *names]:
                run = ["text"] if name == "(loader)" else ["chunk", "--chunker", name]
                ts, ms, rs = measure([*run, str(small)], args.timeout, log)
                tb, mb, rb = measure([*run, str(big)], args.timeout, log)
                t_exp = math.log(max(tb, 1e-3) / max(ts, 1e-3)) / math.log(10)
                # Memory above the interpreter's floor: what the input costs.
                m_exp = math.log(max(mb - floor_mb, 1) / max(ms - floor_mb, 1)) / math.log(10)
                problems = []
                if rs or rb:
                    tail = log.read_text("utf-8", errors="replace").strip().splitlines()[-1:]
                    problems.append(f"exit {rs}/{rb} {' '.join(tail)[:120]}")
                if t_exp > 1.4:
                    problems.append("time grows faster than linear")
                if mb > args.limit_mb:
                    problems.append(f"peak over {args.limit_mb:,.0f} MiB")
                flagged += bool(problems)
                print(f"{kind:<6}{name:<13}{ts:>9.1f}{tb:>9.1f}{t_exp:>7.2f}{ms:>11,.0f}{mb:>10,.0f}{m_exp:>7.2f}  "
                      f"{'; '.join(problems) or 'ok'}", flush=True)
        print(f"ratio: each full input is 10x its tenth; an exponent of 1.0 is linear, 2.0 quadratic. flagged: {flagged}")
        return 1 if flagged else 0
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
