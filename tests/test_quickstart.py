"""The README's two Quick start commands, run as written in a fresh clone of this checkout.

The clone borrows this run's ``.venv`` (a link): ``scripts/setup.sh`` finds its stamp for the same
requirements and installs nothing, so what is tested is everything after the install — that the commands
start from the clone's root, find the app and the tests there, and need nothing left behind by hand.
(CI itself is the install's test: ``.ci/run`` runs the second command on a fresh clone with no ``.venv``.)
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.app_server import free_port

VENV = Path(sys.executable).parents[1]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A clone of this checkout's HEAD whose ``.venv`` is this run's (already installed, same requirements)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if not (VENV / "pyvenv.cfg").is_file():
        pytest.skip("the tests do not run from a virtual environment")
    if not _stamps():
        pytest.skip("this .venv was not made by scripts/setup.sh")
    target = tmp_path_factory.mktemp("clone") / "chunk-lab"
    subprocess.run(["git", "clone", "-q", "--local", "--no-hardlinks", str(ROOT), str(target)], check=True,
                   capture_output=True, timeout=120)
    (target / ".venv").symlink_to(VENV, target_is_directory=True)
    return target


def _stamps() -> dict[str, int]:
    """``scripts/setup.sh``'s stamps in the run's ``.venv``, by name, with their modification times."""
    return {p.name: p.stat().st_mtime_ns for p in VENV.glob(".chunklab-*.sha")}


def _env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CHUNKLAB_"))}
    env["CHUNKLAB_DATA_DIR"] = str(clone.parent / "data")
    return env


def test_the_app_command_starts_the_app_from_a_fresh_clone(clone: Path) -> None:
    stamps, port = _stamps(), free_port()
    log = clone.parent / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "scripts/app.sh", "--server.port", str(port), "--server.headless", "true"],
                                cwd=clone, stdout=out, stderr=subprocess.STDOUT, env=_env(clone),
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the app was not up within 90 s:\n{log.read_text()}"
            time.sleep(0.25)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert _stamps() == stamps  # a stamp matched: nothing was installed again


def test_the_test_command_runs_tests_from_a_fresh_clone(clone: Path) -> None:
    env, stamps = _env(clone) | {"CHUNKLAB_TEST_WORKERS": "0"}, _stamps()
    proc = subprocess.Popen(["bash", "scripts/test.sh", "tests/test_project.py", "-q", "-p", "no:cacheprovider"],
                            cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, "")
    assert done.returncode == 0, done.stdout + done.stderr
    passed = re.match(r"(\d+) passed", done.stdout.splitlines()[-1])
    assert passed and int(passed[1]) < 20, done.stdout  # the one file asked for, not the whole suite
    assert _stamps() == stamps
