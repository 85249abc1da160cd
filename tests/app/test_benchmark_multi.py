"""The Benchmark page with query-time retrievers (MoG, FreeChunker) beside a chunker: tables, routing, failures.

Real embedded Chroma and the bundled MiniLM, on the bundled narrative sample set (12
questions). The retrievers are kept small so the indexing is quick: MoG has 3 levels over
200-token chunks (level 1 is the chunker's own texts, from the output cache), FreeChunker
128-token units and windows of 2; the two MoG configurations share one index (the router does
not shape the levels). The second MoG routes by ``oracle``: a ``cv`` router trains six small
routers (seconds each on a busy CPU); its training curve is drawn by the same panel, tested on
a hand-built routing in ``test_routing_figures.py``."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from components.state import normalized_config
from tests.support.apptest import isolated_lab, open_page, run_sample_benchmark
from tests.support.apptest import run as _run

MOG = {"chunk_size": 200, "levels": 3}
FREE = ("freechunker", {"unit": "tokens", "unit_tokens": 128, "granularities": "2"})
CONFIGS = (
    ("recursive", {"chunk_size": 200}),
    ("mog", {**MOG, "router": "level:2"}),
    ("mog", {**MOG, "router": "oracle"}),
    FREE,
)


@pytest.fixture(scope="module", autouse=True)
def lab_env(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("benchmark-multi-data")) as data:
        yield data


def _run_benchmark(configs) -> tuple[AppTest, object]:
    entries = [ConfigEntry(i, "ABCDEFGH"[i], normalized_config(n, p)) for i, (n, p) in enumerate(configs)]
    at = open_page("pages/benchmark.py", None, entries)
    return at, run_sample_benchmark(at, "narrative")


def _spec(at: AppTest, key: str) -> dict:
    return json.loads(at.get_by_key(key).proto.spec)


def _array(value) -> np.ndarray:
    """A Plotly JSON array: a plain list, or a typed array ``{"dtype", "bdata", "shape"}``."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(x) for x in shape.split(",")]
        return flat.reshape(shape) if shape else flat
    return np.asarray(value)


def _frame(at: AppTest, first: str):
    """The one table whose first column is ``first`` (the summary: "chunker"; its cost view: "retrieved tokens")."""
    (frame,) = [d.value for d in at.dataframe if len(d.value.columns) and d.value.columns[0] == first]
    return frame


def test_retrievers_sit_beside_a_chunker_with_their_costs_and_routing() -> None:
    at, job = _run_benchmark(CONFIGS)
    assert job.state == "done", job.error
    bm = job.result.benchmark
    table = _frame(at, "chunker")
    assert list(table.index) == ["A", "B", "C", "D"]
    for tag, r in zip("ABCD", bm.results):
        s = r.summary
        assert table.loc[tag, "IoU"] == f"{100 * s.iou_mean:.1f} ± {100 * s.iou_std:.1f}"
        assert table.loc[tag, "chunks"] == r.chunks
        assert table.loc[tag, "retrieved tokens"] == round(r.retrieved_tokens_mean, 1) > 0
        assert table.loc[tag, "query ms"] == round(1000 * r.query_seconds, 2)
    # Precision-Ω of a retriever is on its finest units, and marked so.
    assert not table.loc["A", "Precision-Ω"].endswith("†")
    assert all(table.loc[t, "Precision-Ω"].endswith(" †") for t in "BCD")
    assert any("finest units" in c.value for c in at.caption)
    cost = _frame(at, "retrieved tokens")
    assert list(cost.columns) == ["retrieved tokens", "texts embedded", "index seconds", "query ms"]
    # B and C share one index: C embeds nothing.
    assert cost.loc["B", "texts embedded"] > 0 and cost.loc["C", "texts embedded"] == 0

    # Routing: B and C are routed (D, FreeChunker, is not).
    assert at.selectbox(key="bm_routing_config").options == [
        f"{t} · {normalized_config(n, p).label}" for t, (n, p) in zip("BC", CONFIGS[1:3])
    ]
    # B (level:2) chose level 2 for every question and trained nothing.
    levels = _spec(at, "bm_routing_levels")["data"]
    assert [t["name"] for t in levels] == ["narrative_clockmaker"] * 2
    assert levels[0]["y"] == [0, 12, 0] and levels[1]["y"] == [0, 1, 0]  # counts, then mean weights
    with pytest.raises(KeyError):
        at.get_by_key("bm_routing_training")
    assert any("trains nothing on this set" in c.value for c in at.caption)

    # C (oracle): its matrix is the backend's confusion, the questions without an oracle level said.
    at.selectbox(key="bm_routing_config").set_value("C")
    _run(at)
    routing = bm.results[2].routing
    assert routing.router == "oracle"
    z = _spec(at, "bm_routing_confusion")["data"][0]["z"]
    assert np.asarray(_array(z)).tolist() == routing.confusion().tolist()
    none = int((routing.oracle == 0).sum())
    assert any(f"{none} of 12 question(s) had no oracle level" in c.value for c in at.caption)
    with pytest.raises(KeyError):
        at.get_by_key("bm_routing_training")
    for key in ("bm_dl_questions_csv", "bm_dl_questions_json", "bm_dl_routing_levels"):
        at.get_by_key(key)


def test_freechunker_only_has_no_routing_section_and_a_bad_router_file_is_one_line(tmp_path) -> None:
    at, job = _run_benchmark([FREE])
    assert job.state == "done", job.error
    assert list(_frame(at, "chunker").index) == ["A"]
    assert "Routing" not in [s.value for s in at.subheader]
    with pytest.raises(KeyError):
        at.get_by_key("bm_routing_levels")

    missing = tmp_path / "nowhere.router.npz"
    at, job = _run_benchmark([("mog", {**MOG, "router": str(missing)})])
    assert job.state == "failed"
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "nowhere.router.npz" in errors[0] and "\n" not in errors[0]
    assert not at.get_by_key("bm_run").disabled  # the page goes on: run again
