"""The one client layer for OpenAI-compatible APIs (OpenAI, vLLM, llama.cpp, Ollama…), through ``openai``.

Chat (:mod:`backend.models.chat`), remote scoring (:mod:`backend.models.remote`) and remote
embeddings (:mod:`backend.models.remote_embedder`) talk to the same kind of server, so what
they share is written once here:

- the one constructor of their clients (:class:`RemoteClient`: URL, model, key, timeout and
  retries, each left out read from the environment of the client's :class:`Service`);
- the settings of one connection, arguments first, then the environment (:meth:`Endpoint.resolve`
  with a :class:`Service` naming which :mod:`backend.config` readers and hints apply);
- building the ``openai.OpenAI`` client: base URL, bearer token, timeouts, retries;
- the retry policy, which is the ``openai`` client's own (``max_retries``) rather than a copy
  of it: connection errors, timeouts, 408, 409, 429 and 5xx are retried after 0.5 s, 1 s, 2 s …
  (doubling, at most 8 s, minus up to 25 % jitter), or after the server's ``Retry-After``;
  a 401 is never retried;
- discovering the served model (``GET /models``) and its context length, and the served
  model's *identity* (:class:`ServedModel`): what the server says it serves, not only the name
  asked for. Cache keys of remote models are made of it (:meth:`ServedModel.fingerprint`), and
  every answer's own ``model`` field is checked against it (:func:`check_answer_model`), so a
  server that ignores the request's ``model`` (llama.cpp does) cannot have one model's answers
  stored as another's;
- sending independent requests a few at a time and reading the answers in order
  (:func:`in_order`), for the remote scorer and the remote embedder;
- turning a client error into a one-line :class:`~backend.errors.ModelError` without the key,
  including the answers no retry can help: a body that is not complete JSON (the ``openai``
  client raises ``json.JSONDecodeError`` for it, not one of its own errors) and a connection
  closed in the middle of an answer.

The API key lives only in an :class:`Endpoint` (out of its ``repr``) and the HTTP client built
from it: never logged, cached, written to disk or put in a result. Text a server sends back is
scrubbed of it, and errors are raised without the client's exception chained, since that holds
the request headers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from backend.errors import ModelError, ParameterError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from openai import OpenAI

__all__ = [
    "Service",
    "Endpoint",
    "RemoteClient",
    "whole_number",
    "ServedModel",
    "check_answer_model",
    "in_order",
    "check_base_url",
    "scrub",
    "error_text",
    "connection_reason",
]

_T = TypeVar("_T")
_R = TypeVar("_R")
_URL = re.compile(r"^https?://[^/\s]+")


@dataclass(frozen=True)
class Service:
    """Which settings one kind of client reads, and how its messages name them.

    Attributes:
        label: How errors name the server, e.g. ``"LLM server"`` (``"LLM server at <url>"``).
        base_url: Reads the configured base URL (None: unset).
        model: Reads the configured model name (None: the server's only model).
        api_key: Reads the configured bearer token (None: unset).
        timeout: Reads the configured seconds to wait for an answer.
        retries: Reads the configured retries of a failed request.
        connect_timeout: Seconds to wait for a connection (at most ``timeout``).
        timeout_setting: The variable a timeout error points to.
        key_setting: The variable a rejected-key error points to.
        model_hint: What to do when the model must be named, e.g. ``"set OPENAI_MODEL"``.
        missing: The error when no server is configured at all.
        needs_url: Whether a base URL is required (False: no URL means OpenAI's API, which needs a key).
    """

    label: str
    base_url: Callable[[], str | None]
    model: Callable[[], str | None]
    api_key: Callable[[], str | None]
    timeout: Callable[[], float]
    retries: Callable[[], int]
    connect_timeout: float
    timeout_setting: str
    key_setting: str
    model_hint: str
    missing: str
    needs_url: bool


# Fields of a ``/models`` entry that say which weights stand behind a name: vLLM's ``root`` and
# ``parent`` (the weights' path or hub id), llama.cpp's ``meta`` (parameter count, file size,
# vocabulary, training context). Left out on purpose: ``created`` (vLLM sets it to the time of
# the request), ``owned_by`` and serving limits such as ``max_model_len``, which change no output.
_IDENTITY_FIELDS = ("root", "parent", "meta")
# Keys of llama.cpp's ``meta`` that are serving settings, not the weights: ``n_ctx`` is the
# context the server was started with (``-c``), which changes no token's score.
_SERVING_META = frozenset({"n_ctx", "n_ctx_slot", "n_parallel", "n_batch", "n_ubatch", "n_threads"})


@dataclass(frozen=True)
class ServedModel:
    """A model a server serves, as the server describes it.

    Attributes:
        name: The name to send as the request's ``model`` (the listed id).
        context_length: The context length in tokens, when the server says (vLLM's
            ``max_model_len``, ``context_length``); None otherwise.
        listed: Whether the server listed its models (``GET /models``). False: a server without
            that endpoint, trusted to serve ``name``; each answer's ``model`` is then the only check.
        facts: The listing's facts about the weights behind ``name`` (see ``_IDENTITY_FIELDS``),
            as sorted ``(field, canonical JSON)`` pairs; empty when the server gives none.
        aliases: Other names the server uses for the same model in answers (vLLM's ``root``,
            llama.cpp's ``aliases``), so an answer naming one of them is not taken for another model.
        others: The other models the server lists (not part of the identity): an answer naming
            one of them is refused.
    """

    name: str
    context_length: int | None = None
    listed: bool = True
    facts: tuple[tuple[str, str], ...] = ()
    aliases: tuple[str, ...] = ()
    others: tuple[str, ...] = ()

    @property
    def identity(self) -> str:
        """The served model's identity, one line, no URL and no secret: ``name`` and its facts."""
        return " ".join([self.name, *(f"{k}={v}" for k, v in self.facts)])

    def fingerprint(self, kind: str, *extra: object) -> str:
        """The cache-key identity of this model used as ``kind`` (``chat``, ``remote-lm``, ``embedder``…).

        ``served:<sha256>`` of the kind, :attr:`identity` and ``extra`` (e.g. an embedding
        dimension). The URL is not part of it: the same model behind another URL or proxy
        shares cached outputs; another model behind the same URL never does.
        """
        parts = [kind, self.identity, *(str(x) for x in extra)]
        return "served:" + hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def check_answer_model(served: ServedModel, answered: object, where: str, what: str = "a request") -> None:
    """Refuse an answer whose ``model`` field names another model than ``served``.

    Accepted: no ``model`` in the answer (the server does not say), the name asked for, one of
    its :attr:`ServedModel.aliases`, a dated snapshot of it (``gpt-4o-mini-2024-07-18`` for
    ``gpt-4o-mini``: the name followed by ``-`` and a digit), the same file name in another
    folder (``/models/x.gguf`` for ``x.gguf``), and, from a server that lists its models, a
    name it does not list (old llama.cpp builds answer ``gpt-3.5-turbo`` whatever they serve:
    the listing has already said which model that is). Refused: another model the server lists,
    and, from a server that lists none, any other name.

    Raises:
        ModelError: one line naming both models (``where`` is the server, ``what`` the request).
    """
    if not isinstance(answered, str) or not answered.strip():
        return
    name = served.name
    got = answered.strip()
    if got == name or got in served.aliases or _same_file(got, name):
        return
    if got.startswith(name + "-") and got[len(name) + 1 : len(name) + 2].isdigit():
        return  # a dated snapshot of the named model (OpenAI's habit)
    if served.listed and got not in served.others:
        return
    raise ModelError(
        f"{where} answered {what} with model {got!r} when asked for {name!r}: it does not serve the "
        "model named (llama.cpp serves only the model it was started with); name the model it serves"
    )


def _same_file(a: str, b: str) -> bool:
    """Whether two names are one file in different folders (llama.cpp names a model by its path)."""
    tail_a, tail_b = a.replace("\\", "/").rsplit("/", 1)[-1], b.replace("\\", "/").rsplit("/", 1)[-1]
    return ("/" in a or "/" in b) and tail_a == tail_b and tail_a.endswith(".gguf")


@dataclass(frozen=True)
class Endpoint:
    """The resolved settings of one connection to an OpenAI-compatible API.

    Attributes:
        service: What this is a connection for (labels and hints of its messages).
        base_url: The API, without a trailing slash (None: OpenAI's).
        model: The model, when named (None: discover it, see :meth:`discover`).
        api_key: The bearer token (None: none); left out of ``repr``.
        timeout: Seconds to wait for an answer.
        retries: Retries of failed requests (the ``openai`` client's back-off).
        timeout_note: Said before the timeout's setting when an answer is late (e.g. the
            measured speed the timeout was sized from, ``"measured 2.1 tokens/s; "``).
    """

    service: Service = field(repr=False)
    base_url: str | None
    model: str | None
    api_key: str | None = field(repr=False)
    timeout: float
    retries: int
    timeout_note: str = field(default="", repr=False)

    @classmethod
    def resolve(
        cls,
        service: Service,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> Endpoint:
        """The settings of ``service``: each argument given wins over its environment variable.

        A blank string counts as not given, as do a ``timeout`` that is not above 0 and
        negative ``retries``.

        Raises:
            ModelError: no server configured (see :attr:`Service.missing`), or a base URL that
                is not http(s).
        """
        url = check_base_url((base_url or "").strip() or service.base_url(), service.label)
        key = (api_key or "").strip() or service.api_key()
        if url is None and (service.needs_url or key is None):
            raise ModelError(service.missing)
        return cls(
            service=service,
            base_url=url,
            model=(model or "").strip() or service.model(),
            api_key=key,
            timeout=timeout if timeout is not None and timeout > 0 else service.timeout(),
            retries=retries if retries is not None and retries >= 0 else service.retries(),
        )

    @property
    def where(self) -> str:
        """How messages name the server: ``"<label> at <url>"``, or ``"the OpenAI API"``."""
        return f"{self.service.label} at {self.base_url}" if self.base_url else "the OpenAI API"

    def client(self) -> OpenAI:
        """A new ``openai.OpenAI`` client for this endpoint (close it when done)."""
        import httpx
        import openai

        return openai.OpenAI(
            base_url=self.base_url,
            api_key=self.api_key or "EMPTY",  # servers that check no key still want a bearer token (vLLM's habit)
            timeout=httpx.Timeout(self.timeout, connect=min(self.service.connect_timeout, self.timeout)),
            max_retries=self.retries,
        )

    def request_timeout(self, seconds: float) -> Any:
        """An ``httpx.Timeout`` of ``seconds`` for one request (connecting as :meth:`client` does), for ``timeout=``."""
        import httpx

        return httpx.Timeout(seconds, connect=min(self.service.connect_timeout, seconds))

    @property
    def url_hint(self) -> str:
        """``" (OpenAI-compatible URLs usually end in /v1)"`` when the base URL does not, else ``""``."""
        return "" if not self.base_url or self.base_url.endswith("/v1") else " (OpenAI-compatible URLs usually end in /v1)"

    def describe(self, e: BaseException, what: str) -> str:
        """A one-line, key-free account of an ``openai`` client error (or a cut JSON answer) met during ``what``."""
        import openai

        where = self.where
        if isinstance(e, json.JSONDecodeError):
            return f"{where} sent an answer to {what} that is not complete JSON ({self.scrub(str(e))})"
        if isinstance(e, openai.APITimeoutError):
            return f"{where} did not answer {what} within {self.timeout:g}s ({self.timeout_note}{self.service.timeout_setting})"
        if isinstance(e, openai.APIConnectionError):
            if _broken_off(e):
                return f"{where} closed the connection in the middle of {what} ({self.scrub(connection_reason(e))})"
            return f"{where} is unreachable ({self.scrub(connection_reason(e))})"
        if isinstance(e, openai.AuthenticationError):
            return f"{where} rejected the API key (HTTP {e.status_code}); check {self.service.key_setting}"
        if isinstance(e, openai.NotFoundError):
            hint = self.url_hint
            return f"{where} has no endpoint or model for {what} (HTTP 404){hint}: {self.scrub(error_text(e))}"
        if isinstance(e, openai.APIStatusError):
            return f"{where} refused {what} (HTTP {e.status_code}): {self.scrub(error_text(e))}"
        # Malformed answers (APIResponseValidationError) and anything else the client raises.
        return f"{where} gave no usable answer to {what}: {self.scrub(str(e))}"

    def scrub(self, text: str) -> str:
        """``text`` on one line, at most 300 characters, without this endpoint's key."""
        return scrub(text, self.api_key)

    def call(self, what: str, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)``, with a client error turned into a one-line :class:`ModelError`.

        An answer whose body is not complete JSON counts as a client error. The ModelError is
        raised outside the ``except`` block, so it carries no chained exception: the client's
        exceptions hold the request, Authorization header included.
        """
        import openai

        try:
            return fn(*args, **kwargs)
        except (openai.OpenAIError, json.JSONDecodeError) as e:
            message = self.describe(e, what)
        raise ModelError(message)

    def _listed_elsewhere(self, client: OpenAI, here: str) -> str | None:
        """The error line when ``here/models`` answered 404 but the URL without ``/v1`` (or with it) lists models; else None."""
        import openai

        there = here.removesuffix("/v1") if here.endswith("/v1") else here + "/v1"
        try:
            page = client.with_options(base_url=there, max_retries=0).models.list()
            ids = [str(m.id) for m in (getattr(page, "data", None) or [])]
        except (openai.OpenAIError, json.JSONDecodeError, AttributeError, TypeError, ValueError):
            return None  # nothing answers there either: the first 404 stands
        if not ids:
            return None
        return self.scrub(
            f"{self.where} does not list its models: {here}/models answered HTTP 404, but {there}/models lists "
            f"{', '.join(ids[:5])}: use {there} as the server's URL"
        )

    def discover(self, client: OpenAI) -> ServedModel:
        """The model to use, from ``GET /models``: the named one (checked), else the only one served.

        A server without ``/models`` (HTTP 404) is trusted to serve the named model
        (``listed=False``: each answer's ``model`` is then the only check). A server that lists
        its models and not the named one is refused: a server that ignores the request's
        ``model`` (llama.cpp) would otherwise answer with its own model under the name asked for.

        A 404 is first checked against the URL with ``/v1`` taken off (or put on): a server
        that lists its models there (infinity serves at the root unless started with
        ``--url-prefix /v1``) was given the wrong URL, and the error says which URL answered
        404 and which one to use.

        Raises:
            ModelError: the server fails, serves no model or several (and none was named), or
                not the named one; its listing is found only at the other URL.
        """
        import openai

        name = self.model
        message = None
        try:
            page = client.models.list()
        except openai.NotFoundError:
            here = str(client.base_url).rstrip("/")
            message = self._listed_elsewhere(client, here)
            if message is None and name is not None:
                return ServedModel(name, listed=False)
            if message is None:
                message = (
                    f"{self.where} does not list its models ({here}/models answered HTTP 404): {self.service.model_hint}"
                )
        except openai.OpenAIError as e:
            message = self.describe(e, "the model list")
        if message is not None:
            raise ModelError(message)
        models = list(getattr(page, "data", None) or [])
        ids = [str(m.id) for m in models]
        if name is None:
            if not ids:
                raise ModelError(f"{self.where} serves no model")
            if len(ids) > 1:
                raise ModelError(f"{self.where} serves several models ({', '.join(ids[:5])}): {self.service.model_hint}")
            name = ids[0]
        elif not ids:
            return ServedModel(name, listed=False)  # an empty listing says nothing of what is served
        elif name not in ids:
            raise ModelError(
                f"{self.where} has no model {name!r} (it serves: {', '.join(ids[:5])}); {self.service.model_hint}"
            )
        chosen = next((m for m in models if str(m.id) == name), None)
        extra = dict(getattr(chosen, "model_extra", None) or {}) if chosen is not None else {}
        length = extra.get("max_model_len") or extra.get("context_length")
        facts = tuple(
            (k, json.dumps(_weights_facts(extra[k]), sort_keys=True, separators=(",", ":"), default=str))
            for k in _IDENTITY_FIELDS
            if extra.get(k) not in (None, "", {}, [])
        )
        # vLLM's ``root`` and llama.cpp's ``aliases`` (``--alias``) name the same model in answers.
        named = [extra.get("root"), *(extra.get("aliases") if isinstance(extra.get("aliases"), list) else [])]
        aliases = tuple(dict.fromkeys(str(a) for a in named if isinstance(a, str) and a and a != name))
        return ServedModel(
            name,
            int(length) if isinstance(length, (int, float)) and not isinstance(length, bool) and length > 0 else None,
            listed=True,
            facts=facts,
            aliases=aliases,
            others=tuple(i for i in ids if i != name),
        )


def _weights_facts(value: Any) -> Any:
    """A listing field without the serving settings it may hold (see ``_SERVING_META``)."""
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if k not in _SERVING_META}
    return value


class RemoteClient:
    """A client of one OpenAI-compatible API, as it was configured: the base of the remote models.

    :class:`~backend.models.chat.RemoteChat`, :class:`~backend.models.remote.RemoteScorer` and
    :class:`~backend.models.remote_embedder.RemoteEmbedder` are built alike: a URL, a model, a
    key, a timeout and retries, each left out read from the environment their :attr:`service`
    names (``OPENAI_*``, ``CHUNKLAB_REMOTE_*``, ``CHUNKLAB_EMBEDDER_*``). What a subclass does
    with them differs: chat resolves them at each request, the scorer and the embedder connect
    once, in their constructor (:meth:`endpoint`).

    The API key stays in this object's memory (and the HTTP clients built from it) only: it is
    not part of ``repr``, a name, a fingerprint or a message.
    """

    service: ClassVar[Service]
    """Which settings fill in what the constructor was not given, and how messages name the server."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> None:
        """Keep the settings given; a None or blank one is read from the environment by :meth:`endpoint`.

        Args:
            base_url: The API, e.g. ``http://gpu-box:8000/v1`` (default: the service's base-URL
                variable; for chat and embeddings none means OpenAI's API).
            model: The served model's name (default: the service's model variable, else the
                server's only model).
            api_key: The bearer token (default: the service's key variable, else ``OPENAI_API_KEY``).
            timeout: Seconds to wait for an answer (default: the service's timeout variable).
            retries: Retries of a request that failed by a connection error, a timeout, 429 or
                5xx, with the ``openai`` client's back-off (default: the service's retries variable).
        """
        self._base_url = base_url
        self._model = model
        self._api_key = api_key
        self._timeout = timeout
        self._retries = retries

    def endpoint(self) -> Endpoint:
        """The settings given, the environment filling in the rest (read now).

        Raises:
            ModelError: no server configured, or a base URL that is not http(s).
        """
        return Endpoint.resolve(
            self.service, self._base_url, self._model, self._api_key, timeout=self._timeout, retries=self._retries
        )


def whole_number(name: str, value: int | None, default: Callable[[], int], high: int) -> int:
    """``value`` checked to be a whole number from 1 to ``high``; ``default()`` when None.

    Raises:
        ParameterError: a bool, a non-integer or a number out of range (the message names ``name``).
    """
    if value is None:
        return int(default())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ParameterError(f"{name} ({value!r}) must be a whole number from 1 to {high}")
    return value


def in_order(
    fn: Callable[[_R], _T],
    requests: Sequence[_R],
    each: Callable[[int, _T], None],
    concurrency: int,
    *,
    name: str = "chunklab-remote",
) -> None:
    """``fn`` of each request, up to ``concurrency`` at once; ``each(k, answer)`` here, in request order.

    At most ``concurrency`` requests are submitted ahead of the answer being read: memory and
    the server's queue stay bounded, and a cancel leaves little in flight. Values, ``each``
    calls and the first error are the same as one at a time: an error (or a
    :class:`~backend.errors.Cancelled` raised by ``each``) stops the submitting, cancels the
    requests not yet sent and waits for those in flight, so no thread outlives the call.
    """
    workers = min(max(1, int(concurrency)), len(requests))
    if workers <= 1:
        for k, request in enumerate(requests):
            each(k, fn(request))
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    pending: deque[Future[_T]] = deque()
    sent = 0
    try:
        for k in range(len(requests)):
            while sent < len(requests) and len(pending) < workers:
                pending.append(pool.submit(fn, requests[sent]))
                sent += 1
            each(k, pending.popleft().result())
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def check_base_url(url: str | None, label: str) -> str | None:
    """``url`` without its trailing slash, after checking it is an http(s) URL naming a host.

    Raises:
        ModelError: ``url`` is not an http(s) URL (the message starts with ``label``).
    """
    if url is None:
        return None
    if not _URL.match(url):
        raise ModelError(f"{label} URL {url!r} must start with http:// or https:// and name a host")
    return url.rstrip("/")


def scrub(text: str, secret: str | None) -> str:
    """``text`` on one line, at most 300 characters, with ``secret`` replaced by ``***``."""
    flat = " ".join(str(text).split())
    if secret:
        flat = flat.replace(secret, "***")
    return flat if len(flat) <= 300 else flat[:299] + "…"


def error_text(e: BaseException) -> str:
    """The server's own message in an HTTP error answer (``{"error": {"message": …}}`` and its variants)."""
    body = getattr(e, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        if body.get("message"):
            return str(body["message"])
    return str(getattr(e, "message", None) or e)


def _broken_off(e: BaseException) -> bool:
    """Whether a connection error is a server that closed the connection mid-answer (not one never reached)."""
    seen: BaseException | None = e
    for _ in range(6):
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            return False
        # By name: the HTTP stack under ``openai`` (httpx, httpcore, h11) may be a vendored copy.
        if type(seen).__name__ == "RemoteProtocolError":
            return True
    return False


def connection_reason(e: BaseException) -> str:
    """Why a connection failed, in a few words ("connection refused", "host not found")."""
    seen: BaseException | None = e
    text = ""
    for _ in range(6):  # the reason sits a few causes down (httpx, httpcore, then the socket)
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            break
        text = str(seen) or text
    low = text.lower()
    if "refused" in low:
        return "connection refused"
    if "name or service not known" in low or "nodename nor servname" in low or "getaddrinfo" in low:
        return "host not found"
    if "timed out" in low or "timeout" in low:
        return "connection timed out"
    if "ssl" in low or "certificate" in low:
        return "TLS error"
    return " ".join(text.split())[:120] or "connection failed"
