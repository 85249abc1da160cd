"""The metrics of an edited copy against its base, following each edit: statistics, BC/CS/DS, retrieval.

An edit changes a few chunks; everything else about the chunking is what the base had. So:

- :func:`edit_stats` (the chunking statistics of :func:`backend.metrics.stats.chunking_stats`)
  is pure and answers at once.
- :func:`plan_edit_quality` plans BC, CS and DS of ``[base, edited]`` as the Quality page does
  (:func:`backend.lab.quality.plan_quality`, the same store and keys): the pair scores are
  cached per ``(context, continuation)`` text, so the edited table needs only the pairs that
  involve a chunk the edit created; the job scores those (small: it starts by itself) and the
  rest is read back. A table not fully known gives the anytime estimate with its 95% interval.
- :func:`boundary_values` is the BC of each boundary of the edited chunking from what is
  known, with no model call (the Edit page draws them beside the text).
- :func:`plan_edit_retrieval` re-evaluates the session's question set for the base and the
  edited copy (:func:`backend.lab.benchmark.plan_benchmark`); with the per-text embedding reuse
  of :mod:`backend.models.embeddings` only the changed chunks are embedded.

The page and ``python -m backend edit`` both call these and show what comes back.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.chunkers.manual import cuts_of
from backend.chunking import Chunking, ConfigEntry, edit_summary
from backend.errors import NotCached, ParameterError
from backend.lab.benchmark import plan_benchmark
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.lab.quality import QualityPlan, plan_quality
from backend.metrics.cost import CONFIRM_SECONDS, Throughput
from backend.metrics.estimate import Estimate
from backend.metrics.formulas import GRAPHS, PairTable, boundary_clarity
from backend.metrics.report import METRIC_TABLE, QualitySettings
from backend.metrics.scores import UNCONDITIONAL_CONTEXT, pair_requests, table_key
from backend.metrics.stats import chunking_stats
from backend.models.cache import OutputCache, default_cache
from backend.models.embeddings import embeddings_key
from backend.models.scoring import cached_conditional_scores
from backend.retrieval.evaluate import Benchmark
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document

__all__ = [
    "AUTO_PAIRS",
    "BASE_TAG",
    "NO_QUESTION_SET",
    "EditQuality",
    "EditRetrieval",
    "EditStats",
    "MetricChange",
    "boundary_values",
    "edit_stats",
    "plan_edit_quality",
    "plan_edit_retrieval",
    "retrieval_changes",
]

AUTO_PAIRS = 64  # a scoring job with at most this many missing pairs (an edit's BC: about 5) starts by itself
BASE_TAG = "base"  # how the base is named when the session does not list it
NO_QUESTION_SET = "No question set yet: make or import one on the Benchmark or Retrieval page"

# (row name, chunking_stats field, digits) of the statistics compared, in order.
_STATS = (
    ("chunks", "chunks", 0),
    ("mean tokens", "mean_tokens", 1),
    ("median tokens", "median_tokens", 1),
    ("min tokens", "min_tokens", 0),
    ("max tokens", "max_tokens", 0),
    ("std tokens", "std_tokens", 1),
    ("mean characters", "mean_chars", 1),
    ("overlap characters", "overlap_chars", 0),
)
_SUMMARY_STATS = ("chunks", "mean tokens", "min tokens", "max tokens")
_METRIC_LABEL = {"bc": "BC", "cs_complete": "CS", "cs_incomplete": "CS (j − i > δ)", "ds": "DS"}
_RETRIEVAL = (("iou", "IoU"), ("recall", "recall"), ("precision", "precision"), ("precision_omega", "precision-Ω"))


def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def _change(base: float, edited: float, digits: int) -> str:
    delta = edited - base
    if round(delta, digits) == 0:
        return "="
    return f"{'+' if delta > 0 else '−'}{_number(abs(delta), digits)}"


# --- statistics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class EditStats:
    """The chunking statistics of the base and the edited copy.

    Attributes:
        doc_source: The document's name.
        rows: One per statistic: ``{"metric", "base", "edited", "change"}`` (numbers, the
            change as text: ``+1``, ``−1.3``, ``=``).
        summary: ``libtasn1.pdf: chunks 114 → 115 · mean tokens 150.2 → 148.9 · …``.
        cuts_added: Cuts of the edited copy the base does not have.
        cuts_removed: Cuts of the base the edited copy does not have.
    """

    doc_source: str
    rows: tuple[dict[str, Any], ...]
    summary: str
    cuts_added: int
    cuts_removed: int


def edit_stats(doc: Document, base: Chunking, edited: Chunking) -> EditStats:
    """The statistics of ``base`` and ``edited`` side by side, with the one-line summary (pure, no model)."""
    b, e = chunking_stats([base, edited])
    rows = []
    for name, fieldname, digits in _STATS:
        bv, ev = float(b[fieldname]), float(e[fieldname])
        rows.append({"metric": name, "base": round(bv, digits) if digits else int(bv),
                     "edited": round(ev, digits) if digits else int(ev), "change": _change(bv, ev, digits)})
    base_cuts, edited_cuts = set(cuts_of([(c.start, c.end) for c in base.chunks])), set(
        cuts_of([(c.start, c.end) for c in edited.chunks]))
    added, removed = len(edited_cuts - base_cuts), len(base_cuts - edited_cuts)
    digits = {name: d for name, _, d in _STATS}
    parts = [f"{r['metric']} {_number(r['base'], digits[r['metric']])} → {_number(r['edited'], digits[r['metric']])}"
             for r in rows if r["metric"] in _SUMMARY_STATS]
    summary = f"{doc.source}: " + " · ".join(parts) + f" ({edit_summary(added, removed)})"
    return EditStats(doc.source, tuple(rows), summary, added, removed)


# --- BC, CS, DS -----------------------------------------------------------------------------------


def _estimate_text(est: Estimate | None) -> str:
    """``0.91`` exact, ``≈0.89 [0.85, 0.93]`` from a sample, ``–`` unknown."""
    if est is None or est.estimate is None:
        return "–"
    if est.exact:
        return f"{est.estimate:.2f}"
    low, high = est.ci_low, est.ci_high
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"≈{est.estimate:.2f} [interval not bounded yet]"
    return f"≈{est.estimate:.2f} [{low:.2f}, {high:.2f}]"


@dataclass(frozen=True)
class MetricChange:
    """One metric of the base and of the edited copy.

    Attributes:
        metric: A column of ``METRIC_TABLE``: ``bc``, ``cs_complete`` or ``cs_incomplete``, ``ds``.
        base: The base's value (exact, or an estimate with its 95% interval; None: unknown).
        edited: The edited copy's.
    """

    metric: str
    base: Estimate | None
    edited: Estimate | None

    @property
    def label(self) -> str:
        """``BC``."""
        return _METRIC_LABEL.get(self.metric, self.metric.upper())

    @property
    def text(self) -> str:
        """``BC 0.91 → 0.89``; estimates as ``≈0.89 [0.85, 0.93]``."""
        return f"{self.label} {_estimate_text(self.base)} → {_estimate_text(self.edited)}"

    @property
    def estimated(self) -> bool:
        """Whether a side is an estimate from part of the pairs."""
        return any(e is not None and e.estimate is not None and not e.exact for e in (self.base, self.edited))


@dataclass(frozen=True, eq=False)
class EditQuality:
    """BC, CS and DS of the base and the edited copy, and the job that scores what is missing.

    Attributes:
        doc_source: The document's name.
        changes: Per metric picked, in the order of ``METRIC_TABLE``.
        line: ``BC 0.91 → 0.89 · CS 1.23 → 1.30 · DS 0.42 → 0.41``.
        changed_pairs: Distinct pairs the edited table needs that the base's does not: the edit's own
            (DS alone: the chunk texts the base does not have).
        missing_pairs: Distinct pairs not in the output cache yet (what the job scores).
        texts_to_embed: Distinct chunk texts DS needs with no vector in the cache (per text: an
            edit's new chunks), what the job embeds.
        cost_label: What the job costs (``5 pairs, about 1 s``).
        auto: Whether the job is small enough to start by itself (:data:`AUTO_PAIRS`, no confirmation).
        plan: The Quality page's plan of ``[base, edited]`` (its store keys, :func:`~backend.lab.quality.fold_scoring`).
        job: The job for the missing scores (None: all known).
    """

    doc_source: str
    changes: tuple[MetricChange, ...]
    line: str
    changed_pairs: int
    missing_pairs: int
    texts_to_embed: int
    cost_label: str
    auto: bool
    plan: QualityPlan = field(repr=False)
    job: JobPlan | None = field(repr=False)

    @property
    def estimated(self) -> bool:
        """Whether a value shown is an estimate."""
        return any(c.estimated for c in self.changes)

    @property
    def note(self) -> str:
        """What the numbers stand on: the edit's own pairs, what is left to score, the intervals."""
        unit = "pair" if self.plan.needs.scorer else "chunk"  # DS alone: the chunks the edits made
        what = f"{self.changed_pairs:,} {unit}{'s' if self.changed_pairs != 1 else ''} changed by the edits"
        if self.job is None:
            out = f"{self.doc_source}: {what}; every score known"
        else:
            todo = [self.cost_label] if self.missing_pairs else []
            if self.texts_to_embed:
                todo.append(f"{self.texts_to_embed:,} chunk{'s' if self.texts_to_embed != 1 else ''} to embed")
            out = f"{self.doc_source}: {what}; to compute: {', '.join(todo) or 'the embeddings'}"
        if self.estimated:
            out += "; ≈ marks an estimate from the pairs scored so far, [low, high] its 95% interval"
        return out


def _base_entry(base_entry: ConfigEntry | None, base: Chunking) -> ConfigEntry:
    """The base's entry: the session's, else one named :data:`BASE_TAG`."""
    return base_entry if base_entry is not None else ConfigEntry(-1, BASE_TAG, base.config)


def _texts(chunking: Chunking) -> list[str]:
    return [c.text for c in chunking.chunks]


def plan_edit_quality(
    doc: Document,
    base_entry: ConfigEntry | None,
    base: Chunking,
    edited_entry: ConfigEntry,
    edited: Chunking,
    models: SessionModels,
    *,
    metrics: Sequence[str],
    window: int | None,
    store: Mapping[Hashable, Any],
    settings: QualitySettings | None = None,
    graph: str = "complete",
    throughput: Throughput | None = None,
    cache: OutputCache | None = None,
) -> EditQuality:
    """BC/CS/DS of the base and the edited copy from what is known, and the job for the missing pairs.

    No model call here (see :func:`~backend.lab.quality.plan_quality`). After the job,
    :func:`~backend.lab.quality.fold_scoring` (``result.plan``) puts its tables in ``store``.

    Args:
        doc: The document.
        base_entry: The base's entry when the session lists it, else None.
        base: The base's chunking.
        edited_entry: The edited copy's entry.
        edited: The edited copy's chunking.
        models: The session's models.
        metrics: Any of ``bc``, ``cs``, ``ds``.
        window: CS's pair window (0 or None: every pair).
        store: The session's quality store (read only: add ``plan.found``).
        settings: K, the CS rule, the BC mode and δ (None: the defaults).
        graph: CS's graph shown: ``complete`` or ``incomplete`` (edges with j − i > δ).
        throughput: The session's measured scoring speed (None: the rate store's, else a guess).
        cache: The output cache (None: the process's default one).

    Raises:
        ParameterError: an unknown metric or graph.
    """
    if graph not in GRAPHS:
        raise ParameterError(f"graph must be one of {', '.join(GRAPHS)}, got {graph!r}")
    cache = cache if cache is not None else default_cache()
    settings = settings or QualitySettings()
    entry = _base_entry(base_entry, base)
    plan = plan_quality(doc, [(entry, base), (edited_entry, edited)], models, metrics=metrics, window=window,
                        store=store, throughput=throughput, cache=cache, settings=settings)
    b, e = plan.configs
    skip = "cs_incomplete" if graph == "complete" else "cs_complete"
    order = [m.name for m in METRIC_TABLE if m.group in plan.metrics and m.name != skip]
    changes = tuple(MetricChange(m, b.estimates.get(m), e.estimates.get(m)) for m in order)
    changed = 0
    if plan.needs.scorer:
        complete, w = plan.needs.complete, plan.window
        before = set(pair_requests(_texts(base), complete=complete, window=w))
        changed = len(set(pair_requests(_texts(edited), complete=complete, window=w)) - before)
    elif plan.needs.embedder:
        changed = len(set(_texts(edited)) - set(_texts(base)))
    to_embed = _texts_to_embed(plan, cache)
    auto = plan.job is not None and plan.cost.pairs <= AUTO_PAIRS and plan.cost.seconds <= CONFIRM_SECONDS and (
        to_embed <= AUTO_PAIRS)
    return EditQuality(
        doc_source=doc.source, changes=changes, line=" · ".join(c.text for c in changes), changed_pairs=changed,
        missing_pairs=plan.cost.pairs, texts_to_embed=to_embed, cost_label=plan.cost.label, auto=auto, plan=plan,
        job=plan.job,
    )


def _texts_to_embed(plan: QualityPlan, cache: OutputCache) -> int:
    """Distinct texts of the chunkings missing vectors that have no vector of their own in the cache (no read)."""
    fingerprint = plan.embedder_fingerprint
    if not plan.needs.embedder or fingerprint is None:
        return 0
    texts = dict.fromkeys(t for c in plan.configs if c.vectors_missing for t in _texts(c.chunking))
    return sum(not cache.contains(embeddings_key(fingerprint, [t])) for t in texts)


def boundary_values(
    doc: Document,
    edited: Chunking,
    models: SessionModels,
    store: Mapping[Hashable, Any],
    *,
    mode: str = "reference",
    window: int | None = None,
    cache: OutputCache | None = None,
) -> tuple[float | None, ...]:
    """The BC of each boundary of ``edited`` (between chunk i and i+1) from what is known; None where not scored.

    A table in ``store`` (the Quality page's keys, with ``window``) answers first; the other
    boundaries are looked up pair by pair in the output cache under the session's language
    model (no model call; nothing when its identity is not known without loading it).

    Args:
        doc: The document (the chunking's).
        edited: The chunking.
        models: The session's models.
        store: The session's quality store.
        mode: BC's mode (``reference`` or ``paper``).
        window: The pair window the store's complete tables were scored with.
        cache: The output cache (None: the process's default one).
    """
    n = len(edited.chunks)
    if n < 2 or edited.doc_id != doc.id:
        return ()
    for complete in (False, True):
        table = store.get(table_key(edited, models.identity, complete=complete, window=window or None))
        if table is None and complete is False and window:
            table = store.get(table_key(edited, models.identity, complete=False, window=None))
        if isinstance(table, PairTable) and not table.partial:
            return tuple(_finite(v) for v in boundary_clarity(table, mode))
    context = models.cache_only()
    if context is None or context.scorer is None:
        return (None,) * (n - 1)
    texts = _texts(edited)
    cache = cache if cache is not None else default_cache()
    info = context.scorer.info
    requests = [(UNCONDITIONAL_CONTEXT, t) for t in texts[1:]] + list(zip(texts[:-1], texts[1:], strict=True))
    try:
        values = cached_conditional_scores(requests, info, cache)
    except NotCached:
        return (None,) * (n - 1)
    uncond, cond = values[: n - 1], values[n - 1:]
    out: list[float | None] = []
    for u, c in zip(uncond, cond, strict=True):
        if u is None or c is None:
            out.append(None)
            continue
        pair = PairTable(uncond=np.array([np.nan, u]), cond=np.array([[np.nan, c], [np.nan, np.nan]]),
                         complete=False)
        out.append(_finite(boundary_clarity(pair, mode)[0]))
    return tuple(out)


def _finite(value: Any) -> float | None:
    x = float(value)
    return x if math.isfinite(x) else None


# --- retrieval -----------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EditRetrieval:
    """The retrieval re-evaluation of the base and the edited copy on the session's question set.

    Attributes:
        qset_name: How the set is named (``Session set``, ``sample:NAME``); "" without one.
        questions: Its questions.
        message: Why there is no job (no question set, not on this document), else "".
        on_document: Questions of the set on this document (the only ones an edit can change).
        job: The benchmark job of ``[base, edited]`` (None with ``message``).
        label: The button's label: ``Re-evaluate on Session set (12 questions)``.
    """

    qset_name: str
    questions: int
    message: str
    on_document: int
    job: JobPlan | None = field(repr=False)
    label: str = ""


def plan_edit_retrieval(
    doc: Document,
    base_entry: ConfigEntry | None,
    base: Chunking,
    edited_entry: ConfigEntry,
    qset: QuestionSet | None,
    models: SessionModels,
    *,
    qset_name: str,
    embedder: str | None,
    retrieve: int,
    auto: bool,
    cross_corpus: bool,
) -> EditRetrieval:
    """The benchmark of the base and the edited copy on ``qset``, or why there is none.

    With no question set (or one without questions): :data:`NO_QUESTION_SET`. A set none of
    whose corpora is ``doc``: said so (the edits cannot change its numbers), no job.
    """
    if qset is None or not len(qset):
        return EditRetrieval("", 0, NO_QUESTION_SET, 0, None)
    corpora = qset.corpora_of(doc)
    size = f"{len(qset):,} question{'s' if len(qset) != 1 else ''}"
    if not corpora:
        return EditRetrieval(
            qset_name, len(qset),
            f"The question set {qset_name} ({size}) is not on {doc.source}: the edits change none of its answers",
            0, None,
        )
    on_doc = sum(q.corpus_id in corpora for q in qset.questions)
    entry = _base_entry(base_entry, base)
    job = plan_benchmark(qset, [entry, edited_entry], models, embedder=embedder, retrieve=retrieve, auto=auto,
                         cross_corpus=cross_corpus, name=qset_name)
    return EditRetrieval(qset_name, len(qset), "", on_doc, job, f"Re-evaluate on {qset_name} ({size})")


def retrieval_changes(benchmark: Benchmark, qset_name: str) -> str:
    """``Session set (12 questions): IoU 6.1% → 6.4% · recall 71.0% → 73.0% · … (the edited copy's index embedded 2 chunks)``.

    Of a finished ``[base, edited]`` run; the chunks embedded are those no cached list held (per-text reuse).
    """
    base, edited = benchmark.results[0].summary, benchmark.results[1].summary
    parts = []
    for name, label in _RETRIEVAL:
        b, e = getattr(base, f"{name}_mean"), getattr(edited, f"{name}_mean")
        parts.append(f"{label} {b * 100:.1f}% → {e * 100:.1f}%")
    n = benchmark.questions
    embedded = benchmark.results[1].texts_embedded
    index = f"the edited copy's index embedded {embedded:,} chunk{'s' if embedded != 1 else ''}"
    return f"{qset_name} ({n:,} question{'s' if n != 1 else ''}): " + " · ".join(parts) + f" ({index})"
