"""The Corpus page's backend: checked inputs, the run as a job (resumed, never recomputed), the view of its folder."""

from __future__ import annotations

import io
import shutil
import zipfile

import pytest

from backend.chunking import ChunkerConfig
from backend.corpus.spec import CorpusSpec, tag_configs
from backend.errors import InputError, ParameterError
from backend.lab.corpus import (
    available_engines,
    check_corpus_path,
    check_results_folder,
    corpus_view,
    default_out,
    open_in_compare,
    parse_config_lines,
    plan_corpus,
    save_upload,
)
from backend.progress import Progress
from backend.retrieval.questions import load_sample_question_set
from backend.samples import SAMPLES_DIR

SPECS = "recursive chunk_size=200 chunk_overlap=0\n# a comment\n\nfixed_token chunk_size=250 chunk_overlap=125\n"


@pytest.fixture()
def corpus(tmp_path, monkeypatch):
    """Three sample documents (one in a sub-folder), an unsupported file and an unreadable PDF."""
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    shutil.copy(SAMPLES_DIR / "narrative_clockmaker.txt", root / "narrative.txt")
    shutil.copy(SAMPLES_DIR / "technical_kestrel.md", root / "technical.md")
    shutil.copy(SAMPLES_DIR / "chinese_teahouse.txt", root / "sub" / "teahouse.txt")
    (root / "notes.xyz").write_text("x", encoding="utf-8")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    return root


def test_configurations_typed_one_per_line_are_checked_and_a_bad_line_is_named():
    assert parse_config_lines(SPECS) == [
        ChunkerConfig("recursive", (("chunk_overlap", 0), ("chunk_size", 200)), "cl100k"),
        ChunkerConfig("fixed_token", (("chunk_overlap", 125), ("chunk_size", 250)), "cl100k"),
    ]
    assert parse_config_lines("  \n# nothing\n") == []
    with pytest.raises(ParameterError, match=r"^line 2 \('nosuch chunk_size=3'\): "):
        parse_config_lines("recursive chunk_size=200\nnosuch chunk_size=3")
    with pytest.raises(ParameterError, match=r"^line 1 \('recursive chunk_size'\): "):
        parse_config_lines("recursive chunk_size")


def test_a_server_path_is_checked_in_one_line(tmp_path):
    with pytest.raises(InputError, match="^give the path of a folder or a .zip of documents on the server$"):
        check_corpus_path("  ")
    with pytest.raises(InputError, match=f"^{tmp_path}/nope: no such folder or zip on the server$"):
        check_corpus_path(f"{tmp_path}/nope")
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="a.txt: neither a folder nor a zip of documents$"):
        check_corpus_path(str(tmp_path / "a.txt"))
    assert check_corpus_path(f" {tmp_path} ") == tmp_path


def test_an_upload_must_be_a_zip_and_is_kept_by_its_content(corpus, tmp_path):
    with pytest.raises(InputError, match=r"^notes.zip: not a zip \(upload a .zip of documents"):
        save_upload(b"plain text", "notes.zip")
    with pytest.raises(InputError, match="^e.zip: the file is empty$"):
        save_upload(b"", "e.zip")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(corpus / "narrative.txt", "narrative.txt")
    first = save_upload(buf.getvalue(), "../My corpus!.zip")
    assert first.parent == tmp_path / "data" / "corpus" / "uploads"
    assert first.name.startswith("My_corpus-") and first.read_bytes() == buf.getvalue()
    assert save_upload(buf.getvalue(), "../My corpus!.zip") == first  # the same zip again: the same file


def test_the_default_output_folder_is_per_corpus_and_settings():
    configs = tag_configs(parse_config_lines(SPECS))
    a = default_out(SAMPLES_DIR, CorpusSpec(configs=configs))
    b = default_out(SAMPLES_DIR, CorpusSpec(configs=configs[:1]))  # configurations are rows, not settings
    c = default_out(SAMPLES_DIR, CorpusSpec(configs=configs, metrics=("stats", "bc"), pairs=50))
    assert a == b and a != c and a.parent == c.parent and a.parent.name.startswith("samples-")


