"""The Hugging Face hub, only where a model is given by hub id: is it reachable right now?

Both loaders (:mod:`backend.models.lm`, :mod:`backend.models.embedder`) probe before asking the
hub client, so an offline machine fails in seconds with one line instead of stalling in the
client's retries. Nothing here runs for the bundled models or a local path.
"""

from __future__ import annotations

import socket
from urllib.parse import urlparse

from backend.config import hf_endpoint

__all__ = ["PROBE_SECONDS", "hub_reachable"]

PROBE_SECONDS = 3.0


def hub_reachable(timeout: float = PROBE_SECONDS) -> bool:
    """Whether the hub's host (``HF_ENDPOINT``) accepts a TCP connection within ``timeout`` seconds."""
    url = urlparse(hf_endpoint())
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
