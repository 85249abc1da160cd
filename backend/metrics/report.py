"""One quality report per chunking: the table of MoC's metrics, and the row each chunking gets from its scores.

The CLI's ``metrics`` (:func:`~backend.metrics.scores.quality_report`) and the Quality page's
table (:func:`table_rows`) both compute a chunking's numbers with :func:`quality_row`, from its
pair table (:class:`~backend.metrics.formulas.PairTable`) and its embeddings, under one
:class:`QualitySettings` (K, CS rule, BC mode, δ, pair window): what the page shows, the CLI
prints. Nothing here calls a model; scoring is :mod:`backend.metrics.scores`
(:func:`~backend.metrics.scores.quality_report` for the CLI, :func:`~backend.metrics.scores.score_chunkings`
for the page's job).

Adding a metric: write its function of the pair table or of the vectors, and register it as
one :class:`Metric` in :data:`METRIC_TABLE`; its column, its JSON keys, its CSV column and its
"best" highlight follow from that entry.

Every metric also has an :class:`~backend.metrics.estimate.Estimate` (:attr:`QualityReport.estimates`):
exact (an interval of width 0) from a full table, or an estimate with its 95% interval from a
partial one (a sample of context rows, :attr:`~backend.metrics.formulas.PairTable.partial`) or
from embeddings with rows not computed yet (``nan``). The numbers in ``values`` are then the
point estimates, so a caller that reads only them keeps working.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.chunking import ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.metrics.estimate import Estimate
from backend.metrics.formulas import (
    BC_MODES,
    CS_RULES,
    DEFAULT_K,
    PairTable,
    bc_estimate,
    boundary_clarity,
    chunk_stickiness,
    cs_estimate,
    dissimilarity,
    ds_estimate,
)

__all__ = [
    "BEST",
    "COLUMNS",
    "METRICS",
    "METRIC_TABLE",
    "Metric",
    "ModelNeeds",
    "QualityData",
    "QualityReport",
    "QualitySettings",
    "model_needs",
    "quality_row",
    "table_csv",
    "table_rows",
]

METRICS = ("bc", "cs", "ds")  # what a user picks (``--metrics``, the page's multiselect)
NEEDS = ("pairs", "graph", "vectors")  # adjacent pair scores, every pair (within the window), embeddings


@dataclass(frozen=True)
class QualitySettings:
    """The knobs the metrics are recomputed under from the same scores, with no model call.

    Attributes:
        K: Chunk Stickiness edge threshold.
        bc_mode: ``reference`` (ratio of mean NLLs) or ``paper`` (ratio of perplexities).
        cs_rule: ``paper`` or ``reference`` (see :mod:`backend.metrics.formulas`).
        delta: δ of the incomplete graph (pairs with ``j - i > δ``).
        window: The pair window the scores were computed with (None: every pair).

    Raises:
        ParameterError: a value out of range, naming it.
    """

    K: float = DEFAULT_K
    bc_mode: str = "reference"
    cs_rule: str = "paper"
    delta: int = 0
    window: int | None = None

    def __post_init__(self) -> None:
        for name, value, allowed in (("bc_mode", self.bc_mode, BC_MODES), ("cs_rule", self.cs_rule, CS_RULES)):
            if value not in allowed:
                raise ParameterError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        if not math.isfinite(self.K):
            raise ParameterError(f"K must be a finite number, got {self.K!r}")
        if self.delta < 0:
            raise ParameterError(f"delta ({self.delta}) must be at least 0")
        if self.window is not None and self.window < 1:
            raise ParameterError(f"window ({self.window}) must be at least 1")

    def to_json(self) -> dict[str, Any]:
        """``{"K", "bc_mode", "cs_rule", "delta", "window"}``."""
        return {"K": float(self.K), "bc_mode": self.bc_mode, "cs_rule": self.cs_rule, "delta": int(self.delta),
                "window": self.window}


@dataclass(frozen=True)
class Metric:
    """One metric of the quality table.

    Exactly one of ``value`` (one number per chunking) and ``boundaries`` (one number per
    boundary; the table shows their mean, the JSON both as ``<name>_mean`` and ``<name>``) is set.

    Attributes:
        name: Its column in the table and key in the JSON.
        group: The pick that computes it (one of :data:`METRICS`).
        needs: Its input: ``pairs`` (a pair table), ``graph`` (a pair table of every pair) or
            ``vectors`` (the chunks' embeddings); the function receives that input.
        best: ``max`` or ``min``: which way is better (the page highlights it).
        label: Column header.
        help: One-line explanation of the column.
        value: ``value(input, settings) -> float``.
        boundaries: ``boundaries(input, settings) -> array``, one value per boundary.
        estimate: ``estimate(input, settings) -> Estimate``: the value with its 95% interval
            (exact from full scores, estimated from a partial table or partial embeddings).
    """

    name: str
    group: str
    needs: str
    best: str
    label: str
    help: str
    value: Callable[[Any, QualitySettings], float] | None = None
    boundaries: Callable[[Any, QualitySettings], np.ndarray] | None = None
    estimate: Callable[[Any, QualitySettings], Estimate] | None = None

    def __post_init__(self) -> None:
        if self.estimate is None:
            raise ValueError(f"metric {self.name!r}: set its estimate")
        if (self.value is None) == (self.boundaries is None):
            raise ValueError(f"metric {self.name!r}: set exactly one of value and boundaries")
        if self.group not in METRICS or self.needs not in NEEDS or self.best not in ("max", "min"):
            raise ValueError(f"metric {self.name!r}: bad group, needs or best")


def _bc(table: PairTable, s: QualitySettings) -> np.ndarray:
    return boundary_clarity(table, s.bc_mode)


def _cs_complete(table: PairTable, s: QualitySettings) -> float:
    return chunk_stickiness(table, s.K, rule=s.cs_rule, graph="complete")


def _cs_incomplete(table: PairTable, s: QualitySettings) -> float:
    return chunk_stickiness(table, s.K, rule=s.cs_rule, graph="incomplete", delta=s.delta)


def _ds(vectors: np.ndarray, _s: QualitySettings) -> np.ndarray:
    return dissimilarity(vectors)


def _bc_estimate(table: PairTable, s: QualitySettings) -> Estimate:
    return bc_estimate(table, s.bc_mode)


def _cs_complete_estimate(table: PairTable, s: QualitySettings) -> Estimate:
    return cs_estimate(table, s.K, rule=s.cs_rule, graph="complete")


def _cs_incomplete_estimate(table: PairTable, s: QualitySettings) -> Estimate:
    return cs_estimate(table, s.K, rule=s.cs_rule, graph="incomplete", delta=s.delta)


def _ds_estimate(vectors: np.ndarray, _s: QualitySettings) -> Estimate:
    return ds_estimate(vectors)


# MoC, Table 3: BC higher is better, CS (both graphs) lower. DS is shown as the paper does
# (section 4.5) with its highest value marked, though the paper finds it does not follow QA quality.
METRIC_TABLE: tuple[Metric, ...] = (
    Metric("bc", "bc", "pairs", "max", "BC ↑", "Mean boundary clarity over the boundaries", boundaries=_bc,
           estimate=_bc_estimate),
    Metric("cs_complete", "cs", "graph", "min", "CS complete ↓", "Chunk stickiness, complete graph",
           value=_cs_complete, estimate=_cs_complete_estimate),
    Metric("cs_incomplete", "cs", "graph", "min", "CS incomplete ↓", "Chunk stickiness, j − i > δ",
           value=_cs_incomplete, estimate=_cs_incomplete_estimate),
    Metric("ds", "ds", "vectors", "max", "DS", "Mean dissimilarity of adjacent chunks (highest marked)",
           boundaries=_ds, estimate=_ds_estimate),
)
BEST = {m.name: m.best for m in METRIC_TABLE}
COLUMNS = ("configuration", "chunker", "chunks", "mean_tokens", *(m.name for m in METRIC_TABLE))


def _check_metrics(metrics: Sequence[str]) -> None:
    """Raise :class:`ParameterError` naming the first unknown metric."""
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise ParameterError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")


@dataclass(frozen=True)
class ModelNeeds:
    """What computing some metrics takes from the models.

    Attributes:
        scorer: A language model (a pair table).
        complete: Every ordered pair (within the window) in that table, not only adjacent ones.
        embedder: The chunks' embeddings.
    """

    scorer: bool
    complete: bool
    embedder: bool


def model_needs(metrics: Sequence[str]) -> ModelNeeds:
    """What the metrics picked (any of :data:`METRICS`) need, from :data:`METRIC_TABLE`.

    Raises:
        ParameterError: an unknown metric.
    """
    _check_metrics(metrics)
    needs = {m.needs for m in METRIC_TABLE if m.group in metrics}
    return ModelNeeds(scorer=bool(needs & {"pairs", "graph"}), complete="graph" in needs, embedder="vectors" in needs)


def _mean(x: np.ndarray) -> float | None:
    """Mean of the finite values, None without one."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


@dataclass(frozen=True)
class QualityReport:
    """The metrics of one chunking under one :class:`QualitySettings`.

    Attributes:
        chunks: Number of chunks.
        mean_tokens: Their mean token count.
        settings: What the metrics were computed under.
        values: Per metric of :data:`METRIC_TABLE`, its number (a per-boundary metric's mean
            over the finite boundaries); None when not computed, or without a boundary.
        boundaries: Per per-boundary metric, its values (None when not computed; a boundary
            not scored in a sample is ``nan``).
        table: The pair table the metrics came from (None without one).
        estimates: Per metric of :data:`METRIC_TABLE`, its value with its 95% interval and the
            units it stands on: exact (width 0) from full scores, estimated from a sample; None
            when not computed. ``values`` holds the point estimates.
    """

    chunks: int
    mean_tokens: float
    settings: QualitySettings
    values: Mapping[str, float | None]
    boundaries: Mapping[str, tuple[float, ...] | None]
    table: PairTable | None = field(default=None, repr=False, compare=False)
    estimates: Mapping[str, Estimate | None] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Whether every metric computed is exact (no estimate from a sample)."""
        return all(e is None or e.exact for e in self.estimates.values())

    def to_json(self) -> dict[str, Any]:
        """``{"chunks", "mean_tokens", "bc_mean", "bc", "bc_estimate", "cs_complete", "cs_complete_estimate", …, "K", …}``.

        A per-boundary metric gives ``<name>_mean`` and the list ``<name>`` (a non-finite or
        unscored value is null); a metric not computed is null. Every metric gives
        ``<name>_estimate``: ``{"estimate", "ci_low", "ci_high", "pairs_scored", "pairs_total",
        "method"}`` (:meth:`~backend.metrics.estimate.Estimate.to_json`; exact: ``pairs_scored ==
        pairs_total``, ``ci_low == ci_high``), or null when not computed.
        """
        out: dict[str, Any] = {"chunks": self.chunks, "mean_tokens": self.mean_tokens}
        for m in METRIC_TABLE:
            if m.boundaries is None:
                out[m.name] = self.values[m.name]
            else:
                xs = self.boundaries[m.name]
                out[f"{m.name}_mean"] = self.values[m.name]
                out[m.name] = None if xs is None else [x if math.isfinite(x) else None for x in xs]
            est = self.estimates.get(m.name)
            out[f"{m.name}_estimate"] = None if est is None else _finite_json(est.to_json())
        return out | self.settings.to_json()


def _finite_json(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with infinite floats (an unbounded interval) as null, so the JSON stays valid."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in values.items()}


def quality_row(
    token_counts: Sequence[int],
    *,
    table: PairTable | None = None,
    vectors: np.ndarray | None = None,
    metrics: Sequence[str] = METRICS,
    settings: QualitySettings = QualitySettings(),
) -> QualityReport:
    """The metrics of one chunking from its scores: the one computation behind the CLI and the page.

    A metric is computed when its group is in ``metrics`` and its input is there: a pair
    table for BC, a complete one (``table.complete``) for CS, vectors for DS. From a partial
    table (or vectors with ``nan`` rows) the values are the point estimates of
    :attr:`QualityReport.estimates`; from full scores they are exact, as before.

    Args:
        token_counts: The chunks' token counts, in order.
        table: Its pair table (None: no BC, no CS).
        vectors: Its chunks' embeddings, one row per chunk (None: no DS).
        metrics: Any of :data:`METRICS`.
        settings: K, the CS rule, the BC mode, δ and the window.

    Raises:
        ParameterError: an unknown metric.
    """
    _check_metrics(metrics)
    inputs = {"pairs": table, "graph": table if table is not None and table.complete else None, "vectors": vectors}
    values: dict[str, float | None] = {}
    boundaries: dict[str, tuple[float, ...] | None] = {}
    estimates: dict[str, Estimate | None] = {}
    for m in METRIC_TABLE:
        source = inputs[m.needs] if m.group in metrics else None
        est = None if source is None else m.estimate(source, settings)  # type: ignore[misc]
        estimates[m.name] = est
        if m.boundaries is not None:
            xs = None if source is None else tuple(float(x) for x in m.boundaries(source, settings))
            boundaries[m.name] = xs
            values[m.name] = None if xs is None else _mean(np.array(xs, dtype=np.float64))
        elif est is not None and not est.exact:
            values[m.name] = est.estimate
        else:
            values[m.name] = None if source is None else float(m.value(source, settings))  # type: ignore[misc]
    counts = [int(t) for t in token_counts]
    return QualityReport(
        chunks=len(counts),
        mean_tokens=float(np.mean(counts)) if counts else 0.0,
        settings=settings,
        values=values,
        boundaries=boundaries,
        table=table,
        estimates=estimates,
    )


@dataclass(frozen=True, eq=False)
class QualityData:
    """One configuration's chunking on a document and the scores its metrics come from.

    Attributes:
        tag: The configuration's letter (A, B…).
        config: The configuration.
        chunking: Its chunks on the document.
        table: The pair table (None when BC and CS were not asked for); ``table.complete``
            says whether it holds every pair CS needs.
        vectors: The chunks' embeddings (None when DS was not asked for).
    """

    tag: str
    config: ChunkerConfig
    chunking: Chunking
    table: PairTable | None = None
    vectors: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Number of chunks."""
        return len(self.chunking.chunks)

    def report(self, *, metrics: Sequence[str] = METRICS, settings: QualitySettings = QualitySettings()) -> QualityReport:
        """:func:`quality_row` of this chunking's scores."""
        return quality_row(
            self.chunking.token_counts, table=self.table, vectors=self.vectors, metrics=metrics, settings=settings
        )


def table_rows(
    scored: Sequence[QualityData], *, metrics: Sequence[str] = METRICS, settings: QualitySettings = QualitySettings()
) -> list[dict[str, Any]]:
    """The quality table (MoC Table 3): one row per configuration, keyed by :data:`COLUMNS`.

    ``configuration`` is the tag, ``chunker`` the configuration's label, then ``chunks``,
    ``mean_tokens`` and each metric's :attr:`QualityReport.values` entry (None: not computed;
    from a partial table the point estimate), then ``estimates`` (metric name to its
    :class:`~backend.metrics.estimate.Estimate` or None) and ``exact`` (no metric is an estimate).
    """
    rows = []
    for d in scored:
        report = d.report(metrics=metrics, settings=settings)
        rows.append({"configuration": d.tag, "chunker": d.config.label, "chunks": report.chunks,
                     "mean_tokens": report.mean_tokens, **report.values, "estimates": dict(report.estimates),
                     "exact": report.exact})
    return rows


def table_csv(rows: Sequence[Mapping[str, Any]], settings: QualitySettings) -> str:
    """:func:`table_rows` as CSV, with the settings they were computed under as extra columns (None: empty)."""
    extra = settings.to_json()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS, *extra])
    for row in rows:
        cells = [row.get(c) for c in COLUMNS] + list(extra.values())
        writer.writerow(["" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v for v in cells])
    return out.getvalue()
