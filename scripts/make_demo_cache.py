"""Regenerate ``assets/demo/cache``: the output-cache entries demo mode serves (``CHUNKLAB_DEMO=1``).

Runs the bundled models (SmolLM2, all-MiniLM-L6-v2) on the demo sample with the demo setup
(:data:`backend.samples.DEMO`), through the same backend calls the pages make — the chunkers'
model context, the Quality page's scoring job under its default metrics (BC and DS), the
Summary's (BC, CS and DS: every ordered pair within the default pair window, as its quality
plan scores them), the Retrieval page's search job, the Benchmark page's job — against an
empty cache folder and an empty Chroma folder, then replaces the
shipped folder with exactly the entries those runs wrote. Entry names are the sha256 of their
keys (model weight fingerprints and text hashes), so a rerun with the same models writes the
same names; it ends by reading every entry back through a cache-only context, as the app does.

Usage (from the checkout's root; most of the time goes to the Summary's 939 pairs, about 16
minutes of SmolLM2 on a free laptop CPU, far longer on a busy one; ``--work DIR`` keeps what was
computed, so an interrupted run resumes):

    .venv/bin/python scripts/make_demo_cache.py [--work DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def generate(work: Path) -> Path:
    """Run every demo computation with caches under ``work``; the folder of entries it wrote."""
    # Read by the backend at call time: everything below writes under ``work`` only.
    os.environ["CHUNKLAB_CACHE_DIR"] = str(work / "cache")
    os.environ["CHUNKLAB_DATA_DIR"] = str(work / "data")
    os.environ.pop("CHUNKLAB_DEMO", None)
    os.environ.pop("CHROMA_HOST", None)

    from backend.chunkers import ModelContext, make_chunker, run_chunker
    from backend.lab.settings import setting
    from backend.metrics.report import METRICS, model_needs
    from backend.metrics.scores import score_chunkings
    from backend.models.cache import default_cache
    from backend.models.embedder import load_embedder
    from backend.models.identity import embedder_fingerprint_without_loading, fingerprint_without_loading
    from backend.progress import Progress
    from backend.retrieval.jobs import benchmark_job, search_job
    from backend.retrieval.questions import load_sample_question_set
    from backend.samples import DEMO, load_sample

    cache = default_cache()
    assert not cache.fallback_dirs, "the demo entries must be computed, not read back"
    doc = load_sample(DEMO.sample)
    configs = [make_chunker(name, params).config for name, params in DEMO.configs]
    context = ModelContext()

    t0 = time.perf_counter()
    chunkings = [run_chunker(doc, config, context) for config in configs]  # token scores, sentence embeddings
    for config, chunking in zip(configs, chunkings):
        _say(f"{config.label}: {len(chunking.chunks)} chunks")
    scorer, embedder = context.get_scorer(), load_embedder(None)
    # The keys the app computes without loading a model must be the loaded models' own.
    assert scorer.info.fingerprint == fingerprint_without_loading(None), "LM fingerprint differs from the file's"
    assert embedder.info.fingerprint == embedder_fingerprint_without_loading(None), "embedder fingerprint differs"
    _say(f"chunked in {time.perf_counter() - t0:.1f} s")

    # Retrieval: the demo question against every configuration (chunk and query embeddings).
    questions = load_sample_question_set(DEMO.sample)
    query = questions.questions[DEMO.question].question
    tags = [chr(ord("A") + i) for i in range(len(configs))]
    search_job(doc, dict(zip(tags, chunkings)), None, query, DEMO.k)(Progress())  # a silent progress
    # Benchmark: the bundled question set (its questions' embeddings; the chunks' are shared).
    benchmark_job(questions, configs, None, DEMO.k, True)(scorer, Progress())
    _say("retrieval and benchmark embeddings done")

    # Quality with the page's default metrics (BC: the adjacent pairs; DS: the chunks' embeddings).
    t0 = time.perf_counter()
    score_chunkings(chunkings, scorer=scorer, embedder=lambda: embedder, complete=False, window=None, cache=cache)
    _say(f"quality pairs in {time.perf_counter() - t0:.1f} s")
    # The Summary: BC, CS and DS under the Quality page's default settings, as its quality plan scores them
    # (backend.lab.quality.plan_quality): CS needs every ordered pair within the default pair window.
    t0 = time.perf_counter()
    needs = model_needs(METRICS)
    window = setting("quality", "window").default or None
    score_chunkings(
        chunkings, scorer=scorer, embedder=lambda: embedder, complete=needs.complete, window=window, cache=cache
    )
    _say(f"the Summary's pair tables (every pair within w = {window}) in {time.perf_counter() - t0:.1f} s")
    return cache.directory


def check(empty: Path) -> None:
    """Every demo chunking reads back in demo mode, with an empty main cache, through the app's cache-only context."""
    os.environ["CHUNKLAB_CACHE_DIR"] = str(empty)
    os.environ["CHUNKLAB_DEMO"] = "1"
    from backend.chunkers import ModelContext, make_chunker, run_chunker
    from backend.chunkers.context import unloaded_model_info
    from backend.models.identity import fingerprint_without_loading
    from backend.samples import DEMO, load_sample

    doc = load_sample(DEMO.sample)
    context = ModelContext.cache_only(unloaded_model_info("SmolLM2", fingerprint_without_loading(None)))
    for name, params in DEMO.configs:
        run_chunker(doc, make_chunker(name, params).config, context)  # NotCached on a miss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", type=Path, default=None,
        help="keep the runs' cache and Chroma folders here, so an interrupted run resumes (default: a temporary folder)",
    )
    parser.add_argument(
        "--out", type=Path, default=None,
        help="write the entries here instead of assets/demo/cache (and skip the read-back check)",
    )
    args = parser.parse_args()
    from backend.models.cache import DEMO_CACHE_DIR

    out = args.out or DEMO_CACHE_DIR
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chunklab-demo-") as tmp:
        written = generate(args.work or Path(tmp))
        entries = sorted(written.glob("*.entry"))
        if out == DEMO_CACHE_DIR and out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        for path in entries:
            shutil.copyfile(path, out / path.name)
    if out == DEMO_CACHE_DIR:
        with tempfile.TemporaryDirectory(prefix="chunklab-demo-check-") as empty:
            check(Path(empty))
    size = sum(p.stat().st_size for p in out.glob("*.entry"))
    print(f"{len(entries)} entries, {size / 2**20:.2f} MiB in {out}, generated in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
