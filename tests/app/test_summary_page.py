"""The Summary page with ``AppTest``: its numbers are the Compare, Quality and Benchmark pages' for the same session.

Two configurations on the bundled narrative sample. The quality metrics are scored by the
Summary's own button (the Quality page's job, with the bundled SmolLM2 and MiniLM) on the
sample's opening paragraph, so the language model reads about a thousand tokens; the
benchmark runs the bundled ``sample:narrative`` question set over the whole sample. Each
page then shows the numbers the Summary shows, read back from what it computed: the very
same floats. The output cache and Chroma live in this module's data folder.
"""

from __future__ import annotations

import math
import re

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunkers import run_chunker
from backend.chunking import ConfigEntry
from backend.jobs import Job
from backend.loaders import load_bytes
from backend.metrics.estimate import QualityEstimates, overlap, stratified_order
from backend.metrics.report import quality_row
from backend.metrics.scores import node_pairs, partial_table
from backend.report.summary import Summary, verdict
from backend.samples import get_sample, load_sample
from backend.text.document import Document
from components.state import normalized_config
from components.summary import NOT_COMPUTED, QUALITY_COLUMNS, RETRIEVAL_COLUMNS, summary_frame
from tests.support.apptest import open_page, run_sample_benchmark, wait_job
from tests.support.datadir import shared_models_data_dir
from tests.support.apptest import run as _run
from tests.support.quality import random_table

CONFIGS = (
    ("recursive", {"chunk_size": 100, "chunk_overlap": 0}),
    ("fixed_token", {"chunk_size": 60, "chunk_overlap": 0}),
)


