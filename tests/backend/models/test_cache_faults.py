"""The output cache under faults: a writer SIGKILLed mid-write, an unwritable folder, a full disk."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backend.models.cache import STALE_TMP_SECONDS, OutputCache, key_digest
from tests.conftest import ROOT
from tests.support.killing import kill_at_marker

KEY = {"kind": "token_nll", "model": "m", "text": "t", "window": 16, "version": 1}

# Puts KEY's new value; os.replace (the publication) is made to stall, so the test kills the
# writer with the temporary file fully written and not yet published.
_WRITER = (
    "import os, sys, time, numpy as np\n"
    "from pathlib import Path\n"
    "from backend.models.cache import OutputCache\n"
    "marker = Path(sys.argv[2])\n"
    "def stall(src, dst):\n"
    "    marker.write_text('stalled')\n"
    "    time.sleep(600)\n"
    "os.replace = stall\n"
    "OutputCache(sys.argv[1]).put({KEY!r}, {{'nll': np.full(50_000, 2.0), 'window': 16}})\n"
).format(KEY=KEY)


def _kill_mid_write(folder: Path, tmp_path: Path) -> None:
    marker = tmp_path / "stalled"
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), str(marker)], cwd=ROOT,
                            stderr=subprocess.PIPE)
    kill_at_marker(proc, marker, timeout=120)


@pytest.mark.parametrize("before", ["nothing", "an older value"])
def test_a_writer_killed_before_publishing_leaves_a_miss_or_the_old_value(tmp_path: Path, before: str):
    folder = tmp_path / "cache"
    if before != "nothing":
        OutputCache(folder).put(KEY, {"nll": np.full(10, 1.0), "window": 16})
    _kill_mid_write(folder, tmp_path)

    leftovers = [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 50_000 * 8  # the whole value, never published

    fresh = OutputCache(folder)  # a restarted process
    got = fresh.get(KEY)
    if before == "nothing":
        assert got is None
    else:
        assert got is not None and got["nll"].tolist() == [1.0] * 10
    # The orphan is not counted against the size bound, and it goes once it is stale.
    entries = [p for p in folder.iterdir() if p.name.endswith(".entry")]
    assert fresh.stats()["bytes"] == sum(p.stat().st_size for p in entries)
    old = time.time() - STALE_TMP_SECONDS - 1
    os.utime(leftovers[0], (old, old))
    fresh.stats()
    assert not leftovers[0].exists()
    # The computation is redone and published normally.
    value, hit = fresh.get_or_compute(KEY, lambda: {"nll": np.full(3, 3.0), "window": 16})
    assert hit == (before != "nothing")
    assert fresh.get(KEY) is not None


def test_a_half_written_entry_is_never_served(tmp_path: Path):
    """What a non-atomic writer would leave (a truncated entry) reads as a miss and is removed."""
    cache = OutputCache(tmp_path / "cache")
    cache.put(KEY, {"nll": np.full(1000, 2.0), "window": 16})
    path = cache.directory / f"{key_digest(KEY)}.entry"
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        assert OutputCache(cache.directory).get(KEY) is None
        assert not path.exists()


@pytest.fixture()
def unwritable(tmp_path: Path) -> Path:
    """A cache folder nothing can be written into: read-only, or (as root, which ignores modes) under a file."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        (folder / "probe").write_bytes(b"x")
    except PermissionError:
        yield folder
        folder.chmod(0o700)
        return
    (folder / "probe").unlink()  # root: the mode does not stop us
    folder.chmod(0o700)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    yield blocker / "cache"


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "backend.models.cache" and r.levelno >= logging.WARNING]


def test_an_unwritable_folder_computes_without_caching_and_says_so_once(unwritable: Path, caplog):
    cache = OutputCache(unwritable)
    caplog.set_level(logging.WARNING, logger="backend.models.cache")
    for i in range(3):
        value, hit = cache.get_or_compute({"k": i}, lambda i=i: {"v": i})
        assert value == {"v": i} and not hit
    assert cache.get({"k": 0}) is None
    assert cache.stats()["entries"] == 0
    assert cache.clear() == 0
    warned = _warnings(caplog)
    assert len(warned) == 1 and "cannot be written" in warned[0] and str(unwritable) in warned[0]
    assert cache.problem == warned[0]


def test_a_full_disk_computes_without_caching_says_so_once_and_recovers(tmp_path: Path, monkeypatch, caplog):
    cache = OutputCache(tmp_path / "cache")
    real = cache._atomic_write

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache, "_atomic_write", full)
    caplog.set_level(logging.WARNING, logger="backend.models.cache")
    for i in range(3):
        assert cache.get_or_compute({"k": i}, lambda i=i: {"v": i}) == ({"v": i}, False)
    warned = _warnings(caplog)
    assert len(warned) == 1 and os.strerror(errno.ENOSPC) in warned[0]
    assert cache.problem is not None and "No space left" in cache.problem

    monkeypatch.setattr(cache, "_atomic_write", real)  # space freed: caching resumes, the notice goes
    cache.put({"k": 0}, {"v": 0})
    assert cache.problem is None and cache.get({"k": 0}) == {"v": 0}


def test_the_cli_keeps_working_and_warns_once(unwritable: Path, tmp_path: Path):
    doc = ROOT / "tests" / "data" / "retrieval" / "corpora" / "sourdough.txt"
    env = {**os.environ, "CHUNKLAB_CACHE_DIR": str(unwritable), "CHUNKLAB_DATA_DIR": str(tmp_path / "data"),
           "CHUNKLAB_DEVICE": "cpu"}
    env.pop("CHUNKLAB_DEMO", None)
    # Two semantic configurations embed the same sentences: nothing is kept, so twice, and two writes fail.
    proc = subprocess.run([sys.executable, "-m", "backend", "compare", str(doc), "--config", "semantic",
                           "--config", "semantic max_tokens=40"], cwd=ROOT, env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "semantic" in proc.stdout.decode()
    lines = [line for line in proc.stderr.decode().splitlines() if "cache" in line]
    assert len(lines) == 1 and "cannot be written" in lines[0] and "results are not cached" in lines[0], lines
    info = subprocess.run([sys.executable, "-m", "backend", "cache", "info"], cwd=ROOT, env=env,
                          capture_output=True, timeout=120)
    assert info.returncode == 0, info.stderr.decode()
