"""A tiny OpenAI-compatible chat server that answers from a script, for client and CLI tests.

Each ``POST /v1/chat/completions`` takes the next entry of ``failures`` until none are left,
then answers with ``reply(messages)``. An entry is an HTTP status (answered with an
OpenAI-style error body), ``"slow"`` (the right answer, but only after ``slow_seconds``: past
a client's timeout), ``"truncated"`` (HTTP 200 whose JSON body is cut in half, its
``Content-Length`` matching what is sent) or ``"cut"`` (the whole body announced, half of it
sent, then the connection closed). Every request is recorded (path, headers, JSON body), so tests can
count attempts and check what was sent. ``GET /v1/models`` lists one model (``model``), or the
given listing (``models``: ids with their facts, as vLLM and llama.cpp list them), or answers 404
(``models=None`` with ``list_models=False``: a server without the endpoint).

Like llama.cpp, the server may ignore the request's ``model``: ``answer_model`` is the ``model``
field of every answer (default: the served ``model``; ``"echo"``: the name asked for, as recent
llama.cpp builds do). ``delay`` makes every answer take that long and ``usage`` reports its token
counts, so a client can measure the server's speed. A speed probe (the client's tiny request of
:data:`backend.models.chat.PROBE_MESSAGES`) is answered "OK" without taking a scripted failure or
calling ``reply``, and is recorded apart (``probes``), so a test counts the work requests.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from backend.models.chat import PROBE_MESSAGES

__all__ = ["ScriptedServer", "start_scripted_server"]


@dataclass
class ScriptedServer:
    """A running scripted server (use as a context manager)."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: Any = field(default=None, repr=False)
    _thread: Any = field(default=None, repr=False)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The recorded chat requests, in order."""
        return [r for r in self.requests if r["path"].endswith("/chat/completions") and not _is_probe(r)]

    @property
    def probes(self) -> list[dict[str, Any]]:
        """The recorded speed probes of a client (see the module docstring), in order."""
        return [r for r in self.requests if r["path"].endswith("/chat/completions") and _is_probe(r)]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_probe(request: dict[str, Any]) -> bool:
    """Whether a recorded request is a client's speed probe."""
    body = request.get("body") or {}
    return body.get("messages") == [dict(m) for m in PROBE_MESSAGES]


def start_scripted_server(
    reply: Callable[[list[dict[str, str]]], str] = lambda messages: "ok",
    failures: list[int | str] | None = None,
    model: str = "scripted-model",
    api_key: str | None = None,
    retry_after: str | None = None,
    slow_seconds: float = 3.0,
    *,
    models: Sequence[dict[str, Any]] | None = None,
    list_models: bool = True,
    answer_model: str | None = None,
    delay: float | Callable[[dict[str, Any]], float] = 0.0,
    usage: Callable[[list[dict[str, str]], str], tuple[int, int]] | None = None,
    port: int = 0,
) -> ScriptedServer:
    """Start a server on a free local port (see the module docstring).

    Args:
        reply: The assistant's answer to the request's messages.
        failures: What to answer first, one per request (e.g. ``[429, 500, "slow", "truncated", "cut"]``).
        model: The one model it serves.
        api_key: A bearer token to require (401 otherwise, echoing the key given like OpenAI).
        retry_after: A ``Retry-After`` header value to send with failures.
        slow_seconds: How long a ``"slow"`` answer waits.
        models: The ``/models`` listing's entries (``{"id": …, "meta": {…}}``…); None: ``model`` alone.
        list_models: False: ``GET /models`` answers 404 (with ``models`` None).
        answer_model: The ``model`` of every answer, whatever was asked (None: ``model``; ``"echo"``:
            the request's ``model``).
        delay: Seconds every answer (probes included) takes, or a function of the request's JSON body.
        usage: ``(prompt_tokens, completion_tokens)`` of an answer, from the messages and the reply
            (None: zeros, like a server that does not count).
        port: The port to bind (0: a free one); another server on a closed one's port stands for
            a server restarted with another model behind the same URL.
    """
    bad = [f for f in failures or [] if not isinstance(f, int) and f not in ("slow", "truncated", "cut")]
    if bad:
        raise ValueError(f"failures must be HTTP statuses, 'slow', 'truncated' or 'cut', got {bad!r}")
    pending = list(failures or [])
    lock = threading.Lock()
    state = ScriptedServer(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _send(
            self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None, fault: str | None = None
        ) -> None:
            data = json.dumps(body).encode("utf-8")
            length = len(data)
            if fault in ("truncated", "cut"):
                data = data[: len(data) // 2]
                if fault == "truncated":
                    length = len(data)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(length))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            if fault == "cut":
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        def _authorized(self) -> bool:
            if api_key is None:
                return True
            given = self.headers.get("Authorization", "")
            if given == f"Bearer {api_key}":
                return True
            shown = given.removeprefix("Bearer ")
            self._send(401, {"error": {"message": f"Incorrect API key provided: {shown}.", "type": "invalid_request_error"}})
            return False

        def do_GET(self) -> None:  # noqa: N802
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": None, "t": time.monotonic()})
            if not self._authorized():
                return
            if models is None and not list_models:
                self._send(404, {"error": {"message": "File Not Found", "type": "not_found_error"}})
                return
            listing = [{"id": model, "object": "model"}] if models is None else [dict(m) for m in models]
            self._send(200, {"object": "list", "data": listing})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body, "t": time.monotonic()})
            if not self._authorized():
                return
            wait = delay(body) if callable(delay) else delay
            if wait:
                time.sleep(wait)
            named = answer_model or model
            if answer_model == "echo":
                named = str(body.get("model") or model)
            messages = body.get("messages") or []
            if messages == [dict(m) for m in PROBE_MESSAGES]:
                self._answer("OK", named, messages)
                return
            with lock:
                status = pending.pop(0) if pending else None
            if isinstance(status, int):
                headers = {"Retry-After": retry_after} if retry_after else None
                self._send(status, {"error": {"message": f"scripted failure {status}", "type": "server_error"}}, headers)
                return
            if status == "slow":
                time.sleep(slow_seconds)
            self._answer(reply(messages), named, messages, fault=status if isinstance(status, str) else None)

        def _answer(self, content: str, named: str, messages: list[dict[str, str]], fault: str | None = None) -> None:
            prompt_tokens, completion_tokens = usage(messages, content) if usage is not None else (0, 0)
            try:
                self._send(200, {
                    "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": named,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens},
                }, fault=fault)
            except OSError:
                pass  # the client gave up (a "slow" answer past its timeout)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="scripted-chat-server", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    state.url = f"http://{host}:{port}/v1"
    state._server, state._thread = server, thread
    return state


if __name__ == "__main__":  # a manual run: python -m tests.support.scripted_chat_server
    with start_scripted_server() as s:
        print(s.url)
        s._thread.join()
