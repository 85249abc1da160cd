"""The PPL page's pieces: per-sentence scores, re-chunking from them, its charts and widgets.

Everything θ-dependent is computed from per-sentence values kept in session state
(:class:`PPLScores`), never from the model: :func:`ppl_chunking` calls
:func:`backend.chunkers.meta.chunkers.ppl_spans`, the charts call :mod:`backend.chunkers.meta.algorithms`'s
candidate and curve functions. Figures put every series in one trace (arrays with ``None``
separators), so a 1,000-sentence document is a handful of Plotly objects, not thousands.
Sentence text reaches a hover label only escaped and shortened.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from backend.chunkers.meta.chunkers import ppl_spans
from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.text.document import Document
from backend.chunkers.meta.algorithms import Candidate, MarginStep, combine, ranges_from_steps
from backend.models.scoring import SentenceScore, score_sentences
from backend.tokenizers import SpanCounter
from components.charts import _preview
from components.render import ChunkIndex, legend_html, window_html

if TYPE_CHECKING:
    from backend.models.types import TokenScores

__all__ = [
    "PPLScores",
    "MarginResult",
    "REFERENCE_RULE",
    "PAPER_RULE",
    "PAPER_ADVICE",
    "ppl_chunking",
    "margin_chunking",
    "theta_grid",
    "values_chart",
    "drops_histogram",
    "chunk_curve",
    "margin_chart",
    "values_csv",
    "theta_format",
    "snap",
    "theta_controls",
    "document_view",
    "chunk_stats",
    "export_buttons",
]

# The two boundary rules as backend/chunkers/meta/algorithms.py's docstring states them.
REFERENCE_RULE = (
    "`v[i] < v[i-1] and v[i] < v[i+1]` and (`v[i-1] - v[i] >= θ` or `v[i+1] - v[i] >= θ`), "
    "or the plateau `v[i] < v[i-1] and v[i] == v[i+1]` with `v[i-1] - v[i] >= θ`."
)
PAPER_RULE = "`min(v[i-1], v[i+1]) - v[i] > θ`, or `v[i-1] - v[i] > θ and v[i+1] == v[i]`."
PAPER_ADVICE = (
    "The paper's advice (section 4.2.3): when the perplexity curve is relatively flat, choose a small θ "
    "(it uses 0 on HotpotQA, MuSiQue and DuReader); when it fluctuates a lot, a larger θ separates passages "
    "of different information density (0.4 on NarrativeQA). For long chunks it prefers θ = 0 followed by "
    "dynamic combination to a target length."
)
WINDOW_CHARS = 15_000  # characters per page of the document view
_BOUNDARY = "#dc2626"
_LINE = "#2563eb"
_MUTED = "#94a3b8"


# --- scores and chunkings -------------------------------------------------------------------------


@dataclass(frozen=True)
class PPLScores:
    """One document's per-sentence scores under one model: what every θ re-chunks from.

    Attributes:
        doc_id: The document's id.
        model: The model's identity (:attr:`components.lm_runs.SessionLM.identity`).
        model_name: Its display name.
        sentences: One :class:`SentenceScore` per sentence of the document.
    """

    doc_id: str
    model: str
    model_name: str
    sentences: tuple[SentenceScore, ...]

    @classmethod
    def build(cls, doc: Document, scores: TokenScores, model: str, model_name: str) -> PPLScores:
        """Per-sentence means of a document's token scores."""
        return cls(doc.id, model, model_name, tuple(score_sentences(doc, scores)))

    @property
    def nll(self) -> list[float]:
        """Mean NLL per sentence (nan: no scored token)."""
        return [s.nll_mean for s in self.sentences]

    @property
    def tokens(self) -> list[int]:
        """Scored model tokens per sentence."""
        return [s.tokens for s in self.sentences]


@dataclass(frozen=True)
class MarginResult:
    """Margin sampling's decisions on one document, model and unit."""

    doc_id: str
    model: str
    unit: str
    steps: tuple[MarginStep, ...]


def _chunking(doc: Document, config: ChunkerConfig, spans: Sequence[tuple[int, int, int]], seconds: float) -> Chunking:
    text = doc.text
    chunks = tuple(Chunk(i, s, e, text[s:e], int(n)) for i, (s, e, n) in enumerate(spans))
    return Chunking(config, chunks, seconds, doc.id, len(text))


