"""The remote scorer and the remote chat model against servers that fail: 500s, slow answers, cut JSON.

Each failure must end as one line (a :class:`ModelError`, a failed job's ``error``, the CLI's
stderr with exit 1), leave no thread behind, and cache nothing; once the server answers well
again, the same call computes the answer and caches it. The servers are Chunk Lab's test
servers (``tests/support``): the scripted chat server takes faults one per request, the
log-prob server (the bundled SmolLM2) answers every request with the fault injected until it
is turned off.
"""

from __future__ import annotations

import threading

import pytest

from backend.errors import ModelError
from backend.jobs import start_job
from backend.models.cache import OutputCache
from backend.models.chat import RemoteChat, cached_reply, chat_cache_key
from backend.models.remote import PAIRS_PER_REQUEST, RemoteScorer
from backend.models.scoring import conditional_scores, document_token_scores, token_scores_key
from tests.support.openai_compat_server import start_server
from tests.support.scripted_chat_server import start_scripted_server

TIMEOUT = 1.0  # seconds a client waits for a "slow" answer, which takes SLOW
SLOW = 3.0
WAIT = 600.0  # seconds a client waits for the real model's answers (a loaded CI machine is slow)
MESSAGES = [{"role": "user", "content": "Where should this text be split?"}]
PAIRS = [(f"Passage {i} is about lighthouses.", f" Question {i} asks about keepers.") for i in range(2 * PAIRS_PER_REQUEST)]
TEXT = "The keeper climbed the stairs at dusk. He trimmed the wick and wound the clockwork. Ships passed in the night."
EXPECTED = {
    "500": "refused a completions request (HTTP 500)",
    "slow": f"did not answer a completions request within {TIMEOUT:g}s (CHUNKLAB_REMOTE_TIMEOUT)",
    "truncated": "sent an answer to a completions request that is not complete JSON",
}


def _leftover_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(("chunklab-remote", "chunklab-job"))]


def _failed_job(fn) -> str:
    """Run ``fn`` in a job, check it failed cleanly, and return its one-line error."""
    job = start_job("faulty server", lambda progress: fn(progress))
    assert job.wait(60)
    assert job.state == "failed" and job.result is None
    assert job.error and "\n" not in job.error and "Error:" not in job.error  # ours, not an exception's repr
    assert not job.thread.is_alive() and _leftover_threads() == []
    return job.error


def _done_job(fn):
    job = start_job("server back", lambda progress: fn(progress))
    assert job.wait(120)
    assert job.state == "done", job.error
    return job.result


@pytest.fixture(autouse=True)
def no_llm_environment(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "CHUNKLAB_CHAT", "CHUNKLAB_LLM_RETRIES",
                 "CHUNKLAB_LLM_TIMEOUT", "CHUNKLAB_REMOTE_BASE_URL", "CHUNKLAB_REMOTE_MODEL", "CHUNKLAB_REMOTE_API_KEY",
                 "CHUNKLAB_REMOTE_TIMEOUT", "CHUNKLAB_REMOTE_RETRIES", "CHUNKLAB_REMOTE_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)


# --- the chat model ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (500, "refused a chat request (HTTP 500): scripted failure 500"),
        ("slow", f"did not answer a chat request within {TIMEOUT:g}s (CHUNKLAB_LLM_TIMEOUT)"),
        ("truncated", "sent an answer to a chat request that is not complete JSON"),
        ("cut", "closed the connection in the middle of a chat request (peer closed connection"),
    ],
)
def test_a_failed_chat_answer_is_one_line_and_never_cached(fault, expected, tmp_path):
    cache = OutputCache(tmp_path / "cache")
    # One fault per attempt: the first and its one retry (an answer cut short is not retried).
    faults = [fault] if fault == "truncated" else [fault, fault]
    with start_scripted_server(reply=lambda m: "split_after: 1", failures=faults, slow_seconds=SLOW) as server:
        model = RemoteChat(server.url, timeout=TIMEOUT, retries=1)
        key = chat_cache_key(model.fingerprint, MESSAGES, 0.0, 64)

        def ask(progress):
            return cached_reply(model, MESSAGES, max_tokens=64, cache=cache)

        error = _failed_job(ask)
        assert error.startswith(f"LLM server at {server.url} {expected}"), error
        assert len(server.chat_requests) == len(faults)
        assert cache.get(key) is None and cache.stats()["entries"] == 0

        assert _done_job(ask) == ("split_after: 1", False)
        entry = cache.get(key)  # the reply and how long the model took to write it (the Time column's model time)
        assert entry["reply"] == "split_after: 1" and set(entry) == {"reply", "model_seconds"}
        assert 0 < entry["model_seconds"] < 60
        sent = len(server.chat_requests)
        assert _done_job(ask) == ("split_after: 1", True)
        assert len(server.chat_requests) == sent


