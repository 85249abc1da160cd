"""Meta-Chunking chunkers: ``ppl``, ``ppl_combined``, ``ppl_overlap`` and ``margin_sampling``.

The algorithms are in :mod:`backend.chunkers.meta.algorithms`; here they meet the model backend (through
the :class:`~backend.chunkers.context.ModelContext` the caller passes) and the registry.
Chunks are whole sentences: a chunk runs from its first sentence's start to its last
sentence's end, so the whitespace between two chunks belongs to neither.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.chunkers.base import TOKEN_LENGTHS, Chunker, Param, Search, register
from backend.chunkers.context import ModelContext
from backend.chunkers.meta.algorithms import (
    RULES,
    VALUES,
    Boundaries,
    Candidate,
    MarginStep,
    boundaries_at,
    boundary_candidates,
    combine,
    find_minima,
    margin_messages,
    margin_sampling_steps,
    meta_chunk_ranges,
    overlap_ranges,
    ranges_from_steps,
    sentence_values,
)
from backend.chunking import Chunking
from backend.curves import Curve, chunk_end_points
from backend.errors import ParameterError
from backend.models.cache import text_digest
from backend.models.scoring import score_sentences
from backend.models.timing import SECONDS_FIELD, record_cached, record_computed
from backend.text.document import Document
from backend.tokenizers import SpanCounter, Tokenizer

__all__ = [
    "PPLCut",
    "PPLChunker",
    "PPLCombinedChunker",
    "PPLOverlapChunker",
    "MarginSamplingChunker",
    "checked_counter",
    "ppl_spans",
    "sentence_nll_means",
    "margin_steps",
]

MARGIN_VERSION = 1  # bump when the prompt or the margin computation changes


# θ a tuner tries (drops of mean token NLL, in nats, under the default rule and value). On the bundled
# technical sample scored by SmolLM2, θ 0 cuts at every minimum (mean chunk 58 tokens), 1.0 gives 77, 2.0 127,
# 3.0 341: 0-4 in steps of 0.1 spans "every minimum" to "a handful of cuts". Re-chunking at another θ reads
# the cached scores (milliseconds), so the fine grid costs no model time (backend/tune/space.py).
THRESHOLDS = Search(low=0.0, high=4.0, step=0.1)
# With dynamic combination the paper cuts at θ 0 and lets target_length set the size: a coarse θ grid.
COMBINED_THRESHOLDS = Search(low=0.0, high=2.0, step=0.5)


def _rule_params(threshold_default: float, search: Search) -> tuple[Param, ...]:
    return (
        Param(
            "threshold",
            "float",
            threshold_default,
            "θ: a local minimum of the per-sentence values closes a chunk when its drop reaches θ "
            "(larger θ, fewer and longer chunks).",
            search=search,
        ),
        Param(
            "rule",
            "str",
            "reference",
            "reference: the authors' code (larger drop >= θ, plateau allowed); paper: eq. 3 "
            "(smaller drop > θ).",
            choices=RULES,
        ),
        Param("value", "str", "nll", "Compare mean token NLL (the authors' code) or perplexity (the paper).",
              choices=VALUES),
    )


_TARGET = Param(
    "target_length",
    "int",
    200,
    "Dynamic combination: merge adjacent meta-chunks while a chunk stays within this many tokens "
    "(a longer meta-chunk stands alone).",
    min=1,
    max=100_000,
    search=TOKEN_LENGTHS,
)


def sentence_nll_means(doc: Document, context: ModelContext) -> list[float]:
    """Each sentence's mean token NLL given all preceding text (nan for a sentence with no scored token).

    The same numbers as :attr:`backend.chunkers.meta.results.PPLScores.nll` of the same token scores.
    """
    return [s.nll_mean for s in score_sentences(doc, context.token_scores(doc.text))]


def ppl_spans(
    doc: Document,
    values: Sequence[float],
    tokenizer: Tokenizer,
    *,
    threshold: float,
    rule: str = "reference",
    target_length: int | None = None,
    overlap: bool = False,
    counter: SpanCounter | None = None,
) -> list[tuple[int, int, int]]:
    """PPL chunking of ``doc`` from per-sentence values, with no model call.

    Args:
        doc: The document; ``values[i]`` belongs to ``doc.sentences[i]``.
        values: Per-sentence values (:func:`backend.chunkers.meta.algorithms.sentence_values`).
        tokenizer: Counts chunk tokens.
        threshold: θ.
        rule: ``reference`` or ``paper``.
        target_length: Dynamic combination to this many tokens; None for plain meta-chunks.
        overlap: Minimum sentences open the next chunk too (``ppl_overlap``).
        counter: A :class:`SpanCounter` of ``doc.text`` to reuse (the slider re-chunks often).

    Returns:
        ``(start, end, tokens)`` per chunk.
    """
    _check_length(doc, values)
    return _spans_at(doc, find_minima(values, threshold, rule), tokenizer, target_length, overlap, counter)


def _check_length(doc: Document, values: Sequence[float]) -> None:
    """One value per sentence, or a one-line error."""
    if len(values) != len(doc.sentences):
        raise ParameterError(f"{len(values)} values for {len(doc.sentences)} sentences")


def _spans_at(
    doc: Document,
    minima: Sequence[int],
    tokenizer: Tokenizer,
    target_length: int | None,
    overlap: bool,
    counter: SpanCounter | None,
) -> list[tuple[int, int, int]]:
    """``(start, end, tokens)`` of the chunks that end at the sentences ``minima`` (combined, or overlapping)."""
    sentences = doc.sentences
    counter = checked_counter(doc, tokenizer, counter)
    ranges = (overlap_ranges if overlap else meta_chunk_ranges)(len(sentences), minima)
    spans = [(sentences[a].start, sentences[b].end) for a, b in ranges]
    if target_length is not None:
        return combine(doc.text, spans, counter, target_length)
    return [(s, e, n) for (s, e), n in zip(spans, counter.count_many(spans))]


def checked_counter(doc: Document, tokenizer: Tokenizer, counter: SpanCounter | None) -> SpanCounter:
    """``counter`` when it counts ``doc.text`` with ``tokenizer`` (a new one when None).

    A caller that keeps a counter between re-chunks (the PPL page) passes it back here; one
    left over from another document or tokenizer would count the wrong text.

    Raises:
        ParameterError: the counter counts another text or with another tokenizer.
    """
    if counter is None:
        return SpanCounter(tokenizer, doc.text)
    if counter.tokenizer.name != tokenizer.name:
        raise ParameterError(f"the span counter counts {counter.tokenizer.name} tokens, not {tokenizer.name}")
    if counter.text is not doc.text and counter.text != doc.text:
        raise ParameterError(f"the span counter counts another text than document {doc.id}")
    return counter


@dataclass(frozen=True, eq=False)
class PPLCut:
    """One PPL chunker's cut of a document from its per-sentence mean NLLs: what it compared, where it cut, the chunks.

    Computed once (:meth:`_PPLBase.cut_from_means`): the page draws these very candidates and
    cuts, and shows these very chunks, so a chart cannot disagree with the chunking.

    Attributes:
        values: The compared value per sentence (mean NLL, or perplexity for ``value="ppl"``).
        candidates: Every sentence that closes a chunk at some threshold, with its drop.
        boundaries: The cuts at the chunker's θ under its rule, and the minima a θ bar is drawn on.
        chunking: The chunks, timed and checked as :meth:`~backend.chunkers.base.Chunker.chunk` does.
    """

    values: np.ndarray
    candidates: tuple[Candidate, ...]
    boundaries: Boundaries
    chunking: Chunking


class _PPLBase(Chunker):
    family = "meta-chunking"
    needs = ("lm",)
    _overlap = False
    _combined = False

    def _cut(
        self, doc: Document, nll_means: Sequence[float], counter: SpanCounter | None
    ) -> tuple[np.ndarray, list[Candidate], Boundaries, list[tuple[int, int, int]]]:
        """Values, candidates, the cuts at θ and the spans: one pass, shared by every entry below."""
        values = sentence_values(nll_means, self.values["value"])
        _check_length(doc, values)
        rule = self.values["rule"]
        candidates = boundary_candidates(values, rule)
        cuts = boundaries_at(candidates, self.values["threshold"], rule)
        target = self.values["target_length"] if self._combined else None
        return values, candidates, cuts, _spans_at(doc, cuts.kept, self.tokenizer, target, self._overlap, counter)

    def spans_from_means(
        self, doc: Document, nll_means: Sequence[float], counter: SpanCounter | None = None
    ) -> list[tuple[int, int, int]]:
        """This chunker's ``(start, end, tokens)`` spans of ``doc`` from per-sentence mean NLLs (no model call).

        Args:
            doc: The document; ``nll_means[i]`` belongs to ``doc.sentences[i]``.
            nll_means: :func:`sentence_nll_means` (or :attr:`~backend.chunkers.meta.results.PPLScores.nll`).
            counter: A :class:`SpanCounter` of ``doc.text`` with this chunker's tokenizer to reuse.
        """
        return self._cut(doc, nll_means, counter)[3]

    def cut_from_means(
        self, doc: Document, nll_means: Sequence[float], counter: SpanCounter | None = None
    ) -> PPLCut:
        """The chunks :meth:`chunk_from_means` gives, with the values, candidates and cuts they were cut at.

        One computation: what a page draws beside the chunks (the minima, the θ bars, the
        boundaries, the drop histogram) is what the chunker cut at, never a second
        :func:`~backend.chunkers.meta.algorithms.boundaries_at` beside it.

        Args:
            doc: The document.
            nll_means: One mean NLL per sentence (nan or None: no scored token).
            counter: A :class:`SpanCounter` of ``doc.text`` with this chunker's tokenizer to reuse.

        Raises:
            ParameterError: not one value per sentence, or a counter of another text or tokenizer.
        """
        found: list[tuple[np.ndarray, list[Candidate], Boundaries]] = []

        def split(d: Document) -> list[tuple[int, int, int]]:
            values, candidates, cuts, spans = self._cut(d, nll_means, counter)
            found.append((values, candidates, cuts))
            return spans

        chunking = self.chunk_with(doc, split)  # timed and checked like chunk(), the cut included
        values, candidates, cuts = found[0]
        return PPLCut(values, tuple(candidates), cuts, chunking)

    def chunk_from_means(
        self, doc: Document, nll_means: Sequence[float], counter: SpanCounter | None = None
    ) -> Chunking:
        """What :meth:`chunk` gives when the per-sentence mean NLLs are already known: timed and checked alike.

        The PPL page re-chunks on every θ move from the scores it holds (through
        :meth:`cut_from_means`, which also keeps where it cut); this is the same code path as
        ``python -m backend chunk --chunker NAME`` after the scoring pass.

        Args:
            doc: The document.
            nll_means: One mean NLL per sentence (nan or None: no scored token).
            counter: A :class:`SpanCounter` of ``doc.text`` with this chunker's tokenizer to reuse.

        Raises:
            ParameterError: not one value per sentence, or a counter of another text or tokenizer.
        """
        return self.cut_from_means(doc, nll_means, counter).chunking

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        if not doc.sentences:
            return []  # nothing to score: no model call
        return self.spans_from_means(doc, sentence_nll_means(doc, self.context))

    def curve(self, doc: Document, context: ModelContext | None = None) -> Curve:
        """Per-sentence values, θ on their local minima, and the sentences that end a chunk (cached scores)."""
        if context is not None:
            self.context = context
        units = tuple((s.start, s.end) for s in doc.sentences)
        means = sentence_nll_means(doc, self.context) if units else []
        values, _candidates, cuts, spans = self._cut(doc, means, None)
        return Curve(
            units,
            values,
            x_label="sentence",
            y_label="mean token NLL" if self.values["value"] == "nll" else "perplexity",
            point_label="sentence",
            boundaries=chunk_end_points(units, spans),
            drop_threshold=float(self.values["threshold"]),
            candidates=tuple(c.index for c in cuts.drawn),
        )


@register
class PPLChunker(_PPLBase):
    """Perplexity chunking (Meta-Chunking): cut after sentences at minima of the per-sentence perplexity.

    Each sentence's value is the mean NLL of its tokens given all the text before it (one
    scoring pass over the whole document, cached). A sentence at a local minimum whose drop
    passes ``threshold`` is the last sentence of its chunk. ``rule=reference`` follows the
    authors' code, ``rule=paper`` eq. 3 as printed (see ``backend.chunkers.meta.algorithms``). The
    paper's advice: a flat perplexity curve wants a small threshold, a fluctuating one a
    larger threshold.
    """

    name = "ppl"
    params = _rule_params(0.5, THRESHOLDS)
    length_param = "threshold"


@register
class PPLCombinedChunker(_PPLBase):
    """PPL chunking with dynamic combination: meta-chunks at ``threshold``, merged up to ``target_length`` tokens.

    Adjacent meta-chunks are merged greedily while the merged chunk stays within
    ``target_length`` tokens (counted exactly); a meta-chunk longer than the target stands
    alone. The paper runs it with threshold 0.
    """

    name = "ppl_combined"
    params = _rule_params(0.0, COMBINED_THRESHOLDS) + (_TARGET,)
    length_param = "target_length"
    _combined = True


@register
class PPLOverlapChunker(_PPLBase):
    """PPL chunking with dynamic overlap: a sentence at a minimum ends one chunk and starts the next.

    Section 4.2.1 of the paper: the overlap is the boundary sentence itself, so its length
    varies with the text.
    """

    name = "ppl_overlap"
    params = _rule_params(0.5, THRESHOLDS)
    length_param = "threshold"
    _overlap = True


def _margin_key(fingerprint: str, scorer_kind: str, first: str, second: str, both: str, language: str) -> dict[str, Any]:
    return {
        "kind": "margin",
        "model": fingerprint,
        "scorer": scorer_kind,
        "first": text_digest(first),
        "second": text_digest(second),
        "both": text_digest(both),
        "language": language,
        "version": MARGIN_VERSION,
    }


def margin_steps(doc: Document, context: ModelContext, unit: str = "chunk", language: str = "auto") -> list[MarginStep]:
    """Margin sampling's decisions over ``doc``'s sentences, every margin cached per (model, texts, language).

    A rerun reads every margin from the cache without loading the model (for a GGUF model).
    """
    sentences = doc.sentences
    text = doc.text
    lang = doc.language if language == "auto" else language
    lang = "zh" if lang == "zh" else "en"
    cache = context.cache
    fingerprint = context.fingerprint
    kind = context.scorer.info.kind if context.scorer is not None else "lm"

    def margin_of(ctx: int, i: int) -> float:
        nonlocal fingerprint, kind
        first = text[sentences[ctx].start : sentences[i - 1].end]
        second = text[sentences[i].start : sentences[i].end]
        both = text[sentences[ctx].start : sentences[i].end]
        key = None
        if cache is not None and fingerprint is not None:
            key = _margin_key(fingerprint, kind, first, second, both, lang)
            hit = cache.get(key)
            if hit is not None:
                record_cached(hit)
                return float(hit["margin"])
        scorer = context.get_scorer()
        fingerprint, kind = scorer.info.fingerprint, scorer.info.kind
        started = time.perf_counter()
        probs = scorer.next_token_probs(margin_messages(first, second, both, lang), ["1", "2"])
        seconds = time.perf_counter() - started
        record_computed(seconds)
        margin = probs["1"] - probs["2"]
        if cache is not None:
            key = _margin_key(fingerprint, kind, first, second, both, lang)
            cache.put(key, {"margin": np.array(margin, dtype=np.float64), SECONDS_FIELD: seconds})
        return margin

    return margin_sampling_steps(len(sentences), margin_of, unit, context.progress)


@register
class MarginSamplingChunker(Chunker):
    """Margin sampling chunking (Meta-Chunking): the model decides, sentence by sentence, whether to split.

    For each sentence the model answers the paper's Table 5 prompt (English, or Chinese for
    Chinese documents) through its chat template; margin = P("1": split) − P("2": keep). The
    threshold starts at 0 and follows the mean of the last five margins; a margin at or
    above it starts a new chunk. ``unit=chunk`` compares the sentence with the chunk built
    so far (the paper's better variant), ``unit=sentence`` with the previous sentence. With
    ``target_length`` > 0 the chunks are then merged up to that many tokens.
    """

    name = "margin_sampling"
    family = "meta-chunking"
    needs = ("lm",)
    length_param = "target_length"
    params = (
        Param("unit", "str", "chunk", "Compare the next sentence with the chunk so far or the previous sentence.",
              choices=("chunk", "sentence")),
        Param("language", "str", "auto", "Prompt language: auto (the document's), en or zh.",
              choices=("auto", "en", "zh")),
        # Tuned: the merge length only (0: none); unit and language change the prompts, so every
        # point of the grid reads the same cached margins.
        Param("target_length", "int", 0, "Dynamic combination up to this many tokens (0: none).", min=0,
              max=100_000, search=Search(choices=(0, *TOKEN_LENGTHS.values()))),
    )

    def steps(self, doc: Document, context: ModelContext | None = None) -> list[MarginStep]:
        """Margin sampling's decisions on ``doc`` with this chunker's unit and language (margins cached).

        Args:
            doc: The document.
            context: The model, cache and progress (None: this chunker's context). Not
                kept: a background job may call this with its own context.
        """
        return margin_steps(doc, context or self.context, self.values["unit"], self.values["language"])

    def spans_from_steps(
        self, doc: Document, steps: Sequence[MarginStep], counter: SpanCounter | None = None
    ) -> list[tuple[int, int, int]]:
        """This chunker's ``(start, end, tokens)`` spans of ``doc`` from margin sampling's decisions (no model call).

        Chunks start at the split steps; with ``target_length`` > 0 they are then merged up to
        that many tokens.

        Raises:
            ParameterError: a step judges a sentence the document does not have.
        """
        sentences = doc.sentences
        if any(not 0 < s.index < len(sentences) for s in steps):
            raise ParameterError(f"margin steps beyond the document's {len(sentences)} sentences")
        ranges = ranges_from_steps(len(sentences), steps)
        spans = [(sentences[a].start, sentences[b].end) for a, b in ranges]
        counter = checked_counter(doc, self.tokenizer, counter)
        target = self.values["target_length"]
        if target:
            return combine(doc.text, spans, counter, target)
        return [(s, e, n) for (s, e), n in zip(spans, counter.count_many(spans))]

    def chunk_from_steps(
        self, doc: Document, steps: Sequence[MarginStep], counter: SpanCounter | None = None
    ) -> Chunking:
        """What :meth:`chunk` gives when margin sampling's decisions are already known: timed and checked alike.

        Args:
            doc: The document.
            steps: :meth:`steps` of ``doc`` (the same unit and language).
            counter: A :class:`SpanCounter` of ``doc.text`` with this chunker's tokenizer to reuse.

        Raises:
            ParameterError: steps of another document, or a counter of another text or tokenizer.
        """
        return self.chunk_with(doc, lambda d: self.spans_from_steps(d, steps, counter))

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        if not doc.sentences:
            return []
        return self.spans_from_steps(doc, self.steps(doc))

    def curve(self, doc: Document, context: ModelContext | None = None) -> Curve:
        """The margin at each gap between sentences with the adaptive threshold it met (cached margins).

        Point ``i`` is the gap after sentence ``i``: the model's margin for splitting there.
        """
        if context is not None:
            self.context = context
        sentences = doc.sentences
        steps = self.steps(doc) if sentences else []
        units = tuple((sentences[s.index - 1].start, sentences[s.index - 1].end) for s in steps)
        return Curve(
            units,
            np.array([s.margin for s in steps], dtype=np.float64),
            x_label="sentence",
            y_label='margin P("1": split) − P("2": keep)',
            point_label="gap after sentence",
            boundaries=chunk_end_points(units, self.spans_from_steps(doc, steps) if sentences else []),
            threshold_label="threshold (mean of the last 5 margins)",
            threshold_series=np.array([s.threshold for s in steps], dtype=np.float64),
        )
