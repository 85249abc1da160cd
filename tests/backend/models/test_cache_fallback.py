"""OutputCache's read-only fallback folders: read after the main folder, never written, evicted or cleared."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from backend.models.cache import DEMO_CACHE_DIR, OutputCache, default_cache, enable_demo_cache, key_digest

KEY = {"kind": "token_nll", "model": "abc", "text": "t1", "version": 1}


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.fixture()
def shipped(tmp_path: Path) -> Path:
    """A fallback folder holding KEY and one more entry, written by a cache of its own."""
    folder = tmp_path / "shipped"
    writer = OutputCache(folder, max_bytes=1 << 20)
    writer.put(KEY, {"nll": np.array([1.5, 2.5])})
    writer.put({"kind": "other", "n": 2}, {"vectors": np.ones((4, 8), dtype=np.float32)})
    os.chmod(folder, 0o555)  # read-only, as on a shipped checkout: a write there would fail the test
    yield folder
    os.chmod(folder, 0o755)


def test_fallback_answers_a_main_folder_miss_and_is_never_modified(tmp_path: Path, shipped: Path):
    before = snapshot(shipped)
    cache = OutputCache(tmp_path / "main", max_bytes=1 << 20, fallback_dirs=[shipped])
    assert cache.get(KEY)["nll"].tolist() == [1.5, 2.5]
    assert cache.get_or_compute(KEY, lambda: pytest.fail("a fallback hit must not compute"))[1] is True
    assert cache.get({"kind": "missing"}) is None
    cache.put({"kind": "new"}, {"v": 1})
    assert (tmp_path / "main" / f"{key_digest({'kind': 'new'})}.entry").is_file()
    assert cache.stats()["entries"] == 1  # the main folder's only
    assert cache.clear() == 1
    assert cache.get(KEY) is not None  # clear empties the main folder, not the fallback
    assert snapshot(shipped) == before


def test_main_folder_wins_over_the_fallback(tmp_path: Path, shipped: Path):
    cache = OutputCache(tmp_path / "main", max_bytes=1 << 20, fallback_dirs=[shipped])
    cache.put(KEY, {"nll": np.array([9.0])})
    assert cache.get(KEY)["nll"].tolist() == [9.0]


def test_eviction_never_touches_the_fallback(tmp_path: Path, shipped: Path):
    before = snapshot(shipped)
    cache = OutputCache(tmp_path / "main", max_bytes=4096, fallback_dirs=[shipped])
    for i in range(20):  # far past the bound: the main folder evicts
        cache.put({"kind": "big", "i": i}, {"x": np.zeros(200)})
    assert cache.stats()["bytes"] <= 4096
    assert snapshot(shipped) == before and cache.get(KEY) is not None


def test_a_corrupt_fallback_entry_is_a_miss_and_stays(tmp_path: Path):
    folder = tmp_path / "shipped"
    OutputCache(folder, max_bytes=1 << 20).put(KEY, {"v": 1})
    path = folder / f"{key_digest(KEY)}.entry"
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    cache = OutputCache(tmp_path / "main", max_bytes=1 << 20, fallback_dirs=[folder])
    assert cache.get(KEY) is None and path.is_file()


def test_default_cache_falls_back_on_the_demo_entries_in_demo_mode_only(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "main"))
    monkeypatch.delenv("CHUNKLAB_DEMO", raising=False)
    monkeypatch.setattr("backend.models.cache._DEMO_ENABLED", threading.Event())
    assert default_cache().fallback_dirs == ()
    monkeypatch.setenv("CHUNKLAB_DEMO", "1")
    assert default_cache().fallback_dirs == (DEMO_CACHE_DIR,)
    monkeypatch.delenv("CHUNKLAB_DEMO")
    enable_demo_cache()  # the app's switch: demo entries for the rest of the process
    assert default_cache().fallback_dirs == (DEMO_CACHE_DIR,)
