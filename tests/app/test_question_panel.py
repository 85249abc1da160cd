"""The "Questions on this document" panel on the Summary and Retrieval pages, with ``AppTest``.

A PDF loaded as the document (the bundled technical guide typeset as a PDF), the session's set on
another document (the bundled narrative set): the Summary's panel generates model-free questions,
which replace it; on the Retrieval page, generated questions join a hand-marked one on the same
document, and the session's chat model (a scripted OpenAI-compatible server) generates in a
background job. Every excerpt is an exact substring of the document.
"""

from __future__ import annotations

import json
import re

import pytest

from backend.chunking import ConfigEntry
from backend.retrieval.generation import PLEDGE
from backend.retrieval.live import add_questions
from backend.retrieval.questions import load_sample_question_set
from backend.samples import load_sample
from components.state import normalized_config
from tests.support.apptest import isolated_lab, open_page, wait_job
from tests.support.apptest import run as _run
from tests.support.scripted_chat_server import start_scripted_server

CONFIGS = (("recursive", {"chunk_size": 200, "chunk_overlap": 0}), ("sentence", {"chunk_size": 200}))


@pytest.fixture(scope="module", autouse=True)
def lab_env(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("question-panel-data")) as data:
        yield data


def _entries() -> list[ConfigEntry]:
    return [ConfigEntry(i, "AB"[i], normalized_config(n, p)) for i, (n, p) in enumerate(CONFIGS)]


def _exact(qset, doc) -> None:
    assert set(qset.corpora.values()) == {doc.text}
    for q in qset.questions:
        for r in q.references:
            assert doc.text[r.start : r.end] == r.content


def test_summary_generates_model_free_questions_that_replace_a_set_on_another_document() -> None:
    doc = load_sample("technical-pdf")
    at = open_page("pages/summary.py", doc, _entries())
    at.session_state["ret_qset"] = load_sample_question_set("narrative")
    _run(at)
    radio = at.radio(key="sum_qgen_method")
    assert re.fullmatch(r"Model-free \(seconds, offline\) · \d+ s", radio.options[0])  # no chat model: the quick one first
    assert any(c.value.startswith("Chat model: no chat model configured") for c in at.caption)
    radio.set_value("model-free")
    button = at.button(key="sum_qgen_go")
    assert re.fullmatch(r"Generate questions on this document · \d+ s", button.label)
    at.number_input(key="sum_qgen_n").set_value(8)
    button.click()
    _run(at)
    qset = at.session_state["ret_qset"]
    assert len(qset) == 8
    _exact(qset, doc)
    assert any("The session's set is now **8** question(s)" in s.value and "another document" in s.value
               for s in at.success)
    assert any(c.value.startswith("8 kept of 8 attempted · model\\-free questions from a passage and its neighbourhood")
               for c in at.caption)
    (panel,) = [e for e in at.expander if e.label == "Questions on this document"]
    assert panel.proto.expanded  # the set is on this document now, but the result it just made stays in view
    assert not at.exception and not at.error


def test_retrieval_merges_generated_questions_with_a_hand_marked_one() -> None:
    doc = load_sample("technical-pdf")
    at = open_page("pages/retrieval.py", doc, _entries())
    marked = add_questions(None, doc, "What does Kestrel ship as?", [(doc.text.index("Kestrel ships"), doc.text.index("Kestrel ships") + 40)])
    at.session_state["ret_qset"] = marked
    _run(at)
    at.radio(key="ret_qgen_method").set_value("model-free")
    at.number_input(key="ret_qgen_n").set_value(5)
    at.button(key="ret_qgen_go").click()
    _run(at)
    qset = at.session_state["ret_qset"]
    assert len(qset) == 6 and qset.questions[0].question == "What does Kestrel ship as?"
    _exact(qset, doc)
    assert any("Added **5** question(s)" in s.value and "(now 6; 0 already there)" in s.value for s in at.success)
    # The same click again adds nothing twice (the method is deterministic).
    at.button(key="ret_qgen_go").click()
    _run(at)
    assert len(at.session_state["ret_qset"]) == 6
    assert not at.exception and not at.error


def test_a_chat_model_generates_in_a_background_job_and_its_questions_join_the_set() -> None:
    """The session's chat model (a scripted OpenAI-compatible server): a job with progress, then the set."""
    doc = load_sample("technical-pdf")
    sentences = [doc.text[s.start : s.end] for s in doc.sentences if 60 < s.end - s.start < 300][:6]
    asked = iter(range(100))

    def reply(_messages):
        sentence = sentences[next(asked) % len(sentences)]
        return json.dumps({"oath": PLEDGE, "question": f"What does the guide say about {' '.join(sentence.split()[:8])}?",
                           "references": [sentence]})

    with start_scripted_server(reply=reply) as server:
        at = open_page("pages/retrieval.py", doc, _entries())
        at.session_state["models_chat_choice"] = ("remote", (server.url, "scripted-model"))
        _run(at)
        radio = at.radio(key="ret_qgen_method")
        assert radio.options[0].startswith("Chat model · scripted-model at http://")
        radio.set_value("chat")
        at.number_input(key="ret_qgen_n").set_value(2)
        at.button(key="ret_qgen_go").click()
        _run(at)
        job = wait_job(at, "ret_qgen_job", timeout=240)
        _run(at)
    assert job.state == "done", job.error
    gen = job.result
    assert gen.method == "chat" and gen.model == "scripted-model" and len(gen.questions) >= 1
    qset = at.session_state["ret_qset"]
    assert len(qset) == len(gen.questions)
    _exact(qset, doc)
    assert any(c.value.startswith(f"{len(gen.questions)} kept of {gen.attempts} attempted") for c in at.caption)
    assert "ret_qgen_again" in [b.key for b in at.button]  # a finished run offers another
    assert not at.exception and not at.error
