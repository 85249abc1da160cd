"""Questions on this document in the backend: methods, measured estimates, the plan, the session set."""

from __future__ import annotations

import pytest

from backend.errors import InputError, ParameterError
from backend.figures.markdown import md_text
from backend.lab.questions import (
    LOCAL_WARNING,
    ChatEndpoint,
    estimate_text,
    generate_now,
    generation_form,
    generation_is_local,
    generation_options,
    generation_view,
    load_question_set_at,
    merge_questions,
    on_document,
    plan_generation,
    question_set_view,
    runs_inline,
    save_question,
    session_set_after,
)
from backend.progress import Progress
from backend.retrieval.generation import estimate_seconds, expected_attempts, measured_rate, rate_key, record_rate
from backend.retrieval.live import add_questions
from backend.retrieval.questions import load_sample_question_set
from backend.text.document import Document

TEXT = (
    "Granite lighthouses line the northern coast of the island. "
    "The Skerry light was built in 1844 by the engineer Alan Stevenson. "
    "Its tower rises 48 metres above the reef and is the tallest in Scotland.\n\n"
    "Keepers rowed supplies out from the harbour at Hynish every fortnight. "
    "Storms often kept the relief boat in port for weeks at a time."
)


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _doc() -> Document:
    return Document.from_text(TEXT, source="lights.txt")


def test_estimates_come_from_the_rate_measured_here() -> None:
    assert estimate_text("bundled", 10) == "time measured on the first run"
    assert estimate_text("model-free", 10) == "1 s"
    # A run: 10 s loading, 10 attempts in 50 s, 5 kept → 5 s per attempt, 2 attempts per kept question.
    rate = record_rate(rate_key("bundled"), 10.0, 50.0, 10, 5)
    assert rate == measured_rate("bundled:default")
    assert (rate.setup_seconds, rate.seconds_per_attempt, rate.attempts_per_kept, rate.attempts) == (10.0, 5.0, 2.0, 10)
    assert expected_attempts(10, rate, 32) == 20 and estimate_seconds(10, rate, 32) == 110.0
    assert estimate_text("bundled", 10) == "about 2 min"
    assert estimate_text("bundled", 2) == "30 s"
    # A second, warm run (no loading): the means take it in; the cold start's setup is kept.
    rate = record_rate(rate_key("bundled"), 0.5, 30.0, 10, 10)
    assert (rate.setup_seconds, rate.seconds_per_attempt, rate.attempts_per_kept, rate.attempts) == (10.0, 4.0, 1.3333, 20)
    with pytest.raises(ParameterError, match="method"):
        estimate_text("oracle", 3)


def test_options_offer_the_chat_model_only_with_an_api() -> None:
    none = {o.method: o for o in generation_options(5, ChatEndpoint())}
    assert [m for m, o in none.items() if o.available] == ["bundled", "model-free"]
    assert "no chat model configured" in none["chat"].why_not and "weaker" in none["bundled"].warning
    api = {o.method: o for o in generation_options(5, ChatEndpoint(base_url="http://127.0.0.1:9/v1", model="m"))}
    assert api["chat"].available and api["chat"].title == "Chat model · m at http://127.0.0.1:9/v1"
    assert not {o.method: o for o in generation_options(5, None)}["chat"].available  # the session chose the bundled chat
    assert generation_is_local(False, "", "") and not generation_is_local(False, "http://x/v1", "")


