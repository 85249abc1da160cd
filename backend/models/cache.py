"""A persistent, size-bounded on-disk cache of model outputs.

Model outputs (per-token NLLs of a document, conditional NLLs of pairs, embeddings) are
expensive and deterministic given the model's weights and the exact input, so they are
kept on disk and shared by every browser session, every CLI run and across restarts.

Design:

- A key is a flat mapping of scalars, e.g. ``{"kind": "token_nll", "model": <fingerprint>,
  "text": <sha256 of the text>, "window": 8192, "version": 1}``. Its canonical JSON is
  hashed (sha256) into the file name. Keys hold hashes and identities, never the inputs
  themselves and never secrets (a remote model's fingerprint is its URL + model name, not
  its API key).
- A value is a dict of numpy arrays plus small JSON-serializable metadata. It is written as
  an uncompressed ``.npz`` (no pickle: object arrays are refused, and loading uses
  ``allow_pickle=False``) behind a magic string and the sha256 of the payload. A read that
  finds a truncated, altered or unreadable file deletes it and reports a miss, so the
  caller recomputes.
- Writes go to a temporary file in the same folder and are published with ``os.replace``:
  readers, in this process or another, see the old entry, the new one or none, never a
  partial one. Two writers of the same key write the same bytes, so the last one wins
  harmlessly.
- Least-recently-used eviction: a hit refreshes the entry's modification time; when the
  folder grows past ``max_bytes``, the oldest entries go until it is back under 90 % of
  the bound (the slack keeps a full cache from rescanning the folder on every write).
  Processes share no index: each keeps an estimate of the folder size, refreshed by a scan
  every :data:`RESCAN_SECONDS`. Two processes evicting at once may delete a little more
  than needed; that costs misses, never wrong values.

Standard library + numpy only: ``diskcache``-style SQLite stores would add a dependency
and a pickle-based value format, which this cache avoids on purpose.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from backend.config import cache_dir, cache_max_bytes
from backend.models.types import Progress, acquired

__all__ = [
    "OutputCache",
    "default_cache",
    "key_digest",
    "text_digest",
]

log = logging.getLogger(__name__)

RESCAN_SECONDS = 30.0
LOW_WATER = 0.9  # eviction stops at this fraction of max_bytes
STALE_TMP_SECONDS = 3600.0  # temporary files older than this were left by a crashed writer

_MAGIC = b"CLCACHE1"
_HEADER = len(_MAGIC) + 32  # magic + sha256 of the payload
_META = "__meta__"
_SUFFIX = ".entry"
_TMP_PREFIX = ".tmp-"
_ENTRY_RE = re.compile(r"^[0-9a-f]{64}\.entry$")

Key = Mapping[str, "str | int | float | bool | None"]


def text_digest(text: str) -> str:
    """The sha256 hex digest of a text's exact UTF-8 bytes (lone surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def key_digest(key: Key) -> str:
    """The sha256 hex digest of a key's canonical JSON (the entry's file name).

    Raises:
        TypeError: A key field is not a str, int, float, bool or None.
    """
    for name, value in key.items():
        if not isinstance(name, str):
            raise TypeError(f"cache key field names must be str, got {name!r}")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise TypeError(f"cache key field {name!r} must be a scalar, got {type(value).__name__}")
    canonical = json.dumps(dict(key), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


class OutputCache:
    """A persistent, size-bounded, LRU cache of model outputs, safe across threads and processes.

    Args:
        directory: The cache folder (created on first write). Defaults to :func:`backend.config.cache_dir`.
        max_bytes: The size bound. Defaults to :func:`backend.config.cache_max_bytes`.

    Example:
        >>> cache = OutputCache(tmp_path)
        >>> value, hit = cache.get_or_compute({"kind": "demo", "n": 1}, lambda: {"x": np.arange(3)})
    """

    def __init__(self, directory: Path | None = None, max_bytes: int | None = None) -> None:
        self.directory = Path(directory) if directory is not None else cache_dir()
        self.max_bytes = int(max_bytes) if max_bytes is not None else cache_max_bytes()
        if self.max_bytes <= 0:
            raise ValueError(f"max_bytes ({self.max_bytes}) must be positive")
        self._lock = threading.Lock()  # guards the size estimate, the clock and the in-flight table
        self._size: int | None = None  # estimated bytes in the folder; None = scan before trusting it
        self._scanned_at = 0.0
        self._last_ns = 0
        self._inflight: dict[str, list] = {}  # digest -> [lock, waiters]

    def __repr__(self) -> str:
        return f"OutputCache({str(self.directory)!r}, max_bytes={self.max_bytes})"

    # -- public API --------------------------------------------------------------------

    def get(self, key: Key) -> dict[str, Any] | None:
        """The stored value of ``key``, or None on a miss (corrupt entries count as misses).

        A hit marks the entry as recently used.
        """
        digest = key_digest(key)
        path = self._path(digest)
        try:
            with open(path, "rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cache entry %s is unreadable (%s); dropping it", path.name, e)
            self._discard(path, None)
            return None
        value = self._decode(data, key)
        if value is None:
            log.warning("cache entry %s is corrupt; dropping it", path.name)
            self._discard(path, ino)
            return None
        self._touch(path)
        return value

    def put(self, key: Key, value: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key`` (replacing any previous value), then evict if over the bound.

        ``value`` maps names to numpy arrays (numeric, bool or fixed-width string dtypes) or to
        JSON-serializable data. A failure to write (read-only or full disk) is logged and
        ignored: the cache is an optimization, never a reason to fail.

        Raises:
            TypeError: A value is neither a non-object array nor JSON-serializable.
        """
        digest = key_digest(key)
        data = self._encode(key, value)
        if len(data) > self.max_bytes:
            log.info("cache value of %d bytes exceeds the bound (%d); not stored", len(data), self.max_bytes)
            return
        path = self._path(digest)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                old = path.stat().st_size
            except FileNotFoundError:
                old = 0
            self._atomic_write(path, data)
        except OSError as e:
            log.warning("cannot write cache entry in %s: %s", self.directory, e)
            return
        self._touch(path)
        self._account(len(data) - old)

    def get_or_compute(
        self, key: Key, compute: Callable[[], Mapping[str, Any]], *, progress: Progress | None = None
    ) -> tuple[dict[str, Any], bool]:
        """The cached value of ``key``, or ``compute()``'s result, stored; and whether it was a hit.

        Threads of this process asking for the same key at once compute it once: the others
        wait (``progress`` then says ``queued behind another run``) and then read the stored value.
        """
        value = self.get(key)
        if value is not None:
            return value, True
        with self._key_lock(key_digest(key), progress):
            value = self.get(key)
            if value is not None:
                return value, True
            value = dict(compute())
            self.put(key, value)
            return value, False

    def clear(self) -> int:
        """Delete every entry (and leftover temporary files); returns the number of entries removed."""
        removed = 0
        for entry in self._listdir():
            name = entry.name
            if _ENTRY_RE.match(name) or name.startswith(_TMP_PREFIX):
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
                removed += bool(_ENTRY_RE.match(name))
        with self._lock:
            self._size = None
        return removed

    def stats(self) -> dict[str, Any]:
        """``{"entries", "bytes", "directory", "max_bytes"}`` of the folder as it is now."""
        entries, total = self._scan()
        return {"entries": len(entries), "bytes": total, "directory": str(self.directory), "max_bytes": self.max_bytes}

    # -- encoding ----------------------------------------------------------------------

    @staticmethod
    def _encode(key: Key, value: Mapping[str, Any]) -> bytes:
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str) or name.startswith("__"):
                raise TypeError(f"cache value names must be str not starting with '__', got {name!r}")
            if isinstance(item, np.ndarray):
                if item.dtype.hasobject:
                    raise TypeError(f"cache value {name!r} is an object array; only plain dtypes are stored")
                arrays[name] = item
            else:
                meta[name] = item
        try:
            header = json.dumps({"key": dict(key), "json": meta}, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise TypeError(f"cache value is not JSON-serializable: {e}") from e
        buf = io.BytesIO()
        np.savez(buf, **arrays, **{_META: np.frombuffer(header, dtype=np.uint8)})
        payload = buf.getvalue()
        return _MAGIC + hashlib.sha256(payload).digest() + payload

    @staticmethod
    def _decode(data: bytes, key: Key) -> dict[str, Any] | None:
        if len(data) < _HEADER or not data.startswith(_MAGIC):
            return None
        payload = memoryview(data)[_HEADER:]
        if hashlib.sha256(payload).digest() != data[len(_MAGIC) : _HEADER]:
            return None
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
                meta = json.loads(npz[_META].tobytes().decode("utf-8"))
                if meta.get("key") != json.loads(json.dumps(dict(key))):
                    return None  # a digest collision, or a key format from another version
                value: dict[str, Any] = dict(meta.get("json", {}))
                for name in npz.files:
                    if name != _META:
                        value[name] = npz[name]
        except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as e:
            log.debug("undecodable cache payload: %s", e)
            return None
        return value

    # -- files -------------------------------------------------------------------------

    def _path(self, digest: str) -> Path:
        return self.directory / f"{digest}{_SUFFIX}"

    def _atomic_write(self, path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _touch(self, path: Path) -> None:
        # mtime is the LRU clock; strictly increasing within a process so the order is exact.
        with self._lock:
            now = max(time.time_ns(), self._last_ns + 1)
            self._last_ns = now
        with contextlib.suppress(OSError):  # evicted meanwhile, or a read-only folder
            os.utime(path, ns=(now, now))

    def _discard(self, path: Path, ino: int | None) -> None:
        # Only delete the file we judged: a writer may have replaced it with a good one since.
        try:
            if ino is None or os.stat(path).st_ino == ino:
                os.unlink(path)
        except OSError as e:
            if not isinstance(e, FileNotFoundError):
                log.warning("cannot delete cache entry %s: %s", path, e)
        with self._lock:
            self._size = None

    def _listdir(self) -> list[os.DirEntry]:
        try:
            with os.scandir(self.directory) as it:
                return list(it)
        except FileNotFoundError:
            return []

    def _scan(self) -> tuple[list[tuple[int, str, int]], int]:
        """Entries as (mtime_ns, path, size), and their total size; removes stale temporary files."""
        entries: list[tuple[int, str, int]] = []
        total = 0
        now = time.time()
        for entry in self._listdir():
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            if _ENTRY_RE.match(entry.name):
                entries.append((st.st_mtime_ns, entry.path, st.st_size))
                total += st.st_size
            elif entry.name.startswith(_TMP_PREFIX) and now - st.st_mtime > STALE_TMP_SECONDS:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
        return entries, total

    def _account(self, delta: int) -> None:
        with self._lock:
            stale = self._size is None or time.monotonic() - self._scanned_at > RESCAN_SECONDS
            if not stale:
                self._size += delta
                if self._size <= self.max_bytes:
                    return
            entries, total = self._scan()
            self._scanned_at = time.monotonic()
            if total > self.max_bytes:
                total = self._evict(entries, total)
            self._size = total

    def _evict(self, entries: list[tuple[int, str, int]], total: int) -> int:
        target = int(self.max_bytes * LOW_WATER)
        entries.sort()
        for _mtime, path, size in entries:
            if total <= target:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass  # another process evicted it first
            except OSError as e:
                log.warning("cannot evict cache entry %s: %s", path, e)
                continue
            total -= size
        return total

    @contextlib.contextmanager
    def _key_lock(self, digest: str, progress: Progress | None = None) -> Iterator[None]:
        with self._lock:
            slot = self._inflight.setdefault(digest, [threading.Lock(), 0])
            slot[1] += 1
        try:
            with acquired(slot[0], progress):
                yield
        finally:
            with self._lock:
                slot[1] -= 1
                if slot[1] == 0:
                    del self._inflight[digest]


_DEFAULTS: dict[tuple[str, int], OutputCache] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_cache() -> OutputCache:
    """The process-wide cache for the current ``CHUNKLAB_CACHE_DIR`` / ``CHUNKLAB_CACHE_MAX_MB``."""
    directory, max_bytes = cache_dir(), cache_max_bytes()
    with _DEFAULTS_LOCK:
        key = (str(directory), max_bytes)
        if key not in _DEFAULTS:
            _DEFAULTS[key] = OutputCache(directory, max_bytes)
        return _DEFAULTS[key]
