"""The Compare page's work: each configuration's chunking (or why there is none), the statistics table, the
window of text shown side by side, a click on the boundary strip, and the chunk inspector.

Every page that lists the session's configurations chunks them through :func:`chunk_entries`,
so they agree on what a configuration waiting for a model run, or failing, looks like. How
one configuration is chunked is the caller's (the app passes its cached lookups; the CLI
``run_chunker``), so this module keeps no cache of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import plotly.graph_objects as go

from backend.chunkers.run import ChunkFn, chunk_all, needs_model
from backend.chunking import Chunk, Chunking, ConfigEntry
from backend.figures.charts import boundary_strip, config_color, size_histogram
from backend.figures.text import ChunkIndex, legend_html, window_html
from backend.metrics.stats import chunking_stats
from backend.text.document import Document

__all__ = [
    "WINDOW_CHOICES",
    "DEFAULT_WINDOW",
    "Column",
    "chunk_entries",
    "ready",
    "pending",
    "needs_models",
    "stats_rows",
    "TextWindow",
    "window_count",
    "text_window",
    "Focus",
    "focus_on",
    "Neighbours",
    "neighbours",
    "CompareView",
    "compare_view",
]

WINDOW_CHOICES = (5_000, 10_000, 15_000, 20_000, 30_000)  # characters per page of the side-by-side view
DEFAULT_WINDOW = 15_000


@dataclass(frozen=True)
class Column:
    """One configuration on a page: its entry and its chunking, or why there is none yet.

    Attributes:
        entry: The session's configuration.
        chunking: Its chunking, when done.
        error: The one-line reason it failed, else None.
        pending: Whether it waits for a model run that is not in the output cache.
    """

    entry: ConfigEntry
    chunking: Chunking | None = None
    error: str | None = None
    pending: bool = False


def chunk_entries(doc: Document, entries: Sequence[ConfigEntry], chunk: ChunkFn, with_model: ChunkFn) -> list[Column]:
    """Chunk ``doc`` with every entry, in order (:func:`backend.chunkers.run.chunk_all`), one :class:`Column` each.

    Args:
        doc: The document.
        entries: The session's configurations.
        chunk: How a configuration that needs no model is chunked.
        with_model: How a model-backed one is chunked without a model call (the page's model
            runs, else the output cache; raises ``NotCached`` when it must run).
    """
    outcomes = chunk_all(doc, [e.config for e in entries], chunk, with_model=with_model)
    return [Column(e, o.chunking, o.error, o.state == "pending") for e, o in zip(entries, outcomes)]


def ready(columns: Sequence[Column]) -> list[tuple[ConfigEntry, Chunking]]:
    """The columns that have their chunking, as ``(entry, chunking)``."""
    return [(c.entry, c.chunking) for c in columns if c.chunking is not None]


def pending(columns: Sequence[Column]) -> list[ConfigEntry]:
    """The entries waiting for a model run."""
    return [c.entry for c in columns if c.pending]


def needs_models(entries: Sequence[ConfigEntry]) -> bool:
    """Whether any entry's chunker runs a model (then the page needs the session's models)."""
    return any(needs_model(e.config) for e in entries)


def stats_rows(doc_length: int, chunkings: Sequence[Chunking]) -> list[dict[str, Any]]:
    """The Compare page's table: :func:`~backend.metrics.stats.chunking_stats` per chunking, with the overlap in %.

    ``overlap_pct`` is the share of the document's characters inside two or more chunks; the
    full label and the raw overlap count are left out (the cards and the CLI's ``compare`` show them).
    """
    rows = []
    for row in chunking_stats(chunkings):
        row = dict(row)
        row["overlap_pct"] = row.pop("overlap_chars") / max(doc_length, 1) * 100
        row.pop("configuration")
        rows.append(row)
    return rows


@dataclass(frozen=True)
class TextWindow:
    """The part of the text shown side by side.

    Attributes:
        page: Which window (1-based).
        pages: How many windows the text has.
        start: Its first character.
        end: Its end (exclusive).
        page_starts: Where the document's own pages (PDF) begin, when it has several; else empty.
        doc_pages: The document pages the window spans (first, last), or None for a one-page document.
    """

    page: int
    pages: int
    start: int
    end: int
    page_starts: tuple[int, ...]
    doc_pages: tuple[int, int] | None

    def caption(self, doc_length: int) -> str:
        """``Characters 0–15,000 of 40,210 (page 1 of 3) · document page 1–4``."""
        note = ""
        if self.doc_pages is not None:
            first, last = self.doc_pages
            note = f" · document page {first}" + (f"–{last}" if last != first else "")
        return f"Characters {self.start:,}–{self.end:,} of {doc_length:,} (page {self.page} of {self.pages}){note}"


def window_count(doc: Document, window: int) -> int:
    """How many windows of ``window`` characters the text has (at least one)."""
    return max(1, -(-len(doc.text) // window))


def text_window(doc: Document, window: int, page: int) -> TextWindow:
    """Window ``page`` (1-based, clipped to the text) of ``window`` characters."""
    pages = window_count(doc, window)
    page = min(max(1, page), pages)
    start = (page - 1) * window
    end = min(start + window, len(doc.text))
    page_starts = tuple(p.start for p in doc.pages) if len(doc.pages) > 1 else ()
    doc_pages = (doc.page_of(start), doc.page_of(max(start, end - 1))) if page_starts else None
    return TextWindow(page, pages, start, end, page_starts, doc_pages)


@dataclass(frozen=True)
class Focus:
    """Where a click on the boundary strip takes the page: a chunk per configuration, and a window."""

    selected: dict[int, int]  # entry uid → chunk index
    page: int


def focus_on(columns: Sequence[Column], tag: str, index: int, window: int) -> Focus | None:
    """The clicked chunk (``tag``'s chunk ``index``), the chunks at the same offset in the other rows, its window.

    None when the clicked chunk no longer exists (the configuration changed since the click).
    """
    done = ready(columns)
    clicked = next((ch for e, ch in done if e.tag == tag), None)
    if clicked is None or not 0 <= index < len(clicked.chunks):
        return None
    offset = clicked.chunks[index].start
    selected = {}
    for entry, chunking in done:
        hit = chunking.chunks[index] if chunking is clicked else chunking.chunk_at(offset)
        if hit is not None:
            selected[entry.uid] = hit.index
    return Focus(selected, offset // window + 1)


@dataclass(frozen=True)
class Neighbours:
    """The inspector's chunk and the ones before and after it."""

    previous: Chunk | None
    current: Chunk
    next: Chunk | None


def neighbours(chunking: Chunking, index: int) -> Neighbours | None:
    """Chunk ``index`` (clipped to the chunking) with its neighbours; None for a chunking with no chunks."""
    chunks = chunking.chunks
    if not chunks:
        return None
    i = min(max(0, index), len(chunks) - 1)
    return Neighbours(chunks[i - 1] if i > 0 else None, chunks[i], chunks[i + 1] if i + 1 < len(chunks) else None)


@dataclass(frozen=True)
class CompareView:
    """What the Compare page draws of its configurations, for one window of text.

    Attributes:
        doc: The document.
        columns: Every configuration with its chunking, or why there is none.
        window: The part of the text shown side by side.
    """

    doc: Document
    columns: tuple[Column, ...]
    window: TextWindow

    @property
    def ready(self) -> list[tuple[ConfigEntry, Chunking]]:
        """``(entry, chunking)`` of the configurations that have chunks."""
        return ready(self.columns)

    @property
    def pending(self) -> list[ConfigEntry]:
        """The configurations waiting for a model run."""
        return pending(self.columns)

    @property
    def total_chunks(self) -> int:
        """Chunks over every configuration (the strip draws them all)."""
        return sum(len(ch) for _, ch in self.ready)

    def clip(self, selected: Mapping[int, int]) -> dict[int, int]:
        """The selected chunk per configuration (entry uid → index), each kept inside its chunking."""
        return {e.uid: min(max(0, int(selected.get(e.uid, 0))), max(len(ch) - 1, 0)) for e, ch in self.ready}

    def strip(self, selected: Mapping[int, int]) -> go.Figure:
        """The boundary strip: every chunk of every configuration, the window and the selected chunks outlined."""
        done = self.ready
        return boundary_strip(
            [ch for _, ch in done], [e.tag for e, _ in done], len(self.doc.text), (self.window.start, self.window.end),
            [selected.get(e.uid, 0) for e, _ in done], revision=f"{self.doc.id}:" + ",".join(str(e.uid) for e, _ in done),
        )

    def legend(self) -> str:
        """The key to the side-by-side colours (with the page marker for a paged document)."""
        return legend_html(paged=bool(self.window.page_starts))

    def text_html(self, chunking: Chunking, selected: int | None) -> str:
        """One configuration's chunks over the window of text, the selected chunk marked."""
        w = self.window
        return window_html(
            self.doc.text, chunking.chunks, w.start, w.end, index=ChunkIndex.build(chunking.chunks), selected=selected,
            page_starts=w.page_starts,
        )

    def histogram(self, unit: str) -> go.Figure:
        """Every configuration's chunk sizes in ``unit`` (tokens or characters), in its colour."""
        done = self.ready
        return size_histogram([ch for _, ch in done], [e.tag for e, _ in done], [config_color(e.uid) for e, _ in done], unit)


def compare_view(doc: Document, columns: Sequence[Column], window: int, page: int) -> CompareView:
    """The Compare page's view of ``columns`` with window ``page`` (clipped) of ``window`` characters."""
    return CompareView(doc, tuple(columns), text_window(doc, window, page))
