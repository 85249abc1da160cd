"""Do the Quality page's times come true? The whole anytime scoring job: its ETAs and both promised times vs its run.

One run, on the bundled SmolLM2 with ``CHUNKLAB_TORCH_THREADS=1`` (unless set), a fresh temporary
output cache and data directory (so nothing is cached and no speed is remembered; the converted
models are shared, not converted again):

1. the *guess*: what the Quality page would say before anything was measured on this machine;
2. a *calibration* job scores the BC pairs of ``--calibrate`` chunks of another sample, as a user's
   earlier job in the session would: the scorer records its speed in the rate store as it goes;
3. the *prediction*: what the Quality page says now (:func:`backend.lab.quality.plan_quality`): the
   time of the first estimates with their intervals (the job's first round) and of the exact values
   (every pair), the two times its confirmation names;
4. the *job*: the page's own job (``plan.job.run``, :func:`backend.metrics.scores.score_chunkings`)
   over BC of two configurations (recursive ``--chunk-size`` tokens and fixed_token 3/4 of it) of the
   bundled ``--sample``, every round to the exact tables, with a :class:`backend.progress.Progress`
   that records every ETA it reports and when each estimate is published.

Printed: a table of the ETAs (time, work done, the ETA, the actual time left, their ratio); the ETA
the job reported at its start, at its first estimate and at about 50% of its work against the
actual time left then (ratio ETA / actual, target 0.8-1.25); the median ratio over the reports after
the first 10% of the work; the two predicted times against the actual first estimate and end (and
the guess's); and, as baselines from the same run, the ETA extrapolated from the bar alone (units,
no rate measured before) and the ETA as the job computed it before issue 35 (its remaining pairs
over the rate measured in characters/s: a few seconds for minutes of work). ``--load N`` starts N busy CPU processes for the calibration and
the job (the "loaded machine" case). ``--quick`` scores the first 6,000 characters (about 45 pairs, a few minutes).

With ``--ppl`` the job is a PPL scoring pass instead (``token_nll`` over ``--ppl-chars`` characters
of the samples with a ``--window`` of 1,024 tokens, so a quick run has several windows; the
calibration is a pass over a third as much other text, and the estimate is the PPL page's,
:func:`backend.lab.ppl.scoring_estimate`).

Run:  .venv/bin/python bench/bench_eta.py [--quick] [--load 2] [--sample technical] [--chars 8000]
      [--chunk-size 160] [--calibrate 12] [--ppl]
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
from backend.chunking import ChunkerConfig, ConfigEntry  # noqa: E402
from backend.config import data_dir  # noqa: E402
from backend.lab.models import SessionModels  # noqa: E402
from backend.lab.ppl import scoring_estimate  # noqa: E402
from backend.lab.quality import plan_quality  # noqa: E402
from backend.metrics.cost import format_seconds  # noqa: E402
from backend.metrics.scores import pair_requests  # noqa: E402
from backend.models.cache import OutputCache  # noqa: E402
from backend.models.scorer import load_scorer  # noqa: E402
from backend.models.scoring import conditional_scores  # noqa: E402
from backend.progress import PRIOR_SECONDS, Progress  # noqa: E402
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


def _fresh_lab(folder: Path) -> None:
    """Point the data directory and the output cache at ``folder``, sharing the converted models."""
    shared = data_dir()
    for sub in ("models", "tokenizers"):
        (shared / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub).symlink_to(shared / sub, target_is_directory=True)
    os.environ["CHUNKLAB_DATA_DIR"] = str(folder)
    os.environ["CHUNKLAB_CACHE_DIR"] = str(folder / "cache")


def _ratio(eta: float, left: float) -> str:
    return f"{eta:.1f} s / {left:.1f} s = {eta / left:.2f}" if left > 0 else f"{eta:.1f} s / 0 s"


def _before_issue_35(counted: list[tuple[float, int, int]], start: float, end: float, chars_per_s: float) -> list:
    """``(fraction, ETA / actual time left)`` of the job's counts as its ETA was computed before issue 35.

    Then the job counted pairs and the rate measured before (characters/s, ``chars_per_s``) reached it
    unchanged: the ETA was its remaining pairs over that rate blended with its own pairs/s.
    """
    out = []
    for t, done, total in counted:
        elapsed, left = t - start, end - t
        if total and done < total and left > 1.0:
            rate = (PRIOR_SECONDS * chars_per_s + done) / (PRIOR_SECONDS + elapsed)
            out.append((done / total, (total - done) / rate / left))
    return out


def _report(rows_wanted: int, what: str, calibration: str, reports: list, start: float, end: float,
            first: list[tuple[str, float | None]], published: list[float], before: list) -> None:
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
    print()
    # The ETA the job showed at three moments: its start, its first estimate, half its work.
    moments = [("at the start", rows[0] if rows else None)]
    if len(published) > 1:  # one round: its only estimate is the exact one
        t_first = published[0] - start
        moments.append((f"at the first estimate ({t_first:.1f} s)", next((r for r in rows if r[0] >= t_first), None)))
    moments.append(("at about 50% of the work", next((r for r in rows if r[1] >= 0.5), None)))
    for words, row in moments:
        if row is None:
            print(f"ETA {words}: none reported")
        else:
            print(f"ETA {words} (t = {row[0]:.1f} s, {row[1]:.0%} done): {_ratio(row[2], row[3])}")
    later = [eta / left for _t, f, eta, left, _ in rows if f >= 0.1 and left > 1.0]
    # The baseline, from the same reports: the ETA extrapolated from the bar alone (each unit weighing 1,
    # no rate measured before).
    counted = [(t - start, f) for t, f, _eta, _label in reports]
    t0, f0 = counted[0] if counted else (0.0, 0.0)
    plain = [((1 - f) * (t - t0) / (f - f0)) / (actual - t) for t, f in counted
             if f >= 0.1 and f > f0 and actual - t > 1.0 and f < 1.0]
    lo, hi = TARGET
    if later:
        median = statistics.median(later)
        verdict = "within" if lo <= median <= hi else "OUTSIDE"
        print(f"median ETA / actual time left after the first 10% of the work: {median:.2f} "
              f"over {len(later)} reports ({verdict} the target {lo}-{hi}); range {min(later):.2f}-{max(later):.2f}")
    else:
        print("median ETA / actual time left: no report after the first 10% of the work (a longer run)")
    if before:
        later_before = [r for f, r in before if f >= 0.1]
        half = next((r for f, r in before if f >= 0.5), None)
        print(f"baseline, the same counts as the ETA was computed before issue 35 (pairs over characters/s): "
              f"at the start {before[0][1]:.3f}, at 50% {half if half is None else round(half, 3)}, median after 10% "
              f"{statistics.median(later_before) if later_before else float('nan'):.3f}")
    if plain:
        print(f"baseline, the same reports extrapolated from the bar alone: median {statistics.median(plain):.2f} "
              f"(range {min(plain):.2f}-{max(plain):.2f})")
    for words, seconds, actual_s in first:
        if seconds is None:
            print(f"predicted {words}: none")
            continue
        if actual_s is None:
            print(f"predicted {words}: {format_seconds(seconds)} ({seconds:.1f} s); not reached")
            continue
        print(f"predicted {words}: {format_seconds(seconds)} ({seconds:.1f} s) / actual {actual_s:.1f} s = "
              f"{seconds / actual_s:.2f}")


def _chunkings(doc: Document, size: int) -> list[tuple[ConfigEntry, object]]:
    """The job's two configurations of ``doc``: recursive ``size`` tokens and fixed_token 3/4 of it."""
    configs = [ChunkerConfig.make("recursive", {"chunk_size": size, "chunk_overlap": 0}),
               ChunkerConfig.make("fixed_token", {"chunk_size": max(8, 3 * size // 4), "chunk_overlap": 0})]
    return [(ConfigEntry(i, "AB"[i], c), run_chunker(doc, c)) for i, c in enumerate(configs)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", default="technical", help="the bundled sample the job scores (default technical)")
    ap.add_argument("--chars", type=int, default=None, help="its first characters (default all; quick 6,000)")
    ap.add_argument("--chunk-size", type=int, default=160, help="tokens per chunk of the recursive configuration")
    ap.add_argument("--calibrate", type=int, default=None, help="chunks of the calibration job (default 12; quick 8)")
    ap.add_argument("--ppl", action="store_true", help="a PPL scoring pass (token_nll) instead of the anytime job")
    ap.add_argument("--ppl-chars", type=int, default=None, help="characters of the pass (default 24,000; quick 12,000)")
    ap.add_argument("--window", type=int, default=1024, help="the pass's window in tokens (--ppl)")
    ap.add_argument("--load", type=int, default=0, help="busy CPU processes during the calibration and the job")
    ap.add_argument("--quick", action="store_true", help="a short check: 6,000 characters, a calibration of 8 chunks")
    ap.add_argument("--rows", type=int, default=25, help="ETA rows printed (evenly spread)")
    args = ap.parse_args()
    chars = args.chars or (6_000 if args.quick else None)
    calibrate = args.calibrate or (8 if args.quick else 12)
    ppl_chars = args.ppl_chars or (12_000 if args.quick else 24_000)
    samples = {s.name for s in list_samples()}
    if args.sample not in samples:
        ap.error(f"--sample must be one of {', '.join(sorted(samples))}")
    if args.chunk_size < 8 or calibrate < 2 or args.load < 0 or ppl_chars < 1_000 or args.window < 16:
        ap.error("--chunk-size must be at least 8, --calibrate at least 2, --load at least 0, --ppl-chars at least "
                 "1000, --window at least 16")

    folder = Path(tempfile.mkdtemp(prefix="bench-eta-"))
    _fresh_lab(folder)
    scorer = load_scorer(None)
    info = scorer.info
    cache = OutputCache(folder / "cache")
    models = SessionModels.of(scorer)
    published: list[float] = []
    print(f"model {info.name} on {info.device} ({info.dtype}), CHUNKLAB_TORCH_THREADS="
          f"{os.environ.get('CHUNKLAB_TORCH_THREADS')}, {args.load} busy process(es), data dir {folder}")
    if args.ppl:
        text = _english_text(ppl_chars + ppl_chars // 3)
        job_text, calibration_text = text[:ppl_chars], text[ppl_chars:]
        doc = Document.from_text(job_text, source="bench-eta")

        def calibrate_now() -> str:
            ts = scorer.token_nll(calibration_text, window=args.window)
            return f"a pass over {len(ts) - 1:,} tokens"

        def job(progress: Progress) -> str:
            progress.set_unit("tokens")
            ts = scorer.token_nll(job_text, window=args.window, progress=progress)
            return f"a pass over {len(ts) - 1:,} tokens (window {args.window})"

        def estimate() -> list[tuple[str, float | None]]:
            seconds = scoring_estimate(doc, models, window=args.window)
            return [("at the speed measured on this machine" if seconds is not None else "nothing measured", seconds)]
    else:
        text = load_sample(args.sample).text
        doc = Document.from_text(text[:chars] if chars else text, source=f"bench-eta-{args.sample}")
        chunked = _chunkings(doc, args.chunk_size)
        other = next(s.name for s in list_samples() if s.name not in (args.sample, "technical-pdf", "chinese"))
        calibration_doc = Document.from_text(load_sample(other).text, source="bench-eta-calibration")
        calibration_texts = [c.text for c in run_chunker(calibration_doc, ChunkerConfig.make(
            "recursive", {"chunk_size": args.chunk_size, "chunk_overlap": 0})).chunks][:calibrate]

        def plan():
            return plan_quality(doc, chunked, models, metrics=["bc"], window=None, store={}, cache=cache)

        def calibrate_now() -> str:
            conditional_scores(pair_requests(calibration_texts, complete=False), scorer, cache=cache)
            return f"{2 * len(calibration_texts) - 1} pairs of {other}"

        def job(progress: Progress) -> str:
            run = plan().job.run(progress)
            n = [len(ch.chunks) for _, ch in chunked]
            return (f"BC of {args.sample} ({len(doc.text):,} characters) in {n[0]} and {n[1]} chunks: every round to "
                    f"the exact tables ({sum(2 * k - 1 for k in n)} pairs) in {run.seconds:.1f} s of scoring")

        def estimate() -> list[tuple[str, float | None]]:
            cost = plan().cost
            words = "at the speed measured on this machine" if cost.measured else "by the guess"
            return [(f"first estimates, {words}", cost.first_seconds if cost.anytime else None),
                    (f"exact values, {words}", cost.seconds)]

    guess = estimate()
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
        measured = estimate()
        chars_per_s = plan().throughput.chars_per_s if not args.ppl else None
        counted: list[tuple[float, int, int]] = []
        reports: list[tuple[float, float, float | None, str]] = []
        start = time.perf_counter()
        what = job(Progress(lambda f, eta, label: reports.append((time.perf_counter(), f, eta, label)),
                            counts=lambda done, total: counted.append((time.perf_counter(), done, total)),
                            partial=None if args.ppl else lambda _value: published.append(time.perf_counter())))
        end = time.perf_counter()
    finally:
        for p in busy:
            p.terminate()
        for p in busy:
            p.join()
    # What each prediction is compared with: the first estimate's arrival for the first, the end for the rest.
    arrivals = [published[0] - start if published else None] if len(measured) > 1 else []
    arrivals.append(end - start)
    first = [(w, s, a) for (w, s), a in zip(measured, arrivals, strict=True)]
    first += [(f"{w} (before anything was measured)", s, a) for (w, s), a in zip(guess, arrivals, strict=True)]
    before = _before_issue_35(counted, start, end, chars_per_s) if chars_per_s else []
    _report(args.rows, what, calibration, reports, start, end, first, published, before)


if __name__ == "__main__":
    main()
