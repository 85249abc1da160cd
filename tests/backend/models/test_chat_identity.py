"""The chat model's served identity in every cache key, and timeouts sized from the server's measured speed.

Against the scripted OpenAI-compatible server in the llama.cpp manner: it lists the models it
was given (with their facts) and answers with a ``model`` of its own whatever the request
names, so only the listing and each answer's ``model`` tell which model answered.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from backend.chunkers import ModelContext
from backend.chunkers.base import make_chunker
from backend.errors import ModelError
from backend.lab.models import SessionModels
from backend.models.cache import OutputCache
from backend.models.chat import (
    PROBE_MESSAGES,
    ChatSpeed,
    RemoteChat,
    cached_reply,
    chat,
    chat_speed,
    sized_timeout,
)
from backend.models.openai_compat import ServedModel
from backend.models.rates import RATES_FILE, RateKey, RateStore
from backend.models.types import ModelInfo
from backend.text.document import Document
from tests.backend.chunkers.test_llm_chunkers import TEXT
from tests.support.cli import run_main
from tests.support.scripted_chat_server import start_scripted_server

MESSAGES = [{"role": "user", "content": "Say ok."}]
SMOL = {"id": "SmolLM2-135M-Instruct-Q8_0.gguf", "object": "model",
        "meta": {"n_params": 134515008, "n_vocab": 49152, "size": 144810144}}
BIG = {"id": "SmolLM2-135M-Instruct-Q8_0.gguf", "object": "model",
       "meta": {"n_params": 1711376384, "n_vocab": 49152, "size": 1820000000}}


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch, tmp_path):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "CHUNKLAB_LLM_TIMEOUT", "CHUNKLAB_CHAT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "0")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))  # a rate store of this test's own


@pytest.fixture()
def cache(tmp_path):
    return OutputCache(tmp_path / "cache")


def fresh_process(monkeypatch):
    """Identities confirmed in this process are asked again at once, as in a new process."""
    monkeypatch.setattr("backend.models.chat.IDENTITY_MAX_AGE_S", 0.0)


def test_a_name_the_server_does_not_list_is_refused_and_nothing_is_cached(cache):
    with start_scripted_server(models=[SMOL], answer_model="echo") as server:
        with pytest.raises(ModelError) as e:
            cached_reply(RemoteChat(server.url, "gpt-4o-mini"), MESSAGES, max_tokens=8, cache=cache)
        assert server.chat_requests == [] and server.probes == []
    assert str(e.value) == (
        f"LLM server at {server.url} has no model 'gpt-4o-mini' (it serves: SmolLM2-135M-Instruct-Q8_0.gguf); "
        "choose one with OPENAI_MODEL or --model"
    )
    assert cache.stats()["entries"] == 0


def test_the_llm_chunkers_show_the_refusal_line():
    doc = Document.from_text(TEXT)
    with start_scripted_server(models=[SMOL], answer_model="echo") as server:
        context = ModelContext(chat=RemoteChat(server.url, "gpt-4o-mini"))
        for name in ("llm_split", "lumber", "moc"):
            with pytest.raises(ModelError, match=r"has no model 'gpt-4o-mini' \(it serves: SmolLM2"):
                make_chunker(name, {}).chunk(doc, context)
        assert server.chat_requests == []


@pytest.mark.parametrize("listing", [True, False], ids=["lists-both", "no-listing"])
def test_an_answer_from_another_model_is_refused_and_not_cached(cache, listing):
    models = [{"id": "model-a", "object": "model"}, {"id": "model-b", "object": "model"}] if listing else None
    with start_scripted_server(reply=lambda m: "B's words", models=models, list_models=listing,
                               answer_model="model-b") as server:
        with pytest.raises(ModelError) as e:
            cached_reply(RemoteChat(server.url, "model-a"), MESSAGES, max_tokens=8, cache=cache)
    message = str(e.value)
    assert "answered" in message and "'model-b'" in message and "'model-a'" in message and "\n" not in message
    assert cache.stats()["entries"] == 0


def test_another_model_behind_the_same_url_and_name_does_not_hit_the_first_ones_answers(cache, monkeypatch):
    with start_scripted_server(reply=lambda m: "from the 135M", models=[SMOL], answer_model="echo") as small:
        remote = RemoteChat(small.url, SMOL["id"])
        assert cached_reply(remote, MESSAGES, max_tokens=8, cache=cache) == ("from the 135M", False)
        assert cached_reply(remote, MESSAGES, max_tokens=8, cache=cache) == ("from the 135M", True)
        port = int(small.url.rsplit(":", 1)[1].split("/")[0])
    fresh_process(monkeypatch)  # (within the process, a confirmed identity is asked again after 10 s)
    # The server restarted with other weights under the same file name, same URL.
    with start_scripted_server(reply=lambda m: "from the 1.7B", models=[BIG], answer_model="echo", port=port) as big:
        assert big.url == small.url
        assert cached_reply(RemoteChat(big.url, BIG["id"]), MESSAGES, max_tokens=8, cache=cache) == ("from the 1.7B", False)
        assert len(big.chat_requests) == 1
    assert cache.stats()["entries"] == 2


def test_the_same_served_model_behind_another_url_shares_answers(cache):
    with start_scripted_server(reply=lambda m: "first", models=[SMOL]) as a, \
            start_scripted_server(reply=lambda m: "second", models=[SMOL]) as b:
        assert cached_reply(RemoteChat(a.url), MESSAGES, max_tokens=8, cache=cache) == ("first", False)
        assert cached_reply(RemoteChat(b.url), MESSAGES, max_tokens=8, cache=cache) == ("first", True)
        assert b.chat_requests == []
        assert RemoteChat(b.url).fingerprint == ServedModel(
            SMOL["id"], facts=(("meta", json.dumps(SMOL["meta"], sort_keys=True, separators=(",", ":"))),)
        ).fingerprint("chat")


def test_a_dead_server_serves_no_cached_answer_under_an_unconfirmed_name(cache, monkeypatch):
    with start_scripted_server(reply=lambda m: "cached", models=[SMOL], answer_model="echo") as server:
        assert cached_reply(RemoteChat(server.url), MESSAGES, max_tokens=8, cache=cache) == ("cached", False)
        # Within the 10 s, the identity just confirmed still reads the cache with no request.
        assert cached_reply(RemoteChat(server.url, SMOL["id"]), MESSAGES, max_tokens=8, cache=cache) == ("cached", True)
    fresh_process(monkeypatch)
    for name in (None, SMOL["id"], "gpt-4o-mini"):
        with pytest.raises(ModelError) as e:
            cached_reply(RemoteChat(server.url, name), MESSAGES, max_tokens=8, cache=cache)
        assert str(e.value) == (
            f"LLM server at {server.url} is unreachable (connection refused); cached answers are not used "
            "while it cannot confirm which model it serves"
        )


def test_a_page_reads_cached_answers_only_under_an_identity_confirmed_lately_and_asks_no_server(cache, monkeypatch):
    """The cache-only context a page renders with never waits on a server (a hung one would hold the page)."""
    with start_scripted_server(reply=lambda m: "cached", models=[SMOL], answer_model="echo") as server:
        remote = RemoteChat(server.url, SMOL["id"])
        assert remote.confirmed_fingerprint() is None  # nothing confirmed yet in this process
        page = ModelContext.cache_only(_lm_info(), chat=remote).get_chat()
        assert not server.requests and page.fingerprint == "unconfirmed"
        assert cached_reply(remote, MESSAGES, max_tokens=8, cache=cache) == ("cached", False)  # a job: asks the server
        asked = len(server.requests)
        page = ModelContext.cache_only(_lm_info(), chat=remote).get_chat()
        assert page.fingerprint == remote.confirmed_fingerprint() == remote.fingerprint
        assert cached_reply(page, MESSAGES, max_tokens=8, cache=cache) == ("cached", True)
        assert len(server.requests) == asked  # read from the cache with no request
    fresh_process(monkeypatch)  # too old: unconfirmed again, and still no request
    assert ModelContext.cache_only(_lm_info(), chat=RemoteChat(server.url, SMOL["id"])).get_chat().fingerprint == "unconfirmed"


def _lm_info() -> ModelInfo:
    return ModelInfo("lm", "x", "lm", 0, "cpu", "float32", "fp")


def test_the_issue_rerun_against_a_dead_url_no_longer_succeeds_from_the_cache(tmp_path):
    """The issue's CLI steps: a wrong name refused, the served model cached, then a dead URL refused (exit 1)."""
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    cache_dir = tmp_path / "cache"
    args = ("chunk", str(doc), "--chunker", "llm_split")

    def run(url, model):
        # run_main in run_cli's environment drops OPENAI_BASE_URL unless it is handed over.
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENAI_MODEL", model) if model else mp.delenv("OPENAI_MODEL", raising=False)
            return run_main(*args, data_dir=Path(os.environ["CHUNKLAB_DATA_DIR"]), CHUNKLAB_CACHE_DIR=str(cache_dir),
                            OPENAI_BASE_URL=url)

    with start_scripted_server(reply=lambda m: "split_after: 1", models=[SMOL], answer_model="echo") as server:
        wrong = run(server.url, "gpt-4o-mini")
        assert not cache_dir.exists() or not any(cache_dir.rglob("*.json*"))
        served = run(server.url, "")
        asked = len(server.chat_requests)
        rerun = run(server.url, "")  # confirmed by the live server: from the cache
        assert asked >= 1 and len(server.chat_requests) == asked and rerun.stdout == served.stdout
    assert wrong.returncode == 1
    assert wrong.stderr.decode().strip().endswith("has no model 'gpt-4o-mini' (it serves: "
                                                  "SmolLM2-135M-Instruct-Q8_0.gguf); choose one with OPENAI_MODEL or --model")
    assert served.returncode == 0, served.stderr.decode()
    dead = run(server.url, "gpt-4o-mini")
    assert dead.returncode == 1 and dead.stdout == b""
    assert "is unreachable" in dead.stderr.decode() and "cached answers are not used" in dead.stderr.decode()


