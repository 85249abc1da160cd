"""hub_reachable: one TCP probe of HF_ENDPOINT, shared by the LM and embedder loaders."""

from __future__ import annotations

import socket

from backend.models.hub import hub_reachable


def test_a_listening_endpoint_is_reachable_and_a_closed_one_is_not(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        assert hub_reachable(timeout=2.0) is True
    # The same port once closed: refused at once, well inside the probe's time.
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert hub_reachable(timeout=2.0) is False
