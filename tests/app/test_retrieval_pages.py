"""The Retrieval and Benchmark pages with ``AppTest``: real embedded Chroma, the bundled MiniLM, background jobs.

Chroma lives in a data folder of this module (``CHUNKLAB_DATA_DIR``); its ``models`` and
``tokenizers`` folders link to the shared test data folder, so SmolLM2's one-time
conversion is not repeated. Collections and embeddings made by one test are reused by the
next (the store reuses complete collections; embeddings come from the output cache).
"""

from __future__ import annotations

import base64
import html
import json
import re
import socket

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from backend.chunkers import run_chunker
from backend.chunking import ConfigEntry
from backend.metrics.scores import information_support
from backend.retrieval.metrics import agreement_matrices, find_excerpt, score_retrieval
from backend.text.document import Document
from components.state import normalized_config
from tests.conftest import ROOT
from tests.support.apptest import isolated_lab, open_page, wait_job
from tests.support.apptest import run as _run

DATA = ROOT / "tests" / "data" / "retrieval"
_LIGHTS = (DATA / "corpora" / "lighthouses.md").read_text(encoding="utf-8")
# The lighthouse corpus with markup in the paragraph the query retrieves: it must be shown escaped.
TEXT = _LIGHTS.replace("for the purpose.", "for the purpose. A <script>x</script> & <b>bold</b> note.", 1)
QUERY = "How was the granite brought to the headland?"
EXCERPT = "The granite was quarried inland and carried to the headland on a narrow railway"
CONFIGS = (("recursive", {"chunk_size": 40}), ("fixed_token", {"chunk_size": 60, "chunk_overlap": 20}))
COLORS = ("#2563eb", "#d97706")  # CONFIG_COLORS of uids 0 and 1
@pytest.fixture(scope="module", autouse=True)
def lab_env(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("retrieval-data")) as data:
        yield data


def _configs():
    return [
        ConfigEntry(i, "AB"[i], normalized_config(name, params)) for i, (name, params) in enumerate(CONFIGS)
    ]


def _open(page: str, doc: Document | None = None) -> AppTest:
    return open_page(page, doc, _configs())


def _wait(at: AppTest, key: str, timeout: float = 150) -> object:
    assert at.session_state[key].thread is not None  # it runs in a background thread, not in the page run
    return wait_job(at, key, timeout)


def _frames(at: AppTest, column: str) -> list:
    return [d.value for d in at.dataframe if column in d.value.columns]


_HIT_ROW = re.compile(
    r'<td class="rk">(\d+)</td><td class="tx">[^<]*</td><td class="nm">([\d.]+)<br>[^<]*<br>([\d,]+)–([\d,]+)</td>'
)


def _hit_tables(at: AppTest) -> list[dict[str, list]]:
    """Each top-k table the page shows (HTML), as columns rank, distance, start and end."""
    tables = []
    for h in at.html:
        if 'class="rt-hits"' in h.value:
            rows = [
                (int(r), float(d), int(s.replace(",", "")), int(e.replace(",", "")))
                for r, d, s, e in _HIT_ROW.findall(h.value)
            ]
            tables.append({k: [row[i] for row in rows] for i, k in enumerate(("rank", "distance", "start", "end"))})
    return tables


def _search(at: AppTest, query: str = QUERY, k: int = 3) -> object:
    at.text_input(key="ret_query").set_value(query)
    at.number_input(key="ret_k").set_value(k)
    at.button(key="ret_search").click()
    _run(at)
    return _wait(at, "ret_search_job")


def _mark(at: AppTest, text: str) -> None:
    at.text_area(key="ret_paste").set_value(text)
    at.button(key="ret_mark").click()
    _run(at)


def _doc() -> Document:
    return Document.from_text(TEXT, source="lights.md")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    return np.asarray(value, dtype=float)


# --- Retrieval ----------------------------------------------------------------------------------


