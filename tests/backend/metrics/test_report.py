"""The one quality report (backend/metrics/report.py): the row of the CLI's JSON and of the Quality page's table.

Scores are hand-made tables and vectors (no model), so the expected numbers are exact.
"""

from __future__ import annotations

import io
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.metrics.estimate import exact_estimate
from backend.metrics.formulas import PairTable, boundary_clarity, chunk_stickiness, dissimilarity
from backend.metrics.report import (
    BEST,
    COLUMNS,
    METRIC_TABLE,
    ModelNeeds,
    QualityData,
    QualitySettings,
    model_needs,
    quality_row,
    table_csv,
    table_rows,
)
from backend.metrics.scores import quality_report
from tests.support.quality import LengthScorer, chunking_of, quality_data

# Three chunks: chunk 0 makes chunk 1 easier (nll 1 < 2), chunk 2 makes chunk 0 easier; the rest is harder.
TABLE = PairTable(
    uncond=np.array([2.0, 2.0, 2.0]),
    cond=np.array([[np.nan, 1.0, 3.0], [3.0, np.nan, 3.0], [1.0, 3.0, np.nan]]),
)
VECTORS = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # 1 - cos: 1 then 2


def test_quality_row_pins_every_number_of_the_json() -> None:
    report = quality_row([1, 2, 3], table=TABLE, vectors=VECTORS, settings=QualitySettings(K=0.5))
    # BC (reference) = nll(q|d) / nll(q): 1/2, 3/2. Paper rule at K = 0.5 keeps 0→1 and 2→0 (edge 1 - e⁻¹):
    # degrees 2, 1, 1 of 2m = 4 → 1.5 bits; the incomplete graph keeps 0→1 only → 1 bit.
    # Full scores: every estimate is exact (the value, an interval of width 0, every unit scored).
    def exact(value, total):
        return {"estimate": value, "ci_low": value, "ci_high": value, "pairs_scored": total, "pairs_total": total,
                "method": "exact"}

    assert report.to_json() == {
        "chunks": 3, "mean_tokens": 2.0, "bc_mean": 1.0, "bc": [0.5, 1.5], "bc_estimate": exact(1.0, 2),
        "cs_complete": 1.5, "cs_complete_estimate": exact(1.5, 6), "cs_incomplete": 1.0,
        "cs_incomplete_estimate": exact(1.0, 3), "ds_mean": 1.5, "ds": [1.0, 2.0], "ds_estimate": exact(1.5, 2),
        "K": 0.5, "bc_mode": "reference", "cs_rule": "paper", "delta": 0, "window": None,
    }


def test_metrics_not_asked_for_or_without_their_scores_are_none() -> None:
    # CS only, at the default K = 0.8: no edge passes (1 - e⁻¹ < 0.8), so CS is 0; BC and DS are not asked for.
    assert quality_row([1, 2, 3], table=TABLE, vectors=VECTORS, metrics=["cs"]).values == {
        "bc": None, "cs_complete": 0.0, "cs_incomplete": 0.0, "ds": None,
    }
    bc_only = replace(TABLE, complete=False)  # adjacent pairs only: no CS
    assert quality_row([1, 2, 3], table=bc_only).values == {"bc": 1.0, "cs_complete": None, "cs_incomplete": None,
                                                           "ds": None}
    assert quality_row([4]).to_json()["bc"] is None


def test_the_metric_table_gives_the_columns_and_the_best_direction() -> None:
    assert [m.name for m in METRIC_TABLE] == ["bc", "cs_complete", "cs_incomplete", "ds"]
    assert COLUMNS == ("configuration", "chunker", "chunks", "mean_tokens", "bc", "cs_complete", "cs_incomplete", "ds")
    assert BEST == {"bc": "max", "cs_complete": "min", "cs_incomplete": "min", "ds": "max"}
    # What the CLI and the page load for each pick: BC adjacent pairs, CS every pair, DS the embedder.
    assert [model_needs(m) for m in (["bc"], ["cs"], ["ds"], ["bc", "ds"], [])] == [
        ModelNeeds(scorer=True, complete=False, embedder=False),
        ModelNeeds(scorer=True, complete=True, embedder=False),
        ModelNeeds(scorer=False, complete=False, embedder=True),
        ModelNeeds(scorer=True, complete=False, embedder=True),
        ModelNeeds(scorer=False, complete=False, embedder=False),
    ]


