"""No retriever returns a sliver: a chunk of one character or only punctuation (issue 23: MoG's "." at rank 3).

The multi-granularity retrievers build every level from their finest units, so a sliver is merged
into a neighbour where the units are cut (:func:`backend.chunkers.multi.merge_slivers`). Checked on
every bundled sample, for every registered retriever, on the units and on real answers (embedded
Chroma, the bundled MiniLM).

The units are checked on the whole samples, where the slivers were (MoG's lone "." lay past character
11,000 of the narrative and 16,000 of the technical sample). The answers, which need every level embedded,
are asked of the samples' first 1,800 tokens (``sample_prefix``: twice MoG's largest level, about 800
tokens; every level of every retriever there has 4 to 107 entries), the same 4 questions and top 5 each,
through an output cache as the app and the CLI answer (the units are not embedded again per question).
"""

from __future__ import annotations

import pytest

from backend.chunkers import make_chunker
from backend.chunkers.multi import is_sliver, merge_slivers
from backend.models.cache import OutputCache
from backend.retrieval.questions import load_sample_question_set
from backend.retrieval.retriever.levels import LevelRetriever
from backend.retrieval.retriever.registry import RETRIEVERS, make_retriever
from backend.samples import list_question_sets, list_samples, load_sample
from tests.backend.chunkers.test_semantic_chunkers import sample_prefix

# Each retriever with its defaults and the unit choices that once made slivers on the samples:
# MoG's recursive level 1 left a lone "." (narrative, technical), sentence units a "---" rule
# (narrative) and one-character chapter numbers (chinese), 8-token units a final ".".
VARIANTS = {
    "mog": [{}, {"base": "sentence"}, {"base": "fixed_token"}],
    "mogg": [{}, {"per_node": 1}],
    "freechunker": [{}, {"unit": "tokens", "unit_tokens": 8}],
}
ANSWERED_TOKENS = 1800  # the answered prefix of each sample: two of MoG's largest entries (L5, ~800 tokens)


def _visible(text: str) -> str:
    return "".join(text.split())


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return OutputCache(tmp_path_factory.mktemp("cache"))


def test_merge_slivers_joins_punctuation_before_and_short_words_after() -> None:
    text = "Hello there. . 一 Next part"
    assert merge_slivers(text, [(0, 12), (13, 14), (15, 16), (17, 26)]) == [(0, 14), (15, 26)]
    assert merge_slivers("---\nBody text", [(0, 3), (4, 13)]) == [(0, 13)]  # nothing before: the next unit
    assert merge_slivers("Body text 7", [(0, 9), (10, 11)]) == [(0, 11)]  # nothing after: the unit before
    assert merge_slivers(".", [(0, 1)]) == [(0, 1)]  # a text that is one sliver stays one unit
    assert merge_slivers("ab cd", [(0, 2), (3, 5)]) == [(0, 2), (3, 5)]
    assert [is_sliver(t) for t in (".", "...", " - ", "一", "7", "ok", "二〇", "a.")] == [
        True, True, True, True, True, False, False, False
    ]


def test_every_registered_retriever_is_checked_here() -> None:
    assert sorted(VARIANTS) == sorted(RETRIEVERS)


@pytest.mark.parametrize("sample", [s.name for s in list_samples()])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_no_unit_of_any_retriever_is_a_sliver(name: str, sample: str) -> None:
    doc = load_sample(sample)
    for params in VARIANTS[name]:
        units = make_chunker(name, params).chunk(doc)
        assert units.chunks, (name, params)
        for c in units.chunks:
            assert c.text == doc.text[c.start : c.end]
            assert not is_sliver(c.text), (name, params, sample, c.start, c.text)
        # Nothing of the text is lost: the units still run in order over it.
        assert all(a.end <= b.start for a, b in zip(units.chunks, units.chunks[1:]))


@pytest.mark.parametrize("sample", [q.name for q in list_question_sets()])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_no_answer_of_any_retriever_holds_a_sliver(name: str, sample: str, embedder, store, cache) -> None:
    doc = sample_prefix(sample, ANSWERED_TOKENS)
    questions = load_sample_question_set(sample)
    retriever = make_retriever(make_chunker(name, {"router": "uniform"} if name != "freechunker" else {}).config)
    assert isinstance(retriever, LevelRetriever)
    for q in questions.questions[:4]:  # the index is built once; each answer is one query
        answer = retriever.answer(doc, store, embedder, q.question, 5, cache=cache)
        picks = [(rank, start, end) for rank, ranges in answer.retrieved() for start, end in ranges]
        assert picks, q.question
        for rank, start, end in picks:
            piece = doc.text[start:end]
            assert len(_visible(piece)) >= 2 and any(ch.isalnum() for ch in piece), (name, q.question, rank, piece)
