"""Building multi-granularity indexes: every distinct text is embedded once across levels, with the bundled embedder."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from backend.chunkers import make_chunker
from backend.models.cache import OutputCache
from backend.retrieval.questions import load_sample_question_set
from backend.retrieval.retriever.levels import LevelRetriever
from backend.retrieval.store import ChunkStore, entry_text
from backend.text.document import Document

CONFIGS = {
    "mog": {},
    "mogg": {"t_graph": 0.2},
    "freechunker": {"encoder": "exact"},
}


class RecordingEmbedder:
    """The real embedder, recording every text it is asked to embed (no ``input_keys``: exact texts only)."""

    def __init__(self, inner):
        self.inner = inner
        self.info = inner.info
        self.dimension = inner.dimension
        self.seen: list[str] = []

    def embed(self, texts, *, progress=None):
        self.seen.extend(texts)
        return self.inner.embed(texts, progress=progress)


class RecordingEmbedderWithInputs(RecordingEmbedder):
    """The same, also saying what the model reads of each text (so texts read alike are embedded once)."""

    def input_keys(self, texts):
        return self.inner.input_keys(texts)


@pytest.fixture(scope="module")
def doc():
    """The narrative sample up to its last paragraph within 6,000 characters: texts still recur across levels (the
    tests assert it, it is what they are about), at about a third of the whole sample's embedding."""
    questions = load_sample_question_set("narrative")
    full = questions.document(questions.corpus_ids[0])
    cut = full.text.rindex("\n\n", 0, 6_000)
    return Document.from_text(full.text[:cut], source=full.source)


def level_texts(doc, index):
    """Every text a level of ``index`` embeds (FreeChunker's exact windows included), level by level."""
    return [entry_text(doc.text, e.ranges) for lv in index.levels for e in lv.entries]


def build(doc, name, embedder, tmp_path):
    config = make_chunker(name, CONFIGS[name]).config
    store = ChunkStore(path=tmp_path / f"chroma-{name}")
    return LevelRetriever(config).index(doc, store, embedder, cache=OutputCache(tmp_path / f"cache-{name}")), store


@pytest.fixture(scope="module")
def refrain():
    """A text whose sentences, and so FreeChunker's windows, recur (a refrain, a boilerplate line)."""
    verse = ["The tide came in over the flats.", "Gulls followed the boats home.", "Nobody counted the days."]
    lines = []
    for i in range(6):
        lines += [f"Morning {i + 1} began with fog over the harbour wall.", *verse]
    return Document.from_text(" ".join(lines) + "\n\n" + " ".join(lines[:8]), source="refrain.txt")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_distinct_text_is_embedded_once_across_levels(doc, refrain, embedder, tmp_path, name):
    doc = refrain if name == "freechunker" else doc
    recording = RecordingEmbedder(embedder)
    index, _ = build(doc, name, recording, tmp_path)
    texts = level_texts(doc, index)
    assert len(set(texts)) < len(texts)  # the same text at several levels: what this test is about
    assert max(Counter(recording.seen).values()) == 1
    assert set(recording.seen) == set(texts)
    assert index.texts_embedded == len(set(texts))


@pytest.mark.parametrize("name", ["mog", "mogg"])
def test_texts_the_model_reads_alike_are_embedded_once(doc, embedder, tmp_path, name):
    recording = RecordingEmbedderWithInputs(embedder)
    index, store = build(doc, name, recording, tmp_path)
    texts = list(dict.fromkeys(level_texts(doc, index)))
    keys = dict(zip(texts, embedder.input_keys(texts)))
    seen_keys = [keys[t] for t in recording.seen]
    assert len(set(seen_keys)) == len(seen_keys) == len(set(keys.values())) < len(texts)
    # Every entry's stored vector is the one the model gives its own text, alone: on a seeded sample of each
    # level's entries (embedding every entry again would double the test's cost for nothing more).
    for level in index.levels:
        picked = sorted(random.Random(0).sample(range(len(level.entries)), min(24, len(level.entries))))
        own = embedder.embed([entry_text(doc.text, level.entries[i].ranges) for i in picked])
        # Entries of one level can read alike (MoGG's graph nodes repeat a chunk): ask for all of them and more.
        twins = Counter(embedder.input_keys([entry_text(doc.text, e.ranges) for e in level.entries]))
        hits = store.query_level(level.collection, own, max(twins.values()) + 2)
        for i, top in zip(picked, hits):
            assert top[0].distance < 1e-5
            assert i in [h.index for h in top if h.distance < 1e-5]


def test_a_complete_index_embeds_nothing_and_a_missing_level_reuses_the_cache(doc, embedder, tmp_path):
    first = RecordingEmbedder(embedder)
    index, store = build(doc, "mog", first, tmp_path)
    again = RecordingEmbedder(embedder)
    rebuilt, _ = build(doc, "mog", again, tmp_path)
    assert (again.seen, rebuilt.reused) == ([], True)
    store.delete(index.levels[2].collection)
    third = RecordingEmbedder(embedder)
    repaired, _ = build(doc, "mog", third, tmp_path)
    assert third.seen == [] and not repaired.reused
    assert [len(lv) for lv in repaired.levels] == [len(lv) for lv in index.levels]
    level = repaired.levels[2]
    own = embedder.embed([entry_text(doc.text, level.entries[0].ranges)])
    assert store.query_level(level.collection, own, 1)[0][0].index == 0
