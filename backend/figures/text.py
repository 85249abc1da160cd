"""HTML views of document text and chunk spans: the side-by-side windows, the inspector, legends and badges.

Documents are untrusted input: every piece of document text goes through :func:`esc`
before it is placed in markup, and only the markup written here is left unescaped.
Rendering is always restricted to a character window, so a 1 MB document costs no more
than its visible part.
"""

from __future__ import annotations

import bisect
import html
from dataclasses import dataclass
from typing import Sequence

from backend.chunking import Chunk
from backend.figures.charts import CHUNK_EDGES  # one pair of chunk colours: figures and HTML

__all__ = [
    "CHUNK_COLORS",
    "OVERLAP_COLOR",
    "STYLE",
    "ChunkIndex",
    "esc",
    "text_html",
    "window_html",
    "chunk_detail_html",
    "inspector_html",
    "legend_html",
    "tag_badge_html",
]

# Two alternating fills tell neighbouring chunks apart; the overlap fill must differ from both.
CHUNK_COLORS = ("#dbeafe", "#fde7c2")
OVERLAP_COLOR = "#e9d5ff"
OVERLAP_EDGE = "#9333ea"
SELECTED_COLOR = "#fecdd3"  # the chunk open in the inspector (red family, like its badge and strip outline)

STYLE = f"""
<style>
.cl-doc {{
  white-space: pre-wrap; overflow-wrap: anywhere;
  font-family: "Source Serif 4", Georgia, "Noto Serif CJK SC", "Songti SC", "SimSun", serif;
  font-size: 0.95rem; line-height: 1.75; color: #1f2937; margin: 0;
}}
.cl-c0 {{ background: {CHUNK_COLORS[0]}; }}
.cl-c1 {{ background: {CHUNK_COLORS[1]}; }}
.cl-ov {{
  background: repeating-linear-gradient(-45deg, {OVERLAP_COLOR} 0 5px, #f5ecff 5px 10px);
  border-bottom: 2px dashed {OVERLAP_EDGE};
}}
.cl-gap {{ color: #9ca3af; }}
.cl-c0.cl-sel, .cl-c1.cl-sel {{ background: {SELECTED_COLOR}; }}
.cl-ov.cl-sel {{ background: repeating-linear-gradient(-45deg, {SELECTED_COLOR} 0 5px, #ffe4e6 5px 10px); }}
.cl-badge {{
  display: inline-block; font: 600 0.68rem/1.2 ui-monospace, SFMono-Regular, Menlo, monospace;
  color: #fff; background: #334155; border-radius: 0.6rem; padding: 0.05rem 0.38rem;
  margin: 0 0.2rem 0 0.1rem; vertical-align: 0.12rem; white-space: nowrap; user-select: none;
}}
.cl-badge.cl-b0 {{ background: {CHUNK_EDGES[0]}; }}
.cl-badge.cl-b1 {{ background: #b45309; }}
.cl-badge.cl-cont {{ background: #94a3b8; }}
.cl-badge.cl-selb {{ background: #dc2626; }}
.cl-page {{
  display: inline-block; font: 600 0.68rem/1.2 sans-serif; color: #475569; border: 1px solid #94a3b8;
  border-radius: 0.25rem; padding: 0 0.3rem; margin: 0 0.25rem; vertical-align: 0.12rem; user-select: none;
}}
.cl-more {{ color: #64748b; font: italic 0.8rem sans-serif; }}
.cl-legend {{ font: 0.8rem sans-serif; color: #475569; display: flex; flex-wrap: wrap; gap: 0.9rem; }}
.cl-legend span.sw {{
  display: inline-block; width: 1.6rem; height: 0.9rem; vertical-align: -0.15rem; border-radius: 2px;
  margin-right: 0.3rem;
}}
.cl-tag {{
  display: inline-block; min-width: 1.5rem; text-align: center; color: #fff; border-radius: 0.35rem;
  font: 700 0.85rem/1.5 sans-serif; padding: 0 0.35rem; margin-right: 0.4rem;
}}
.cl-block-h {{ font: 600 0.8rem sans-serif; color: #475569; margin: 0.2rem 0; }}
.cl-block {{
  max-height: 16rem; overflow-y: auto; border-left: 3px solid #cbd5e1; padding-left: 0.6rem; margin-bottom: 0.9rem;
}}
.cl-block.cl-cur {{ border-left-color: #dc2626; max-height: 24rem; }}
.cl-block.cl-dim .cl-doc {{ color: #6b7280; font-size: 0.88rem; }}
</style>
"""