def test_live_query_matches_a_brute_force_search_and_scores_the_marked_answer() -> None:
    from backend.models.embedder import load_embedder

    doc = _doc()
    at = _open("pages/retrieval.py", doc)
    assert [t.value for t in at.title] == ["Retrieval"]
    job = _search(at)
    assert job.state == "done", job.error

    # Top 3 of each configuration, side by side: the same chunks and distances as an exhaustive cosine search.
    emb = load_embedder(None)
    q = emb.embed([QUERY])[0]
    frames = _hit_tables(at)
    assert len(frames) == 2
    chunkings = {}
    for (tag, (name, params)), frame in zip(zip("AB", CONFIGS), frames):
        ch = chunkings[tag] = run_chunker(doc, normalized_config(name, params))
        sims = emb.embed([c.text for c in ch.chunks]) @ q
        top = np.argsort(-sims)[:3]
        assert list(frame["rank"]) == [1, 2, 3]
        assert list(zip(frame["start"], frame["end"])) == [(ch.chunks[i].start, ch.chunks[i].end) for i in top]
        assert np.allclose(frame["distance"], 1 - sims[top], atol=1e-3)

    # The document view: each configuration's colour, rank badges, the markup escaped.
    view = "".join(h.value for h in at.get_by_key("ret_view").html)
    for tag, color in zip("AB", COLORS):
        assert f"{color}40" in view or f"{color}55" in view
        assert f">{tag}1</span>" in view
    assert "<script>" not in view and "<b>" not in view
    shown = html.unescape(re.sub(r"<[^>]+>", "", view))  # the text the reader sees
    assert "A <script>x</script> & <b>bold</b> note." in shown

    # The answer pasted with other whitespace is found; the scores are the report's metrics of what is shown.
    _mark(at, EXCERPT.replace(" inland ", "   inland\n").replace("headland", "\theadland"))
    assert not at.error, [e.value for e in at.error]
    match = find_excerpt(doc.text, EXCERPT)
    assert match is not None and match.exact
    excerpt = (match.start, match.end)
    assert f"{match.start:,}–{match.end:,}" in " ".join(c.value for c in at.caption)
    (scores,) = _frames(at, "precision_omega")
    assert list(scores.index) == ["A", "B"]
    for tag, frame in zip("AB", frames):
        want = score_retrieval(
            list(zip(frame["start"], frame["end"])), [(c.start, c.end) for c in chunkings[tag].chunks], [excerpt]
        )
        for m in ("recall", "precision", "precision_omega", "iou"):
            assert scores.loc[tag, m] == pytest.approx(100 * getattr(want, m))
    assert "rt-ans" in "".join(h.value for h in at.get_by_key("ret_view").html)

    # Saved into the session's question set, with the exact excerpt.
    at.button(key="ret_save").click()
    _run(at)
    qset = at.session_state["ret_qset"]
    (saved,) = qset.questions
    assert saved.question == QUERY and saved.corpus_id == "lights"
    assert [(r.start, r.end, r.content) for r in saved.references] == [(*excerpt, EXCERPT)]

    # An excerpt that is not in the document: one line, and the rest of the page stays.
    _mark(at, "This sentence is nowhere in the document.")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "is not in the document" in errors[0] and "\n" not in errors[0]
    assert _frames(at, "precision_omega")

    # The Benchmark page runs the session's set (its collections are the ones indexed above).
    at.switch_page("pages/benchmark.py")
    _run(at)
    assert any(c.value.startswith("1 question(s) (hand\\-written) over 1 corpus") for c in at.caption)  # hand-marked
    at.button(key="bm_run").click()
    _run(at)
    job = _wait(at, "bm_job")
    assert job.state == "done", job.error
    bm = job.result.benchmark
    assert bm.questions == 1 and bm.corpora == ("lights",)
    (table,) = _frames(at, "chunker")
    assert list(table.index) == ["A", "B"]


def test_coming_back_the_query_box_holds_the_query_of_the_results_shown() -> None:
    at = _open("pages/retrieval.py", _doc())
    job = _search(at, k=2)
    assert job.state == "done", job.error
    at.switch_page("pages/document.py")
    _run(at)
    at.switch_page("pages/retrieval.py")
    _run(at)
    assert at.text_input(key="ret_query").value == QUERY == at.session_state["ret_search_job"].meta["query"]
    assert at.number_input(key="ret_k").value == 2
    assert [len(t["rank"]) for t in _hit_tables(at)] == [2, 2]  # the results of that query, still shown
    assert any(QUERY in c.value for c in at.caption)


