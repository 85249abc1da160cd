"""Do costs and ETAs come true? A real scoring job's first estimate and every ETA it reports, against its actual end.

One run, on the bundled SmolLM2 with ``CHUNKLAB_TORCH_THREADS=1`` (unless set), a fresh temporary
output cache and data directory (so nothing is cached and no speed is remembered; the converted
models are shared, not converted again):

1. the *guess*: what the Quality page would say before anything was measured on this machine
   (:func:`backend.metrics.cost.pair_cost` at the labelled guess);
2. a *calibration* job scores the BC pairs of ``--calibrate`` other chunks, as a user's earlier
   job in the session would: the scorer records its speed in the rate store as it goes;
3. the *estimate*: what the page says now (the pairs missing from the cache, at the measured speed);
4. the *job*: :func:`backend.models.scoring.conditional_scores` over the BC pairs (each chunk given
   " ", and given the chunk before it) of ``--chunks`` chunks of the bundled samples (recursive
   chunking, ``--chunk-size`` tokens), with a :class:`backend.progress.Progress` that records every
   ETA it reports and when.

Printed: a table of the ETAs (time, pairs done, the ETA, the actual time left, their ratio), then
the median ratio ETA / actual time left over the reports after the first 10% of the work (target
0.8-1.25), and the first estimate's ratio (the guess's and the measured one's) to the job's
actual duration. ``--load N`` starts N busy CPU processes for the calibration and the job (the
"loaded machine" case). ``--quick`` makes it a check of about a minute.

Run:  .venv/bin/python bench/bench_eta.py [--quick] [--load 2] [--chunks 120] [--chunk-size 160]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CHUNKLAB_TORCH_THREADS", "1")

from backend.chunkers import run_chunker  # noqa: E402
from backend.chunking import ChunkerConfig  # noqa: E402
from backend.config import data_dir  # noqa: E402
from backend.metrics.cost import Throughput, format_seconds, pair_cost  # noqa: E402
from backend.metrics.quality import pair_requests  # noqa: E402
from backend.models.cache import OutputCache  # noqa: E402
from backend.models.scorer import load_scorer  # noqa: E402
from backend.models.scoring import conditional_scores  # noqa: E402
from backend.progress import Progress  # noqa: E402
from backend.samples import list_samples, load_sample  # noqa: E402
from backend.text.document import Document  # noqa: E402

TARGET = (0.8, 1.25)


def _busy() -> None:
    """A busy CPU process (the "loaded machine"): spins until terminated."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def _chunk_texts(count: int, size: int) -> list[str]:
    """``count`` chunks of about ``size`` tokens of the bundled English samples, in order (repeated when short)."""
    english = [s for s in list_samples() if s.name in ("narrative", "technical")]
    text = "\n\n".join(load_sample(s.name).text for s in english)
    doc = Document.from_text(text, source="bench-eta")
    chunks = [c.text for c in run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": size})).chunks]
    out: list[str] = []
    round_ = 0
    while len(out) < count:
        # Later rounds are told apart by a marker, so no pair repeats one already cached.
        out.extend(c if round_ == 0 else f"[{round_}] {c}" for c in chunks)
        round_ += 1
    return out[:count]


def _fresh_lab(folder: Path) -> None:
    """Point the data directory and the output cache at ``folder``, sharing the converted models."""
    shared = data_dir()
    for sub in ("models", "tokenizers"):
        (shared / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub).symlink_to(shared / sub, target_is_directory=True)
    os.environ["CHUNKLAB_DATA_DIR"] = str(folder)
    os.environ["CHUNKLAB_CACHE_DIR"] = str(folder / "cache")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=None, help="chunks the job scores (BC: 2n-1 pairs; default 150)")
    ap.add_argument("--chunk-size", type=int, default=160, help="tokens per chunk (recursive chunker)")
    ap.add_argument("--calibrate", type=int, default=None, help="chunks of the calibration job (default chunks/8)")
    ap.add_argument("--load", type=int, default=0, help="busy CPU processes during the calibration and the job")
    ap.add_argument("--quick", action="store_true", help="a check of about a minute (30 chunks)")
    ap.add_argument("--rows", type=int, default=25, help="ETA rows printed (evenly spread)")
    args = ap.parse_args()
    chunks = args.chunks or (30 if args.quick else 150)
    calibrate = args.calibrate or max(4, chunks // 8)
    if chunks < 2 or args.chunk_size < 8 or args.load < 0:
        ap.error("--chunks must be at least 2, --chunk-size at least 8, --load at least 0")

    folder = Path(tempfile.mkdtemp(prefix="bench-eta-"))
    _fresh_lab(folder)
    scorer = load_scorer(None)
    info = scorer.info
    cache = OutputCache(folder / "cache")
    texts = _chunk_texts(chunks + calibrate, args.chunk_size)
    job_texts, calibration_texts = texts[:chunks], texts[chunks:]
    requests = pair_requests(job_texts, complete=False)

    def estimate() -> tuple[float, Throughput]:
        speed = Throughput.measured_for(info.fingerprint, info.kind)
        cost = pair_cost([job_texts], complete=False, window=None, fingerprint=info.fingerprint, kind=info.kind,
                         cache=cache, throughput=speed)
        return cost.seconds, speed

    print(f"model {info.name} on {info.device} ({info.dtype}), CHUNKLAB_TORCH_THREADS="
          f"{os.environ.get('CHUNKLAB_TORCH_THREADS')}, {args.load} busy process(es), data dir {folder}")
    guess, guess_speed = estimate()
    busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for p in busy:
        p.start()
    try:
        t0 = time.perf_counter()
        conditional_scores(pair_requests(calibration_texts, complete=False), scorer, cache=cache)
        calibration_s = time.perf_counter() - t0
        measured, speed = estimate()
        reports: list[tuple[float, float, float | None, str]] = []
        start = time.perf_counter()
        progress = Progress(lambda f, eta, label: reports.append((time.perf_counter(), f, eta, label)))
        conditional_scores(requests, scorer, cache=cache, progress=progress)
        end = time.perf_counter()
    finally:
        for p in busy:
            p.terminate()
        for p in busy:
            p.join()
    actual = end - start

    rows = [(t - start, f, eta, end - t, label) for t, f, eta, label in reports if eta is not None]
    print(f"\ncalibration: {2 * len(calibration_texts) - 1} pairs in {calibration_s:.1f} s; "
          f"job: {len(requests)} pairs in {actual:.1f} s ({len(reports)} progress reports)\n")
    print(f"{'t (s)':>8}  {'done':>6}  {'ETA (s)':>8}  {'left (s)':>8}  {'ratio':>6}  label")
    step = max(1, len(rows) // max(1, args.rows))
    for i, (t, f, eta, left, label) in enumerate(rows):
        if i % step == 0 or i == len(rows) - 1:
            ratio = f"{eta / left:6.2f}" if left > 0 else "     -"
            print(f"{t:8.1f}  {f:6.1%}  {eta:8.1f}  {left:8.1f}  {ratio}  {label}")
    later = [eta / left for _t, f, eta, left, _ in rows if f >= 0.1 and left > 1.0]
    first_eta = next(((eta, left) for _t, _f, eta, left, _ in rows), None)
    print()
    if later:
        lo, hi = TARGET
        median = statistics.median(later)
        verdict = "within" if lo <= median <= hi else "OUTSIDE"
        print(f"median ETA / actual time left after the first 10% of the work: {median:.2f} "
              f"over {len(later)} reports ({verdict} the target {lo}-{hi}); "
              f"range {min(later):.2f}-{max(later):.2f}")
    else:
        print("median ETA / actual time left: no report after the first 10% of the work (a longer run: --chunks)")
    if first_eta is not None:
        print(f"the job's first ETA / actual: {first_eta[0]:.1f} s / {first_eta[1]:.1f} s = "
              f"{first_eta[0] / first_eta[1]:.2f}")
    print(f"first estimate, measured ({speed.words}): {format_seconds(measured)} ({measured:.1f} s) / "
          f"actual {actual:.1f} s = {measured / actual:.2f}")
    print(f"first estimate before anything was measured ({guess_speed.words}): {format_seconds(guess)} "
          f"({guess:.1f} s) / actual {actual:.1f} s = {guess / actual:.2f}")


if __name__ == "__main__":
    main()
