"""The retrieval lab's views: highlighted document stretches, tables, and the question-set upload.

The HTML and table builders are pure functions of backend results (hits, scores, a
:class:`~backend.retrieval.evaluate.Benchmark`, a
:class:`~backend.retrieval.generation.GeneratedQuestions`) returning an HTML string or a
``pandas.DataFrame``, so the Retrieval and Benchmark pages stay thin and the views are tested
without a browser. The rules behind them live in the backend (marking and scoring the live
query: :mod:`backend.retrieval.live`; question sets: :mod:`backend.retrieval.questions`; the
job bodies: :mod:`backend.retrieval.jobs`); the figures in :mod:`backend.figures.retrieval`.
:func:`question_set_upload` is the one widget here: the Chroma-format upload both pages offer.

Document text is untrusted: every piece of it goes through :func:`backend.figures.text.esc`
before it reaches markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from backend.chunking import ConfigEntry
from backend.errors import ChunkLabError, one_line
from backend.retrieval.evaluate import METRIC_LABELS, METRICS, Benchmark, ConfigResult, MetricSummary, QuestionResult
from backend.retrieval.metrics import RetrievalScores, union_ranges
from backend.retrieval.questions import QuestionSet, question_set_from_files
from backend.figures.charts import config_color
from components.keys import BENCHMARK_JOB, PageKeys
from components.quality import column_width
from backend.figures.text import esc

if TYPE_CHECKING:
    from backend.retrieval.generation import GeneratedQuestions
    from backend.retrieval.store import Hit

__all__ = [
    "RET_STYLE",
    "indexing_resume_note",
    "Layer",
    "md_text",
    "highlight_html",
    "layers_legend_html",
    "HITS_TEXT_CHARS",
    "hits_html",
    "scores_frame",
    "questions_frame",
    "question_set_upload",
    "OMEGA_MARK",
    "SCORE_COLUMNS",
    "COST_COLUMNS",
    "summary_frame",
    "summary_column_config",
    "per_corpus_frame",
    "per_question_frame",
    "candidates_frame",
    "start_benchmark",
]

_PREVIEW_CHARS = 120
_PM_WIDTH = 95  # pixels that show "100.0 ± 100.0"
_SUMMARY_CHUNKER_WIDTH = 150

RET_STYLE = """
<style>
.rt-doc { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.95rem; line-height: 1.9; color: #1f2937; }
.rt-ans { text-decoration: underline 3px #16a34a; text-underline-offset: 3px; font-weight: 600; }
.rt-rank {
  display: inline-block; font: 700 0.66rem/1.25 ui-monospace, SFMono-Regular, Menlo, monospace; color: #fff;
  border-radius: 0.5rem; padding: 0 0.3rem; margin: 0 0.15rem; vertical-align: 0.12rem; user-select: none;
}
.rt-stretch { border-left: 3px solid #e2e8f0; padding-left: 0.6rem; margin-bottom: 0.8rem; }
.rt-where { font: 600 0.75rem sans-serif; color: #64748b; }
.rt-hits { width: 100%; border-collapse: collapse; font-size: 0.85rem; line-height: 1.4; color: #1f2937; }
.rt-hits th { text-align: left; font-weight: 600; color: #64748b; border-bottom: 1px solid #e2e8f0;
  padding: 0.2rem 0.4rem; }
.rt-hits td { vertical-align: top; border-bottom: 1px solid #f1f5f9; padding: 0.3rem 0.4rem; }
.rt-hits .rk { width: 1.6rem; font-weight: 700; color: #475569; }
.rt-hits .tx { overflow-wrap: anywhere; }
.rt-hits .nm { width: 5.8rem; white-space: nowrap; text-align: right; color: #475569;
  font: 0.75rem/1.5 ui-monospace, SFMono-Regular, Menlo, monospace; }
.rt-legend { font: 0.8rem sans-serif; color: #475569; display: flex; flex-wrap: wrap; gap: 0.9rem; }
.rt-legend .sw { display: inline-block; width: 1.6rem; height: 0.9rem; vertical-align: -0.15rem; border-radius: 2px;
  margin-right: 0.3rem; }
</style>
"""


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")


def md_text(text: str) -> str:
    """``text`` (a query, a model or corpus name) safe to place in Markdown: special characters escaped, one line."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))



def _preview(text: str, n: int = _PREVIEW_CHARS) -> str:
    """Text on one line, shortened to ``n`` characters (table cells are plain text)."""
    flat = " ".join(text[: n * 2].split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


# --- the live query's document view -----------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """One configuration's retrieved spans for the document view: ``spans`` are ``(start, end, rank)``."""

    tag: str
    color: str
    spans: tuple[tuple[int, int, int], ...]


def _tint(color: str, alpha: str = "40") -> str:
    """``#rrggbb`` with an alpha byte (a light fill of a configuration's colour)."""
    return f"{color}{alpha}" if len(color) == 7 and color.startswith("#") else color


def _stretches(ranges: Sequence[tuple[int, int]], length: int, context: int) -> list[tuple[int, int]]:
    """The parts of the text to show: every range widened by ``context`` characters, merged."""
    return union_ranges((max(0, s - context), min(length, e + context)) for s, e in ranges)


def highlight_html(
    text: str,
    layers: Sequence[Layer],
    excerpts: Sequence[tuple[int, int]] = (),
    *,
    context: int = 150,
    max_chars: int = 60_000,
) -> str:
    """The stretches of ``text`` around retrieved spans and excerpts, each configuration's spans in its colour.

    A character retrieved by one configuration gets that configuration's light fill; one
    retrieved by several gets stripes of all their colours. A badge ``A1`` marks where
    configuration A's rank-1 chunk starts. Excerpts (the true answer) are underlined in
    green. Only the text within ``context`` characters of a span is shown (stretches
    separated by their offsets), at most ``max_chars`` characters in all.

    Args:
        text: The document text (escaped here).
        layers: One :class:`Layer` per configuration.
        excerpts: The marked answer's ranges.
        context: Characters shown before and after each span.
        max_chars: Cap on the characters rendered (the rest is announced, not drawn).
    """
    spans = [(s, e) for layer in layers for s, e, _ in layer.spans] + list(excerpts)
    stretches = _stretches(spans, len(text), context)
    if not stretches:
        return '<div class="rt-doc"><span class="cl-gap">Nothing retrieved or marked yet.</span></div>'
    answer = union_ranges(excerpts)
    out = ['<div class="rt-doc">']
    budget = max_chars
    for lo, hi in stretches:
        if budget <= 0:
            out.append('<div class="cl-more">… more retrieved text not shown</div>')
            break
        hi_shown = min(hi, lo + budget)
        budget -= hi_shown - lo
        out.append(f'<div class="rt-stretch"><div class="rt-where">characters {lo:,}–{hi_shown:,}</div>')
        out.append(_stretch_html(text, layers, answer, lo, hi_shown))
        out.append("</div>")
    out.append("</div>")
    return "".join(out)


def _stretch_html(
    text: str, layers: Sequence[Layer], answer: Sequence[tuple[int, int]], lo: int, hi: int
) -> str:
    cuts = {lo, hi}
    badges: dict[int, list[tuple[str, str, int]]] = {}
    for layer in layers:
        for s, e, rank in layer.spans:
            if e > lo and s < hi:
                cuts.update((max(s, lo), min(e, hi)))
                if lo <= s < hi:
                    badges.setdefault(s, []).append((layer.tag, layer.color, rank))
    for s, e in answer:
        if e > lo and s < hi:
            cuts.update((max(s, lo), min(e, hi)))
    points = sorted(cuts)
    parts = ["" if lo == 0 else '<span class="cl-more">… </span>']
    for a, b in zip(points, points[1:]):
        for tag, color, rank in sorted(badges.get(a, ()), key=lambda t: (t[0], t[2])):
            parts.append(
                f'<span class="rt-rank" style="background:{esc(color)}" title="{esc(tag)}: rank {rank}">'
                f"{esc(tag)}{rank}</span>"
            )
        over = [(layer.tag, layer.color, rank) for layer in layers for s, e, rank in layer.spans if s <= a and e >= b]
        in_answer = any(s <= a and e >= b for s, e in answer)
        seg = esc(text[a:b])
        if not over and not in_answer:
            parts.append(f'<span class="cl-gap">{seg}</span>')
            continue
        styles, classes, tips = [], [], []
        colors = list(dict.fromkeys(c for _, c, _ in over))
        if len(colors) == 1:
            styles.append(f"background:{esc(_tint(colors[0]))}")
        elif colors:
            step = 6
            stops = ", ".join(
                f"{esc(_tint(c, '55'))} {i * step}px {(i + 1) * step}px" for i, c in enumerate(colors)
            )
            styles.append(f"background:repeating-linear-gradient(-45deg, {stops})")
        if over:
            tips.append("retrieved by " + ", ".join(f"{t} (rank {r})" for t, _, r in sorted(set(over))))
        if in_answer:
            classes.append("rt-ans")
            tips.append("marked answer")
        attrs = f' class="{" ".join(classes)}"' if classes else ""
        style = f' style="{";".join(styles)}"' if styles else ""
        parts.append(f'<span{attrs}{style} title="{esc(" · ".join(tips))}">{seg}</span>')
    if hi < len(text):
        parts.append('<span class="cl-more"> …</span>')
    return "".join(parts)


def layers_legend_html(layers: Sequence[Layer], labels: Mapping[str, str]) -> str:
    """A key to the document view: each configuration's fill, stripes for several, the answer's underline."""
    items = [
        f'<span><span class="sw" style="background:{esc(_tint(layer.color))};border:1px solid {esc(layer.color)}">'
        f'</span><b>{esc(layer.tag)}</b> {esc(labels.get(layer.tag, ""))}</span>'
        for layer in layers
    ]
    items.append('<span><span class="sw" style="background:repeating-linear-gradient(-45deg,#2563eb55 0 6px,'
                 '#d9770655 6px 12px)"></span>retrieved by several</span>')
    items.append('<span><span class="rt-ans">underlined</span>: marked answer</span>')
    items.append('<span><span class="rt-rank" style="background:#334155">A1</span>rank 1 of A starts</span>')
    return f'<div class="rt-legend">{"".join(items)}</div>'


HITS_TEXT_CHARS = 300  # characters of each retrieved chunk shown in its top-k table, wrapped


def hits_html(hits: Sequence[Hit], text: str) -> str:
    """One configuration's top k as an HTML table: rank, the chunk's text wrapped, then distance, tokens and span.

    HTML rather than a data grid because a grid cell shows one line: in a column of the
    side-by-side layout the chunk text, the thing to compare, was cut off after a few words.
    The first :data:`HITS_TEXT_CHARS` characters of each chunk (whitespace collapsed) wrap
    over as many lines as they need; the numbers sit in a narrow column on the right.
    Document text is escaped.
    """
    rows = []
    for h in hits:
        shown = esc(_preview(text[h.start : h.end], HITS_TEXT_CHARS))
        rows.append(
            f'<tr><td class="rk">{h.rank}</td><td class="tx">{shown}</td>'
            f'<td class="nm">{h.distance:.3f}<br>{h.tokens:,} tok<br>{h.start:,}–{h.end:,}</td></tr>'
        )
    return (
        '<table class="rt-hits"><thead><tr><th>#</th><th>Chunk</th>'
        '<th title="cosine distance · tokens · characters">Distance</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def scores_frame(
    scores: Mapping[str, RetrievalScores],
    cp: Mapping[str, float] | None = None,
    omega_on: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per configuration tag: recall, precision, precision-Ω, IoU (in %), and CP when given.

    ``omega_on`` (per tag: ``chunks`` or ``units``) adds the column ``omega_on`` saying what
    precision-Ω was computed on (a retriever's finest units).
    """
    rows = []
    for tag, s in scores.items():
        row = {"config": tag, **{m: 100 * getattr(s, m) for m in METRICS}}
        if cp is not None:
            row["cp"] = cp.get(tag, float("nan"))
        if omega_on is not None:
            row["omega_on"] = omega_on.get(tag, "chunks")
        rows.append(row)
    columns = ["config", *METRICS] + (["cp"] if cp is not None else []) + (["omega_on"] if omega_on is not None else [])
    return pd.DataFrame(rows, columns=columns).set_index("config")


# --- question sets --------------------------------------------------------------------------------


def questions_frame(qset: QuestionSet) -> pd.DataFrame:
    """One row per question: the question, its corpus, its excerpts and their characters."""
    rows = [
        {
            "question": q.question,
            "corpus_id": q.corpus_id,
            "excerpts": len(q.references),
            "characters": sum(r.end - r.start for r in q.references),
            "first_excerpt": _preview(q.references[0].content, 80),
        }
        for q in qset.questions
    ]
    return pd.DataFrame(rows, columns=["question", "corpus_id", "excerpts", "characters", "first_excerpt"])


def question_set_upload(keys: PageKeys, label: str) -> QuestionSet | None:
    """The Chroma-format upload: ``questions.csv`` and its corpus files, read into a validated question set.

    Draws two file uploaders and a button (keys ``<prefix>_import_csv``, ``<prefix>_import_corpora``
    and ``<prefix>_import``); the files are read by
    :func:`backend.retrieval.questions.question_set_from_files`, as a script would read them.

    Args:
        keys: The page's keys (the widgets' prefix).
        label: The button's label.

    Returns:
        The set, on the run where the button was pressed and the files are valid; else None
        (a bad upload shows a one-line error).
    """
    csv_file = st.file_uploader("questions.csv", type=["csv"], key=keys("import_csv"))
    corpus_files = st.file_uploader(
        "Corpora (<corpus_id>.md or .txt)", type=["md", "txt"], accept_multiple_files=True, key=keys("import_corpora")
    )
    if not st.button(label, key=keys("import"), icon=":material/upload_file:", disabled=csv_file is None):
        return None
    try:
        return question_set_from_files(
            csv_file.getvalue(), [(f.name, f.getvalue()) for f in corpus_files or []], name=csv_file.name
        )
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return None


# --- the benchmark's tables -----------------------------------------------------------------------


def _pm(mean: float, std: float) -> str:
    """``81.2 ± 10.3`` (percentages), ``—`` for no questions."""
    if np.isnan(mean):
        return "—"
    return f"{100 * mean:.1f} ± {100 * std:.1f}"


OMEGA_MARK = "†"  # on a retriever's precision-Ω: computed on its finest units, not on what it returns
# The summary's two views (one frame): the report's scores, then what each configuration retrieved and cost.
SCORE_COLUMNS = ("chunker", *METRIC_LABELS.values(), "chunks", "mean tokens", "seconds")
COST_COLUMNS = ("retrieved tokens", "texts embedded", "index seconds", "query ms")


def _omega_cell(r: ConfigResult, s: MetricSummary) -> str:
    """Precision-Ω's ``mean ± std``, marked :data:`OMEGA_MARK` when computed on a retriever's units."""
    cell = _pm(s.precision_omega_mean, s.precision_omega_std)
    return f"{cell} {OMEGA_MARK}" if r.omega_units != "chunks" and cell != "—" else cell


def _metric_cells(r: ConfigResult, s: MetricSummary) -> dict[str, str]:
    cells = {METRIC_LABELS[m]: _pm(getattr(s, f"{m}_mean"), getattr(s, f"{m}_std")) for m in METRICS}
    cells[METRIC_LABELS["precision_omega"]] = _omega_cell(r, s)
    return cells


def summary_frame(bm: Benchmark, tags: Sequence[str]) -> pd.DataFrame:
    """The report's results table plus what each configuration retrieved and cost, one row per configuration.

    Columns: the chunker label, mean ± std of each metric (in %; a retriever's precision-Ω
    marked :data:`OMEGA_MARK`), chunks (a retriever: entries over all its levels), mean tokens
    per chunk (a retriever: per finest unit), seconds, then mean tokens retrieved per question,
    texts embedded, index seconds and mean query milliseconds. The page shows them in two
    views, :data:`SCORE_COLUMNS` and :data:`COST_COLUMNS`.
    """
    rows = []
    for tag, r in zip(tags, bm.results):
        rows.append({
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
        })
    return pd.DataFrame(rows).set_index("config")


def summary_column_config() -> dict[str, Any]:
    """``st.dataframe``'s column configuration of :func:`summary_frame`: fixed widths, short headers, help.

    As on the Quality page, the configuration label is the one long text: with it held to a
    fixed width, each view's columns (:data:`SCORE_COLUMNS`, :data:`COST_COLUMNS`), the last
    included, fit the wide layout on a 1280-pixel screen.
    """
    metric = {label: max(_PM_WIDTH, column_width(label)) for label in METRIC_LABELS.values()}
    omega = METRIC_LABELS["precision_omega"]
    pm_help = "mean ± standard deviation over questions, in %"
    return {
        "_index": st.column_config.TextColumn("", width=40),
        "chunker": st.column_config.TextColumn(
            "Chunker", width=_SUMMARY_CHUNKER_WIDTH, help="The configuration (its full label is in the CSV)."
        ),
        **{label: st.column_config.TextColumn(label, width=w, help=pm_help) for label, w in metric.items()},
        omega: st.column_config.TextColumn(
            omega, width=metric[omega],
            help=f"{pm_help}. {OMEGA_MARK}: a retriever's, computed on its finest units (MoG's level 1, MoGG's "
                 "nodes, FreeChunker's units), not on the entries it returns.",
        ),
        "chunks": st.column_config.NumberColumn(
            "Chunks", format="%d", width=column_width("Chunks"),
            help="Chunks over all corpora; a retriever: its entries over all its levels.",
        ),
        "mean tokens": st.column_config.NumberColumn(
            "Tokens", format="%.1f", width=column_width("Tokens"),
            help="Mean tokens per chunk; a retriever: per finest unit.",
        ),
        "seconds": st.column_config.NumberColumn(
            "Time (s)", format="%.2f", width=column_width("Time (s)"),
            help="Wall time of the configuration: chunking, embedding, indexing, retrieval, scoring "
                 "(and training a cv router).",
        ),
        "retrieved tokens": st.column_config.NumberColumn(
            "Retrieved tokens", format="%.1f", width=column_width("Retrieved tokens"),
            help="Mean tokens retrieved per question (a coarse level returns far more text for the same number).",
        ),
        "texts embedded": st.column_config.NumberColumn(
            "Texts embedded", format="%d", width=column_width("Texts embedded"),
            help="Texts the embedder embedded for this configuration in this run (0: all from the cache or the store).",
        ),
        "index seconds": st.column_config.NumberColumn(
            "Index (s)", format="%.2f", width=column_width("Index (s)"),
            help="Chunking (a retriever: building its levels), embedding and indexing every corpus.",
        ),
        "query ms": st.column_config.NumberColumn(
            "Query (ms)", format="%.2f", width=column_width("Query (ms)"),
            help="Mean milliseconds per question from its vector to the scored answer (training a cv router excluded).",
        ),
    }


def per_corpus_frame(bm: Benchmark, tags: Sequence[str]) -> pd.DataFrame:
    """Per configuration and corpus: questions, mean ± std of each metric (in %) and mean tokens retrieved."""
    rows = []
    for tag, r in zip(tags, bm.results):
        for cid, s in r.per_corpus.items():
            mine = [q for q in r.questions if q.corpus_id == cid]
            rows.append({
                "config": tag,
                "corpus": cid,
                "questions": s.questions,
                **_metric_cells(r, s),
                "retrieved tokens": round(float(np.mean([_tokens(q) for q in mine])), 1) if mine else float("nan"),
            })
    return pd.DataFrame(rows)


def _tokens(q: QuestionResult) -> int:
    return sum(c.tokens for c in q.retrieved)


def per_question_frame(bm: Benchmark, tags: Sequence[str]) -> pd.DataFrame:
    """Every question under every configuration (the per-question CSV and JSON).

    Scores are fractions. Beside them: entries and tokens retrieved, the levels they came
    from (a retriever's, ``;``-separated; empty for a chunker), what precision-Ω was computed
    on, and for a routed retriever the chosen and oracle levels (1-based; oracle 0: none) and
    the router's weight on each level.
    """
    rows = []
    for tag, r in zip(tags, bm.results):
        routing = r.routing
        retriever = r.omega_units != "chunks"
        for i, q in enumerate(r.questions):
            scores = {k: v for k, v in q.to_json().items() if k != "retrieved"}
            row = {"config": tag, "chunker": r.config.label, **scores}
            row["omega_units"] = r.omega_units
            row["retrieved_entries"] = len(q.retrieved)
            row["retrieved_tokens"] = _tokens(q)
            row["retrieved_levels"] = ";".join(str(c.level) for c in q.retrieved) if retriever else ""
            if routing is not None:
                row["chosen_level"] = int(routing.chosen[i])
                row["oracle_level"] = int(routing.oracle[i])
                row["weights"] = ";".join(f"{w:.4f}" for w in np.asarray(routing.weights[i]).tolist())
            rows.append(row)
    frame = pd.DataFrame(rows)
    for column in ("chosen_level", "oracle_level"):
        if column in frame:
            frame[column] = frame[column].astype("Int64")  # empty, not 2.0, where a configuration has no routing
    return frame


def candidates_frame(gen: GeneratedQuestions) -> pd.DataFrame:
    """Every generated candidate: the question, its worst excerpt similarity, kept, and why not."""
    rows = [
        {
            "question": c.question.question,
            "excerpts": len(c.question.references),
            "excerpt_similarity": c.worst_excerpt_similarity,
            "kept": kept,
            "dropped_because": why or "",
        }
        for c, kept, why in zip(gen.candidates, gen.kept, gen.drop_reasons)
    ]
    return pd.DataFrame(rows, columns=["question", "excerpts", "excerpt_similarity", "kept", "dropped_because"])


def start_benchmark(
    qset: QuestionSet,
    entries: Sequence[ConfigEntry],
    *,
    embedder: str | None,
    retrieve: int,
    cross_corpus: bool,
    qset_name: str,
) -> str | None:
    """Start the benchmark of ``entries`` (Compare's configurations) on ``qset`` in the background.

    The one way the Benchmark and Summary pages run it: the job goes to
    ``st.session_state[BENCHMARK_JOB]`` (a running one is cancelled first), with the
    configurations' ``tags``, ``colors``, the ``qset`` and its ``qset_name`` in its meta, so both
    pages show its result. A configuration whose chunker needs the language model makes it a model job.

    Returns:
        None, or the one-line reason it could not start (the session's language model is unusable).
    """
    from functools import partial

    from backend.chunkers import REGISTRY
    from backend.jobs import start_job
    from backend.retrieval.jobs import benchmark_job
    from backend.lab.jobs import JobPlan
    from components.lm_runs import session_models, start_plan

    previous = st.session_state.get(BENCHMARK_JOB)
    if previous is not None and previous.running:
        previous.cancel()
    configs = [e.config for e in entries]
    meta = {
        "tags": [e.tag for e in entries],
        "colors": [config_color(e.uid) for e in entries],
        "qset": qset,
        "qset_name": qset_name,
    }
    body = benchmark_job(qset, configs, embedder, retrieve, cross_corpus)
    title = f"Benchmarking {len(configs)} configuration(s)"
    if any("lm" in REGISTRY[c.name].needs for c in configs if c.name in REGISTRY):
        lm = session_models()
        if lm.error:
            return lm.error
        if lm.scorer is None:  # the default model: the chunkers load it only for outputs not in the cache
            job = start_job(title, partial(body, None), model=lm.label, **meta)
        else:
            job = start_plan(JobPlan(title, None, body, models=lm))
            job.meta.update(meta)
    else:
        job = start_job(title, partial(body, None), **meta)
    st.session_state[BENCHMARK_JOB] = job
    return None


def indexing_resume_note(chunkings: Mapping[str, Any], embedder_spec: str | None) -> str | None:
    """``"N of M chunks already embedded"`` when an interrupted indexing run of these chunkings left work; else None.

    Reads only which parts of the chunks' embeddings the output cache holds
    (:func:`backend.models.embeddings.embedded_in_parts`), never a model; the next search goes on from them.
    """
    from backend.chunkers.multi import is_retriever
    from backend.errors import ModelError
    from backend.models.cache import default_cache
    from backend.models.embeddings import embedded_in_parts
    from backend.models.identity import embedder_fingerprint_without_loading

    try:
        fingerprint = embedder_fingerprint_without_loading(embedder_spec)
    except ModelError:
        return None
    if fingerprint is None:
        return None
    cache = default_cache()
    done = total = 0
    for chunking in chunkings.values():
        if is_retriever(chunking.config.name):
            continue
        texts = [c.text for c in chunking.chunks]
        k = embedded_in_parts(cache, fingerprint, texts)
        if k:
            done, total = done + k, total + len(texts)
    return f"{done:,} of {total:,} chunks already embedded" if done else None
