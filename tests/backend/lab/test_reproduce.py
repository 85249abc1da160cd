"""``reproduce chroma``'s work (:mod:`backend.lab.reproduce`): the paper's MiniLM rows beside ours, kept and reused.

Run in-process on a small Chroma-format folder (4 questions on the first 4,000 characters of the narrative sample)
with the shared embedder and store.
"""

from __future__ import annotations

import json
import math
import time

import pytest

from backend.errors import ParameterError
from backend.lab.reproduce import ROW_IDS, ChromaRequest, reproduce_chroma, reproduction_text, select_rows
from backend.retrieval.evaluate import METRICS
from tests.support.chroma_folder import chroma_folder

# The report's all-MiniLM-L6-v2 table (seed chroma-evaluating-chunking-strategies.txt, lines 315-322):
# recall, precision, precision-Ω, IoU in percent, written here apart from the module's table.
PAPER = {
    "recursive-250-125": (78.7, 4.9, 21.9, 4.9),
    "tokentext-250-125": (82.4, 3.6, 11.4, 3.5),
    "recursive-250-0": (78.5, 5.4, 26.7, 5.4),
    "tokentext-250-0": (77.1, 3.3, 16.4, 3.3),
    "recursive-200-0": (75.7, 6.5, 31.2, 6.5),
    "tokentext-200-0": (76.6, 4.1, 19.1, 4.1),
    "cluster-250": (77.3, 6.1, 28.6, 6.0),
    "cluster-200": (75.2, 7.2, 33.6, 7.2),
}
CONFIGS = {
    "recursive-250-125": "recursive chunk_overlap=125 chunk_size=250",
    "tokentext-250-125": "fixed_token chunk_overlap=125 chunk_size=250",
    "cluster-250": "cluster cap=pieces max_chunk_size=250",
}


class CountingEmbedder:
    """The shared embedder, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner = inner
        self.info = inner.info
        self.texts = 0

    def embed(self, texts, *, progress=None):
        self.texts += len(texts)
        return self.inner.embed(texts, progress=progress)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return chroma_folder(tmp_path_factory.mktemp("chroma-set"))


@pytest.fixture(scope="module")
def first(folder, embedder, store, tmp_path_factory):
    """All eight rows, computed once into an output folder of their own: (result, out, seconds)."""
    out = tmp_path_factory.mktemp("rows")
    t0 = time.perf_counter()
    result = reproduce_chroma(ChromaRequest(str(folder), str(out)), embedder=embedder, store=store)
    return result, out, time.perf_counter() - t0


def test_every_row_is_beside_the_papers_numbers(first, folder):
    result, _, _ = first
    assert [r.paper.id for r in result.rows] == list(ROW_IDS) == list(PAPER)
    for r in result.rows:
        assert not r.reused
        assert r.paper.mean == PAPER[r.paper.id]
        for i, m in enumerate(METRICS):
            assert 0.0 <= r.ours(m) <= 100.0 and 0.0 <= r.ours_std(m) <= 100.0
            assert r.diff(m) == pytest.approx(r.ours(m) - PAPER[r.paper.id][i])
    assert {r.paper.id: r.paper.config.spec for r in result.rows if r.paper.id in CONFIGS} == CONFIGS
    assert result.question_set.questions == 4 and result.question_set.corpora == ("narrative_clockmaker",)
    assert result.embedder == "all-MiniLM-L6-v2"
    text = reproduction_text(result)
    assert str(folder / "questions_df.csv") in text and "4 questions on 1 corpus (narrative_clockmaker)" in text
    assert "embedder all-MiniLM-L6-v2" in text and "5 chunks retrieved" in text and "472 questions" in text
    row = next(line for line in text.splitlines() if line.startswith("recursive-250-125"))
    assert "78.7" in row and "21.9" in row  # the paper's recall and precision-Ω beside ours


def test_the_json_document_has_ours_paper_and_diff_per_metric(first):
    result, _, _ = first
    doc = json.loads(json.dumps(result.to_json()))
    assert doc["embedder"]["name"] == "all-MiniLM-L6-v2" and doc["retrieve"] == 5
    assert doc["question_set"]["questions"] == 4 and len(doc["question_set"]["digest"]) == 64
    assert [r["id"] for r in doc["rows"]] == list(PAPER)
    for r in doc["rows"]:
        for i, m in enumerate(METRICS):
            cell = r["metrics"][m]
            assert cell["paper"] == PAPER[r["id"]][i]
            assert math.isclose(cell["diff"], cell["ours"] - cell["paper"], abs_tol=1e-9)


def test_a_rerun_reads_every_row_back_without_embedding(first, folder, embedder, store):
    result, out, seconds = first
    files = sorted(out.glob("*.json"))
    assert len(files) == 8
    mtimes = [f.stat().st_mtime_ns for f in files]
    counting = CountingEmbedder(embedder)
    t0 = time.perf_counter()
    again = reproduce_chroma(ChromaRequest(str(folder), str(out)), embedder=counting, store=store)
    took = time.perf_counter() - t0
    assert again.reused == 8 and all(r.reused for r in again.rows)
    assert counting.texts == 0
    assert [f.stat().st_mtime_ns for f in sorted(out.glob("*.json"))] == mtimes
    assert [r.summary for r in again.rows] == [r.summary for r in result.rows]
    assert took < max(1.0, seconds / 4)
    assert f"reused 8 of 8 rows from {out}" in reproduction_text(again)


def test_another_question_set_does_not_reuse_the_rows(first, tmp_path, embedder, store):
    _, out, _ = first
    other = chroma_folder(tmp_path / "other", slice(0, 3))  # one question fewer
    before = set(out.glob("*.json"))
    result = reproduce_chroma(ChromaRequest(str(other), str(out), rows=("recursive-200-0",)),
                              embedder=embedder, store=store)
    assert [r.paper.id for r in result.rows] == ["recursive-200-0"] and result.reused == 0
    assert result.question_set.questions == 3
    assert len(set(out.glob("*.json")) - before) == 1  # a row file of its own beside the first set's


def test_rows_are_picked_by_id_in_the_papers_order():
    assert [r.id for r in select_rows(["cluster-250", "recursive-250-125"])] == ["recursive-250-125", "cluster-250"]
    assert len(select_rows(None)) == 8
    with pytest.raises(ParameterError, match="unknown row 'cluster-400'.*tokentext-200-0"):
        select_rows(["cluster-400"])
