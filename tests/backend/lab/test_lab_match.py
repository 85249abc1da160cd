"""Match lengths as the Compare and Quality pages run it: one outcome per configuration, the tuned entries."""

from __future__ import annotations

import pytest

from backend.chunkers import run_chunker
from backend.chunkers.match_length import MatchResult
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.lab.match import MatchOutcome, match_rows, needs_model, run_matches, tuned_entries
from backend.text.document import Document


@pytest.fixture(scope="module")
def doc() -> Document:
    text = " ".join(f"Sentence number {i} talks about topic {i % 7} at some length." for i in range(60))
    return Document.from_text(text, source="m.txt")


def test_match_rows_report_target_achieved_and_status(doc: Document) -> None:
    cfg = run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 200, "chunk_overlap": 0})).config
    outcome = run_matches(doc, [(0, cfg), (1, ChunkerConfig.make("no_such_chunker"))], 60.0)
    assert isinstance(outcome, MatchOutcome) and outcome.target == 60 and outcome.tunable
    results = outcome.results
    assert isinstance(results[0][1], MatchResult) and isinstance(results[1][1], str)
    entries = [ConfigEntry(0, "A", cfg), ConfigEntry(1, "B", ChunkerConfig("no_such_chunker"))]
    a, b = match_rows(entries, outcome)
    r = results[0][1]
    assert a["parameter"] == "chunk_size" and a["before"] == "200" and a["after"] == str(r.config.params_dict["chunk_size"])
    assert a["achieved"] == pytest.approx(r.achieved, abs=0.05)
    assert a["status"] == ("within ±5%" if r.within else "closest reachable")
    assert b["status"] and b["achieved"] is None


def test_tuned_entries_keep_uid_and_letter(doc: Document) -> None:
    cfg = run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 200, "chunk_overlap": 0})).config
    other = run_chunker(doc, ChunkerConfig.make("sentence", {})).config
    outcome = run_matches(doc, [(3, cfg)], 60.0)
    entries = [ConfigEntry(3, "B", cfg), ConfigEntry(5, "A", other)]
    new, changed = tuned_entries(entries, outcome)
    assert changed == 1
    assert [(e.uid, e.tag) for e in new] == [(3, "B"), (5, "A")]
    assert new[0].config == outcome.results[0][1].config != cfg and new[1] is entries[1]


def test_needs_model_follows_the_registry() -> None:
    assert not needs_model([(0, ChunkerConfig.make("recursive"))])
    assert needs_model([(0, ChunkerConfig.make("recursive")), (1, ChunkerConfig.make("semantic"))])
