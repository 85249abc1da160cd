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

With ``--ppl`` the job is a PPL scoring pass instead (``token_nll`` over ``--ppl-chars`` characters
of the samples with a ``--window`` of 1,024 tokens, so a quick run has several windows; the
calibration is a pass over a third as much other text, and the estimate is the PPL page's,
:func:`backend.lab.ppl.scoring_estimate`).

Printed: a table of the ETAs (time, pairs done, the ETA, the actual time left, their ratio), then
the median ratio ETA / actual time left over the reports after the first 10% of the work (target
0.8-1.25), and the first estimate's ratio (the guess's and the measured one's) to the job's
actual duration, and as the baseline measured in the same run the median ratio of the ETA as it
was computed before (units alone, no measured rate) from the same reports. ``--load N`` starts N busy CPU processes for the calibration and the job (the
"loaded machine" case). ``--quick`` makes it a check of about a minute.

Run:  .venv/bin/python bench/bench_eta.py [--quick] [--load 2] [--chunks 100] [--chunk-size 160] [--ppl]
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
from backend.lab.models import SessionModels  # noqa: E402
from backend.lab.ppl import scoring_estimate  # noqa: E402
from backend.metrics.cost import Throughput, format_seconds, pair_cost  # noqa: E402
from backend.metrics.scores import pair_requests  # noqa: E402
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


def _english_text(chars: int) -> str:
    """The bundled English samples, concatenated (repeated, each round marked) to ``chars`` characters."""
    english = "\n\n".join(load_sample(s.name).text for s in list_samples() if s.name in ("narrative", "technical"))
    out, round_ = [], 0
    while sum(len(x) for x in out) < chars:
        out.append(english if round_ == 0 else f"[{round_}] {english}")
        round_ += 1
    return "\n\n".join(out)[:chars]


def _chunk_texts(count: int, size: int) -> list[str]:
    """``count`` chunks of about ``size`` tokens of the bundled English samples, in order (repeated when short)."""
    doc = Document.from_text("\n\n".join(load_sample(s.name).text for s in list_samples()
                                          if s.name in ("narrative", "technical")), source="bench-eta")
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


