"""What every θ re-chunks from: one document's per-sentence scores and margin-sampling decisions, and their CSV.

The model runs once per document (a scoring pass, or one margin per sentence); these plain
records keep its outputs so that moving a threshold, switching the rule or the target length
re-chunks through :meth:`~backend.chunkers.meta.chunkers.PPLChunker.chunk_from_means` and
:meth:`~backend.chunkers.meta.chunkers.MarginSamplingChunker.chunk_from_steps` with no model call.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from backend.chunkers.meta.algorithms import Candidate, MarginStep
from backend.chunking import Chunking
from backend.models.scoring import SentenceScore, score_sentences
from backend.models.types import TokenScores
from backend.text.document import Document

__all__ = ["PPLScores", "MarginResult", "values_csv"]

CSV_COLUMNS = ("index", "start", "end", "tokens", "nll_mean", "ppl")  # then the value, drop, boundary, chunk, text


@dataclass(frozen=True)
class PPLScores:
    """One document's per-sentence scores under one model: what every θ re-chunks from.

    Attributes:
        doc_id: The document's id.
        model: The model's identity (the app's session model key; any string that tells models apart).
        model_name: Its display name.
        sentences: One :class:`SentenceScore` per sentence of the document.
    """

    doc_id: str
    model: str
    model_name: str
    sentences: tuple[SentenceScore, ...]

    @classmethod
    def build(cls, doc: Document, scores: TokenScores, model: str, model_name: str) -> PPLScores:
        """Per-sentence means of a document's token scores (:func:`backend.models.scoring.score_sentences`)."""
        return cls(doc.id, model, model_name, tuple(score_sentences(doc, scores)))

    @property
    def nll(self) -> list[float]:
        """Mean NLL per sentence (nan: no scored token), as the PPL chunkers compute it."""
        return [s.nll_mean for s in self.sentences]

    @property
    def tokens(self) -> list[int]:
        """Scored model tokens per sentence."""
        return [s.tokens for s in self.sentences]


@dataclass(frozen=True)
class MarginResult:
    """Margin sampling's decisions on one document, model and unit.

    Attributes:
        doc_id: The document's id.
        model: The model's identity.
        unit: ``chunk`` or ``sentence``: what each sentence was compared with.
        steps: One :class:`MarginStep` per sentence after the first.
    """

    doc_id: str
    model: str
    unit: str
    steps: tuple[MarginStep, ...]


def _number(x: float | None) -> str:
    """A CSV cell: ``repr`` of a finite number, empty for None, nan or inf."""
    return "" if x is None or not math.isfinite(x) else repr(float(x))


def values_csv(
    scores: PPLScores,
    values: Sequence[float],
    candidates: Sequence[Candidate],
    kept: Sequence[int],
    chunking: Chunking,
    value_name: str,
) -> str:
    """One CSV row per sentence: what the PPL page draws, for a spreadsheet.

    Columns: ``index, start, end, tokens, nll_mean, ppl``, the compared value (headed
    ``value_name``), its ``drop`` (empty: not a candidate), ``boundary`` (1: the sentence ends a
    chunk), ``chunk`` (the last chunk starting at or before the sentence) and ``text``.

    Args:
        scores: The per-sentence scores.
        values: The compared value per sentence (:func:`~backend.chunkers.meta.algorithms.sentence_values`).
        candidates: :func:`~backend.chunkers.meta.algorithms.boundary_candidates` of ``values``.
        kept: The sentences that end a chunk at the current θ.
        chunking: The chunks of the current configuration.
        value_name: The value column's header (``nll`` or ``ppl``).
    """
    drop = {c.index: c.drop for c in candidates}
    cut = set(kept)
    starts = [c.start for c in chunking.chunks]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, value_name, "drop", "boundary", "chunk", "text"])
    for s, v in zip(scores.sentences, values):
        chunk = bisect.bisect_right(starts, s.start) - 1 if starts else -1
        writer.writerow([
            s.index, s.start, s.end, s.tokens, _number(s.nll_mean), _number(s.ppl), _number(v),
            _number(drop.get(s.index)), int(s.index in cut), chunk if chunk >= 0 else "", s.text,
        ])
    return buf.getvalue()
