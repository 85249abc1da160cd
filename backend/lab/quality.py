"""Quality scoring as one task: what is known, what is missing, what it costs, the job that computes it, the table.

MoC's metrics (BC, CS, DS) stand on each chunking's pair table (the language model's NLLs of
chunk pairs) and its chunks' embeddings. A page never scores inline: :func:`plan_quality`
looks each configuration's scores up in what the session holds (its *store*, keyed by
:func:`~backend.metrics.scores.table_key` / :func:`~backend.metrics.scores.vectors_key`),
else in the output cache with no model call, and returns a :class:`QualityPlan`: per
configuration what is known and what is missing, the cost of the missing pairs at the
session's measured speed, the words the page shows, and the :class:`~backend.lab.jobs.JobPlan`
that scores them (:func:`~backend.metrics.scores.score_chunkings`). :func:`fold_scoring` puts
a finished job's tables and vectors into the store and returns the speed it measured.

The Quality page and the Summary (its "compute the missing BC, CS and DS") both plan here, so
they look up, count and key the same scores; :func:`quality_view` is what the Quality page's
table shows (its rows are what ``python -m backend metrics`` prints).

Estimates: the job is anytime (:func:`~backend.metrics.scores.score_chunkings`): it publishes
:class:`~backend.metrics.estimate.QualityEstimates` as it goes, and what a cancelled one
scored stays in the cache. :attr:`ConfigScores.estimates` is each metric's estimate from what
is known (a full table: exact; the sample a cancelled job left: an estimate with its 95%
interval), and :func:`quality_view` with the running job's latest ``partial`` shows the
configurations being scored with their estimates.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from backend.chunkers.run import needs_model
from backend.chunking import ChunkerConfig, Chunking, ConfigEntry
from backend.errors import NotCached
from backend.figures.charts import config_color
from backend.figures.export import export_name
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.metrics.cost import (
    CONFIRM_SECONDS,
    DEFAULT_TOKENS_PER_S,
    EmbedCost,
    Throughput,
    cost_estimate,
    cost_label,
    embed_cost,
    first_estimate_cost,
    format_seconds,
    needs_confirmation,
    pair_cost,
)
from backend.metrics.estimate import Estimate, QualityEstimates
from backend.metrics.formulas import PairTable
from backend.metrics.report import (
    ModelNeeds,
    QualityData,
    QualitySettings,
    model_needs,
    quality_row,
    table_csv,
    table_rows,
)
from backend.metrics.scores import (
    ScoringRun,
    cached_pair_table,
    cached_sample_table,
    cached_vectors,
    score_chunkings,
    table_key,
    vectors_key,
)
from backend.models.cache import OutputCache, default_cache
from backend.models.types import Scorer
from backend.progress import Progress
from backend.text.document import Document

__all__ = [
    "DEFAULT_EMBEDDER_NAME",
    "ConfigScores",
    "QualityCost",
    "QualityPlan",
    "QualityView",
    "csv_file_name",
    "fold_scoring",
    "needs_models",
    "plan_quality",
    "known_estimates",
    "quality_settings",
    "quality_view",
]

_KIND = "quality"
DEFAULT_EMBEDDER_NAME = "default embedder"  # how the page names the embedder DS uses until the session loads one


@dataclass(frozen=True)
class QualityCost:
    """What the missing scores cost: distinct pairs still missing from the cache, tokens read, seconds at this speed.

    Attributes:
        pairs: Distinct pairs the job must still score (those in the output cache are not counted).
        tokens: Tokens the missing tables read on a fresh cache (each configuration's tokenizer: approximate).
        seconds: The time of those pairs at :attr:`QualityPlan.throughput` (a guess until measured).
        total_pairs: Distinct pairs the missing tables need, cached or not.
        measured: Whether the speed was measured on this machine (False: ``seconds`` is a guess).
        embed: Embedding the chunks DS needs that are not cached (None: DS not picked or nothing to embed).
        first_pairs: The pairs the job scores before its first estimates with 95% intervals (its
            first round, :func:`~backend.metrics.cost.first_estimate_cost`); 0: one round, the first
            values are the exact ones.
        first_seconds: Their time at the same speed (0 with ``first_pairs`` 0).
    """

    pairs: int = 0
    tokens: int = 0
    seconds: float = 0.0
    total_pairs: int = 0
    measured: bool = True
    embed: EmbedCost | None = None
    first_pairs: int = 0
    first_seconds: float = 0.0

    @property
    def anytime(self) -> bool:
        """Whether estimates with intervals come before the exact values (the job has more than one round)."""
        return 0 < self.first_pairs < self.pairs

    @property
    def label(self) -> str:
        """``1,234 pairs, about 6 min`` (:func:`~backend.metrics.cost.cost_label`; ``(a guess)`` until measured)."""
        return cost_label({"pairs": self.pairs, "tokens": self.tokens, "seconds": self.seconds,
                           "measured": self.measured})


@dataclass(frozen=True, eq=False)
class ConfigScores:
    """One configuration's chunking and what is known of its scores.

    Attributes:
        entry: The session's configuration.
        chunking: Its chunks on the document.
        table: Its pair table: the one the metrics need, else (CS picked, only BC's adjacent
            pairs known) the adjacent one, which gives BC; None when none is known.
        vectors: Its chunks' embeddings (None: not known, or DS not picked).
        table_missing: The metrics need a pair table that is not known (a job scores it).
        vectors_missing: The metrics need the embeddings and they are not known.
        table_key: The store's key of the pair table the metrics need.
        vectors_key: The store's key of the embeddings.
        sample: The needed table's sampled part a cancelled scoring job left in the cache (a
            partial :class:`~backend.metrics.formulas.PairTable`), when the full one is missing.
        estimates: Per metric of :data:`~backend.metrics.report.METRIC_TABLE`, its value from
            what is known under the plan's settings: exact from the full scores, an estimate
            with its 95% interval from ``sample``, None when nothing is known.
    """

    entry: ConfigEntry
    chunking: Chunking
    table: PairTable | None
    vectors: np.ndarray | None
    table_missing: bool
    vectors_missing: bool
    table_key: tuple
    vectors_key: tuple
    sample: PairTable | None = None
    estimates: Mapping[str, Estimate | None] = field(default_factory=dict)

    @property
    def missing(self) -> bool:
        """Whether anything the metrics need is still to compute."""
        return self.table_missing or self.vectors_missing

    @property
    def data(self) -> QualityData:
        """The chunking and its known scores, as the table and the figures take them."""
        return QualityData(self.entry.tag, self.entry.config, self.chunking, self.table, self.vectors)

    @property
    def estimated(self) -> bool:
        """Whether something is missing but an estimate is known (a row of the table with intervals)."""
        return self.missing and any(e is not None for e in self.estimates.values())

    def estimated_data(self) -> QualityData:
        """The chunking with the scores its estimates come from: the sampled table where the full one is missing."""
        table = self.sample if self.table_missing and self.sample is not None else self.table
        return QualityData(self.entry.tag, self.entry.config, self.chunking, table, self.vectors)


def known_estimates(
    scores: ConfigScores, metrics: Sequence[str], settings: QualitySettings
) -> dict[str, Estimate | None]:
    """Each metric's estimate from what ``scores`` knows: a full table exact, else the sampled one.

    CS picked with only BC's adjacent table known: BC is exact from it, CS comes from the sample.
    """
    counts = scores.chunking.token_counts
    known = quality_row(counts, table=scores.table, vectors=scores.vectors, metrics=metrics, settings=settings)
    out = dict(known.estimates)
    if scores.table_missing and scores.sample is not None:
        sampled = quality_row(counts, table=scores.sample, metrics=metrics, settings=settings).estimates
        for name, est in sampled.items():
            if out.get(name) is None:
                out[name] = est
    return out


@dataclass(frozen=True, eq=False)
class QualityPlan:
    """What the session knows of its configurations' quality scores, and the job that computes the rest.

    Attributes:
        doc_id: The document's id.
        metrics: The metrics picked (any of ``bc``, ``cs``, ``ds``).
        window: The pair window (None: every pair).
        needs: What the metrics take from the models (a language model, every pair, embeddings).
        models: The session's models.
        embedder_fingerprint: The embedder's fingerprint the vectors are keyed by (None: not
            known without loading it, or DS not picked).
        configs: Per configuration, in order, what is known.
        found: Scores read from the output cache just now, by store key: add them to the store.
        cost: What scoring the missing pair tables costs.
        throughput: The scoring speed the cost was estimated at.
        job: The job that scores every configuration (those known are read back at once, so its
            signature stays the same while it fills the cache; it loads the language model only
            when a pair table is missing); None when nothing is missing.
    """

    doc_id: str
    metrics: tuple[str, ...]
    window: int | None
    needs: ModelNeeds
    models: SessionModels
    embedder_fingerprint: str | None
    configs: tuple[ConfigScores, ...]
    found: Mapping[Hashable, Any] = field(repr=False)
    cost: QualityCost
    throughput: Throughput
    job: JobPlan | None

    @property
    def missing(self) -> tuple[ConfigScores, ...]:
        """The configurations with something still to compute."""
        return tuple(c for c in self.configs if c.missing)

    @property
    def ready(self) -> tuple[ConfigScores, ...]:
        """The configurations whose every needed score is known."""
        return tuple(c for c in self.configs if not c.missing)

    @property
    def to_score(self) -> tuple[ConfigScores, ...]:
        """The configurations whose pair table the language model must score."""
        return tuple(c for c in self.configs if c.table_missing)

    @property
    def missing_tags(self) -> str:
        """``A, C``: the configurations with something still to compute."""
        return ", ".join(c.entry.tag for c in self.missing)

    @property
    def embedder_name(self) -> str:
        """The embedder DS uses, as the page names it: the session's loaded one, else ``default embedder``."""
        return self.models.embedder_loaded or DEFAULT_EMBEDDER_NAME

    @property
    def cost_note(self) -> str:
        """What the job does and costs, in a sentence or two (Markdown: the numbers in bold)."""
        embed = self.cost.embed
        embedding = ""
        if self.needs.embedder and embed is not None and embed.texts:
            embedding = (f"Embedding **{embed.texts:,}** chunks for DS ({self.embedder_name}): "
                         f"{embed.words}.")
        if not self.to_score:
            return f"{self.missing_tags}: the chunks need embedding for DS. " + (
                embedding or f"Embedding them for DS ({self.embedder_name}): time measured on the first run."
            )
        speed, cost = self.throughput, self.cost
        cached = f" ({cost.total_pairs - cost.pairs:,} of {cost.total_pairs:,} already scored)" if (
            cost.total_pairs > cost.pairs) else ""
        time = format_seconds(cost.seconds) if speed.measured else f"{format_seconds(cost.seconds)} — {speed.words}"
        at = f" at {speed.words}" if speed.measured else ""
        first = (f"The first estimates, with their 95 % intervals, come after **{cost.first_pairs:,}** of them: "
                 f"in {format_seconds(cost.first_seconds)}. ") if cost.anytime else ""
        return (
            f"Scoring {self.missing_tags} costs **{cost.pairs:,}** pairs still missing{cached}: {time}{at}. "
            + first
            + ("A pair window w cuts the cost of CS. " if self.needs.complete and not self.window and cost.seconds > 60
               else "")
            + embedding
        ).strip()

    @property
    def run_label(self) -> str:
        """The run button's label: ``Score with SmolLM2: 1,234 pairs, about 6 min``, or ``Embed the chunks``."""
        return f"Score with {self.models.name}: {self.cost.label}" if self.to_score else "Embed the chunks"

    @property
    def confirm_label(self) -> str | None:
        """The checkbox a run over :data:`~backend.metrics.cost.CONFIRM_SECONDS` needs ticked first; None: one click.

        It names both times the user waits for: the first estimates with their intervals (the
        job's first round) and the exact values (every pair), at the same speed.
        """
        if not self.to_score or not needs_confirmation(self.cost.seconds):
            return None
        seconds = format_seconds(self.cost.seconds)
        speed = "at this machine's measured speed" if self.throughput.measured else "by a guess: nothing measured yet"
        over = f"over {format_seconds(CONFIRM_SECONDS)} {speed}"
        if not self.cost.anytime:
            return f"Yes, run for {seconds} ({over})"
        first = format_seconds(self.cost.first_seconds)
        return f"Yes, run: first estimates ± 95 % intervals in {first}, exact values in {seconds} ({over})"


