"""A :class:`~backend.models.embeddings.TextEmbedder` over an OpenAI-compatible ``/v1/embeddings`` server.

OpenAI's embeddings, Text Embeddings Inference, Ollama, vLLM (``--task embed``) and llama.cpp
(``llama-server --embeddings --pooling mean``) all answer ``POST /v1/embeddings``; the ``openai``
client's ``client.embeddings.create(model=…, input=[…])`` speaks to each of them.

Configuration (arguments win over the environment, read by :mod:`backend.config`):

- ``CHUNKLAB_EMBEDDER_BASE_URL`` (else ``OPENAI_BASE_URL``; neither: OpenAI's API, which needs a key).
- ``CHUNKLAB_EMBEDDER_MODEL``: the served model's name; unset, the server's only model.
- ``CHUNKLAB_EMBEDDER_API_KEY`` (else ``OPENAI_API_KEY``): the bearer token, held by the HTTP
  client only (never in :class:`ModelInfo`, cache keys, ``repr``, logs or error messages).
- ``CHUNKLAB_EMBEDDER_TIMEOUT`` (default 60 s), ``CHUNKLAB_EMBEDDER_RETRIES`` (default 1),
  ``CHUNKLAB_EMBEDDER_CONCURRENCY`` (requests in flight, default 8, 1 to 64),
  ``CHUNKLAB_EMBEDDER_BATCH`` (texts per request, default 64, 1 to 2,048),
  ``CHUNKLAB_EMBEDDER_DIMENSIONS`` (the ``dimensions`` request field of OpenAI's
  text-embedding-3 models; unset: the model's own length).

Identity. Connecting asks the server for its models (``GET /models``, see
:meth:`~backend.models.openai_compat.Endpoint.discover`) and embeds one short probe text, which
gives the vectors' length and tells apart models served under one name
(:mod:`backend.models.probes`: infinity's listing holds an id only). The fingerprint that keys
cached vectors is ``ServedModel.fingerprint("embedder", dimension, dimensions, probe digest)``:
the served model, the vectors' length and which of the models seen under that name computed
the probe's vector, not the URL (the same model behind another URL shares its cached vectors;
another model, even under the same name, or the same one asked for shorter vectors, never
does). When a name has stood for more than one model, :attr:`RemoteEmbedder.note` says so in
one line (the CLI prints it on stderr). Every answer's ``model`` is
checked (:func:`~backend.models.openai_compat.check_answer_model`) and every row's length
against the one learned, before a vector is used or cached.

Requests. The texts go out in batches of ``batch`` texts, up to ``concurrency`` at once, read
back in order (:func:`~backend.models.openai_compat.in_order`); each request keeps the client's
retries and back-off. Progress is reported and cancellation checked after each answer. Rows come
back L2-normalized in float32, like the local :class:`~backend.models.embedder.Embedder`'s, and
in input order whatever order the server lists them in (each answer item carries its ``index``).

What stays local-only: the server's tokenizer is out of reach, so :meth:`RemoteEmbedder.input_keys`
is the texts' own bytes (equal texts, equal vectors), and ``info.context_length`` is what the
server's listing says, else None (the server truncates or refuses longer texts itself).

Heavy modules (``openai``, ``httpx``) load on first use.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from backend import config
from backend.errors import ModelError, ParameterError
from backend.models.openai_compat import (
    Endpoint,
    RemoteClient,
    ServedModel,
    Service,
    check_answer_model,
    in_order,
    whole_number,
)
from backend.models.probes import PROBE_TEXT, ProbeMatch, match_probe
from backend.models.types import ModelInfo, checked_texts
from backend.progress import Progress

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = [
    "REMOTE_EMBEDDER",
    "EMBEDDER_SERVICE",
    "RemoteEmbedder",
    "RemoteEmbedderSettings",
    "is_remote_embedder",
    "remote_embedder_settings",
    "connect_remote_embedder",
    "connected_remote_embedder",
]

log = logging.getLogger(__name__)

REMOTE_EMBEDDER = "remote"
"""The embedder spec (``--embedder remote``) that means this embedder, on the ``CHUNKLAB_EMBEDDER_*`` server."""

SPEED_SAFETY = 2.0  # a request waits this many times what the measured speed predicts (never below the setting)


def is_remote_embedder(spec: str | None) -> bool:
    """Whether an embedder spec asks for a remote embedder: ``remote`` (any case) or an http(s) URL."""
    if spec is None:
        return False
    text = spec.strip()
    return text.lower() == REMOTE_EMBEDDER or text.lower().startswith(("http://", "https://"))


EMBEDDER_SERVICE = Service(
    label="embeddings server",
    base_url=config.embedder_base_url,
    model=config.embedder_model,
    api_key=config.embedder_api_key,
    timeout=config.embedder_timeout,
    retries=config.embedder_retries,
    connect_timeout=5.0,
    timeout_setting="CHUNKLAB_EMBEDDER_TIMEOUT",
    key_setting="CHUNKLAB_EMBEDDER_API_KEY",
    model_hint="set CHUNKLAB_EMBEDDER_MODEL",
    missing=(
        "no embeddings server: set CHUNKLAB_EMBEDDER_BASE_URL (e.g. http://host:8080/v1), or "
        "CHUNKLAB_EMBEDDER_API_KEY for OpenAI's API"
    ),
    needs_url=False,
)
"""The remote embedder's settings: ``CHUNKLAB_EMBEDDER_*``, falling back to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``."""


