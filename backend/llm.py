"""Chat with an LLM behind any OpenAI-compatible API (OpenAI, vLLM, llama.cpp, Ollama…) through ``openai``.

Shared by question generation and, later, LLM-based chunkers. Configuration (arguments win
over the environment):

- ``OPENAI_BASE_URL``: the server, e.g. ``http://gpu-box:8000/v1`` (unset: OpenAI's API);
- ``OPENAI_API_KEY``: the bearer token (a server that checks none still gets ``EMPTY``);
- ``OPENAI_MODEL``: the model; unset, the server's only model when it lists exactly one
  (``GET /models``), else ``gpt-4o-mini`` on OpenAI's API;
- ``CHUNKLAB_LLM_TIMEOUT``: seconds to wait for an answer (default 120; connecting gives up
  after 10 s); ``CHUNKLAB_LLM_RETRIES``: retries of failed requests (default 2, with the
  client's exponential back-off, for connection errors, timeouts, 429 and 5xx).

The API key lives only in the HTTP client of one call: it is never logged, cached, written to
disk, put in a result or repeated in an error message (text a server sends back is scrubbed
of it, and errors are raised without the client's exception chained, since that holds the
request headers). Every failure is a one-line :class:`~backend.errors.ModelError`.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Mapping, Sequence

from backend.errors import ModelError, ParameterError

__all__ = ["chat", "resolve_model", "llm_settings", "remote_llm_configured", "DEFAULT_OPENAI_MODEL"]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
_DEFAULT_TIMEOUT = 120.0
_CONNECT_TIMEOUT = 10.0
_DEFAULT_RETRIES = 2
_models: dict[str, str] = {}  # base URL -> the model it serves (discovered once; no secrets)
_models_lock = threading.Lock()


def llm_settings(
    base_url: str | None = None, model: str | None = None, api_key: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """``(base_url, model, api_key)`` from the arguments, else ``OPENAI_BASE_URL``/``OPENAI_MODEL``/``OPENAI_API_KEY``.

    Raises:
        ModelError: a base URL that is not http(s).
    """
    env = os.environ
    url = (base_url or env.get("OPENAI_BASE_URL") or "").strip() or None
    if url is not None and not re.match(r"^https?://[^/\s]+", url):
        raise ModelError(f"LLM base URL {url!r} must start with http:// or https:// and name a host")
    name = (model or env.get("OPENAI_MODEL") or "").strip() or None
    key = (api_key or env.get("OPENAI_API_KEY") or "").strip() or None
    return (url.rstrip("/") if url else None), name, key


def remote_llm_configured(base_url: str | None = None, api_key: str | None = None) -> bool:
    """Whether an LLM API is configured: a base URL or an API key, given or in the environment."""
    env = os.environ
    return bool((base_url or env.get("OPENAI_BASE_URL") or "").strip() or (api_key or env.get("OPENAI_API_KEY") or "").strip())


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value >= 0 else default


def _scrub(text: str, secret: str | None) -> str:
    flat = " ".join(str(text).split())
    if secret:
        flat = flat.replace(secret, "***")
    return flat if len(flat) <= 300 else flat[:299] + "…"


def _error_text(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(e, "message", None) or e)


def _describe(e: Exception, where: str, timeout: float, secret: str | None) -> str:
    """A one-line, key-free account of an ``openai`` client error."""
    import openai

    if isinstance(e, openai.APITimeoutError):
        return f"{where} did not answer within {timeout:g}s (CHUNKLAB_LLM_TIMEOUT)"
    if isinstance(e, openai.APIConnectionError):
        cause = e.__cause__ or e.__context__
        reason = _scrub(str(cause), secret) if cause is not None else "connection failed"
        return f"{where} is unreachable ({reason})"
    if isinstance(e, openai.AuthenticationError):
        return f"{where} rejected the API key (HTTP {e.status_code}); check OPENAI_API_KEY"
    if isinstance(e, openai.NotFoundError):
        return f"{where} has no such endpoint or model (HTTP 404): {_scrub(_error_text(e), secret)}"
    if isinstance(e, openai.APIStatusError):
        return f"{where} refused the request (HTTP {e.status_code}): {_scrub(_error_text(e), secret)}"
    return f"{where} gave no usable answer: {_scrub(str(e), secret)}"


def _discover_model(client: Any, url: str, where: str, timeout: float, secret: str | None) -> str:
    """The only model a server lists (remembered per URL)."""
    import openai

    with _models_lock:
        known = _models.get(url)
    if known:
        return known
    message = None
    try:
        ids = [m.id for m in client.models.list().data or []]
    except openai.OpenAIError as e:
        message = _describe(e, where, timeout, secret)
        ids = []
    if message is not None:
        raise ModelError(message + "; or set OPENAI_MODEL")
    if len(ids) != 1:
        listed = ", ".join(ids[:5]) or "none"
        raise ModelError(f"{where} serves {len(ids)} models ({listed}): choose one with OPENAI_MODEL or --model")
    with _models_lock:
        _models[url] = ids[0]
    return ids[0]


def _client(
    base_url: str | None, model: str | None, api_key: str | None, timeout_s: float | None, retries: int | None
) -> tuple[Any, str | None, str | None, str | None, str, float]:
    """An ``openai.OpenAI`` client and ``(url, model, key, where, timeout)`` for one call."""
    url, name, key = llm_settings(base_url, model, api_key)
    if url is None and key is None:
        raise ModelError("no LLM configured: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server)")
    import httpx
    import openai

    timeout = timeout_s if timeout_s is not None and timeout_s > 0 else _env_number("CHUNKLAB_LLM_TIMEOUT", _DEFAULT_TIMEOUT)
    tries = retries if retries is not None and retries >= 0 else int(_env_number("CHUNKLAB_LLM_RETRIES", _DEFAULT_RETRIES))
    where = f"LLM server at {url}" if url else "the OpenAI API"
    client = openai.OpenAI(
        base_url=url,
        api_key=key or "EMPTY",  # servers that check no key still want a bearer token
        timeout=httpx.Timeout(timeout, connect=min(_CONNECT_TIMEOUT, timeout)),
        max_retries=tries,
    )
    return client, url, name, key, where, timeout


def resolve_model(base_url: str | None = None, api_key: str | None = None, model: str | None = None) -> str:
    """The model :func:`chat` would use with these settings (asks the server when it must).

    Raises:
        ModelError: no API configured, or the server cannot say (see :func:`chat`).
    """
    client, url, name, key, where, timeout = _client(base_url, model, api_key, None, None)
    try:
        if name is not None:
            return name
        return _discover_model(client, url, where, timeout, key) if url else DEFAULT_OPENAI_MODEL
    finally:
        client.close()


def chat(
    messages: Sequence[Mapping[str, str]],
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    timeout_s: float | None = None,
    retries: int | None = None,
) -> str:
    """One chat completion: the assistant's reply to ``messages``.

    Args:
        messages: ``{"role": "system"|"user"|"assistant", "content": …}`` dicts, in order.
        base_url: The OpenAI-compatible API (default ``OPENAI_BASE_URL``, else OpenAI's).
        api_key: The bearer token (default ``OPENAI_API_KEY``).
        model: The model (default ``OPENAI_MODEL``, else see the module docstring).
        temperature: Sampling temperature (0 is the most deterministic the server offers).
        max_tokens: The longest reply, in tokens.
        timeout_s: Seconds to wait for the answer (default ``CHUNKLAB_LLM_TIMEOUT`` or 120).
        retries: Retries of failed requests (default ``CHUNKLAB_LLM_RETRIES`` or 2).

    Returns:
        The reply text (empty when the model said nothing).

    Raises:
        ParameterError: no messages, or a bad ``max_tokens``/``temperature``.
        ModelError: no API configured, unreachable server, rejected key, unknown model,
            timeout, or a malformed answer (one line, without the key).
    """
    if not messages:
        raise ParameterError("chat needs at least one message")
    if max_tokens < 1:
        raise ParameterError(f"max_tokens ({max_tokens}) must be at least 1")
    if not 0 <= temperature <= 2:
        raise ParameterError(f"temperature ({temperature}) must be between 0 and 2")
    client, url, name, key, where, timeout = _client(base_url, model, api_key, timeout_s, retries)
    import openai

    try:
        if name is None:
            name = _discover_model(client, url, where, timeout, key) if url else DEFAULT_OPENAI_MODEL
        message = None
        try:
            response = client.chat.completions.create(
                model=name,
                messages=[dict(m) for m in messages],  # type: ignore[misc]
                temperature=temperature,
                max_tokens=max_tokens,
            )
        except openai.OpenAIError as e:
            message = _describe(e, where, timeout, key)
        if message is not None:
            raise ModelError(message)  # outside the except block: no chained request headers
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"{where} answered without a choice (model {name})")
        content = getattr(choices[0].message, "content", None)
        return content or ""
    finally:
        client.close()
