"""The pure parts of components/: chunk HTML, the window index and the Plotly figures."""

from __future__ import annotations

import random

import pytest

import components.keys as keys
from backend.chunking import Chunk, ChunkerConfig, Chunking
from components.config_form import default_chunker
from backend.figures.charts import boundary_strip, size_histogram, strip_lanes
from backend.figures.text import CHUNK_EDGES, ChunkIndex, chunk_detail_html, esc, legend_html, window_html
from backend.chunking import tag_for

TEXT = "Alpha beta. <script>x</script> gamma & delta.\n\nEpsilon zeta eta theta."


def _chunks(text: str, spans: list[tuple[int, int]]) -> list[Chunk]:
    return [Chunk(i, s, e, text[s:e], max(1, len(text[s:e].split()))) for i, (s, e) in enumerate(spans)]


def _chunking(text: str, spans: list[tuple[int, int]], name: str = "recursive") -> Chunking:
    return Chunking(ChunkerConfig.make(name, {"chunk_size": 5}), tuple(_chunks(text, spans)), 0.01, "id", len(text))


def test_esc_escapes_markup_and_quotes() -> None:
    assert esc('<a href="x">&</a>') == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"


def test_window_html_escapes_document_text() -> None:
    html = window_html(TEXT, _chunks(TEXT, [(0, len(TEXT))]), 0, len(TEXT))
    assert "<script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    assert "gamma &amp; delta" in html


def test_window_html_colours_chunks_marks_overlap_and_gaps() -> None:
    # chunk 0 = [0, 20), chunk 1 = [15, 40) overlaps it on [15, 20); [40, 48) is in no chunk.
    chunks = _chunks(TEXT, [(0, 20), (15, 40), (48, len(TEXT))])
    html = window_html(TEXT, chunks, 0, len(TEXT), selected=None)
    assert f'<span class="cl-c0" title="chunk 0">{esc(TEXT[0:15])}</span>' in html
    assert f'<span class="cl-ov" title="overlap: chunks 0, 1">{esc(TEXT[15:20])}</span>' in html
    assert f'<span class="cl-c1" title="chunk 1">{esc(TEXT[20:40])}</span>' in html
    assert f'<span class="cl-gap" title="not in any chunk">{esc(TEXT[40:48])}</span>' in html
    assert html.count('class="cl-badge') == 3


def test_window_html_renders_only_the_window() -> None:
    chunks = _chunks(TEXT, [(0, 20), (20, 48), (48, len(TEXT))])
    html = window_html(TEXT, chunks, 25, 40)
    assert esc(TEXT[25:40]) in html
    assert "Alpha" not in html and "Epsilon" not in html
    # chunk 1 began before the window: a grey continuation badge, and "…" on both sides.
    assert 'cl-badge cl-cont' in html and ">…1</span>" in html
    assert html.count('class="cl-more"') == 2


def test_window_html_highlights_the_selected_chunk_and_page_breaks() -> None:
    chunks = _chunks(TEXT, [(0, 20), (20, len(TEXT))])
    html = window_html(TEXT, chunks, 0, len(TEXT), selected=1, page_starts=[0, 30])
    assert 'class="cl-badge cl-selb"' in html
    assert 'class="cl-c1 cl-sel"' in html
    assert html.count('class="cl-page"') == 1 and ">page 2<" in html


def test_window_html_ignores_a_nested_chunk_that_ends_before_the_window() -> None:
    chunks = _chunks(TEXT, [(0, 60), (5, 10), (40, len(TEXT))])
    html = window_html(TEXT, chunks, 30, 50)
    assert esc(TEXT[10:30]) not in html
    assert ">1</span>" not in html


def test_window_html_without_chunks_is_plain_grey_text() -> None:
    html = window_html(TEXT, [], 0, len(TEXT))
    assert "cl-badge" not in html and "cl-gap" in html


