"""Scoring a configuration on parts of a question set: per-question values, one index reused, chunk statistics."""

from __future__ import annotations

import pytest

from backend.chunkers import make_chunker, run_chunker
from backend.errors import ParameterError
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import load_sample_question_set
from backend.tokenizers import get_tokenizer
from backend.tune.scoring import RETRIEVE, Scorer


@pytest.fixture(scope="module")
def questions():
    return load_sample_question_set("narrative")


def test_parts_score_as_the_whole_and_the_index_is_built_once(questions, embedder, tmp_path):
    config = make_chunker("recursive", {"chunk_size": 160, "chunk_overlap": 0}, "cl100k").config
    scorer = Scorer(questions, "iou", store_path=tmp_path / "chroma", embedder=embedder)
    first = scorer.score(config, [0, 3, 5])
    rest = scorer.score(config, [1, 2, 4, 6, 7, 8, 9, 10, 11])
    assert rest.texts_embedded == 0  # the chunks were indexed by the first call: only reused here
    whole = evaluate(questions, [config], embedder=embedder, retrieve=RETRIEVE, store=scorer.store).results[0]
    assert {**first.values, **rest.values} == {i: r.iou for i, r in enumerate(whole.questions)}


def test_chunk_statistics_are_the_chunkings(questions, embedder, tmp_path):
    config = make_chunker("fixed_token", {"chunk_size": 100, "chunk_overlap": 20}, "cl100k").config
    stats = Scorer(questions, "recall", store_path=tmp_path / "chroma", embedder=embedder).stats(config)
    counts = run_chunker(questions.document(questions.corpus_ids[0]), config).token_counts
    assert (stats.chunks, stats.max_tokens, stats.index_cost) == (len(counts), max(counts), sum(counts))
    assert stats.mean_tokens == pytest.approx(sum(counts) / len(counts))
    text = questions.document(questions.corpus_ids[0]).text
    assert stats.index_cost > get_tokenizer("cl100k").count(text)  # overlapping tokens are embedded twice


def test_an_objective_that_is_not_a_retrieval_metric_is_refused(questions, embedder):
    with pytest.raises(ParameterError, match="not a retrieval metric"):
        Scorer(questions, "accuracy", embedder=embedder)