def test_an_llm_chunker_on_a_failing_server_exits_1_with_one_line_then_reruns(tmp_path, monkeypatch, capsys):
    from backend.cli.main import main

    doc = tmp_path / "doc.txt"
    doc.write_text("\n\n".join(f"Paragraph {i} is about the lighthouse keeper and his {i} lamps." for i in range(6)),
                   encoding="utf-8")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CHUNKLAB_CHAT", "remote")
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "0")
    monkeypatch.setenv("CHUNKLAB_LLM_TIMEOUT", str(TIMEOUT))
    argv = ["chunk", str(doc), "--chunker", "llm_split"]
    with start_scripted_server(reply=lambda m: "split_after: 2", failures=["truncated"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        assert main(argv) == 1
        out, err = capsys.readouterr()
        lines = [line for line in err.splitlines() if line.strip()]
        assert out == "" and len(lines) == 1, err
        assert lines[0].startswith(f"error: LLM server at {server.url} sent an answer to a chat request that is not complete JSON")
        assert "Traceback" not in err and "internal error" not in err
        assert OutputCache(tmp_path / "data" / "cache").stats()["entries"] == 0

        assert main(argv) == 0
        out, _ = capsys.readouterr()
        assert out.strip() and OutputCache(tmp_path / "data" / "cache").stats()["entries"] > 0


def test_the_remote_scorer_with_no_server_configured_is_one_line(tmp_path, monkeypatch, capsys):
    from backend.cli.main import main

    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    assert main(["chunk", str(doc), "--chunker", "ppl", "--lm", "remote"]) == 1
    assert capsys.readouterr().err == (
        "error: no remote scorer URL: enter one or set CHUNKLAB_REMOTE_BASE_URL (e.g. http://host:8000/v1)\n"
    )


# --- the scorer -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with start_server(memo=True) as running:
        yield running


@pytest.fixture()
def healthy(server):
    server.inject(None)
    yield server
    server.inject(None)


@pytest.mark.parametrize("fault", ["500", "slow", "truncated"])
def test_concurrent_pair_scoring_gives_up_in_one_line_and_caches_nothing(healthy, fault, tmp_path):
    server = healthy
    cache = OutputCache(tmp_path / "cache")
    impatient = RemoteScorer(server.url, timeout=TIMEOUT if fault == "slow" else WAIT, retries=1, concurrency=4)
    server.inject(fault, seconds=SLOW)
    server.reset_counts()

    def score_with(scorer):
        return lambda progress: conditional_scores(PAIRS, scorer, cache=cache, progress=progress)

    error = _failed_job(score_with(impatient))
    assert error.startswith(f"remote scorer at {server.url} {EXPECTED[fault]}"), error
    # 500 and slow answers are retried, then given up; a cut answer is not retried, and the first
    # request goes alone (until the scorer knows how the server gives prompt log-probs).
    assert server.faulted >= (1 if fault == "truncated" else 2) and cache.stats()["entries"] == 0

    server.inject(None)
    score = score_with(RemoteScorer(server.url, timeout=WAIT, retries=1, concurrency=4))  # the same cache keys
    values = _done_job(score)
    assert len(values) == len(PAIRS) and cache.stats()["entries"] == len(PAIRS)
    server.reset_counts()
    assert _done_job(score) == values and server.posts == 0  # all from the cache


@pytest.mark.parametrize("fault", ["500", "truncated"])
def test_document_scoring_gives_up_in_one_line_and_caches_nothing(healthy, fault, tmp_path):
    server = healthy
    cache = OutputCache(tmp_path / "cache")
    scorer = RemoteScorer(server.url, timeout=WAIT, retries=1)
    key = token_scores_key(scorer.info.fingerprint, TEXT, None, scorer_kind=scorer.info.kind)
    server.inject(fault)
    with pytest.raises(ModelError) as e:
        document_token_scores(TEXT, scorer, cache=cache)
    assert str(e.value).startswith(f"remote scorer at {server.url} {EXPECTED[fault]}") and "\n" not in str(e.value)
    assert e.value.__cause__ is None and e.value.__context__ is None  # the client's request stays out of it
    assert cache.get(key) is None

    server.inject(None)
    scores, hit = document_token_scores(TEXT, scorer, cache=cache)
    assert not hit and len(scores) > 10 and cache.get(key) is not None


def test_the_ppl_chunker_on_a_failing_remote_scorer_exits_1_with_one_line(healthy, tmp_path, monkeypatch, capsys):
    from backend.cli.main import main

    server = healthy
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CHUNKLAB_REMOTE_BASE_URL", server.url)
    monkeypatch.setenv("CHUNKLAB_REMOTE_RETRIES", "1")
    monkeypatch.setenv("CHUNKLAB_REMOTE_TIMEOUT", str(WAIT))
    argv = ["chunk", str(doc), "--chunker", "ppl", "--lm", "remote"]
    server.inject("500")
    assert main(argv) == 1
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert out == "" and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0] == (
        f"error: remote scorer at {server.url} refused a completions request (HTTP 500): "
        "the model server crashed (injected fault)"
    )
    assert OutputCache(tmp_path / "data" / "cache").stats()["entries"] == 0

    server.inject(None)
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert [line for line in out.splitlines() if line.strip()]
    assert OutputCache(tmp_path / "data" / "cache").stats()["entries"] == 1
