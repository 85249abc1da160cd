"""One document's rows of a corpus run: the pure function every engine calls.

:func:`document_rows` loads the document, runs each configuration of the spec and computes what
the spec's metrics ask: the statistics, MoC's BC/CS/DS (exact, or estimates with 95% intervals
under a pair budget), and the retrieval metrics on the question set's questions about this
document. Its numbers depend only on the document, the spec and the models (never on the engine,
the worker or the order), so ``--engine local`` and ``--engine ray`` agree exactly.

The model work goes through the :class:`~backend.chunkers.context.ModelContext` given; wrapped
in :class:`CountedContext` each call is counted, so every row says what it cost
(:class:`WorkCounts`: pairs and tokens scored, texts embedded, seconds per kind of work), and a
resumed run can be shown to recompute nothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ConfigEntry
from backend.corpus.inputs import CorpusFile
from backend.corpus.spec import CorpusSpec
from backend.errors import ChunkLabError, InputError, ModelError, StoreError
from backend.loaders import load_bytes
from backend.metrics.report import METRIC_TABLE, model_needs
from backend.metrics.scores import LazyScorer, quality_report
from backend.metrics.stats import chunking_stats
from backend.models.cache import OutputCache
from backend.retrieval.evaluate import evaluate
from backend.retrieval.store import ChunkStore
from backend.text.document import Document

__all__ = [
    "QUALITY_COLUMNS",
    "RETRIEVAL_COLUMNS",
    "STATS_COLUMNS",
    "CountedContext",
    "DocumentOutcome",
    "Unit",
    "WorkCounts",
    "document_rows",
    "load_corpus_document",
]

STATS_COLUMNS = ("chunks", "mean_tokens", "median_tokens", "min_tokens", "max_tokens", "std_tokens", "mean_chars",
                 "overlap_chars")
QUALITY_COLUMNS = tuple(m.name for m in METRIC_TABLE)  # bc, cs_complete, cs_incomplete, ds
RETRIEVAL_COLUMNS = ("recall", "precision", "precision_omega", "iou")


@dataclass
class WorkCounts:
    """Model work done (counted at the model's door: a cache hit counts nothing).

    Attributes:
        pairs_scored: ``(context, continuation)`` pairs the language model scored (BC, CS).
        tokens_scored: Document tokens it scored (PPL chunkers).
        texts_embedded: Texts the embedder embedded (DS, retrieval, semantic chunkers).
        model_calls: Calls into either model.
    """

    pairs_scored: int = 0
    tokens_scored: int = 0
    texts_embedded: int = 0
    model_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **amounts: int) -> None:
        """Add to the counts (thread-safe)."""
        with self._lock:
            for name, n in amounts.items():
                setattr(self, name, getattr(self, name) + int(n))

    def snapshot(self) -> dict[str, int]:
        """The four counts as a dict."""
        with self._lock:
            return {"pairs_scored": self.pairs_scored, "tokens_scored": self.tokens_scored,
                    "texts_embedded": self.texts_embedded, "model_calls": self.model_calls}


class _CountedScorer:
    """A scorer that counts what it is asked to score, and delegates everything."""

    def __init__(self, inner: Any, counts: WorkCounts) -> None:
        self._inner = inner
        self._counts = counts
        self.info = inner.info

    def conditional_nll(self, pairs: Sequence[tuple[str, str]], *, progress: Any = None) -> list[float]:
        self._counts.add(pairs_scored=len(pairs), model_calls=1)
        return self._inner.conditional_nll(pairs, progress=progress)

    def token_nll(self, text: str, *, window: int | None = None, progress: Any = None) -> Any:
        scores = self._inner.token_nll(text, window=window, progress=progress)
        self._counts.add(tokens_scored=len(getattr(scores, "nll", ())), model_calls=1)
        return scores

    def next_token_probs(self, prompt: Any, candidates: Sequence[str]) -> dict[str, float]:
        self._counts.add(model_calls=1)
        return self._inner.next_token_probs(prompt, candidates)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CountedEmbedder:
    """An embedder that counts the texts it embeds, and delegates everything."""

    def __init__(self, inner: Any, counts: WorkCounts) -> None:
        self._inner = inner
        self._counts = counts
        self.info = inner.info

    def embed(self, texts: Sequence[str], *, progress: Any = None) -> Any:
        self._counts.add(texts_embedded=len(texts), model_calls=1)
        return self._inner.embed(texts, progress=progress)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class CountedContext(ModelContext):
    """A :class:`ModelContext` whose scorer and embedder count their work in :attr:`counts`.

    A scorer or embedder given (e.g. a Ray actor's stand-in) is wrapped on first use, as is
    one loaded on demand; a fully cached document loads nothing and counts nothing.
    """

    counts: WorkCounts = field(default_factory=WorkCounts)

    def get_scorer(self) -> Any:
        scorer = super().get_scorer()
        if not isinstance(scorer, _CountedScorer):
            scorer = self.scorer = _CountedScorer(scorer, self.counts)
        return scorer

    def get_embedder(self) -> Any:
        embedder = super().get_embedder()
        if not isinstance(embedder, _CountedEmbedder):
            embedder = self.embedder = _CountedEmbedder(embedder, self.counts)
        return embedder


@dataclass(frozen=True)
class Unit:
    """One document to run, with the configurations it still lacks (what an engine is handed)."""

    file: CorpusFile
    configs: tuple[ConfigEntry, ...]


@dataclass(frozen=True)
class DocumentOutcome:
    """What one document gave: its rows (one per configuration), or why it was skipped.

    Attributes:
        name: The document's name in the corpus.
        rows: One JSON-ready row per configuration (see :func:`document_rows`); empty when skipped.
        error: Why the document gives no rows (one line), or None.
        seconds: Wall time of the whole document.
    """

    name: str
    rows: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    seconds: float = 0.0


def load_corpus_document(file: CorpusFile, data: bytes | None = None) -> Document:
    """The document of ``file``: from ``data`` when given (bytes sent to a worker that cannot see the path), else read.

    Its ``source`` is the corpus name (``sub/report.pdf``), so every row and page names it the same way.

    Raises:
        InputError: the file cannot be read or parsed (one line).
    """
    try:
        if data is None:
            data = file.path.read_bytes()
    except OSError as e:
        raise InputError(f"{file.name}: cannot be read ({e.strerror or e})") from None
    return load_bytes(data, file.name)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _estimate_json(est: Any) -> dict[str, Any] | None:
    if est is None:
        return None
    raw = est.to_json()
    return {k: (_finite(v) if isinstance(v, float) else v) for k, v in raw.items()}


def _retrieval(doc: Document, entry: ConfigEntry, spec: CorpusSpec, context: CountedContext,
               cache: OutputCache | None, store: ChunkStore | None) -> dict[str, Any]:
    assert spec.questions is not None
    mine = spec.questions.on_document(doc)
    if mine is None:
        return {"questions": 0, **{m: None for m in RETRIEVAL_COLUMNS}, "corpora": [],
                "per_question": {m: [] for m in RETRIEVAL_COLUMNS}}
    bench = evaluate(mine, [entry.config], embedder=context.get_embedder(), retrieve=spec.retrieve, store=store,
                     cache=cache, use_cache=cache is not None, context=context, cross_corpus=False)
    result = bench.results[0]
    s = result.summary
    # The per-question scores (in the order of the document's questions in the set, which the set's
    # corpus ids in ``corpora`` pick out) are what an interval over questions needs, e.g. the tuner's.
    return {"questions": int(s.questions), **{m: _finite(getattr(s, f"{m}_mean")) for m in RETRIEVAL_COLUMNS},
            "corpora": list(mine.corpus_ids),
            "per_question": {m: [_finite(q.metric(m)) for q in result.questions] for m in RETRIEVAL_COLUMNS}}


def _config_row(doc: Document, entry: ConfigEntry, spec: CorpusSpec, context: CountedContext,
                cache: OutputCache | None, store: ChunkStore | None) -> dict[str, Any]:
    before = context.counts.snapshot()
    t0 = time.perf_counter()
    chunking = run_chunker(doc, entry.config, context)
    t1 = time.perf_counter()
    stats = chunking_stats([chunking])[0]
    row: dict[str, Any] = {"tag": entry.tag, "config": entry.config.spec, "label": entry.config.label}
    row.update({c: stats[c] for c in STATS_COLUMNS})
    quality: dict[str, Any] = {}
    if spec.quality_metrics:
        texts = [c.text for c in chunking.chunks]
        needs = model_needs(spec.quality_metrics)
        report = quality_report(
            texts, chunking.token_counts, metrics=spec.quality_metrics,
            scorer=LazyScorer(context) if needs.scorer and len(texts) > 1 else None,
            embedder=context.get_embedder() if needs.embedder and len(texts) > 1 else None,
            settings=spec.settings, cache=cache, pairs=spec.pairs, seed=spec.seed,
        )
        quality = {name: _estimate_json(report.estimates.get(name)) for name in QUALITY_COLUMNS}
    t2 = time.perf_counter()
    row.update({name: quality.get(name) for name in QUALITY_COLUMNS})
    row["retrieval"] = _retrieval(doc, entry, spec, context, cache, store) if "retrieval" in spec.metrics else None
    t3 = time.perf_counter()
    after = context.counts.snapshot()
    row["work"] = {k: after[k] - before[k] for k in after} | {
        "chunk_s": round(t1 - t0, 4), "quality_s": round(t2 - t1, 4), "retrieval_s": round(t3 - t2, 4)}
    return row


def document_rows(
    file: CorpusFile,
    spec: CorpusSpec,
    context: CountedContext,
    *,
    cache: OutputCache | None,
    store: ChunkStore | None = None,
    data: bytes | None = None,
    configs: Sequence[ConfigEntry] | None = None,
) -> DocumentOutcome:
    """The rows of one document: per configuration its statistics, quality metrics and retrieval metrics.

    A row is ``{"doc", "doc_id", "chars", "tag", "config", "label", <STATS_COLUMNS>,
    <QUALITY_COLUMNS>: estimate JSON or None, "retrieval": {"questions", <RETRIEVAL_COLUMNS>, "corpora",
    "per_question"} or None,
    "work": {"pairs_scored", "tokens_scored", "texts_embedded", "model_calls", "chunk_s",
    "quality_s", "retrieval_s"}}``. ``retrieval``'s means are over the document's questions: those of the
    set whose corpus is one of ``corpora`` (the corpus ids whose text is the document's), in the set's
    order; ``per_question`` holds each metric's value per such question in that order (None: not
    finite). A configuration that fails on this document gives
    ``{"doc", "doc_id", "tag", "config", "label", "error"}`` instead (the others still run).

    Args:
        file: The document.
        spec: What to compute.
        context: The models (counted); the same one for every document of a worker.
        cache: The output cache model outputs go through (None: no cache).
        store: The Chroma store retrieval indexes into (None: the default store).
        data: The file's bytes when the worker cannot read its path.
        configs: Only these configurations (a resumed run's missing ones); default all.

    Raises:
        ModelError: a model cannot be loaded or fails (it would fail every document: the run stops).
        StoreError: the store fails.
    """
    t0 = time.perf_counter()
    try:
        doc = load_corpus_document(file, data)
    except ChunkLabError as e:
        return DocumentOutcome(file.name, error=str(e).splitlines()[0] if str(e) else type(e).__name__,
                               seconds=time.perf_counter() - t0)
    rows = []
    for entry in configs if configs is not None else spec.configs:
        head = {"doc": file.name, "doc_id": doc.id, "chars": len(doc.text)}
        try:
            rows.append(head | _config_row(doc, entry, spec, context, cache, store))
        except (ModelError, StoreError):
            raise
        except ChunkLabError as e:
            rows.append(head | {"tag": entry.tag, "config": entry.config.spec, "label": entry.config.label,
                                "error": str(e).splitlines()[0] if str(e) else type(e).__name__})
    return DocumentOutcome(file.name, rows=tuple(rows), seconds=time.perf_counter() - t0)