def needs_models(metrics: Sequence[str], configs: Sequence[ChunkerConfig]) -> bool:
    """Whether the Quality page's work runs a model: the metrics need the language model, or a chunker runs one.

    Raises:
        ParameterError: an unknown metric.
    """
    return model_needs(metrics).scorer or any(needs_model(c) for c in configs)


def quality_settings(values: Mapping[str, Any]) -> QualitySettings:
    """The settings the metrics are computed under, from the Quality page's settings (``K``, ``window``…).

    A window of 0 (every pair) is None.
    """
    return QualitySettings(
        K=float(values["K"]), bc_mode=str(values["bc_mode"]), cs_rule=str(values["cs_rule"]),
        delta=int(values["delta"]), window=int(values["window"] or 0) or None,
    )


def _texts(chunking: Chunking) -> list[str]:
    return [c.text for c in chunking.chunks]


def _known_table(
    chunking: Chunking, models: SessionModels, needs: ModelNeeds, window: int | None, store: Mapping[Hashable, Any],
    refusing: Scorer | None, cache: OutputCache, found: dict[Hashable, Any],
) -> PairTable | None:
    """The pair table the metrics need, else the adjacent one (BC), from the store, else the cache; None."""
    for complete in (True, False) if needs.complete else (False,):
        key = table_key(chunking, models.identity, complete=complete, window=window)
        if key in store:
            return store[key]
        if refusing is None:
            continue
        try:
            table = cached_pair_table(_texts(chunking), refusing, complete=complete, window=window, cache=cache)
        except NotCached:
            continue
        found[key] = table
        return table
    return None


