"""The metrics of an edited copy (backend/lab/edit_metrics.py): statistics at once, only the edit's pairs scored,
only the changed chunks embedded, the BC of each boundary from what is known, the retrieval plan.

A real document cut by the real recursive chunker, an edit made with backend.lab.edit, the real
output cache in a temporary folder; the scorer and the embedder are model-free stand-ins
(tests/support/quality.py) behind recorders that keep every text they are asked about.
"""

from __future__ import annotations

import numpy as np
import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import ParameterError
from backend.lab.edit import EditState, add_cut, edit_copy
from backend.lab.edit_metrics import (
    AUTO_PAIRS,
    NO_QUESTION_SET,
    boundary_values,
    edit_stats,
    plan_edit_quality,
    plan_edit_retrieval,
    retrieval_changes,
)
from backend.lab.models import SessionModels
from backend.lab.quality import fold_scoring
from backend.metrics.estimate import stratified_order
from backend.metrics.formulas import boundary_clarity
from backend.metrics.report import QualitySettings
from backend.metrics.scores import UNCONDITIONAL_CONTEXT, sample_requests, score_chunkings
from backend.models import embeddings
from backend.models.cache import OutputCache
from backend.models.embeddings import embed_texts, embeddings_key
from backend.models.scoring import conditional_scores
from backend.progress import Progress
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.text.document import Document
from tests.support.quality import LengthScorer, SeededEmbedder

TEXT = " ".join(f"Sentence number {i} says something about topic {i % 7}." for i in range(30))
BASE = ChunkerConfig.make("recursive", {"chunk_size": 60})


class RecordingScorer(LengthScorer):
    """The deterministic scorer, keeping every ``(context, continuation)`` it is asked to score."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def conditional_nll(self, pairs, *, progress=None):
        self.requests += list(pairs)
        return super().conditional_nll(pairs, progress=progress)


class RecordingEmbedder(SeededEmbedder):
    """The seeded embedder, keeping every text it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts, *, progress=None):
        self.texts += list(texts)
        return super().embed(texts, progress=progress)


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def cache(tmp_path) -> OutputCache:
    return OutputCache(tmp_path / "cache")


@pytest.fixture(scope="module")
def edit():
    """The document, the base (6 chunks), and its copy with one cut added inside chunk 4 (7 chunks)."""
    doc = Document.from_text(TEXT, source="notes/edit.txt")
    base = run_chunker(doc, BASE)
    spans = [(c.start, c.end) for c in base.chunks]
    out = add_cut(EditState.of(edit_copy(BASE, doc)), doc, spans, base.chunks[3].start + 60)
    edited = run_chunker(doc, out.state.config)
    assert (base.token_counts, edited.token_counts) == ([54, 55, 55, 55, 55, 56], [54, 55, 55, 12, 43, 55, 56])
    return doc, base, ConfigEntry(2, "C", out.state.config), edited


def _models(scorer) -> SessionModels:
    return SessionModels.of(scorer, embedder_loaded="seeded-embedder", embedder_loaded_fingerprint="fp-seeded-embedder")


def test_statistics_compare_the_edit_with_its_base(edit) -> None:
    doc, base, _entry, edited = edit
    stats = edit_stats(doc, base, edited)
    assert stats.summary == (
        "notes/edit.txt: chunks 6 → 7 · mean tokens 55.0 → 47.1 · min tokens 54 → 12 · max tokens 56 → 56 "
        "(1 cut added)"
    )
    assert [(r["metric"], r["base"], r["edited"], r["change"]) for r in stats.rows[:5]] == [
        ("chunks", 6, 7, "+1"),
        ("mean tokens", 55.0, 47.1, "−7.9"),
        ("median tokens", 55.0, 55.0, "="),
        ("min tokens", 54, 12, "−42"),
        ("max tokens", 56, 56, "="),
    ]
    assert (stats.cuts_added, stats.cuts_removed) == (1, 0)


