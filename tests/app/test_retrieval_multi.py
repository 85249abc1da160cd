"""The Retrieval page with multi-granularity retrievers (AppTest): picks, panels, scores, MoGG's graph, bad input.

A short document (the lighthouse corpus's first paragraphs) keeps the indexing small; the store
and the output cache live in this module's data folder, as in test_retrieval_pages.py.
"""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from backend.text.document import Document
from components.state import normalized_config
from tests.conftest import ROOT
from tests.support.apptest import isolated_lab, open_page, wait_job
from tests.support.apptest import run as _run

DATA = ROOT / "tests" / "data" / "retrieval"
TEXT = (DATA / "corpora" / "lighthouses.md").read_text(encoding="utf-8")[:2500]
QUERY = "How was the granite brought to the headland?"
EXCERPT = "The granite was quarried inland and carried to the headland on a narrow railway"
CONFIGS = (
    ("recursive", {"chunk_size": 40}),
    ("mog", {"chunk_size": 40, "levels": 3, "router": "uniform"}),
    ("freechunker", {}),
    ("mogg", {"levels": 3, "router": "level:2", "t_graph": 0.2}),
)


@pytest.fixture(scope="module", autouse=True)
def lab_env(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("retrieval-multi-data")) as data:
        yield data


def _open(configs) -> AppTest:
    entries = [ConfigEntry(i, "ABCD"[i], normalized_config(n, p)) for i, (n, p) in enumerate(configs)]
    at = open_page("pages/retrieval.py", Document.from_text(TEXT, source="lights-short.md"), entries)
    at.multiselect(key="ret_configs").set_value([e.uid for e in entries])
    return _run(at)


def _search(at: AppTest, k: int = 2):
    at.text_input(key="ret_query").set_value(QUERY)
    at.number_input(key="ret_k").set_value(k)
    at.button(key="ret_search").click()
    _run(at)
    return wait_job(at, "ret_search_job", 400)


def _spec(at: AppTest, key: str) -> dict:
    return json.loads(at.get_by_key(key).proto.spec)


def _edges_caption(at: AppTest) -> tuple[int, str]:
    (line,) = [c.value for c in at.caption if "edges at t_graph" in c.value]
    m = re.match(r"([\d,]+) edges at t_graph ≥ ([\d.]+)", line)
    assert m, line
    return int(m.group(1).replace(",", "")), m.group(2)


def test_retrievers_answer_beside_a_chunker_and_explain_themselves() -> None:
    at = _open(CONFIGS)
    job = _search(at)
    assert job.state == "done", job.error
    result = job.result
    assert result.tags == ("A", "B", "C", "D") and list(result.answers) == ["A", "B", "C", "D"]
    assert [t for t, a in result.answers.items() if a.panel is not None] == ["B", "C", "D"]

    # One top-k table per configuration: the chunker's hits, the retrievers' picks.
    tables = [h.value for h in at.html if 'class="rt-hits' in h.value]
    assert len(tables) == 4 and sum('rt-picks' in t for t in tables) == 3

    # MoG: the weights chart marks the chosen level (uniform: level 1); the ladder has one row per level.
    weights = _spec(at, "ret_weights_1")
    assert weights["layout"]["meta"]["chosen"] == 1 and len(weights["data"]) == 1
    ladder = _spec(at, "ret_ladder_1")["layout"]
    assert ladder["meta"]["rows"] == 3 and ladder["meta"]["picks"] >= 1
    # FreeChunker: rows unit / 2 units / 4 units, no router, the runs in the text.
    assert _spec(at, "ret_ladder_2")["layout"]["yaxis"]["ticktext"] == ["unit", "2 units", "4 units"]
    with pytest.raises(KeyError):
        at.get_by_key("ret_weights_2")
    assert any("cl-gap" in h.value for h in at.get_by_key("ret_runs_2").html)
    # MoGG with router=level:2: weight 1 on level 2.
    assert _spec(at, "ret_weights_3")["layout"]["meta"]["chosen"] == 2

    # Marking the answer adds each level's top-1 IoU (no new search) and the retrievers' rows to the scores.
    at.text_area(key="ret_paste").set_value(EXCERPT)
    at.button(key="ret_mark").click()
    _run(at)
    assert at.session_state["ret_search_job"] is job
    assert len(_spec(at, "ret_weights_1")["data"]) == 2
    (scores,) = [d.value for d in at.dataframe if "precision_omega" in d.value.columns]
    assert list(scores.index) == ["A", "B", "C", "D"]
    assert list(scores["omega_on"]) == ["chunks", "units", "units", "units"]
    assert any("finest units" in c.value for c in at.caption)
    view = "".join(h.value for h in at.get_by_key("ret_view").html)
    assert ">B1</span>" in view and ">C1</span>" in view  # the retrievers' picks are layers of the document view

    # MoGG's graph behind its toggle; raising t_graph leaves fewer edges, without a rebuild.
    at.toggle(key="ret_graph_3").set_value(True)
    _run(at)
    graph = result.answers["D"].panel.index.graph
    edges, t = _edges_caption(at)
    assert edges == len(graph.edges) and float(t) == pytest.approx(0.2)
    assert _spec(at, "ret_arcs_3")["layout"]["meta"]["edges"] == edges
    at.slider(key="ret_tgraph_3").set_value(0.6)
    _run(at)
    edges, t = _edges_caption(at)
    assert edges == len(graph.with_threshold(0.6).edges) and t == "0.60"
    assert _spec(at, "ret_degrees_3")["layout"]["meta"]["nodes"] == graph.n


def test_a_router_file_that_does_not_exist_is_one_line() -> None:
    at = _open([CONFIGS[0], ("mog", {"chunk_size": 40, "levels": 2, "router": "/no/such/router.npz"})])
    job = _search(at)
    assert job.state == "failed"
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "\n" not in errors[0]
    assert errors[0].startswith("B: router file") and "does not exist" in errors[0]
    at.text_area(key="ret_paste").set_value(EXCERPT)  # the rest of the page goes on
    at.button(key="ret_mark").click()
    _run(at)
    assert any("Marked: 1 range" in c.value for c in at.caption)


def test_compare_says_a_retriever_shows_its_finest_units() -> None:
    entries = [ConfigEntry(i, "AB"[i], normalized_config(n, p)) for i, (n, p) in enumerate(CONFIGS[:3:2])]
    at = open_page("pages/compare.py", Document.from_text(TEXT, source="lights-short.md"), entries)
    notes = [c.value for c in at.caption if c.value.startswith("A retriever, not a chunker")]
    assert len(notes) == 1 and "finest units" in notes[0] and "Retrieval and Benchmark pages" in notes[0]
