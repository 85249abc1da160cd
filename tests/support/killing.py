"""SIGKILL a child process at the moment it reports a stall point (the fault tests' one way to crash a run)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest


def kill_at_marker(proc: subprocess.Popen, marker: Path, timeout: float = 300) -> None:
    """Wait until ``proc`` writes ``marker``, then SIGKILL it; fail the test if it ends or stalls first.

    ``proc`` must have been started with ``stderr=subprocess.PIPE`` (shown when it ends early).
    """
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it stalled: {proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                pytest.fail("the run never reached its stall point")
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