def test_rows_equal_the_backend_metrics() -> None:
    scored = [quality_data("A", 1), quality_data("B", 2)]
    settings = QualitySettings(K=0.3, bc_mode="paper", cs_rule="reference", delta=1)
    rows = table_rows(scored, settings=settings)
    assert [r["configuration"] for r in rows] == ["A", "B"]
    for d, row in zip(scored, rows):
        assert row["chunker"] == d.config.label
        assert row["chunks"] == d.n
        assert row["mean_tokens"] == pytest.approx(np.mean(d.chunking.token_counts))
        assert row["bc"] == pytest.approx(np.mean(boundary_clarity(d.table, "paper")))
        assert row["cs_complete"] == pytest.approx(chunk_stickiness(d.table, 0.3, rule="reference"))
        assert row["cs_incomplete"] == pytest.approx(
            chunk_stickiness(d.table, 0.3, rule="reference", graph="incomplete", delta=1)
        )
        assert row["ds"] == pytest.approx(np.mean(dissimilarity(d.vectors)))


def test_table_rows_and_csv_are_pinned() -> None:
    data = QualityData("A", ChunkerConfig("x", (("chunk_size", 5),)), chunking_of(("a b", "c d e f", "g")), TABLE,
                       VECTORS)
    settings = QualitySettings(K=0.5, window=3)
    rows = table_rows([data, QualityData("B", ChunkerConfig("y"), chunking_of(("h",)))], metrics=["bc", "cs"],
                      settings=settings)
    assert rows == [
        {"configuration": "A", "chunker": "x(chunk_size=5) · cl100k", "chunks": 3, "mean_tokens": 7 / 3, "bc": 1.0,
         "cs_complete": 1.5, "cs_incomplete": 1.0, "ds": None,
         "estimates": {"bc": exact_estimate(1.0, 2), "cs_complete": exact_estimate(1.5, 6),
                       "cs_incomplete": exact_estimate(1.0, 3), "ds": None}, "exact": True},
        {"configuration": "B", "chunker": "y() · cl100k", "chunks": 1, "mean_tokens": 1.0, "bc": None,
         "cs_complete": None, "cs_incomplete": None, "ds": None,
         "estimates": {"bc": None, "cs_complete": None, "cs_incomplete": None, "ds": None}, "exact": True},
    ]
    assert table_csv(rows, settings).splitlines() == [
        "configuration,chunker,chunks,mean_tokens,bc,cs_complete,cs_incomplete,ds,K,bc_mode,cs_rule,delta,window",
        f"A,x(chunk_size=5) · cl100k,3,{7 / 3!r},1.0,1.5,1.0,,0.5,reference,paper,0,3",
        "B,y() · cl100k,1,1.0,,,,,0.5,reference,paper,0,3",
    ]
    back = pd.read_csv(io.StringIO(table_csv(rows, QualitySettings())))
    assert list(back["configuration"]) == ["A", "B"] and back["window"].isna().all()
    assert math.isnan(back["ds"][0])


def test_report_of_a_single_chunk_needs_no_model() -> None:
    report = quality_report(["Only one chunk."], [3])  # no scorer, no embedder: nothing to score
    nothing = {"estimate": None, "ci_low": None, "ci_high": None, "pairs_scored": 0, "pairs_total": 0,
               "method": "exact"}
    zero = {**nothing, "estimate": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    assert report.to_json() == {
        "chunks": 1, "mean_tokens": 3.0, "bc_mean": None, "bc": [], "bc_estimate": nothing, "cs_complete": 0.0,
        "cs_complete_estimate": zero, "cs_incomplete": 0.0, "cs_incomplete_estimate": zero, "ds_mean": None,
        "ds": [], "ds_estimate": nothing, "K": 0.8, "bc_mode": "reference", "cs_rule": "paper", "delta": 0,
        "window": None,
    }


def test_report_scores_through_the_same_row() -> None:
    texts = ["The cat sat.", "The cat slept.", "Prices fell.", "The cat woke."]
    settings = QualitySettings(K=0.1, cs_rule="reference", delta=1, window=2)
    report = quality_report(texts, [3, 3, 2, 3], metrics=["bc", "cs"], scorer=LengthScorer(), settings=settings)
    assert report.table is not None and report.table.window == 2
    assert report == quality_row([3, 3, 2, 3], table=report.table, metrics=["bc", "cs"], settings=settings)


def test_bad_settings_and_metrics_are_one_line_parameter_errors() -> None:
    for kwargs, name in (({"bc_mode": "ppl"}, "bc_mode"), ({"cs_rule": "x"}, "cs_rule"), ({"delta": -1}, "delta"),
                         ({"window": 0}, "window"), ({"K": math.nan}, "K")):
        with pytest.raises(ParameterError, match=name):
            QualitySettings(**kwargs)
    with pytest.raises(ParameterError, match="unknown metric 'iou'"):
        quality_row([1, 1], metrics=["iou"])
    with pytest.raises(ParameterError, match="unknown metric 'iou'"):
        model_needs(["bc", "iou"])
    with pytest.raises(ParameterError, match="language model"):
        quality_report(["a", "b"], [1, 1], metrics=["bc"])
    with pytest.raises(ParameterError, match="embedder"):
        quality_report(["a", "b"], [1, 1], metrics=["ds"])