def plan_quality(
    doc: Document,
    chunkings: Sequence[tuple[ConfigEntry, Chunking]],
    models: SessionModels,
    *,
    metrics: Sequence[str],
    window: int | None,
    store: Mapping[Hashable, Any],
    throughput: Throughput | None = None,
    cache: OutputCache | None = None,
    settings: QualitySettings | None = None,
) -> QualityPlan:
    """What is known of each configuration's quality scores, what is missing, its cost and the job for it.

    Nothing here calls a model: a score is known when the store holds it or the output cache
    answers through the session's cache-only context.

    Args:
        doc: The document.
        chunkings: ``(entry, chunking)`` of each configuration chunked, in order.
        models: The session's models (the language model only matters when BC or CS is picked,
            the embedder when DS is).
        metrics: Any of ``bc``, ``cs``, ``ds``.
        window: The pair window of CS (0 or None: every pair).
        store: What the session holds, by :func:`~backend.metrics.scores.table_key` and
            :func:`~backend.metrics.scores.vectors_key` (only read here: add :attr:`QualityPlan.found`).
        throughput: A speed to use when none is measured on this machine for the model (None: the
            labelled guess); the speed the rate store holds for the model comes first.
        cache: The output cache (None: the process's default one).
        settings: K, the rule, the mode and δ of :attr:`ConfigScores.estimates` and of the
            estimates the job publishes (None: the defaults).

    Raises:
        ParameterError: an unknown metric.
    """
    metrics = tuple(metrics)
    needs = model_needs(metrics)
    window = window or None
    cache = cache if cache is not None else default_cache()
    estimate_settings = replace(settings or QualitySettings(), window=window)
    context = models.cache_only() if needs.scorer else None
    refusing = context.scorer if context is not None else None  # raises NotCached on any model call
    emb_fp = models.embedder_fingerprint if needs.embedder else None
    found: dict[Hashable, Any] = {}
    configs = []
    for entry, chunking in chunkings:
        table = _known_table(chunking, models, needs, window, store, refusing, cache, found) if needs.scorer else None
        vkey = vectors_key(chunking, emb_fp)
        vectors = store.get(vkey) if needs.embedder else None
        if needs.embedder and vectors is None and emb_fp is not None:
            vectors = cached_vectors(cache, emb_fp, _texts(chunking))
            if vectors is not None:
                found[vkey] = vectors
        table_missing = needs.scorer and (table is None or (needs.complete and not table.complete))
        sample = None
        if table_missing and refusing is not None:  # what a cancelled job left
            sample = cached_sample_table(
                _texts(chunking), refusing.info, complete=needs.complete, window=window, cache=cache
            )
        scores = ConfigScores(
            entry, chunking, table, vectors,
            table_missing=table_missing,
            vectors_missing=needs.embedder and vectors is None,
            table_key=table_key(chunking, models.identity, complete=needs.complete, window=window),
            vectors_key=vkey,
            sample=sample,
        )
        configs.append(replace(scores, estimates=known_estimates(scores, metrics, estimate_settings)))
    to_score = [c.chunking for c in configs if c.table_missing]
    # Only what the cache lacks counts, at the speed measured on this machine for this model.
    measured = Throughput.measured_for(models.fingerprint, models.kind)
    throughput = measured if measured.measured or throughput is None else throughput
    estimate = cost_estimate([ch.token_counts for ch in to_score], complete=needs.complete, window=window,
                             tokens_per_s=DEFAULT_TOKENS_PER_S)
    pairs = pair_cost(
        [_texts(ch) for ch in to_score], complete=needs.complete, window=window, fingerprint=models.fingerprint,
        kind=models.kind, cache=cache, throughput=throughput,
    )
    embed = None
    if needs.embedder:
        embed = embed_cost([_texts(c.chunking) for c in configs if c.vectors_missing], emb_fp, cache)
    # The job scores every configuration (those known are read back): its first round spans them all.
    first = first_estimate_cost(
        [_texts(ch) for _, ch in chunkings], complete=needs.complete, window=window, fingerprint=models.fingerprint,
        kind=models.kind, cache=cache, throughput=throughput,
    ) if to_score else None
    cost = QualityCost(pairs.pairs, int(estimate["tokens"]), pairs.seconds, pairs.total_pairs, throughput.measured,
                       embed, first.pairs if first is not None else 0, first.seconds if first is not None else 0.0)
    job = None
    if any(c.missing for c in configs):
        job = _scoring_job(
            doc, [ch for _, ch in chunkings], models, needs, metrics, window, emb_fp, cache, score_pairs=bool(to_score),
            settings=estimate_settings,
        )
    return QualityPlan(
        doc.id, metrics, window, needs, models, emb_fp, tuple(configs), found, cost, throughput, job
    )