def test_a_chroma_server_that_is_down_is_one_line_and_the_page_keeps_working(monkeypatch) -> None:
    port = _free_port()
    monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CHROMA_PORT", str(port))
    monkeypatch.setenv("CHROMA_TIMEOUT", "2")
    at = _open("pages/retrieval.py", _doc())
    assert any(f"server at 127.0.0.1:{port}" in c.value for c in at.caption)
    job = _search(at)
    assert job.state == "failed"
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0] and "\n" not in errors[0]
    _mark(at, EXCERPT)  # marking needs no store
    assert any("Marked: 1 range" in c.value for c in at.caption)


def test_cp_of_each_configuration_runs_in_a_model_job() -> None:
    from backend.models.scorer import load_scorer

    doc = _doc()
    at = _open("pages/retrieval.py", doc)
    _search(at, k=2)
    _mark(at, EXCERPT)
    answer = "On a narrow railway."
    at.text_input(key="ret_answer").set_value(answer)
    _run(at)
    at.button(key="ret_cp").click()
    _run(at)
    job = _wait(at, "ret_cp_job", timeout=240)
    assert job.state == "done", job.error
    (scores,) = _frames(at, "cp")
    scorer = load_scorer(None)
    for tag, frame in zip("AB", _hit_tables(at)):
        texts = [doc.text[s:e] for s, e in zip(frame["start"], frame["end"])]
        want = information_support(texts, answer, scorer, cache=None)
        assert scores.loc[tag, "cp"] == pytest.approx(want, abs=1e-3)


# --- Benchmark ----------------------------------------------------------------------------------


def test_benchmark_on_an_imported_set_matches_the_backend_and_draws_its_heat_maps() -> None:
    from backend.retrieval.evaluate import evaluate
    from backend.retrieval.questions import load_question_set
    from backend.retrieval.store import open_store

    at = _open("pages/benchmark.py")
    assert [t.value for t in at.title] == ["Benchmark"]
    at.segmented_control(key="bm_source").set_value("Import")
    _run(at)
    at.text_input(key="bm_csv_path").set_value(str(DATA / "questions.csv"))
    at.button(key="bm_load_paths").click()
    _run(at)
    assert not at.error, [e.value for e in at.error]
    at.button(key="bm_run").click()
    _run(at)
    job = _wait(at, "bm_job", timeout=240)
    assert job.state == "done", job.error

    qset = load_question_set(DATA / "questions.csv", DATA / "corpora")
    configs = [normalized_config(n, p) for n, p in CONFIGS]
    want = evaluate(qset, configs, store=open_store())  # the page's collections and embeddings, reused
    (table,) = _frames(at, "chunker")
    assert list(table.index) == ["A", "B"]
    for tag, r in zip("AB", want.results):
        s = r.summary
        assert table.loc[tag, "IoU"] == f"{100 * s.iou_mean:.1f} ± {100 * s.iou_std:.1f}"
        assert table.loc[tag, "Recall"] == f"{100 * s.recall_mean:.1f} ± {100 * s.recall_std:.1f}"
        assert table.loc[tag, "chunks"] == r.chunks
    (per_corpus,) = _frames(at, "corpus")
    assert sorted(set(per_corpus["corpus"])) == ["lighthouses", "sourdough"]

    # (a) questions × configurations, IoU then recall.
    z = _array(_spec(at, "bm_heat_q")["data"][0]["z"])
    assert np.allclose(z, 100 * want.matrix("iou"))
    at.segmented_control(key="bm_heat_metric").set_value("recall")
    _run(at)
    z = _array(_spec(at, "bm_heat_q")["data"][0]["z"])
    assert np.allclose(z, 100 * want.matrix("recall")) and z.shape == (len(qset), 2)

    # (b) agreement on the first corpus, with a tolerance.
    at.slider(key="bm_tolerance").set_value(20)
    _run(at)
    doc = qset.document("lighthouses")
    bounds, overlap = agreement_matrices([run_chunker(doc, c) for c in configs], 20)
    assert np.allclose(_array(_spec(at, "bm_agree_bounds")["data"][0]["z"]), bounds)
    assert np.allclose(_array(_spec(at, "bm_agree_overlap")["data"][0]["z"]), overlap)

    # (c) the coverage strip: one row per configuration and the excerpts.
    strip = _spec(at, "bm_coverage")["data"][0]
    assert strip["y"] == ["A", "B", "excerpts"]
    for key in ("bm_dl_csv", "bm_dl_json", "bm_dl_heat_q", "bm_dl_coverage"):
        at.get_by_key(key)


