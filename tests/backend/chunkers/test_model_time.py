"""A chunking's time includes the model work behind it, computed now or read from the output cache (issue 23)."""

from __future__ import annotations

import numpy as np
import pytest

from backend.chunkers.base import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking, ModelTime, duration_text
from backend.metrics.stats import chunking_stats
from backend.models.cache import OutputCache
from backend.models.scoring import token_scores_key
from backend.models.timing import SECONDS_FIELD
from backend.text.document import Document

TEXT = (
    "The river rose in the night. By morning the bridge was gone. "
    "The mayor called a meeting. Nobody came, because the roads were flooded. "
    "Weeks later the water fell and the town began to rebuild."
)


def test_duration_text():
    assert [duration_text(s) for s in (0.027, 1.44, 59.94, 483.2, 7500)] == [
        "27 ms", "1.4 s", "59.9 s", "8 min 3 s", "2 h 5 min"
    ]


def _chunking(elapsed: float, model_time: ModelTime | None) -> Chunking:
    return Chunking(ChunkerConfig.make("ppl"), (), elapsed, "doc", 0, model_time=model_time)


def test_time_text_says_which_part_is_the_model():
    cached = _chunking(0.027, ModelTime(seconds=483.0, cached=1))
    assert cached.total_s == pytest.approx(483.027)
    assert cached.time_text == "8 min 3 s (model 8 min 3 s, from the cache; cut 27 ms)"
    assert cached.time_note == "model 8 min 3 s (cached) + cut 27 ms"
    computed = _chunking(2.5, ModelTime(seconds=2.4, computed_s=2.4, computed=1))
    assert computed.cut_s == pytest.approx(0.1)
    assert computed.time_text == "2.5 s (model 2.4 s, computed now; cut 100 ms)"
    old = _chunking(0.027, ModelTime(cached=1, unknown=1))
    assert old.total_s is None
    assert old.time_text == "cut 27 ms (model time unknown, from the cache)"
    assert old.time_note == "model time unknown (cached) + cut 27 ms"
    plain = Chunking(ChunkerConfig.make("recursive"), (), 0.004, "doc", 0)
    assert (plain.time_text, plain.time_note, plain.total_s) == ("4 ms", None, 0.004)


def test_stats_rows_carry_model_and_cut_time():
    row = chunking_stats([_chunking(0.027, ModelTime(seconds=483.0, cached=1))])[0]
    assert row["time_ms"] == pytest.approx(483027.0)
    assert row["cut_ms"] == pytest.approx(27.0)
    assert row["model_s"] == 483.0
    assert row["time"] == "8 min 3 s (model 8 min 3 s, from the cache; cut 27 ms)"
    unknown = chunking_stats([_chunking(0.027, ModelTime(cached=1, unknown=1))])[0]
    assert (unknown["time_ms"], unknown["model_s"]) == (None, None)
    assert unknown["time"] == "cut 27 ms (model time unknown, from the cache)"


def test_ppl_scoring_time_is_stored_and_read_back(tmp_path):
    doc = Document.from_text(TEXT)
    cache = OutputCache(tmp_path / "cache")
    first = make_chunker("ppl", {"threshold": 0.0}).chunk(doc, ModelContext(_cache=cache))
    assert first.model_time is not None
    assert (first.model_time.computed, first.model_time.cached, first.model_time.unknown) == (1, 0, 0)
    assert first.model_time.seconds == first.model_time.computed_s > 0
    assert first.cut_s == pytest.approx(first.elapsed_s - first.model_time.computed_s)

    again = make_chunker("ppl", {"threshold": 0.0}).chunk(doc, ModelContext(_cache=cache))
    assert again.chunks == first.chunks
    assert (again.model_time.computed, again.model_time.cached) == (0, 1)
    assert again.model_time.seconds == first.model_time.seconds  # the scoring's time, read from the entry
    assert again.model_time.computed_s == 0.0 and again.cut_s == again.elapsed_s
    assert again.time_text.startswith(duration_text(again.total_s) + " (model ")
    assert "from the cache" in again.time_text


def test_old_cache_entry_without_time_says_unknown(tmp_path):
    doc = Document.from_text(TEXT)
    cache = OutputCache(tmp_path / "cache")
    context = ModelContext(_cache=cache)
    make_chunker("ppl", {"threshold": 0.0}).chunk(doc, context)
    scorer = context.get_scorer()
    key = token_scores_key(scorer.info.fingerprint, doc.text, None, scorer_kind=scorer.info.kind)
    value = cache.get(key)
    assert value is not None and value[SECONDS_FIELD] > 0
    cache.put(key, {k: v for k, v in value.items() if k != SECONDS_FIELD})  # as written before issue 23

    old = make_chunker("ppl", {"threshold": 0.0}).chunk(doc, ModelContext(_cache=cache))
    assert (old.model_time.cached, old.model_time.unknown) == (1, 1)
    assert old.total_s is None
    assert old.time_text.endswith("(model time unknown, from the cache)")
    row = chunking_stats([old])[0]
    assert row["time_ms"] is None and row["model_s"] is None


def test_embedding_time_is_recorded_for_semantic_chunkers(tmp_path):
    doc = Document.from_text(TEXT)
    cache = OutputCache(tmp_path / "cache")
    first = make_chunker("semantic", {}).chunk(doc, ModelContext(device="cpu", _cache=cache))
    assert first.model_time.computed >= 1 and first.model_time.seconds > 0
    again = make_chunker("semantic", {}).chunk(doc, ModelContext(device="cpu", _cache=cache))
    assert again.model_time.computed == 0 and again.model_time.cached >= 1
    assert again.model_time.seconds == pytest.approx(first.model_time.seconds)
    assert np.isfinite(again.total_s)


def test_model_free_chunkers_have_no_model_time():
    chunking = make_chunker("recursive", {"chunk_size": 20}).chunk(Document.from_text(TEXT))
    assert chunking.model_time is None
    assert chunking_stats([chunking])[0]["model_s"] is None