def _scoring_job(
    doc: Document, chunkings: Sequence[Chunking], models: SessionModels, needs: ModelNeeds, metrics: Sequence[str],
    window: int | None, emb_fp: str | None, cache: OutputCache, score_pairs: bool, settings: QualitySettings,
) -> JobPlan:
    """The job that scores every chunking's pairs and embeds its chunks (what is cached is read back at once).

    Anytime: it publishes :class:`~backend.metrics.estimate.QualityEstimates` (under ``settings``)
    after each batch, which the page reads as the job's partial result.
    """
    chunkings = tuple(chunkings)
    embedder = models.job_embedder if needs.embedder else None

    def body(scorer: Scorer | None, progress: Progress) -> ScoringRun:
        # Called once the model has loaded: the run's seconds are the scoring's own.
        return score_chunkings(
            chunkings, scorer=scorer, embedder=embedder, complete=needs.complete, window=window, cache=cache,
            progress=progress, settings=settings,
        )

    n = len(chunkings)
    title = f"Scoring {n} configuration{'s' if n != 1 else ''}"
    signature = (
        _KIND, doc.id, models.models_key if needs.scorer else None, emb_fp, tuple(ch.config for ch in chunkings),
        needs.complete, window, tuple(sorted(metrics)),
    )
    # Without a pair table to score (embeddings only) the language model is not loaded: the job computes no
    # table, and the known ones stay in the store.
    return JobPlan(
        f"{title} with {models.name}" if score_pairs else title, signature, body,
        models=models if score_pairs else None,
    )


