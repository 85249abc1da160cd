"""A session's settings both ways: written by their names in lab.settings, read back checked, old names understood."""

from __future__ import annotations

import pytest

from backend.errors import InputError
from backend.lab.session import opened_settings, settings_to_save
from backend.report.session import DocRef, Session, parse_session, session_to_json
from backend.retrieval.questions import load_sample_question_set
from backend.text.document import Document

DOC = Document.from_text("One sentence. Another one.", source="s.txt")


def test_settings_are_saved_by_name_and_refused_values_are_left_out() -> None:
    values = {
        "ppl": {"threshold": 1.32, "rule": "paper", "target_length": 0},
        "quality": {"K": 0.9, "metrics": ["bc", "ds"], "cs_rule": "loose"},  # a rule the setting refuses
        "nowhere": {"x": 1},
    }
    assert settings_to_save(values) == {
        "ppl": {"threshold": 1.32, "rule": "paper", "target_length": 0},
        "quality": {"K": 0.9, "metrics": ["bc", "ds"]},
    }


def test_a_saved_session_opens_with_the_same_settings() -> None:
    values = {"ppl": {"threshold": 1.32, "overlap": True}, "compare": {"hist_unit": "characters"}}
    text = session_to_json(Session.make(DocRef.of(DOC), [], {}, settings_to_save(values)))
    opened = opened_settings(parse_session(text).settings)
    assert opened.values == values and opened.questions is None and opened.notes == ()


def test_an_older_files_theta_is_read_as_threshold_and_bad_values_are_skipped() -> None:
    raw = {"ppl": {"theta": 0.25, "tokenizer": "no-such-tokenizer"}, "quality": {"K": "0.8", "delta": 2}}
    assert opened_settings(raw).values == {"ppl": {"threshold": 0.25}, "quality": {"delta": 2}}


def test_the_question_set_is_embedded_and_read_back() -> None:
    questions = load_sample_question_set("narrative")
    saved = settings_to_save({}, questions)
    assert set(saved) == {"questions"} and saved["questions"]["count"] == len(questions)
    assert opened_settings(saved).questions == questions
    too_large = {"questions": {"sha": saved["questions"]["sha"], "count": 12}}  # named by its hash only
    opened = opened_settings(too_large)
    assert opened.questions is None
    assert opened.notes == (
        f"the session's question set (12 questions, hash {saved['questions']['sha']}) was too large to embed: "
        "import it on the Benchmark page",
    )
    with pytest.raises(InputError, match="does not match its hash"):
        opened_settings({"questions": {**saved["questions"], "sha": "0" * 16}})
