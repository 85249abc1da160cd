"""The Benchmark page's work (and the Summary's benchmark): the run's plan, the results' tables, the per-question
export, the routing section's numbers, and question generation's plan.

:func:`plan_benchmark` is the one way a benchmark starts (the Benchmark page's button, the
Summary's "Run the benchmark", demo mode): a :class:`~backend.lab.jobs.JobPlan` whose signature is
built here and whose meta carries what both pages show beside the result (the tags, the colours
of :func:`backend.figures.charts.config_color`, the question set and its name).
:func:`benchmark_view` is everything the results section shows; :func:`per_question` is the
per-question table the page downloads and ``python -m backend eval --per-question FILE`` writes;
:func:`routing_view` is the routing section's captions, oracle agreement computed once
(:meth:`backend.retrieval.multi.retrievers.Routing.agreement`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from backend.chunkers.run import needs_model
from backend.chunking import Chunking, ConfigEntry
from backend.errors import ParameterError
from backend.figures.charts import config_color
from backend.figures.markdown import md_text
from backend.figures.retrieval import agreement_heatmaps, coverage_strip, metric_bars, question_heatmap
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.lab.retrieval import question_set_key
from backend.lab.settings import QUESTION_SOURCES
from backend.retrieval.agreement import method_warning
from backend.retrieval.evaluate import METRIC_LABELS, METRICS, Benchmark, ConfigResult, MetricSummary, coverage_rows
from backend.retrieval.generation import GeneratedQuestions
from backend.retrieval.jobs import benchmark_job
from backend.retrieval.multi.level_router import TrainReport
from backend.retrieval.multi.retrievers import Routing
from backend.retrieval.questions import QuestionSet

__all__ = [
    "SAMPLE_SOURCE",
    "qset_name",
    "plan_benchmark",
    "BenchmarkView",
    "benchmark_view",
    "PER_QUESTION_COLUMNS",
    "ROUTING_COLUMNS",
    "PerQuestion",
    "per_question",
    "write_per_question",
    "RoutingView",
    "routing_view",
    "oracle_note",
    "training_note",
    "candidate_rows",
    "CANDIDATE_COLUMNS",
]

SAMPLE_SOURCE = QUESTION_SOURCES[1]  # "Bundled sample set": its name is the sample's, sample:NAME
PER_QUESTION_COLUMNS = (
    "config", "chunker", "index", "corpus_id", "question", "recall", "precision", "precision_omega", "iou",
    "omega_units", "retrieved_entries", "retrieved_tokens", "retrieved_levels",
)
ROUTING_COLUMNS = ("chosen_level", "oracle_level", "weights")  # when some configuration is routed
CANDIDATE_COLUMNS = ("question", "excerpts", "excerpt_similarity", "kept", "dropped_because")


def qset_name(source: str, sample: str | None) -> str:
    """How a run names its question set: the source (``Session set``, ``Import``…) or ``sample:NAME``."""
    return f"sample:{sample}" if source == SAMPLE_SOURCE else source


def plan_benchmark(
    qset: QuestionSet,
    entries: Sequence[ConfigEntry],
    models: SessionModels,
    *,
    embedder: str | None,
    retrieve: int,
    auto: bool,
    cross_corpus: bool,
    name: str,
) -> JobPlan:
    """The benchmark of ``entries`` on ``qset`` (:func:`backend.retrieval.jobs.benchmark_job`).

    A configuration whose chunker needs the language model makes it a model job: the session's
    loaded model, or (none loaded) the default one, which the chunkers load only for outputs the
    cache does not hold. The job's meta holds ``tags``, ``colors``, ``qset``, ``qset_name`` and ``cross_corpus``.

    Args:
        qset: The question set.
        entries: The configurations, in the order of the results.
        models: The session's models.
        embedder: The embedder (None: ``CHUNKLAB_EMBEDDER`` or the bundled one).
        retrieve: Chunks per question (ignored with ``auto``).
        auto: As many chunks as hold excerpts (``retrieve=-1``).
        cross_corpus: Retrieve from every corpus of the set.
        name: The question set's name (:func:`qset_name`).

    Raises:
        ParameterError: no question or configuration, or the language model a configuration needs is unusable.
    """
    if qset is None or not len(qset):
        raise ParameterError("Pick a question set with questions first.")
    if not entries:
        raise ParameterError("Pick at least one configuration.")
    configs = [e.config for e in entries]
    depth = -1 if auto else int(retrieve)
    lm = any(needs_model(c) for c in configs)
    if lm and models.error:
        raise ParameterError(models.error)
    body = benchmark_job(qset, configs, embedder, depth, bool(cross_corpus))
    signature = (
        "benchmark", question_set_key(qset), tuple(configs), embedder, depth, bool(cross_corpus),
        models.identity if lm else None,
    )
    meta = {"tags": [e.tag for e in entries], "colors": [config_color(e.uid) for e in entries], "qset": qset,
            "qset_name": name, "cross_corpus": bool(cross_corpus)}
    return JobPlan(
        f"Benchmarking {len(configs)} configuration(s)", signature, body,
        models=models if lm and models.scorer is not None else None, model=models.label if lm else "", meta=meta,
    )


def _pm(mean: float, std: float) -> str:
    """``81.2 ± 10.3`` (percentages), ``—`` for no questions."""
    if np.isnan(mean):
        return "—"
    return f"{100 * mean:.1f} ± {100 * std:.1f}"


def _metric_cells(r: ConfigResult, s: MetricSummary) -> dict[str, str]:
    """Each metric's ``mean ± std``; precision-Ω marked when computed on a retriever's finest units."""
    cells = {METRIC_LABELS[m]: _pm(getattr(s, f"{m}_mean"), getattr(s, f"{m}_std")) for m in METRICS}
    omega = METRIC_LABELS["precision_omega"]
    mark = r.terms.table_mark
    cells[omega] = f"{cells[omega]} {mark}" if mark and cells[omega] != "—" else cells[omega]
    return cells


def _tokens(retrieved: Sequence[Any]) -> int:
    return sum(c.tokens for c in retrieved)


def summary_rows(benchmark: Benchmark, tags: Sequence[str]) -> list[dict[str, Any]]:
    """The report's results table plus what each configuration retrieved and cost, one row per configuration.

    Columns: ``config`` (the tag), the chunker label, mean ± std of each metric (in %; a
    retriever's precision-Ω marked), chunks (a retriever: entries over all its levels), mean
    tokens per chunk (a retriever: per finest unit), seconds, then mean tokens retrieved per
    question, texts embedded, index seconds and mean query milliseconds.
    """
    return [
        {
            "config": tag,
            "chunker": r.config.label,
            **_metric_cells(r, r.summary),
            "chunks": r.chunks,
            "mean tokens": round(r.chunk_tokens_mean, 1),
            "seconds": round(r.seconds, 2),
            "retrieved tokens": round(r.retrieved_tokens_mean, 1),
            "texts embedded": r.texts_embedded,
            "index seconds": round(r.index_seconds, 2),
            "query ms": round(1000 * r.query_seconds, 2),
        }
        for tag, r in zip(tags, benchmark.results)
    ]


def per_corpus_rows(benchmark: Benchmark, tags: Sequence[str]) -> list[dict[str, Any]]:
    """Per configuration and corpus: questions, mean ± std of each metric (in %) and mean tokens retrieved."""
    rows = []
    for tag, r in zip(tags, benchmark.results):
        for cid, s in r.per_corpus.items():
            mine = [_tokens(q.retrieved) for q in r.questions if q.corpus_id == cid]
            rows.append({
                "config": tag,
                "corpus": cid,
                "questions": s.questions,
                **_metric_cells(r, s),
                "retrieved tokens": round(float(np.mean(mine)), 1) if mine else math.nan,
            })
    return rows


def _terms_notes(tags: Sequence[str], results: Sequence[ConfigResult], of: str) -> list[str]:
    """One note per kind of units whose terms have a note ``of`` (``benchmark_note``…), naming its tags."""
    groups: dict[str, list[str]] = {}
    for tag, r in zip(tags, results):
        groups.setdefault(getattr(r.terms, of), []).append(tag)
    return [note.format(tags=", ".join(ts)) for note, ts in groups.items() if note]


@dataclass(frozen=True)
class BenchmarkView:
    """What the Benchmark page's results section shows of a finished run.

    Attributes:
        tags: Per result, its tag.
        colors: Per result, its colour.
        caption: The line under "Results" (Markdown).
        summary: :func:`summary_rows`.
        per_corpus: :func:`per_corpus_rows` when the set has several corpora, else empty.
        notes: Captions under the table (what a retriever's precision-Ω and counts are).
        agreement_notes: Captions above the agreement maps.
        results: The results CSV's rows (``tag`` first, then :meth:`Benchmark.table`'s columns).
        routed: The routed configurations' results, by tag.
        questions: The run's questions' texts, in order (the heat map's rows).
        benchmark: The benchmark itself (its figures and exports are drawn from it).
        qset: The question set it ran.
        chunkings: Per corpus, each configuration's chunking (the agreement maps); empty when unknown.
        warning: One line when the questions come from a method known to rank recall poorly
            (:func:`~backend.retrieval.agreement.method_warning`); "" otherwise.
    """

    tags: tuple[str, ...]
    colors: tuple[str, ...]
    caption: str
    summary: tuple[dict[str, Any], ...]
    per_corpus: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    agreement_notes: tuple[str, ...]
    results: tuple[dict[str, Any], ...]
    routed: Mapping[str, ConfigResult]
    questions: tuple[str, ...]
    benchmark: Benchmark | None = field(default=None, compare=False, repr=False)
    qset: QuestionSet | None = field(default=None, compare=False, repr=False)
    chunkings: Mapping[str, tuple[Chunking, ...]] = field(default_factory=dict, compare=False, repr=False)
    warning: str = ""

    metric_labels = METRIC_LABELS  # what the heat map's metric picker calls each metric

    @property
    def corpora(self) -> tuple[str, ...]:
        """The corpora the run covered, in order."""
        return tuple(self.benchmark.corpora) if self.benchmark is not None else ()

    def results_csv(self) -> str:
        """The results table as CSV (:attr:`results`): what the page's "Results CSV" downloads."""
        return pd.DataFrame(list(self.results)).to_csv(index=False)

    def results_json(self) -> str:
        """The benchmark as JSON (:meth:`Benchmark.to_json`, indented)."""
        return json.dumps(self.benchmark.to_json(), indent=2)

    def per_question(self) -> PerQuestion:
        """Every question under every configuration (:func:`per_question`), tagged as the table is."""
        return per_question(self.benchmark, self.tags)

    def bars(self) -> go.Figure:
        """Grouped bars of every metric per configuration."""
        return metric_bars(self.benchmark, list(self.tags), list(self.colors))

    def question_heatmap(self, metric: str) -> go.Figure:
        """Questions × configurations, coloured by ``metric`` (``iou``, ``recall`` or ``precision``)."""
        return question_heatmap(self.benchmark.matrix(metric), list(self.questions), list(self.tags), metric)

    def agreement(self, corpus: str, tolerance: int) -> tuple[go.Figure, go.Figure] | None:
        """Boundary IoU (within ``tolerance`` characters) and span overlap between configurations on ``corpus``.

        None with fewer than two configurations (or no chunkings kept).
        """
        chunkings = self.chunkings.get(corpus, ())
        if len(chunkings) < 2:
            return None
        bounds, overlap, _, _ = agreement_heatmaps(list(chunkings), list(self.tags), tolerance)
        return bounds, overlap

    def coverage(self, corpus: str, bins: int = 200) -> go.Figure:
        """How many questions retrieved each stretch of ``corpus``, per configuration, above where the excerpts are."""
        rows, excerpts = coverage_rows(self.benchmark, self.qset, corpus, bins=bins)
        return coverage_strip(rows, excerpts, list(self.tags), len(self.qset.document(corpus).text))


def benchmark_view(
    benchmark: Benchmark, meta: Mapping[str, Any], chunkings: Mapping[str, tuple[Chunking, ...]] | None = None
) -> BenchmarkView:
    """The results section of a finished run, from the benchmark and its job's meta (tags, colours, question set).

    ``chunkings`` (the run's, per corpus) feed the agreement maps.
    """
    tags, colors, qset = list(meta["tags"]), list(meta["colors"]), meta["qset"]
    per = "as many chunks as hold excerpts" if benchmark.retrieve == -1 else f"{benchmark.retrieve} chunks"
    made = f" ({md_text(qset.method)})" if qset is not None and qset.method else ""
    caption = (
        f"{benchmark.questions} questions{made} · {len(benchmark.corpora)} corpus/corpora · "
        f"embedder {md_text(benchmark.embedder)} · "
        f"{per} per question · {benchmark.seconds:.1f} s. Mean ± standard deviation over questions, in %."
    )
    return BenchmarkView(
        tags=tuple(tags),
        colors=tuple(colors),
        caption=caption,
        summary=tuple(summary_rows(benchmark, tags)),
        per_corpus=tuple(per_corpus_rows(benchmark, tags)) if len(benchmark.corpora) > 1 else (),
        notes=tuple(_terms_notes(tags, benchmark.results, "benchmark_note")),
        agreement_notes=tuple(_terms_notes(tags, benchmark.results, "agreement_note")),
        results=tuple({"tag": tag, **row} for tag, row in zip(tags, benchmark.table())),
        routed={tag: r for tag, r in zip(tags, benchmark.results) if r.routing is not None},
        questions=tuple(q.question for q in qset.questions),
        benchmark=benchmark,
        qset=qset,
        chunkings=dict(chunkings or {}),
        warning=(method_warning(qset.method) or "") if qset is not None else "",
    )


@dataclass(frozen=True)
class PerQuestion:
    """Every question under every configuration: the per-question export (CSV or JSON).

    Attributes:
        columns: :data:`PER_QUESTION_COLUMNS`, then :data:`ROUTING_COLUMNS` when a configuration is routed.
        rows: One dict per configuration and question (scores are fractions); a routing column
            of a configuration without routing is None.
    """

    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]

    def to_csv(self) -> str:
        """The table as CSV (a header line; None as an empty cell)."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(self.columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        return out.getvalue()

    def to_json(self) -> str:
        """The table as a JSON array of objects (None as null)."""
        return json.dumps([dict(r) for r in self.rows], ensure_ascii=False, indent=1)


def per_question(benchmark: Benchmark, tags: Sequence[str]) -> PerQuestion:
    """Every question under every configuration (see :class:`PerQuestion`).

    Beside the scores: entries and tokens retrieved, the levels they came from (a retriever's,
    ``;``-separated; empty for a chunking's chunks, which have none), what precision-Ω was computed
    on, and for a routed retriever the chosen and oracle levels (1-based; oracle 0: none) and the
    router's weight on each level.
    """
    routed = any(r.routing is not None for r in benchmark.results)
    columns = PER_QUESTION_COLUMNS + (ROUTING_COLUMNS if routed else ())
    rows = []
    for tag, r in zip(tags, benchmark.results):
        routing = r.routing
        for i, q in enumerate(r.questions):
            row: dict[str, Any] = {
                "config": tag,
                "chunker": r.config.label,
                **{k: v for k, v in q.to_json().items() if k != "retrieved"},
                "omega_units": r.omega_units,
                "retrieved_entries": len(q.retrieved),
                "retrieved_tokens": _tokens(q.retrieved),
                "retrieved_levels": ";".join(str(c.level) for c in q.retrieved if c.level),
            }
            if routed:
                row.update(dict.fromkeys(ROUTING_COLUMNS))
            if routing is not None:
                row["chosen_level"] = int(routing.chosen[i])
                row["oracle_level"] = int(routing.oracle[i])
                row["weights"] = ";".join(f"{w:.4f}" for w in np.asarray(routing.weights[i]).tolist())
            rows.append(row)
    return PerQuestion(columns, tuple(rows))


def write_per_question(table: PerQuestion, path: str | Path) -> Path:
    """Write the per-question table to ``path``: CSV for ``.csv``, JSON for ``.json``.

    Raises:
        ParameterError: another suffix.
        OSError: the file cannot be written.
    """
    path = Path(path).expanduser()
    text = {".csv": table.to_csv, ".json": table.to_json}.get(path.suffix.lower())
    if text is None:
        raise ParameterError(f"--per-question {path.name}: the file must end in .csv or .json")
    path.write_text(text(), encoding="utf-8")
    return path


# --- the routing section -----------------------------------------------------------------------------------

_ROUTER_NOTES = {
    "cv": "each question routed by a router cross-fitted on the other folds (5 folds) of this set",
    "uniform": "equal weights (the finest level wins the tie)",
    "oracle": "each question's own soft label (an upper bound)",
}


def oracle_note(routing: Routing) -> str:
    """The confusion matrix's caption: agreement on the questions with an oracle level, and how many had none."""
    a = routing.agreement()
    if not a.counted:
        return f"None of the {a.questions} questions has an oracle level: no level's top-1 entry touches any answer."
    return (
        f"The router chose the oracle level (the level whose top-1 entry best matches the answer) for "
        f"**{a.agreed} of {a.counted}** questions. {a.without_oracle} of {a.questions} question(s) had no oracle level "
        f"(no level's top-1 entry touches the answer) and are not counted."
    )


def training_note(training: TrainReport, level_names: Sequence[str]) -> str:
    """The training curve's caption: questions used and dropped, the validation split, the label histogram."""
    hist = " · ".join(f"{md_text(name)}: {count}" for name, count in zip(level_names, training.label_histogram))
    return (
        f"Trained on **{training.questions}** usable question(s) ({training.validation} held out for the "
        f"validation loss); **{training.dropped}** dropped (no level's top-1 entry touches the answer). "
        f"Best label per level: {hist}. {training.epochs} epochs, {training.seconds:.1f} s. This router, fitted on "
        "every usable question, is the one a saved router would be; the table's scores come from the cross-fitted ones."
    )


def _router_note(routing: Routing) -> str:
    kind = routing.router.split(":", 1)[0]
    if kind == "level":
        return f"weight 1 on {routing.router} only (MoG's selection without a router)"
    return _ROUTER_NOTES.get(kind, "weights from a trained router file")


@dataclass(frozen=True)
class RoutingView:
    """The routing section of one routed configuration: its captions and each question's corpus.

    Attributes:
        caption: How it routes (Markdown).
        oracle_note: Under the oracle × chosen matrix.
        training_note: Under the training curve, or why there is none.
        has_training: Whether a training curve is drawn.
        corpus_of: Each question's corpus id, in question order (the level bars' groups).
    """

    caption: str
    oracle_note: str
    training_note: str
    has_training: bool
    corpus_of: tuple[str, ...]


def routing_view(tag: str, result: ConfigResult) -> RoutingView:
    """The routing section's words and groups for a routed configuration (``result.routing`` set).

    Raises:
        ParameterError: the configuration has no routing.
    """
    routing = result.routing
    if routing is None:
        raise ParameterError(f"{tag} has no routing")
    if routing.training is not None:
        training = training_note(routing.training, routing.level_names)
    elif routing.router == "cv":
        training = ("No training curve: fewer than 2 questions have a usable label (a level whose top-1 entry touches "
                    "the answer), so no router could be trained and every question got the uniform weight 0.5.")
    else:
        training = f"No training curve: router={md_text(routing.router)} trains nothing on this set."
    return RoutingView(
        caption=f"{md_text(tag)} · router={md_text(routing.router)}: {md_text(_router_note(routing))}.",
        oracle_note=oracle_note(routing),
        training_note=training,
        has_training=routing.training is not None,
        corpus_of=tuple(q.corpus_id for q in result.questions),
    )


# --- question generation -------------------------------------------------------------------------------------


def candidate_rows(gen: GeneratedQuestions) -> list[dict[str, Any]]:
    """Every generated candidate (:data:`CANDIDATE_COLUMNS`): the question, its worst excerpt similarity, kept, and why not."""
    return [
        {
            "question": c.question.question,
            "excerpts": len(c.question.references),
            "excerpt_similarity": c.worst_excerpt_similarity,
            "kept": kept,
            "dropped_because": why or "",
        }
        for c, kept, why in zip(gen.candidates, gen.kept, gen.drop_reasons)
    ]