def _new_pairs(edited, complete: bool, window: int | None) -> set[tuple[str, str]]:
    """The requests of the edited table that involve one of the two new chunks (index 3 and 4)."""
    texts = [c.text for c in edited.chunks]
    new = {texts[3], texts[4]}
    out = {(UNCONDITIONAL_CONTEXT, t) for t in new}
    for i in range(len(texts)):
        for j in range(len(texts)):
            near = j == i + 1 if not complete else (i != j and (window is None or abs(i - j) <= window))
            if near and (texts[i] in new or texts[j] in new):
                out.add((texts[i], texts[j]))
    return out


@pytest.mark.parametrize(("metrics", "window", "pinned"), [(["bc"], None, 5), (["bc", "cs"], 2, 16)])
def test_an_edit_rescores_only_the_pairs_of_its_new_chunks(edit, cache, metrics, window, pinned) -> None:
    doc, base, entry, edited = edit
    settings = QualitySettings(window=window)
    store: dict = {"doc": doc.id}
    first = plan_edit_quality(doc, None, base, entry, edited, _models(LengthScorer()), metrics=metrics, window=window,
                              store=store, settings=settings, cache=cache)
    assert first.job is not None and first.changed_pairs == pinned
    # The base scored first (as on the Quality page), in the same cache.
    complete = "cs" in metrics
    score_chunkings([base], scorer=LengthScorer(), embedder=None, complete=complete, window=window, cache=cache)
    scorer = RecordingScorer()
    plan = plan_edit_quality(doc, None, base, entry, edited, _models(scorer), metrics=metrics, window=window,
                             store=store, settings=settings, cache=cache)
    assert (plan.missing_pairs, plan.changed_pairs, plan.auto) == (pinned, pinned, True)
    assert pinned <= AUTO_PAIRS
    # BC of the base is known, the edited copy's is not yet: the base's exact value, nothing for the copy.
    assert plan.changes[0].base.exact and plan.changes[0].edited is None
    run = plan.job.run(Progress())
    assert scorer.requests and len(scorer.requests) == len(set(scorer.requests)) == pinned
    assert set(scorer.requests) == _new_pairs(edited, complete, window)
    fold_scoring(plan.plan, run, store)
    done = plan_edit_quality(doc, None, base, entry, edited, _models(scorer), metrics=metrics, window=window,
                             store=store, settings=settings, cache=cache)
    assert done.job is None and len(scorer.requests) == pinned
    assert [c.metric for c in done.changes] == ["bc", "cs_complete"][: len(metrics)]
    assert all(c.base.exact and c.edited.exact for c in done.changes)
    bc = done.changes[0]
    assert done.line.startswith(f"BC {bc.base.estimate:.2f} → {bc.edited.estimate:.2f}")
    assert done.note == f"notes/edit.txt: {pinned} pairs changed by the edits; every score known"


def test_a_partly_scored_copy_shows_an_estimate_with_its_interval(edit, cache) -> None:
    doc, base, entry, edited = edit
    texts = [c.text for c in edited.chunks]
    # What a cancelled anytime job left: the first chunks of the sample order scored, not all.
    score_chunkings([base], scorer=LengthScorer(), embedder=None, complete=False, window=None, cache=cache)
    order = stratified_order(len(texts), 0)
    conditional_scores(sample_requests(texts, order[:4], complete=False, window=None)[0], LengthScorer(), cache=cache)
    plan = plan_edit_quality(doc, None, base, entry, edited, _models(LengthScorer()), metrics=["bc"], window=None,
                             store={}, cache=cache)
    change = plan.changes[0]
    assert change.estimated and not change.edited.exact
    assert change.text.startswith(f"BC {change.base.estimate:.2f} → ≈{change.edited.estimate:.2f} [")
    assert plan.note.endswith("≈ marks an estimate from the pairs scored so far, [low, high] its 95% interval")