@pytest.fixture(scope="module", autouse=True)
def summary_env(tmp_path_factory):
    """A data folder (Chroma) and an output cache of this module; the default models."""
    mp = pytest.MonkeyPatch()
    data = shared_models_data_dir(tmp_path_factory.mktemp("summary-data"))
    mp.setenv("CHUNKLAB_DATA_DIR", str(data))
    mp.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path_factory.mktemp("summary-cache")))
    for name in ("CHROMA_HOST", "CHROMA_PORT", "CHUNKLAB_LM", "CHUNKLAB_EMBEDDER", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        mp.delenv(name, raising=False)
    yield data
    mp.undo()


def _entries() -> list[dict]:
    return [ConfigEntry(i, "AB"[i], normalized_config(n, p)) for i, (n, p) in enumerate(CONFIGS)]


def _opening() -> Document:
    """The narrative sample's title and first paragraph (about 110 tokens): three chunks and two."""
    text = load_sample("narrative").text
    return Document.from_text(text[: text.index("\n\n", 400)], source="narrative-opening.txt")


def _shown(at: AppTest) -> Summary:
    return at.session_state["sum_shown"]


def _frame(at: AppTest, column: str):
    (frame,) = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def _wait(at: AppTest, key: str, timeout: float = 240):
    job = at.session_state[key]
    assert job.thread is not None  # a background job, not a page run
    return wait_job(at, key, timeout)


def _assert_compare_numbers(at: AppTest, summary: Summary) -> None:
    """The Compare page's statistics table holds the Summary's chunks, tokens and time."""
    at.switch_page("pages/compare.py")
    _run(at)
    stats = _frame(at, "std_tokens")
    for row in summary.rows:
        v = row.values
        assert (v["chunks"], v["tokens_mean"], v["tokens_std"]) == (
            stats.loc[row.tag, "chunks"], stats.loc[row.tag, "mean_tokens"], stats.loc[row.tag, "std_tokens"]
        )
        assert math.isclose(v["seconds"] * 1000, stats.loc[row.tag, "time_ms"], rel_tol=1e-12)


def test_summary_before_anything_is_computed_and_navigation():
    at = open_page("pages/summary.py", load_sample("narrative"), _entries())
    summary = _shown(at)
    assert [r.tag for r in summary.rows] == ["A", "B"]
    assert summary.missing() == {"quality": ["A", "B"], "retrieval": ["A", "B"]}
    table = _frame(at, "ds")  # "Chunks and quality"; no retrieval table before a benchmark on this document
    assert list(table.columns) == ["configuration", *QUALITY_COLUMNS]
    assert (table[["bc", "cs", "ds"]] == "not computed yet").all().all()
    assert not [d for d in at.dataframe if "iou" in d.value.columns]
    assert any(i.value.replace("\\", "").startswith("No retrieval numbers for this document") for i in at.info)
    assert table.loc["A", "chunks"] == f"{summary.row('A').values['chunks']:.0f}"
    assert any("Not computed yet" in m.value for m in at.markdown)
    labels = [b.label for b in at.button]
    assert any(label.startswith("Compute BC, CS and DS for A, B with ") for label in labels)
    assert "Run the benchmark" in labels
    assert at.selectbox(key="sum_qset").value == "sample:narrative"  # the sample's own set
    assert at.get_by_key("sum_strip") is not None and at.get_by_key("sum_hist_A") is not None
    _assert_compare_numbers(at, summary)


def test_summary_quality_equals_the_quality_and_compare_pages():
    at = open_page("pages/summary.py", _opening(), _entries())
    assert "sum_quality_job" not in at.session_state
    at.button(key="sum_quality_run").click()
    _run(at)
    job = _wait(at, "sum_quality_job")
    assert job.state == "done", job.error
    _run(at)
    summary = _shown(at)
    assert "quality" not in summary.missing()
    assert all(summary.row(t).values[m] is not None for t in "AB" for m in ("bc", "cs", "ds"))

    at.switch_page("pages/quality.py")
    _run(at)
    at.multiselect(key="qual_metrics").set_value(["bc", "cs", "ds"])  # CS too, on the same pair window (3)
    _run(at)
    assert "qual_job" not in at.session_state  # read from what the Summary's job scored: no job
    quality = _frame(at, "cs_complete")
    for t in "AB":
        v = summary.row(t).values
        assert (v["bc"], v["cs"], v["ds"]) == (
            quality.loc[t, "bc"], quality.loc[t, "cs_complete"], quality.loc[t, "ds"]
        )
    _assert_compare_numbers(at, summary)

    # The Quality page's K is the Summary's: moving it changes CS on both alike.
    at.switch_page("pages/quality.py")
    _run(at)
    at.slider(key="qual_K").set_value(0.3)
    _run(at)
    quality = _frame(at, "cs_complete")
    at.switch_page("pages/summary.py")
    _run(at)
    moved = _shown(at)
    assert moved.settings["K"] == 0.3
    assert [moved.row(t).values["cs"] for t in "AB"] == [quality.loc[t, "cs_complete"] for t in "AB"]


def test_summary_retrieval_equals_the_benchmark_page():
    at = open_page("pages/summary.py", load_sample("narrative"), _entries())
    at.button(key="sum_bm_run").click()
    _run(at)
    job = _wait(at, "bm_job")
    assert job.state == "done", job.error
    assert job.meta["qset_name"] == "sample:narrative" and job.meta["tags"] == ["A", "B"]
    _run(at)
    summary = _shown(at)
    assert "retrieval" not in summary.missing()
    bm = job.result.benchmark
    for t, r in zip("AB", bm.results):
        v = summary.row(t).values
        assert (v["recall"], v["precision"], v["iou"], v["precision_omega"]) == (
            r.summary.recall_mean, r.summary.precision_mean, r.summary.iou_mean, r.summary.precision_omega_mean
        )
    assert summary.settings["question_set"] == "sample:narrative" and summary.settings["question_set_size"] == 12
    assert summary.retrieval.questions == 12 and summary.elsewhere is None
    # The IoU line: a called best with its paired difference, or the configurations that cannot be told apart.
    iou = summary.paired("iou")
    assert iou.questions == 12 and set(iou.differences) == {"A", "B"} - {iou.best}
    said = (f"{iou.best} has the highest IoU (" if len(iou.leaders) == 1
            else "A and B cannot be told apart on IoU over these 12 questions (difference ".replace(
                "A and B", " and ".join(iou.leaders)))
    lines = [m.value for m in at.markdown if said in m.value.replace("\\", "")]
    assert len(lines) == 1
    assert [summary.row(t).cell("iou") for t in "AB"] == [summary.row(t).interval("iou").text() for t in "AB"]
    assert list(_frame(at, "iou").columns) == ["configuration", *RETRIEVAL_COLUMNS]

    at.switch_page("pages/benchmark.py")  # the Benchmark page shows the same run
    _run(at)
    table = _frame(at, "chunker")
    for t in "AB":
        v = summary.row(t).values
        assert table.loc[t, "IoU"].startswith(f"{100 * v['iou']:.1f} ± ")
        assert table.loc[t, "Recall"].startswith(f"{100 * v['recall']:.1f} ± ")
    _assert_compare_numbers(at, summary)


def test_summary_report_button_builds_the_report():
    pytest.importorskip("backend.report.html", reason="the one-file report lands with its own branch")
    from backend.chunkers import run_chunker
    from backend.report.html import report_html

    doc = load_sample("narrative")
    at = open_page("pages/summary.py", doc, _entries())
    assert at.get_by_key("sum_report") is not None
    summary = _shown(at)
    page = report_html(summary, doc, {e.tag: run_chunker(doc, e.config) for e in _entries()})
    assert doc.source in page


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d[\d,]*(?:\.\d+)?%?", text))


def test_a_benchmark_on_the_sample_set_never_enters_an_uploaded_pdfs_row_or_verdict():
    """The issue's walk: a PDF of the user's (the bundled technical PDF's bytes under another name), the bundled
    narrative set benchmarked → the PDF's rows and verdict carry no retrieval number; a titled section does."""
    pdf = load_bytes(get_sample("technical-pdf").path.read_bytes(), "quarterly-report.pdf")
    at = open_page("pages/benchmark.py", pdf, _entries())
    job = run_sample_benchmark(at, "narrative")
    assert job.state == "done", job.error
    bm = job.result.benchmark

    at.switch_page("pages/summary.py")
    _run(at)
    assert not at.exception
    summary = _shown(at)
    assert summary.retrieval is None
    assert all(summary.row(t).values[m] is None for t in "AB" for m in RETRIEVAL_COLUMNS)
    # This document's table: no retrieval column, no retrieval number; the line says why.
    assert not [d for d in at.dataframe if "iou" in d.value.columns and "bc" in d.value.columns]
    assert any(i.value.replace("\\", "").startswith("No retrieval numbers for this document (quarterly-report.pdf) yet")
               for i in at.info)
    # The verdict: nothing about IoU or recall, every number a cell of the table, what is missing named.
    lines = [line for m in at.markdown for line in m.value.split("\n") if line.startswith("- ")]
    assert lines and not any("IoU (" in line or "recall (" in line for line in lines)
    assert [line[2:].replace("\\", "") for line in lines] == verdict(summary)
    table = " ".join(summary_frame(summary).to_numpy().ravel())
    assert all(n in _numbers(table) for line in lines for n in _numbers(line))
    assert summary_frame(summary).loc["A", "iou"] == NOT_COMPUTED
    # The other corpus: its own titled section, with the benchmark's numbers.
    heading = "Retrieval on the bundled English narrative set, 1 corpus — not this document"
    assert summary.elsewhere.heading == heading and any(h.value == heading for h in at.subheader)
    (other,) = [d.value for d in at.dataframe if "iou" in d.value.columns]
    for t, r in zip("AB", bm.results):  # each mean with its 95% interval over those questions
        assert other.loc[t, "iou"] == summary.elsewhere.rows["AB".index(t)].interval("iou").text()
        assert other.loc[t, "iou"].startswith(f"{100 * r.summary.iou_mean:.1f}% [")
        assert other.loc[t, "recall"].startswith(f"{100 * r.summary.recall_mean:.1f}% [")
    # "Run the benchmark" offers no set on another document (none is on this one).
    assert "sum_qset" not in [getattr(w, "key", None) for w in at.selectbox]
    assert "Run the benchmark" not in [b.label for b in at.button]


def test_a_running_scoring_job_shows_the_summary_with_its_estimates():
    """While "Compute BC, CS and DS" runs: the verdict and the table with ± estimates under its bar."""
    text = _opening().text
    doc = Document.from_text("\n\n".join([text] * 3), source="estimates.txt")  # six chunks and more; not cached
    at = open_page("pages/summary.py", doc, _entries())
    at.button(key="sum_quality_run").click()
    _run(at)
    started = at.session_state["sum_quality_job"]
    started.cancel()
    assert started.wait(120)
    tables, estimates = [], []
    chunkings = [run_chunker(doc, e.config) for e in _entries()]
    for seed, ch in enumerate(chunkings):
        n = len(ch.chunks)
        full = random_table(seed + 3, n)
        rows = [i for i in stratified_order(n, seed) if i < n - 1][:3]  # three boundaries: a bounded interval
        cond = {(i, j): float(full.cond[i, j]) for v in rows for i, j in node_pairs(n, v)}
        tables.append(partial_table(n, dict(enumerate(map(float, full.uncond))), cond, complete=True, window=None,
                                    sample=rows))
        estimates.append(dict(quality_row(ch.token_counts, table=tables[-1]).estimates))
    partial = QualityEstimates(tuple(estimates), 1, 10, tables=tuple(tables), vectors=(None, None))
    at.session_state["sum_quality_job"] = Job(started.title, dict(started.meta), partial=partial)
    _run(at)
    # The table under the bar (the page's own table above stays as computed: exact numbers only).
    for _ in range(3):  # the progress fragment's one-second timer may be redrawing it: look again after a run
        live = [f for f in (d.value for d in at.dataframe) if "bc" in f.columns and "±" in "".join(f["bc"])]
        if live:
            break
        _run(at)
    (live,) = live
    a, b = (est["bc"] for est in estimates)
    assert list(live["bc"]) == [a.label(), b.label()]
    assert all(" pairs)" in cell for cell in live["cs"])
    texts = " ".join(m.value for m in at.markdown).replace("\\", "")  # the verdict is Markdown-escaped
    assert overlap(a, b) and a.estimate < b.estimate  # B's point estimate is higher, but the intervals overlap
    assert f"A and B cannot be told apart yet (BC {a.value_text()} vs {b.value_text()})." in texts
    assert "boundaries are clearer" not in texts