def ppl_chunking(doc: Document, values: Sequence[float], counter: SpanCounter, config: ChunkerConfig) -> Chunking:
    """What ``config`` (``ppl``, ``ppl_combined`` or ``ppl_overlap``) gives on ``values``, with no model call.

    ``values`` are :func:`backend.chunkers.meta.algorithms.sentence_values` of the cached scores with the
    configuration's ``value``; ``counter`` counts with the configuration's tokenizer.
    """
    p = config.params_dict
    t0 = time.perf_counter()
    spans = ppl_spans(
        doc,
        values,
        counter.tokenizer,
        threshold=p["threshold"],
        rule=p["rule"],
        target_length=p["target_length"] if config.name == "ppl_combined" else None,
        overlap=config.name == "ppl_overlap",
        counter=counter,
    )
    return _chunking(doc, config, spans, time.perf_counter() - t0)


def margin_chunking(doc: Document, steps: Sequence[MarginStep], counter: SpanCounter, config: ChunkerConfig) -> Chunking:
    """The chunks of margin sampling's decisions (merged up to ``target_length`` tokens when it is > 0)."""
    t0 = time.perf_counter()
    sentences = doc.sentences
    ranges = ranges_from_steps(len(sentences), steps)
    spans = [(sentences[a].start, sentences[b].end) for a, b in ranges]
    target = int(config.params_dict.get("target_length") or 0)
    if target:
        out = combine(doc.text, spans, counter, target)
    else:
        out = [(s, e, n) for (s, e), n in zip(spans, counter.count_many(spans))]
    return _chunking(doc, config, out, time.perf_counter() - t0)


def theta_grid(candidates: Sequence[Candidate], low: float, high: float, points: int = 240) -> np.ndarray:
    """Thresholds for the θ → chunk-count curve: an even grid plus every drop in range (the curve's steps)."""
    drops = np.array([c.drop for c in candidates if math.isfinite(c.drop)], dtype=np.float64)
    grid = np.linspace(low, high, points)
    return np.unique(np.concatenate([grid, drops[(drops >= low) & (drops <= high)]]))


# --- figures ---------------------------------------------------------------------------------------


def _finite(values: Sequence[float]) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values]


def _segments(xs: Sequence[tuple[float, float]], ys: Sequence[tuple[float, float]]) -> tuple[list, list]:
    """Many line segments as one trace's x and y (``None`` between segments)."""
    x: list[float | None] = []
    y: list[float | None] = []
    for (x0, x1), (y0, y1) in zip(xs, ys):
        x += [x0, x1, None]
        y += [y0, y1, None]
    return x, y