def test_the_plan_keeps_the_key_out_and_refuses_chat_without_an_api() -> None:
    doc = _doc()
    chat = ChatEndpoint(base_url=" https://x/v1 ", model="m", api_key="sk-secret")
    plan = plan_generation(doc, 3, method="chat", chat=chat)
    assert plan.signature == ("generate", doc.id, 3, "chat", "https://x/v1", "m")
    assert "sk-secret" not in repr(plan) and dict(plan.meta) == {
        "doc_id": doc.id, "method": "chat", "estimate": "time measured on the first run",
    }
    assert plan.title == "Generating 3 questions (chat model (the report's method))"
    with pytest.raises(ParameterError, match="No chat model configured"):
        plan_generation(doc, 3, method="chat", chat=ChatEndpoint())
    with pytest.raises(ParameterError, match="method"):
        plan_generation(doc, 3, method="oracle")
    # The model-free plan runs here, with no model.
    counts = []
    gen = plan_generation(doc, 2, method="model-free").run(Progress(counts=lambda d, t: counts.append((d, t))))
    assert gen.method == "model-free" and len(gen.questions) == 2 and counts[-1] == (8, 8)
    assert runs_inline("model-free", doc) and not runs_inline("bundled", doc)


def test_generated_questions_replace_a_set_on_another_document_and_merge_into_one_on_this() -> None:
    doc = _doc()
    gen = generate_now(doc, 3)
    sample = load_sample_question_set("narrative")
    assert not on_document(sample, doc) and not on_document(None, doc)
    replaced = session_set_after(sample, gen, doc)
    assert len(replaced.qset) == 3 and on_document(replaced.qset, doc)
    assert replaced.message == "The session's set is now **3** question(s) on lights\\.txt (it held 12 question(s) on another document)."

    marked = add_questions(None, doc, "Who built the Skerry light?", [(59, 125)])
    merged = session_set_after(marked, gen, doc)
    assert len(merged.qset) == 4 and merged.added == 3 and merged.qset.questions[0].question == "Who built the Skerry light?"
    again = session_set_after(merged.qset, gen, doc)
    assert again.added == 0 and len(again.qset) == 4 and "(now 4; 3 already there)" in again.message
    for q in merged.qset.questions:
        assert all(doc.text[r.start : r.end] == r.content for r in q.references)
    with pytest.raises(ParameterError, match="another document"):
        session_set_after(None, gen, Document.from_text(TEXT + " More.", source="other.txt"))


def test_the_generation_form_and_view_the_benchmark_page_draws() -> None:
    # Moved from pages/benchmark.py: the method the form asks for, the kept questions at the thresholds, the caption.
    assert generation_form(False, "", "", "") == generation_form(True, "", "", "")
    local = generation_form(False, "", "sk-x", "gpt")
    assert (local.method, local.warning, local.chat.model, local.local) == ("chat", None, "gpt", False)
    assert generation_form(True, "", "sk-x", "").warning == LOCAL_WARNING
    gen = generate_now(_doc(), 3)
    view = generation_view(gen)
    assert (view.duplicate_threshold, view.excerpt_threshold) == (0.7, 0.4)
    assert view.shown == gen.refilter(0.7, 0.4)
    assert view.caption == (
        f"**{len(view.shown.questions)}** kept of {len(gen.candidates)} candidates ({gen.attempts} attempts, 0 rejected: "
        f"reply unparseable or an excerpt not in the document) · model {md_text(gen.model)} · {gen.seconds:.1f} s"
    )
    assert generation_view(gen, 1.0, -1.0).duplicate_threshold == 1.0


def test_the_session_set_saved_merged_shown_and_loaded_from_paths(tmp_path) -> None:
    doc = _doc()
    qset = save_question(None, doc, "Who built the Skerry light?", [(59, 125)])
    shown = question_set_view(qset, doc)
    assert [q.question for q in shown.saved] == ["Who built the Skerry light?"]
    assert shown.csv.splitlines()[0] == "question,references,corpus_id"
    assert question_set_view(qset).saved == ()
    assert len(merge_questions(qset, qset)) == 2 and merge_questions(None, qset) is qset
    with pytest.raises(ParameterError, match="^Give the path of questions.csv.$"):
        load_question_set_at("  ")
    with pytest.raises(InputError, match=": no such file$"):  # a folder where the CSV should be
        load_question_set_at(str(tmp_path), str(tmp_path))
