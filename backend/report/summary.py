"""The Summary: one row of numbers per configuration, each column's best, and a verdict in words.

Nothing here computes a metric its own way. The chunk statistics are
:func:`~backend.metrics.stats.chunking_stats` (the Compare page's table), BC, CS and DS are
:func:`~backend.metrics.report.quality_row` of the pair tables and vectors the Quality page
scores (:mod:`backend.metrics.scores`), and recall, precision, IoU and precision-Ω are the
means of a :class:`~backend.retrieval.evaluate.Benchmark` (the Benchmark page's table). So
the Summary page, the one-file report and ``python -m backend report`` show the numbers those
pages show.

Never mix documents: a row's recall, precision, IoU and precision-Ω come only from the
benchmark's questions on *this* document (:meth:`QuestionSet.on_document
<backend.retrieval.questions.QuestionSet.on_document>`: a corpus whose text loads as the
document's text), their means recomputed over those questions when the set holds other
corpora too (:func:`split_benchmark`). The questions on other corpora (a bundled sample that is
not this document, an imported set of five corpora) make a section of their own,
:class:`RetrievalElsewhere`, titled with the set and its corpora, which no row and no verdict
line ever cites.

A retrieval number is a mean over those questions, so it carries its 95% interval over them
(``78.1% [70.0, 85.2]``: :func:`~backend.metrics.intervals.mean_interval` of the per-question
scores, seeded with :data:`RETRIEVAL_SEED` so the same benchmark gives the same interval on every
run), and one configuration is called better than another only when their paired difference
over the same questions has an interval that excludes zero (:meth:`Summary.paired`) — the
highlight and the verdict alike.

:func:`summarize` lays given results out (pure, no model); :func:`collect` gathers them: from
the output cache alone (``compute=False``: a metric whose model outputs are not cached is
None), or computing what is missing (``compute=True``: the CLI's report, the page's job).
:func:`verdict` says in at most five sentences what the numbers show, and nothing else.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Union

from backend.chunkers.base import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunkers.run import chunk_all, needs_model
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import NotCached, ParameterError
from backend.metrics.estimate import Estimate, overlap
from backend.metrics.formulas import PairTable
from backend.metrics.intervals import Interval, mean_interval, paired_difference, paired_leaders
from backend.metrics.report import BEST, QualityReport, QualitySettings, quality_row
from backend.metrics.scores import LazyScorer, cached_pair_table, cached_vectors, score_chunkings
from backend.metrics.stats import chunking_stats
from backend.progress import Progress
from backend.retrieval.evaluate import Benchmark, MetricSummary, evaluate
from backend.retrieval.questions import QuestionSet
from backend.retrieval.retriever.registry import describe
from backend.samples import get_sample
from backend.text.document import Document

if TYPE_CHECKING:
    import numpy as np


__all__ = [
    "METRICS",
    "GROUPS",
    "METRIC_INFO",
    "MetricInfo",
    "RETRIEVAL_SEED",
    "ConfigSummary",
    "Paired",
    "RetrievalScope",
    "RetrievalElsewhere",
    "Summary",
    "QualityRowLike",
    "format_value",
    "estimate_text",
    "leaders_of",
    "difference_text",
    "SUMMARY_CSV_COLUMNS",
    "question_set_title",
    "split_benchmark",
    "summarize",
    "verdict",
    "with_quality",
    "missing_sentence",
    "NO_SET_ON_DOCUMENT",
    "cached_scores",
    "collect",
]

METRICS = (
    "chunks", "tokens_mean", "tokens_std", "seconds", "bc", "cs", "ds", "recall", "precision", "iou", "precision_omega",
)
# Which metrics each kind of missing work computes (the page's "compute the missing" buttons).
GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"quality": ("bc", "cs", "ds"), "retrieval": ("recall", "precision", "iou", "precision_omega")}
)
# A Summary column → the Quality table's column it shows (CS: the complete graph, MoC's headline figure).
_QUALITY_COLUMN = {"bc": "bc", "cs": "cs_complete", "ds": "ds"}
_RETRIEVAL_FIELD = {m: f"{m}_mean" for m in GROUPS["retrieval"]}
_FOLLOW_CHUNKS = ("tokens_mean", "tokens_std", "seconds")  # known exactly when the chunk count is
# The bootstrap's seed for the retrieval intervals: the same benchmark gives the same intervals on every run.
RETRIEVAL_SEED = 0
# The Summary's CSV: the row, every metric, each quality metric's interval and the pairs it stands on, then each
# retrieval metric's 95% interval over questions and how many questions it stands on.
SUMMARY_CSV_COLUMNS = (
    "tag", "configuration", *METRICS,
    *(f"{m}_{part}" for m in _QUALITY_COLUMN for part in ("ci_low", "ci_high", "pairs_scored", "pairs_total")),
    *(f"{m}_{part}" for m in GROUPS["retrieval"] for part in ("ci_low", "ci_high", "questions")),
)


@dataclass(frozen=True)
class MetricInfo:
    """How one Summary column reads.

    Attributes:
        label: Column header.
        help: What the number means, in one plain sentence (the column's hover text).
        higher_is_better: Which way is better; None when neither is (a count, a length).
        fmt: A ``str.format`` template for one value, e.g. ``{:.1%}``.
    """

    label: str
    help: str
    higher_is_better: bool | None
    fmt: str


def _direction(metric: str) -> bool:
    """The Quality table's direction of a quality column (:data:`backend.metrics.report.BEST`)."""
    return BEST[_QUALITY_COLUMN[metric]] == "max"


METRIC_INFO: Mapping[str, MetricInfo] = MappingProxyType({
    "chunks": MetricInfo("Chunks", "How many pieces the document is cut into.", None, "{:,d}"),
    "tokens_mean": MetricInfo(
        "Mean tokens", "How long a chunk is on average, in tokens of the configuration's tokenizer.", None, "{:.1f}"
    ),
    "tokens_std": MetricInfo(
        "Std tokens", "How much chunk lengths vary around that average (0: all chunks the same length).", None, "{:.1f}"
    ),
    "seconds": MetricInfo(
        "Time (s)", "The model work behind the chunking (scoring, embedding; read from the cache or not) plus "
        "cutting the document; where a cached model output's time was not recorded, the cutting alone (the note "
        "says so).", False, "{:.3f}",
    ),
    "bc": MetricInfo(
        "BC", "Boundary clarity: how little a chunk helps a language model predict the next one; higher means "
        "cleaner cuts.", _direction("bc"), "{:.3f}",
    ),
    "cs": MetricInfo(
        "CS", "Chunk stickiness: how much chunks lean on one another to be understood; lower means each chunk "
        "stands more on its own.", _direction("cs"), "{:.3f}",
    ),
    "ds": MetricInfo(
        "DS", "Dissimilarity: how different neighbouring chunks are in meaning (1 − cosine of their embeddings).",
        _direction("ds"), "{:.3f}",
    ),
    "recall": MetricInfo(
        "Recall", "How much of each question's answer text the retrieved chunks contain.", True, "{:.1%}"
    ),
    "precision": MetricInfo(
        "Precision", "How much of the retrieved text is answer text rather than noise.", True, "{:.1%}"
    ),
    "iou": MetricInfo(
        "IoU", "How closely the retrieved text matches the answer: missed answer text and extra text both lower it.",
        True, "{:.1%}",
    ),
    "precision_omega": MetricInfo(
        "Precision-Ω", "The best precision possible if retrieval picked exactly the chunks holding the answer.",
        True, "{:.1%}",
    ),
})

# One quality row: a QualityReport, or a row of backend.metrics.report.table_rows (a mapping by column).
QualityRowLike = Union[QualityReport, Mapping[str, Any]]


def _finite(value: Any) -> float | None:
    """``value`` as a float, None when absent or not finite."""
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def format_value(metric: str, value: float | None) -> str:
    """``value`` in ``metric``'s format (:data:`METRIC_INFO`); ``—`` for None.

    >>> format_value("iou", 0.0678)
    '6.8%'
    """
    if value is None:
        return "—"
    fmt = METRIC_INFO[metric].fmt
    return fmt.format(int(value)) if fmt.endswith("d}") else fmt.format(value)


def estimate_text(est: Estimate, *, pairs: bool = True) -> str:
    """An estimate as a cell shows it: ``0.93 ± 0.02 (120 of 1,747 pairs)``; ``pairs=False``: ``0.93 ± 0.02``.

    An interval not bounded yet (one value so far: no spread to measure) reads ``0.93 ± ∞``,
    never as a bare number that would pass for an exact one.
    """
    h = est.half_width
    if est.exact or est.estimate is None or h is None or math.isfinite(h):
        return est.label() if pairs else est.value_text()
    text = f"{est.estimate:.2f} ± ∞"
    return f"{text} ({est.pairs_scored:,} of {est.pairs_total:,} {est.unit})" if pairs else text


@dataclass(frozen=True)
class ConfigSummary:
    """One configuration's row.

    Attributes:
        tag: Its letter (A, B…).
        config: The configuration.
        values: Per name of :data:`METRICS`, its number (None: not computed yet); for BC, CS and
            DS the point estimate when only some pairs are scored.
        notes: Per metric, a short qualifier shown beside the number (``"precision_omega": "on units"``).
        estimates: Per quality metric (``bc``, ``cs``, ``ds``), its estimate with the 95% interval
            and the pairs it stands on (absent: not computed, or known only as a bare number).
        scores: Per retrieval metric (recall, precision, IoU, precision-Ω), its score on each
            question counted, in the question set's order (absent: only the mean is known).
        intervals: Per retrieval metric, its mean's 95% interval over those questions
            (:func:`~backend.metrics.intervals.mean_interval`, seed :data:`RETRIEVAL_SEED`);
            filled from ``scores`` where not given.
    """

    tag: str
    config: ChunkerConfig
    values: Mapping[str, float | None]
    notes: Mapping[str, str] = field(default_factory=dict)
    estimates: Mapping[str, Estimate] = field(default_factory=dict)
    scores: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    intervals: Mapping[str, Interval] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = {m: v for m, v in self.scores.items() if v and m not in self.intervals}
        if missing:  # derived once, so the cells, the JSON and the CSV show the same interval
            filled = {**self.intervals, **{m: mean_interval(v, seed=RETRIEVAL_SEED) for m, v in missing.items()}}
            object.__setattr__(self, "intervals", filled)

    def estimate(self, metric: str) -> Estimate | None:
        """``metric``'s estimate when it stands on only some of the pairs (not exact); else None."""
        est = self.estimates.get(metric)
        return est if est is not None and not est.exact and est.estimate is not None else None

    def interval(self, metric: str) -> Interval | None:
        """A retrieval metric's 95% interval over questions; None when only its mean is known (or another metric)."""
        ivl = self.intervals.get(metric)
        return ivl if ivl is not None and ivl.n > 0 else None

    def shown(self, metric: str) -> str:
        """``metric`` as a sentence cites it: ``0.930``, ``0.93 ± 0.02`` for an estimate from some pairs,
        ``78.1% [70.0, 85.2]`` for a retrieval mean over questions."""
        est = self.estimate(metric)
        if est is not None:
            return estimate_text(est, pairs=False)
        ivl = self.interval(metric)
        if ivl is not None:
            return ivl.text()
        return format_value(metric, _finite(self.values.get(metric)))

    def cell(self, metric: str) -> str:
        """``metric`` as the table shows it: ``0.930``, ``0.93 ± 0.02 (120 of 1,747 pairs)`` for an estimate,
        ``78.1% [70.0, 85.2]`` for a retrieval mean with its 95% interval over questions."""
        est = self.estimate(metric)
        return estimate_text(est) if est is not None else self.shown(metric)

    def to_json(self) -> dict[str, Any]:
        """``{"tag", "config", "values", "notes", "estimates", "intervals"}``.

        ``estimates`` holds, per quality metric known, ``{"estimate", "ci_low", "ci_high",
        "pairs_scored", "pairs_total", "method"}`` (an exact value: ``pairs_scored == pairs_total``);
        ``intervals``, per retrieval metric known question by question, ``{"mean", "low", "high",
        "n", "level"}`` (:meth:`Interval.to_json <backend.metrics.intervals.Interval.to_json>`; ``n``: questions).
        """
        return {"tag": self.tag, "config": self.config.to_json(), "values": dict(self.values), "notes": dict(self.notes),
                "estimates": {m: e.to_json() for m, e in self.estimates.items()},
                "intervals": {m: i.to_json() for m, i in self.intervals.items() if i.n > 0}}


def question_set_title(name: str | None) -> str:
    """How a sentence names a question set: ``sample:narrative`` → ``the bundled English narrative set``.

    The benchmark's names (:func:`backend.lab.benchmark.qset_name`): ``sample:NAME``, ``Session set``,
    ``Import``, ``Generated``; the Summary's ``session``; any other name (a CSV's file name) as is.
    """
    if not name:
        return "a question set"
    if name.startswith("sample:"):
        try:
            title = get_sample(name.removeprefix("sample:")).title
        except ParameterError:
            return name
        return f"the bundled {title.split(' — ')[0]} set"
    known = {"session": "the session's question set", "Session set": "the session's question set",
             "Import": "the imported question set", "Generated": "the generated question set"}
    return known.get(name, name)


def _corpora(n: int) -> str:
    return f"{n} corpus" if n == 1 else f"{n} corpora"


@dataclass(frozen=True)
class RetrievalScope:
    """Which questions a part of a benchmark counts: the set, its corpora, how many questions.

    Attributes:
        set_name: The question set's name (``sample:narrative``, ``Session set``, a CSV's name…).
        corpora: The corpus ids of the questions counted, in the set's order.
        questions: How many questions are counted.
        set_corpora: How many corpora the whole set has.
        cross_corpus: Whether retrieval ran across every corpus of the set (None: not known).
    """

    set_name: str | None
    corpora: tuple[str, ...]
    questions: int
    set_corpora: int
    cross_corpus: bool | None = None

    @property
    def set_title(self) -> str:
        """The set in words (:func:`question_set_title`)."""
        return question_set_title(self.set_name)

    @property
    def across(self) -> str | None:
        """``retrieved across the set's 5 corpora`` when retrieval searched corpora beyond these; else None."""
        if self.cross_corpus is False or self.set_corpora <= len(self.corpora):
            return None
        return f"retrieved across the set's {_corpora(self.set_corpora)}"

    def to_json(self) -> dict[str, Any]:
        """``{"set_name", "set_title", "corpora", "questions", "set_corpora", "cross_corpus"}``."""
        return {"set_name": self.set_name, "set_title": self.set_title, "corpora": list(self.corpora),
                "questions": self.questions, "set_corpora": self.set_corpora, "cross_corpus": self.cross_corpus}


@dataclass(frozen=True)
class RetrievalElsewhere:
    """A benchmark's numbers on questions that are *not* on this document: a section of their own.

    Attributes:
        scope: The questions counted (those of the set on other corpora).
        rows: One row per configuration benchmarked, with only recall, precision, IoU and
            precision-Ω (the other values None).
        set_unknown: True when the question set was not given, so no corpus could be matched
            to the document (the heading says "not known to be this document").
    """

    scope: RetrievalScope
    rows: tuple[ConfigSummary, ...]
    set_unknown: bool = False

    @property
    def heading(self) -> str:
        """``Retrieval on the bundled English narrative set, 1 corpus — not this document``."""
        what = "not known to be this document" if self.set_unknown else "not this document"
        return f"Retrieval on {self.scope.set_title}, {_corpora(len(self.scope.corpora))} — {what}"

    @property
    def caption(self) -> str:
        """What the numbers are about, in one line."""
        corpora = ", ".join(self.scope.corpora)
        across = f"; {self.scope.across}" if self.scope.across else ""
        return (
            f"{self.scope.questions} question{'s' if self.scope.questions != 1 else ''} on {corpora}{across}. "
            "These numbers are about those corpora, not about this document: no row and no verdict line uses them."
        )

    def to_json(self) -> dict[str, Any]:
        """``{"heading", "scope", "rows"}``."""
        return {"heading": self.heading, "scope": self.scope.to_json(), "rows": [r.to_json() for r in self.rows]}


@dataclass(frozen=True)
class Paired:
    """One retrieval metric compared over the same questions: who leads, and by how much against each other row.

    Attributes:
        metric: The retrieval metric (``recall``, ``precision``, ``iou``, ``precision_omega``).
        leaders: The best by mean first, then, in row order, every row whose paired difference
            to it does not exclude zero (:func:`~backend.metrics.intervals.paired_leaders`);
            one tag: the best is called. Without per-question scores, every row with the metric
            (the highest mean first).
        differences: Per other row, the best's mean minus its mean over the same questions,
            with the paired bootstrap's 95% interval (seed :data:`RETRIEVAL_SEED`); empty
            without per-question scores.
        questions: How many questions the comparison stands on (0: not known question by question).
    """

    metric: str
    leaders: tuple[str, ...]
    differences: Mapping[str, Interval]
    questions: int

    @property
    def best(self) -> str:
        """The row with the highest mean (called only when it is the one leader)."""
        return self.leaders[0]

    @property
    def known(self) -> bool:
        """Whether the rows were compared question by question (else nothing can be called)."""
        return self.questions > 0

    def to_json(self) -> dict[str, Any]:
        """``{"leaders", "questions", "differences": {tag: Interval JSON}}`` (each difference: the best minus that row)."""
        return {"leaders": list(self.leaders), "questions": self.questions,
                "differences": {t: d.to_json() for t, d in self.differences.items()}}


def difference_text(diff: Interval) -> str:
    """A paired difference of two percentages in points: ``18.2 points [9.1, 27.3]``.

    An end that would round to 0.0 while the interval excludes zero gets more digits
    (``[0.04, 3.10]``), so a called difference never reads as touching zero; one question
    has no interval (``18.2 points, no interval from one question``).
    """
    if math.isnan(diff.mean):
        return "n/a"
    if not (math.isfinite(diff.low) and math.isfinite(diff.high)):
        return f"{100 * diff.mean:.1f} points, no interval from one question"
    digits = 1
    while digits < 3 and diff.excludes_zero() and min(abs(diff.low), abs(diff.high)) * 100 < 0.5 * 10 ** -digits:
        digits += 1
    f = f"{{:.{digits}f}}"
    return f"{100 * diff.mean:.1f} points [{f.format(100 * diff.low)}, {f.format(100 * diff.high)}]"


@dataclass(frozen=True)
class Summary:
    """The Summary of one document: a row per configuration and the settings the numbers were computed under.

    Attributes:
        doc_name: The document's name.
        doc_id: Its id (the hash of its text).
        rows: One :class:`ConfigSummary` per configuration, in the session's order.
        settings: K, delta, window, cs_rule, bc_mode, retrieve, embedder, lm, question_set,
            question_set_size (None where unknown).
        retrieval: The questions on this document the rows' recall, precision, IoU and
            precision-Ω were measured on (None: no benchmark question is on this document).
        elsewhere: The benchmark's numbers on questions of other corpora (None: none), never
            part of a row or of the verdict.
    """

    doc_name: str
    doc_id: str
    rows: tuple[ConfigSummary, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    retrieval: RetrievalScope | None = None
    elsewhere: RetrievalElsewhere | None = None
    # Each retrieval metric's comparison, made once: the table, the verdict and the JSON all ask for it.
    _paired: dict[str, Paired | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    def computed(self, metric: str) -> list[tuple[str, float]]:
        """``(tag, value)`` of the rows that have ``metric``, in row order."""
        return [(r.tag, v) for r in self.rows if (v := _finite(r.values.get(metric))) is not None]

    def leaders(self, metric: str) -> list[str]:
        """The tags that cannot be told apart from the best ``metric`` value; [] without a direction or two values.

        Two exact values are told apart as shown (their format: equal as shown is a tie). Where
        either is an estimate from some of the pairs, they are told apart only when their 95%
        intervals do not overlap (:func:`~backend.metrics.estimate.overlap`; an exact value is
        an interval of width 0). A retrieval metric is a mean over the same questions: two rows
        are told apart only when their paired difference's 95% interval excludes zero
        (:meth:`paired`; without per-question scores, never). In row order.
        """
        higher = METRIC_INFO[metric].higher_is_better
        if higher is None:
            return []
        if metric in GROUPS["retrieval"]:
            paired = self.paired(metric)
            return [] if paired is None else [r.tag for r in self.rows if r.tag in paired.leaders]
        items = [(tag, _interval(self.row(tag), metric)) for tag, _ in self.computed(metric)]
        return leaders_of(items, higher=higher, shown=lambda e: format_value(metric, e.estimate))

    def paired(self, metric: str) -> Paired | None:
        """A retrieval metric's rows compared question by question; None with fewer than two values.

        The best by mean leads; another row is told apart from it only when the paired
        difference (best minus it, over the same questions) has a 95% interval that excludes
        zero (:func:`~backend.metrics.intervals.paired_leaders`, seed :data:`RETRIEVAL_SEED`).
        Where some row's per-question scores are not known, or they are not over the same
        number of questions, no row is told apart (every row with the metric leads).

        Raises:
            ValueError: ``metric`` is not a retrieval metric.
        """
        if metric not in GROUPS["retrieval"]:
            raise ValueError(f"{metric!r} is not a retrieval metric ({', '.join(GROUPS['retrieval'])})")
        if metric not in self._paired:
            self._paired[metric] = self._compare(metric)
        return self._paired[metric]

    def _compare(self, metric: str) -> Paired | None:
        """:meth:`paired`, computed."""
        tags = [t for t, _ in self.computed(metric)]
        if len(tags) < 2:
            return None
        scores = {t: tuple(self.row(t).scores.get(metric, ())) for t in tags}
        sizes = {len(v) for v in scores.values()}
        if 0 in sizes or len(sizes) != 1:
            by_mean = sorted(self.computed(metric), key=lambda p: -p[1])  # stable: row order among equal means
            return Paired(metric, tuple(t for t, _ in by_mean), {}, 0)
        leaders = paired_leaders(scores, seed=RETRIEVAL_SEED)
        best = leaders[0]
        differences = {t: paired_difference(scores[best], scores[t], seed=RETRIEVAL_SEED) for t in tags if t != best}
        return Paired(metric, leaders, differences, sizes.pop())

    def best(self, metric: str) -> str | None:
        """The tag of the single best row on ``metric``; None with fewer than two values, no direction, or a tie."""
        leaders = self.leaders(metric)
        return leaders[0] if len(leaders) == 1 and len(self.computed(metric)) > 1 else None

    def missing(self) -> dict[str, list[str]]:
        """Per group of :data:`GROUPS` (``quality``, ``retrieval``), the tags lacking any of its metrics (only groups with some).

        A chunking of fewer than two chunks has no boundary, so no quality metric to compute: it is not listed.
        """
        out: dict[str, list[str]] = {}
        for group, metrics in GROUPS.items():
            tags = [
                r.tag for r in self.rows
                if any(_finite(r.values.get(m)) is None for m in metrics)
                and not (group == "quality" and _single_chunk(r))
            ]
            if tags:
                out[group] = tags
        return out

    def missing_metrics(self) -> dict[str, list[str]]:
        """Per metric of :data:`METRICS`, the tags whose value is not computed yet (only metrics with some).

        A chunking of fewer than two chunks has no boundary, so no BC, CS or DS to compute: it is not listed.
        The mean and spread of tokens and the time come with the chunks: only ``chunks`` names a missing chunking.
        """
        out: dict[str, list[str]] = {}
        for m in (m for m in METRICS if m not in _FOLLOW_CHUNKS):
            tags = [
                r.tag for r in self.rows
                if _finite(r.values.get(m)) is None and not (m in GROUPS["quality"] and _single_chunk(r))
            ]
            if tags:
                out[m] = tags
        return out

    def row(self, tag: str) -> ConfigSummary:
        """The row of ``tag``.

        Raises:
            KeyError: no row has that tag.
        """
        for r in self.rows:
            if r.tag == tag:
                return r
        raise KeyError(tag)

    def to_csv(self) -> str:
        """The rows as CSV (:data:`SUMMARY_CSV_COLUMNS`): tag, configuration, every metric, then the intervals.

        ``<m>_ci_low``, ``<m>_ci_high``, ``<m>_pairs_scored`` and ``<m>_pairs_total`` per quality
        metric: an estimate's 95% interval and the pairs it stands on (an exact value: an
        interval of width 0, ``pairs_scored == pairs_total``; the counts empty where not known).
        ``<m>_ci_low``, ``<m>_ci_high`` and ``<m>_questions`` per retrieval metric: its mean's
        95% interval over the questions (empty where only the mean is known).
        A value not computed is an empty cell.
        """
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(SUMMARY_CSV_COLUMNS)
        for r in self.rows:
            cells: list[Any] = [r.tag, r.config.label, *(_finite(r.values.get(m)) for m in METRICS)]
            for m in _QUALITY_COLUMN:
                est = r.estimates.get(m)
                value = _finite(r.values.get(m))
                if est is not None and est.estimate is not None:
                    cells += [_finite(est.ci_low), _finite(est.ci_high), est.pairs_scored, est.pairs_total]
                else:
                    cells += [value, value, None, None]
            for m in GROUPS["retrieval"]:
                ivl = r.interval(m)
                cells += [_finite(ivl.low), _finite(ivl.high), ivl.n] if ivl is not None else [None, None, None]
            writer.writerow(["" if c is None else c for c in cells])
        return out.getvalue()

    def to_json(self) -> dict[str, Any]:
        """``{"doc_name", "doc_id", "settings", "rows", "best", "missing", "verdict", "retrieval", "elsewhere", "paired"}``.

        ``retrieval`` is the scope of the rows' retrieval numbers (questions on this document),
        ``elsewhere`` the section of other corpora (:meth:`RetrievalElsewhere.to_json`); each None when absent.
        ``paired`` holds, per retrieval metric with two values or more, its comparison over the
        same questions (:meth:`Paired.to_json`): the leaders and the best's difference to each other row.
        """
        return {
            "doc_name": self.doc_name,
            "doc_id": self.doc_id,
            "settings": dict(self.settings),
            "rows": [r.to_json() for r in self.rows],
            "best": {m: self.best(m) for m in METRICS},
            "missing": self.missing(),
            "verdict": verdict(self),
            "retrieval": self.retrieval.to_json() if self.retrieval is not None else None,
            "elsewhere": self.elsewhere.to_json() if self.elsewhere is not None else None,
            "paired": {m: p.to_json() for m in GROUPS["retrieval"] if (p := self.paired(m)) is not None},
        }


def leaders_of(
    items: Sequence[tuple[str, Estimate]], *, higher: bool, shown: Callable[[Estimate], str]
) -> list[str]:
    """The names that cannot be told apart from the best estimate, in the given order; [] with fewer than two values.

    The one rule behind every "X is better" the app states of a chunk statistic or a quality
    metric (the verdict, the Summary's and the Quality table's highlights): two exact values are
    told apart as ``shown`` (equal as shown is a tie); where either is an estimate from some of
    the pairs, only when their 95% intervals do not overlap (:func:`~backend.metrics.estimate.overlap`).
    The best is the highest point estimate (``higher``) or the lowest. A retrieval metric, a
    mean over the same questions, is told apart by its paired difference instead
    (:meth:`Summary.paired`).

    >>> leaders_of([("A", Estimate(0.93, 0.9, 0.96, 120, 1747)), ("B", Estimate(0.94, 0.91, 0.97, 120, 1747))],
    ...            higher=True, shown=lambda e: f"{e.estimate:.3f}")
    ['A', 'B']
    """
    known = [(name, e) for name, e in items if e.estimate is not None and math.isfinite(e.estimate)]
    if len(known) < 2:
        return []
    _, top = (max if higher else min)(known, key=lambda p: p[1].estimate)
    return [
        name for name, e in known
        if shown(e) == shown(top) or ((not e.exact or not top.exact) and overlap(top, e))
    ]


def _interval(row: ConfigSummary, metric: str) -> Estimate:
    """``row``'s ``metric`` as an interval: its estimate, or its exact value as an interval of width 0."""
    est = row.estimate(metric)
    if est is not None:
        return est
    value = _finite(row.values.get(metric))
    return Estimate(value, value, value, 0, 0)


def _single_chunk(row: ConfigSummary) -> bool:
    """A chunking of fewer than two chunks (no boundary: no BC, CS or DS)."""
    chunks = row.values.get("chunks")
    return chunks is not None and chunks < 2


def _quality_values(row: QualityRowLike | None) -> tuple[dict[str, float | None], dict[str, Estimate]]:
    """BC, CS and DS of one quality row (a :class:`QualityReport` or a ``table_rows`` row), and their estimates.

    The estimates are the row's ``estimates`` (by the quality table's column), those known only.
    """
    if row is None:
        return {m: None for m in _QUALITY_COLUMN}, {}
    values = row.values if isinstance(row, QualityReport) else row
    known = (row.estimates if isinstance(row, QualityReport) else row.get("estimates")) or {}
    estimates = {m: est for m, col in _QUALITY_COLUMN.items() if (est := known.get(col)) is not None}
    return {m: _finite(values.get(col)) for m, col in _QUALITY_COLUMN.items()}, estimates


def _restricted(benchmark: Benchmark, questions: QuestionSet | None, corpora: Sequence[str]) -> Benchmark:
    """``benchmark`` counting only the questions on ``corpora``: per-question results kept, means recomputed."""
    keep = set(corpora)
    if set(benchmark.corpora) <= keep:
        return benchmark  # every question counts: the Benchmark page's very numbers
    results = []
    for r in benchmark.results:
        kept = tuple(q for q in r.questions if q.corpus_id in keep)
        results.append(dataclasses.replace(
            r, summary=MetricSummary.of(kept), questions=kept,
            per_corpus={cid: v for cid, v in r.per_corpus.items() if cid in keep},
        ))
    if questions is not None:
        count = sum(1 for q in questions.questions if q.corpus_id in keep)
    else:
        count = len(results[0].questions) if results else 0
    return dataclasses.replace(
        benchmark, results=tuple(results), questions=count, corpora=tuple(c for c in benchmark.corpora if c in keep)
    )


def split_benchmark(
    benchmark: Benchmark, questions: QuestionSet | None, doc: Document
) -> tuple[Benchmark | None, Benchmark | None]:
    """``benchmark`` split into its questions on ``doc`` and those on other corpora; each None when it has none.

    A corpus is on ``doc`` when its text is ``doc``'s
    (:meth:`~backend.retrieval.questions.QuestionSet.corpora_of`). Each part keeps its
    per-question results and recomputes its means over them (the whole benchmark, unchanged,
    when every question is on one side). Without the question set (``questions`` None) no
    corpus is known to be ``doc``: everything is "elsewhere".

    Args:
        benchmark: A benchmark.
        questions: The question set it ran.
        doc: This document.
    """
    on_doc = set(questions.corpora_of(doc)) if questions is not None else set()
    mine = [cid for cid in benchmark.corpora if cid in on_doc]
    others = [cid for cid in benchmark.corpora if cid not in mine]
    return (
        _restricted(benchmark, questions, mine) if mine else None,
        _restricted(benchmark, questions, others) if others else None,
    )


def _retrieval_values(result: Any) -> dict[str, float | None]:
    return {m: _finite(getattr(result.summary, f)) for m, f in _RETRIEVAL_FIELD.items()}


def _retrieval_scores(result: Any) -> dict[str, tuple[float, ...]]:
    """Each retrieval metric's score on each question of ``result`` (empty when it kept its means only)."""
    if not result.questions:
        return {}
    return {m: tuple(q.metric(m) for q in result.questions) for m in GROUPS["retrieval"]}


def _scope(part: Benchmark, benchmark: Benchmark, name: str | None, cross_corpus: bool | None) -> RetrievalScope:
    return RetrievalScope(name, tuple(part.corpora), part.questions, len(benchmark.corpora), cross_corpus)


def summarize(
    doc: Document,
    tagged: Sequence[tuple[str, Chunking | ChunkerConfig]],
    *,
    quality: Mapping[str, QualityRowLike] | None = None,
    benchmark: Benchmark | None = None,
    questions: QuestionSet | None = None,
    question_set_name: str | None = None,
    cross_corpus: bool | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Summary:
    """The Summary of given results (no model, no cache).

    Args:
        doc: The document.
        tagged: ``(tag, chunking)`` per configuration, in order; a bare :class:`ChunkerConfig`
            in place of the chunking is a configuration not chunked yet (every value None).
        quality: Per tag, its quality row (from :func:`~backend.metrics.report.quality_row`
            or :func:`~backend.metrics.report.table_rows`); a tag absent: not computed. Its
            ``estimates`` (an :class:`~backend.metrics.estimate.Estimate` per column) make the
            row's BC, CS and DS read ``0.93 ± 0.02 (120 of 1,747 pairs)`` while not exact.
        benchmark: A benchmark; a configuration's retrieval numbers are those of the first
            result with an equal configuration, over the questions on ``doc`` only
            (:func:`split_benchmark`), each with its per-question scores and its mean's 95%
            interval over those questions (seed :data:`RETRIEVAL_SEED`); the questions on other
            corpora go to :attr:`Summary.elsewhere`.
        questions: The question set the benchmark ran (which of its corpora is ``doc``);
            None: none is known to be ``doc``.
        question_set_name: How the set is named (default: ``settings["question_set"]``).
        cross_corpus: Whether the benchmark retrieved across every corpus of the set (None: not known).
        settings: What the numbers were computed under (kept as given).
    """
    quality = quality or {}
    settings = dict(settings or {})
    name = question_set_name if question_set_name is not None else settings.get("question_set")
    mine, others = split_benchmark(benchmark, questions, doc) if benchmark is not None else (None, None)
    results = {}
    for result in mine.results if mine is not None else ():
        results.setdefault(result.config, result)
    rows = []
    for tag, item in tagged:
        config = item.config if isinstance(item, Chunking) else item
        values: dict[str, float | None] = dict.fromkeys(METRICS)
        notes: dict[str, str] = {}
        estimates: dict[str, Estimate] = {}
        if isinstance(item, Chunking):
            stats = chunking_stats([item])[0]
            values.update(chunks=float(stats["chunks"]), tokens_mean=stats["mean_tokens"],
                          tokens_std=stats["std_tokens"],
                          seconds=(item.total_s if item.total_s is not None else item.cut_s))
            if item.time_note:  # which part is the model's, whether it came from the cache, or that it is unknown
                notes["seconds"] = item.time_note
            known, estimates = _quality_values(quality.get(tag))
            values.update(known)
        result = results.get(config)
        scores: dict[str, tuple[float, ...]] = {}
        if result is not None:
            values.update(_retrieval_values(result))
            scores = _retrieval_scores(result)
            notes.update(result.terms.result_notes)
        notes.update(describe(config).terms.config_notes)
        rows.append(ConfigSummary(tag, config, values, notes, estimates, scores))
    elsewhere = None
    if others is not None and benchmark is not None:
        tags = {}
        for tag, item in tagged:
            tags.setdefault(item.config if isinstance(item, Chunking) else item, tag)
        other_rows = []
        for j, result in enumerate(others.results):
            values = dict.fromkeys(METRICS)
            values.update(_retrieval_values(result))
            other_rows.append(ConfigSummary(tags.get(result.config, f"#{j + 1}"), result.config, values,
                                            dict(result.terms.result_notes), scores=_retrieval_scores(result)))
        elsewhere = RetrievalElsewhere(
            _scope(others, benchmark, name, cross_corpus), tuple(other_rows), set_unknown=questions is None
        )
    return Summary(
        doc.source, doc.id, tuple(rows), settings,
        retrieval=_scope(mine, benchmark, name, cross_corpus) if mine is not None and benchmark is not None else None,
        elsewhere=elsewhere,
    )


def with_quality(summary: Summary, quality: Mapping[str, QualityRowLike]) -> Summary:
    """``summary`` with the BC, CS and DS of the rows in ``quality`` (by tag) replaced: a running job's estimates.

    The other rows, the other columns and the settings stay as they are (no model, no cache).
    """
    rows = []
    for row in summary.rows:
        if row.tag not in quality:
            rows.append(row)
            continue
        values, estimates = _quality_values(quality[row.tag])
        rows.append(dataclasses.replace(row, values={**row.values, **values}, estimates=estimates))
    return dataclasses.replace(summary, rows=tuple(rows))


# --- the verdict ----------------------------------------------------------------------------------


def _names(tags: Sequence[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return tags[0] if len(tags) == 1 else f"{', '.join(tags[:-1])} and {tags[-1]}"


def _word(metric: str) -> str:
    """``metric``'s label inside a sentence: ``IoU``, ``BC``, but ``recall``."""
    label = METRIC_INFO[metric].label
    return label if any(c.isascii() and c.isupper() for c in label[1:]) else label[0].lower() + label[1:]


def _comparison(summary: Summary, metric: str) -> tuple[str, float, str, float] | None:
    """``(best tag, its value, runner-up tag, its value)``; None without a single best."""
    best = summary.best(metric)
    if best is None:
        return None
    higher = METRIC_INFO[metric].higher_is_better
    others = sorted(((v, t) for t, v in summary.computed(metric) if t != best), key=lambda p: -p[0] if higher else p[0])
    value = dict(summary.computed(metric))[best]
    return best, value, others[0][1], others[0][0]


def _vs(summary: Summary, metric: str, best: str, runner: str) -> str:
    """``0.970 vs 0.930 for A`` (``…, the next best`` among more than two); an estimate reads ``0.93 ± 0.02``,
    a retrieval mean ``78.1% [70.0, 85.2]``."""
    next_best = ", the next best" if len(summary.computed(metric)) > 2 else ""
    return f"{summary.row(best).shown(metric)} vs {summary.row(runner).shown(metric)} for {runner}{next_best}"


def _tie(summary: Summary, metric: str) -> str | None:
    """When the best value is not alone, which rows share it, else None.

    Exact values: ``A and B tie on IoU (6.8%).``; with an estimate among them:
    ``A and B cannot be told apart yet (BC 0.93 ± 0.03 vs 0.94 ± 0.03).``
    """
    leaders = summary.leaders(metric)
    if len(leaders) < 2:
        return None
    rows = [summary.row(t) for t in leaders]
    if all(r.estimate(metric) is None for r in rows):
        value = dict(summary.computed(metric))[leaders[0]]
        return f"{_names(leaders)} tie on {_word(metric)} ({format_value(metric, value)})."
    cited = " vs ".join(r.shown(metric) for r in rows)
    return f"{_names(leaders)} cannot be told apart yet ({METRIC_INFO[metric].label} {cited})."


def _over(questions: int) -> str:
    """``over these 10 questions``, ``on this one question``."""
    return "on this one question" if questions == 1 else f"over these {questions} questions"


def _retrieval_sentence(summary: Summary, metric: str) -> str | None:
    """The best ``metric`` (IoU, recall) when its paired difference to every other row excludes zero, else who ties.

    Called: ``B has the highest recall (78.1% [70.0, 85.2] vs 59.9% [51.0, 68.8] for A; difference
    18.2 points [9.5, 27.0] over these 10 questions).`` (for IoU, with its chunk count against the
    runner-up's). Not called: ``B and A cannot be told apart on recall over these 10 questions
    (difference 18.2 points [-3.1, 39.0]).``
    """
    paired = summary.paired(metric)
    if paired is None:
        return None
    word = _word(metric)
    if not paired.known:
        cited = " vs ".join(f"{summary.row(t).shown(metric)} for {t}" for t in paired.leaders)
        return f"{_names(paired.leaders)} cannot be told apart on {word}: no per-question scores to pair ({cited})."
    over = _over(paired.questions)
    if len(paired.leaders) > 1:
        tied = paired.leaders[1:]
        if len(tied) == 1:
            diffs = f"difference {difference_text(paired.differences[tied[0]])}"
        else:
            diffs = f"differences from {paired.best}: " + ", ".join(
                f"{t} {difference_text(paired.differences[t])}" for t in tied
            )
        return f"{_names(paired.leaders)} cannot be told apart on {word} {over} ({diffs})."
    found = _comparison(summary, metric)
    if found is None:
        return None
    best, _value, runner, _other = found
    sentence = (
        f"{best} has the highest {word} ({_vs(summary, metric, best, runner)}; "
        f"difference {difference_text(paired.differences[runner])} {over})"
    )
    if metric == "iou":
        # The chunk counts as the table shows them (a ratio would be a number the table does not hold).
        mine, theirs = summary.row(best).values.get("chunks"), summary.row(runner).values.get("chunks")
        if mine is not None and theirs is not None:
            sentence += (
                f" with as many chunks as {runner} ({format_value('chunks', mine)})" if mine == theirs
                else f" with {format_value('chunks', mine)} chunks to {runner}'s {format_value('chunks', theirs)}"
            )
    return sentence + "."


def _quality_sentence(summary: Summary, metric: str) -> str | None:
    """The best BC (clearer boundaries) or CS (chunks that stand alone), with which way is better."""
    tie = _tie(summary, metric)
    if tie is not None:
        return tie
    found = _comparison(summary, metric)
    if found is None:
        return None
    best, _value, runner, _other = found
    most = len(summary.computed(metric)) > 2
    if metric == "bc":
        what = f"{best}'s boundaries are {'the clearest' if most else 'clearer'}"
        way = "higher is clearer"
    else:
        what = f"{best}'s chunks lean on each other {'the least' if most else 'less'}"
        way = "lower is better"
    label = METRIC_INFO[metric].label
    return f"{what} ({label} {_vs(summary, metric, best, runner)}; {way})."


NO_SET_ON_DOCUMENT = "no benchmark on questions about this document yet"


def missing_sentence(summary: Summary) -> str | None:
    """``Not computed yet: CS for A and B; recall, precision, IoU and precision-Ω for A and B.``; None when nothing is.

    Names each metric the table shows as "not computed yet" (:meth:`Summary.missing_metrics`),
    grouped by the configurations lacking it, and nothing else; the retrieval metrics add
    that no question set is on this document when none is.
    """
    groups: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for metric, tags in summary.missing_metrics().items():
        groups.setdefault((tuple(tags), metric in GROUPS["retrieval"]), []).append(metric)
    parts = []
    for (tags, retrieval), metrics in groups.items():
        why = f" ({NO_SET_ON_DOCUMENT})" if retrieval and summary.retrieval is None else ""
        parts.append(f"{_names([_word(m) for m in metrics])} for {_names(list(tags))}{why}")
    return f"Not computed yet: {'; '.join(parts)}." if parts else None


def verdict(summary: Summary) -> list[str]:
    """What the numbers show, in at most five sentences, deterministic; never more than the table holds.

    In order: the best IoU (with its chunk count against the runner-up's), the best recall,
    the clearest boundaries (BC, higher is clearer in both BC modes), the least sticky chunks
    (CS, lower is better), then what is not computed yet (:func:`missing_sentence`). A metric
    with fewer than two values says nothing; a best value shared as shown is a tie. An
    estimate from some of the pairs is called better only when its 95% interval does not
    overlap the others' (:meth:`Summary.leaders`); otherwise ``A and B cannot be told apart
    yet (BC 0.93 ± 0.03 vs 0.94 ± 0.03)``. IoU and recall are means over the same questions:
    the best is called only when its paired difference to every other row excludes zero
    (:meth:`Summary.paired`), and the sentence states that difference to the runner-up with
    its 95% interval; otherwise ``B and A cannot be told apart on recall over these 10
    questions (difference 18.2 points [-3.1, 39.0])``. Every value cited is a cell of the table
    as the table formats it (:meth:`ConfigSummary.shown`; a retrieval mean with its interval),
    beside only the paired differences behind a call, and only the rows are read: retrieval
    on other corpora (:attr:`Summary.elsewhere`) is never cited.
    """
    if len(summary.rows) < 2:
        only = f" ({summary.rows[0].tag})" if summary.rows else ""
        out = [f"Only one configuration{only}: nothing to compare yet." if summary.rows else "No configuration yet."]
    else:
        out = [
            s for s in (
                _retrieval_sentence(summary, "iou"),
                _retrieval_sentence(summary, "recall"),
                _quality_sentence(summary, "bc"),
                _quality_sentence(summary, "cs"),
            ) if s is not None
        ]
    last = missing_sentence(summary)
    return out + ([last] if last is not None else [])


# --- gathering the numbers -------------------------------------------------------------------------


def cached_scores(
    chunking: Chunking, *, scorer: Any, embedder_fingerprint: str | None, window: int | None, cache: Any
) -> tuple[PairTable | None, np.ndarray | None]:
    """A chunking's pair table and vectors from the output cache alone (each None when not there).

    The table holds every pair within ``window`` when those are cached (BC, CS), else the
    adjacent pairs only (BC). ``scorer`` is a cache-only context's refusing scorer (None: no table).
    """
    texts = [c.text for c in chunking.chunks]
    table = None
    if scorer is not None and cache is not None:
        for complete in (True, False):
            try:
                table = cached_pair_table(texts, scorer, complete=complete, window=window, cache=cache)
                break
            except NotCached:
                continue
    vectors = cached_vectors(cache, embedder_fingerprint, texts) if embedder_fingerprint and cache is not None else None
    return table, vectors


def collect(
    doc: Document,
    tagged_configs: Sequence[tuple[str, ChunkerConfig]],
    *,
    context: ModelContext | None,
    question_set: QuestionSet | None,
    embedder_spec: str | None,
    K: float,
    delta: int,
    window: int | None,
    cs_rule: str,
    bc_mode: str,
    retrieve: int,
    compute: bool,
    progress: Progress | None = None,
    benchmark: Benchmark | None = None,
    cross_corpus: bool = True,
    question_set_name: str | None = None,
) -> Summary:
    """Chunk, look up (or compute) and summarize: the Summary of ``doc`` under these settings.

    Args:
        doc: The document.
        tagged_configs: ``(tag, configuration)`` in order.
        context: The models: a cache-only context (``ModelContext.cache_only``) with
            ``compute=False``, a loading one with ``compute=True``; None: no model at all
            (model-backed configurations stay unchunked, no quality metric).
        question_set: The questions for recall, precision, IoU and precision-Ω (None: none).
        embedder_spec: The benchmark's embedder (None: the default).
        K, delta, window, cs_rule, bc_mode: The quality settings (``window``: CS's pair window).
        retrieve: Chunks retrieved per question (-1: as many as hold excerpts).
        compute: Compute what the cache lacks (pair scores, embeddings, the benchmark).
        progress: ``progress(done, total)`` of the model work; may raise ``Cancelled``.
        benchmark: A benchmark already run (used as is; with ``compute`` none is run then).
        cross_corpus: Retrieve across the set's corpora (the reference).
        question_set_name: How to name the question set in the settings.

    Raises:
        ChunkLabError: a model or the store fails (with ``compute``); bad settings.
    """
    settings = QualitySettings(K=K, bc_mode=bc_mode, cs_rule=cs_rule, delta=delta, window=window)

    def chunk(d: Document, config: ChunkerConfig) -> Chunking:
        if context is None and needs_model(config):
            raise NotCached(f"{config.label} needs a model")
        return run_chunker(d, config, context)

    outcomes = chunk_all(doc, [c for _, c in tagged_configs], chunk)
    tagged: list[tuple[str, Chunking | ChunkerConfig]] = [
        (tag, o.chunking if o.chunking is not None else config) for (tag, config), o in zip(tagged_configs, outcomes)
    ]
    chunked = [(tag, ch) for tag, ch in tagged if isinstance(ch, Chunking)]
    cache = context.cache if context is not None else None
    quality: dict[str, QualityReport] = {}
    if context is not None and chunked:
        if compute:
            run = score_chunkings(
                [ch for _, ch in chunked], scorer=LazyScorer(context), embedder=context.get_embedder,
                complete=True, window=window, cache=cache, progress=progress,
            )
            scores = run.results
        else:
            fp = context.embedder_fingerprint
            scores = tuple(
                cached_scores(ch, scorer=context.scorer, embedder_fingerprint=fp, window=window, cache=cache)
                for _, ch in chunked
            )
        for (tag, ch), (table, vectors) in zip(chunked, scores):
            quality[tag] = quality_row(ch.token_counts, table=table, vectors=vectors, settings=settings)
    if compute and benchmark is None and question_set is not None:
        benchmark = evaluate(
            question_set, list(dict.fromkeys(c for _, c in tagged_configs)), embedder=embedder_spec,
            retrieve=retrieve, context=context, cross_corpus=cross_corpus, progress=progress,
        )
    lm = context.scorer.info.name if context is not None and context.scorer is not None else None
    return summarize(
        doc, tagged, quality=quality, benchmark=benchmark, questions=question_set, cross_corpus=cross_corpus,
        settings={
            **settings.to_json(),
            "retrieve": retrieve if benchmark is None else benchmark.retrieve,
            "embedder": benchmark.embedder if benchmark is not None else embedder_spec,
            "lm": lm or (context.lm if context is not None else None),
            "question_set": question_set_name,
            "question_set_size": len(question_set) if question_set is not None else None,
        },
    )
