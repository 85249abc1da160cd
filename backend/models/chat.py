"""Chat with an LLM behind any OpenAI-compatible API (OpenAI, vLLM, llama.cpp, Ollama…) through ``openai``.

Shared by question generation and the LLM-based chunkers. Configuration (arguments win over
the environment, read by :mod:`backend.config`):

- ``OPENAI_BASE_URL``: the server, e.g. ``http://gpu-box:8000/v1`` (unset: OpenAI's API);
- ``OPENAI_API_KEY``: the bearer token (a server that checks none still gets ``EMPTY``);
- ``OPENAI_MODEL``: the model; unset, the server's only model when it lists exactly one
  (``GET /models``), else ``gpt-4o-mini`` on OpenAI's API;
- ``CHUNKLAB_LLM_TIMEOUT``: the least seconds to wait for an answer (default 120; connecting
  gives up after 10 s), longer where the server's measured speed says so (below);
  ``CHUNKLAB_LLM_RETRIES``: retries of failed requests (default 2): connection
  errors, timeouts, 429 and 5xx, with back-off and ``Retry-After``; a 401 is not retried and
  reads "rejected the API key" (the policy of :mod:`backend.models.openai_compat`).
- ``CHUNKLAB_CHAT``: which chat model LLM chunkers use: ``local`` (the bundled model),
  ``remote`` (the API above) or unset (the API when one is configured, else the local model).

Two backends stand behind one small interface, :class:`ChatModel`: :class:`RemoteChat` (the
API, through :func:`chat`) and :class:`LocalChat` (a local causal LM through its chat
template, greedy). :func:`cached_reply` answers from the on-disk output cache when the same
model has already answered the same messages with the same settings (temperature 0 only:
a sampled answer is meant to vary), so reruns cost no model call. A cache key holds the
model's identity, never a URL or a key: a local model's is the sha256 of its weights; a remote
model's is what the server says it serves (:class:`~backend.models.openai_compat.ServedModel`:
the listed name and the listing's facts about its weights, hashed), not the name asked for.
llama.cpp answers whatever ``model`` is asked with the one it was started with, so a name the
server's ``GET /models`` does not list is refused in one line, and every answer's own ``model``
is checked (:func:`~backend.models.openai_compat.check_answer_model`) before it is returned or
cached. The identity is confirmed once per :data:`IDENTITY_MAX_AGE_S` seconds per (URL, name)
in the process and forgotten when a request fails; with the server down it cannot be confirmed,
so no cached answer is served (the error line says so): the same model behind another URL
shares cached answers, another model behind the same URL or name never does.

Timeouts follow the server's measured speed: each answer's ``usage`` (prompt and completion
tokens) over its elapsed time is recorded under the served identity in the rate store
(:mod:`backend.models.rates`, work ``chat_tokens``, so a restart knows it), and each request
then waits :data:`SPEED_SAFETY` times what that speed predicts for its prompt and
``max_tokens``, never less than ``CHUNKLAB_LLM_TIMEOUT`` (or the caller's ``timeout``). A
server whose speed is not known yet first gets a probe of a few tokens (:data:`PROBE_MESSAGES`)
within the configured timeout; a late answer's error names the speed and the timeout used. A
server that returns no ``usage`` is waited for the configured timeout.

The API key lives only in memory and the HTTP client of one call: it is never logged, cached,
written to disk, put in a result or repeated in an error message. Every failure is a one-line
:class:`~backend.errors.ModelError`: HTTP errors after the retries, a server slower than the
timeout, an answer cut short or not JSON; a reply is cached only once it came back whole.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from backend import config
from backend.errors import ModelError, ParameterError
from backend.models.cache import OutputCache, text_digest
from backend.models.identity import fingerprint_without_loading
from backend.models.lm import load_lm
from backend.models.openai_compat import Endpoint, RemoteClient, ServedModel, Service, check_answer_model
from backend.models.rates import Rate, RateKey, rate_store
from backend.models.timing import SECONDS_FIELD, record_cached, record_computed
from backend.progress import Progress, acquired

if TYPE_CHECKING:
    from openai import OpenAI


__all__ = [
    "chat",
    "resolve_model",
    "served_chat_model",
    "ChatSpeed",
    "chat_speed",
    "sized_timeout",
    "PROBE_MESSAGES",
    "SPEED_SAFETY",
    "IDENTITY_MAX_AGE_S",
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
Messages = Sequence[Mapping[str, str]]

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

IDENTITY_MAX_AGE_S = 10.0
"""Seconds a served identity confirmed by the server is trusted before it is asked again."""

SPEED_SAFETY = 2.0
"""How many times the time a measured speed predicts a request is given before it counts as timed out."""

PROBE_MESSAGES: tuple[Mapping[str, str], ...] = ({"role": "user", "content": "Reply with OK."},)
"""The first request to a server whose speed is not known yet: a few tokens, answered at the configured timeout."""
PROBE_MAX_TOKENS = 4

# What discovery says when the server did answer its listing (any other failure means it could not be asked).
_LISTING_ANSWERS = ("has no model", "serves no model", "serves several models", "does not list its models",
                    "rejected the API key")
# (base URL, name asked for) -> (the served model, when the server confirmed it). No secret in the key.
_identities: dict[tuple[str | None, str | None], tuple[ServedModel, float]] = {}
_probed: set[str] = set()  # served identities whose speed was probed in this process (probed once)
_memo_lock = threading.Lock()


@dataclass(frozen=True)
class ChatSpeed:
    """How fast a served chat model answers, measured from the answers' ``usage`` (rate store work ``chat_tokens``).

    Each answer tells ``elapsed ≥ prompt/prompt speed + completion/generation speed``; the
    sums of prompt tokens, completion tokens and seconds over recent answers therefore give
    rates no faster than the server's, so a time predicted from them errs long, not short.

    Attributes:
        completion_per_s: Completion tokens per second of answering (the generation speed, at most).
        prompt_per_s: Prompt tokens per second of answering (the prompt speed, at most).
        tokens_per_char: Prompt tokens per prompt character (the server's tokenizer on these prompts).
    """

    completion_per_s: float
    prompt_per_s: float
    tokens_per_char: float

    @classmethod
    def of(cls, rate: Rate) -> ChatSpeed | None:
        """The speed a rate store entry measured (None: no prompt characters counted)."""
        if rate.chars <= 0:
            return None
        return cls(rate.units / rate.seconds, rate.work / rate.seconds, rate.work / rate.chars)

    def seconds_for(self, prompt_chars: int, max_tokens: int) -> float:
        """The predicted seconds of a request of ``prompt_chars`` characters answering ``max_tokens`` tokens at most."""
        return prompt_chars * self.tokens_per_char / self.prompt_per_s + max_tokens / self.completion_per_s


def _speed_key(fingerprint: str) -> RateKey:
    """Where a served chat model's token speed is kept (units: completion tokens; work: prompt tokens)."""
    return RateKey(fingerprint, "chat", "", "", "chat_tokens")


def chat_speed(fingerprint: str) -> ChatSpeed | None:
    """The measured speed of the served chat model ``fingerprint`` (None: never measured here)."""
    rate = rate_store().get(_speed_key(fingerprint))
    return ChatSpeed.of(rate) if rate is not None else None


def sized_timeout(floor: float, speed: ChatSpeed | None, prompt_chars: int, max_tokens: int) -> float:
    """Seconds to wait for one answer: :data:`SPEED_SAFETY` times the measured speed's prediction, at least ``floor``.

    The prediction is rounded up to whole seconds.

    ``floor`` is the configured timeout (``CHUNKLAB_LLM_TIMEOUT``, default 120, or the
    caller's): a slow server gets longer, never a fast one shorter.
    """
    if speed is None:
        return floor
    return max(floor, float(math.ceil(SPEED_SAFETY * speed.seconds_for(prompt_chars, max_tokens))))


def remote_llm_configured(base_url: str | None = None, api_key: str | None = None) -> bool:
    """Whether an LLM API is configured: a base URL or an API key, given or in the environment."""
    return bool(
        (base_url or "").strip() or config.llm_base_url() or (api_key or "").strip() or config.llm_api_key()
    )


def _endpoint(
    base_url: str | None, model: str | None, api_key: str | None, *, timeout: float | None = None,
    retries: int | None = None,
) -> Endpoint:
    """The chat endpoint; OpenAI's API without a model name asks for :data:`DEFAULT_OPENAI_MODEL`."""
    endpoint = Endpoint.resolve(CHAT_SERVICE, base_url, model, api_key, timeout=timeout, retries=retries)
    if endpoint.base_url is None and endpoint.model is None:
        endpoint = dataclasses.replace(endpoint, model=DEFAULT_OPENAI_MODEL)
    return endpoint


def _forget(endpoint: Endpoint) -> None:
    """Drop the confirmed identity of ``endpoint``: the next use asks the server again."""
    with _memo_lock:
        _identities.pop((endpoint.base_url, endpoint.model), None)


def _served(endpoint: Endpoint, client: Callable[[], OpenAI]) -> ServedModel:
    """The model ``endpoint`` serves, as its ``/models`` listing says (asked at most every :data:`IDENTITY_MAX_AGE_S`).

    Raises:
        ModelError: the server is down, lists no such model, or several and none was named.
    """
    key = (endpoint.base_url, endpoint.model)
    now = time.monotonic()
    with _memo_lock:
        known = _identities.get(key)
    if known is not None and now - known[1] < IDENTITY_MAX_AGE_S:
        return known[0]
    try:
        served = endpoint.discover(client())
    except ModelError:
        _forget(endpoint)
        raise
    with _memo_lock:
        _identities[key] = (served, now)
    return served


def _with_client(endpoint: Endpoint, use: Callable[[Callable[[], OpenAI]], Any]) -> Any:
    """``use(client)`` with a client opened on first call and closed afterwards."""
    opened: list[OpenAI] = []

    def client() -> OpenAI:
        if not opened:
            opened.append(endpoint.client())
        return opened[0]

    try:
        return use(client)
    finally:
        for c in opened:
            c.close()


def served_chat_model(base_url: str | None = None, model: str | None = None, api_key: str | None = None) -> ServedModel:
    """The served model :func:`chat` would talk to with these settings, confirmed by the server.

    Raises:
        ModelError: no API configured, the server is down, or it does not serve the model named.
    """
    endpoint = _endpoint(base_url, model, api_key)
    return _with_client(endpoint, lambda client: _served(endpoint, client))


def resolve_model(base_url: str | None = None, model: str | None = None, api_key: str | None = None) -> str:
    """The model name :func:`chat` would send with these settings (asks the server; see :func:`served_chat_model`).

    Raises:
        ModelError: no API configured, or the server cannot confirm the model (see :func:`chat`).
    """
    return served_chat_model(base_url, model, api_key).name


@dataclass(frozen=True)
class _Answer:
    """One chat completion's text and what it says of the server's speed."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def _request(
    endpoint: Endpoint, client: OpenAI, served: ServedModel, messages: Messages, *, temperature: float,
    max_tokens: int, timeout: float, what: str = "a chat request",
) -> _Answer:
    """One chat completion within ``timeout`` seconds, its ``model`` checked against ``served``."""
    speed = chat_speed(served.fingerprint("chat"))
    note = f"measured {speed.completion_per_s:.1f} tokens/s; " if speed is not None else ""
    timed = dataclasses.replace(endpoint, timeout=timeout, timeout_note=note)
    started = time.perf_counter()
    response = timed.call(
        what,
        client.chat.completions.create,
        model=served.name,
        messages=[dict(m) for m in messages],  # type: ignore[misc]
        temperature=temperature,
        max_tokens=max_tokens,
        timeout=endpoint.request_timeout(timeout),
    )
    seconds = time.perf_counter() - started
    check_answer_model(served, getattr(response, "model", None), endpoint.where, what)
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise ModelError(f"{endpoint.where} answered without a choice (model {served.name})")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    if content is not None and not isinstance(content, str):
        raise ModelError(f"{endpoint.where} sent a malformed answer to {what} (its content is not text)")
    usage = getattr(response, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    completion_tokens = getattr(usage, "completion_tokens", None)
    return _Answer(
        content or "",
        prompt_tokens if isinstance(prompt_tokens, int) and prompt_tokens > 0 else 0,
        completion_tokens if isinstance(completion_tokens, int) and completion_tokens > 0 else 0,
        seconds,
    )


def _learn_speed(fingerprint: str, messages: Messages, answer: _Answer) -> None:
    """Record an answer's tokens and seconds under the served identity (nothing when the server counts none)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    if answer.prompt_tokens and answer.completion_tokens and chars:
        rate_store().record(_speed_key(fingerprint), answer.completion_tokens, answer.prompt_tokens, answer.seconds, chars)


def _answer(
    endpoint: Endpoint, client: OpenAI, served: ServedModel, messages: Messages, *, temperature: float, max_tokens: int,
) -> str:
    """The reply to ``messages``, the timeout sized from the served model's measured speed (probed once when unknown)."""
    fingerprint = served.fingerprint("chat")
    floor = endpoint.timeout
    with _memo_lock:
        probe = chat_speed(fingerprint) is None and fingerprint not in _probed
        _probed.add(fingerprint)
    if probe:
        answer = _request(endpoint, client, served, PROBE_MESSAGES, temperature=0.0, max_tokens=PROBE_MAX_TOKENS,
                          timeout=floor, what=f"a {PROBE_MAX_TOKENS}-token speed probe")
        _learn_speed(fingerprint, PROBE_MESSAGES, answer)
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    timeout = sized_timeout(floor, chat_speed(fingerprint), chars, max_tokens)
    answer = _request(endpoint, client, served, messages, temperature=temperature, max_tokens=max_tokens,
                      timeout=timeout)
    _learn_speed(fingerprint, messages, answer)
    return answer.text


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

    The model is the one the server confirms it serves (``GET /models``, see
    :func:`served_chat_model`), and the answer's own ``model`` is checked against it. The wait
    is sized from the server's measured speed (see :func:`sized_timeout`).

    Args:
        messages: ``{"role": "system"|"user"|"assistant", "content": …}`` dicts, in order.
        base_url: The OpenAI-compatible API (default ``OPENAI_BASE_URL``, else OpenAI's).
        model: The model (default ``OPENAI_MODEL``, else see the module docstring).
        api_key: The bearer token (default ``OPENAI_API_KEY``).
        temperature: Sampling temperature (0 is the most deterministic the server offers).
        max_tokens: The longest reply, in tokens.
        timeout: The least seconds to wait for the answer (default ``CHUNKLAB_LLM_TIMEOUT`` or 120).
        retries: Retries of failed requests (default ``CHUNKLAB_LLM_RETRIES`` or 2).
        cache: Answer from (and store into) this output cache when ``temperature`` is 0
            (see :func:`cached_reply`); None asks the server every time.

    Returns:
        The reply text (empty when the model said nothing).

    Raises:
        ParameterError: no messages, or a bad ``max_tokens``/``temperature``.
        ModelError: no API configured, unreachable server, rejected key, a model the server does
            not serve, an answer from another model, timeout, or a malformed answer (one line,
            without the key).
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
    endpoint = _endpoint(base_url, model, api_key, timeout=timeout, retries=retries)

    def ask(client: Callable[[], OpenAI]) -> str:
        served = _served(endpoint, client)
        try:
            return _answer(endpoint, client(), served, messages, temperature=temperature, max_tokens=max_tokens)
        except ModelError:
            _forget(endpoint)  # a server that failed may come back serving another model
            raise

    return str(_with_client(endpoint, ask))


# --- one interface for remote and local chat models ------------------------------------------

CHAT_CACHE_VERSION = 1


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


class RemoteChat(RemoteClient):
    """A model behind an OpenAI-compatible API, through :func:`chat`.

    Built as every :class:`~backend.models.openai_compat.RemoteClient` is, on the ``OPENAI_*``
    and ``CHUNKLAB_LLM_*`` settings (:data:`CHAT_SERVICE`); a setting left out is read at each
    call, and nothing is asked of the server until one.
    """

    service = CHAT_SERVICE

    def __repr__(self) -> str:
        return f"RemoteChat(base_url={self.base_url!r}, model={self._model!r})"

    @property
    def base_url(self) -> str | None:
        """The base URL given (None: ``OPENAI_BASE_URL``, else OpenAI's API)."""
        return self._base_url

    @property
    def name(self) -> str:
        """The model name: the one given, else the server's only model (asks the server)."""
        if self._model is None:
            self._model = resolve_model(self.base_url, None, self._api_key)
        return self._model

    @property
    def settings_key(self) -> str:
        """What this model was configured as (the URL and the name asked for), for keys held in memory; no request.

        Not a cache identity (see :attr:`fingerprint`): a session keys its own results by it
        without asking the server at every page render.
        """
        return f"remote:{self.base_url or ''}|{self._model or ''}"

    def confirmed_fingerprint(self) -> str | None:
        """The served identity when the server confirmed it within :data:`IDENTITY_MAX_AGE_S`; None otherwise.

        Makes no request: a page reading cached answers while it renders uses this, so a slow or
        hung server never holds the page (None: the answers are not read here; a job asks the
        server and reads them).
        """
        try:
            endpoint = _endpoint(self.base_url, self._model, self._api_key)
        except ModelError:
            return None
        with _memo_lock:
            known = _identities.get((endpoint.base_url, endpoint.model))
        if known is None or time.monotonic() - known[1] >= IDENTITY_MAX_AGE_S:
            return None
        return known[0].fingerprint("chat")

    @property
    def fingerprint(self) -> str:
        """The served model's identity (``served:<sha256>``, :meth:`ServedModel.fingerprint` of kind ``chat``).

        What the server lists under the name (its facts, never the URL): the same model behind
        another URL shares cached answers, another model behind the same URL or name never does.
        Asked of the server at most every :data:`IDENTITY_MAX_AGE_S` seconds.

        Raises:
            ModelError: the server cannot confirm the model (down, or it does not serve the name):
                no cached answer is read under an unconfirmed name.
        """
        try:
            return served_chat_model(self.base_url, self._model, self._api_key).fingerprint("chat")
        except ModelError as e:
            if any(answer in str(e) for answer in _LISTING_ANSWERS):
                raise  # the server answered: its own line says what it serves
            raise ModelError(f"{e}; cached answers are not used while it cannot confirm which model it serves") from None

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, progress: Progress | None = None
    ) -> str:
        """One request through :func:`chat` (retries and errors as documented there); a server needs no turn."""
        return chat(
            messages, base_url=self.base_url, model=self._model, api_key=self._api_key,
            temperature=temperature, max_tokens=max_tokens, timeout=self._timeout, retries=self._retries,
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
    calling job's, handed to :meth:`ChatModel.complete`. The key's model identity is read
    again once the reply came: a remote model's is what the server confirmed it serves, and
    the reply is stored (and its speed recorded) under the identity that wrote it.

    Raises:
        ModelError: as :meth:`ChatModel.complete` raises it, or the model's identity cannot be
            confirmed (nothing is read from or written to the cache then).
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
    fingerprint = model.fingerprint
    # The chat model's speed here (replies, characters written), for estimates (backend/models/rates.py).
    rate_store().record(RateKey(fingerprint, "chat", "", "", "chat"), 1, max(len(reply), 1), seconds, len(reply))
    if key is not None:
        cache.put(chat_cache_key(fingerprint, messages, temperature, max_tokens), {"reply": reply, SECONDS_FIELD: seconds})
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
