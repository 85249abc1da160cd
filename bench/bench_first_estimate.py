"""Time to the first BC and CS estimate of the anytime scoring job against the exact run (the same job to its end).

One chunking of a document (default: the 36-page libtasn1 PDF; ``--quick``: the bundled
``technical`` sample) is scored twice by :func:`backend.metrics.scores.score_chunkings`, the
Quality page's job, each time on a fresh temporary cache: once for BC (adjacent pairs), once
for CS with a pair window (``--window``, default 3; BC comes with it). The job publishes an
estimate with its 95% interval after each batch and runs until every pair is scored: that end
*is* the exact run, so one run gives both times. Printed: the wall and CPU seconds to the
first estimate, to the exact value, their ratio, and the first and final estimates. The model
is loaded before the clock starts. Run it with ``CHUNKLAB_TORCH_THREADS=1`` on a shared CPU.

Run:  CHUNKLAB_TORCH_THREADS=1 .venv/bin/python bench/bench_first_estimate.py [--quick]
          [--only bc|cs] [--file PATH] [--chunker sentence] [--chunk-size 200] [--window 3] [--lm NAME|PATH]
          [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PDF = "/usr/share/doc/libtasn1-doc/libtasn1.pdf"


def timed_job(chunking, scorer, *, complete: bool, window: int | None, metric: str) -> dict:
    """Run the anytime job on a fresh cache; when its first estimate of ``metric`` came and when it ended."""
    from backend.metrics.scores import score_chunkings
    from backend.models.cache import OutputCache
    from backend.progress import Progress

    seen: list[tuple[float, float, object]] = []
    t0, c0 = time.perf_counter(), time.process_time()

    def partial(value) -> None:
        est = value.estimates[0].get(metric) if value.estimates else None
        if est is not None and est.estimate is not None:
            seen.append((time.perf_counter() - t0, time.process_time() - c0, est))
            print(f"  {seen[-1][0]:7.1f} s wall {seen[-1][1]:7.1f} s CPU  {metric} {est.label()}", flush=True)

    with tempfile.TemporaryDirectory(prefix="chunklab-bench-first-") as tmp:
        score_chunkings(
            [chunking], scorer=scorer, embedder=None, complete=complete, window=window, cache=OutputCache(tmp),
            progress=Progress(partial=partial),
        )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if not seen or not seen[-1][2].exact:
        sys.exit(f"the job published no exact {metric} at its end")
    first = next((s for s in seen if not s[2].exact), seen[-1])
    return {"first_wall": first[0], "first_cpu": first[1], "first": first[2], "wall": wall, "cpu": cpu,
            "exact": seen[-1][2], "estimates": len(seen)}


def report(name: str, r: dict) -> None:
    """Print one job's times and ratio."""
    print(f"{name}: first estimate {r['first'].label()} after {r['first_wall']:.1f} s wall / {r['first_cpu']:.1f} s CPU; "
          f"exact {r['exact'].label(4)} after {r['wall']:.1f} s wall / {r['cpu']:.1f} s CPU "
          f"({r['estimates']} estimates published)")
    print(f"{name}: ratio first estimate / exact run: {r['first_wall'] / r['wall']:.1%} wall, "
          f"{r['first_cpu'] / max(r['cpu'], 1e-9):.1%} CPU; first within a minute of CPU: "
          f"{'yes' if r['first_cpu'] <= 60 else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the bundled 'technical' sample instead of the PDF")
    parser.add_argument("--file", help=f"document path or sample:NAME (default {PDF})")
    parser.add_argument("--chunker", default="sentence", help="registered chunker (default sentence)")
    parser.add_argument("--chunk-size", type=int, default=200, help="its chunk_size (default 200 tokens)")
    parser.add_argument("--window", type=int, default=3, help="CS pair window (default 3)")
    parser.add_argument("--only", choices=("bc", "cs"), help="run only the BC job or only the CS job (default both)")
    parser.add_argument("--lm", help="language model (default: the bundled SmolLM2)")
    parser.add_argument("--device", help="device (default: the app's)")
    opts = parser.parse_args()
    os.environ.setdefault("CHUNKLAB_CACHE_DIR", tempfile.mkdtemp(prefix="chunklab-bench-first-default-"))

    from backend.chunkers import make_chunker
    from backend.chunkers.context import ModelContext
    from backend.cli.common import load_input

    source = opts.file or ("sample:technical" if opts.quick else PDF)
    doc = load_input(source)
    chunking = make_chunker(opts.chunker, {"chunk_size": opts.chunk_size}).chunk(doc)
    n = len(chunking.chunks)
    print(f"{source}: {len(doc.sentences):,} sentences; {opts.chunker} chunk_size={opts.chunk_size}: {n} chunks; "
          f"CS window {opts.window}; torch threads {os.environ.get('CHUNKLAB_TORCH_THREADS', '(default)')}")
    scorer = ModelContext(lm=opts.lm, device=opts.device).get_scorer()
    print(f"model {scorer.info.name} on {scorer.info.device}")
    if opts.only != "cs":
        report("BC", timed_job(chunking, scorer, complete=False, window=None, metric="bc"))
    if opts.only != "bc":
        report(f"CS (w={opts.window})", timed_job(chunking, scorer, complete=True, window=opts.window,
                                                 metric="cs_complete"))


if __name__ == "__main__":
    main()
