"""OutputCache: round trips, corruption as a miss, LRU eviction, clear/stats, threads, no pickle."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from backend.config import cache_dir, cache_max_bytes
from backend.models.cache import OutputCache, default_cache, key_digest, text_digest


def entry_path(cache: OutputCache, key: dict) -> Path:
    return cache.directory / f"{key_digest(key)}.entry"


def value_of(n: int) -> dict:
    return {"nll": np.linspace(0.0, 1.0, n), "starts": np.arange(n, dtype=np.int64), "window": 512, "name": "x"}


@pytest.fixture()
def cache(tmp_path: Path) -> OutputCache:
    return OutputCache(tmp_path / "cache", max_bytes=10 * 1024 * 1024)


def test_roundtrip_keeps_arrays_dtypes_and_metadata(cache: OutputCache):
    key = {"kind": "token_nll", "model": "abc", "text": text_digest("hello"), "window": 8192, "version": 1}
    value = {
        "nll": np.array([np.nan, 1.5, 2.25]),
        "starts": np.array([0, 2, 4], dtype=np.int64),
        "flags": np.array([True, False]),
        "vec": np.ones((2, 3), dtype=np.float32),
        "window": 8192,
        "meta": {"model": "SmolLM2", "tokens": [1, 2]},
    }
    assert cache.get(key) is None
    cache.put(key, value)
    got = cache.get(key)
    assert got is not None and set(got) == set(value)
    np.testing.assert_array_equal(got["nll"], value["nll"])
    assert got["starts"].dtype == np.int64 and got["vec"].dtype == np.float32 and got["vec"].shape == (2, 3)
    assert got["flags"].tolist() == [True, False]
    assert got["window"] == 8192 and got["meta"] == {"model": "SmolLM2", "tokens": [1, 2]}


def test_key_order_does_not_matter_and_every_field_does(cache: OutputCache):
    cache.put({"a": 1, "b": "x"}, {"v": 1})
    assert cache.get({"b": "x", "a": 1}) == {"v": 1}
    assert cache.get({"a": 1, "b": "y"}) is None
    assert cache.get({"a": 1, "b": "x", "c": None}) is None


def test_keys_and_values_are_checked(cache: OutputCache):
    with pytest.raises(TypeError, match="'text' must be a scalar"):
        cache.put({"text": ["not", "hashed"]}, {"v": 1})
    with pytest.raises(TypeError, match="object array"):
        cache.put({"k": 1}, {"v": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(TypeError, match="JSON"):
        cache.put({"k": 1}, {"v": object()})
    with pytest.raises(TypeError, match="'__x'"):
        cache.put({"k": 1}, {"__x": 1})


def test_files_hold_no_pickle_and_no_raw_text(cache: OutputCache):
    secret_text = "the quick brown fox, a document that must not be stored verbatim"
    key = {"kind": "token_nll", "text": text_digest(secret_text)}
    cache.put(key, value_of(4))
    data = entry_path(cache, key).read_bytes()
    assert data.startswith(b"CLCACHE1")
    assert secret_text.encode() not in data
    with np.load(io.BytesIO(data[40:]), allow_pickle=False) as npz:  # a plain npz, readable without pickle
        assert not any(npz[name].dtype.hasobject for name in npz.files)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
        pytest.param(lambda b: b[:-1] + bytes([b[-1] ^ 0xFF]), id="last-byte-flipped"),
        pytest.param(lambda b: b[:100] + bytes([b[100] ^ 0x01]) + b[101:], id="payload-bit-flipped"),
        pytest.param(lambda b: b[:20] + bytes([b[20] ^ 0x01]) + b[21:], id="checksum-flipped"),
        pytest.param(lambda b: b"garbage" * 50, id="garbage"),
        pytest.param(lambda b: b"", id="empty"),
        pytest.param(lambda b: b"CLCACHE1", id="header-only"),
    ],
)
def test_corrupt_entry_is_a_miss_and_is_removed(cache: OutputCache, damage):
    key = {"kind": "t", "n": 1}
    cache.put(key, value_of(100))
    path = entry_path(cache, key)
    path.write_bytes(damage(path.read_bytes()))
    assert cache.get(key) is None
    assert not path.exists()
    _value, hit = cache.get_or_compute(key, lambda: value_of(100))
    assert not hit and cache.get(key) is not None


def test_unreadable_entry_is_a_miss(cache: OutputCache):
    key = {"kind": "t", "n": 2}
    cache.put(key, value_of(10))
    path = entry_path(cache, key)
    path.unlink()
    path.mkdir()  # reading a directory fails with an OSError other than "not found"
    assert cache.get(key) is None


def test_get_or_compute_computes_once(cache: OutputCache):
    calls = []

    def compute():
        calls.append(1)
        return value_of(5)

    v1, hit1 = cache.get_or_compute({"k": "a"}, compute)
    v2, hit2 = cache.get_or_compute({"k": "a"}, compute)
    assert (hit1, hit2) == (False, True) and len(calls) == 1
    np.testing.assert_array_equal(v1["nll"], v2["nll"])


def test_lru_eviction_drops_least_recently_used(tmp_path: Path):
    probe = OutputCache(tmp_path / "probe")
    probe.put({"k": "probe"}, value_of(1000))
    size = entry_path(probe, {"k": "probe"}).stat().st_size
    # Room for 3.5 entries: the 4th put evicts one (down to 90 %, i.e. 3 entries).
    cache = OutputCache(tmp_path / "c", max_bytes=int(size * 3.5))
    for name in "abc":
        cache.put({"k": name}, value_of(1000))
    assert cache.get({"k": "a"}) is not None  # a becomes the most recently used
    cache.put({"k": "d"}, value_of(1000))
    present = {n for n in "abcd" if entry_path(cache, {"k": n}).exists()}
    assert present == {"a", "c", "d"}
    cache.put({"k": "e"}, value_of(1000))
    present = {n for n in "abcde" if entry_path(cache, {"k": n}).exists()}
    assert present == {"a", "d", "e"}
    assert cache.stats()["bytes"] <= cache.max_bytes


def test_eviction_sees_entries_written_by_another_instance(tmp_path: Path):
    first = OutputCache(tmp_path / "c")
    for i in range(6):
        first.put({"k": i}, value_of(1000))
    size = entry_path(first, {"k": 0}).stat().st_size
    second = OutputCache(tmp_path / "c", max_bytes=int(size * 3.5))
    second.put({"k": "new"}, value_of(1000))
    stats = second.stats()
    assert stats["entries"] == 3 and stats["bytes"] <= second.max_bytes
    assert second.get({"k": "new"}) is not None and second.get({"k": 5}) is not None


def test_value_larger_than_the_bound_is_not_stored(tmp_path: Path):
    cache = OutputCache(tmp_path / "c", max_bytes=1000)
    cache.put({"k": 1}, value_of(10_000))
    assert cache.get({"k": 1}) is None and cache.stats()["entries"] == 0


def test_clear_and_stats(cache: OutputCache):
    assert cache.stats() == {"entries": 0, "bytes": 0, "directory": str(cache.directory), "max_bytes": cache.max_bytes}
    for i in range(3):
        cache.put({"k": i}, value_of(50))
    (cache.directory / "notes.txt").write_text("not ours")
    stats = cache.stats()
    assert stats["entries"] == 3 and stats["bytes"] > 0
    assert cache.clear() == 3
    assert cache.stats()["entries"] == 0 and cache.get({"k": 0}) is None
    assert (cache.directory / "notes.txt").exists()  # only cache files are deleted
    assert cache.clear() == 0


def test_unwritable_folder_is_not_an_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = OutputCache(blocker / "cache")  # its parent is a file: mkdir fails
    value, hit = cache.get_or_compute({"k": 1}, lambda: {"v": 1})
    assert value == {"v": 1} and not hit


def test_threads_hammering_get_and_put(tmp_path: Path):
    probe = OutputCache(tmp_path / "probe")
    probe.put({"k": "probe"}, value_of(200))
    size = entry_path(probe, {"k": "probe"}).stat().st_size
    cache = OutputCache(tmp_path / "c", max_bytes=size * 12)  # small enough to evict all the time
    errors: list[BaseException] = []
    computed: list[int] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(150):
                k = int(rng.integers(0, 20))
                key = {"k": k}
                if rng.random() < 0.5:
                    cache.put(key, {"nll": np.full(200, float(k)), "k": k})
                else:
                    got = cache.get(key)
                    if got is not None:  # never a partial or mixed-up value
                        assert got["k"] == k and got["nll"].shape == (200,) and (got["nll"] == k).all()
                value, _hit = cache.get_or_compute({"shared": 1}, lambda: computed.append(1) or {"v": 7})
                assert value == {"v": 7}
        except (AssertionError, OSError, TypeError, ValueError) as e:  # surfaced by the main thread below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".tmp-")]
    assert cache.stats()["bytes"] <= cache.max_bytes
    assert len(computed) >= 1


def test_concurrent_get_or_compute_of_one_key_computes_once(cache: OutputCache):
    calls: list[int] = []
    results: list[tuple[dict, bool]] = []

    def compute() -> dict:
        calls.append(1)
        time.sleep(0.2)  # the other threads arrive while this one computes
        return {"v": np.arange(3)}

    def worker() -> None:
        results.append(cache.get_or_compute({"k": "slow"}, compute))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(hit for _v, hit in results) == [False] + [True] * 5
    assert all(v["v"].tolist() == [0, 1, 2] for v, _hit in results)


def test_environment_settings(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "here"))
    monkeypatch.setenv("CHUNKLAB_CACHE_MAX_MB", "1.5")
    assert cache_dir() == tmp_path / "here" and cache_max_bytes() == int(1.5 * 1024 * 1024)
    assert default_cache() is default_cache() and default_cache().directory == tmp_path / "here"
    monkeypatch.setenv("CHUNKLAB_CACHE_MAX_MB", "lots")
    assert cache_max_bytes() == 2048 * 1024 * 1024
    monkeypatch.delenv("CHUNKLAB_CACHE_DIR")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    assert cache_dir() == tmp_path / "data" / "cache"


def test_processes_sharing_one_folder(tmp_path: Path):
    """Several processes writing, reading and evicting in one folder never see a bad value."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys, numpy as np\n"
        "from backend.models.cache import OutputCache\n"
        "cache = OutputCache(sys.argv[1], max_bytes=40_000)\n"
        "rng = np.random.default_rng(int(sys.argv[2]))\n"
        "for _ in range(300):\n"
        "    k = int(rng.integers(0, 30))\n"
        "    if rng.random() < 0.5:\n"
        "        cache.put({'k': k}, {'nll': np.full(300, float(k)), 'k': k})\n"
        "    else:\n"
        "        got = cache.get({'k': k})\n"
        "        assert got is None or (got['k'] == k and (got['nll'] == k).all() and got['nll'].shape == (300,))\n"
    )
    folder = tmp_path / "shared"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(folder), str(seed)], cwd=ROOT, stderr=subprocess.PIPE)
        for seed in range(4)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
    # The size estimate is per process, so the bound holds after any one process's last scan:
    stats = OutputCache(folder, max_bytes=40_000).stats()
    assert stats["entries"] > 0
