"""The Summary page's data in one call: the rows, the verdict, the notes, what is missing and the plan to score it.

One row per configuration (:func:`backend.report.summary.summarize`): chunks, tokens and time
from its chunking; BC, CS and DS from the scores the Quality page's plan knows
(:func:`backend.lab.quality.plan_quality` with all three metrics, under the Quality page's
settings), preferring a pair table of every pair within the window and falling back to the
adjacent pairs' (BC only); recall, precision, IoU and precision-Ω from the last benchmark the
caller passes, over its questions on this document only (:func:`backend.report.summary.split_benchmark`),
each mean with its 95% interval over those questions and a best called only where the paired
difference to every other configuration excludes zero (:meth:`backend.report.summary.Summary.paired`).
A benchmark's questions on other corpora come back as a section of their own
(:attr:`SummaryView.elsewhere`), never in a row or the verdict. The missing BC, CS and DS are
computed by that plan's job, so the Quality page and the Summary score, key and store the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backend.chunkers.run import needs_model
from backend.chunking import Chunking, ConfigEntry
from backend.lab.models import SessionModels
from backend.lab.quality import ConfigScores, QualityPlan, plan_quality, quality_settings, quality_view
from backend.metrics.cost import Throughput
from backend.metrics.estimate import QualityEstimates
from backend.metrics.report import METRICS, QualityData, QualitySettings
from backend.models.cache import OutputCache
from backend.report.summary import (
    GROUPS,
    QualityRowLike,
    RetrievalElsewhere,
    Summary,
    question_set_title,
    summarize,
    verdict,
    with_quality,
)
from backend.retrieval.agreement import method_warning
from backend.retrieval.evaluate import Benchmark
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document

__all__ = ["SummaryView", "question_sets_on_document", "summary_estimates", "summary_view"]


@dataclass(frozen=True, eq=False)
class SummaryView:
    """What the Summary page shows.

    Attributes:
        summary: The rows, each column's best, and the settings the numbers were computed under.
        verdict: What the numbers show, in at most five plain sentences.
        notes: The line under the table, plain text (configuration, question-set and model
            names are user input: render it escaped).
        settings: The Quality page's settings the BC, CS and DS are computed under.
        chunkings: Each chunked configuration's chunking, by tag.
        quality: The quality scoring plan of every chunked configuration (its job computes what is missing).
        quality_data: Each chunked configuration's chunking and known scores, by tag (what the report draws).
        to_score: The tags whose BC, CS or DS is not computed yet, or only estimated from some
            of the pairs (a chunking of fewer than two chunks has none to compute).
        no_set_line: Where the retrieval numbers would be when no benchmarked question is on
            this document, what to do about it in one line; "" when some are.
        questions_warning: One line when the benchmark's questions come from a method known to
            rank recall poorly (:func:`~backend.retrieval.agreement.method_warning`); "" otherwise.
    """

    summary: Summary
    verdict: tuple[str, ...]
    notes: str
    settings: QualitySettings
    chunkings: Mapping[str, Chunking]
    quality: QualityPlan
    quality_data: Mapping[str, QualityData]
    to_score: tuple[str, ...]
    no_set_line: str = ""
    questions_warning: str = ""

    @property
    def elsewhere(self) -> RetrievalElsewhere | None:
        """The last benchmark's numbers on other corpora (its own titled section; None: none)."""
        return self.summary.elsewhere

    @property
    def missing(self) -> dict[str, list[str]]:
        """Per group (``quality``, ``retrieval``), the tags lacking any of its metrics."""
        return self.summary.missing()

    @property
    def quality_run_label(self) -> str:
        """The label of the button that scores :attr:`to_score`, with its cost."""
        return (
            f"Compute BC, CS and DS for {', '.join(self.to_score)} with {self.quality.models.name}: "
            f"{self.quality.cost.label}"
        )


