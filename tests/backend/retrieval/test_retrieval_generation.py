"""Question generation: reply parsing, the report's prefilters, ``llm.chat`` over real HTTP, the local fallback.

The LLM path runs against tests/support/openai_compat_server.py (the bundled SmolLM2 behind a
real OpenAI-compatible HTTP server). That model is far too small to follow the report's JSON
prompt, so its attempts are expected to be rejected, with reasons; the parsing and filtering
of good replies are pinned on written replies instead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from backend.errors import ModelError, ParameterError
from backend.models.chat import chat, remote_llm_configured, resolve_model
from backend.retrieval.generation import (
    PLEDGE,
    SYSTEM_PROMPT,
    Candidate,
    generate_questions,
    measured_rate,
    parse_reply,
    prefilter,
    question_messages,
    rate_key,
)
from backend.retrieval.questions import Question, Reference, parse_questions_csv, questions_to_csv
from backend.text.document import Document
from tests.conftest import ROOT
from tests.support.openai_compat_server import start_server
from tests.support.scripted_chat_server import start_scripted_server

KEY = "sk-chunklab-gen-7c1d0e9b44"
TEXT = (
    "The Amazon rainforest covers much of the Amazon basin of South America. "
    "The basin encompasses seven million square kilometres, of which five and a half million are covered by the rainforest. "
    "The region includes territory belonging to nine nations. "
    "The majority of the forest is contained within Brazil, with sixty percent of the rainforest.\n\n"
    "The rainforest likely formed during the Eocene era. It appeared following a global reduction of tropical "
    "temperatures when the Atlantic Ocean had widened sufficiently to provide a warm, moist climate to the basin."
)


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def server():
    with start_server(api_key=KEY, max_chat_tokens=48) as running:
        yield running


@pytest.fixture(scope="module")
def doc():
    return Document.from_text(TEXT, source="amazon notes.txt")


# --- the prompt and the replies --------------------------------------------------------------


def test_prompt_is_the_reports_with_the_oath():
    assert PLEDGE in SYSTEM_PROMPT and "exact copies from the original text" in SYSTEM_PROMPT
    assert "YOU MUST INCLUDE THE OATH ABOVE IN YOUR RESPONSE" in SYSTEM_PROMPT
    messages = question_messages("Some text.", ["What is A?", "What is B?"])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].startswith("Text: Some text.")
    assert "What is A?\nWhat is B?" in messages[1]["content"]


def test_parse_reply_accepts_json_fences_and_the_reports_python_style():
    reply = json.dumps({"oath": PLEDGE, "question": "When?", "references": ["In 1791."]})
    assert parse_reply(reply) == ("When?", ["In 1791."])
    assert parse_reply(f"Sure!\n```json\n{reply}\n```\nHope this helps.") == ("When?", ["In 1791."])
    # The report's own example response uses single quotes.
    example = SYSTEM_PROMPT[SYSTEM_PROMPT.index("Response: ") + len("Response: ") :].split("\n")[0]
    question, refs = parse_reply(example)
    assert question == "What experiments were done in this paper?" and len(refs) == 4
    assert parse_reply('{"question": "Q?", "references": [{"content": "x y"}]}') == ("Q?", ["x y"])


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("The Amazon is big.", "no JSON object"),
        ("{not: valid, json", "no JSON object"),
        ("{'question': 'Q?', 'references': [}", "does not parse"),
        ('{"references": ["a"]}', "no 'question'"),
        ('{"question": "Q?", "references": []}', "no 'references'"),
        ('{"question": "Q?", "references": [3]}', "not a non-empty string"),
        ("[1, 2]", "no JSON object"),
    ],
)
def test_parse_reply_rejects_with_a_reason(reply, reason):
    with pytest.raises(ValueError, match=reason):
        parse_reply(reply)


# --- prefilters ------------------------------------------------------------------------------


def _candidate(q: str, sims: tuple[float, ...]) -> Candidate:
    return Candidate(Question(q, (Reference("x", 0, 1),), "c"), sims, 1)


def test_prefilter_is_the_reports_two_filters_in_order():
    cands = [_candidate("a", (0.8,)), _candidate("b", (0.9, 0.3)), _candidate("c", (0.7,)), _candidate("d", (0.6,))]
    sim = np.array([
        [1.0, 0.9, 0.75, 0.5],
        [0.9, 1.0, 0.2, 0.2],
        [0.75, 0.2, 1.0, 0.72],
        [0.5, 0.2, 0.72, 1.0],
    ])
    kept, why = prefilter(cands, sim, 0.70, 0.40)
    # b: an excerpt below 0.40; c: duplicate of a; d: similar to c, but c was dropped, so d stays.
    assert kept == [True, False, False, True]
    assert "below 0.40" in why[1] and "near-duplicate of candidate 1" in why[2] and why[3] is None
    assert prefilter(cands, sim, 0.95, 0.0)[0] == [True, True, True, True]
    with pytest.raises(ParameterError, match="duplicate_threshold"):
        prefilter(cands, sim, 1.5, 0.4)


# --- llm.chat over real HTTP -----------------------------------------------------------------


def test_chat_through_an_openai_compatible_server(server):
    assert resolve_model(server.url, api_key=KEY) == server.engine.name  # the server's only model
    reply = chat([{"role": "user", "content": "Name a colour."}], base_url=server.url, api_key=KEY, max_tokens=8)
    assert isinstance(reply, str) and reply.strip()


def test_chat_errors_are_one_line_and_never_show_the_key(server, monkeypatch):
    with pytest.raises(ModelError) as info:
        chat([{"role": "user", "content": "hi"}], base_url=server.url, api_key="sk-wrong-secret-123", model="x")
    msg = str(info.value)
    assert "rejected the API key (HTTP 401)" in msg and "sk-wrong-secret-123" not in msg and "\n" not in msg
    assert info.value.__cause__ is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelError, match=f"127.0.0.1:{port}.* is unreachable"):
        chat([{"role": "user", "content": "hi"}], base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=0)
    with pytest.raises(ModelError, match="no LLM configured"):
        chat([{"role": "user", "content": "hi"}])
    assert not remote_llm_configured()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    assert remote_llm_configured()
    with pytest.raises(ParameterError):
        chat([], base_url=server.url)


def test_generation_through_the_server_rejects_what_is_not_verbatim(server, doc):
    result = generate_questions(doc, n=1, base_url=server.url, api_key=KEY, max_attempts=2, window_chars=400)
    assert result.weak is False and result.notice is None and result.model == server.engine.name
    assert result.attempts == 2
    # SmolLM2-135M cannot answer in the report's JSON: every attempt is rejected with its reason.
    for r in result.rejected:
        assert r.reason in {"the reply holds no JSON object", "the reply's JSON does not parse"} or "not in the document" in r.reason or "no '" in r.reason
    for q in result.questions:  # whatever it kept is verbatim
        assert all(doc.text[r.start : r.end] == r.content for r in q.references)
    assert KEY not in json.dumps(result.to_json())


# --- the local fallback ----------------------------------------------------------------------


def test_local_fallback_writes_weak_but_valid_questions(doc):
    result = generate_questions(doc, n=2, max_attempts=4, excerpt_threshold=0.2)
    assert result.weak is True and "weaker" in result.notice and "SmolLM2" in result.notice
    assert 1 <= len(result.candidates) <= 4 and len(result.questions) >= 1
    sentences = {(s.start, s.end) for s in doc.sentences}
    for c in result.candidates:
        q = c.question
        assert q.question.endswith("?") and q.corpus_id == "amazon_notes"
        (ref,) = q.references
        assert doc.text[ref.start : ref.end] == ref.content
        assert any(s == ref.start for s, _ in sentences)  # passages start at a sentence
        assert len(c.excerpt_similarities) == 1 and -1 <= c.excerpt_similarities[0] <= 1
    n = len(result.candidates)
    assert len(result.duplicate_similarities) == n * (n - 1) // 2
    assert len(result.excerpt_similarities) == n
    # The result round-trips through the Chroma format, and refiltering needs no model.
    qs = result.question_set()
    assert parse_questions_csv(questions_to_csv(qs), qs.corpora) == qs
    assert result.refilter(0.99, 1.0).questions == ()
    assert len(result.refilter(1.0, -1.0).questions) == n


def test_cli_generates_a_question_set_that_checks(tmp_path):
    src = tmp_path / "amazon.txt"
    src.write_text(TEXT, encoding="utf-8")
    # The shared test data dir keeps SmolLM2's one-time GGUF conversion between test runs.
    env = {**os.environ, "CHUNKLAB_DEVICE": "cpu"}
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "backend", "questions", "generate", str(src), "--out", str(tmp_path / "set"),
           "--n", "1", "--excerpt-threshold", "0.1", "--max-attempts", "3"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads(proc.stdout)
    assert summary["weak"] is True and summary["kept"] == 1 and summary["corpus_id"] == "amazon"
    assert (tmp_path / "set" / "corpora" / "amazon.md").read_text(encoding="utf-8") == TEXT
    check = subprocess.run(
        [sys.executable, "-m", "backend", "questions", "check", "--questions", str(tmp_path / "set" / "questions.csv"),
         "--corpora", str(tmp_path / "set" / "corpora")],
        cwd=ROOT, env=env, capture_output=True, timeout=600,
    )
    assert check.returncode == 0, check.stderr.decode()
    assert json.loads(check.stdout) == {"questions": 1, "corpora": {"amazon": 1}, "method": "bundled"}


# --- exact excerpts, excerpt de-duplication, the measured rate -------------------------------


def test_prefilter_drops_a_near_duplicate_excerpt_of_an_earlier_kept_question():
    cands = [_candidate("a", (0.8,)), _candidate("b", (0.9,)), _candidate("c", (0.7,))]
    questions = np.array([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.2, 1.0]])
    excerpts = np.array([[1.0, 0.95, 0.5], [0.95, 1.0, 0.5], [0.5, 0.5, 1.0]])
    kept, why = prefilter(cands, questions, 0.70, 0.40, excerpt_pair_similarity=excerpts)
    assert kept == [True, False, True]
    assert why[1] == "near-duplicate excerpt of candidate 1 (similarity 0.95 above 0.90)"
    assert prefilter(cands, questions, 0.70, 0.40)[0] == [True, True, True]  # no excerpt similarities: not applied


def test_chat_excerpts_found_ignoring_whitespace_are_kept_at_exact_offsets(doc, tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))  # the measured rate goes here
    replies = iter([
        # Whitespace differs from the document (a line break and double spaces): found, cut exactly.
        {"question": "When did the rainforest likely form?",
         "references": ["The rainforest  likely formed\nduring the Eocene era."]},
        # The same excerpt again under another question: a near-duplicate excerpt, dropped.
        {"question": "In which era did the Amazon forest appear?",
         "references": ["The rainforest likely formed during the Eocene era."]},
        {"question": "How many nations share the region?",
         "references": ["The region includes territory belonging to nine nations."]},
        {"question": "What is not in the text?", "references": ["A sentence the document does not hold."]},
    ])
    with start_scripted_server(reply=lambda _m: json.dumps({"oath": PLEDGE, **next(replies)})) as scripted:
        result = generate_questions(doc, n=3, method="chat", base_url=scripted.url, api_key="k", max_attempts=4,
                                    duplicate_threshold=0.95)  # only the excerpt filter can drop the second
    assert result.method == "chat" and result.attempts == 4
    assert [c.question.question for c in result.candidates] == [
        "When did the rainforest likely form?", "In which era did the Amazon forest appear?",
        "How many nations share the region?",
    ]
    first = result.candidates[0].question.references[0]
    assert first.content == "The rainforest likely formed during the Eocene era."
    assert doc.text[first.start : first.end] == first.content
    assert result.excerpt_pair_similarity[0, 1] > 0.99
    assert result.kept == (True, False, True) and result.drop_reasons[1].startswith("near-duplicate excerpt of candidate 1")
    assert result.rejected[0].reason == "reference 1 is not in the document"
    for q in result.questions:
        assert all(doc.text[r.start : r.end] == r.content for r in q.references)
    assert "3 kept" not in result.how and result.how.startswith("2 kept of 4 attempted · chat model")
    assert result.to_json()["method"] == "chat"
    rate = measured_rate(rate_key("chat", f"{scripted.url}|"))
    assert rate.attempts == 4 and rate.attempts_per_kept == 2.0
