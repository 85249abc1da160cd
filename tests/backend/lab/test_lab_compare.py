"""The Compare page's work in the backend: columns, the statistics table, the text window, a strip click."""

from __future__ import annotations

import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import NotCached
from backend.lab.compare import (
    chunk_entries,
    focus_on,
    neighbours,
    pending,
    ready,
    stats_rows,
    text_window,
    window_count,
)
from backend.lab.document import PREVIEW_CHARS, ScoreSummary, preview, preview_count
from backend.models.scoring import SentenceScore
from backend.samples import load_sample
from backend.text.document import Document

TEXT = " ".join(f"Sentence {i} is here." for i in range(40))


@pytest.fixture(scope="module")
def doc() -> Document:
    return Document.from_text(TEXT, source="c.txt")


def _entries() -> list[ConfigEntry]:
    return [
        ConfigEntry(0, "A", ChunkerConfig.make("fixed_token", {"chunk_size": 20, "chunk_overlap": 10})),
        ConfigEntry(3, "B", ChunkerConfig.make("semantic")),
        ConfigEntry(4, "C", ChunkerConfig.make("no_such_chunker")),
    ]


def _not_cached(doc, config):
    raise NotCached("needs the embedder")


def test_columns_say_done_pending_or_failed(doc: Document) -> None:
    columns = chunk_entries(doc, _entries(), run_chunker, _not_cached)
    assert [(c.entry.tag, c.chunking is not None, c.pending, c.error is not None) for c in columns] == [
        ("A", True, False, False), ("B", False, True, False), ("C", False, False, True),
    ]
    assert [e.tag for e, _ in ready(columns)] == ["A"] and [e.tag for e in pending(columns)] == ["B"]


def test_stats_rows_give_the_overlap_share(doc: Document) -> None:
    chunking = run_chunker(doc, ChunkerConfig.make("fixed_token", {"chunk_size": 20, "chunk_overlap": 10}))
    (row,) = stats_rows(len(doc.text), [chunking])
    assert "configuration" not in row and "overlap_chars" not in row
    covered_twice = sum(
        min(prev.end, cur.end) - cur.start for prev, cur in zip(chunking.chunks, chunking.chunks[1:]) if cur.start < prev.end
    )
    assert row["overlap_pct"] == pytest.approx(100 * covered_twice / len(doc.text))
    assert row["chunks"] == len(chunking)


def test_text_window_clips_and_names_pdf_pages() -> None:
    doc = Document.from_text("x" * 25, source="w.txt")
    assert window_count(doc, 10) == 3
    w = text_window(doc, 10, 7)
    assert (w.page, w.pages, w.start, w.end, w.page_starts, w.doc_pages) == (3, 3, 20, 25, (), None)
    assert w.caption(25) == "Characters 20–25 of 25 (page 3 of 3)"


def test_a_strip_click_selects_the_chunk_at_the_same_offset_everywhere(doc: Document) -> None:
    other = ConfigEntry(9, "D", ChunkerConfig.make("fixed_token", {"chunk_size": 33, "chunk_overlap": 0}))
    columns = chunk_entries(doc, _entries()[:1] + [other], run_chunker, _not_cached)
    (a, ch_a), (d, ch_d) = ready(columns)
    focus = focus_on(columns, "A", 3, window=100)
    offset = ch_a.chunks[3].start
    assert focus.selected == {0: 3, 9: ch_d.chunk_at(offset).index}
    assert focus.page == offset // 100 + 1
    assert focus_on(columns, "A", 10_000, 100) is None and focus_on(columns, "Z", 0, 100) is None


def test_neighbours_clip_the_index(doc: Document) -> None:
    chunking = run_chunker(doc, ChunkerConfig.make("fixed_token", {"chunk_size": 20, "chunk_overlap": 0}))
    first = neighbours(chunking, -5)
    assert first.previous is None and first.current.index == 0 and first.next.index == 1
    last = neighbours(chunking, 10_000)
    assert last.current.index == len(chunking) - 1 and last.next is None


def test_the_preview_reads_a_pdf_page_by_page_and_text_by_windows() -> None:
    text = Document.from_text("y" * (PREVIEW_CHARS + 5), source="long.txt")
    assert preview_count(text) == 2
    part = preview(text, 9)
    assert (part.unit, part.number, part.start, part.end) == ("Part", 2, PREVIEW_CHARS, PREVIEW_CHARS + 5)
    pdf = load_sample("technical-pdf")
    assert preview_count(pdf) == len(pdf.pages) > 1
    page = preview(pdf, 2)
    assert (page.unit, page.start, page.end) == ("Page", pdf.pages[1].start, pdf.pages[1].end)
    assert page.caption(len(pdf.text)).startswith(f"Page 2 of {len(pdf.pages)} · characters")


def test_a_score_summary_weights_the_mean_by_tokens() -> None:
    rows = [SentenceScore(0, 0, 5, "Hello", 0, float("nan"), float("nan")), SentenceScore(1, 6, 10, "you.", 3, 2.0, 7.4),
            SentenceScore(2, 11, 14, "Hi.", 1, 6.0, 403.4)]
    summary = ScoreSummary.of(rows, "m")
    assert (summary.scored_tokens, summary.mean_nll, summary.curve_ready) == (4, 3.0, True)
    assert [r["index"] for r in summary.rows()] == [0, 1, 2]
