"""The real app as a server for the browser benchmarks (``bench_demo.py``, ``bench_load.py``).

``start_app`` runs ``streamlit run app.py`` headless on a free 127.0.0.1 port with the given
environment and returns once ``/_stcore/health`` answers; ``stop_app`` ends it. Not a
benchmark itself: the scripts beside it import it (they run with this folder on ``sys.path``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(env: dict[str, str], port: int, log: IO | int = subprocess.DEVNULL, timeout: float = 90) -> subprocess.Popen:
    """``streamlit run app.py`` on ``port`` with ``env``; returns the process once it is healthy.

    Raises:
        SystemExit: the server exited, or was not healthy within ``timeout`` seconds (it is killed).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT if log is not subprocess.DEVNULL else subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"streamlit was not healthy within {timeout:.0f} s")


def stop_app(proc: subprocess.Popen, timeout: float = 15) -> None:
    """Terminate the server, killing it when it does not end within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