@pytest.mark.parametrize("seed", range(20))
def test_chunk_index_finds_exactly_the_chunks_of_a_window(seed: int) -> None:
    rng = random.Random(seed)
    n = 500
    spans: list[tuple[int, int]] = []
    pos = 0
    while pos < n:
        # Starts never decrease (as in every Chunking); chunks may overlap, nest or leave gaps.
        prev_start = spans[-1][0] if spans else 0
        start = max(prev_start, pos - rng.choice([0, 0, rng.randint(0, 15)]))
        spans.append((start, min(n, start + rng.randint(1, 40))))
        pos = max(pos, spans[-1][1]) + rng.choice([0, 0, 3])
    text = "x" * n
    chunks = _chunks(text, spans)
    index = ChunkIndex.build(chunks)
    for _ in range(30):
        a = rng.randint(0, n - 1)
        b = rng.randint(a + 1, n)
        expected = [i for i, c in enumerate(chunks) if c.start < b and c.end > a]
        assert index.overlapping(a, b) == expected


def test_chunk_detail_marks_what_neighbours_share() -> None:
    prev, cur, nxt = _chunks(TEXT, [(0, 20), (15, 40), (35, 60)])
    html = chunk_detail_html(TEXT, cur, prev, nxt, "current")
    assert f'<span class="cl-ov" title="shared with a neighbour">{esc(TEXT[15:20])}</span>' in html
    assert f'<span class="cl-ov" title="shared with a neighbour">{esc(TEXT[35:40])}</span>' in html
    assert esc(TEXT[20:35]) in html
    assert "Selected · chunk 1" in html


def test_legend_mentions_page_breaks_only_for_paged_documents() -> None:
    assert "page break" in legend_html(paged=True)
    assert "page break" not in legend_html(paged=False)


def test_boundary_strip_is_one_trace_per_configuration_with_chunk_data() -> None:
    a = _chunking(TEXT, [(0, 20), (15, 40), (48, len(TEXT))])
    b = _chunking(TEXT, [(0, 30), (30, len(TEXT))], name="fixed_token")
    fig = boundary_strip([a, b], ["A", "B"], len(TEXT), window=(10, 50), selected=[1, None])
    assert len(fig.data) == 2
    first = fig.data[0]
    assert list(first.base) == [0, 15, 48]
    assert [row[0] for row in first.customdata] == ["A"] * 3
    assert [row[1] for row in first.customdata] == [0, 1, 2]
    assert list(first.marker.line.width) == [0, 2.5, 0]
    # The hover preview is escaped for Plotly's HTML-like labels.
    assert all("<script>" not in row[5] for row in first.customdata)
    assert any("&lt;script&gt;" in row[5] for row in first.customdata)
    (band,) = fig.layout.shapes
    assert (band.x0, band.x1) == (10, 50)
    assert list(fig.layout.yaxis.ticktext) == ["A", "B"]


def test_boundary_strip_keeps_every_chunk_of_a_half_overlap_row_apart() -> None:
    # fixed_token with 50 % overlap: each chunk overlaps both neighbours and abuts the one after next.
    text = "x" * 30
    half = _chunking(text, [(0, 10), (5, 15), (10, 20), (15, 25), (20, 30)], name="fixed_token")
    (row,) = boundary_strip([half], ["A"], len(text)).data
    assert [round(v, 6) for v in row.y] == [0.19, -0.19, 0.19, -0.19, 0.19]  # overlapping neighbours: two lanes
    assert list(row.base) == [0, 5, 10, 15, 20] and list(row.x) == [10] * 5
    # Abutting chunks of one lane ([0, 10) then [10, 20) then [20, 30)) alternate colours instead of merging.
    assert list(row.marker.color) == [CHUNK_EDGES[0], CHUNK_EDGES[1], CHUNK_EDGES[1], CHUNK_EDGES[0], CHUNK_EDGES[0]]
    assert row.width == pytest.approx(0.38 * 0.92)


def test_strip_lanes_grow_with_the_overlap_depth_and_keep_parity_without_overlap() -> None:
    assert strip_lanes([0, 10, 20], [10, 20, 30]) == (2, [0, 1, 0], [0, 1, 0])
    assert strip_lanes([0, 5, 10, 15], [10, 15, 20, 25]) == (2, [0, 1, 0, 1], [0, 1, 1, 0])
    # Three chunks cover [6, 10): three lanes; [10, 20) finds lane 0 free again.
    assert strip_lanes([0, 3, 6, 10], [10, 13, 16, 20]) == (3, [0, 1, 2, 0], [0, 1, 0, 1])
    # A chunk whose round-robin lane is still busy takes the first free one.
    assert strip_lanes([0, 1, 2, 3], [100, 2, 3, 4]) == (2, [0, 1, 1, 1], [0, 1, 0, 1])