def test_boundary_values_come_from_the_store_or_the_cache_and_never_a_model(edit, cache) -> None:
    doc, base, entry, edited = edit
    models = _models(LengthScorer())
    assert boundary_values(doc, edited, models, {}, cache=cache) == (None,) * 6
    score_chunkings([base], scorer=LengthScorer(), embedder=None, complete=False, window=None, cache=cache)
    values = boundary_values(doc, edited, models, {}, cache=cache)
    # The boundaries around the new chunks (2|3, 3|4, 4|5) are not scored; the others are the base's.
    assert [v is None for v in values] == [False, False, True, True, True, False]
    run = score_chunkings([edited], scorer=LengthScorer(), embedder=None, complete=False, window=None, cache=cache)
    table = run.results[0][0]
    expected = tuple(float(x) for x in boundary_clarity(table, "reference"))
    assert boundary_values(doc, edited, models, {}, cache=cache) == pytest.approx(expected)
    store = {("table", edited.doc_id, tuple((c.start, c.end) for c in edited.chunks), models.identity, False, None):
             table}
    empty = OutputCache(cache.directory.parent / "empty")
    assert boundary_values(doc, edited, models, store, cache=empty) == pytest.approx(expected)
    paper = boundary_values(doc, edited, models, store, mode="paper", cache=empty)
    assert paper == pytest.approx(tuple(float(x) for x in boundary_clarity(table, "paper")))


def test_an_edit_embeds_only_its_two_new_chunks(edit, cache) -> None:
    _doc, base, _entry, edited = edit
    embedder = RecordingEmbedder()
    base_vectors, hit = embed_texts(embedder, [c.text for c in base.chunks], cache=cache)
    assert not hit and len(embedder.texts) == 6
    embedder.texts.clear()
    vectors, hit = embed_texts(embedder, [c.text for c in edited.chunks], cache=cache)
    assert not hit
    assert embedder.texts == [edited.chunks[3].text, edited.chunks[4].text]
    # The reused rows are exactly the base's; the new ones what the embedder gives for those texts.
    assert np.array_equal(vectors[[0, 1, 2, 5, 6]], base_vectors[[0, 1, 2, 4, 5]])
    assert np.allclose(vectors[3:5], SeededEmbedder().embed([edited.chunks[3].text, edited.chunks[4].text]))
    # The whole list is cached as before; a one-text list reads its own entry.
    embedder.texts.clear()
    again, hit = embed_texts(embedder, [c.text for c in edited.chunks], cache=cache)
    assert hit and embedder.texts == [] and np.array_equal(again, vectors)
    assert cache.contains(embeddings_key("fp-seeded-embedder", [edited.chunks[3].text]))
    one, hit = embed_texts(embedder, [base.chunks[0].text], cache=cache)
    assert hit and np.array_equal(one[0], base_vectors[0])


def test_ds_of_the_edit_embeds_two_texts_in_the_scoring_job(edit, cache) -> None:
    doc, base, entry, edited = edit
    embedder = RecordingEmbedder()
    score_chunkings([base], scorer=None, embedder=lambda: embedder, complete=False, window=None, cache=cache)
    embedder.texts.clear()
    run = score_chunkings([base, edited], scorer=None, embedder=lambda: embedder, complete=False, window=None,
                          cache=cache)
    assert sorted(embedder.texts) == sorted([edited.chunks[3].text, edited.chunks[4].text])
    assert run.results[1][1].shape == (7, 8)


def test_ds_of_an_edit_is_planned_as_two_texts_to_embed(edit, cache) -> None:
    doc, base, entry, edited = edit
    models = _models(LengthScorer())
    cold = plan_edit_quality(doc, None, base, entry, edited, models, metrics=["ds"], window=None, store={},
                             cache=cache)
    assert (cold.texts_to_embed, cold.auto, cold.changed_pairs) == (6 + 2, True, 2)
    score_chunkings([base], scorer=None, embedder=SeededEmbedder, complete=False, window=None, cache=cache)
    plan = plan_edit_quality(doc, None, base, entry, edited, models, metrics=["ds"], window=None, store={},
                             cache=cache)
    assert (plan.texts_to_embed, plan.missing_pairs, plan.auto) == (2, 0, True)
    assert plan.changes[0].base.exact and plan.changes[0].edited is None
    assert plan.note == "notes/edit.txt: 2 chunks changed by the edits; to compute: 2 chunks to embed"


