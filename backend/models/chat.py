"""Chat with an LLM behind any OpenAI-compatible API (OpenAI, vLLM, llama.cpp, Ollama…) through ``openai``.

Shared by question generation and, later, LLM-based chunkers. Configuration (arguments win
over the environment):

- ``OPENAI_BASE_URL``: the server, e.g. ``http://gpu-box:8000/v1`` (unset: OpenAI's API);
- ``OPENAI_API_KEY``: the bearer token (a server that checks none still gets ``EMPTY``);
- ``OPENAI_MODEL``: the model; unset, the server's only model when it lists exactly one
  (``GET /models``), else ``gpt-4o-mini`` on OpenAI's API;
- ``CHUNKLAB_LLM_TIMEOUT``: seconds to wait for an answer (default 120; connecting gives up
  after 10 s); ``CHUNKLAB_LLM_RETRIES``: retries of failed requests (default 2). Retrying is
  the ``openai`` client's own (``max_retries``), which we rely on rather than re-implement:
  connection errors, timeouts, 408, 409, 429 and 5xx are retried after 0.5 s, 1 s, 2 s …
  (doubling, at most 8 s, minus up to 25 % jitter), or after the server's ``Retry-After``;
  a 401 is not retried and reads "rejected the API key".
- ``CHUNKLAB_CHAT``: which chat model LLM chunkers use: ``local`` (the bundled model),
  ``remote`` (the API above) or unset (the API when one is configured, else the local model).

Two backends stand behind one small interface, :class:`ChatModel`: :class:`RemoteChat` (the
API, through :func:`chat`) and :class:`LocalChat` (a local causal LM through its chat
template, greedy). :func:`cached_reply` answers from the on-disk output cache when the same
model has already answered the same messages with the same settings (temperature 0 only:
a sampled answer is meant to vary), so reruns cost no model call. A cache key holds the
model's identity, never a URL or a key: a remote model is ``openai-compatible:<model name>``
(the same model behind another URL or proxy shares answers), a local one the sha256 of its
weights.

The API key lives only in the HTTP client of one call: it is never logged, cached, written to
disk, put in a result or repeated in an error message (text a server sends back is scrubbed
of it, and errors are raised without the client's exception chained, since that holds the
request headers). Every failure is a one-line :class:`~backend.errors.ModelError`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from backend.errors import ModelError, ParameterError

if TYPE_CHECKING:
    from backend.models.cache import OutputCache

__all__ = [
    "chat",
    "resolve_model",
    "llm_settings",
    "remote_llm_configured",
    "DEFAULT_OPENAI_MODEL",
    "ChatModel",
    "RemoteChat",
    "LocalChat",
    "cached_reply",
    "chat_cache_key",
    "default_chat_model",
]

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
    cache: OutputCache | None = None,
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
        cache: Answer from (and store into) this output cache when ``temperature`` is 0
            (see :func:`cached_reply`); None asks the server every time.

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
    if cache is not None:
        remote = RemoteChat(base_url, api_key, model, timeout_s=timeout_s, retries=retries)
        return cached_reply(remote, messages, max_tokens=max_tokens, temperature=temperature, cache=cache)[0]
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


# --- one interface for remote and local chat models ------------------------------------------

CHAT_CACHE_VERSION = 1
Messages = Sequence[Mapping[str, str]]


class ChatModel(Protocol):
    """A chat model: messages in, the assistant's reply out.

    ``fingerprint`` identifies the model for cache keys (never a secret, never a URL);
    ``name`` is for display.
    """

    @property
    def fingerprint(self) -> str: ...

    @property
    def name(self) -> str: ...

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0) -> str:
        """The reply to ``messages`` (at most ``max_tokens`` tokens)."""
        ...


class RemoteChat:
    """A model behind an OpenAI-compatible API, through :func:`chat`.

    The API key stays in this object's memory only (it is not part of ``repr``, ``name`` or
    ``fingerprint``); None reads ``OPENAI_API_KEY`` at each call.

    Args:
        base_url: The API (default ``OPENAI_BASE_URL``, else OpenAI's).
        api_key: The bearer token (default ``OPENAI_API_KEY``).
        model: The model (default ``OPENAI_MODEL``, else the server's only model).
        timeout_s: Seconds to wait per request (default ``CHUNKLAB_LLM_TIMEOUT``).
        retries: Retries on connection errors, timeouts, 429 and 5xx (default ``CHUNKLAB_LLM_RETRIES``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        timeout_s: float | None = None,
        retries: int | None = None,
    ) -> None:
        self.base_url = base_url
        self._api_key = api_key
        self._model = model
        self.timeout_s = timeout_s
        self.retries = retries

    def __repr__(self) -> str:
        return f"RemoteChat(base_url={self.base_url!r}, model={self._model!r})"

    @property
    def name(self) -> str:
        """The model name (asks the server for its only model when none was given)."""
        if self._model is None:
            self._model = resolve_model(self.base_url, self._api_key, None)
        return self._model

    @property
    def fingerprint(self) -> str:
        """``openai-compatible:<model name>``: the same model behind any URL shares cached answers."""
        return f"openai-compatible:{self.name}"

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0) -> str:
        """One request through :func:`chat` (retries and errors as documented there)."""
        return chat(
            messages, base_url=self.base_url, api_key=self._api_key, model=self.name,
            temperature=temperature, max_tokens=max_tokens, timeout_s=self.timeout_s, retries=self.retries,
        )


class LocalChat:
    """A local causal LM answering through its chat template, greedily (``temperature`` is ignored).

    The model loads on the first :meth:`complete`; for a GGUF spec (the bundled SmolLM2) the
    fingerprint is known without loading, so cached answers need no model at all.

    Args:
        spec: A model spec for :func:`backend.models.lm.load_lm` (None: ``CHUNKLAB_LM`` or the bundled one).
        device: Where to load it (None: ``CHUNKLAB_DEVICE`` or automatic).
        lm: An already loaded :class:`~backend.models.lm.LanguageModel` (then ``spec`` is unused).
        on_load: Called with no argument just before the model is loaded.
    """

    def __init__(
        self, spec: str | None = None, device: str | None = None, *, lm: Any = None, on_load: Callable[[], Any] | None = None
    ) -> None:
        self.spec = spec
        self.device = device
        self._lm = lm
        self._on_load = on_load
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return f"LocalChat(spec={self.spec!r}, device={self.device!r})"

    def load(self) -> Any:
        """The loaded :class:`~backend.models.lm.LanguageModel` (loaded once)."""
        if self._lm is None:
            if self._on_load is not None:
                self._on_load()
            from backend.models.lm import load_lm

            self._lm = load_lm(self.spec, self.device)
        return self._lm

    @property
    def name(self) -> str:
        """The model's display name (loads it unless already loaded)."""
        return str(self.load().info.name)

    @property
    def fingerprint(self) -> str:
        """``local:<sha256 of the weights>`` (without loading the model for a GGUF spec)."""
        if self._fingerprint is None:
            fp = self._lm.info.fingerprint if self._lm is not None else None
            if fp is None:
                from backend.models.identity import fingerprint_without_loading

                fp = fingerprint_without_loading(self.spec) or self.load().info.fingerprint
            self._fingerprint = f"local:{fp}"
        return self._fingerprint

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0) -> str:
        """Greedy generation of at most ``max_tokens`` new tokens after the chat-templated ``messages``.

        Raises:
            ModelError: the prompt and answer do not fit the model's context.
        """
        import torch

        if max_tokens < 1:
            raise ParameterError(f"max_tokens ({max_tokens}) must be at least 1")
        lm = self.load()
        tok = lm.tokenizer
        prompt = tok.apply_chat_template([dict(m) for m in messages], tokenize=False, add_generation_prompt=True)
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False).to(lm.model.device)
        n_prompt = int(enc["input_ids"].shape[1])
        limit = lm.info.context_length
        if limit and n_prompt + max_tokens > limit:
            raise ModelError(
                f"the prompt ({n_prompt} tokens) and answer ({max_tokens}) exceed {lm.info.name}'s context of {limit} tokens"
            )
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        with lm.lock, torch.inference_mode():
            out = lm.model.generate(
                **enc, max_new_tokens=max_tokens, do_sample=False, pad_token_id=pad,
                temperature=None, top_p=None, top_k=None,
            )
        return str(tok.decode(out[0, n_prompt:], skip_special_tokens=True))


