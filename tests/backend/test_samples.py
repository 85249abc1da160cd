"""Tests for backend.samples and the files in assets/samples."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from backend.errors import ParameterError
from backend.loaders.invariants import document_problems
from backend.retrieval.questions import load_question_set
from backend.samples import DEFAULT_SAMPLE, SAMPLES_DIR, Sample, get_sample, list_samples, load_sample

EXPECTED = {
    # name: (kind, language)
    "narrative": ("txt", "en"),
    "technical": ("md", "en"),
    "technical-pdf": ("pdf", "en"),
    "chinese": ("txt", "zh"),
    "release-notes": ("html", "en"),
}


def test_list_samples() -> None:
    samples = list_samples()
    assert [sample.name for sample in samples] == list(EXPECTED)
    assert samples[0].name == DEFAULT_SAMPLE == "narrative"
    assert samples[0].title.startswith("English narrative — ")
    for sample in samples:
        assert isinstance(sample, Sample) and sample.path.is_file() and sample.path.parent == SAMPLES_DIR
        assert sample.title and sample.description
    samples.clear()
    assert list_samples(), "list_samples must return a copy"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_load_sample(name: str) -> None:
    document = load_sample(name)
    kind, language = EXPECTED[name]
    assert (document.kind, document.language) == (kind, language)
    assert document.source == get_sample(name).path.name
    assert document_problems(document) == []
    assert len(document.paragraphs) >= 10


def test_unknown_sample() -> None:
    with pytest.raises(ParameterError, match="unknown sample 'nope'; available: narrative"):
        load_sample("nope")


def test_narrative_size_and_features() -> None:
    text = load_sample("narrative").text
    assert 2_500 <= len(text.split()) <= 4_000
    for feature in ("Dr. ", "Mr. ", "3.5", '"'):
        assert feature in text


def test_technical_size_and_features() -> None:
    text = load_sample("technical").text
    assert 2_500 <= len(text.split()) <= 4_000
    for feature in ("\n## ", "\n- ", "\n1. ", "```", "v2.1.3", "e.g.", "i.e.", "U.S.", "0.35"):
        assert feature in text


def test_chinese_size_and_punctuation() -> None:
    text = load_sample("chinese").text
    han = re.findall(r"[\u4e00-\u9fff]", text)
    assert 3_000 <= len(text) <= 5_000 and len(han) >= 2_500
    for mark in "。！？；，“”：":
        assert mark in text
    assert get_sample("chinese").path.read_bytes().decode("utf-8")  # shipped as UTF-8


def test_html_sample_hides_scripts() -> None:
    text = load_sample("release-notes").text
    for hidden in ("trackPageView", "font-family", "alert", "Internal build", "Template content", "Home"):
        assert hidden not in text


def test_pdf_sample_is_small_and_matches_its_markdown(tmp_path: Path) -> None:
    pdf = get_sample("technical-pdf").path
    assert pdf.stat().st_size < 300 * 1024
    document = load_sample("technical-pdf")
    assert len(document.pages) >= 5
    assert "Kestrel Object Store: Operator Guide" in document.text
    assert "kestrel node drain kestrel-b2 --wait\nkestrel node remove kestrel-b2" in document.text

    # The committed PDF is what make_pdf.py builds from the committed Markdown.
    spec = importlib.util.spec_from_file_location("make_pdf", SAMPLES_DIR / "make_pdf.py")
    assert spec and spec.loader
    make_pdf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_pdf)
    rebuilt = make_pdf.build(tmp_path / "technical_kestrel.pdf")
    from backend.loaders import load_document

    assert load_document(rebuilt).text == document.text


# --- bundled question sets ------------------------------------------------------------------------


def test_question_sets_are_listed_per_sample() -> None:
    from backend.samples import QUESTIONS_DIR, get_question_set, list_question_sets

    sets = list_question_sets()
    assert [s.name for s in sets] == ["narrative", "technical"]
    for entry in sets:
        assert entry.csv_path == QUESTIONS_DIR / f"{entry.name}.csv" and entry.corpora_dir == SAMPLES_DIR
        assert entry.title == get_sample(entry.name).title
    with pytest.raises(ParameterError, match="no bundled question set 'chinese'; available: narrative, technical"):
        get_question_set("chinese")


@pytest.mark.parametrize("name", ["narrative", "technical"])
def test_every_bundled_excerpt_is_exact(name: str) -> None:
    from backend.retrieval.questions import load_sample_question_set, read_corpus_text
    from backend.samples import get_question_set

    qset = load_sample_question_set(name)
    sample = get_sample(name)
    (corpus_id,) = qset.corpus_ids
    assert corpus_id == sample.path.stem and 8 <= len(qset) <= 12
    # The text the benchmark chunks: the corpus as the loaders read the sample file (as `index` reads
    # it, so both share one collection): the corpus text without its final newline, offsets unchanged.
    text = qset.document(corpus_id).text
    corpus = read_corpus_text(sample.path.read_bytes())
    assert corpus == qset.corpora[corpus_id] and corpus.endswith("\n")
    assert text == corpus.rstrip("\n")
    assert get_question_set(name).csv_path.read_text(encoding="utf-8").count("\n") == len(qset) + 1
    for q in qset.questions:
        assert q.question.endswith("?")
        for ref in q.references:
            assert text[ref.start : ref.end] == ref.content and len(ref.content) >= 15
            assert text.count(ref.content) == 1  # the excerpt names one place in the text
    assert any(len(q.references) > 1 for q in qset.questions)


def test_make_questions_rewrites_the_same_csv_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("make_questions", SAMPLES_DIR / "questions" / "make_questions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    for name in module.SETS:
        assert (tmp_path / f"{name}.csv").read_bytes() == (SAMPLES_DIR / "questions" / f"{name}.csv").read_bytes()


def test_make_held_out_rewrites_the_same_held_out_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = SAMPLES_DIR / "questions"
    monkeypatch.syspath_prepend(str(folder))  # as when run as a script: make_questions beside it
    spec = importlib.util.spec_from_file_location("make_held_out", folder / "make_held_out.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path / "held_out")
    monkeypatch.setattr(sys.modules["make_questions"], "HERE", tmp_path)
    module.main()
    for name in module.SETS:
        written = (tmp_path / "held_out" / f"{name}.csv").read_bytes()
        assert written == (folder / "held_out" / f"{name}.csv").read_bytes()
        qset = load_question_set(folder / "held_out" / f"{name}.csv", SAMPLES_DIR)
        assert len(qset) == 36 and qset.method == "hand-written"  # loads, checks, and states its method