def test_retrieval_without_a_question_set_or_on_another_document_says_why(edit) -> None:
    doc, base, entry, _edited = edit
    models = _models(LengthScorer())
    args = {"qset_name": "Session set", "embedder": None, "retrieve": 5, "auto": False, "cross_corpus": True}
    none = plan_edit_retrieval(doc, None, base, entry, None, models, **args)
    assert (none.message, none.job) == (NO_QUESTION_SET, None)
    other_text = "Another corpus about something else entirely. It has two sentences."
    other = QuestionSet((Question("What is it about?", (Reference(other_text[:29], 0, 29),), "c1"),), {"c1": other_text})
    off = plan_edit_retrieval(doc, None, base, entry, other, models, **args)
    assert off.job is None
    assert off.message == ("The question set Session set (1 question) is not on notes/edit.txt: the edits change "
                           "none of its answers")
    mine = QuestionSet.from_document(doc, [Question("What does sentence 3 say?", (Reference(doc.text[:40], 0, 40),), "")])
    on = plan_edit_retrieval(doc, ConfigEntry(0, "A", BASE), base, entry, mine, models, **args)
    assert on.message == "" and on.on_document == 1 and on.job is not None
    assert on.label == "Re-evaluate on Session set (1 question)"
    assert on.job.meta["tags"] == ["A", "C"]


class CountingEmbedder:
    """The bundled embedder, counting the texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner, self.info, self.texts = inner, inner.info, []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts, *, progress=None):
        self.texts += list(texts)
        return self.inner.embed(texts, progress=progress)


def test_retrieval_of_the_edit_indexes_only_its_new_chunks(edit, cache, embedder, store) -> None:
    doc, base, entry, edited = edit
    qset = QuestionSet.from_document(doc, [Question("What does sentence 3 say?", (Reference(doc.text[:40], 0, 40),), ""),
                                           Question("Topic 4?", (Reference(doc.text[200:260], 200, 260),), "")])
    counting = CountingEmbedder(embedder)
    benchmark = evaluate(qset, [BASE, entry.config], embedder=counting, retrieve=2, store=store, cache=cache)
    assert [r.texts_embedded for r in benchmark.results] == [6, 2]
    assert counting.texts[-2:] == [edited.chunks[3].text, edited.chunks[4].text]
    assert [r.chunks for r in benchmark.results] == [6, 7]
    line = retrieval_changes(benchmark, "Session set")
    assert line.startswith("Session set (2 questions): IoU ")
    assert line.endswith(" (the edited copy's index embedded 2 chunks)")


def test_cs_is_shown_on_the_graph_picked(edit, cache) -> None:
    doc, base, entry, edited = edit
    args = {"metrics": ["bc", "cs"], "window": 2, "store": {}, "cache": cache}
    plan = plan_edit_quality(doc, None, base, entry, edited, _models(LengthScorer()), graph="incomplete", **args)
    assert [(c.metric, c.label) for c in plan.changes] == [("bc", "BC"), ("cs_incomplete", "CS (j − i > δ)")]
    assert plan.line == "BC – → – · CS (j − i > δ) – → –"
    with pytest.raises(ParameterError, match="graph must be one of complete, incomplete, got 'full'"):
        plan_edit_quality(doc, None, base, entry, edited, _models(LengthScorer()), graph="full", **args)


def test_a_reusing_run_cut_short_keeps_the_texts_it_embedded(edit, cache, monkeypatch) -> None:
    monkeypatch.setattr(embeddings, "EMBED_PART", 2)
    _doc, base, _entry, _edited = edit
    embedder = RecordingEmbedder()
    embed_texts(embedder, [c.text for c in base.chunks], cache=cache)
    new = [f"A new chunk number {i}." for i in range(5)]
    texts = [c.text for c in base.chunks[:3]] + new
    calls = []

    class Failing(RecordingEmbedder):
        def embed(self, texts, *, progress=None):
            calls.append(list(texts))
            if len(calls) == 3:
                raise RuntimeError("killed")
            return super().embed(texts, progress=progress)

    with pytest.raises(RuntimeError, match="killed"):
        embed_texts(Failing(), texts, cache=cache)
    assert calls[:2] == [new[:2], new[2:4]]
    again = RecordingEmbedder()
    vectors, hit = embed_texts(again, texts, cache=cache)
    assert not hit and again.texts == [new[4]]  # the parts done before the kill were kept per text
    assert np.allclose(vectors, SeededEmbedder().embed(texts))
