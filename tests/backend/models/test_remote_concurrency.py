"""RemoteScorer's concurrent requests, against the local test server delaying each answer.

The server (tests/support/openai_compat_server.py) counts the POSTs it answers and the most
it answered at once, so these tests see how many requests really were in flight. It runs with
``memo``: a request sent again is answered without the model, so the tests stay quick.
"""

from __future__ import annotations

import math
import threading

import pytest

from backend.errors import Cancelled, ModelError, ParameterError
from backend.models.remote import PAIRS_PER_REQUEST, RemoteScorer
from backend.progress import CancelToken, Progress
from tests.support.openai_compat_server import start_server

DELAY = 0.15  # seconds per answer: long enough for requests to overlap, short enough for CI
PAIRS = [(f"Passage {i} is about chunking.", f" Question {i} asks about passages.") for i in range(3 * PAIRS_PER_REQUEST)]
REQUESTS = math.ceil(len(PAIRS) / PAIRS_PER_REQUEST)
WAIT = 600.0  # seconds per answer: a loaded CI machine must not time out and retry (retries add POSTs)


@pytest.fixture(scope="module")
def server():
    with start_server(delay=DELAY, memo=True) as running:
        yield running


def _pool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("chunklab-remote")]


def _same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def test_concurrent_requests_give_the_same_values_in_order(server):
    server.reset_counts()
    one = RemoteScorer(server.url, concurrency=1, timeout=WAIT).conditional_nll(PAIRS)
    assert server.peak_in_flight == 1 and server.posts == REQUESTS
    server.reset_counts()
    four = RemoteScorer(server.url, concurrency=4, timeout=WAIT).conditional_nll(PAIRS)
    assert _same(one, four)
    assert all(math.isfinite(v) for v in four)
    assert 2 <= server.peak_in_flight <= 4
    assert server.posts == REQUESTS
    assert _pool_threads() == []


def test_concurrency_is_bounded(server):
    server.reset_counts()
    pairs = PAIRS * 3  # 12 requests, 2 at a time
    RemoteScorer(server.url, concurrency=2, timeout=WAIT).conditional_nll(pairs)
    assert server.peak_in_flight == 2
    assert server.posts == 3 * REQUESTS


def test_progress_arrives_in_order(server):
    seen: list[tuple[int, int]] = []
    RemoteScorer(server.url, concurrency=4, timeout=WAIT).conditional_nll(PAIRS, progress=Progress(counts=lambda done, total: seen.append((done, total))))
    assert seen == [(0, len(PAIRS))] + [
        (min((k + 1) * PAIRS_PER_REQUEST, len(PAIRS)), len(PAIRS)) for k in range(REQUESTS)
    ]


def test_cancel_stops_submitting_and_leaves_no_thread(server):
    token = CancelToken()
    reports: list[float] = []

    def report(frac, eta, label):
        reports.append(frac)
        if frac > 0:
            token.cancel()  # after the first answer

    scorer = RemoteScorer(server.url, concurrency=2, timeout=WAIT)
    server.reset_counts()
    with pytest.raises(Cancelled):
        scorer.conditional_nll(PAIRS * 4, progress=Progress(report, token))
    # The first answer, the one already in flight beside it, and the one sent to replace it.
    assert server.posts <= 3 < 4 * REQUESTS
    assert _pool_threads() == []


def test_first_error_in_order_is_raised_and_no_thread_is_left():
    with start_server(scoring="none", delay=0.05) as bare:
        scorer = RemoteScorer(bare.url, concurrency=4, timeout=WAIT)
        with pytest.raises(ModelError, match="no prompt log-probs"):
            scorer.conditional_nll(PAIRS)
    assert _pool_threads() == []


def test_concurrency_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_REMOTE_CONCURRENCY", "3")
    assert RemoteScorer(server.url).concurrency == 3
    monkeypatch.delenv("CHUNKLAB_REMOTE_CONCURRENCY")
    assert RemoteScorer(server.url).concurrency == 8
    assert RemoteScorer(server.url, concurrency=5, timeout=WAIT).concurrency == 5  # the argument wins


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, True, "4"])
def test_concurrency_argument_is_checked_before_connecting(bad):
    with pytest.raises(ParameterError, match=r"concurrency .* from 1 to 64"):
        RemoteScorer("http://127.0.0.1:9/v1", concurrency=bad)


def test_server_delay_must_not_be_negative():
    with pytest.raises(ValueError, match="delay"):
        start_server(delay=-1.0)
