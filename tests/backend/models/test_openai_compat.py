"""The shared client layer: one account of every client error, without the key."""

from __future__ import annotations

import httpx
import openai
import pytest

from backend.errors import ModelError
from backend.models.chat import CHAT_SERVICE
from backend.models.openai_compat import Endpoint, connection_reason, error_text, scrub
from backend.models.remote import SCORER_SERVICE

KEY = "sk-layer-SECRET-42"
URL = "http://127.0.0.1:8000/v1"


def _status(cls: type[openai.APIStatusError], code: int, body: object) -> openai.APIStatusError:
    response = httpx.Response(code, request=httpx.Request("POST", URL + "/chat/completions"))
    return cls("server said no", response=response, body=body)


def _chat(url: str | None = URL) -> Endpoint:
    return Endpoint.resolve(CHAT_SERVICE, url, "m", KEY, timeout=7.0, retries=0)


def test_error_text_reads_every_shape_of_error_body():
    assert error_text(_status(openai.BadRequestError, 400, {"error": {"message": "bad prompt"}})) == "bad prompt"
    assert error_text(_status(openai.BadRequestError, 400, {"error": "plain words"})) == "plain words"
    assert error_text(_status(openai.BadRequestError, 400, {"message": "top level"})) == "top level"
    assert error_text(_status(openai.BadRequestError, 400, None)) == "server said no"


def test_scrub_is_one_short_line_without_the_secret():
    assert scrub(f"key\n  {KEY} was\twrong", KEY) == "key *** was wrong"
    assert scrub("x" * 400, None) == "x" * 299 + "…"
    assert scrub("nothing to hide", None) == "nothing to hide"


def test_connection_reason_names_the_cause():
    def failed(cause: str) -> BaseException:
        # The client's exception, caused by httpx's, caused by the socket's: the chain the client raises.
        socket_error = OSError(cause)
        connect = httpx.ConnectError("connect failed")
        connect.__cause__ = socket_error
        outer = openai.APIConnectionError(request=httpx.Request("GET", URL))
        outer.__cause__ = connect
        return outer

    assert connection_reason(failed("[Errno 111] Connection refused")) == "connection refused"
    assert connection_reason(failed("[Errno -2] Name or service not known")) == "host not found"
    assert connection_reason(failed("timed out")) == "connection timed out"
    assert connection_reason(failed("SSL: CERTIFICATE_VERIFY_FAILED")) == "TLS error"
    assert connection_reason(openai.APIConnectionError(request=httpx.Request("GET", URL))) == "connection failed"


def test_describe_gives_one_line_per_kind_of_failure_and_never_the_key():
    chat = _chat()
    auth = _status(openai.AuthenticationError, 401, {"error": {"message": f"bad key {KEY}"}})
    assert chat.describe(auth, "a chat request") == (
        f"LLM server at {URL} rejected the API key (HTTP 401); check OPENAI_API_KEY"
    )
    missing = _status(openai.NotFoundError, 404, {"error": {"message": f"no model m for {KEY}"}})
    assert chat.describe(missing, "a chat request") == (
        f"LLM server at {URL} has no endpoint or model for a chat request (HTTP 404): no model m for ***"
    )
    busy = _status(openai.RateLimitError, 429, {"error": {"message": "slow down"}})
    assert chat.describe(busy, "a chat request") == f"LLM server at {URL} refused a chat request (HTTP 429): slow down"
    late = openai.APITimeoutError(request=httpx.Request("POST", URL))
    assert chat.describe(late, "a chat request") == (
        f"LLM server at {URL} did not answer a chat request within 7s (CHUNKLAB_LLM_TIMEOUT)"
    )
    scorer = Endpoint.resolve(SCORER_SERVICE, URL.removesuffix("/v1"), "m", KEY, timeout=3.0)
    assert scorer.describe(late, "the model list") == (
        "remote scorer at http://127.0.0.1:8000 did not answer the model list within 3s (CHUNKLAB_REMOTE_TIMEOUT)"
    )
    assert scorer.describe(missing, "a completions request") == (
        "remote scorer at http://127.0.0.1:8000 has no endpoint or model for a completions request (HTTP 404)"
        " (OpenAI-compatible URLs usually end in /v1): no model m for ***"
    )
    assert _chat(None).describe(auth, "a chat request").startswith("the OpenAI API rejected the API key")


def test_call_raises_one_model_error_without_the_client_exception():
    def refuse() -> None:
        raise _status(openai.AuthenticationError, 401, {"error": {"message": KEY}})

    with pytest.raises(ModelError) as info:
        _chat().call("a chat request", refuse)
    assert KEY not in str(info.value) and info.value.__cause__ is None and info.value.__context__ is None
    assert _chat().call("a chat request", lambda x: x + 1, 1) == 2