def esc(text: str) -> str:
    """HTML-escape document text (``&``, ``<``, ``>`` and quotes)."""
    return html.escape(text, quote=True)


@dataclass(frozen=True)
class ChunkIndex:
    """Sorted lookup arrays over one chunking's spans, to find the chunks of a window fast."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    max_ends: tuple[int, ...]  # running maximum of ends: non-decreasing, so bisectable

    @classmethod
    def build(cls, chunks: Sequence[Chunk]) -> ChunkIndex:
        """Index ``chunks`` (ordered by start, as every :class:`Chunking` is)."""
        starts = tuple(c.start for c in chunks)
        ends = tuple(c.end for c in chunks)
        max_ends: list[int] = []
        top = 0
        for e in ends:
            top = max(top, e)
            max_ends.append(top)
        return cls(starts, ends, tuple(max_ends))

    def overlapping(self, start: int, end: int) -> list[int]:
        """Indices of the chunks that intersect ``[start, end)``, in order."""
        lo = bisect.bisect_right(self.max_ends, start)
        hi = bisect.bisect_left(self.starts, end)
        # Between lo and hi only a chunk nested in a longer earlier one can end before start.
        return [i for i in range(lo, hi) if self.ends[i] > start]


def text_html(text: str) -> str:
    """Escaped plain text in the document style."""
    return f'<div class="cl-doc">{esc(text)}</div>'


def window_html(
    text: str,
    chunks: Sequence[Chunk],
    start: int,
    end: int,
    *,
    index: ChunkIndex | None = None,
    selected: int | None = None,
    page_starts: Sequence[int] = (),
) -> str:
    """The text of ``[start, end)`` with each chunk's span coloured.

    Chunks alternate between two fills; characters inside two or more chunks (overlap)
    are striped and underlined; characters in no chunk are grey. A numbered badge marks
    each chunk start (a grey one at the window start for a chunk that began earlier).

    Args:
        text: The document text.
        chunks: The chunking's chunks, ordered by start.
        start: First character of the window.
        end: End of the window (exclusive); clipped to the text.
        index: A prebuilt :class:`ChunkIndex` of ``chunks`` (built here when omitted).
        selected: Index of a chunk to highlight (the one open in the inspector).
        page_starts: Offsets where document pages begin (PDF); each one inside the window
            gets a page marker.
    """
    end = min(end, len(text))
    start = max(0, min(start, end))
    idx = index or ChunkIndex.build(chunks)
    inside = [chunks[i] for i in idx.overlapping(start, end)]

    # Elementary segments between every chunk edge inside the window.
    cuts = {start, end}
    for c in inside:
        cuts.add(max(c.start, start))
        cuts.add(min(c.end, end))
    first_page = bisect.bisect_left(page_starts, start)
    last_page = bisect.bisect_left(page_starts, end)
    page_at = {page_starts[i]: i + 1 for i in range(first_page, last_page) if page_starts[i] > 0}
    cuts.update(page_at)
    points = sorted(cuts)
    starts_at: dict[int, list[Chunk]] = {}
    for c in inside:
        starts_at.setdefault(max(c.start, start), []).append(c)

    out: list[str] = ['<div class="cl-doc">']
    if start > 0:
        out.append('<span class="cl-more">… </span>')
    active: list[Chunk] = []
    for a, b in zip(points, points[1:]):
        active = [c for c in active if c.end > a]
        if a in page_at:
            out.append(f'<span class="cl-page">page {page_at[a]}</span>')
        for c in starts_at.get(a, ()):
            active.append(c)
            cls = "cl-cont" if c.start < start else f"cl-b{c.index % 2}"
            if c.index == selected:
                cls = "cl-selb"
            prefix = "…" if c.start < start else ""
            tip = f"chunk {c.index} · {c.tokens} tokens · chars {c.start:,}–{c.end:,}"
            out.append(f'<span class="cl-badge {cls}" title="{tip}">{prefix}{c.index}</span>')
        seg = esc(text[a:b])
        if not active:
            out.append(f'<span class="cl-gap" title="not in any chunk">{seg}</span>')
            continue
        if len(active) == 1:
            c = active[0]
            cls = f"cl-c{c.index % 2}"
            tip = f"chunk {c.index}"
        else:
            cls = "cl-ov"
            tip = "overlap: chunks " + ", ".join(str(c.index) for c in active)
        if selected is not None and any(c.index == selected for c in active):
            cls += " cl-sel"
        out.append(f'<span class="{cls}" title="{tip}">{seg}</span>')
    if end < len(text):
        out.append('<span class="cl-more"> …</span>')
    out.append("</div>")
    return "".join(out)


def chunk_detail_html(text: str, chunk: Chunk, prev: Chunk | None, nxt: Chunk | None, role: str) -> str:
    """One chunk's text for the inspector, with the parts it shares with its neighbours striped.

    Args:
        text: The document text.
        chunk: The chunk to show.
        prev: The chunk before it, if any (its overlap with ``chunk`` is marked).
        nxt: The chunk after it, if any.
        role: ``"current"``, ``"previous"`` or ``"next"``: sets the heading and the emphasis.
    """
    title = {"current": "Selected", "previous": "Previous", "next": "Next"}.get(role, role)
    head = (
        f'<div class="cl-block-h">{esc(title)} · chunk {chunk.index} · {chunk.tokens} tokens · '
        f"{chunk.end - chunk.start:,} chars · offsets {chunk.start:,}–{chunk.end:,}</div>"
    )
    marks = [chunk.start, chunk.end]
    if prev is not None and prev.end > chunk.start:
        marks.append(min(prev.end, chunk.end))
    if nxt is not None and nxt.start < chunk.end:
        marks.append(max(nxt.start, chunk.start))
    points = sorted(set(marks))
    parts = []
    for a, b in zip(points, points[1:]):
        shared = (prev is not None and a < prev.end) or (nxt is not None and b > nxt.start)
        seg = esc(text[a:b])
        parts.append(f'<span class="cl-ov" title="shared with a neighbour">{seg}</span>' if shared else seg)
    cls = "cl-block cl-cur" if role == "current" else "cl-block cl-dim"
    return f'{head}<div class="{cls}"><div class="cl-doc">{"".join(parts)}</div></div>'


def inspector_html(text: str, previous: Chunk | None, current: Chunk, following: Chunk | None) -> str:
    """The inspector: the picked chunk between its neighbours; a neighbour marks only what it shares with it."""
    parts = []
    if previous is not None:
        parts.append(chunk_detail_html(text, previous, None, current, "previous"))
    parts.append(chunk_detail_html(text, current, previous, following, "current"))
    if following is not None:
        parts.append(chunk_detail_html(text, following, current, None, "next"))
    return "".join(parts)


def legend_html(paged: bool = False) -> str:
    """A one-line key to the colours of :func:`window_html` (with the page marker when ``paged``)."""
    page = '<span><span class="cl-page">page 3</span>page break</span>' if paged else ""
    return (
        '<div class="cl-legend">'
        f'<span><span class="sw" style="background:{CHUNK_COLORS[0]}"></span>'
        f'<span class="sw" style="background:{CHUNK_COLORS[1]}"></span>chunks (alternating)</span>'
        '<span><span class="sw cl-ov"></span>overlap (in two or more chunks)</span>'
        '<span><span class="cl-gap">grey text</span>: in no chunk</span>'
        '<span><span class="cl-badge cl-b0">12</span>chunk start</span>'
        '<span><span class="cl-badge cl-cont">…12</span>continues from before this page</span>'
        f'<span><span class="sw" style="background:{SELECTED_COLOR}"></span>'
        '<span class="cl-badge cl-selb">12</span>chunk open in the inspector</span>'
        f"{page}</div>"
    )


def tag_badge_html(tag: str, color: str) -> str:
    """The coloured letter that names a configuration everywhere on the page."""
    return f'<span class="cl-tag" style="background:{esc(color)}">{esc(tag)}</span>'
