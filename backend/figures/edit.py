"""The Edit page's figures: one window of text with its cuts as clickable HTML, and the perplexity curve beside it.

:func:`edit_text_html` writes the markup the Edit page's click component shows (the component
sets it as the inner HTML of its own element, so it is the only place the text meets markup):
every piece of document text goes through :func:`html.escape`, and the attributes the
component reads back (``data-act``, ``data-o``, ``data-step``) are integers or fixed words
written here. Only the window is drawn (a page of about 6k characters), never the document.

:func:`edit_curve` draws the per-sentence values of the same window with the cuts as
vertical lines, the perplexity minima as hints and, when known, the Boundary Clarity of each
cut. Sentence text reaches a hover label only through :func:`backend.figures.charts.preview`.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from backend.figures.charts import preview
from backend.figures.text import CHUNK_COLORS
from backend.figures.traces import boundary_segments, finite

__all__ = ["CUT_KINDS", "EDIT_CSS", "CutMark", "CurvePoint", "edit_text_html", "edit_curve"]

CUT_KINDS = ("base", "added", "removed")  # a base cut kept, a cut the user added, a base cut the user removed
_KIND_COLORS = {"base": "#334155", "added": "#16a34a", "removed": "#dc2626"}
_MINIMUM = "#7c3aed"
_LINE = "#2563eb"

# The component's own style (it lives in the component's shadow root, so these names cannot clash).
EDIT_CSS = f"""
.ed-root {{
  white-space: pre-wrap; overflow-wrap: anywhere; overflow-y: auto; max-height: 560px;
  font-family: "Source Serif 4", Georgia, "Noto Serif CJK SC", "Songti SC", "SimSun", serif;
  font-size: 0.95rem; line-height: 1.9; color: #1f2937; padding: 0.4rem 0.6rem;
  border: 1px solid #e5e7eb; border-radius: 0.5rem;
}}
.ed-root .s {{ cursor: pointer; border-radius: 2px; }}
.ed-root .s:hover {{ outline: 1px dashed #64748b; }}
.ed-root .c0 {{ background: {CHUNK_COLORS[0]}; }}
.ed-root .c1 {{ background: {CHUNK_COLORS[1]}; }}
.ed-root .gap {{
  display: inline-block; width: 0.7rem; height: 1.2em; vertical-align: -0.25em; cursor: copy;
  border-radius: 3px; margin: 0 1px;
}}
.ed-root .gap:hover {{ background: #bbf7d0; box-shadow: inset 0 0 0 1px #16a34a; }}
.ed-root .gap:hover::after {{
  content: "+ cut before sentence " attr(data-n); position: absolute; margin: -1.6em 0 0 0.3rem;
  font: 600 0.72rem/1.4 sans-serif; color: #166534; background: #f0fdf4; border: 1px solid #86efac;
  border-radius: 3px; padding: 0 0.3rem; white-space: nowrap; pointer-events: none;
}}
.ed-root .cut {{
  display: inline-block; min-width: 0.6rem; height: 1.35em; vertical-align: -0.3em; cursor: pointer;
  border-left: 3px solid {_KIND_COLORS["base"]}; margin: 0 2px; padding: 0 0.1rem; user-select: none;
  font: 600 0.7rem/1.35em sans-serif; color: #fff;
}}
.ed-root .cut:hover {{ background: #fee2e2; }}
.ed-root .cut.added {{ border-left-color: {_KIND_COLORS["added"]}; }}
.ed-root .cut.removed {{
  border-left: 3px dashed {_KIND_COLORS["removed"]}; opacity: 0.55; cursor: default; pointer-events: none;
}}
.ed-root .cut.sel {{ background: #fef3c7; box-shadow: 0 0 0 1px #d97706; }}
.ed-root .cut .mv {{
  display: inline-block; background: #d97706; color: #fff; border-radius: 3px; padding: 0 0.2rem; margin: 0 1px;
  cursor: pointer; pointer-events: auto;
}}
.ed-root .cut .bc {{ color: #475569; font-weight: 500; }}
.ed-root .min {{
  display: inline-block; width: 0; height: 1.3em; vertical-align: -0.3em;
  border-left: 2px dotted {_MINIMUM}; margin: 0 1px; pointer-events: none;
}}
.ed-legend {{ font: 0.8rem sans-serif; color: #475569; display: flex; flex-wrap: wrap; gap: 0.9rem; margin: 0.2rem 0; }}
.ed-legend i {{ display: inline-block; width: 0; height: 0.9rem; vertical-align: -0.15rem; margin-right: 0.3rem; }}
"""


@dataclass(frozen=True)
class CutMark:
    """One cut drawn in the window.

    Attributes:
        offset: The character it falls at (the start of the chunk after it).
        sentence: The 1-based number of the sentence it falls in or before.
        kind: ``base`` (a base cut kept), ``added`` or ``removed`` (a base cut the edits removed: a ghost).
        bc: The Boundary Clarity of this boundary when known, else None.
    """

    offset: int
    sentence: int
    kind: str
    bc: float | None = None

    @property
    def title(self) -> str:
        """The marker's tooltip: what it is and what a click does."""
        what = {"base": "Cut of the base", "added": "Cut you added", "removed": "Base cut you removed"}[self.kind]
        bc = f" · BC {self.bc:.3f}" if self.bc is not None else ""
        tail = "" if self.kind == "removed" else " — click to remove"
        return f"{what} at character {self.offset:,} (sentence {self.sentence:,}){bc}{tail}"


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def edit_text_html(
    text: str,
    start: int,
    end: int,
    sentence_starts: Sequence[int],
    chunk_starts: Sequence[int],
    marks: Sequence[CutMark],
    minima: Sequence[int] = (),
    selected: int | None = None,
) -> str:
    """The window ``text[start:end]`` as the Edit page's clickable text.

    Each sentence piece is a ``span.s`` whose ``data-o`` is its sentence's start (a click: a cut
    before its sentence); before every sentence start that is not a cut, a thin ``i.gap`` (a click
    adds a cut there; ``data-n`` is the sentence's number). An element with a ``data-o`` and no
    ``data-act`` toggles a cut at ``data-o``;
    every cut a ``span.cut`` (``data-act="remove"``; a removed base cut is a struck ghost), the
    ``selected`` one with ◀ ▶ (``data-act="move"``, ``data-step`` -1 or 1); a perplexity minimum
    (a cut the PPL chunker could make) a dotted ``span.min``. Chunk backgrounds alternate with the
    edited chunks (``chunk_starts``: every chunk start of the document, in order).

    Args:
        text: The document text.
        start: The window's first character.
        end: The window's end (exclusive).
        sentence_starts: The starts of every sentence of the document, in order.
        chunk_starts: The edited chunks' starts, in order.
        marks: The cuts inside ``[start, end)`` (base, added, removed).
        minima: Offsets inside the window where a perplexity minimum would put a cut.
        selected: The cut with move buttons, if any.
    """
    lo = bisect.bisect_left(sentence_starts, start)
    hi = bisect.bisect_left(sentence_starts, end)
    window_starts = list(sentence_starts[lo:hi])
    live = {m.offset for m in marks if m.kind != "removed"}
    by_offset: dict[int, list[CutMark]] = {}
    for m in marks:
        by_offset.setdefault(m.offset, []).append(m)
    hints = set(minima)
    points = sorted({start, end, *window_starts, *by_offset, *(p for p in hints if start <= p < end),
                     *(c for c in chunk_starts[bisect.bisect_left(chunk_starts, start):bisect.bisect_left(chunk_starts, end)])})
    sentence_set = set(window_starts)
    out = ['<div class="ed-root">']
    for a, b in zip(points, points[1:]):
        if a in hints:
            out.append(f'<span class="min" title="Perplexity minimum: the PPL chunker could cut here (character {a:,})"></span>')
        for m in by_offset.get(a, ()):
            out.append(_cut_html(m, selected))
        if a in sentence_set and a not in live and a > 0:
            n = bisect.bisect_right(sentence_starts, a)
            out.append(f'<i class="gap" data-o="{a}" data-n="{n}"></i>')
        k = bisect.bisect_right(sentence_starts, a) - 1
        owner = sentence_starts[k] if k >= 0 else 0
        parity = max(bisect.bisect_right(chunk_starts, a) - 1, 0) % 2
        out.append(
            f'<span class="s c{parity}" data-o="{owner}">{html.escape(text[a:b], quote=True)}</span>'
        )
    out.append("</div>")
    return "".join(out)


def _cut_html(mark: CutMark, selected: int | None) -> str:
    """One cut marker; the selected one carries the move buttons."""
    if mark.kind == "removed":
        return f'<span class="cut removed" title="{_attr(mark.title)}"></span>'
    sel = mark.offset == selected
    inner = ""
    if mark.bc is not None:
        inner = f'<span class="bc">{mark.bc:.2f}</span>'
    if sel:
        inner = (
            f'<span class="mv" data-act="move" data-o="{mark.offset}" data-step="-1" title="Move this cut one '
            f'sentence back">◀</span>{inner}<span class="mv" data-act="move" data-o="{mark.offset}" data-step="1" '
            f'title="Move this cut one sentence forward">▶</span>'
        )
    return (
        f'<span class="cut {mark.kind}{" sel" if sel else ""}" data-act="remove" data-o="{mark.offset}" '
        f'title="{_attr(mark.title)}">{inner}</span>'
    )


@dataclass(frozen=True)
class CurvePoint:
    """One sentence on the curve: its number, where it starts, its value (None: no scored token), its text."""

    sentence: int
    start: int
    value: float | None
    text: str


def edit_curve(
    points: Sequence[CurvePoint],
    marks: Sequence[CutMark],
    minima: Sequence[int],
    value_name: str,
    revision: str = "",
) -> go.Figure:
    """The window's per-sentence values with its cuts, the perplexity minima and the BC of each cut.

    x is the sentence number; a cut before sentence n is a vertical line at n - 0.5 (green: added,
    grey: the base's, dashed red: a base cut removed). A click on a point (its ``customdata[0]`` is
    the sentence's start) asks for a cut before that sentence. ``minima`` are sentence numbers at
    a local minimum of the values (the PPL chunker's candidates: it would cut after them); when a
    cut has a known BC it is a diamond on a second axis.

    Args:
        points: The window's sentences, in order.
        marks: The window's cuts.
        minima: Sentence numbers (in the window) at a perplexity minimum.
        value_name: The value's axis title.
        revision: Keeps the user's zoom while it stays the same.
    """
    fig = go.Figure()
    ys = finite([p.value if p.value is not None else float("nan") for p in points])
    known = [v for v in ys if v is not None]
    lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
    pad = (hi - lo) * 0.06 or 0.5
    for kind, name, dash in (("base", "cut of the base", "solid"), ("added", "cut added", "solid"),
                             ("removed", "base cut removed", "dash")):
        xs = [m.sentence - 0.5 for m in marks if m.kind == kind]
        if not xs:
            continue
        bx, by = boundary_segments(xs, lo - pad, hi + pad)
        fig.add_trace(go.Scatter(x=bx, y=by, mode="lines", name=name, hoverinfo="skip",
                                 line={"color": _KIND_COLORS[kind], "width": 1.5, "dash": dash}))
    fig.add_trace(
        go.Scatter(
            x=[p.sentence for p in points], y=ys, mode="lines+markers", name=value_name,
            line={"color": _LINE, "width": 1.5}, marker={"size": 7}, connectgaps=False,
            customdata=[[p.start, preview(p.text)] for p in points],
            hovertemplate=f"sentence %{{x}} · {value_name} %{{y:.3f}}<br>%{{customdata[1]}}"
            "<br>click: a cut before this sentence<extra></extra>",
        )
    )
    at = {p.sentence: p for p in points}
    shown = [n for n in minima if n in at and at[n].value is not None]
    if shown:
        fig.add_trace(
            go.Scatter(
                x=shown, y=[at[n].value for n in shown], mode="markers", name="perplexity minimum",
                marker={"symbol": "circle-open", "size": 12, "color": _MINIMUM, "line": {"width": 2}},
                customdata=[[at[n].start, preview(at[n].text)] for n in shown],
                hovertemplate="sentence %{x}: a minimum — the PPL chunker could cut after it<extra></extra>",
            )
        )
    scored = [m for m in marks if m.bc is not None and m.kind != "removed"]
    if scored:
        fig.add_trace(
            go.Scatter(
                x=[m.sentence - 0.5 for m in scored], y=[m.bc for m in scored], mode="markers", name="BC of the cut",
                yaxis="y2", marker={"symbol": "diamond", "size": 9, "color": "#0f766e"},
                hovertemplate="cut before sentence %{x:.0f}<br>BC %{y:.3f}<extra></extra>",
            )
        )
    first = points[0].sentence if points else 1
    last = points[-1].sentence if points else 1
    fig.update_layout(
        height=330,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "sentence"}, "range": [first - 0.6, last + 0.6]},
        yaxis={"title": {"text": value_name}, "range": [lo - pad, hi + pad]},
        yaxis2={"title": {"text": "BC"}, "overlaying": "y", "side": "right", "showgrid": False,
                "visible": bool(scored)},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "font": {"size": 11}},
        hovermode="closest",
        clickmode="event+select",
        uirevision=revision,
    )
    return fig
