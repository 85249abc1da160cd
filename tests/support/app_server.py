"""A real Chunk Lab server for the browser tests: ``streamlit run app.py`` on a free port, as a user starts it.

No ``--server.fileWatcherType`` or ``--browser.gatherUsageStats`` flag: ``.streamlit/config.toml`` sets
both, as for users, so the browser tests see what its settings make the browser fetch.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT

__all__ = ["free_port", "serve_app"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_app(log_path: Path, env: Mapping[str, str] | None = None, healthy_within: float = 60) -> Iterator[str]:
    """Start the app (its output in ``log_path``), wait until ``/_stcore/health`` answers, yield its URL; stop it after.

    Fails the test when the server exits or is not healthy within ``healthy_within`` seconds.
    """
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + healthy_within
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"streamlit exited with code {proc.returncode}; log: {log_path}")
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"streamlit did not become healthy within {healthy_within:g} s; log: {log_path}")
                time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
