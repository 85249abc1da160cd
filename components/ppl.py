"""The Meta-Chunking page's widgets: the θ controls, the statistics line, the document view, the exports.

Everything the page shows is computed by :mod:`backend.lab.ppl` in one call (the chunker the
settings choose, its cut, θ's range and curve, the per-sentence CSV) and drawn by
:mod:`backend.figures.ppl`; what is left here is Streamlit.
"""

from __future__ import annotations

import bisect
import math
from typing import Callable

import streamlit as st

from backend.chunking import Chunking
from backend.figures.ppl import values_chart
from backend.figures.text import ChunkIndex, legend_html, window_html
from backend.jobs import Job
from backend.lab.ppl import ChunkStats, PPLSettings, ThresholdRange, partial_view
from backend.text.document import Document
from components.settings import prepare, put, spec

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


def _from_slider(slider_key: str) -> None:
    put("ppl", "threshold", float(st.session_state[slider_key]))


def theta_controls(slider_key: str, slider: ThresholdRange, threshold: float) -> float:
    """A θ slider over this document's drops and an exact number input, kept in sync both ways; returns θ.

    θ lives in the session's setting ``ppl.threshold`` (the number input's key, kept across
    pages): a session with no θ yet gets ``threshold``, the θ the view used (the chosen
    chunker's default), so what the input shows is what the chunks were cut at. The slider's
    positions are the grid of ``slider`` plus θ itself, so it always stands on the exact θ and
    shows it. Moving the slider writes θ. The slider's value is written here only when θ came
    from elsewhere (typed, a click on the θ curve): a value written back while the user moves
    it would undo key presses the browser has not yet sent.

    Args:
        slider_key: Session key of the slider (a view of θ, not a setting).
        slider: θ's range and step for this document (:attr:`backend.lab.ppl.PPLView.slider`).
        threshold: The θ the view used.
    """
    key = prepare("ppl", "threshold")
    if st.session_state.get(key) is None:
        st.session_state[key] = float(threshold)  # before the number input exists in this run: allowed
    theta = float(st.session_state[key])
    if st.session_state.get(slider_key) != theta:
        st.session_state[slider_key] = theta
    low, high, step = slider.low, slider.high, slider.step
    left, right = st.columns([5, 1], vertical_alignment="bottom")
    left.select_slider(
        "Threshold θ",
        options=theta_options(theta, low, high, step),
        format_func=theta_label,
        key=slider_key,
        on_change=_from_slider,
        args=(slider_key,),
        help=f"{spec('ppl', 'threshold').help} From {low:g} to {high:g} (just past this document's largest drop: "
        f"no boundary at all), in steps of {step:g}, and the θ in use wherever it falls.",
    )
    right.number_input(
        "θ (exact)",
        step=step,
        format=f"%.{_decimals(step) + 2}f",
        key=key,
        persist_state="session",
        help="Type any value: the chunks follow it exactly, and the slider shows it.",
    )
    return float(st.session_state[key])


def chunk_stats(stats: ChunkStats) -> str:
    """``12 chunks · mean 84.3 tokens · max 160`` (plus how many stand alone over the target)."""
    if not stats.chunks:
        return "no chunks"
    line = (
        f"**{stats.chunks:,}** chunk{'s' if stats.chunks != 1 else ''} · mean **{stats.mean_tokens:,.1f}** tokens"
        f" · max **{stats.max_tokens:,}** · {stats.tokenizer} tokens"
    )
    if stats.over_target:
        n = stats.over_target
        line += f" · {n} meta-chunk{'s' if n != 1 else ''} over {stats.target_length:,} stand alone"
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


def export_buttons(stem: str, values_data: Callable[[], str] | None, chunking: Chunking, prefix: str) -> None:
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
    doc: Document, job: Job, model: str, model_name: str, *, key: str, settings: PPLSettings | None = None
) -> int | None:
    """The per-sentence curve of the sentences a running scoring job has fully scored, and a caption.

    The same figure as the finished page (:func:`~backend.figures.ppl.values_chart`) with
    fewer points (:func:`backend.lab.ppl.partial_view`): a sentence is drawn only once every
    one of its tokens is scored, so each point is final.

    Args:
        doc: The document being scored.
        job: The scoring job.
        model: The model's identity.
        model_name: Its display name.
        key: The chart's widget key.
        settings: The value, rule and θ to draw with (None: the ``ppl`` chunker's defaults).

    Returns:
        How many sentences it drew (None: nothing published yet).
    """
    view = partial_view(doc, job.partial, model, model_name, settings or PPLSettings())
    if view is None:
        return None
    if view.sentences:
        st.plotly_chart(
            values_chart(view.scores, view.values, view.boundaries, view.value_name, revision=f"{doc.id}:partial"),
            key=key,
        )
    st.caption(
        f"Scored {view.sentences:,} of {view.total_sentences:,} sentences ({view.tokens_scored:,} of "
        f"{view.total_tokens:,} tokens) so far: the curve grows as the model reads on. Every point drawn is final; "
        "the chunks come once the pass ends."
    )
    return view.sentences