def summary_view(
    doc: Document,
    entries: Sequence[ConfigEntry],
    chunked: Sequence[tuple[ConfigEntry, Chunking]],
    models: SessionModels,
    *,
    quality: Mapping[str, Any],
    store: Mapping[Hashable, Any],
    throughput: Throughput | None = None,
    benchmark: Benchmark | None = None,
    question_set_name: str | None = None,
    pending: Sequence[ConfigEntry] = (),
    cache: OutputCache | None = None,
    questions: QuestionSet | None = None,
    cross_corpus: bool | None = None,
) -> SummaryView:
    """The Summary of the session's configurations: from what is chunked, scored or benchmarked, no model call.

    Args:
        doc: The document.
        entries: Every configuration of the session, in order (one row each).
        chunked: ``(entry, chunking)`` of those chunked (the others' rows hold their configuration only).
        models: The session's models.
        quality: The Quality page's settings (``K``, ``bc_mode``, ``cs_rule``, ``delta``, ``window``).
        store: The Quality page's store of pair tables and vectors (see
            :func:`~backend.lab.quality.plan_quality`; add ``view.quality.found`` to it).
        throughput: The speed measured on the session's last scoring job (None: the labelled guess; a speed measured for the model comes first).
        benchmark: The session's last benchmark (None: no retrieval numbers).
        question_set_name: How that benchmark's question set is named.
        pending: The configurations waiting for a model run.
        cache: The output cache (None: the process's default one).
        questions: The question set that benchmark ran (which of its corpora is this document;
            None: none is known to be, and its numbers are all "elsewhere").
        cross_corpus: Whether that benchmark retrieved across every corpus of its set.
    """
    settings = quality_settings(quality)
    plan = plan_quality(
        doc, chunked, models, metrics=METRICS, window=settings.window, store=store, throughput=throughput, cache=cache,
        settings=settings,
    )
    data = {c.entry.tag: c.data for c in plan.configs}
    chunkings = {e.tag: ch for e, ch in chunked}
    summary = summarize(
        doc, [(e.tag, chunkings.get(e.tag, e.config)) for e in entries],
        quality={c.entry.tag: _quality_row(c, settings) for c in plan.configs}, benchmark=benchmark,
        questions=questions, cross_corpus=cross_corpus,
        settings={
            **settings.to_json(),
            "retrieve": benchmark.retrieve if benchmark is not None else None,
            "embedder": benchmark.embedder if benchmark is not None else None,
            "lm": models.name,
            "question_set": question_set_name,
            "question_set_size": benchmark.questions if benchmark is not None else None,
        },
    )
    notes = [
        f"best of each column in green; BC, CS (complete graph) and DS under the Quality page's settings: K = "
        f"{settings.K:.2f}, CS rule {settings.cs_rule}, BC mode {settings.bc_mode}, δ = {settings.delta}"
        + (f", pair window w = {settings.window}" if settings.window else "")
    ]
    scope = summary.retrieval
    if benchmark is not None and scope is not None:
        notes.append(
            f"retrieval on this document: {scope.questions} question{'s' if scope.questions != 1 else ''} of "
            f"{question_set_title(question_set_name)} ({benchmark.embedder}, "
            + ("as many chunks as hold excerpts" if benchmark.retrieve == -1 else f"{benchmark.retrieve} chunks")
            + " per question" + (f", {scope.across}" if scope.across else "") + "), each mean with its 95% interval "
            "over these questions, a best marked only where its paired difference to every other excludes zero"
        )
    if any(needs_model(e.config) for e in pending):
        notes.append(f"{', '.join(e.tag for e in pending)} wait for their model run")
    return SummaryView(
        summary=summary,
        verdict=tuple(verdict(summary)),
        notes="Best " + " · ".join(notes)[len("best ") :],
        settings=settings,
        chunkings=chunkings,
        quality=plan,
        quality_data=data,
        to_score=_to_score(summary, chunkings),
        no_set_line=_no_set_line(doc, summary),
        questions_warning=(
            (method_warning(questions.method) or "") if benchmark is not None and questions is not None else ""
        ),
    )


def _quality_row(scores: ConfigScores, settings: QualitySettings) -> QualityRowLike:
    """A configuration's BC, CS and DS: from its full scores, else (a stopped run's sample) its estimates."""
    if not scores.estimated:
        return scores.data.report(settings=settings)
    estimates = dict(scores.estimates)
    return {name: est.estimate if est is not None else None for name, est in estimates.items()} | {
        "estimates": estimates
    }


def _to_score(summary: Summary, chunkings: Mapping[str, Chunking]) -> tuple[str, ...]:
    """The chunked rows whose BC, CS or DS is not computed yet, or only estimated from some of the pairs."""
    missing = set(summary.missing().get("quality", ()))
    return tuple(
        r.tag for r in summary.rows
        if r.tag in chunkings and (r.tag in missing or any(r.estimate(m) is not None for m in GROUPS["quality"]))
    )


def summary_estimates(view: SummaryView, doc_source: str, partial: QualityEstimates | None) -> SummaryView:
    """``view`` with a running scoring job's estimates in the rows it scores: their cells and the verdict.

    The rows of :func:`~backend.lab.quality.quality_view` with ``partial`` (the job's latest
    :class:`~backend.metrics.estimate.QualityEstimates`) replace the BC, CS and DS of the rows
    still to score; the verdict calls a difference only where the intervals do not overlap.
    No model call and no cache lookup: cheap enough to redraw every second.

    Args:
        view: The Summary as the page drew it (:func:`summary_view`).
        doc_source: The document's name.
        partial: The job's estimates so far (None: ``view`` as it is).
    """
    if partial is None:
        return view
    live = quality_view(view.quality, view.settings, doc_source, partial=partial)
    scoring = set(view.to_score)
    summary = with_quality(view.summary, {r["configuration"]: r for r in live.rows if r["configuration"] in scoring})
    return dataclasses.replace(view, summary=summary, verdict=tuple(verdict(summary)))


def _no_set_line(doc: Document, summary: Summary) -> str:
    """What the Summary says where the retrieval numbers would be when no question is on this document."""
    if summary.retrieval is not None:
        return ""
    elsewhere = (
        f" The last benchmark ran on {summary.elsewhere.scope.set_title}, which is not this document: it is shown "
        "apart below." if summary.elsewhere is not None else ""
    )
    return (
        f"No retrieval numbers for this document ({doc.source}) yet: recall, precision, IoU and precision-Ω need a "
        f"benchmark on questions whose answers are in its text.{elsewhere}"
    )


def question_sets_on_document(doc: Document, sets: Mapping[str, QuestionSet]) -> dict[str, QuestionSet]:
    """Of ``sets`` (name → set), those with questions on ``doc``, each cut to those questions (in the given order).

    What the Summary offers to benchmark: a set on another document never gives this
    document's retrieval numbers, so it is not offered there (the Benchmark page runs any set).
    """
    out = {}
    for name, qset in sets.items():
        mine = qset.on_document(doc)
        if mine is not None:
            out[name] = mine
    return out
