"""The retrieval lab's building blocks: highlighted document views, tables, question sets and figures.

Almost everything here is a pure function of backend results (hits, scores, a
:class:`~backend.retrieval.Benchmark`, :class:`~backend.retrieval.GeneratedQuestions`) that
returns an HTML string, a ``pandas.DataFrame`` or a Plotly figure, so the Retrieval and
Benchmark pages stay thin and the logic is tested without a browser. The job bodies at the
end (:func:`search_job`, :func:`cp_job`, :func:`benchmark_job`, :func:`generation_job`) run in
background threads: they never call Streamlit.

Document text is untrusted: every piece of it goes through :func:`components.render.esc`
(HTML) or :func:`_hover` (Plotly hover labels) before it reaches markup.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from backend.chunking import ChunkerConfig, Chunking
from backend.text.document import Document
from backend.errors import InputError, ParameterError
from backend.retrieval.evaluate import METRICS, Benchmark
from backend.retrieval.metrics import (
    ExcerptFinder,
    RetrievalScores,
    agreement_matrices,
    coverage_profile,
    retrieval_coverage,
    score_retrieval,
    union_ranges,
)
from backend.retrieval.questions import (
    CORPUS_SUFFIXES,
    Question,
    QuestionSet,
    Reference,
    corpus_id_for,
    questions_to_csv,
    read_corpus_text,
)
from components.charts import CONFIG_COLORS
from components.render import esc

if TYPE_CHECKING:
    from backend.models.types import Progress, Scorer
    from backend.retrieval.generation import GeneratedQuestions
    from backend.retrieval.store import Hit

__all__ = [
    "QSET",
    "METRIC_LABELS",
    "RET_STYLE",
    "Layer",
    "md_text",
    "config_color",
    "highlight_html",
    "layers_legend_html",
    "hits_frame",
    "split_excerpts",
    "find_excerpts",
    "live_scores",
    "scores_frame",
    "sentence_choices",
    "question_from_marks",
    "add_questions",
    "questions_frame",
    "question_set_zip",
    "corpora_from_files",
    "summary_frame",
    "per_corpus_frame",
    "per_question_frame",
    "metric_bars",
    "question_heatmap",
    "agreement_heatmaps",
    "coverage_rows",
    "coverage_strip",
    "similarity_histogram",
    "candidates_frame",
    "figure_html",
    "search_job",
    "cp_job",
    "BenchmarkRun",
    "benchmark_job",
    "generation_job",
]

QSET = "ret_qset"  # the session's question set (QuestionSet or None), shared by Retrieval and Benchmark
METRIC_LABELS = {"recall": "Recall", "precision": "Precision", "precision_omega": "Precision-Ω", "iou": "IoU"}
_HOVER_CHARS = 120

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
.rt-legend { font: 0.8rem sans-serif; color: #475569; display: flex; flex-wrap: wrap; gap: 0.9rem; }
.rt-legend .sw { display: inline-block; width: 1.6rem; height: 0.9rem; vertical-align: -0.15rem; border-radius: 2px;
  margin-right: 0.3rem; }
</style>
"""


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")