def test_size_histogram_clips_the_axis_at_the_99th_percentile_and_marks_the_outlier() -> None:
    text = "x" * 20_000
    spans, pos = [], 0
    for size in [100] * 50 + [200] * 49 + [1371]:
        spans.append((pos, pos + size))
        pos += size
    fig = size_histogram([_chunking(text, spans)], ["A"], ["#111111"], "characters")
    # 99th percentile of the 100 sizes: 200 + 0.01 × 1171 = 211.71; + 10 % headroom → 232.881, rounded up.
    assert tuple(fig.layout.xaxis.range) == (99.5, 233)
    (note,) = fig.layout.annotations
    assert note.text == "1 chunk beyond 233 ▸ max 1,371 characters"
    assert list(fig.data[0].x).count(1371) == 1  # still counted, only off the axis
    assert fig.data[0].xbins.size == pytest.approx((233 - 100 + 1) / 40)


def test_size_histogram_without_outliers_keeps_the_full_axis() -> None:
    text = "x" * 1000
    fig = size_histogram([_chunking(text, [(0, 100), (100, 210), (210, 300)])], ["A"], ["#111111"], "characters")
    assert fig.layout.xaxis.range is None and fig.layout.annotations == ()


def test_size_histogram_shares_bins_between_configurations() -> None:
    a = _chunking(TEXT, [(0, 20), (15, 40), (48, len(TEXT))])
    b = _chunking(TEXT, [(0, 30), (30, len(TEXT))], name="fixed_token")
    fig = size_histogram([a, b], ["A", "B"], ["#111111", "#222222"], "characters")
    assert len(fig.data) == 2
    assert fig.data[0].xbins == fig.data[1].xbins
    assert list(fig.data[1].x) == [30, len(TEXT) - 30]


def test_session_keys_are_built_in_one_place_and_never_collide() -> None:
    # The model-run panel writes and the pages read these: one spelling on both sides.
    assert [keys.COMPARE.lm_results, keys.COMPARE.lm_job, keys.QUALITY.lm_results, keys.MODELS("score_job")] == [
        "cmp_lm_results", "cmp_lm_job", "qual_lm_results", "models_score_job",
    ]
    shared = [getattr(keys, name) for name in keys.__all__ if isinstance(getattr(keys, name), str)]
    assert len(shared) == 28 and len(set(shared)) == len(shared)
    prefixes = [getattr(keys, name).prefix for name in keys.__all__ if isinstance(getattr(keys, name), keys.PageKeys)]
    assert prefixes == ["cmp", "qual", "ret", "ppl", "bm", "models", "docpage", "ses", "sum", "edit", "corpus", "tune", "demo"]


@pytest.mark.parametrize(("n", "tag"), [(0, "A"), (1, "B"), (25, "Z"), (26, "AA"), (27, "AB"), (701, "ZZ")])
def test_configuration_tags(n: int, tag: str) -> None:
    assert tag_for(n) == tag


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("My report.pdf", "My-report__B-recursive-chunk_size5-cl100k"),
        ("../../etc/passwd", "passwd__B-recursive-chunk_size5-cl100k"),
        ("notes", "notes__B-recursive-chunk_size5-cl100k"),
        ("报告 v2.txt", "报告-v2__B-recursive-chunk_size5-cl100k"),
        ("<>.txt", "document__B-recursive-chunk_size5-cl100k"),
    ],
)
def test_export_file_names_name_document_and_configuration(source: str, expected: str) -> None:
    from components.views import export_stem

    assert export_stem(source, "B", _chunking(TEXT, [(0, 10)])) == expected


def test_default_chunker_is_model_free_from_the_registry() -> None:
    specs = [{"name": "cluster", "needs": ["embedder"]}, {"name": "fixed_token", "needs": []},
             {"name": "ppl", "needs": ["lm"]}, {"name": "recursive", "needs": []}]
    assert default_chunker(specs) == "recursive"
    assert default_chunker(specs[:3]) == "fixed_token"  # no recursive: the first model-free one
    assert default_chunker(specs, preferred="ppl") == "fixed_token"  # a model-backed preference is not taken
    assert default_chunker([specs[2]]) == "ppl"  # nothing model-free: the first