def fold_scoring(plan: QualityPlan, run: ScoringRun, store: MutableMapping[Hashable, Any]) -> Throughput:
    """Put a finished scoring job's tables and vectors into ``store``; the speed now measured for the model.

    Args:
        plan: The plan whose :attr:`QualityPlan.job` ran.
        run: The job's result.
        store: The session's store (see :func:`plan_quality`).

    Returns:
        The model's pair-scoring speed from now on: the rate store's (the scorer recorded it as it
        went), else the plan's.
    """
    for scores, (table, vectors) in zip(plan.configs, run.results, strict=True):
        if table is not None:
            store[scores.table_key] = table
        if vectors is not None:
            store[scores.vectors_key] = vectors
    measured = Throughput.measured_for(plan.models.fingerprint, plan.models.kind)
    return measured if measured.measured else plan.throughput


# --- the Quality page's table -------------------------------------------------------------------


def csv_file_name(doc_source: str, settings: QualitySettings) -> str:
    """The table's CSV file name: the document, then the settings it was computed under.

    >>> csv_file_name("My report.pdf", QualitySettings(K=0.8))
    'My-report__quality-K0.80-cs_paper-bc_reference.csv'
    """
    view = f"quality-K{settings.K:.2f}-cs_{settings.cs_rule}-bc_{settings.bc_mode}"
    if settings.delta:
        view += f"-delta{settings.delta}"
    if settings.window:
        view += f"-w{settings.window}"
    return f"{export_name(doc_source, view)}.csv"