def test_an_import_with_a_bad_path_is_one_line() -> None:
    at = _open("pages/benchmark.py")
    at.segmented_control(key="bm_source").set_value("Import")
    _run(at)
    at.text_input(key="bm_csv_path").set_value(str(DATA / "missing.csv"))
    at.button(key="bm_load_paths").click()
    _run(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "missing.csv" in errors[0] and "\n" not in errors[0]
    assert at.get_by_key("bm_run").disabled


def _upload(at: AppTest, prefix: str, corpora: list[str]) -> None:
    """Upload the test set's questions.csv and the named corpus files through the shared upload widget."""
    at.file_uploader(key=f"{prefix}_import_csv").set_value(
        ("questions.csv", (DATA / "questions.csv").read_bytes(), "text/csv")
    )
    at.file_uploader(key=f"{prefix}_import_corpora").set_value(
        [(name, (DATA / "corpora" / name).read_bytes(), "text/plain") for name in corpora]
    )
    _run(at)
    at.button(key=f"{prefix}_import").click()
    _run(at)


def test_both_pages_upload_a_chroma_set_through_one_widget() -> None:
    from backend.retrieval.questions import load_question_set

    want = load_question_set(DATA / "questions.csv", DATA / "corpora")
    at = _open("pages/benchmark.py")
    at.segmented_control(key="bm_source").set_value("Import")
    _run(at)
    _upload(at, "bm", ["lighthouses.md"])  # sourdough.txt is missing: one line naming it
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "'sourdough'" in errors[0] and "\n" not in errors[0]
    _upload(at, "bm", ["lighthouses.md", "sourdough.txt"])
    assert not at.error and at.session_state["bm_imported"] == want
    assert dict(at.session_state["bm_imported"].suffixes) == {"lighthouses": ".md", "sourdough": ".txt"}

    # The Retrieval page's import adds the same set to the session's question set.
    at = _open("pages/retrieval.py", _doc())
    _upload(at, "ret", ["lighthouses.md", "sourdough.txt"])
    assert not at.error and at.session_state["ret_qset"] == want


def test_generation_errors_never_show_the_api_key(monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "0")
    monkeypatch.setenv("CHUNKLAB_LLM_TIMEOUT", "5")
    secret = "sk-chunklab-test-SECRET-4242"
    at = _open("pages/benchmark.py", _doc())
    at.segmented_control(key="bm_source").set_value("Generated")
    _run(at)
    at.text_input(key="bm_gen_url").set_value(f"http://127.0.0.1:{_free_port()}/v1")
    at.text_input(key="bm_gen_key").set_value(secret)
    at.text_input(key="bm_gen_model").set_value("some-model")
    at.number_input(key="bm_gen_n").set_value(1)
    at.button(key="bm_gen_go").click()
    _run(at)
    assert not [w for w in at.warning if "weaker" in w.value]  # an API is configured: no fallback warning
    job = _wait(at, "bm_gen_job")
    assert job.state == "failed"
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "\n" not in errors[0], (errors, job.error, [x.value for x in at.subheader])
    shown = [e.value for kind in (at.error, at.warning, at.caption, at.markdown, at.text, at.info) for e in kind]
    assert not any(secret in s for s in shown)
    assert secret not in repr(job.meta) and secret not in (job.error or "")


def test_local_generation_is_weak_and_refilters_live() -> None:
    at = _open("pages/benchmark.py", _doc())
    at.segmented_control(key="bm_source").set_value("Generated")
    _run(at)
    at.toggle(key="bm_gen_local").set_value(True)
    at.number_input(key="bm_gen_n").set_value(1)
    at.session_state["bm_exc"] = 0.0  # the thresholds in force stop generation once one question passes
    at.button(key="bm_gen_go").click()
    _run(at)
    job = _wait(at, "bm_gen_job", timeout=240)
    assert job.state == "done", job.error
    gen = job.result
    assert gen.weak and any("weaker" in w.value for w in at.warning)
    assert len(gen.candidates) >= 1
    assert _spec(at, "bm_hist_dup")["layout"]["shapes"][0]["x0"] == 0.7  # the report's default
    assert _spec(at, "bm_hist_exc")["layout"]["shapes"][0]["x0"] == 0.0
    (table,) = _frames(at, "dropped_because")
    assert len(table) == len(gen.candidates)

    # A stricter excerpt threshold drops every candidate, without a model call.
    at.slider(key="bm_exc").set_value(1.0)
    _run(at)
    assert any(c.value.startswith("**0** kept") for c in at.caption)
    (table,) = _frames(at, "dropped_because")
    assert not table["kept"].any() and all("below 1.00" in r for r in table["dropped_because"])
    assert _spec(at, "bm_hist_exc")["layout"]["shapes"][0]["x0"] == 1.0
    at.slider(key="bm_exc").set_value(-1.0)
    at.slider(key="bm_dup").set_value(1.0)
    _run(at)
    assert any(c.value.startswith(f"**{len(gen.candidates)}** kept") for c in at.caption)
    at.button(key="bm_gen_add").click()
    _run(at)
    assert len(at.session_state["ret_qset"]) == len(gen.candidates)


def test_a_model_backed_configuration_is_never_chunked_inline() -> None:
    """semantic needs the embedder: without a Compare run it is a note, and the page starts no model work."""
    import uuid

    doc = Document.from_text(f"Retrieval {uuid.uuid4().hex[:8]}. " + TEXT[:1500], source="inline.md")
    entries = _configs() + [ConfigEntry(2, "C", normalized_config("semantic", {}))]
    at = open_page("pages/retrieval.py", doc, entries)
    at.multiselect(key="ret_configs").set_value([e.uid for e in entries])
    _run(at)
    captions = " ".join(c.value for c in at.caption)
    assert "C needs a model run: open it on the Compare page first" in captions
    for key in ("ret_search_job", "ret_cp_job", "cmp_lm_job", "cmp_embedder_job", "cmp_chat_job"):  # nothing started a model run
        assert key not in at.session_state or not at.session_state[key].running



def test_benchmark_runs_on_a_bundled_sample_set() -> None:
    from backend.retrieval.evaluate import evaluate
    from backend.retrieval.questions import load_sample_question_set
    from backend.retrieval.store import open_store

    at = _open("pages/benchmark.py")
    at.segmented_control(key="bm_source").set_value("Bundled sample set")
    _run(at)
    assert at.selectbox(key="bm_sample").options == [
        "English narrative — The Clockmaker of Harrow Lane",
        "English technical guide (Markdown) — Kestrel Object Store",
    ]
    at.selectbox(key="bm_sample").set_value("technical")
    _run(at)
    assert "12 question(s) (hand\\-written) over 1 corpus/corpora: technical\\_kestrel" in [c.value for c in at.caption]
    assert not at.get_by_key("bm_run").disabled
    at.button(key="bm_run").click()
    _run(at)
    job = _wait(at, "bm_job", timeout=240)
    assert job.state == "done", job.error
    assert job.meta["qset"] == load_sample_question_set("technical")

    configs = [normalized_config(n, p) for n, p in CONFIGS]  # recursive and fixed_token: no model but the embedder
    want = evaluate(load_sample_question_set("technical"), configs, store=open_store())
    (table,) = _frames(at, "chunker")
    for tag, r in zip("AB", want.results):
        assert table.loc[tag, "IoU"] == f"{100 * r.summary.iou_mean:.1f} ± {100 * r.summary.iou_std:.1f}"
        assert table.loc[tag, "chunks"] == r.chunks
    assert all(r.summary.recall_mean > 0 for r in want.results)


def test_a_configuration_added_on_compare_is_picked_and_an_unpicked_one_stays_unpicked() -> None:
    at = _open("pages/retrieval.py", _doc())
    assert at.multiselect(key="ret_configs").value == [0, 1]  # every configuration on a first visit
    at.multiselect(key="ret_configs").unselect(1)
    _run(at)
    at.switch_page("pages/compare.py")
    _run(at)
    at.session_state["configs"] = [*at.session_state["configs"], ConfigEntry(2, "C", normalized_config("sentence", {}))]
    at.session_state["configs_next_uid"] = 3
    _run(at)
    at.switch_page("pages/retrieval.py")
    _run(at)
    assert at.multiselect(key="ret_configs").value == [0, 2]
    at.session_state["configs"] = at.session_state["configs"][1:]  # A removed on Compare: it drops out
    _run(at)
    assert at.multiselect(key="ret_configs").value == [2]
