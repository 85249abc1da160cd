"""A saved session carries the session's tuning result: written in ``state.tuning``, read back checked."""

from __future__ import annotations

import json

import pytest

from backend.errors import InputError
from backend.lab.session import OpenedState, opened_state, state_to_save
from backend.report.session import DocRef, Session, parse_session, session_to_json
from backend.text.document import Document
from tests.support.tune_rows import sample_result

DOC = Document.from_text("One sentence. Another one.", source="s.txt")


def test_a_tuning_result_round_trips_through_a_session_file() -> None:
    result = sample_result()
    state, notes = state_to_save(None, None, tuning=result)
    assert notes == () and state["tuning"]["pick"] == "sentence chunk_overlap=0 chunk_size=300"
    text = session_to_json(Session.make(DocRef.of(DOC), [], {}, {}, state))
    opened = opened_state(parse_session(text).state, text_length=len(DOC.text))
    assert opened == OpenedState(None, None, result)
    assert opened.tuning.to_json() == result.to_json()


def test_a_tuning_result_too_large_is_left_out_with_a_note() -> None:
    state, notes = state_to_save(None, None, limit=100, tuning=sample_result())
    assert "tuning" not in state
    assert len(notes) == 1 and notes[0].startswith("the tuning result (") and "a session file holds" in notes[0]


def test_a_damaged_tuning_result_is_one_input_error() -> None:
    state, _ = state_to_save(None, None, tuning=sample_result())
    broken = json.loads(json.dumps(state))
    broken["tuning"]["pick"] = "nochunker size=3"
    with pytest.raises(InputError, match=r"^s\.json: the saved tuning result is damaged \("):
        opened_state(broken, 30, source="s.json")
    del broken["tuning"]["trials"]
    with pytest.raises(InputError, match="^session: the saved tuning result is damaged"):
        opened_state(broken, 30)
    with pytest.raises(InputError, match="^session: the saved tuning result is damaged$"):
        opened_state({"tuning": [1]}, 30)