@dataclass(frozen=True, eq=False)
class QualityView:
    """What the Quality page shows of the configurations whose scores are all known.

    Attributes:
        entries: Those configurations, in order.
        data: Each one's chunking and scores (what the figures draw).
        colors: Each one's colour.
        settings: K, the CS rule, the BC mode, δ and the window the numbers are computed under.
        rows: The table (MoC Table 3): :func:`~backend.metrics.report.table_rows`, what the CLI's
            ``metrics`` prints for one chunking.
        notes: The line under the table (the settings, the window, DS's embedder, unequal lengths,
            estimates).
        csv_name: The CSV's file name.
        row_entries: The configuration of each row of ``rows``: those of ``entries``, then the
            configurations being scored (or left part-scored) whose metrics are estimates.
        row_colors: Each row's colour.
    """

    entries: tuple[ConfigEntry, ...]
    data: tuple[QualityData, ...]
    colors: tuple[str, ...]
    settings: QualitySettings
    rows: tuple[dict[str, Any], ...]
    notes: str
    csv_name: str
    row_entries: tuple[ConfigEntry, ...] = ()
    row_colors: tuple[str, ...] = ()

    @property
    def estimated(self) -> bool:
        """Whether a row holds an estimate from a sample (not every pair scored)."""
        return any(not row["exact"] for row in self.rows)

    def csv(self) -> str:
        """The table as CSV, with the settings as extra columns."""
        return table_csv(self.rows, self.settings)


def _estimated_data(
    plan: QualityPlan, partial: QualityEstimates | None
) -> list[tuple[ConfigEntry, QualityData]]:
    """The configurations still missing scores with an estimate: from the running job's latest tables, else the cache's sample."""
    out = []
    for k, c in enumerate(plan.configs):
        if not c.missing:
            continue
        table = vectors = None
        if partial is not None and k < len(partial.tables):
            table = partial.tables[k]
            vectors = partial.vectors[k] if k < len(partial.vectors) else None
        data = c.estimated_data()
        table = table if table is not None else data.table
        vectors = vectors if vectors is not None else data.vectors
        if table is None and vectors is None:
            continue
        out.append((c.entry, QualityData(c.entry.tag, c.entry.config, c.chunking, table, vectors)))
    return out


def quality_view(
    plan: QualityPlan, settings: QualitySettings, doc_source: str, partial: QualityEstimates | None = None
) -> QualityView:
    """The table, its notes and the figures' data of ``plan``'s configurations.

    The figures (``entries``, ``data``, ``colors``) are those whose scores are all known; the
    table's rows are those, then the configurations still missing scores that have an estimate
    (each row's ``estimates`` with 95% intervals, ``exact`` False): from ``partial``, the
    running scoring job's latest :class:`~backend.metrics.estimate.QualityEstimates` (its
    tables are recomputed under ``settings``), else from what a cancelled job left in the cache.

    Args:
        plan: The plan (:func:`plan_quality`).
        settings: K, the CS rule, the BC mode and δ (:func:`quality_settings`); no model call.
        doc_source: The document's name (for the CSV's file name).
        partial: The running job's latest partial result (``job.partial``), or None.
    """
    ready = plan.ready
    data = tuple(c.data for c in ready)
    estimated = _estimated_data(plan, partial)
    rows = tuple(table_rows(data + tuple(d for _, d in estimated), metrics=plan.metrics, settings=settings))
    notes = [
        f"best value per column in green; K = {settings.K:.2f}, CS rule {settings.cs_rule}, "
        f"BC mode {settings.bc_mode}, δ = {settings.delta}"
    ]
    if plan.window and plan.needs.complete:
        notes.append(f"pair window w = {plan.window}: pairs further apart are not scored and count as no edge")
    if plan.needs.embedder:
        notes.append(
            f"DS with {plan.embedder_name}; the paper finds DS does not follow QA quality — it is shown for context"
        )
    means = [float(row["mean_tokens"]) for row in rows]
    if len(means) > 1 and max(means) > 1.1 * min(means):
        notes.append("mean lengths differ by more than 10 %: match lengths (above) for a fair comparison")
    if any(not row["exact"] for row in rows):
        notes.append("± is a 95 % interval from the pairs scored so far (a seeded sample spread over the document)")
    row_entries = tuple(c.entry for c in ready) + tuple(e for e, _ in estimated)
    return QualityView(
        entries=tuple(c.entry for c in ready),
        data=data,
        colors=tuple(config_color(c.entry.uid) for c in ready),
        settings=settings,
        rows=rows,
        notes="Best " + " · ".join(notes)[len("best ") :],
        csv_name=csv_file_name(doc_source, settings),
        row_entries=row_entries,
        row_colors=tuple(config_color(e.uid) for e in row_entries),
    )