def chat_cache_key(fingerprint: str, messages: Messages, temperature: float, max_tokens: int) -> dict[str, Any]:
    """The output-cache key of one chat request: model identity, a hash of the messages, the settings."""
    from backend.models.cache import text_digest

    canonical = json.dumps([dict(m) for m in messages], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return {
        "kind": "chat",
        "model": fingerprint,
        "messages": text_digest(canonical),
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "version": CHAT_CACHE_VERSION,
    }


def cached_reply(
    model: ChatModel,
    messages: Messages,
    *,
    max_tokens: int,
    temperature: float = 0.0,
    cache: OutputCache | None = None,
) -> tuple[str, bool]:
    """``model``'s reply to ``messages``, from ``cache`` when it holds it; and whether it did.

    Only temperature-0 requests are read from or written to the cache.

    Raises:
        ModelError: as :meth:`ChatModel.complete` raises it (nothing is cached then).
    """
    key = None
    if cache is not None and temperature == 0:
        key = chat_cache_key(model.fingerprint, messages, temperature, max_tokens)
        hit = cache.get(key)
        if hit is not None and isinstance(hit.get("reply"), str):
            return hit["reply"], True
    reply = model.complete(messages, max_tokens=max_tokens, temperature=temperature)
    if key is not None:
        cache.put(key, {"reply": reply})
    return reply, False


def default_chat_model(
    lm: str | None = None, device: str | None = None, on_load: Callable[[], Any] | None = None
) -> ChatModel:
    """The chat model LLM chunkers use by default (see ``CHUNKLAB_CHAT`` in the module docstring).

    Raises:
        ModelError: ``CHUNKLAB_CHAT`` is not ``local``, ``remote`` or empty, or ``remote`` with no API configured.
    """
    choice = os.environ.get("CHUNKLAB_CHAT", "").strip().lower()
    if choice not in {"", "local", "remote"}:
        raise ModelError(f"CHUNKLAB_CHAT must be 'local', 'remote' or unset, got {choice!r}")
    if choice == "remote" or (choice == "" and remote_llm_configured()):
        if not remote_llm_configured():
            raise ModelError("CHUNKLAB_CHAT=remote but no LLM is configured: set OPENAI_BASE_URL or OPENAI_API_KEY")
        return RemoteChat()
    return LocalChat(lm, device, on_load=on_load)
