"""The Quality page's components: the table's layout (components/quality.py), the figures
(backend/figures/quality.py) and the match-lengths helpers (components/match.py).

The numbers come from the backend (tests/backend/metrics/); here the scores are seeded random
tables or come from a small deterministic scorer (tests/support/quality.py) behind a call
counter, so the tests can prove that drawing at any K, rule or graph calls no model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backend.chunking import ChunkerConfig
from backend.figures.export import figure_html
from backend.figures.quality import bc_figure, cs_k_figure, stickiness_figure
from backend.metrics.estimate import Estimate, exact_estimate
from backend.metrics.formulas import PairTable, chunk_stickiness, cs_curve, edge_values, kept_edges
from backend.metrics.report import QualityData, QualitySettings, table_rows
from backend.metrics.scores import score_chunkings
from backend.models.cache import OutputCache
from components.quality import (
    ESTIMATE_WIDTH,
    PLACEHOLDER,
    best_cells,
    column_config,
    estimate_best,
    estimate_column_config,
    estimate_frame,
    estimated,
    quality_frame,
    styled_table,
)
from tests.support.quality import TEXTS, Counting, LengthScorer, chunking_of, quality_data

# --- the table -----------------------------------------------------------------------------------------


def _running_row(tag: str, bc: Estimate, cs: Estimate | None = None) -> dict:
    """A row of the Quality table while the job scores it: point estimates as the numbers, the estimates beside."""
    estimates = {"bc": bc, "cs_complete": cs, "cs_incomplete": None, "ds": None}
    return {"configuration": tag, "chunker": f"{tag} · fixed", "chunks": 12, "mean_tokens": 40.25,
            "bc": bc.estimate, "cs_complete": cs.estimate if cs is not None else None, "cs_incomplete": None,
            "ds": None, "estimates": estimates}


def _est(value: float, half: float, scored: int = 120, total: int = 1747) -> Estimate:
    return Estimate(value, value - half, value + half, scored, total, "t")


def test_a_running_jobs_rows_read_as_estimates_with_their_pairs() -> None:
    rows = [_running_row("A", _est(0.93, 0.02), _est(1.5, 0.25, 300, 3000)), _running_row("B", exact_estimate(0.8, 11))]
    assert estimated(rows) and not estimated([_running_row("B", exact_estimate(0.8, 11))])
    frame = estimate_frame(rows)
    assert list(frame.index) == ["A", "B"]
    assert frame.drop(columns=["chunker"]).to_dict("records") == [
        {"configuration": "A", "chunks": 12, "mean_tokens": "40.2", "bc": "0.93 ± 0.02 (120 of 1,747 pairs)",
         "cs_complete": "1.50 ± 0.25 (300 of 3,000 pairs)", "cs_incomplete": PLACEHOLDER, "ds": PLACEHOLDER},
        {"configuration": "B", "chunks": 12, "mean_tokens": "40.2", "bc": "0.8000", "cs_complete": PLACEHOLDER,
         "cs_incomplete": PLACEHOLDER, "ds": PLACEHOLDER},  # exact: the number as the exact table shows it
    ]
    config = estimate_column_config(frame)
    assert config["bc"]["width"] == config["cs_complete"]["width"] == ESTIMATE_WIDTH
    assert sum(c["width"] for c in config.values()) <= 960  # the main pane at 1440×900


def test_the_highlight_marks_an_estimate_only_when_its_interval_overlaps_no_other() -> None:
    overlapping = [_running_row("A", _est(0.93, 0.03)), _running_row("B", _est(0.94, 0.03))]
    assert estimate_best(overlapping)["bc"] == []
    disjoint = [_running_row("A", _est(0.80, 0.03)), _running_row("B", _est(0.94, 0.03))]
    assert estimate_best(disjoint)["bc"] == ["B"]
    exact = [_running_row("A", exact_estimate(0.93, 11)), _running_row("B", exact_estimate(0.94, 11))]
    assert estimate_best(exact)["bc"] == ["B"]  # width 0: compared as the exact table does
    tie = [_running_row("A", exact_estimate(0.94, 11)), _running_row("B", exact_estimate(0.94, 11))]
    assert estimate_best(tie)["bc"] == ["A", "B"]
    lower = [_running_row("A", _est(0.9, 0.01), _est(1.2, 0.05)), _running_row("B", _est(0.9, 0.01), _est(1.6, 0.05))]
    assert estimate_best(lower)["cs_complete"] == ["A"]  # CS: lower is better


def test_frame_is_the_backend_rows_indexed_by_tag() -> None:
    scored = [quality_data("A", 1), quality_data("B", 2, vectors=False)]
    rows = table_rows(scored, metrics=["bc", "ds"], settings=QualitySettings(K=0.3))
    frame = quality_frame(rows)
    assert list(frame.index) == ["A", "B"]
    assert list(frame.columns) == ["configuration", "chunker", "chunks", "mean_tokens", "bc", "cs_complete",
                                   "cs_incomplete", "ds"]
    assert frame.drop(columns=["chunker"]).fillna(-1).to_dict("records") == [
        {"configuration": r["configuration"], "chunks": r["chunks"], "mean_tokens": r["mean_tokens"], "bc": r["bc"],
         "cs_complete": -1, "cs_incomplete": -1, "ds": -1 if r["ds"] is None else r["ds"]}
        for r in rows
    ]
    assert list(column_config()) == ["_index", "chunker", "chunks", "mean_tokens", "bc", "cs_complete",
                                     "cs_incomplete", "ds"]


def test_best_cells_take_the_max_bc_and_the_min_cs() -> None:
    table = pd.DataFrame(
        {
            "configuration": ["A", "B", "C"],
            "chunker": ["a", "b", "c"],
            "chunks": [3, 9, 5],
            "mean_tokens": [10.0, 90.0, 50.0],
            "bc": [0.80, 0.90, 0.85],
            "cs_complete": [2.1, 2.4, 1.9],
            "cs_incomplete": [1.2, 1.0, 1.0],
            "ds": [0.3, float("nan"), 0.5],
        },
        index=["A", "B", "C"],
    )
    best = best_cells(table)
    assert best == {"bc": ["B"], "cs_complete": ["C"], "cs_incomplete": ["B", "C"], "ds": ["C"]}
    styler = styled_table(table)
    styler._compute()  # fills styler.ctx: (row, column) positions → CSS
    shown = list(table.drop(columns=["configuration"]).columns)
    marked = {(table.index[r], shown[c]) for (r, c), css in styler.ctx.items() if css}
    assert marked == {("B", "bc"), ("C", "cs_complete"), ("B", "cs_incomplete"), ("C", "cs_incomplete"), ("C", "ds")}
    assert "chunks" not in {c for _, c in marked} and "mean_tokens" not in {c for _, c in marked}


def test_an_all_missing_column_has_no_best() -> None:
    table = quality_frame(table_rows([QualityData("A", ChunkerConfig("x"), chunking_of())]))
    assert best_cells(table)["bc"] == [] and best_cells(table)["ds"] == []
    # A metric not computed reads as on the Summary, never "None" or an empty cell (the page passes
    # PLACEHOLDER to st.dataframe, which shows it for a missing number).
    assert styled_table(table).to_html().count("not computed yet") == 4
    assert PLACEHOLDER == "not computed yet"


# --- figures -------------------------------------------------------------------------------------------


def test_figures_at_any_k_rule_and_graph_call_no_model(tmp_path) -> None:
    scorer = Counting(LengthScorer())
    ch = chunking_of()
    ((table, _),) = score_chunkings(
        [ch], scorer=scorer, embedder=None, complete=True, window=None, cache=OutputCache(tmp_path)
    ).results
    scored = scorer.calls  # one per batch of the anytime job (issue 24); drawing must add none
    data = QualityData("A", ch.config, ch, table)
    for K in (0.0, 0.2, 0.5, 0.8, 1.2):
        for rule in ("paper", "reference"):
            for graph in ("complete", "incomplete"):
                stickiness_figure(data, K, "#2563eb", rule=rule, graph=graph)
    bc_figure([data], ["#2563eb"], bc_mode="paper")
    cs_k_figure([data], ["#2563eb"], [0.5, 0.8], 0.8)
    assert scored >= 1 and scorer.calls == scored


def _arcs(fig) -> int:
    xs = fig.data[0].x
    return sum(1 for x in xs if x is None)


@pytest.mark.parametrize("rule", ["paper", "reference"])
@pytest.mark.parametrize("graph", ["complete", "incomplete"])
@pytest.mark.parametrize("K", [-0.5, 0.1, 0.4, 0.9, 2.0])
def test_graph_draws_exactly_the_kept_edges(rule: str, graph: str, K: float) -> None:
    d = quality_data("A", 7, n=8)
    fig = stickiness_figure(d, K, "#2563eb", rule=rule, graph=graph, delta=1)
    kept = kept_edges(edge_values(d.table, rule), K, graph=graph, delta=1)
    assert _arcs(fig) == len(kept) == fig.layout.meta["edges"]
    degree = np.zeros(d.n)
    for i, j in kept:
        degree[i] += 1
        degree[j] += 1
    hover_degrees = [row[0] for row in fig.data[1].customdata]
    assert hover_degrees == degree.astype(int).tolist()
    if kept:  # node size grows with degree
        sizes = fig.data[1].marker.size
        assert sizes[int(degree.argmax())] == max(sizes)


def test_arcs_of_forward_edges_rise_and_of_backward_edges_fall() -> None:
    table = PairTable(uncond=np.array([2.0, 2.0, 2.0]), cond=np.array([[np.nan, 0.1, 3.0], [3.0, np.nan, 3.0], [0.1, 3.0, np.nan]]))
    d = QualityData("A", ChunkerConfig("x"), chunking_of(TEXTS[:3]), table)
    fig = stickiness_figure(d, 0.5, "#000")
    assert fig.layout.meta["edges"] == 2  # 0→1 (d before q) and 2→0 (d after q)
    ys = [y for y in fig.data[0].y if y is not None]
    assert max(ys) > 0 and min(ys) < 0


def test_hovers_escape_document_text() -> None:
    d = quality_data("A", 3)
    fig = bc_figure([d], ["#2563eb"])
    hover = " ".join(str(v) for row in fig.data[0].customdata for v in row)
    assert "<i>text</i>" not in hover and "&lt;i&gt;text&lt;/i&gt; &amp; more" in hover
    assert list(fig.data[0].x) == [c.start for c in d.chunking.chunks[1:]]
    graph = stickiness_figure(d, 0.3, "#2563eb")
    nodes = " ".join(str(row[2]) for row in graph.data[1].customdata)
    assert "<i>" not in nodes and "&lt;i&gt;" in nodes


def test_bc_hover_shows_the_end_of_one_chunk_and_the_start_of_the_next() -> None:
    long = ("word " * 50 + "END-OF-FIRST", "START-OF-SECOND " + "word " * 50)
    table = PairTable(uncond=np.array([2.0, 2.0]), cond=np.array([[np.nan, 1.0], [1.0, np.nan]]))
    d = QualityData("A", ChunkerConfig("x"), chunking_of(long), table)
    (_, tail, head), = bc_figure([d], ["#000"]).data[0].customdata
    assert tail.startswith("…") and tail.endswith("END-OF-FIRST") and len(tail) <= 70
    assert head.startswith("START-OF-SECOND") and head.endswith("…") and len(head) <= 70


def test_cs_against_k_is_one_solid_and_one_dashed_line_per_configuration() -> None:
    scored = [quality_data("A", 1), quality_data("B", 2)]
    ks = [0.0, 0.25, 0.5, 0.75, 1.0]
    fig = cs_k_figure(scored, ["#111", "#222"], ks, 0.5, rule="paper")
    assert [t.name for t in fig.data] == ["A complete", "A incomplete", "B complete", "B incomplete"]
    complete, incomplete = cs_curve(scored[0].table, ks)
    assert list(fig.data[0].y) == complete and list(fig.data[1].y) == incomplete
    assert complete == [chunk_stickiness(scored[0].table, k) for k in ks]


def test_graph_exports_as_self_contained_html() -> None:
    page = figure_html(stickiness_figure(quality_data("A", 1), 0.3, "#2563eb"))
    assert page.lstrip().lower().startswith(("<!doctype html>", "<html")) and page.rstrip().endswith("</html>")
    assert "<script src=" not in page and len(page) > 1_000_000  # plotly.js inlined: opens offline


def test_the_label_column_takes_what_the_numbers_leave_of_the_pane() -> None:
    from components.quality import PANE_WIDTH, column_widths

    scored = [quality_data("A", 1), quality_data("B", 2)]
    table = quality_frame(table_rows(scored, metrics=["bc", "ds"], settings=QualitySettings(K=0.3)))
    widths = column_widths(table)
    assert sum(widths.values()) == PANE_WIDTH  # the whole table fits a 1280-pixel screen's pane
    # BC and DS as wide as their numbers, CS as "not computed yet" or its header (the wider).
    assert (widths["bc"], widths["ds"], widths["cs_complete"], widths["cs_incomplete"]) == (70, 70, 119, 133)
    assert widths["chunker"] == PANE_WIDTH - 40 - 70 - 105 - 70 - 119 - 133 - 70
    every_missing = column_widths()  # still fits, "not computed yet" whole in every metric column
    assert sum(every_missing.values()) == PANE_WIDTH and every_missing["chunker"] == PANE_WIDTH - 40 - 70 - 105 - 116 - 119 - 133 - 116