def test_the_run_is_a_job_whose_folder_the_view_reads_and_a_second_run_resumes_it(corpus, tmp_path):
    assert available_engines()[0] == "local"
    configs = parse_config_lines(SPECS)
    plan = plan_corpus(corpus, configs, metrics=["stats"], pairs=None, questions=None, questions_name=None)
    out = plan.meta["out"]
    assert out.startswith(str(tmp_path / "data" / "corpus" / "runs" / "corpus-"))
    assert dict(plan.meta) == {"out": out, "configs": tuple(c.spec for c in configs), "resumed": 0,
                               "source": str(corpus), "engine": "local"}
    assert plan.title == "Corpus corpus: A, B on local" and not plan.needs_lm
    seen = []
    run = plan.run(Progress(counts=lambda done, total: seen.append((done, total))))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]  # documents, the unreadable PDF among them
    assert (run.ran, run.resumed_rows) == (4, 0)

    view = corpus_view(out, plan.meta["configs"])
    assert view.caption() == "6 rows: 3 documents × 2 configurations (A, B) · 2 files skipped"
    assert view.metrics == ("chunks", "mean_tokens")
    assert [(r["metric"], r["tag"], r["documents"]) for r in view.table_rows()] == [
        ("Chunks", "A", 3), ("Mean chunk tokens", "A", 3), ("Chunks", "B", 3), ("Mean chunk tokens", "B", 3)]
    assert [s["doc"] for s in view.results.skipped] == ["notes.xyz", "broken.pdf"]
    assert view.document_names() == ["narrative.txt", "sub/teahouse.txt", "technical.md"]
    assert view.verdict[1] == ("None of the metrics computed (Chunks and Mean chunk tokens) is better higher or "
                               "lower: nothing singles out a configuration.")
    assert [d["doc"] for d in view.disagreements("chunks")] == ["technical.md", "narrative.txt", "sub/teahouse.txt"]
    assert {tr.name for tr in view.distribution("chunks", "violin").data} == {
        "A · recursive(chunk_overlap=0, chunk_size=200) · cl100k",
        "B · fixed_token(chunk_overlap=125, chunk_size=250) · cl100k"}

    assert check_results_folder(f" {out} ") == view.out
    with pytest.raises(InputError, match=f"^{corpus}: not the output folder of a corpus run \\(it has no run.json\\)$"):
        check_results_folder(str(corpus))
    with pytest.raises(InputError, match="^give the path of a corpus run's output folder$"):
        check_results_folder("")

    again = plan_corpus(corpus, configs, metrics=["stats"], pairs=None, questions=None, questions_name=None)
    assert again.meta["resumed"] == 6 and again.meta["out"] == out
    assert again.run(Progress()).ran == 0  # nothing recomputed
    with pytest.raises(ParameterError, match="holds a corpus run with other settings"):
        plan_corpus(corpus, configs, metrics=["stats", "ds"], pairs=None, questions=None, questions_name=None,
                    out=view.out)


def test_a_document_opens_in_compare_with_the_runs_configurations_and_a_changed_file_is_refused(corpus):
    configs = parse_config_lines(SPECS)
    plan = plan_corpus(corpus, configs, metrics=["stats"], pairs=None, questions=None, questions_name=None)
    plan.run(Progress())
    view = corpus_view(plan.meta["out"], plan.meta["configs"])
    doc, tagged = open_in_compare(view, "sub/teahouse.txt")
    assert doc.text == (corpus / "sub" / "teahouse.txt").read_text(encoding="utf-8").strip()
    assert {r["doc_id"] for r in view.results.rows if r["doc"] == "sub/teahouse.txt"} == {doc.id}
    assert tagged == [("A", configs[0]), ("B", configs[1])]
    with pytest.raises(InputError, match="^nope.txt: not a document of this corpus run$"):
        open_in_compare(view, "nope.txt")
    (corpus / "technical.md").write_text("Something else entirely.", encoding="utf-8")
    with pytest.raises(InputError, match="^technical.md: the file changed since the corpus run"):
        open_in_compare(view, "technical.md")


def test_an_uploaded_zip_runs_and_its_documents_open_from_the_runs_extraction(corpus):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(corpus / "narrative.txt", "docs/narrative.txt")
        zf.write(corpus / "sub" / "teahouse.txt", "docs/teahouse.txt")
    path = save_upload(buf.getvalue(), "two.zip")
    configs = parse_config_lines(SPECS)
    plan = plan_corpus(path, configs, metrics=["stats"], pairs=None, questions=None, questions_name=None)
    assert plan.run(Progress()).ran == 2
    view = corpus_view(plan.meta["out"], plan.meta["configs"])
    assert view.document_names() == ["docs/narrative.txt", "docs/teahouse.txt"]
    doc, _ = open_in_compare(view, "docs/narrative.txt")
    assert doc.text == (corpus / "narrative.txt").read_text(encoding="utf-8").strip()


def test_bad_plans_fail_in_one_line(corpus):
    with pytest.raises(ParameterError, match="^choose at least one configuration$"):
        plan_corpus(corpus, [], metrics=["stats"], pairs=None, questions=None, questions_name=None)
    with pytest.raises(ParameterError, match="^engine 'dask' is not available here"):
        plan_corpus(corpus, parse_config_lines(SPECS), metrics=["stats"], pairs=None, questions=None,
                    questions_name=None, engine="dask")
    with pytest.raises(ParameterError, match="needs a question set"):
        plan_corpus(corpus, parse_config_lines(SPECS), metrics=["stats", "retrieval"], pairs=None, questions=None,
                    questions_name=None)


def test_retrieval_on_a_bundled_question_set_counts_only_the_documents_its_questions_are_about(corpus):
    shutil.copy(SAMPLES_DIR / "technical_kestrel.md", corpus / "technical_kestrel.md")
    plan = plan_corpus(corpus, parse_config_lines(SPECS), metrics=["stats", "retrieval"], pairs=None,
                       questions=load_sample_question_set("technical"), questions_name="sample:technical")
    plan.run(Progress())
    view = corpus_view(plan.meta["out"], plan.meta["configs"])
    asked = {r["doc"]: r["retrieval"]["questions"] for r in view.results.rows}
    assert asked == {"narrative.txt": 0, "sub/teahouse.txt": 0, "technical.md": 12, "technical_kestrel.md": 12}
    assert view.verdict[0] == (
        f"Corpus {corpus}: 4 documents with rows, 2 files skipped; 2 configurations (A, B); retrieval on the "
        "question set sample:technical, whose questions are about 2 of these documents.")
    assert [r["documents"] for r in view.table if r["metric"] == "iou"] == [2, 2]
    assert view.verdict[1].startswith("IoU: ")
