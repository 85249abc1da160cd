"""The Meta-Chunking (PPL) view in one call: the chunker the settings choose, its cut, θ's range and curve, the CSV.

The model scores a document once (:func:`scoring_plan`, or the output cache through
:func:`held_scores`); every view after that is :func:`ppl_view`, with no model call: it picks
the registered chunker the page's settings describe (``ppl``, ``ppl_overlap`` or
``ppl_combined``), takes θ's default from that chunker's own
:class:`~backend.chunkers.base.Param` when the session has no θ, and cuts through the
chunker's :meth:`~backend.chunkers.meta.chunkers.PPLCut` entry — so the minima, θ bars and
boundaries the chart draws are the ones the chunks were cut at, computed once. The slider's
range, the θ → chunk-count curve (and the θ that aims at a mean length), the statistics line
and the per-sentence CSV come from that same cut. ``python -m backend ppl FILE --csv`` and
``python -m backend theta-curve FILE`` print what the page shows from this very call.

Margin sampling (:func:`margin_plan`, :func:`margin_view`) asks the model once per sentence;
its decisions are read from the output cache when it holds them all, else computed in a job,
and re-chunked here with the page's target length and tokenizer.

Token counts: a view counts chunk sizes with a :class:`~backend.tokenizers.SpanCounter` of
the document (one tokenization, then any span in O(1)). :func:`ppl_view` takes the counter
the caller held from the previous view and returns the one it used (the same, or a new one
when the document or the tokenizer changed): the app keeps it in the user's session. It is
not an ``lru_cache`` here on purpose: a counter holds one user's document and its token
offsets, and a process-wide cache would keep every session's uploads alive and share them
across users (module-level state is shared by every user), while the session's copy goes
when the session does.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from backend.chunkers import REGISTRY, make_chunker
from backend.chunkers.base import Chunker
from backend.chunkers.context import ModelContext
from backend.chunkers.meta.algorithms import (
    Boundaries,
    ThetaCurve,
    boundaries_at,
    boundary_candidates,
    sentence_values,
    suggest_thresholds,
    theta_curve,
)
from backend.chunkers.meta.chunkers import PPLCut
from backend.chunkers.meta.results import MarginResult, PPLScores, values_csv
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import NotCached
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.lab.settings import setting
from backend.models.cache import default_cache
from backend.models.rates import rate_store
from backend.models.scorer import sliding_windows
from backend.models.scoring import partial_sentence_scores, scoring_checkpoint
from backend.models.types import PartialTokenScores, Scorer
from backend.progress import Progress, format_seconds
from backend.text.document import Document
from backend.tokenizers import SpanCounter, get_tokenizer

__all__ = [
    "VALUE_NAMES",
    "PPLSettings",
    "ThresholdRange",
    "ChunkStats",
    "PPLView",
    "PartialPPLView",
    "MarginView",
    "default_threshold",
    "span_counter",
    "score_document",
    "held_scores",
    "scoring_plan",
    "scoring_estimate",
    "scoring_label",
    "ppl_view",
    "partial_view",
    "held_margin",
    "margin_plan",
    "margin_view",
]

VALUE_NAMES = {"nll": "mean NLL", "ppl": "perplexity"}  # the compared value, as an axis title names it


def _default(name: str) -> Any:
    return setting("ppl", name).default


def default_threshold(chunker: str) -> float:
    """θ's default of a registered PPL chunker, read from its own ``threshold`` parameter.

    >>> default_threshold("ppl"), default_threshold("ppl_combined")
    (0.5, 0.0)
    """
    return float(next(p.default for p in REGISTRY[chunker].params if p.name == "threshold"))


@dataclass(frozen=True)
class PPLSettings:
    """What the PPL view chunks with: the page's settings of the same names (``ppl.value``, ``ppl.rule``…).

    Attributes:
        value: ``nll`` (mean token NLL, the authors' code) or ``ppl`` (its exponential, the paper).
        rule: ``reference`` (the authors' ``find_minima``) or ``paper`` (eq. 3).
        tokenizer: Counts chunk sizes and the target length.
        target_length: Above 0: dynamic combination up to this many tokens (``ppl_combined``).
        overlap: The boundary sentence also opens the next chunk (``ppl_overlap``); not with a target length.
        threshold: θ; None: the chosen chunker's own default (:func:`default_threshold`).
    """

    value: str = _default("value")
    rule: str = _default("rule")
    tokenizer: str = _default("tokenizer")
    target_length: int = _default("target_length")
    overlap: bool = _default("overlap")
    threshold: float | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> PPLSettings:
        """The chunking settings among a page's ``ppl`` settings (the others, e.g. ``guide``, are ignored).

        Raises:
            ParameterError: a value its setting refuses (naming it).
        """
        names = {f.name for f in fields(cls)}
        return cls(**{k: setting("ppl", k).check(v) for k, v in values.items() if k in names})

    @property
    def chunker(self) -> str:
        """The registered chunker these settings describe: ``ppl_combined`` with a target length, else
        ``ppl_overlap`` with overlap, else ``ppl``."""
        if self.target_length > 0:
            return "ppl_combined"
        return "ppl_overlap" if self.overlap else "ppl"

    @property
    def threshold_in_use(self) -> float:
        """θ: the session's, else the chosen chunker's default (``ppl`` 0.5, ``ppl_combined`` 0.0)."""
        return float(self.threshold) if self.threshold is not None else default_threshold(self.chunker)

    def build_chunker(self) -> Chunker:
        """The registered chunker with these parameters.

        Raises:
            ParameterError: a parameter it refuses (one line).
        """
        params: dict[str, Any] = {"threshold": self.threshold_in_use, "rule": self.rule, "value": self.value}
        if self.target_length > 0:
            params["target_length"] = self.target_length
        return make_chunker(self.chunker, params, self.tokenizer)


@dataclass(frozen=True)
class ThresholdRange:
    """The θ slider's range and step, from this document's drops.

    From :func:`~backend.chunkers.meta.algorithms.suggest_thresholds`: ``high`` is just past the
    largest drop (no boundary at all), and the step gives about 200 positions.
    """

    low: float
    high: float
    step: float


@dataclass(frozen=True)
class ChunkStats:
    """The numbers of a chunking's statistics line.

    Attributes:
        chunks: How many chunks.
        mean_tokens: Their mean length in tokens (0 without chunks).
        max_tokens: The longest (0 without chunks).
        tokenizer: What counted them.
        target_length: The target length (0: none).
        over_target: How many stand alone over the target (meta-chunks longer than it).
        elapsed_ms: How long the re-chunking took.
    """

    chunks: int
    mean_tokens: float
    max_tokens: int
    tokenizer: str
    target_length: int
    over_target: int
    elapsed_ms: float

    @classmethod
    def of(cls, chunking: Chunking, target_length: int = 0) -> ChunkStats:
        """The statistics of ``chunking`` (``target_length``: count the chunks over it)."""
        counts = chunking.token_counts
        over = sum(1 for n in counts if n > target_length) if target_length else 0
        return cls(
            len(counts), sum(counts) / len(counts) if counts else 0.0, max(counts, default=0),
            chunking.config.tokenizer, target_length, over, chunking.elapsed_s * 1000,
        )


def span_counter(doc: Document, tokenizer: str, held: SpanCounter | None = None) -> SpanCounter:
    """``held`` when it counts ``doc``'s text with ``tokenizer``, else a new counter (one tokenization)."""
    if held is not None and held.tokenizer.name == tokenizer and (held.text is doc.text or held.text == doc.text):
        return held
    return SpanCounter(get_tokenizer(tokenizer), doc.text)


# --- the scores: the cache, else a job ---------------------------------------------------------------


def score_document(doc: Document, context: ModelContext, model: str) -> PPLScores:
    """``doc``'s per-sentence scores through ``context`` (the output cache, else its model).

    Args:
        doc: The document.
        context: The model, cache and progress (the job's, or the CLI's flags).
        model: What the scores are keyed by (the session's model identity; the CLI passes its fingerprint).
    """
    token_scores = context.token_scores(doc.text)
    name = context.scorer.info.name if context.scorer is not None else model
    return PPLScores.build(doc, token_scores, model, name)


def held_scores(held: PPLScores | None, doc: Document, models: SessionModels) -> PPLScores | None:
    """The scores to show: ``held`` when they are ``doc``'s under ``models``, else the output cache's, else None.

    Never calls the model (None: run :func:`scoring_plan`).
    """
    if held is not None and held.doc_id == doc.id and held.model == models.identity:
        return held
    cached = models.cached_document_scores(doc.text)
    return PPLScores.build(doc, cached, models.identity, models.name) if cached is not None else None


def scoring_plan(doc: Document, models: SessionModels) -> JobPlan:
    """The background job that scores ``doc`` with the session's language model; its result is a :class:`PPLScores`.

    The scoring pass goes through the chunkers' own path (``ModelContext.token_scores``), so it
    fills the output cache the PPL chunkers read, and resumes an interrupted pass.
    """
    identity = models.identity

    def body(scorer: Scorer | None, progress: Progress) -> PPLScores:
        return score_document(doc, ModelContext(scorer=scorer, progress=progress), identity)

    signature: Hashable = (doc.id, identity)
    return JobPlan(f"Scoring {doc.source} with {models.name}", signature, body, models=models)


def scoring_estimate(doc: Document, models: SessionModels, *, window: int | None = None) -> float | None:
    """Seconds the scoring pass of ``doc`` is expected to take on this machine; None before any pass was measured.

    Counts only the text still to score (an interrupted pass's checkpoint is resumed), at the
    speed measured for the model (:mod:`backend.models.rates`): with the model loaded, the
    pass's windows are priced in work (:meth:`~backend.models.scorer.LocalScorer.window_work`:
    on a long document each later window costs about twice a first-window token); without it,
    at the characters per second of the passes measured. ``window``: the pass's window (None: the
    model's default, as the page scores).
    """
    if models.fingerprint is None:
        return None
    rate = rate_store().find(models.fingerprint, "token_nll", kind=models.kind)
    if rate is None or rate.chars_per_s is None:
        return None
    chars = len(doc.text)
    partial = scoring_checkpoint(default_cache(), models.fingerprint, doc.text, window, scorer_kind=models.kind)
    done_chars = 0
    if partial is not None and 1 < partial.scored < len(partial.scores):
        done_chars = int(partial.scores.starts[partial.scored])
    scorer = models.scorer
    if scorer is None or not hasattr(scorer, "window_work"):
        return (chars - done_chars) / rate.chars_per_s
    tokens = max(2, round(chars * rate.units / rate.chars))  # the tokens per character measured on earlier passes
    done = round(done_chars * rate.units / rate.chars)
    window, block = scorer.resolve_window(window)
    work = sum(scorer.window_work(hi - lo, hi - first) for lo, first, hi in sliding_windows(tokens, window, block)
               if hi > done)
    return work / rate.work_per_s


def scoring_label(doc: Document, models: SessionModels) -> str:
    """The scoring button's label: ``Score with SmolLM2 (about 8 min)``, or ``… (time measured on the first run)``."""
    seconds = scoring_estimate(doc, models)
    return f"Score with {models.name} ({format_seconds(seconds) if seconds is not None else 'time measured on the first run'})"


# --- the view ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PPLView:
    """Everything the Meta-Chunking page shows for one document, model and settings (no model call).

    Attributes:
        scores: The per-sentence scores it chunks from.
        settings: The settings it was made with (θ possibly None: see :attr:`threshold`).
        config: The chosen chunker's configuration (what "Add to Compare" adds).
        cut: The chunker's values, candidates, cuts and chunks, computed once.
        slider: θ's range and step for this document's drops.
        curve: Plain PPL chunking (no overlap, no combination) over the slider's range.
        total_tokens: Tokens from the first sentence's start to the last one's end.
        counter: The span counter it counted with (keep it for the next view).
        stats: The numbers of the statistics line.
    """

    scores: PPLScores
    settings: PPLSettings
    config: ChunkerConfig
    cut: PPLCut
    slider: ThresholdRange
    curve: ThetaCurve
    total_tokens: int
    counter: SpanCounter
    stats: ChunkStats

    @property
    def chunker(self) -> str:
        """The registered chunker chosen (``ppl``, ``ppl_overlap`` or ``ppl_combined``)."""
        return self.config.name

    @property
    def threshold(self) -> float:
        """The θ in use (the session's, else the chunker's default)."""
        return self.cut.boundaries.threshold

    @property
    def chunking(self) -> Chunking:
        """The chunks."""
        return self.cut.chunking

    @property
    def boundaries(self) -> Boundaries:
        """Where the chunker cut at θ, and the minima drawn with a θ bar."""
        return self.cut.boundaries

    @property
    def sentences(self) -> int:
        """How many sentences the document has."""
        return len(self.scores.sentences)

    @property
    def value_name(self) -> str:
        """The compared value's name (``mean NLL`` or ``perplexity``)."""
        return VALUE_NAMES[self.settings.value]

    def values_csv(self) -> str:
        """The per-sentence CSV (:func:`~backend.chunkers.meta.results.values_csv`) of this view."""
        cut = self.cut
        kept = cut.boundaries.kept
        return values_csv(self.scores, cut.values, cut.candidates, kept, cut.chunking, self.settings.value)

    def aim(self, length: float) -> tuple[float, float]:
        """The θ whose mean chunk length (on the curve) is nearest ``length``, and that length.

        Raises:
            ParameterError: the curve has no point.
        """
        return self.curve.theta_for_length(length)

    def curve_json(self, aim: float | None = None) -> dict[str, Any]:
        """The θ → chunk-count curve as JSON (what ``python -m backend theta-curve`` prints).

        Args:
            aim: A mean chunk length (tokens) to aim θ at; adds ``"aim"``: the θ and its mean length.
        """
        out: dict[str, Any] = {
            "rule": self.settings.rule,
            "value": self.settings.value,
            "tokenizer": self.settings.tokenizer,
            "sentences": self.sentences,
            "tokens": self.total_tokens,
            "low": self.slider.low,
            "high": self.slider.high,
            "step": self.slider.step,
            "thresholds": [float(t) for t in self.curve.thresholds],
            "chunks": [int(c) for c in self.curve.counts],
            "mean_tokens": [float(m) for m in self.curve.mean_tokens],
        }
        if aim is not None:
            threshold, mean = self.aim(aim)
            out["aim"] = {"length": aim, "threshold": threshold, "mean_tokens": mean}
        return out


def ppl_view(
    doc: Document, scores: PPLScores, settings: PPLSettings, counter: SpanCounter | None = None
) -> PPLView:
    """The PPL view of ``doc`` from its scores and the page's settings, with no model call.

    Args:
        doc: The document the scores belong to.
        scores: Its per-sentence scores (:func:`held_scores`, a :func:`scoring_plan` job, :func:`score_document`).
        settings: Value, rule, tokenizer, target length, overlap and θ (None: the chunker's default).
        counter: The span counter of the previous view, reused when it still fits (see the module doc).

    Raises:
        ParameterError: a setting the chosen chunker refuses, or scores of another document (one line).
    """
    chunker = settings.build_chunker()
    counter = span_counter(doc, settings.tokenizer, counter)
    cut = chunker.cut_from_means(doc, scores.nll, counter)
    slider = ThresholdRange(*suggest_thresholds(cut.candidates))
    sentences = doc.sentences
    total = counter.count(sentences[0].start, sentences[-1].end) if sentences else 0
    curve = theta_curve(cut.candidates, settings.rule, len(sentences), total, slider.low, slider.high)
    stats = ChunkStats.of(cut.chunking, settings.target_length)
    return PPLView(scores, settings, chunker.config, cut, slider, curve, total, counter, stats)


@dataclass(frozen=True, eq=False)
class PartialPPLView:
    """While the first scoring pass runs: the sentences fully scored so far, and their cuts at θ.

    Attributes:
        scores: The leading sentences whose every token is scored (their values are final).
        values: Their compared values.
        boundaries: Their cuts at θ under the rule (the chunks come once the pass ends).
        value_name: The compared value's name.
        total_sentences: The document's sentences.
        tokens_scored: Model tokens scored so far.
        total_tokens: Model tokens to score.
    """

    scores: PPLScores
    values: np.ndarray
    boundaries: Boundaries
    value_name: str
    total_sentences: int
    tokens_scored: int
    total_tokens: int

    @property
    def sentences(self) -> int:
        """How many sentences are drawn."""
        return len(self.scores.sentences)


def partial_view(
    doc: Document, partial: Any, model: str, model_name: str, settings: PPLSettings
) -> PartialPPLView | None:
    """What a running scoring job has published, as the page draws it; None when it published nothing of ``doc``.

    Args:
        doc: The document being scored.
        partial: The job's partial result (a :class:`~backend.models.types.PartialTokenScores`, or anything else: None).
        model: The model's identity.
        model_name: Its display name.
        settings: The page's settings (value, rule and θ: the chosen chunker's default when None).
    """
    if not isinstance(partial, PartialTokenScores) or (partial.text and partial.text != doc.text):
        return None  # nothing yet, or the scores of another text (a chunk, a query) the job scores
    scores = PPLScores(doc.id, model, model_name, tuple(partial_sentence_scores(doc, partial)))
    values = sentence_values(scores.nll, settings.value)
    cuts = boundaries_at(boundary_candidates(values, settings.rule), settings.threshold_in_use, settings.rule)
    return PartialPPLView(
        scores, values, cuts, VALUE_NAMES[settings.value], len(doc.sentences), partial.scored, len(partial.scores)
    )


# --- margin sampling -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MarginView:
    """Margin sampling's chunks on the page: its decisions re-chunked with the target length and tokenizer.

    Attributes:
        result: The decisions (one step per sentence after the first).
        config: The margin-sampling configuration (what "Add to Compare" adds).
        chunking: The chunks.
        stats: The numbers of the statistics line.
    """

    result: MarginResult
    config: ChunkerConfig
    chunking: Chunking
    stats: ChunkStats


def _margin_decider(unit: str) -> Chunker:
    """The chunker that asks the model: its decisions depend on the unit and language only."""
    return make_chunker("margin_sampling", {"unit": unit, "language": "auto"})


def held_margin(held: MarginResult | None, doc: Document, models: SessionModels, unit: str) -> MarginResult | None:
    """``held`` when it is margin sampling of ``doc`` under ``models`` with ``unit``, else None."""
    if held is not None and (held.doc_id, held.model, held.unit) == (doc.id, models.identity, unit):
        return held
    return None


def margin_plan(doc: Document, models: SessionModels, unit: str) -> JobPlan:
    """The margins of ``doc``: read from the cache when it holds them all (instant), else computed in a job.

    The job's result is a :class:`~backend.chunkers.meta.results.MarginResult`.

    Raises:
        ParameterError: an unknown unit.
    """
    decider = _margin_decider(unit)
    identity = models.identity

    def cached() -> MarginResult:
        context = models.cache_only()
        if context is None:
            raise NotCached("the model's fingerprint is unknown")
        return MarginResult(doc.id, identity, unit, tuple(decider.steps(doc, context)))

    def body(scorer: Scorer | None, progress: Progress) -> MarginResult:
        steps = decider.steps(doc, ModelContext(scorer=scorer, progress=progress))
        return MarginResult(doc.id, identity, unit, tuple(steps))

    signature: Hashable = (doc.id, identity, unit)
    title = f"Margin sampling {doc.source} with {models.name}"
    return JobPlan(title, signature, body, models=models, from_cache=cached)


def margin_view(
    doc: Document, result: MarginResult, settings: PPLSettings, counter: SpanCounter | None = None
) -> MarginView:
    """Margin sampling's chunks from its decisions, merged up to the page's target length (no model call).

    Raises:
        ParameterError: decisions of another document, or a setting the chunker refuses (one line).
    """
    chunker = make_chunker(
        "margin_sampling", {"unit": result.unit, "language": "auto", "target_length": settings.target_length},
        settings.tokenizer,
    )
    chunking = chunker.chunk_from_steps(doc, result.steps, span_counter(doc, settings.tokenizer, counter))
    return MarginView(result, chunker.config, chunking, ChunkStats.of(chunking, settings.target_length))