@dataclass(frozen=True)
class RemoteEmbedderSettings:
    """Everything that decides which remote embedder a spec means (one connection per distinct value).

    Attributes:
        endpoint: The server, model, key (out of ``repr``), timeout and retries.
        dimensions: The ``dimensions`` request field (None: not sent).
        concurrency: Requests in flight at once.
        batch: Texts per request.
    """

    endpoint: Endpoint
    dimensions: int | None
    concurrency: int
    batch: int


def remote_embedder_settings(spec: str | None = REMOTE_EMBEDDER) -> RemoteEmbedderSettings:
    """The settings ``spec`` means: ``remote`` reads them all from the environment; a URL is the base URL.

    Raises:
        ModelError: no server configured, or a URL that is not http(s).
    """
    text = (spec or "").strip()
    base_url = None if text.lower() in ("", REMOTE_EMBEDDER) else text
    return RemoteEmbedderSettings(
        endpoint=Endpoint.resolve(EMBEDDER_SERVICE, base_url),
        dimensions=config.embedder_dimensions(),
        concurrency=config.embedder_concurrency(),
        batch=config.embedder_batch(),
    )


class RemoteEmbedder(RemoteClient):
    """Sentence embeddings from an OpenAI-compatible ``/embeddings`` endpoint (see the module docstring).

    Built as every :class:`~backend.models.openai_compat.RemoteClient` is, on the
    ``CHUNKLAB_EMBEDDER_*`` settings (:data:`EMBEDDER_SERVICE`). Creating one connects: it
    lists the server's models and embeds one short text, so a wrong URL, key or model name
    fails here, in one line, rather than in the middle of a job.

    Attributes:
        info: ``kind="remote-embedder"``, ``device``/``dtype`` ``"remote"``, ``source`` the base
            URL (or ``"the OpenAI API"``), ``fingerprint`` the served model's (see the module docstring).
        model: The served model's name (sent with every request).
        concurrency: Requests in flight at once.
        batch: Texts per request.
        dimensions: The ``dimensions`` request field, or None.
        probe: Which of the models seen under the served name computed the probe text's vector
            (:mod:`backend.models.probes`).
        note: One line when the served name has stood for more than one model in this data
            directory (show it where the embedder is named), else None.
    """

    service = EMBEDDER_SERVICE

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
        concurrency: int | None = None,
        batch: int | None = None,
        dimensions: int | None = None,
    ) -> None:
        """Connect to the server (the settings as :class:`~backend.models.openai_compat.RemoteClient` takes them).

        Args:
            concurrency: Requests in flight at once, 1 to 64 (default ``CHUNKLAB_EMBEDDER_CONCURRENCY`` or 8).
            batch: Texts per request, 1 to 2,048 (default ``CHUNKLAB_EMBEDDER_BATCH`` or 64).
            dimensions: The ``dimensions`` request field (default ``CHUNKLAB_EMBEDDER_DIMENSIONS``;
                None: not sent, the model's own length).

        Raises:
            ModelError: unreachable server, rejected key, unknown model, no server configured,
                or an answer that is not an embedding.
            ParameterError: ``concurrency``, ``batch`` or ``dimensions`` out of range.
        """
        super().__init__(base_url, model, api_key, timeout=timeout, retries=retries)
        self.concurrency = whole_number("concurrency", concurrency, config.embedder_concurrency, config.MAX_REMOTE_CONCURRENCY)
        self.batch = whole_number("batch", batch, config.embedder_batch, config.MAX_EMBEDDER_BATCH)
        self.dimensions = dimensions if dimensions is not None else config.embedder_dimensions()
        if self.dimensions is not None and (isinstance(self.dimensions, bool) or not isinstance(self.dimensions, int) or self.dimensions < 1):
            raise ParameterError(f"dimensions ({self.dimensions!r}) must be a whole number of at least 1")
        endpoint = self.endpoint()
        self._endpoint = endpoint
        self._client: OpenAI = endpoint.client()
        self._dimension = 0
        self._speed: tuple[float, float] = (0.0, 0.0)  # characters and seconds of the answers so far
        self._probe_only = False  # whether the speed is still the connect-time probe's
        self._speed_lock = threading.Lock()
        try:
            self._served: ServedModel = endpoint.discover(self._client)
            self.model = self._served.name
            probe = self._embed_batch([PROBE_TEXT])[0]
            self._dimension = int(probe.shape[0])
        except ModelError:
            self._client.close()  # a failed connection keeps no pooled sockets
            raise
        if self.dimensions is not None and self._dimension != self.dimensions:
            raise ModelError(
                f"{endpoint.where} answered {self._dimension}-dimensional vectors when asked for "
                f"{self.dimensions} (CHUNKLAB_EMBEDDER_DIMENSIONS): model {self.model!r} cannot shorten its vectors"
            )
        listed = self._served.fingerprint("embedder", self._dimension, self.dimensions or "")
        self.probe: ProbeMatch = match_probe(listed, probe)
        self.note: str | None = _probe_note(endpoint.where, self.model, self.probe)
        self.info = ModelInfo(
            name=self.model,
            source=endpoint.base_url or "the OpenAI API",
            kind="remote-embedder",
            parameters=0,
            device="remote",
            dtype="remote",
            fingerprint=self._served.fingerprint("embedder", self._dimension, self.dimensions or "", self.probe.digest),
            context_length=self._served.context_length,
        )
        log.info("connected to %s: %s, %d dimensions", endpoint.where, self.model, self._dimension)
        if self.note is not None:
            log.info("%s", self.note)

    def __repr__(self) -> str:
        return f"RemoteEmbedder({self.info.source!r}, model={self.model!r}, dim={self._dimension})"

    @property
    def dimension(self) -> int:
        """Length of each embedding vector (learned at connect time)."""
        return self._dimension

    @property
    def where(self) -> str:
        """How messages name the server: ``"embeddings server at <url>"``, or ``"the OpenAI API"``."""
        return self._endpoint.where

    def embed(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: Progress | None = None
    ) -> np.ndarray:
        """Embed ``texts`` on the server.

        Args:
            texts: The texts, in order.
            batch_size: Texts per request (default :attr:`batch`).
            progress: Called as ``progress(done, total)`` after each answer (read in order); may
                raise :class:`~backend.errors.Cancelled`, which stops sending and waits for the
                requests in flight.

        Returns:
            A float32 array of shape ``(len(texts), dimension)`` with L2-normalized rows.

        Raises:
            ParameterError: ``texts`` is a single string or holds a non-string, or ``batch_size`` below 1.
            ModelError: the server fails (after its retries), answers another model, or sends
                vectors of another length or not finite.
        """
        items = checked_texts(texts)
        size = self.batch if batch_size is None else batch_size
        if size < 1:
            raise ParameterError(f"batch_size ({size}) must be at least 1")
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        if not items:
            return out
        batches = [items[lo : lo + size] for lo in range(0, len(items), size)]
        done = 0
        check = progress.check if isinstance(progress, Progress) else None

        def request(batch: list[str]) -> np.ndarray:
            if check is not None:
                check()  # a cancelled run sends nothing more (requests in flight are still read)
            return self._embed_batch(batch)

        def each(k: int, rows: np.ndarray) -> None:
            nonlocal done
            lo = k * size
            out[lo : lo + rows.shape[0]] = rows
            done += rows.shape[0]
            if progress is not None:
                progress(done, len(items))

        in_order(request, batches, each, self.concurrency, name="chunklab-embed")
        return out

    def input_keys(self, texts: Sequence[str]) -> list[bytes]:
        """What the server reads of each text, as far as can be known here: its UTF-8 bytes.

        The server's tokenizer (and its truncation) is out of reach, so two texts share a key
        only when they are equal (the local embedder also merges texts that truncate alike).
        """
        return [t.encode("utf-8") for t in texts]

    def close(self) -> None:
        """Close the HTTP client (its pooled connections)."""
        self._client.close()

    def _embed_batch(self, batch: Sequence[str]) -> np.ndarray:
        """One ``/embeddings`` request: its rows, checked and L2-normalized, in ``batch`` order."""
        what = f"an embeddings request ({len(batch)} text{'' if len(batch) == 1 else 's'})"
        kwargs: dict[str, Any] = {"model": self.model, "input": list(batch)}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        chars = sum(len(t) for t in batch)
        timeout, note = self._sized_timeout(chars)
        timed = dataclasses.replace(self._endpoint, timeout=timeout, timeout_note=note)
        started = time.perf_counter()
        response = timed.call(
            what, self._client.embeddings.create, timeout=self._endpoint.request_timeout(timeout), **kwargs
        )
        self._learn(chars, time.perf_counter() - started)
        check_answer_model(self._served, getattr(response, "model", None), self.where, what)
        try:
            return self._read(batch, response, what)
        except (AttributeError, TypeError, ValueError) as e:  # fields missing or of the wrong type
            message = f"{self.where} sent a malformed answer to {what} ({self._endpoint.scrub(f'{type(e).__name__}: {e}')})"
        raise ModelError(message)

    def _sized_timeout(self, chars: int) -> tuple[float, str]:
        """Seconds to wait for a request of ``chars`` characters, and what the late-answer line says of them.

        A server answers the requests in flight together or in turn (llama.cpp with one thread
        took 27 s for 64 sentences alone, and over 60 s for each of 8 at once), so a request may
        wait for the ``concurrency`` requests sent with it: the timeout is
        :data:`SPEED_SAFETY` times the measured seconds per character of that much text, rounded
        up, and never below the configured ``CHUNKLAB_EMBEDDER_TIMEOUT``. The speed is learned
        from every answer (the connect-time probe first: one short text, whose fixed cost makes
        it a slow, safe first estimate).
        """
        floor = self._endpoint.timeout
        with self._speed_lock:
            measured_chars, measured_s = self._speed
        if measured_s <= 0 or measured_chars <= 0:
            return floor, ""
        per_char = measured_s / measured_chars
        ahead = chars * max(1, min(self.concurrency, config.MAX_REMOTE_CONCURRENCY))
        predicted = SPEED_SAFETY * per_char * ahead
        seconds = floor if predicted <= floor else float(math.ceil(predicted))
        return seconds, f"measured {measured_chars / measured_s:,.0f} characters/s, {self.concurrency} in flight; "

    def _learn(self, chars: int, seconds: float) -> None:
        """Add one answer to the measured speed (sums of recent answers: the newest weigh most).

        The connect-time probe's speed stands only until the first real answer replaces it:
        its fixed costs (a new connection, a cold server) make it far slower than the server is.
        """
        with self._speed_lock:
            total_chars, total_s = (0.0, 0.0) if self._dimension == 0 or self._probe_only else self._speed
            self._probe_only = self._dimension == 0
            if total_chars > 200_000:  # keep it recent: halve the history
                total_chars, total_s = total_chars / 2, total_s / 2
            self._speed = (total_chars + max(chars, 1), total_s + max(seconds, 0.0))

    def _read(self, batch: Sequence[str], response: Any, what: str) -> np.ndarray:
        """The rows of an embeddings answer, by each item's ``index``."""
        data = list(getattr(response, "data", None) or [])
        if len(data) != len(batch):
            raise ModelError(f"{self.where} answered {len(data)} embeddings for {len(batch)} texts")
        order = [int(getattr(d, "index", k)) for k, d in enumerate(data)]
        if sorted(order) != list(range(len(batch))):
            raise ModelError(f"{self.where} answered embeddings with indices {order[:8]} for {len(batch)} texts")
        rows = np.asarray([data[k].embedding for k in np.argsort(order)], dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] == 0:
            raise ModelError(f"{self.where} sent a malformed answer to {what} (items without a vector of numbers)")
        if self._dimension and rows.shape[1] != self._dimension:
            raise ModelError(
                f"{self.where} answered {rows.shape[1]}-dimensional vectors where model {self.model!r} "
                f"gave {self._dimension} at connect time: did the server change models? Reconnect"
            )
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        if not np.all(np.isfinite(rows)) or not np.all(norms > 0):
            raise ModelError(f"{self.where} answered an embedding that is zero or not finite")
        return (rows / norms).astype(np.float32)


