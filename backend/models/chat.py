"""Chat with an LLM behind any OpenAI-compatible API (OpenAI, vLLM, llama.cpp, Ollama…) through ``openai``.

Shared by question generation and the LLM-based chunkers. Configuration (arguments win over
the environment, read by :mod:`backend.config`):

- ``OPENAI_BASE_URL``: the server, e.g. ``http://gpu-box:8000/v1`` (unset: OpenAI's API);
- ``OPENAI_API_KEY``: the bearer token (a server that checks none still gets ``EMPTY``);
- ``OPENAI_MODEL``: the model; unset, the server's only model when it lists exactly one
  (``GET /models``), else ``gpt-4o-mini`` on OpenAI's API;
- ``CHUNKLAB_LLM_TIMEOUT``: seconds to wait for an answer (default 120; connecting gives up
  after 10 s); ``CHUNKLAB_LLM_RETRIES``: retries of failed requests (default 2): connection
  errors, timeouts, 429 and 5xx, with back-off and ``Retry-After``; a 401 is not retried and
  reads "rejected the API key" (the policy of :mod:`backend.models.openai_compat`).
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

The API key lives only in memory and the HTTP client of one call: it is never logged, cached,
written to disk, put in a result or repeated in an error message. Every failure is a one-line
:class:`~backend.errors.ModelError`: HTTP errors after the retries, a server slower than the
timeout, an answer cut short or not JSON; a reply is cached only once it came back whole.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from backend import config
from backend.errors import ModelError, ParameterError
from backend.models.cache import OutputCache, text_digest
from backend.models.identity import fingerprint_without_loading
from backend.models.lm import load_lm
from backend.models.openai_compat import Endpoint, Service
from backend.models.rates import RateKey, rate_store
from backend.models.timing import SECONDS_FIELD, record_cached, record_computed
from backend.progress import Progress, acquired

if TYPE_CHECKING:
    from openai import OpenAI


__all__ = [
    "chat",
    "resolve_model",
    "remote_llm_configured",
    "CHAT_SERVICE",
    "DEFAULT_OPENAI_MODEL",
    "ChatModel",
    "RemoteChat",
    "LocalChat",
    "cached_reply",
    "chat_cache_key",
    "default_chat_model",
]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

CHAT_SERVICE = Service(
    label="LLM server",
    base_url=config.llm_base_url,
    model=config.llm_model,
    api_key=config.llm_api_key,
    timeout=config.llm_timeout,
    retries=config.llm_retries,
    connect_timeout=10.0,
    timeout_setting="CHUNKLAB_LLM_TIMEOUT",
    key_setting="OPENAI_API_KEY",
    model_hint="choose one with OPENAI_MODEL or --model",
    missing="no LLM configured: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server)",
    needs_url=False,
)
"""The chat API's settings: ``OPENAI_*`` and ``CHUNKLAB_LLM_*``."""

_models: dict[str, str] = {}  # base URL -> the model it serves (discovered once; no secrets)
_models_lock = threading.Lock()


def remote_llm_configured(base_url: str | None = None, api_key: str | None = None) -> bool:
    """Whether an LLM API is configured: a base URL or an API key, given or in the environment."""
    return bool(
        (base_url or "").strip() or config.llm_base_url() or (api_key or "").strip() or config.llm_api_key()
    )


def _model_name(endpoint: Endpoint, client: Callable[[], OpenAI]) -> str:
    """The endpoint's model: named, else the server's only one (asked once per URL), else OpenAI's default."""
    if endpoint.model is not None:
        return endpoint.model
    url = endpoint.base_url
    if url is None:
        return DEFAULT_OPENAI_MODEL
    with _models_lock:
        known = _models.get(url)
    if known:
        return known
    name = endpoint.discover(client()).name
    with _models_lock:
        _models[url] = name
    return name


def resolve_model(base_url: str | None = None, model: str | None = None, api_key: str | None = None) -> str:
    """The model :func:`chat` would use with these settings (asks the server when it must).

    Raises:
        ModelError: no API configured, or the server cannot say (see :func:`chat`).
    """
    endpoint = Endpoint.resolve(CHAT_SERVICE, base_url, model, api_key)
    opened: list[OpenAI] = []

    def client() -> OpenAI:
        opened.append(endpoint.client())
        return opened[-1]

    try:
        return _model_name(endpoint, client)
    finally:
        for c in opened:
            c.close()