# --- timeouts sized from the server's measured speed -------------------------------------------


def test_sized_timeout_is_the_prediction_times_the_safety_never_below_the_floor():
    speed = ChatSpeed(completion_per_s=2.0, prompt_per_s=50.0, tokens_per_char=0.25)
    # 400 characters: 100 prompt tokens at 50/s (2 s), 300 answer tokens at 2/s (150 s): 152 s, twice.
    assert speed.seconds_for(400, 300) == 152.0
    assert sized_timeout(120.0, speed, 400, 300) == 304.0
    assert sized_timeout(120.0, speed, 400, 10) == 120.0  # a fast request keeps the floor
    assert sized_timeout(500.0, speed, 400, 300) == 500.0  # a longer configured timeout wins
    assert sized_timeout(120.0, None, 400, 300) == 120.0  # nothing measured: the configured timeout


def _timed_server(work_seconds, **options):
    """A server that takes ``work_seconds`` for a real answer, 0.2 s for a probe, counting tokens like a slow CPU."""

    def delay(body):
        return 0.2 if body.get("messages") == [dict(m) for m in PROBE_MESSAGES] else work_seconds

    # The probe: 20 prompt tokens, 2 answer tokens in about 0.2 s (10 answer tokens/s at most).
    return start_scripted_server(
        reply=lambda m: "fine", delay=delay, usage=lambda m, r: (20, 2) if r == "OK" else (10, 3), **options
    )