def values_chart(
    scores: PPLScores,
    values: Sequence[float],
    candidates: Sequence[Candidate],
    kept: Sequence[int],
    theta: float,
    rule: str,
    value_name: str,
    revision: str = "",
) -> go.Figure:
    """The per-sentence values with minima, boundaries and θ drawn on the drops.

    - the line: one point per sentence (hover: the sentence, escaped and shortened, its
      value and its token count);
    - each local minimum gets a bar from its value up by θ with a tick at the top: under the
      reference rule it is a boundary when the *higher* neighbour reaches the tick, under the
      paper rule when *both* neighbours pass it;
    - minima that are boundaries: red triangles, with a dotted red line after them (the
      sentence at a minimum is the last of its chunk); the others: hollow grey circles.
    """
    n = len(values)
    x = list(range(n))
    y = _finite(values)
    kept_set = set(kept)
    fig = go.Figure()

    finite = [v for v in y if v is not None]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    pad = (hi - lo) * 0.04 or 0.5
    bx, by = _segments([(i + 0.5, i + 0.5) for i in sorted(kept_set)], [(lo - pad, hi + pad)] * len(kept_set))
    fig.add_trace(
        go.Scatter(x=bx, y=by, mode="lines", name="boundary (after the minimum)",
                   line={"color": _BOUNDARY, "width": 1, "dash": "dot"}, hoverinfo="skip")
    )

    # θ bars: only where the shape is a minimum (a positive drop), or where a cut happens.
    shown = [c for c in candidates if (c.drop > 0 or c.index in kept_set) and math.isfinite(values[c.index])]
    width = 0.28
    for is_kept, color, name in ((False, _MUTED, "θ above a minimum (kept off)"), (True, _BOUNDARY, "θ above a boundary")):
        sel = [c for c in shown if (c.index in kept_set) == is_kept]
        xs, ys = [], []
        for c in sel:
            v = float(values[c.index])
            xs += [(c.index, c.index), (c.index - width, c.index + width)]
            ys += [(v, v + theta), (v + theta, v + theta)]
        sx, sy = _segments(xs, ys)
        fig.add_trace(go.Scatter(x=sx, y=sy, mode="lines", name=name, line={"color": color, "width": 2},
                                 opacity=0.55 if not is_kept else 0.9, hoverinfo="skip"))

    custom = [[_preview(s.text), s.tokens] for s in scores.sentences]
    fig.add_trace(
        go.Scatter(
            x=x, y=y, mode="lines+markers", name=value_name, line={"color": _LINE, "width": 1.5},
            marker={"size": 4}, customdata=custom, connectgaps=False,
            hovertemplate=f"sentence %{{x}} · {value_name} %{{y:.3f}} · %{{customdata[1]}} tokens"
            "<br>%{customdata[0]}<extra></extra>",
        )
    )
    op = "≥" if rule == "reference" else ">"
    for is_kept in (False, True):
        sel = [c for c in shown if (c.index in kept_set) == is_kept]
        fig.add_trace(
            go.Scatter(
                x=[c.index for c in sel],
                y=[float(values[c.index]) for c in sel],
                mode="markers",
                name="boundary minimum" if is_kept else "minimum, drop below θ",
                marker=(
                    {"symbol": "triangle-down", "size": 10, "color": _BOUNDARY}
                    if is_kept
                    else {"symbol": "circle-open", "size": 8, "color": _MUTED, "line": {"width": 1.5}}
                ),
                customdata=[c.drop for c in sel],
                hovertemplate=(
                    f"sentence %{{x}} ends a chunk<br>drop %{{customdata:.3f}} {op} θ = {theta:g}<extra></extra>"
                    if is_kept
                    else f"sentence %{{x}}: a minimum<br>drop %{{customdata:.3f}}, not {op} θ = {theta:g}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        height=340,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "sentence"}, "range": [-0.5, max(n - 0.5, 0.5)]},
        yaxis={"title": {"text": value_name}, "range": [lo - pad, hi + pad]},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "font": {"size": 11}},
        hovermode="closest",
        uirevision=revision,
    )
    return fig


def drops_histogram(candidates: Sequence[Candidate], theta: float, rule: str) -> go.Figure:
    """Histogram of the candidates' drops, boundaries (drop ≥ θ, or > θ) in red, the others grey, θ as a line."""
    drops = np.array([c.drop for c in candidates if math.isfinite(c.drop)], dtype=np.float64)
    kept = drops >= theta if rule == "reference" else drops > theta
    lo, hi = (float(drops.min()), float(drops.max())) if drops.size else (0.0, 1.0)
    size = max((hi - lo) / 40, 1e-9) if hi > lo else 1.0
    bins = {"start": lo - size / 2, "end": hi + size, "size": size}
    fig = go.Figure()
    for mask, color, name in ((~kept, _MUTED, "no cut"), (kept, _BOUNDARY, "boundary")):
        fig.add_trace(
            go.Histogram(x=drops[mask], xbins=bins, name=name, marker={"color": color}, opacity=0.85,
                         hovertemplate="drop %{x}<br>%{y} sentences<extra>" + name + "</extra>")
        )
    fig.add_vline(x=theta, line={"color": "#111827", "width": 2, "dash": "dash"},
                  annotation_text=f"θ = {theta:g}", annotation_position="top right")
    fig.update_layout(
        barmode="stack", height=260, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "drop at a candidate sentence"}}, yaxis={"title": {"text": "sentences"}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


def chunk_curve(thresholds: np.ndarray, counts: np.ndarray, mean_tokens: np.ndarray, theta: float, unit: str) -> go.Figure:
    """θ → chunk count (left axis) and mean chunk length (right axis), with the current θ; points are clickable."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=thresholds, y=counts, name="chunks", mode="lines+markers", line={"color": _LINE, "shape": "hv"},
            marker={"size": 3}, customdata=mean_tokens,
            hovertemplate="θ = %{x:.4g}<br>%{y} chunks · ≈ %{customdata:.0f} " + unit + " each<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=thresholds, y=mean_tokens, name=f"mean chunk length ({unit}, ≈)", mode="lines", yaxis="y2",
            line={"color": "#d97706", "shape": "hv", "dash": "dot"}, hoverinfo="skip",
        )
    )
    fig.add_vline(x=theta, line={"color": "#111827", "width": 2, "dash": "dash"})
    fig.update_layout(
        height=260, margin={"l": 10, "r": 10, "t": 30, "b": 10}, clickmode="event+select",
        xaxis={"title": {"text": "θ"}},
        yaxis={"title": {"text": "chunks"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": f"{unit} per chunk"}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                "showgrid": False},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


def margin_chart(doc: Document, steps: Sequence[MarginStep]) -> go.Figure:
    """Margin per sentence (P("1") − P("2")), the adaptive threshold it was compared with, and the splits."""
    text = doc.text
    sentences = doc.sentences
    x = [s.index for s in steps]
    custom = [[_preview(text[sentences[s.index].start : sentences[s.index].end]), s.threshold] for s in steps]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=x, y=[s.threshold for s in steps], name="threshold (mean of the last 5 margins)",
                   mode="lines", line={"color": "#d97706", "shape": "hv", "dash": "dash"}, hoverinfo="skip")
    )
    fig.add_trace(
        go.Scatter(
            x=x, y=[s.margin for s in steps], name="margin", mode="lines+markers", line={"color": _LINE, "width": 1.5},
            marker={"size": 4}, customdata=custom,
            hovertemplate="sentence %{x} · margin %{y:.3f} · threshold %{customdata[1]:.3f}"
            "<br>%{customdata[0]}<extra></extra>",
        )
    )
    splits = [s for s in steps if s.split]
    fig.add_trace(
        go.Scatter(
            x=[s.index for s in splits], y=[s.margin for s in splits], name="starts a chunk", mode="markers",
            marker={"symbol": "triangle-up", "size": 10, "color": _BOUNDARY},
            hovertemplate="sentence %{x} starts a chunk (margin ≥ threshold)<extra></extra>",
        )
    )
    fig.add_hline(y=0, line={"color": "#cbd5e1", "width": 1})
    fig.update_layout(
        height=300, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "sentence"}}, yaxis={"title": {"text": 'P("1": split) − P("2": keep)'}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


# --- exports ---------------------------------------------------------------------------------------


def values_csv(
    doc: Document,
    scores: PPLScores,
    values: Sequence[float],
    candidates: Sequence[Candidate],
    kept: Sequence[int],
    chunking: Chunking,
    value_name: str,
) -> str:
    """One row per sentence: offsets, model tokens, mean NLL, PPL, the compared value, its drop, boundary, chunk, text."""
    drop = {c.index: c.drop for c in candidates}
    kept_set = set(kept)
    starts = [c.start for c in chunking.chunks]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["index", "start", "end", "tokens", "nll_mean", "ppl", value_name, "drop", "boundary", "chunk", "text"])

    def num(x: float | None) -> str:
        return "" if x is None or not math.isfinite(x) else repr(float(x))

    for s, v in zip(scores.sentences, values):
        chunk = bisect.bisect_right(starts, s.start) - 1 if starts else -1
        writer.writerow([
            s.index, s.start, s.end, s.tokens, num(s.nll_mean), num(s.ppl), num(v), num(drop.get(s.index)),
            int(s.index in kept_set), chunk if chunk >= 0 else "", doc.text[s.start : s.end],
        ])
    return buf.getvalue()


# --- widgets -----------------------------------------------------------------------------------------


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step))) if step > 0 else 3


def theta_format(step: float) -> str:
    """A printf format showing a value on a grid of ``step``."""
    return f"%.{_decimals(step)}f"


def snap(theta: float, low: float, high: float, step: float) -> float:
    """``theta`` clamped to ``[low, high]`` and rounded to the slider's grid."""
    t = min(max(theta, low), high)
    if step > 0:
        t = low + round((t - low) / step) * step
    return round(min(max(t, low), high), 12)


def _from_slider(theta_key: str, slider_key: str) -> None:
    st.session_state[theta_key] = float(st.session_state[slider_key])


def _from_number(theta_key: str, slider_key: str, bounds: tuple[float, float, float]) -> None:
    st.session_state[slider_key] = snap(float(st.session_state[theta_key]), *bounds)


def theta_controls(theta_key: str, slider_key: str, bounds: tuple[float, float, float], default: float) -> float:
    """A θ slider over this document's drops and an exact number input, kept in sync both ways; returns θ.

    The number input holds θ (any value, typed exactly); the slider shows it on its grid.
    Moving the slider writes the number; typing a number moves the slider.

    Args:
        theta_key: Session key of θ (the number input's).
        slider_key: Session key of the slider.
        bounds: ``(low, high, step)`` from :func:`backend.chunkers.meta.algorithms.suggest_thresholds`.
        default: θ before the user sets one.
    """
    low, high, step = bounds
    theta = float(st.session_state.setdefault(theta_key, float(default)))
    on_grid = snap(theta, low, high, step)
    if st.session_state.get(slider_key) != on_grid:
        st.session_state[slider_key] = on_grid  # before the slider exists in this run: allowed
    left, right = st.columns([5, 1], vertical_alignment="bottom")
    left.slider(
        "Threshold θ",
        min_value=low,
        max_value=high,
        step=step,
        format=theta_format(step),
        key=slider_key,
        on_change=_from_slider,
        args=(theta_key, slider_key),
        help=f"From {low:g} to {high:g} (just past this document's largest drop: no boundary at all), "
        f"in steps of {step:g}. Larger θ, fewer and longer chunks.",
    )
    right.number_input(
        "θ (exact)",
        step=step,
        format=f"%.{_decimals(step) + 2}f",
        key=theta_key,
        on_change=_from_number,
        args=(theta_key, slider_key, bounds),
        help="Type any value: the chunks follow it exactly; the slider shows the nearest step.",
    )
    return float(st.session_state[theta_key])


def chunk_stats(chunking: Chunking, target: int = 0) -> str:
    """``12 chunks · mean 84.3 tokens · max 160`` (plus how many stand alone over the target)."""
    counts = chunking.token_counts
    if not counts:
        return "no chunks"
    line = (
        f"**{len(counts):,}** chunk{'s' if len(counts) != 1 else ''} · mean **{sum(counts) / len(counts):,.1f}** tokens"
        f" · max **{max(counts):,}** · {chunking.config.tokenizer} tokens"
    )
    if target:
        over = sum(1 for n in counts if n > target)
        if over:
            line += f" · {over} meta-chunk{'s' if over != 1 else ''} over {target:,} stand alone"
    return line


def document_view(doc: Document, chunking: Chunking, page_key: str, view_key: str, height: int = 520) -> None:
    """The document with the chunks coloured and each chunk start badged, a window of text at a time."""
    text = doc.text
    n_pages = max(1, -(-len(text) // WINDOW_CHARS))
    if st.session_state.get(page_key, 1) > n_pages:
        st.session_state[page_key] = n_pages
    page = 1
    if n_pages > 1:
        page = st.pagination(n_pages, key=page_key, max_visible_pages=9)
    start = (page - 1) * WINDOW_CHARS
    end = min(start + WINDOW_CHARS, len(text))
    st.html(legend_html())
    with st.container(height=height, border=True, key=view_key):
        st.html(window_html(text, chunking.chunks, start, end, index=ChunkIndex.build(chunking.chunks)))
    if n_pages > 1:
        st.caption(f"Characters {start:,}–{end:,} of {len(text):,} (page {page} of {n_pages})")


def export_buttons(stem: str, values_data: Any, chunking: Chunking, prefix: str) -> None:
    """Download buttons: per-sentence values (CSV, built on click) and the chunks (JSONL)."""
    with st.container(horizontal=True, gap="small"):
        if values_data is not None:
            st.download_button(
                "Sentence values (CSV)", values_data, file_name=f"{stem}__sentences.csv", mime="text/csv",
                key=f"{prefix}_dl_values", icon=":material/download:", on_click="ignore",
                help="index, start, end, tokens, nll_mean, ppl, the compared value, drop, boundary, chunk, text",
            )
        st.download_button(
            "Chunks (JSONL)", chunking.to_jsonl, file_name=f"{stem}.jsonl", mime="application/jsonl",
            key=f"{prefix}_dl_chunks", icon=":material/download:", on_click="ignore",
            help="One JSON object per chunk: index, start, end, text, tokens (as `python -m backend chunk` prints)",
        )
