"""A small OpenAI-compatible embeddings server whose vectors come from the bundled all-MiniLM-L6-v2.

Chunk Lab's own test server for :class:`backend.models.remote_embedder.RemoteEmbedder`: it
speaks the two routes an embeddings client uses, the way OpenAI, vLLM and llama.cpp answer them,
so the remote path runs end to end (HTTP, the ``openai`` client, JSON) against vectors that the
local path can be checked against:

- ``GET /v1/models``: the listing (``models``, default the bundled model's name); ``listed=False``
  answers 404 instead, like servers without the route; ``prefix=""`` serves both routes at the
  root (``/models``, ``/embeddings``), as infinity does unless started with ``--url-prefix /v1``;
- ``POST /v1/embeddings``: ``input`` (a string or a list of strings) and ``model``; vectors from
  :func:`backend.models.embedder.load_embedder` on the CPU (the local path's model and weights),
  sent as base64 of little-endian float32 when the request asks for ``encoding_format: "base64"``
  (the ``openai`` client's default, as OpenAI, vLLM and llama.cpp answer it; ``base64=False``
  answers JSON floats whatever was asked, as servers without it do), else as JSON floats (a
  float32 is exact in JSON), in a shuffled order of ``data`` items
  (each with its ``index``, which the client must follow); ``dimensions`` (when
  ``shortens=True``) keeps the first ``dimensions`` values, renormalized, as OpenAI's
  text-embedding-3 models do; ``pooling="cls"`` embeds with the same weights pooled on the first
  token instead of the mean (another model, as a MiniLM copy re-pooled would be, served under the
  same name); a ``model`` the server does not list gets HTTP 404 — unless
  ``answer_model`` is set: then every request is answered, its ``model`` field ignored and the
  answer naming ``answer_model`` (llama.cpp's habit);
- ``Authorization: Bearer <key>`` checked when the server has a key (HTTP 401, echoing the key);
- ``delay``: seconds each POST waits before it is answered (requests run on a thread each, so
  concurrent clients overlap their waits); ``memo``: a text embedded before is answered from
  memory, so a benchmark measures the client and the delay rather than this machine's CPU;
  ``peak_in_flight`` counts the most POSTs answered at once, ``posts`` and ``texts`` what came in;
- faults (:meth:`RunningEmbeddingServer.inject`): ``"500"`` (HTTP 500), ``"malformed"`` (HTTP 200
  whose items have no ``embedding``), ``"truncated"`` (HTTP 200 whose JSON is cut in half) and
  ``"dimension"`` (vectors one value shorter than the model's).

Use it in-process (``with start_embedding_server() as server: server.url``) or as a process::

    python -m tests.support.embedding_server --port 8766 --delay 0.05
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

import numpy as np

from backend.models.embedder import load_embedder
from tests.support.openai_handler import ApiError, JsonHandler, stop_server

__all__ = ["RunningEmbeddingServer", "start_embedding_server", "main", "EMBEDDING_FAULTS"]

EMBEDDING_FAULTS = (None, "500", "malformed", "truncated", "dimension")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], **options: Any) -> None:
        super().__init__(address, _Handler)
        self.embedder = load_embedder("minilm", "cpu")
        self.models: list[str] = list(options["models"] or [self.embedder.info.name])
        self.listed: bool = options["listed"]
        self.answer_model: str | None = options["answer_model"]
        self.api_key: str | None = options["api_key"]
        self.delay: float = options["delay"]
        self.memo: bool = options["memo"]
        self.shortens: bool = options["shortens"]
        self.base64: bool = options["base64"]
        self.prefix: str = options["prefix"]
        self.pooling: str = options["pooling"]
        self.fault: str | None = None
        self.lock = threading.Lock()
        self.vectors: dict[str, np.ndarray] = {}
        self.in_flight = self.peak_in_flight = self.posts = self.texts = 0


class _Handler(JsonHandler):
    server: _Server  # type: ignore[assignment]

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and the client's
        # delayed ACK hold the body back ~40 ms, a wait no real server adds (it would skew the bench).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        try:
            self.authorize()
            if self.path.rstrip("/") != self.server.prefix + "/models" or not self.server.listed:
                raise ApiError(404, f"no route {self.path}", "not_found_error")
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "chunklab-tests"} for m in self.server.models]
            self.send_json(200, {"object": "list", "data": data})
        except ApiError as e:
            self.send_error_answer(e)

    def do_POST(self) -> None:  # noqa: N802
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
            server.posts += 1
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if server.delay > 0:
                time.sleep(server.delay)
            self.authorize()
            if self.path.rstrip("/") != server.prefix + "/embeddings":
                raise ApiError(404, f"no route {self.path}", "not_found_error")
            if server.fault == "500":
                raise ApiError(500, "the embeddings server crashed (injected fault)", "server_error")
            self.send_json(200, self._embeddings(json.loads(raw or b"{}")))
        except ApiError as e:
            self.send_error_answer(e)
        except OSError:
            pass  # the client gave up
        finally:
            with server.lock:
                server.in_flight -= 1

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        server = self.server
        model = body.get("model")
        if server.answer_model is None and model not in server.models:
            raise ApiError(404, f"The model `{model}` does not exist.", "not_found_error")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise ApiError(400, "'input' must be a string or a non-empty list of strings")
        with server.lock:
            server.texts += len(texts)
        rows = self._vectors(texts)
        dimensions = body.get("dimensions")
        if server.shortens and isinstance(dimensions, int) and 0 < dimensions < rows.shape[1]:
            rows = rows[:, :dimensions].astype(np.float64)
            rows = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
        if server.fault == "dimension":
            rows = rows[:, :-1]
        packed = server.base64 and body.get("encoding_format") == "base64"
        items = [
            {"object": "embedding", "index": i,
             "embedding": base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") if packed else [float(x) for x in row]}
            for i, row in enumerate(rows)
        ]
        if server.fault == "malformed":
            items = [{"object": "embedding", "index": i} for i in range(len(texts))]
        random.Random(len(texts)).shuffle(items)  # the client must read each item's index
        return {
            "object": "list", "data": items, "model": server.answer_model or model,
            "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": sum(len(t.split()) for t in texts)},
        }

    def _vectors(self, texts: list[str]) -> np.ndarray:
        server = self.server
        if server.pooling == "cls":
            return _cls_pooled(server.embedder, texts)
        if not server.memo:
            return server.embedder.embed(texts)
        with server.lock:
            missing = list(dict.fromkeys(t for t in texts if t not in server.vectors))
        if missing:
            rows = server.embedder.embed(missing)
            with server.lock:
                server.vectors.update(zip(missing, rows))
        with server.lock:
            return np.stack([server.vectors[t] for t in texts])


def _cls_pooled(embedder: Any, texts: list[str]) -> np.ndarray:
    """The embedder's weights pooled on each text's first token (``[CLS]``), L2-normalized."""
    tokens = embedder._model.encode(texts, output_value="token_embeddings", convert_to_numpy=False)
    rows = np.stack([t[0].float().cpu().numpy() for t in tokens]).astype(np.float64)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@dataclass
class RunningEmbeddingServer:
    """A server running in a background thread of this process."""

    url: str
    _server: _Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def model(self) -> str:
        """The first listed model's name (the one a client that names none gets)."""
        return self._server.models[0]

    @property
    def posts(self) -> int:
        """POST requests received so far."""
        return self._server.posts

    @property
    def texts(self) -> int:
        """Texts embedded so far (the connect-time probe included)."""
        return self._server.texts

    @property
    def peak_in_flight(self) -> int:
        """The most POST requests that were being answered at once."""
        return self._server.peak_in_flight

    def inject(self, fault: str | None) -> None:
        """Answer every POST from now on with ``fault`` (see the module docstring); None: answer normally."""
        if fault not in EMBEDDING_FAULTS:
            raise ValueError(f"fault must be one of {EMBEDDING_FAULTS}, got {fault!r}")
        self._server.fault = fault

    def set_answer_model(self, name: str | None) -> None:
        """From now on answer every request under ``name``, whatever it asked for (None: the name asked for)."""
        self._server.answer_model = name

    def set_delay(self, seconds: float) -> None:
        """Wait ``seconds`` before answering each POST from now on."""
        self._server.delay = seconds

    def reset_counts(self) -> None:
        """Count POSTs, texts and their peak again from zero."""
        with self._server.lock:
            self._server.posts = self._server.texts = 0
            self._server.peak_in_flight = self._server.in_flight

    def close(self) -> None:
        """Stop serving, wait for the answers still being computed, and free the port (see :func:`stop_server`)."""
        stop_server(self._server, self._thread)

    def __enter__(self) -> RunningEmbeddingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_embedding_server(
    *,
    models: list[str] | None = None,
    listed: bool = True,
    answer_model: str | None = None,
    api_key: str | None = None,
    delay: float = 0.0,
    memo: bool = False,
    shortens: bool = False,
    base64: bool = True,
    prefix: str = "/v1",
    pooling: str = "mean",
    host: str = "127.0.0.1",
    port: int = 0,
) -> RunningEmbeddingServer:
    """Serve the bundled MiniLM's embeddings on ``host:port`` (0: a free port) in a thread.

    Args:
        models: The names ``/v1/models`` lists (default: the bundled model's name).
        listed: False answers ``/v1/models`` with 404.
        answer_model: Answer every request under this model name, whatever it asked for (llama.cpp).
        api_key: The bearer token clients must send; None accepts any.
        delay: Seconds each POST waits before it is answered.
        memo: Answer texts embedded before from memory.
        shortens: Honour the request's ``dimensions`` (text-embedding-3 style); False ignores it.
        base64: Honour ``encoding_format: "base64"``; False always answers JSON floats.
        prefix: Where the routes are: ``/v1`` (``/v1/models``, ``/v1/embeddings``), or ``""`` at the
            root, as infinity serves by default; ``url`` ends with it.
        pooling: ``mean`` (the bundled model's own) or ``cls`` (the same weights, another model).
    """
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
    if not delay >= 0:
        raise ValueError(f"delay ({delay!r}) must be 0 or more seconds")
    server = _Server((host, port), models=models, listed=listed, answer_model=answer_model, api_key=api_key,
                     delay=delay, memo=memo, shortens=shortens, base64=base64, prefix=prefix, pooling=pooling)
    thread = threading.Thread(target=server.serve_forever, name="embedding-server", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return RunningEmbeddingServer(url=f"http://{bound_host}:{bound_port}{prefix}", _server=server, _thread=thread)


def main(argv: list[str] | None = None) -> None:
    """Run the server in the foreground until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", default=None, help="require this bearer token")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each POST waits before its answer")
    parser.add_argument("--answer-model", default=None, help="answer every request under this model name")
    args = parser.parse_args(argv)
    server = start_embedding_server(api_key=args.api_key, host=args.host, port=args.port, delay=args.delay,
                                    answer_model=args.answer_model, memo=True)
    print(f"serving {server.model} embeddings at {server.url}", flush=True)
    try:
        server._thread.join()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
