"""Tuning over a folder: one configuration's per-question scores through the corpus engine (local and Ray).

The folder holds two sample documents (a story in a subfolder-free ``.txt``, a guide in ``notes/``)
and a file no loader reads; the questions are model-free ones generated on each document.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import ray

from backend.chunking import ChunkerConfig
from backend.corpus.ray_engine import ray_session
from backend.corpus.results import RESULTS, RUN, read_results
from backend.errors import InputError, ParameterError
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import QuestionSet, load_question_set, save_question_set
from backend.samples import SAMPLES_DIR
from backend.tune.corpus import QUESTIONS_DIR, corpus_questions, corpus_scores

RECURSIVE = ChunkerConfig.make("recursive", {"chunk_size": 80})
SENTENCE = ChunkerConfig.make("sentence", {"chunk_size": 60})
METRICS = ("recall", "precision", "precision_omega", "iou")


def _folder(root: Path) -> Path:
    (root / "notes").mkdir(parents=True)
    (root / "story.txt").write_text((SAMPLES_DIR / "narrative_clockmaker.txt").read_text(encoding="utf-8")[:2500],
                                    encoding="utf-8")
    (root / "notes" / "kestrel.md").write_text((SAMPLES_DIR / "technical_kestrel.md").read_text(encoding="utf-8")[:2500],
                                               encoding="utf-8")
    (root / "table.xyz").write_text("a,b\n1,2\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The folder, its generated questions, and RECURSIVE then SENTENCE scored locally into one corpus folder."""
    root = tmp_path_factory.mktemp("tune-corpus")
    source = _folder(root / "docs")
    questions = corpus_questions(source, "generate:model-free", out=root / "out", seed=0, per_document=4)
    folder = root / "out" / "corpus-tuning"
    first = corpus_scores(RECURSIVE, source, questions, out=folder)
    lines_after_first = (folder / RESULTS).read_text(encoding="utf-8").splitlines()
    second = corpus_scores(SENTENCE, source, questions, out=folder)
    return {"root": root, "source": source, "questions": questions, "folder": folder, "first": first,
            "second": second, "lines_after_first": lines_after_first}


def test_generated_questions_are_on_every_readable_document_and_saved_for_a_resume(run):
    questions, out = run["questions"], run["root"] / "out"
    assert questions.corpus_ids == ["notes_kestrel.md", "story.txt"]
    assert [sum(q.corpus_id == c for q in questions.questions) for c in questions.corpus_ids] == [4, 4]
    assert load_question_set(out / QUESTIONS_DIR / "questions.csv") == questions
    again = corpus_questions(run["source"], "generate:model-free", out=out, seed=0, per_document=4)
    assert again == questions
    with pytest.raises(ParameterError, match="generated with other settings"):
        corpus_questions(run["source"], "generate:model-free", out=out, seed=1, per_document=4)
    with pytest.raises(ParameterError, match="cannot generate questions by 'chat' over a folder"):
        corpus_questions(run["source"], "generate:chat", out=out, seed=0)


def test_per_question_scores_are_evaluate_s_on_each_document_in_the_set_s_order(run, embedder, store):
    questions = run["questions"]
    for config, scores in ((RECURSIVE, run["first"]), (SENTENCE, run["second"])):
        bench = evaluate(questions, [config], embedder=embedder, store=store, cross_corpus=False)
        expected = {m: tuple(q.metric(m) for q in bench.results[0].questions) for m in METRICS}
        assert dict(scores.per_question) == expected
        assert all(len(v) == len(questions) for v in scores.per_question.values())
        assert scores.documents == ("notes/kestrel.md", "story.txt") and scores.warnings == ()

    # The statistics are over both documents' rows.
    rows = [r for r in read_results(run["folder"]).rows if r["config"] == RECURSIVE.spec]
    first = run["first"]
    assert len(rows) == 2 and first.chunks == sum(r["chunks"] for r in rows)
    assert first.max_tokens == max(r["max_tokens"] for r in rows)
    assert first.index_cost == round(sum(r["mean_tokens"] * r["chunks"] for r in rows))
    assert first.mean_tokens == pytest.approx(first.index_cost / first.chunks)


def test_a_second_configuration_appends_and_a_scored_one_is_read_back(run):
    folder = run["folder"]
    lines = (folder / RESULTS).read_text(encoding="utf-8").splitlines()
    assert lines[:2] == run["lines_after_first"] and len(lines) == 4  # SENTENCE appended its two rows
    assert [(c["tag"], c["spec"]) for c in json.loads((folder / RUN).read_text(encoding="utf-8"))["configs"]] == [
        ("T1", RECURSIVE.spec), ("T2", SENTENCE.spec)]
    again = corpus_scores(RECURSIVE, run["source"], run["questions"], out=folder)
    assert (folder / RESULTS).read_text(encoding="utf-8").splitlines() == lines  # nothing recomputed
    assert again.per_question == run["first"].per_question and again.chunks == run["first"].chunks
    # Another question set (e.g. the held-out part) needs its own folder.
    part = QuestionSet(run["questions"].questions[:3], run["questions"].corpora)
    with pytest.raises(ParameterError, match="other settings"):
        corpus_scores(RECURSIVE, run["source"], part, out=folder)


def test_questions_on_a_document_that_gives_no_row_are_nan_and_named(run, tmp_path):
    source = tmp_path / "docs"
    shutil.copytree(run["source"], source)
    (source / "story.txt").write_text("   \n", encoding="utf-8")  # now unreadable: skipped
    scores = corpus_scores(RECURSIVE, source, run["questions"], out=tmp_path / "out")
    story = [q.corpus_id == "story.txt" for q in run["questions"].questions]
    for m in METRICS:
        assert [math.isnan(v) for v in scores.per_question[m]] == story
        assert [v for v, s in zip(scores.per_question[m], story) if not s] == [
            v for v, s in zip(run["first"].per_question[m], story) if not s]
    assert scores.documents == ("notes/kestrel.md",)
    assert scores.warnings == (
        f"4 questions left unscored (NaN): no document of {source} gave a row for their corpus story.txt; "
        f"files skipped: story.txt, table.xyz (see {tmp_path / 'out' / 'skipped.jsonl'})",)


def test_a_given_set_must_be_about_the_folder_s_documents(run, tmp_path):
    saved = tmp_path / "mine" / "questions.csv"
    save_question_set(run["questions"], saved)
    assert corpus_questions(run["source"], str(saved), out=tmp_path / "out", seed=0) == run["questions"]
    with pytest.raises(InputError, match=r"^sample:narrative: corpus 'narrative_clockmaker' matches no document of "):
        corpus_questions(run["source"], "sample:narrative", out=tmp_path / "out", seed=0)


def test_on_ray_the_scores_are_the_local_ones(run, local_ray, tmp_path):
    with ray_session():  # a session inside the caller's Ray uses it
        on_ray = corpus_scores(RECURSIVE, run["source"], run["questions"], out=tmp_path / "ray", engine="ray")
    local = run["first"]
    assert dict(on_ray.per_question) == dict(local.per_question)
    assert (on_ray.chunks, on_ray.mean_tokens, on_ray.max_tokens, on_ray.index_cost, on_ray.documents) == (
        local.chunks, local.mean_tokens, local.max_tokens, local.index_cost, local.documents)
    assert ray.is_initialized()  # the caller's Ray is used and left running
