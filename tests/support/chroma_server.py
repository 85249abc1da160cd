"""A real ``chroma run`` server on 127.0.0.1 for tests: start it on a data path, stop it, start it again.

``chroma`` is the CLI installed next to the test interpreter (chromadb's own entry point).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["CHROMA", "free_port", "start_chroma", "stop"]

CHROMA = Path(sys.executable).with_name("chroma")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_chroma(path: Path, port: int, log: Path) -> subprocess.Popen:
    """``chroma run`` on 127.0.0.1:port over the data at ``path``; returns once its heartbeat answers."""
    import httpx

    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(CHROMA), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chroma run exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop(proc)
    raise RuntimeError("chroma run did not answer within 60 s")


def stop(proc: subprocess.Popen) -> None:
    """Stop the server (SIGTERM, then SIGKILL after 10 s) and wait for it."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
