"""The Meta-Chunking page's widgets: the θ controls, the chunk statistics line, the document view, the exports.

Everything the page computes goes through the backend — the chunks through the registered
chunkers' ``chunk_from_means`` / ``chunk_from_steps`` (the code path of ``python -m backend chunk``),
the candidates, boundaries and θ curve through :mod:`backend.chunkers.meta.algorithms`, the
per-sentence CSV through :mod:`backend.chunkers.meta.results` — and its figures are in
:mod:`backend.figures.ppl`. What is left here is Streamlit.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import streamlit as st

from backend.chunkers.meta.algorithms import boundaries_at, boundary_candidates, sentence_values
from backend.chunkers.meta.results import PPLScores
from backend.chunking import Chunking
from backend.figures.ppl import values_chart
from backend.jobs import Job
from backend.models.scoring import partial_sentence_scores
from backend.models.types import PartialTokenScores
from backend.text.document import Document
from backend.figures.text import ChunkIndex, legend_html, window_html

__all__ = [
    "REFERENCE_RULE",
    "PAPER_RULE",
    "PAPER_ADVICE",
    "theta_label",
    "theta_options",
    "theta_controls",
    "partial_curve",
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


# --- widgets -----------------------------------------------------------------------------------------


def _decimals(step: float) -> int:
    """Decimals that show every multiple of ``step``."""
    return max(0, -math.floor(math.log10(step))) if step > 0 else 3


def theta_label(theta: float) -> str:
    """θ as the slider shows it: the shortest decimal that reads back as exactly this θ (``0.5``, not ``0.48``)."""
    return repr(float(theta))


def theta_options(theta: float, low: float, high: float, step: float) -> list[float]:
    """The slider's positions: ``low`` to ``high`` every ``step``, and θ itself wherever it falls.

    θ is always a position, so the slider shows the exact θ in use (one typed between two steps,
    or outside the range, gets a position of its own).

    >>> theta_options(0.5, 0.0, 0.12, 0.04)
    [0.0, 0.04, 0.08, 0.12, 0.5]
    """
    n = math.floor((high - low) / step + 1e-9) if step > 0 else 0  # the steps that fit, up to rounding
    grid = [round(low + i * step, 12) for i in range(n + 1)]
    if grid[-1] < high:
        grid.append(high)
    if theta not in grid:
        bisect.insort(grid, float(theta))
    return grid


def _from_slider(theta_key: str, slider_key: str) -> None:
    st.session_state[theta_key] = float(st.session_state[slider_key])


def theta_controls(theta_key: str, slider_key: str, bounds: tuple[float, float, float], default: float) -> float:
    """A θ slider over this document's drops and an exact number input, kept in sync both ways; returns θ.

    The number input holds θ (any value, typed exactly). The slider's positions are the grid of
    ``bounds`` plus θ itself, so it always stands on the exact θ and shows it. Moving the slider
    writes the number. The slider's value is written here only when θ came from elsewhere (typed, a
    click on the θ curve): a value written back while the user moves it would undo key presses
    the browser has not yet sent.

    Args:
        theta_key: Session key of θ (the number input's).
        slider_key: Session key of the slider.
        bounds: ``(low, high, step)`` from :func:`backend.chunkers.meta.algorithms.suggest_thresholds`.
        default: θ before the user sets one.
    """
    low, high, step = bounds
    theta = float(st.session_state.setdefault(theta_key, float(default)))
    if st.session_state.get(slider_key) != theta:
        st.session_state[slider_key] = theta  # before the slider exists in this run: allowed
    left, right = st.columns([5, 1], vertical_alignment="bottom")
    left.select_slider(
        "Threshold θ",
        options=theta_options(theta, low, high, step),
        format_func=theta_label,
        key=slider_key,
        on_change=_from_slider,
        args=(theta_key, slider_key),
        help=f"From {low:g} to {high:g} (just past this document's largest drop: no boundary at all), "
        f"in steps of {step:g}, and the θ in use wherever it falls. Larger θ, fewer and longer chunks.",
    )
    right.number_input(
        "θ (exact)",
        step=step,
        format=f"%.{_decimals(step) + 2}f",
        key=theta_key,
        help="Type any value: the chunks follow it exactly, and the slider shows it.",
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


def partial_curve(
    doc: Document, job: Job, model: str, model_name: str, *, key: str, value: str = "nll", rule: str = "reference",
    theta: float = 0.5, value_name: str = "NLL",
) -> int | None:
    """The per-sentence curve of the sentences a running scoring job has fully scored, and a caption.

    The same figure as the finished page (:func:`~backend.figures.ppl.values_chart`) with
    fewer points: the scores arrive in order (:class:`~backend.models.types.PartialTokenScores`),
    and a sentence is drawn only once every one of its tokens is scored, so each point is final.

    Returns:
        How many sentences it drew (None: nothing published yet).
    """
    partial = job.partial
    if not isinstance(partial, PartialTokenScores) or (partial.text and partial.text != doc.text):
        return None  # nothing yet, or the scores of another text (a chunk, a query) the job scores
    sentences = partial_sentence_scores(doc, partial)
    total = len(doc.sentences)
    if sentences:
        scores = PPLScores(doc.id, model, model_name, tuple(sentences))
        values = sentence_values(scores.nll, value)
        cuts = boundaries_at(boundary_candidates(values, rule), theta, rule)
        st.plotly_chart(values_chart(scores, values, cuts, value_name, revision=f"{doc.id}:partial"), key=key)
    st.caption(
        f"Scored {len(sentences):,} of {total:,} sentences ({partial.scored:,} of {len(partial.scores):,} tokens) "
        "so far: the curve grows as the model reads on. Every point drawn is final; the chunks come once "
        "the pass ends."
    )
    return len(sentences)