def chat(
    messages: Sequence[Mapping[str, str]],
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    timeout: float | None = None,
    retries: int | None = None,
    cache: OutputCache | None = None,
) -> str:
    """One chat completion: the assistant's reply to ``messages``.

    Args:
        messages: ``{"role": "system"|"user"|"assistant", "content": …}`` dicts, in order.
        base_url: The OpenAI-compatible API (default ``OPENAI_BASE_URL``, else OpenAI's).
        model: The model (default ``OPENAI_MODEL``, else see the module docstring).
        api_key: The bearer token (default ``OPENAI_API_KEY``).
        temperature: Sampling temperature (0 is the most deterministic the server offers).
        max_tokens: The longest reply, in tokens.
        timeout: Seconds to wait for the answer (default ``CHUNKLAB_LLM_TIMEOUT`` or 120).
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
        remote = RemoteChat(base_url, model, api_key, timeout=timeout, retries=retries)
        return cached_reply(remote, messages, max_tokens=max_tokens, temperature=temperature, cache=cache)[0]
    endpoint = Endpoint.resolve(CHAT_SERVICE, base_url, model, api_key, timeout=timeout, retries=retries)
    client = endpoint.client()
    try:
        name = _model_name(endpoint, lambda: client)
        response = endpoint.call(
            "a chat request",
            client.chat.completions.create,
            model=name,
            messages=[dict(m) for m in messages],  # type: ignore[misc]
            temperature=temperature,
            max_tokens=max_tokens,
        )
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"{endpoint.where} answered without a choice (model {name})")
        content = getattr(getattr(choices[0], "message", None), "content", None)
        if content is not None and not isinstance(content, str):
            raise ModelError(f"{endpoint.where} sent a malformed answer to a chat request (its content is not text)")
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

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, progress: Progress | None = None
    ) -> str:
        """The reply to ``messages`` (at most ``max_tokens`` tokens).

        ``progress`` (optional) is the calling job's: a model shared with other jobs says through
        it that the job is queued while another one uses the model.
        """
        ...


class RemoteChat:
    """A model behind an OpenAI-compatible API, through :func:`chat`.

    The API key stays in this object's memory only (it is not part of ``repr``, ``name`` or
    ``fingerprint``); None reads ``OPENAI_API_KEY`` at each call.

    Args:
        base_url: The API (default ``OPENAI_BASE_URL``, else OpenAI's).
        model: The model (default ``OPENAI_MODEL``, else the server's only model).
        api_key: The bearer token (default ``OPENAI_API_KEY``).
        timeout: Seconds to wait per request (default ``CHUNKLAB_LLM_TIMEOUT``).
        retries: Retries on connection errors, timeouts, 429 and 5xx (default ``CHUNKLAB_LLM_RETRIES``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> None:
        self.base_url = base_url
        self._model = model
        self._api_key = api_key
        self.timeout = timeout
        self.retries = retries

    def __repr__(self) -> str:
        return f"RemoteChat(base_url={self.base_url!r}, model={self._model!r})"

    @property
    def name(self) -> str:
        """The model name (asks the server for its only model when none was given)."""
        if self._model is None:
            self._model = resolve_model(self.base_url, None, self._api_key)
        return self._model

    @property
    def fingerprint(self) -> str:
        """``openai-compatible:<model name>``: the same model behind any URL shares cached answers."""
        return f"openai-compatible:{self.name}"

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, progress: Progress | None = None
    ) -> str:
        """One request through :func:`chat` (retries and errors as documented there); a server needs no turn."""
        return chat(
            messages, base_url=self.base_url, model=self.name, api_key=self._api_key,
            temperature=temperature, max_tokens=max_tokens, timeout=self.timeout, retries=self.retries,
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
                fp = fingerprint_without_loading(self.spec) or self.load().info.fingerprint
            self._fingerprint = f"local:{fp}"
        return self._fingerprint

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, progress: Progress | None = None
    ) -> str:
        """Greedy generation of at most ``max_tokens`` new tokens after the chat-templated ``messages``.

        The generation holds the model's lock (the bundled chat model is the scorer's SmolLM2):
        while another job scores with it, ``progress`` says this one is queued.

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
        with acquired(lm.lock, progress), torch.inference_mode():
            out = lm.model.generate(
                **enc, max_new_tokens=max_tokens, do_sample=False, pad_token_id=pad,
                temperature=None, top_p=None, top_k=None,
            )
        return str(tok.decode(out[0, n_prompt:], skip_special_tokens=True))


def chat_cache_key(fingerprint: str, messages: Messages, temperature: float, max_tokens: int) -> dict[str, Any]:
    """The output-cache key of one chat request: model identity, a hash of the messages, the settings."""
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
    progress: Progress | None = None,
) -> tuple[str, bool]:
    """``model``'s reply to ``messages``, from ``cache`` when it holds it; and whether it did.

    Only temperature-0 requests are read from or written to the cache. ``progress`` is the
    calling job's, handed to :meth:`ChatModel.complete`.

    Raises:
        ModelError: as :meth:`ChatModel.complete` raises it (nothing is cached then).
    """
    key = None
    if cache is not None and temperature == 0:
        key = chat_cache_key(model.fingerprint, messages, temperature, max_tokens)
        hit = cache.get(key)
        if hit is not None and isinstance(hit.get("reply"), str):
            record_cached(hit)
            return hit["reply"], True
    started = time.perf_counter()
    reply = model.complete(messages, max_tokens=max_tokens, temperature=temperature, progress=progress)
    seconds = time.perf_counter() - started
    record_computed(seconds)
    # The chat model's speed here (replies, characters written), for estimates (backend/models/rates.py).
    rate_store().record(RateKey(model.fingerprint, "chat", "", "", "chat"), 1, max(len(reply), 1), seconds, len(reply))
    if key is not None:
        cache.put(key, {"reply": reply, SECONDS_FIELD: seconds})
    return reply, False


def default_chat_model(
    lm: str | None = None, device: str | None = None, on_load: Callable[[], Any] | None = None
) -> ChatModel:
    """The chat model LLM chunkers use by default (see ``CHUNKLAB_CHAT`` in the module docstring).

    Raises:
        ModelError: ``CHUNKLAB_CHAT`` is not ``local``, ``remote`` or empty, or ``remote`` with no API configured.
    """
    choice = config.chat_backend()
    if choice == "remote" or (choice == "" and remote_llm_configured()):
        if not remote_llm_configured():
            raise ModelError("CHUNKLAB_CHAT=remote but no LLM is configured: set OPENAI_BASE_URL or OPENAI_API_KEY")
        return RemoteChat()
    return LocalChat(lm, device, on_load=on_load)
