"""The Corpus page with ``AppTest``: a real corpus run in a background job (the bundled models), live rows, resume.

The page runs in its own data folder (:func:`~tests.support.apptest.isolated_lab`: the output
folders, the output cache), so what an earlier test scored is not found in the cache by this one.
"""

from __future__ import annotations

import shutil
import time

import pytest

from backend.samples import SAMPLES_DIR
from tests.support.apptest import isolated_lab, open_page, run, wait_job

JOB = "corpus_job"
SAMPLES = ("narrative_clockmaker.txt", "technical_kestrel.md", "chinese_teahouse.txt")
N_DOCUMENTS = 200
# A document of the first-rows test: about this many characters (a few paragraphs of a sample). Enough for
# several chunks in each configuration (so DS scores pairs); longer documents only make each one slower.
SHORT_CHARS = 1_500


@pytest.fixture(scope="module", autouse=True)
def lab_env(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("corpus-data")) as data:
        yield data


def _make_corpus(root, n: int, chars: int | None = None):
    """``n`` documents made from the bundled samples (each a rotation of a sample's paragraphs), plus two bad files.

    ``chars``: each document is cut after the paragraph that reaches this many characters (None: whole).
    """
    root.mkdir(parents=True)
    texts = [(SAMPLES_DIR / s).read_text(encoding="utf-8").split("\n\n") for s in SAMPLES]
    for i in range(n):
        paragraphs = texts[i % len(texts)]
        k = (i // len(texts)) % len(paragraphs)
        ext = ".md" if i % len(texts) == 1 else ".txt"
        rotated = paragraphs[k:] + paragraphs[:k]
        if chars is not None:
            kept, size = [], 0
            for p in rotated:
                kept.append(p)
                size += len(p) + 2
                if size >= chars:
                    break
            rotated = kept
        (root / f"doc{i:03d}{ext}").write_text("\n\n".join(rotated), encoding="utf-8")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not a pdf")
    (root / "notes.xyz").write_text("unsupported", encoding="utf-8")
    return root


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


def _captions(at) -> list[str]:
    return [c.value for c in at.caption]


def test_bad_inputs_are_one_line_errors_and_nothing_starts(tmp_path):
    at = open_page("pages/corpus.py")
    at.button(key="corpus_run").click()
    run(at)
    assert _errors(at) == ["pick a corpus first: upload a zip or give a folder's path"]
    at.text_input(key="corpus_path").set_value(str(tmp_path / "nope"))
    run(at)
    assert _errors(at) == [f"{tmp_path}/nope: no such folder or zip on the server"]
    corpus = _make_corpus(tmp_path / "c", 3)
    at.text_input(key="corpus_path").set_value(str(corpus))
    at.text_area(key="corpus_specs").set_value("recursive chunk_size=abc")
    at.button(key="corpus_run").click()
    run(at)
    assert len(_errors(at)) == 1 and _errors(at)[0].startswith("line 1 ('recursive chunk_size=abc'): ")
    at.text_area(key="corpus_specs").set_value("")
    at.multiselect(key="corpus_metrics").set_value(["stats", "retrieval"])
    at.button(key="corpus_run").click()
    run(at)
    assert _errors(at) == ["the retrieval metric needs a question set: pick one above"]
    assert JOB not in at.session_state


def test_first_rows_show_while_the_run_goes_on_and_a_cancelled_run_resumes(tmp_path):
    corpus = _make_corpus(tmp_path / "big", N_DOCUMENTS, chars=SHORT_CHARS)
    at = open_page("pages/corpus.py")
    at.text_input(key="corpus_path").set_value(str(corpus))
    at.multiselect(key="corpus_metrics").set_value(["stats", "ds"])  # one model metric: the bundled MiniLM
    run(at)
    t0 = time.perf_counter()
    at.button(key="corpus_run").click()
    run(at)
    job = at.session_state[JOB]
    assert job.thread is not None and job.meta["resumed"] == 0
    first = None
    while job.running and time.perf_counter() - t0 < 240:
        time.sleep(0.25)
        run(at)
        if any(c.startswith("So far: ") and "× 2 configurations" in c for c in _captions(at)):
            first = time.perf_counter() - t0
            break
    assert first is not None and job.running, "no rows were shown while the run went on"
    print(f"\nCorpus page, {N_DOCUMENTS} documents of about {SHORT_CHARS:,} characters, stats + DS, bundled MiniLM: "
          f"first rows shown {first:.1f} s after Run")
    so_far = next(c for c in _captions(at) if c.startswith("So far: ")).replace("\\", "")
    assert " × 2 configurations (A, B) · 2 files skipped" in so_far
    assert "documents" in job.label and "ETA" in job.label  # the bar counts documents, with this run's ETA
    at.button(key="corpus_cancel").click()
    run(at)
    wait_job(at, JOB)
    assert job.state == "cancelled"
    assert any("cancelled: the rows it wrote are kept" in w.value for w in at.warning)
    assert not at.exception
    written = job.meta["out"]

    at.button(key="corpus_run").click()  # the same settings: the same folder, resumed
    run(at)
    again = at.session_state[JOB]
    assert again is not job and again.meta["out"] == written and again.meta["resumed"] >= 2
    assert any(i.value.startswith(f"Resumed: {again.meta['resumed']:,} rows from an earlier run") for i in at.info)
    again.cancel()
    wait_job(at, JOB)


def test_a_finished_run_shows_verdict_table_distributions_and_opens_a_document_in_compare(tmp_path):
    corpus = _make_corpus(tmp_path / "small", 6)
    shutil.copy(SAMPLES_DIR / "technical_kestrel.md", corpus / "kestrel.md")
    at = open_page("pages/corpus.py")
    at.text_input(key="corpus_path").set_value(str(corpus))
    at.button(key="corpus_run").click()
    run(at)
    job = wait_job(at, JOB)
    assert job.state == "done", job.error
    assert [s.value.replace("\\", "") for s in at.success] == [job.result.summary()]
    text = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "Corpus " in text and "7 documents with rows, 2 files skipped; 2 configurations (A, B)" in text
    frames = [d.value for d in at.dataframe]
    table = next(f for f in frames if "mean" in f.columns)
    assert list(table["tag"]) == ["A", "A", "B", "B"] and set(table["documents"]) == {7}
    skipped = next(f for f in frames if "error" in f.columns)
    assert sorted(skipped["doc"]) == ["broken.pdf", "notes.xyz"]
    assert at.selectbox(key="corpus_metric").options == ["Chunks", "Mean chunk tokens"]
    at.segmented_control(key="corpus_kind").set_value("violin")
    run(at)
    at.selectbox(key="corpus_open_doc").set_value("kestrel.md")
    run(at)
    at.button(key="corpus_open").click()
    run(at)
    doc = at.session_state["doc"]
    assert doc.source == "kestrel.md"
    assert doc.text == (SAMPLES_DIR / "technical_kestrel.md").read_text(encoding="utf-8").strip()
    assert [(e.tag, e.config.spec) for e in at.session_state["configs"]] == [
        ("A", "recursive chunk_overlap=0 chunk_size=200"), ("B", "fixed_token chunk_overlap=125 chunk_size=250")]
    assert any(t.value == "Compare chunkers" for t in at.title)
    at.switch_page("pages/summary.py")  # the Summary shows the session's corpus run: its verdict and its report
    run(at)
    assert "Corpus run" in [h.value for h in at.subheader]
    summary_text = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "7 documents with rows, 2 files skipped; 2 configurations (A, B)" in summary_text

    other = open_page("pages/corpus.py")  # another session opens the run's output folder
    other.text_input(key="corpus_open_path").set_value(str(corpus))
    other.button(key="corpus_open_run").click()
    run(other)
    assert _errors(other) == [f"{corpus}: not the output folder of a corpus run (it has no run.json)"]
    other.text_input(key="corpus_open_path").set_value(job.meta["out"])
    other.button(key="corpus_open_run").click()
    run(other)
    assert _errors(other) == []
    assert list(next(d.value for d in other.dataframe if "mean" in d.columns)["documents"]) == [7, 7, 7, 7]