def test_a_slow_server_gets_a_timeout_sized_from_its_probed_speed(tmp_path):
    served = ServedModel("slow-cpu", facts=(("meta", '{"n_params":1}'),))
    with _timed_server(1.5, model="slow-cpu", models=[{"id": "slow-cpu", "meta": {"n_params": 1}}]) as server:
        # The floor (1 s) alone would give up before the 1.5 s answer; the probe says it is slow.
        assert chat(MESSAGES, base_url=server.url, model="slow-cpu", max_tokens=20, timeout=1.0) == "fine"
        assert len(server.probes) == 1 and len(server.chat_requests) == 1
        speed = chat_speed(served.fingerprint("chat"))
        # The probe (2 answer tokens, ~0.2 s) and the answer (3, ~1.5 s): at most 5 / 1.7 tokens/s,
        # so the next request's 20 tokens are given at least 2 × 20 / 2.94 s (the first got 2 × 20 / 10 = 4 s).
        assert speed is not None and 2.0 <= speed.completion_per_s <= 5 / 1.7
        assert 14.0 <= sized_timeout(1.0, speed, len("Say ok."), 20) <= 21.0
        # Measured once: the next request sends no probe.
        assert chat(MESSAGES, base_url=server.url, model="slow-cpu", max_tokens=20, timeout=1.0) == "fine"
        assert len(server.probes) == 1
    # A restart knows the speed: it is in the rate store's file, under the served identity.
    stored = RateStore(tmp_path / "data" / RATES_FILE).get(RateKey(served.fingerprint("chat"), "chat", "", "", "chat_tokens"))
    assert stored is not None and stored.units == 2 + 3 + 3 and stored.work == 20 + 10 + 10


def test_a_server_that_counts_no_tokens_is_waited_for_the_configured_timeout():
    with start_scripted_server(reply=lambda m: "late", delay=1.5, models=[{"id": "uncounted"}]) as server:
        with pytest.raises(ModelError) as e:
            chat(MESSAGES, base_url=server.url, max_tokens=20, timeout=1.0)
    assert str(e.value) == (
        f"LLM server at {server.url} did not answer a 4-token speed probe within 1s (CHUNKLAB_LLM_TIMEOUT)"
    )


def test_an_answer_later_than_the_sized_timeout_names_the_speed_and_the_timeout():
    with _timed_server(9.0, model="slower", models=[{"id": "slower"}]) as server:
        with pytest.raises(ModelError) as e:
            chat(MESSAGES, base_url=server.url, max_tokens=20, timeout=1.0)
    message = str(e.value)
    assert message.startswith(f"LLM server at {server.url} did not answer a chat request within ")
    assert message.endswith(" tokens/s; CHUNKLAB_LLM_TIMEOUT)") and "(measured " in message
    waited = float(message.split(" within ")[1].split("s ")[0])
    assert 4.0 <= waited <= 8.0


def test_a_session_keys_its_remote_chat_results_without_asking_the_server():
    models = SessionModels.of(None, chat=RemoteChat("http://127.0.0.1:9/v1", "model-a"))
    assert models.models_key.endswith("|chat=remote:http://127.0.0.1:9/v1|model-a")
