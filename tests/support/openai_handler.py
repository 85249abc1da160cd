"""What Chunk Lab's OpenAI-compatible test servers share: an API error and a JSON request handler.

``tests/support/openai_compat_server.py`` (completions and chat from SmolLM2) and
``tests/support/embedding_server.py`` (embeddings from MiniLM) answer the way OpenAI's API and
vLLM do: JSON bodies with ``Content-Length``, errors as ``{"error": {"message", "type", "param",
"code"}}``, a bearer token checked when the server has one (a wrong one is echoed in the 401
message on purpose, as OpenAI does: the client must not repeat it), and the ``"truncated"``
fault (HTTP 200 whose JSON body is cut in half). The server class a handler serves must have
``api_key`` and ``fault`` attributes.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ApiError", "JsonHandler", "stop_server"]


class ApiError(Exception):
    """An error answer: HTTP ``status`` with an OpenAI-style body of ``kind``."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON, errors and bearer-token checks as OpenAI's API does."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # quiet: tests read errors from the answers

    def send_json(self, status: int, body: dict[str, Any]) -> None:
        """Send ``body`` with ``status`` (cut in half under the ``"truncated"`` fault, for a POST's 200)."""
        data = json.dumps(body).encode("utf-8")
        if status == 200 and self.command == "POST" and getattr(self.server, "fault", None) == "truncated":
            data = data[: len(data) // 2]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_answer(self, e: ApiError) -> None:
        """Send ``e`` as OpenAI's error body."""
        self.send_json(e.status, {"error": {"message": str(e), "type": e.kind, "param": None, "code": e.status}})

    def authorize(self) -> None:
        """Raise a 401 :class:`ApiError` unless the request carries the server's key (no key: anything goes)."""
        key = getattr(self.server, "api_key", None)
        if not key:
            return
        given = self.headers.get("Authorization", "")
        if given != f"Bearer {key}":
            shown = given.removeprefix("Bearer ") or "(none)"
            raise ApiError(401, f"Incorrect API key provided: {shown}.", "authentication_error")


def stop_server(server: ThreadingHTTPServer, thread: threading.Thread, *, wait_s: float = 30.0) -> None:
    """Stop ``server``, wait for the answers still being computed (its ``in_flight``, at most ``wait_s``), free the port.

    A request whose client gave up (a timeout test) is still being answered on its own daemon
    thread; left running, it would compute with torch while the interpreter exits, which aborts
    the process ("terminate called without an active exception", exit 134).
    """
    server.shutdown()
    deadline = time.monotonic() + wait_s
    while getattr(server, "in_flight", 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.server_close()
    thread.join(timeout=5)