def _report(rows_wanted: int, what: str, calibration: str, reports: list, start: float, end: float,
            first: list[tuple[str, float | None]]) -> None:
    """The table of ETAs and the ratio lines (see the module docstring)."""
    actual = end - start
    rows = [(t - start, f, eta, end - t, label) for t, f, eta, label in reports if eta is not None]
    print(f"\ncalibration: {calibration}; job: {what} in {actual:.1f} s ({len(reports)} progress reports)\n")
    print(f"{'t (s)':>8}  {'done':>6}  {'ETA (s)':>8}  {'left (s)':>8}  {'ratio':>6}  label")
    step = max(1, len(rows) // max(1, rows_wanted))
    for i, (t, f, eta, left, label) in enumerate(rows):
        if i % step == 0 or i == len(rows) - 1:
            ratio = f"{eta / left:6.2f}" if left > 0 else "     -"
            print(f"{t:8.1f}  {f:6.1%}  {eta:8.1f}  {left:8.1f}  {ratio}  {label}")
    later = [eta / left for _t, f, eta, left, _ in rows if f >= 0.1 and left > 1.0]
    # The baseline, from the same reports: the ETA as it was measured before (units done over the seconds
    # since the count began, each unit weighing 1, no rate measured earlier).
    counted = [(t - start, f) for t, f, _eta, _label in reports]
    t0, f0 = counted[0] if counted else (0.0, 0.0)
    plain = [((1 - f) * (t - t0) / (f - f0)) / (actual - t) for t, f in counted
             if f >= 0.1 and f > f0 and actual - t > 1.0 and f < 1.0]
    first_eta = next(((eta, left) for _t, _f, eta, left, _ in rows), None)
    print()
    lo, hi = TARGET
    if later:
        median = statistics.median(later)
        verdict = "within" if lo <= median <= hi else "OUTSIDE"
        print(f"median ETA / actual time left after the first 10% of the work: {median:.2f} "
              f"over {len(later)} reports ({verdict} the target {lo}-{hi}); range {min(later):.2f}-{max(later):.2f}")
    else:
        print("median ETA / actual time left: no report after the first 10% of the work (a longer run)")
    if plain:
        print(f"baseline, the same reports counted in units alone (the ETA before): median {statistics.median(plain):.2f} "
              f"(range {min(plain):.2f}-{max(plain):.2f})")
    if first_eta is not None:
        print(f"the job's first ETA / actual: {first_eta[0]:.1f} s / {first_eta[1]:.1f} s = "
              f"{first_eta[0] / first_eta[1]:.2f}")
    for words, seconds in first:
        if seconds is None:
            print(f"first estimate, {words}: none, \"time measured on the first run\"")
            continue
        print(f"first estimate, {words}: {format_seconds(seconds)} ({seconds:.1f} s) / actual {actual:.1f} s = "
              f"{seconds / actual:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=None, help="chunks the job scores (BC: 2n-1 pairs; default 100)")
    ap.add_argument("--chunk-size", type=int, default=160, help="tokens per chunk (recursive chunker)")
    ap.add_argument("--calibrate", type=int, default=None, help="chunks of the calibration job (default chunks/8)")
    ap.add_argument("--ppl", action="store_true", help="a PPL scoring pass (token_nll) instead of pair scoring")
    ap.add_argument("--ppl-chars", type=int, default=None, help="characters of the pass (default 24,000; quick 12,000)")
    ap.add_argument("--window", type=int, default=1024, help="the pass's window in tokens (--ppl)")
    ap.add_argument("--load", type=int, default=0, help="busy CPU processes during the calibration and the job")
    ap.add_argument("--quick", action="store_true", help="a check of about a minute (30 chunks)")
    ap.add_argument("--rows", type=int, default=25, help="ETA rows printed (evenly spread)")
    args = ap.parse_args()
    chunks = args.chunks or (30 if args.quick else 100)
    calibrate = args.calibrate or max(4, chunks // 8)
    ppl_chars = args.ppl_chars or (12_000 if args.quick else 24_000)
    if chunks < 2 or args.chunk_size < 8 or args.load < 0 or ppl_chars < 1_000 or args.window < 16:
        ap.error("--chunks must be at least 2, --chunk-size at least 8, --load at least 0, --ppl-chars at least "
                 "1000, --window at least 16")

    folder = Path(tempfile.mkdtemp(prefix="bench-eta-"))
    _fresh_lab(folder)
    scorer = load_scorer(None)
    info = scorer.info
    cache = OutputCache(folder / "cache")
    print(f"model {info.name} on {info.device} ({info.dtype}), CHUNKLAB_TORCH_THREADS="
          f"{os.environ.get('CHUNKLAB_TORCH_THREADS')}, {args.load} busy process(es), data dir {folder}")
    if args.ppl:
        text = _english_text(ppl_chars + ppl_chars // 3)
        job_text, calibration_text = text[:ppl_chars], text[ppl_chars:]
        doc = Document.from_text(job_text, source="bench-eta")
        models = SessionModels.of(scorer)

        def calibrate_now() -> str:
            ts = scorer.token_nll(calibration_text, window=args.window)
            return f"a pass over {len(ts) - 1:,} tokens"

        def job(progress: Progress) -> str:
            progress.set_unit("tokens")
            ts = scorer.token_nll(job_text, window=args.window, progress=progress)
            return f"a pass over {len(ts) - 1:,} tokens (window {args.window})"

        def estimate() -> tuple[str, float | None]:
            seconds = scoring_estimate(doc, models, window=args.window)
            return ("at the speed measured on this machine" if seconds is not None else "nothing measured"), seconds
    else:
        texts = _chunk_texts(chunks + calibrate, args.chunk_size)
        job_texts, calibration_texts = texts[:chunks], texts[chunks:]
        requests = pair_requests(job_texts, complete=False)

        def calibrate_now() -> str:
            conditional_scores(pair_requests(calibration_texts, complete=False), scorer, cache=cache)
            return f"{2 * len(calibration_texts) - 1} pairs"

        def job(progress: Progress) -> str:
            conditional_scores(requests, scorer, cache=cache, progress=progress)
            return f"{len(requests)} pairs"

        def estimate() -> tuple[str, float | None]:
            speed = Throughput.measured_for(info.fingerprint, info.kind)
            cost = pair_cost([job_texts], complete=False, window=None, fingerprint=info.fingerprint, kind=info.kind,
                             cache=cache, throughput=speed)
            return speed.words, cost.seconds

    guess_words, guess = estimate()
    # The process's first call of each kind pays the warm-up, which the scorer does not record: made here, as
    # any earlier use of the model in the app's process would have made it.
    scorer.token_nll("A short warm-up text. " * 10, window=args.window)
    scorer.conditional_nll([(" ", "A short warm-up text.")])
    busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for p in busy:
        p.start()
    try:
        t0 = time.perf_counter()
        calibration = calibrate_now()
        calibration += f" in {time.perf_counter() - t0:.1f} s"
        words, measured = estimate()
        reports: list[tuple[float, float, float | None, str]] = []
        start = time.perf_counter()
        what = job(Progress(lambda f, eta, label: reports.append((time.perf_counter(), f, eta, label))))
        end = time.perf_counter()
    finally:
        for p in busy:
            p.terminate()
        for p in busy:
            p.join()
    first = [(f"measured ({words})", measured), (f"before anything was measured ({guess_words})", guess)]
    _report(args.rows, what, calibration, reports, start, end, first)


if __name__ == "__main__":
    main()
