"""The retrieval lab's HTML views: the document with each configuration's retrieved spans, answer tables, runs.

Pure functions of backend results returning an HTML string: the Retrieval page puts them on the
page with ``st.html`` and the tests read them without a browser. They loop over a document's
stretches, spans and returned entries, so they live here, not in a component.

- :func:`highlight_html` and :func:`layers_legend_html`: the stretches of the document around
  what each configuration retrieved (one :class:`Layer` each, :func:`answer_layer`) and the marked
  answer, with a key;
- :func:`answer_html`: a live answer's top-k table (a chunking's chunks or a retriever's picks:
  the answer says its columns, :class:`~backend.retrieval.retriever.base.AnswerTable`);
- :func:`runs_html`: FreeChunker's assembled runs in the document, the text between them announced by its length.

Document text is untrusted: every piece of it goes through :func:`backend.figures.text.esc` before
it reaches markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from backend.figures.text import esc
from backend.retrieval.metrics import union_ranges
from backend.retrieval.multi.select import Pick
from backend.retrieval.retriever.base import Answer, AnswerTable

__all__ = [
    "RET_STYLE",
    "Layer",
    "answer_layer",
    "highlight_html",
    "layers_legend_html",
    "ANSWER_TEXT_CHARS",
    "answer_html",
    "RUNS_MAX_CHARS",
    "runs_html",
]

ANSWER_TEXT_CHARS = 300  # characters of each returned entry shown in its table, over all its stretches, wrapped
RUNS_MAX_CHARS = 30_000

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


def _flat(text: str, n: int) -> str:
    """Text on one line, shortened to ``n`` characters."""
    flat = " ".join(text[: n * 2].split())
    return flat if len(flat) <= n else flat[: max(n - 1, 0)] + "…"


@dataclass(frozen=True)
class Layer:
    """One configuration's retrieved spans for the document view: ``spans`` are ``(start, end, rank)``."""

    tag: str
    color: str
    spans: tuple[tuple[int, int, int], ...]


def answer_layer(tag: str, color: str, answer: Answer) -> Layer:
    """An answer as a layer of the document view: an entry of several stretches is several spans of one rank."""
    return Layer(tag, color, tuple((s, e, rank) for rank, ranges in answer.retrieved() for s, e in ranges))


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


def answer_html(table: AnswerTable, text: str) -> str:
    """A live answer's top k as an HTML table: rank, its text wrapped (stretches joined by "…"), then its numbers.

    HTML rather than a data grid because a grid cell shows one line: in a column of the
    side-by-side layout the chunk text, the thing to compare, was cut off after a few words.
    Each entry shows at most :data:`ANSWER_TEXT_CHARS` characters (whitespace collapsed),
    shared among its stretches; the numbers sit in a narrow column on the right, one per line.
    Document text is escaped.
    """
    rows = []
    for row in table.rows:
        share = max(ANSWER_TEXT_CHARS // len(row.ranges), 40)
        shown = ' <span class="cl-gap">…</span> '.join(esc(_flat(text[s:e], share)) for s, e in row.ranges)
        numbers = "<br>".join(esc(n) for n in row.numbers)
        rows.append(f'<tr><td class="rk">{row.rank}</td><td class="tx">{shown}</td><td class="nm">{numbers}</td></tr>')
    if not rows and table.empty:
        rows.append(f'<tr><td class="rk"></td><td class="tx cl-gap">{esc(table.empty)}</td><td></td></tr>')
    return (
        f'<table class="{esc(table.css)}"><thead><tr><th>#</th><th>{esc(table.heading)}</th>'
        f'<th title="{esc(table.numbers_title)}">{esc(table.numbers_heading)}</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def runs_html(text: str, picks: Sequence[Pick], color: str, *, max_chars: int = RUNS_MAX_CHARS) -> str:
    """The picks' stretches in document order, highlighted with their rank, the text between them as "… n characters …".

    Args:
        text: The document text (escaped here).
        picks: FreeChunker's runs (or any picks).
        color: The configuration's colour.
        max_chars: Cap on the characters shown.
    """
    stretches = sorted((s, e, rank) for rank, p in enumerate(picks, 1) for s, e in p.ranges)
    if not stretches:
        return '<div class="rt-doc"><span class="cl-gap">Nothing retrieved.</span></div>'
    out = ['<div class="rt-doc">']
    pos, budget = 0, max_chars
    for s, e, rank in stretches:
        if s > pos:
            out.append(f'<div class="cl-gap">… {s - pos:,} characters …</div>')
        if budget <= 0:
            out.append('<div class="cl-more">… more runs not shown</div>')
            pos = len(text)
            break
        shown = min(e, s + budget)
        budget -= shown - s
        out.append(
            f'<div><span class="rt-rank" style="background:{esc(color)}" title="rank {rank}">#{rank}</span>'
            f'<span style="background:{esc(color)}33">{esc(text[max(s, pos):shown])}</span>'
            + ('<span class="cl-more"> …</span>' if shown < e else "") + "</div>"
        )
        pos = max(pos, e)
    if pos < len(text):
        out.append(f'<div class="cl-gap">… {len(text) - pos:,} characters …</div>')
    out.append("</div>")
    return "".join(out)
