"""The one client layer for OpenAI-compatible APIs (OpenAI, vLLM, llama.cpp, Ollama…), through ``openai``.

Chat (:mod:`backend.models.chat`) and remote scoring (:mod:`backend.models.remote`) talk to the
same kind of server, so what they share is written once here:

- the settings of one connection, arguments first, then the environment (:meth:`Endpoint.resolve`
  with a :class:`Service` naming which :mod:`backend.config` readers and hints apply);
- building the ``openai.OpenAI`` client: base URL, bearer token, timeouts, retries;
- the retry policy, which is the ``openai`` client's own (``max_retries``) rather than a copy
  of it: connection errors, timeouts, 408, 409, 429 and 5xx are retried after 0.5 s, 1 s, 2 s …
  (doubling, at most 8 s, minus up to 25 % jitter), or after the server's ``Retry-After``;
  a 401 is never retried;
- discovering the served model (``GET /models``) and its context length;
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

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from backend.errors import ModelError

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = [
    "Service",
    "Endpoint",
    "ServedModel",
    "check_base_url",
    "scrub",
    "error_text",
    "connection_reason",
]

_T = TypeVar("_T")
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


@dataclass(frozen=True)
class ServedModel:
    """A model a server serves: its name and, when the server says, its context length in tokens."""

    name: str
    context_length: int | None = None


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
    """

    service: Service = field(repr=False)
    base_url: str | None
    model: str | None
    api_key: str | None = field(repr=False)
    timeout: float
    retries: int

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

    def describe(self, e: BaseException, what: str) -> str:
        """A one-line, key-free account of an ``openai`` client error (or a cut JSON answer) met during ``what``."""
        import openai

        where = self.where
        if isinstance(e, json.JSONDecodeError):
            return f"{where} sent an answer to {what} that is not complete JSON ({self.scrub(str(e))})"
        if isinstance(e, openai.APITimeoutError):
            return f"{where} did not answer {what} within {self.timeout:g}s ({self.service.timeout_setting})"
        if isinstance(e, openai.APIConnectionError):
            if _broken_off(e):
                return f"{where} closed the connection in the middle of {what} ({self.scrub(connection_reason(e))})"
            return f"{where} is unreachable ({self.scrub(connection_reason(e))})"
        if isinstance(e, openai.AuthenticationError):
            return f"{where} rejected the API key (HTTP {e.status_code}); check {self.service.key_setting}"
        if isinstance(e, openai.NotFoundError):
            hint = "" if not self.base_url or self.base_url.endswith("/v1") else " (OpenAI-compatible URLs usually end in /v1)"
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

    def discover(self, client: OpenAI) -> ServedModel:
        """The model to use, from ``GET /models``: the named one (checked), else the only one served.

        A server without ``/models`` (HTTP 404) is trusted to serve the named model.

        Raises:
            ModelError: the server fails, serves no model or several (and none was named), or
                not the named one.
        """
        import openai

        name = self.model
        message = None
        try:
            page = client.models.list()
        except openai.NotFoundError:
            if name is not None:
                return ServedModel(name)
            message = f"{self.where} does not list its models: {self.service.model_hint}"
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
        elif ids and name not in ids:
            raise ModelError(f"{self.where} has no model {name!r} (it serves: {', '.join(ids[:5])})")
        chosen = next((m for m in models if m.id == name), None)
        extra = (getattr(chosen, "model_extra", None) or {}) if chosen is not None else {}
        length = extra.get("max_model_len") or extra.get("context_length")
        return ServedModel(name, int(length) if isinstance(length, (int, float)) and length > 0 else None)


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
