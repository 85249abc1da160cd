"""The session's chat model: chosen on the Models page, used by the LLM chunkers' jobs on Compare.

A scripted OpenAI-compatible server (real HTTP on 127.0.0.1) answers; its answer names no
rule, so ``moc`` falls back on the recursive splitter and the card warns of it, with the reason.
"""

from __future__ import annotations

import uuid

from backend.chunking import ConfigEntry
from backend.text.document import Document
from components.state import normalized_config
from tests.support.apptest import open_page, wait_job
from tests.support.apptest import run as _run
from tests.support.scripted_chat_server import start_scripted_server

KEY = "sk-session-" + uuid.uuid4().hex[:12]


def _page_text(at) -> str:
    parts = [c.value for c in at.caption] + [m.value for m in at.markdown] + [e.value for e in at.error]
    parts += [str(t.value) for t in at.text_input if t.key != "models_chat_key_input"]  # the password box itself
    return " ".join(parts)


def test_models_page_sets_the_chat_model_and_compare_runs_moc_through_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "CHUNKLAB_CHAT"):
        monkeypatch.delenv(name, raising=False)
    with start_scripted_server(reply=lambda messages: "I cannot split this.", model="scripted-model",
                               api_key=KEY) as server:
        at = open_page("pages/models.py")
        at.radio(key="models_chat_source").set_value("remote")
        _run(at)
        at.text_input(key="models_chat_url").set_value(server.url)
        at.text_input(key="models_chat_key_input").set_value(KEY)
        at.button(key="models_chat_use").click()  # no model name yet: a one-line error
        _run(at)
        assert any("enter the model name" in e.value for e in at.error)
        at.text_input(key="models_chat_model").set_value("scripted-model")
        at.button(key="models_chat_use").click()
        _run(at)
        assert "LLM chunkers use: scripted-model at " in _page_text(at)
        assert "Chat: scripted-model (API)" in [t.value for t in at.sidebar.text]
        assert KEY not in _page_text(at)

        doc = Document.from_text(
            f"Chat run {uuid.uuid4().hex[:8]}.\n\nThe lighthouse stood on the cliff.\n\nStocks fell on Monday.",
            source="chat.txt",
        )
        at.session_state["doc"] = doc
        at.session_state["configs"] = [ConfigEntry(0, "A", normalized_config("moc", {}))]
        at.session_state["configs_next_uid"] = 1
        at.switch_page("pages/compare.py")
        _run(at)
        job = wait_job(at, "cmp_chat_job")
        assert job.state == "done", job.error
        assert server.chat_requests, "the session's chat model was not asked"
        sent = server.chat_requests[0]
        assert sent["body"]["model"] == "scripted-model"
        headers = {k.lower(): v for k, v in sent["headers"].items()}
        assert headers["authorization"] == f"Bearer {KEY}"
        card = " ".join(w.value for w in at.get_by_key("cmp_card_0").warning)
        # The card shows the chunking read back through the cache after the job: its answer is cached. No rule
        # was usable, so the window fell back on the recursive splitter: a warning says so, and why (issue 25).
        assert "content loss 0.0 %" in card and "1 cached" in card
        assert ("fallback: 1 of 1 window had no usable rule (window 1: anchors missing for 1 of 1 rule) and was "
                "split by the recursive splitter at 120 tokens, 100.0 % of the text") in card
        assert KEY not in _page_text(at)
