"""The Document and Models pages' work: the text preview's parts, and one scoring pass's per-sentence summary.

``python -m backend info`` prints the same statistics (:func:`backend.metrics.stats.document_stats`)
and ``python -m backend ppl`` the same per-sentence scores (:func:`backend.models.scoring.sentence_scores`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from backend.lab.jobs import JobPlan
from backend.models.cache import OutputCache
from backend.models.scoring import SentenceScore, sentence_scores
from backend.models.types import Scorer
from backend.progress import Progress
from backend.text.document import Document

__all__ = ["PREVIEW_CHARS", "Preview", "preview_count", "preview", "ScoreSummary", "plan_sentence_scores"]

PREVIEW_CHARS = 10_000  # characters per preview part of a document without pages


@dataclass(frozen=True)
class Preview:
    """One part of the text preview: a PDF page, else a window of :data:`PREVIEW_CHARS` characters.

    Attributes:
        unit: ``Page`` or ``Part``.
        number: Which one (1-based, clipped to the document).
        count: How many there are.
        start: Its first character.
        end: Its end (exclusive).
    """

    unit: str
    number: int
    count: int
    start: int
    end: int

    def caption(self, doc_length: int) -> str:
        """``Page 2 of 7 · characters 3,210–6,544 of 20,000``."""
        return f"{self.unit} {self.number} of {self.count:,} · characters {self.start:,}–{self.end:,} of {doc_length:,}"


def preview_count(doc: Document) -> int:
    """How many preview parts ``doc`` has (its pages, else windows of :data:`PREVIEW_CHARS`)."""
    if len(doc.pages) > 1:
        return len(doc.pages)
    return max(1, -(-len(doc.text) // PREVIEW_CHARS))


def preview(doc: Document, number: int) -> Preview:
    """Preview part ``number`` (1-based, clipped) of ``doc``: paged documents page by page."""
    count = preview_count(doc)
    number = min(max(1, number), count)
    if len(doc.pages) > 1:
        page = doc.pages[number - 1]
        return Preview("Page", number, count, page.start, page.end)
    start = (number - 1) * PREVIEW_CHARS
    return Preview("Part", number, count, start, min(start + PREVIEW_CHARS, len(doc.text)))


@dataclass(frozen=True)
class ScoreSummary:
    """One scoring pass over a document, per sentence, with the figures the Models page leads with.

    Attributes:
        sentences: Every sentence's score (:class:`~backend.models.scoring.SentenceScore`).
        scored_tokens: Tokens scored (the document's first token has no context).
        mean_nll: The token-weighted mean NLL (nan when nothing was scored).
        model: The model's name.
    """

    sentences: tuple[SentenceScore, ...]
    scored_tokens: int
    mean_nll: float
    model: str

    @classmethod
    def of(cls, sentences: list[SentenceScore], model: str) -> ScoreSummary:
        """Summarize per-sentence scores."""
        scored = [s for s in sentences if s.tokens]
        total = sum(s.tokens for s in scored)
        mean = sum(s.nll_mean * s.tokens for s in scored) / total if total else math.nan
        return cls(tuple(sentences), total, mean, model)

    @property
    def curve_ready(self) -> bool:
        """Whether there are two scored sentences or more (a line to draw)."""
        return sum(1 for s in self.sentences if s.tokens) > 1

    def rows(self) -> list[dict[str, Any]]:
        """The table: one record per sentence (``python -m backend ppl``'s records)."""
        return [s.to_json() for s in self.sentences]


def plan_sentence_scores(doc: Document, scorer: Scorer, cache: OutputCache | None) -> JobPlan:
    """The Models page's job: score ``doc`` per sentence with a loaded ``scorer`` (through the output cache)."""
    name = scorer.info.name

    def body(_scorer: Scorer | None, progress: Progress) -> ScoreSummary:
        return ScoreSummary.of(sentence_scores(doc, scorer, cache=cache, progress=progress), name)

    return JobPlan(f"Scoring {doc.source}", ("sentence-scores", doc.id, scorer.info.fingerprint), body, model=name)