def md_text(text: str) -> str:
    """``text`` (a query, a model or corpus name) safe to place in Markdown: special characters escaped, one line."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def config_color(uid: int) -> str:
    """The colour of the configuration with ``uid`` (the Compare page's)."""
    return CONFIG_COLORS[uid % len(CONFIG_COLORS)]


def _hover(text: str, n: int = _HOVER_CHARS) -> str:
    """Text on one line, shortened, escaped for Plotly's HTML-like hover labels."""
    flat = " ".join(text[: n * 2].split())
    return html.escape(flat if len(flat) <= n else flat[: n - 1] + "…", quote=False)


def _preview(text: str, n: int = _HOVER_CHARS) -> str:
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


def hits_frame(hits: Sequence[Hit], text: str) -> pd.DataFrame:
    """One row per hit: rank, cosine distance, span, tokens and the start of the chunk (plain text)."""
    rows = [
        {
            "rank": h.rank,
            "distance": h.distance,
            "start": h.start,
            "end": h.end,
            "tokens": h.tokens,
            "text": _preview(text[h.start : h.end]),
        }
        for h in hits
    ]
    return pd.DataFrame(rows, columns=["rank", "distance", "start", "end", "tokens", "text"])


# --- marking the true answer --------------------------------------------------------------------


def split_excerpts(raw: str) -> list[str]:
    """Pasted excerpts: several are separated by a line holding only ``---``; blank ones are dropped."""
    pieces, current = [], []
    for line in raw.splitlines(keepends=True):
        if line.strip() == "---":
            pieces.append("".join(current))
            current = []
        else:
            current.append(line)
    pieces.append("".join(current))
    return [p.strip() for p in pieces if p.strip()]


def find_excerpts(text: str, raw: str) -> list[tuple[int, int]]:
    """The ranges of the pasted excerpts in ``text`` (exact, else whitespace-insensitive).

    Raises:
        ParameterError: nothing pasted, or an excerpt that is not in the text (named, shortened).
    """
    excerpts = split_excerpts(raw)
    if not excerpts:
        raise ParameterError("paste the answer's text first")
    finder = ExcerptFinder(text)
    found = []
    for i, excerpt in enumerate(excerpts, 1):
        match = finder.find(excerpt)
        if match is None:
            which = f"excerpt {i} " if len(excerpts) > 1 else "the excerpt "
            raise ParameterError(f"{which}{_preview(excerpt, 60)!r} is not in the document (even ignoring whitespace)")
        found.append((match.start, match.end))
    return found


def live_scores(
    hits: Mapping[str, Sequence[Hit]], chunkings: Mapping[str, Chunking], marks: Sequence[tuple[int, int]]
) -> dict[str, RetrievalScores]:
    """The report's four metrics of each configuration's hits against the marked answer.

    Raises:
        ParameterError: no marks.
    """
    excerpts = union_ranges(marks)
    out = {}
    for tag, rows in hits.items():
        spans = [(c.start, c.end) for c in chunkings[tag].chunks]
        out[tag] = score_retrieval([(h.start, h.end) for h in rows], spans, excerpts)
    return out


def scores_frame(scores: Mapping[str, RetrievalScores], cp: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per configuration tag: recall, precision, precision-Ω, IoU (in %), and CP when given."""
    rows = []
    for tag, s in scores.items():
        row = {"config": tag, **{m: 100 * getattr(s, m) for m in METRICS}}
        if cp is not None:
            row["cp"] = cp.get(tag, float("nan"))
        rows.append(row)
    columns = ["config", *METRICS] + (["cp"] if cp is not None else [])
    return pd.DataFrame(rows, columns=columns).set_index("config")


def sentence_choices(doc: Document, near: Sequence[tuple[int, int]] = (), limit: int = 1000) -> list[int]:
    """Indices of the sentences to offer for picking: all of them up to ``limit``, else those meeting ``near``."""
    sentences = doc.sentences
    if len(sentences) <= limit:
        return list(range(len(sentences)))
    wanted = union_ranges(near)
    out = [i for i, s in enumerate(sentences) if any(s.start < e and s.end > b for b, e in wanted)]
    return out[:limit]


# --- question sets --------------------------------------------------------------------------------


def question_from_marks(doc: Document, query: str, marks: Sequence[tuple[int, int]], corpus_id: str) -> Question:
    """A question over ``doc`` with the union of ``marks`` as its references.

    Raises:
        ParameterError: an empty query or no marks.
    """
    if not query.strip():
        raise ParameterError("the query is empty: type the question first")
    spans = union_ranges(marks)
    if not spans:
        raise ParameterError("mark the true answer first (paste an excerpt or pick sentences)")
    return Question(query.strip(), tuple(Reference(doc.text[s:e], s, e) for s, e in spans), corpus_id)


def _corpus_id(qset: QuestionSet | None, doc: Document) -> str:
    """``doc``'s corpus id in ``qset``: its file stem, with the document id added when that stem is taken."""
    cid = corpus_id_for(doc)
    if qset is None or qset.corpora.get(cid, doc.text) == doc.text:
        return cid
    return f"{cid}-{doc.id[:8]}"


def add_questions(
    qset: QuestionSet | None, doc: Document, query: str, marks: Sequence[tuple[int, int]]
) -> QuestionSet:
    """``qset`` (or a new set) with the marked query over ``doc`` appended.

    Raises:
        ParameterError: an empty query or no marks.
    """
    cid = _corpus_id(qset, doc)
    q = question_from_marks(doc, query, marks, cid)
    if qset is None:
        return QuestionSet((q,), {cid: doc.text})
    return qset.with_questions([q], {cid: doc.text})


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


def question_set_zip(qset: QuestionSet) -> bytes:
    """The set in the Chroma format as a zip: ``questions.csv`` and ``corpora/<corpus_id>.md|.txt``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("questions.csv", questions_to_csv(qset))
        for cid, text in qset.corpora.items():
            z.writestr(f"corpora/{cid}{qset.suffixes.get(cid, '.md')}", text)
    return buf.getvalue()


def corpora_from_files(files: Sequence[tuple[str, bytes]]) -> tuple[dict[str, str], dict[str, str]]:
    """Uploaded corpus files → ``({corpus_id: text}, {corpus_id: suffix})``; the id is the file's stem.

    Raises:
        InputError: a file that is not ``.md``/``.txt``, not UTF-8, or two files with one id.
    """
    corpora: dict[str, str] = {}
    suffixes: dict[str, str] = {}
    for name, data in files:
        path = PurePath(name)
        if path.suffix.lower() not in CORPUS_SUFFIXES:
            raise InputError(f"{name}: a corpus is a .md or .txt file named <corpus_id>.md")
        cid = path.stem
        if cid in corpora:
            raise InputError(f"two corpus files are named {cid} (.md and .txt?): keep one")
        corpora[cid] = read_corpus_text(data, name)
        suffixes[cid] = path.suffix.lower()
    return corpora, suffixes


# --- the benchmark's tables -----------------------------------------------------------------------


def _pm(mean: float, std: float) -> str:
    """``81.2 ± 10.3`` (percentages), ``—`` for no questions."""
    if np.isnan(mean):
        return "—"
    return f"{100 * mean:.1f} ± {100 * std:.1f}"


def summary_frame(bm: Benchmark, tags: Sequence[str]) -> pd.DataFrame:
    """The report's results table: per configuration, mean ± std of each metric (in %), chunks, size, time."""
    rows = []
    for tag, r in zip(tags, bm.results):
        s = r.summary
        rows.append({
            "config": tag,
            "chunker": r.config.label,
            **{METRIC_LABELS[m]: _pm(getattr(s, f"{m}_mean"), getattr(s, f"{m}_std")) for m in METRICS},
            "chunks": r.chunks,
            "mean tokens": round(r.chunk_tokens_mean, 1),
            "seconds": round(r.seconds, 2),
        })
    return pd.DataFrame(rows).set_index("config")


def per_corpus_frame(bm: Benchmark, tags: Sequence[str]) -> pd.DataFrame:
    """Per configuration and corpus: questions and mean ± std of each metric (in %)."""
    rows = []
    for tag, r in zip(tags, bm.results):
        for cid, s in r.per_corpus.items():
            rows.append({
                "config": tag,
                "corpus": cid,
                "questions": s.questions,
                **{METRIC_LABELS[m]: _pm(getattr(s, f"{m}_mean"), getattr(s, f"{m}_std")) for m in METRICS},
            })
    return pd.DataFrame(rows)


def per_question_frame(bm: Benchmark, tags: Sequence[str]) -> pd.DataFrame:
    """Every question under every configuration, scores as fractions (the per-question CSV)."""
    rows = [
        {"config": tag, "chunker": r.config.label, **{k: v for k, v in q.to_json().items() if k != "retrieved"}}
        for tag, r in zip(tags, bm.results)
        for q in r.questions
    ]
    return pd.DataFrame(rows)


# --- figures ----------------------------------------------------------------------------------------


def metric_bars(bm: Benchmark, tags: Sequence[str], colors: Sequence[str]) -> go.Figure:
    """Grouped bars: each metric's mean (in %) per configuration, the standard deviation as error bars."""
    fig = go.Figure()
    labels = [METRIC_LABELS[m] for m in METRICS]
    for tag, color, r in zip(tags, colors, bm.results):
        s = r.summary
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[100 * getattr(s, f"{m}_mean") for m in METRICS],
                error_y={"type": "data", "array": [100 * getattr(s, f"{m}_std") for m in METRICS], "visible": True},
                name=f"{tag} · {html.escape(r.config.name, quote=False)}",
                marker={"color": color},
                hovertemplate=f"{tag}: %{{x}} %{{y:.1f}}%<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=340,
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        yaxis={"title": {"text": "mean over questions (%)"}, "rangemode": "tozero"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig


def question_heatmap(matrix: np.ndarray, questions: Sequence[str], tags: Sequence[str], metric: str) -> go.Figure:
    """Questions × configurations, one cell per question's ``metric`` (in %).

    Args:
        matrix: ``Benchmark.matrix(metric)``: shape (questions, configurations), fractions.
        questions: The question texts (hover labels), in row order.
        tags: Column labels.
        metric: One of :data:`~backend.retrieval.METRICS` (the colour bar's title).

    Raises:
        ParameterError: a matrix whose shape does not match the labels.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape != (len(questions), len(tags)):
        raise ParameterError(f"matrix shape {matrix.shape} does not match {len(questions)} questions × {len(tags)} configurations")
    hover = [[_hover(q)] * len(tags) for q in questions]
    fig = go.Figure(
        go.Heatmap(
            z=100 * matrix,
            x=list(tags),
            y=[f"Q{i + 1}" for i in range(len(questions))],
            customdata=hover,
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            colorbar={"title": {"text": f"{METRIC_LABELS.get(metric, metric)} %"}},
            hovertemplate="%{y} · %{x}: %{z:.1f}%<br>%{customdata}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(260, min(1200, 22 * len(questions) + 80)),
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        yaxis={"autorange": "reversed", "title": {"text": "question"}},
        xaxis={"title": {"text": "configuration"}, "side": "top"},
    )
    return fig


def _square_heatmap(matrix: np.ndarray, tags: Sequence[str], title: str) -> go.Figure:
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(matrix, dtype=np.float64),
            x=list(tags),
            y=list(tags),
            zmin=0,
            zmax=1,
            colorscale="Blues",
            text=[[f"{v:.2f}" for v in row] for row in np.asarray(matrix)],
            texttemplate="%{text}",
            colorbar={"title": {"text": title}},
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(260, 60 * len(tags) + 100),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={"text": title, "font": {"size": 13}},
        yaxis={"autorange": "reversed"},
    )
    return fig


def agreement_heatmaps(
    chunkings: Sequence[Chunking], tags: Sequence[str], tolerance: int
) -> tuple[go.Figure, go.Figure, np.ndarray, np.ndarray]:
    """Configuration × configuration agreement on one document.

    Returns:
        ``(boundary figure, overlap figure, boundary IoU matrix, span-overlap matrix)``: the
        IoU of the boundary sets (boundaries within ``tolerance`` characters match) and the
        span-overlap similarity (see :func:`backend.retrieval.metrics.agreement_matrices`).

    Raises:
        ParameterError: chunkings of different documents, a negative tolerance.
    """
    bounds, overlap = agreement_matrices(chunkings, tolerance)
    return (
        _square_heatmap(bounds, tags, f"boundary IoU (±{tolerance} chars)"),
        _square_heatmap(overlap, tags, "span-overlap similarity"),
        bounds,
        overlap,
    )


def coverage_rows(
    bm: Benchmark, qset: QuestionSet, corpus_id: str, bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """How often each stretch of one corpus is retrieved, per configuration, and how often it is an excerpt.

    Returns:
        ``(rows, excerpts)``: ``rows`` has one row per configuration and ``bins`` columns, each
        the mean over the stretch's characters of the number of questions that retrieved the
        character; ``excerpts`` is the same for the questions' excerpts (the answers' density).

    Raises:
        ParameterError: an unknown corpus or ``bins`` below 1.
    """
    if corpus_id not in qset.corpora:
        raise ParameterError(f"no corpus {corpus_id!r} in this question set")
    length = len(qset.corpora[corpus_id])
    rows = [coverage_profile(retrieval_coverage(length, r.retrieved_ranges(corpus_id)), bins) for r in bm.results]
    spans = [q.spans for q in qset.questions if q.corpus_id == corpus_id]
    excerpts = coverage_profile(retrieval_coverage(length, spans), bins)
    return np.vstack(rows) if rows else np.zeros((0, len(excerpts))), excerpts


def coverage_strip(rows: np.ndarray, excerpts: np.ndarray, tags: Sequence[str], length: int) -> go.Figure:
    """A strip along the document: one row per configuration coloured by how often each stretch was retrieved.

    The last row is the excerpts (where the answers are), so a configuration that
    retrieves off the answers shows at once.
    """
    bins = rows.shape[1] if rows.size else len(excerpts)
    edges = np.linspace(0, length, bins + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    z = np.vstack([rows, excerpts[None, :]]) if rows.size else excerpts[None, :]
    labels = [*tags, "excerpts"]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=centers,
            y=labels,
            colorscale="YlOrRd",
            zmin=0,
            colorbar={"title": {"text": "questions"}},
            hovertemplate="%{y} · around character %{x:,.0f}: %{z:.2f} questions<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(200, 42 * len(labels) + 90),
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis={"title": {"text": "character offset"}, "range": [0, length]},
        yaxis={"autorange": "reversed"},
    )
    return fig


def similarity_histogram(values: Sequence[float], threshold: float, title: str, keep: str) -> go.Figure:
    """The report's prefilter histogram: ``values`` with the threshold as a dashed line.

    Args:
        values: Cosine similarities.
        threshold: Where the filter cuts.
        title: The x axis title.
        keep: ``"below"`` (duplicates: pairs above the line drop) or ``"above"`` (excerpts:
            questions below the line drop), for the line's label.
    """
    fig = go.Figure(
        go.Histogram(
            x=list(values), xbins={"start": -1.0, "end": 1.0, "size": 0.05}, marker={"color": "#64748b"},
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    fig.add_vline(
        x=threshold, line={"color": "#dc2626", "dash": "dash", "width": 2},
        annotation_text=f"{threshold:.2f} (keep {keep})", annotation_position="top",
    )
    fig.update_layout(
        height=260,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": {"text": title}, "range": [-0.2, 1.0]},
        yaxis={"title": {"text": "count"}},
        bargap=0.05,
    )
    return fig


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


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML file of ``fig`` (plotly.js embedded, so it opens offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


# --- job bodies (background threads: no Streamlit here) ---------------------------------------------


def search_job(
    doc: Document, chunkings: Mapping[str, Chunking], embedder_spec: str | None, query: str, k: int
) -> Callable[[Progress], dict[str, list[Hit]]]:
    """``fn(progress)`` for a :class:`~components.models.Job`: index each chunking, then the top ``k`` of each.

    The store opens in the job too (a Chroma server that is down costs its timeout there,
    not in a page run). Returns per tag the hits, rank 1 first.
    """

    def run(progress: Progress) -> dict[str, list[Hit]]:
        from backend.models.cache import default_cache
        from backend.models.embeddings import load_text_embedder
        from backend.retrieval.store import open_store

        progress(0, 1)
        store = open_store()
        emb = load_text_embedder(embedder_spec)
        unique: dict[ChunkerConfig, Chunking] = {}
        for ch in chunkings.values():
            unique.setdefault(ch.config, ch)
        found = store.search(doc, list(unique.values()), emb, query, k, cache=default_cache(), progress=progress)
        return {tag: found[ch.config] for tag, ch in chunkings.items()}

    return run


def cp_job(retrieved: Mapping[str, Sequence[str]], answer: str) -> Callable[[Scorer, Progress], dict[str, float]]:
    """``fn(scorer, progress)`` computing CP (information support) of each tag's retrieved texts for ``answer``."""

    def run(scorer: Scorer, progress: Progress) -> dict[str, float]:
        from backend.models.cache import default_cache
        from backend.metrics.quality import information_support

        out = {}
        for i, (tag, texts) in enumerate(retrieved.items()):
            progress(i, len(retrieved))
            out[tag] = information_support(list(texts), answer, scorer, cache=default_cache())
        progress(len(retrieved), len(retrieved))
        return out

    return run


@dataclass(frozen=True)
class BenchmarkRun:
    """A finished benchmark and the chunkings it scored: ``chunkings[corpus_id]`` has one per configuration, in order.

    The chunkings feed the agreement heat maps, so a page run never re-chunks a large corpus.
    """

    benchmark: Benchmark
    chunkings: Mapping[str, tuple[Chunking, ...]]


def benchmark_job(
    qset: QuestionSet, configs: Sequence[ChunkerConfig], embedder_spec: str | None, retrieve: int, cross_corpus: bool
) -> Callable[..., BenchmarkRun]:
    """``fn(progress)`` (or ``fn(scorer, progress)`` for model-backed configurations) running the benchmark."""

    def run(*args: Any) -> BenchmarkRun:
        from backend.chunkers import run_chunker
        from backend.retrieval.evaluate import evaluate
        from backend.retrieval.store import open_store

        scorer, progress = args if len(args) == 2 else (None, args[0])
        progress(0, 1)
        context = None
        if scorer is not None:
            from backend.chunkers.context import ModelContext

            context = ModelContext(scorer=scorer)
        bm = evaluate(
            qset, list(configs), embedder=embedder_spec, retrieve=retrieve, store=open_store(),
            context=context, cross_corpus=cross_corpus, progress=progress,
        )
        # The same chunkings evaluate indexed (chunkers are deterministic; model outputs come from the cache).
        chunkings = {cid: tuple(run_chunker(qset.document(cid), c, context) for c in configs) for cid in bm.corpora}
        return BenchmarkRun(bm, chunkings)

    return run


def generation_job(
    doc: Document,
    n: int,
    *,
    local: bool,
    base_url: str,
    api_key: str,
    model: str,
    duplicate_threshold: float,
    excerpt_threshold: float,
) -> Callable[[Progress], GeneratedQuestions]:
    """``fn(progress)`` generating up to ``n`` questions from ``doc`` that pass the given thresholds.

    Empty fields fall back to the environment (``OPENAI_*``). The key lives only in this
    closure and the session's widget state; the result never holds it. The thresholds only
    decide when enough questions are kept: the result can be refiltered with any others.
    """

    def run(progress: Progress) -> GeneratedQuestions:
        from backend.retrieval.generation import generate_questions

        progress(0, n)
        return generate_questions(
            doc, n=n, local=True if local else None, base_url=base_url.strip() or None,
            api_key=api_key.strip() or None, model=model.strip() or None,
            duplicate_threshold=duplicate_threshold, excerpt_threshold=excerpt_threshold, progress=progress,
        )

    return run