def _probe_note(where: str, model: str, probe: ProbeMatch) -> str | None:
    """What to tell a user whose server's name has stood for more than one model here; None when it has not."""
    if probe.new_model:
        return (
            f"{where} serves {model!r}, but its vectors are not those of the {model!r} seen here before (probe "
            f"cosine {probe.cosine:.4f}): another model under the same name, whose vectors and chunks are cached apart"
        )
    if probe.seen > 1:
        return (
            f"{where} serves {model!r} as model {probe.index + 1} of {probe.seen} seen here under that name "
            "(told apart by their vectors): its own cached vectors and chunks are used"
        )
    return None


# --- one connection per settings and process ------------------------------------------------------

_lock = threading.Lock()  # guards the two dicts only, never held over the network
_connected: dict[RemoteEmbedderSettings, RemoteEmbedder] = {}
_connecting: dict[RemoteEmbedderSettings, threading.Lock] = {}  # one connection attempt at a time per settings


def connect_remote_embedder(spec: str | None = REMOTE_EMBEDDER) -> RemoteEmbedder:
    """The remote embedder ``spec`` means, connected once per process and settings (thread-safe).

    Args:
        spec: ``"remote"`` (the ``CHUNKLAB_EMBEDDER_*`` settings) or a base URL (the rest from them).

    Raises:
        ModelError: see :class:`RemoteEmbedder`.
    """
    settings = remote_embedder_settings(spec)
    with _lock:
        hit = _connected.get(settings)
        attempt = _connecting.setdefault(settings, threading.Lock())
    if hit is not None:
        return hit
    # A page asking for the name of a connected embedder must not wait for a slow server.
    with attempt:
        with _lock:
            hit = _connected.get(settings)
        if hit is None:
            e = settings.endpoint
            hit = RemoteEmbedder(
                e.base_url, e.model, e.api_key, timeout=e.timeout, retries=e.retries,
                concurrency=settings.concurrency, batch=settings.batch, dimensions=settings.dimensions,
            )
            with _lock:
                _connected[settings] = hit
        return hit


def connected_remote_embedder(spec: str | None = REMOTE_EMBEDDER) -> RemoteEmbedder | None:
    """The remote embedder ``spec`` means if this process has connected to it already (never connects)."""
    try:
        settings = remote_embedder_settings(spec)
    except ModelError:
        return None
    with _lock:
        return _connected.get(settings)
