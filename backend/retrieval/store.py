"""The Chroma vector store: one collection per (document, chunking, embedder), our own embeddings.

Where the data lives:

- By default an embedded ``chromadb.PersistentClient`` under ``data_dir()/chroma``
  (``CHUNKLAB_DATA_DIR``, default ``~/.chunklab``).
- With ``CHROMA_HOST`` set (``CHROMA_PORT``, default 8000), a Chroma server through
  ``chromadb.HttpClient``: the path for teams that outgrow one machine. The server is probed
  (``GET /api/v2/heartbeat``) with a timeout (``CHROMA_TIMEOUT``, default 10 s) before the
  client is built, and the client's HTTP session gets the same timeout, so a server that is
  down, a wrong port or a server that hangs gives a one-line :class:`StoreError` naming
  ``host:port``, never a hang.

Collections. A collection holds one chunking of one document embedded by one model. Its name
is ``cl-`` and 24 hex digits of the sha256 of (document id, chunker configuration, embedder
fingerprint, digest of the chunk spans): the spans are in the key because a model-backed
chunker's spans depend on its language model too, which the configuration does not name. Its
metadata records the document, the configuration, the embedder and the chunk count; the
space is cosine. A chunk's id is the sha256 of (document id, configuration, start, end) and
its metadata ``{"start", "end", "index", "tokens"}``; the chunk text is stored as the
document. A multi-granularity retriever's level is a collection the same way
(:func:`entries_collection_name`; its entries' ids are ``<collection>-<index>`` and their metadata
also holds their ``ranges``).

One indexing path. What goes into a collection is described first — a :class:`StoredLevel`:
its name, metadata, row ids, row metadata and texts, made by :func:`chunking_level` (a chunking
is one level whose entries are its chunks) or :func:`entries_level` (a retriever's level) —
and written by :meth:`ChunkStore.write_level`. Writing ``upsert``s, so re-indexing never
duplicates, and is skipped when the collection already holds as many rows as the level (an
interrupted run leaves fewer and is completed next time). :meth:`ChunkStore.query_level`
answers any level.

Embeddings are always ours: chunks are upserted with their precomputed vectors and queries
sent as ``query_embeddings``, and collections are created with ``embedding_function=None``,
so Chroma's default embedding function (which downloads an ONNX model) is never called.

A command that fails (:func:`store_for_command`) leaves no store it created and never wrote:
the embedded store opened for a first ``eval`` whose embedder then fails is removed again, so
no empty ``chroma.sqlite3`` is left behind. A store that existed before is never touched.

chromadb and httpx are imported on first use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from backend.chunking import ChunkerConfig, Chunking
from backend.config import chroma_host, chroma_port, chroma_timeout, data_dir
from backend.errors import ParameterError, StoreError
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder, embed_texts
from backend.models.types import ModelInfo
from backend.progress import Progress
from backend.text.document import Document
from backend.text.spans import MultiRange

__all__ = [
    "ChunkStore",
    "Hit",
    "EntryHit",
    "StoredLevel",
    "chunking_level",
    "entries_level",
    "entries_collection_name",
    "IndexInfo",
    "open_store",
    "store_for_command",
    "store_location",
    "collection_name",
    "chunk_id",
    "DEFAULT_CHROMA_PORT",
    "entry_text",
]

log = logging.getLogger(__name__)

DEFAULT_CHROMA_PORT = 8000
_NAME_PREFIX = "cl-"
_MAX_UPSERT = 1000  # rows per upsert call (also bounded by the client's max batch size)
_SCHEMA = 1  # bump when the collection layout changes


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk.

    Attributes:
        rank: 1 for the closest chunk.
        distance: Cosine distance ``1 - cos`` between the query and the chunk (0 is identical).
        start: The chunk's first character in the document text.
        end: Just past its last character.
        index: The chunk's index in its chunking.
        tokens: Its token count.
    """

    rank: int
    distance: float
    start: int
    end: int
    index: int
    tokens: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "rank": self.rank,
            "distance": self.distance,
            "start": self.start,
            "end": self.end,
            "index": self.index,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class IndexInfo:
    """The outcome of :meth:`ChunkStore.write_level`.

    Attributes:
        name: The collection name.
        chunks: Rows (chunks, entries) in the collection.
        reused: True when the collection was already complete (nothing embedded or written).
        embedded_from_cache: True when the chunk embeddings came from the output cache.
        seconds: Wall time of the call.
    """

    name: str
    chunks: int
    reused: bool
    embedded_from_cache: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class EntryHit(MultiRange):
    """One retrieved entry of a multi-granularity index (it may cover several stretches of the text).

    Attributes:
        rank: 1 for the closest entry.
        distance: Cosine distance ``1 - cos`` to the query.
        index: The entry's index in its level.
        ranges: Its exact character ranges, sorted and disjoint.
        tokens: Its token count.
    """

    rank: int
    distance: float
    index: int
    ranges: tuple[tuple[int, int], ...]
    tokens: int

    @property
    def similarity(self) -> float:
        """Cosine similarity ``1 - distance``."""
        return 1.0 - self.distance


def _ranges_digest(ranges: Sequence[Sequence[tuple[int, int]]]) -> str:
    h = hashlib.sha256()
    for entry in ranges:
        h.update(";".join(f"{s}:{e}" for s, e in entry).encode("ascii") + b"|")
    return h.hexdigest()


def entries_collection_name(
    doc_id: str, key: dict[str, Any], embedder_fingerprint: str, ranges: Sequence[Sequence[tuple[int, int]]]
) -> str:
    """The deterministic collection name of one level of a multi-granularity index.

    ``key`` names the retriever, the parameters that shape the level, the level and how its
    vectors were made; the entries' ranges are in the name too (as a chunking's spans are).
    """
    body = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    name_key = "\n".join([str(_SCHEMA), "entries", doc_id, body, embedder_fingerprint, _ranges_digest(ranges)])
    return _NAME_PREFIX + hashlib.sha256(name_key.encode("utf-8")).hexdigest()[:24]


def entry_text(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """What an entry's vector embeds: its ranges' texts in document order, one line apart when separate."""
    return "\n".join(text[s:e] for s, e in ranges)


def _config_json(config: ChunkerConfig) -> str:
    return json.dumps(config.to_json(), sort_keys=True, separators=(",", ":"), default=str)


def _spans_digest(chunking: Chunking) -> str:
    h = hashlib.sha256()
    for c in chunking.chunks:
        h.update(f"{c.start}:{c.end};".encode("ascii"))
    return h.hexdigest()


def collection_name(doc_id: str, chunking: Chunking, embedder_fingerprint: str) -> str:
    """The deterministic collection name of ``chunking`` of document ``doc_id`` under an embedder.

    ``cl-`` and 24 hex digits: within Chroma's rules (3-512 characters of ``[a-zA-Z0-9._-]``,
    starting and ending with a letter or digit).
    """
    key = "\n".join(
        [str(_SCHEMA), doc_id, _config_json(chunking.config), embedder_fingerprint, _spans_digest(chunking)]
    )
    return _NAME_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


def chunk_id(doc_id: str, config: ChunkerConfig, start: int, end: int) -> str:
    """The deterministic id of the chunk ``[start, end)`` of a document under a configuration."""
    return _chunk_id(doc_id, _config_json(config), start, end)


def _chunk_id(doc_id: str, config_json: str, start: int, end: int) -> str:
    key = f"{doc_id}\n{config_json}\n{start}:{end}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class StoredLevel:
    """One level of entries as the store keeps it: one collection, one row per entry.

    A chunking is one level whose entries are its chunks (:func:`chunking_level`); a
    multi-granularity retriever writes one per level (:func:`entries_level`). The name, the
    ids and the metadata are the level's own, so a complete collection written before is found
    and reused, and an interrupted one is completed without duplicate rows.

    Attributes:
        name: The collection name.
        label: What the level is, in messages (a configuration's label, ``mog level 2``).
        metadata: The collection's metadata (document, configuration, embedder, digest, size).
        ids: One row id per entry.
        rows: One metadata dict per entry (``start``, ``end``, ``index``, ``tokens``; a level's ``ranges``).
        texts: What each entry's vector embeds, also stored as the row's document.
        vectors: The entries' vectors made another way (FreeChunker's window means), called only
            when the level must be written; None: the embedder embeds :attr:`texts`.
    """

    name: str
    label: str
    metadata: Mapping[str, Any]
    ids: tuple[str, ...]
    rows: tuple[Mapping[str, Any], ...]
    texts: tuple[str, ...]
    vectors: Callable[[], np.ndarray] | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.ids)


def _collection_metadata(doc: Document, config_json: str, label: str, embedder: ModelInfo, digest: str, n: int) -> dict:
    return {
        "chunklab_schema": _SCHEMA,
        "doc_id": doc.id,
        "doc_source": doc.source,
        "doc_length": len(doc.text),
        "config": config_json,
        "config_label": label,
        "embedder": embedder.name,
        "embedder_fingerprint": embedder.fingerprint,
        "spans_digest": digest,
        "chunks": n,
    }


def chunking_level(doc: Document, chunking: Chunking, embedder: ModelInfo) -> StoredLevel:
    """A chunking of ``doc`` as one level: its chunks, under :func:`collection_name` and :func:`chunk_id`.

    Raises:
        ParameterError: ``chunking`` was not made from ``doc``.
    """
    if chunking.doc_id != doc.id:
        raise ParameterError(f"the chunking is of document {chunking.doc_id}, not of {doc.source} ({doc.id})")
    config = chunking.config
    config_json = _config_json(config)
    chunks = chunking.chunks
    return StoredLevel(
        name=collection_name(doc.id, chunking, embedder.fingerprint),
        label=f"{doc.source} for {config.label}",
        metadata=_collection_metadata(doc, config_json, config.label, embedder, _spans_digest(chunking), len(chunks)),
        ids=tuple(_chunk_id(doc.id, config_json, c.start, c.end) for c in chunks),
        rows=tuple({"start": c.start, "end": c.end, "index": c.index, "tokens": c.tokens} for c in chunks),
        texts=tuple(c.text for c in chunks),
    )


def entries_level(
    doc: Document,
    key: dict[str, Any],
    ranges: Sequence[tuple[tuple[int, int], ...]],
    tokens: Sequence[int],
    embedder: ModelInfo,
    *,
    vectors: Callable[[], np.ndarray] | None = None,
) -> StoredLevel:
    """One level of a multi-granularity index: entries of exact ranges, under :func:`entries_collection_name`.

    Args:
        doc: The document the entries index.
        key: What the level is (retriever, shaping parameters, level, vector kind): part of the name.
        ranges: Each entry's exact character ranges, sorted.
        tokens: Each entry's token count.
        embedder: The embedder's identity (its fingerprint names the collection).
        vectors: The entries' vectors made another way (rows in entry order, L2-normalized),
            called only when the level must be written; None: the entries' texts are embedded.

    Raises:
        ParameterError: an entry with no range or a range outside the text.
    """
    n = len(doc.text)
    for i, entry in enumerate(ranges):
        if not entry or any(not 0 <= s < e <= n for s, e in entry):
            raise ParameterError(f"entry {i} of {key.get('retriever', '?')} has an empty or out-of-text range")
    name = entries_collection_name(doc.id, key, embedder.fingerprint, ranges)
    label = f"{key.get('retriever', '?')} level {key.get('level', '?')}"
    body = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    return StoredLevel(
        name=name,
        label=label,
        metadata=_collection_metadata(doc, body, label, embedder, _ranges_digest(ranges), len(ranges)),
        ids=tuple(f"{name}-{i}" for i in range(len(ranges))),
        rows=tuple(
            {"start": r[0][0], "end": r[-1][1], "index": i, "tokens": int(tokens[i]),
             "ranges": json.dumps([list(x) for x in r], separators=(",", ":"))}
            for i, r in enumerate(ranges)
        ),
        texts=tuple(entry_text(doc.text, r) for r in ranges),
        vectors=vectors,
    )


def _parse_host(raw: str, port: int | None) -> tuple[str, int]:
    """``(host, port)`` from ``host``, ``host:port`` or ``http://host:port``."""
    text = raw.strip()
    if "://" in text:
        parsed = urlparse(text)
        if not parsed.hostname:
            raise ParameterError(f"Chroma host {raw!r} names no host")
        return parsed.hostname, port or parsed.port or DEFAULT_CHROMA_PORT
    host, sep, tail = text.rpartition(":")
    if sep and tail.isdigit() and host and "]" not in tail:
        return host.strip("[]"), port or int(tail)
    return text.strip("[]"), port or DEFAULT_CHROMA_PORT


def store_location(
    path: str | Path | None = None, host: str | None = None, port: int | None = None
) -> tuple[str, str | int]:
    """Where :func:`open_store` would connect: ``("server", "host:port")`` or ``("embedded", path)``.

    Arguments win over ``CHROMA_HOST``/``CHROMA_PORT`` (``CHROMA_PORT`` only applies to
    ``CHROMA_HOST``); a ``path`` means the embedded store even when ``CHROMA_HOST`` is set; with
    neither, the embedded store under ``data_dir()/chroma``. A host may be ``host``,
    ``host:port`` or ``http://host:port``.

    Raises:
        ParameterError: a malformed host or port.
    """
    from_env = host is None
    host = host if host is not None else chroma_host()
    if host and path is None:
        if port is None and from_env:
            port = chroma_port()
        h, p = _parse_host(host, port)
        if not 0 < p < 65536:
            raise ParameterError(f"Chroma port must be in 1..65535, got {p}")
        return "server", f"{h}:{p}"
    return "embedded", str(Path(path).expanduser() if path is not None else data_dir() / "chroma")


class ChunkStore:
    """Levels of entries (a chunking's chunks, a retriever's levels) in Chroma, queried with our embeddings.

    See the module docstring.

    Build with :func:`open_store`. Thread-safe as far as chromadb's client is; never mutated
    after construction, so one instance can serve every session of the app.
    """

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        host: str | None = None,
        port: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Connect to a Chroma server (``host``) or open the embedded store at ``path``.

        Raises:
            StoreError: the server is down, answers on the wrong port, is not Chroma, or times
                out; the embedded store cannot be opened.
            ParameterError: both ``path`` and ``host``, or a malformed host/port.
        """
        if path is not None and host is not None:
            raise ParameterError("give a Chroma path (embedded) or a host (server), not both")
        self.timeout_s = float(timeout_s) if timeout_s and timeout_s > 0 else chroma_timeout()
        kind, where = store_location(path, host, port)
        self.kind: str = kind
        if kind == "server":
            h, _, p = str(where).rpartition(":")
            self.host, self.port = h, int(p)
            self.location = f"{self.host}:{self.port}"
            self._client = self._connect_server()
        else:
            self.host, self.port = None, None
            self.location = str(where)
            self._client = self._open_embedded(Path(where))

    def __repr__(self) -> str:
        return f"ChunkStore({self.kind}, {self.location!r})"

    # --- connection -------------------------------------------------------------------------

    def _where(self) -> str:
        return f"Chroma server at {self.location}" if self.kind == "server" else f"Chroma store at {self.location}"

    def _open_embedded(self, path: Path) -> Any:
        import chromadb
        from chromadb.config import Settings

        try:
            path.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
        except Exception as e:  # sqlite, filesystem and chromadb errors share no base class
            raise StoreError(f"cannot open the Chroma store at {path}: {_one_line(e)}") from e

    def _probe(self) -> None:
        """Check that a Chroma server answers at host:port within the timeout."""
        import httpx

        url = f"http://{self.location}/api/v2/heartbeat"
        try:
            response = httpx.get(url, timeout=self.timeout_s)
        except httpx.TimeoutException as e:
            raise StoreError(f"Chroma server at {self.location} did not answer within {self.timeout_s:g}s") from e
        except httpx.HTTPError as e:
            raise StoreError(
                f"Chroma server at {self.location} is unreachable ({_one_line(e) or 'connection refused'}); "
                "is it running (chroma run --host … --port …) and are CHROMA_HOST/CHROMA_PORT right?"
            ) from e
        is_chroma = False
        if response.status_code == 200:
            try:
                is_chroma = "nanosecond heartbeat" in response.json()
            except ValueError:
                is_chroma = False
        if not is_chroma:
            raise StoreError(
                f"{self.location} answers HTTP but is not a Chroma server "
                f"(HTTP {response.status_code} on /api/v2/heartbeat); check CHROMA_PORT"
            )

    def _connect_server(self) -> Any:
        self._probe()
        import chromadb
        import httpx
        from chromadb.config import Settings

        try:
            client = chromadb.HttpClient(
                host=self.host, port=self.port, settings=Settings(anonymized_telemetry=False)
            )
        except Exception as e:  # chromadb raises ValueError, httpx errors or its own
            raise StoreError(f"cannot connect to the Chroma server at {self.location}: {_one_line(e)}") from e
        # chromadb's HTTP session has no timeout (it waits forever on a hung server): give it ours.
        session = getattr(getattr(client, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            session.timeout = httpx.Timeout(self.timeout_s)
        return client

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` with connection, timeout and Chroma errors as one-line StoreErrors."""
        import httpx

        try:
            return fn(*args, **kwargs)
        except httpx.TimeoutException as e:
            raise StoreError(f"{self._where()} did not answer {what} within {self.timeout_s:g}s") from e
        except httpx.HTTPError as e:
            raise StoreError(f"{self._where()} is unreachable while {what} ({_one_line(e)})") from e
        except StoreError:
            raise
        except Exception as e:  # chromadb's errors (ChromaError, ValueError, sqlite) share no base class
            raise StoreError(f"{self._where()} failed {what}: {_one_line(e)}") from e

    def heartbeat(self) -> int:
        """The store's heartbeat (nanoseconds); raises :class:`StoreError` when it does not answer."""
        return int(self._call("the heartbeat", self._client.heartbeat))

    # --- collections ------------------------------------------------------------------------

    def _get(self, name: str) -> Any | None:
        """The collection ``name``, or None when it does not exist."""
        try:
            return self._call(f"opening collection {name}", self._client.get_collection, name, embedding_function=None)
        except StoreError as e:
            if e.__cause__ is not None and _is_not_found(e.__cause__):
                return None
            raise

    def collections(self) -> list[dict[str, Any]]:
        """Chunk Lab's collections in this store: ``{"name", "count", **metadata}`` each, sorted by name."""
        out = []
        for col in self._call("listing collections", self._client.list_collections):
            name = col.name if hasattr(col, "name") else str(col)
            if not name.startswith(_NAME_PREFIX):
                continue
            c = self._get(name)
            if c is None:
                continue
            out.append({"name": name, "count": int(self._call("counting", c.count)), **dict(c.metadata or {})})
        return sorted(out, key=lambda r: r["name"])

    def delete(self, name: str) -> bool:
        """Delete collection ``name``; True when it existed."""
        if self._get(name) is None:
            return False
        self._call(f"deleting collection {name}", self._client.delete_collection, name)
        return True

    def is_indexed(self, level: StoredLevel) -> bool:
        """Whether the collection of ``level`` is complete (holds as many rows as the level has entries)."""
        col = self._get(level.name)
        return col is not None and int(self._call("counting", col.count)) == len(level)

    # --- indexing ---------------------------------------------------------------------------

    def write_level(
        self,
        level: StoredLevel,
        embedder: TextEmbedder,
        *,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> IndexInfo:
        """Make sure ``level`` is in the store: reuse a complete collection, else embed and upsert its rows.

        Args:
            level: What to write (:func:`chunking_level`, :func:`entries_level`).
            embedder: The embedding model (vectors are computed here, never by Chroma), unless the
                level brings its own vectors.
            cache: The output cache for embedded texts (None: no caching).
            progress: ``progress(done, total)`` while embedding (unit ``texts``).

        Raises:
            ParameterError: the level's vectors do not match its entries.
            StoreError: the store fails or cannot be reached.
            ModelError: the embedder fails.
        """
        progress = progress or Progress()
        t0 = time.perf_counter()
        n = len(level)
        col = self._get(level.name)
        if col is not None and int(self._call("counting", col.count)) == n:
            progress.set_unit("texts")
            progress(n, n)
            return IndexInfo(level.name, n, True, False, time.perf_counter() - t0)
        if col is None:
            col = self._call(
                f"creating collection {level.name}",
                self._client.get_or_create_collection,
                level.name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata=dict(level.metadata),
                embedding_function=None,
            )
        hit = False
        if level.vectors is not None:
            rows = np.asarray(level.vectors(), dtype=np.float32)
        else:
            rows, hit = embed_texts(embedder, level.texts, cache=cache, progress=progress)
        if rows.shape[0] != n:
            raise ParameterError(f"{n} entries but {rows.shape[0]} vectors")
        info = getattr(embedder, "info", None)
        giver = f"embedder {info.name}" if isinstance(info, ModelInfo) else "the new vectors"
        try:
            self._upsert(level.name, col, list(level.ids), rows, [dict(r) for r in level.rows], list(level.texts))
        except StoreError as e:
            raise _dimension_mismatch(e, col, giver) from None
        count = int(self._call("counting", col.count))
        return IndexInfo(level.name, count, False, hit, time.perf_counter() - t0)

    def _upsert(
        self, name: str, col: Any, ids: list[str], vectors: np.ndarray, metadatas: list[dict], documents: list[str]
    ) -> None:
        """Write rows in batches the client accepts."""
        batch = _MAX_UPSERT
        try:
            batch = max(1, min(batch, int(self._client.get_max_batch_size())))
        except Exception as e:  # an old server without the endpoint: keep our default
            log.debug("max batch size unknown (%s); using %d", e, batch)
        for lo in range(0, len(ids), batch):
            hi = min(lo + batch, len(ids))
            self._call(
                f"writing to collection {name}", col.upsert, ids=ids[lo:hi], embeddings=vectors[lo:hi],
                metadatas=metadatas[lo:hi], documents=documents[lo:hi],
            )

    # --- querying ---------------------------------------------------------------------------

    def query_level(self, name: str, query_embeddings: np.ndarray, k: int, *, label: str = "") -> list[list[EntryHit]]:
        """The ``k`` nearest entries of the collection ``name`` (written by :meth:`write_level`) for each query vector.

        Args:
            name: The collection (:attr:`StoredLevel.name`, :attr:`IndexInfo.name`).
            query_embeddings: Shape ``(queries, dimension)``, from the embedder the level was written with.
            k: Entries per query (fewer when the level has fewer).
            label: What the level is, for the error when it is missing (default: its name).

        Returns:
            For each query, its entries by increasing distance (rank 1 first); a chunk's ranges
            are its one span.

        Raises:
            ParameterError: ``k`` below 1.
            StoreError: no such collection, or the store fails.
        """
        if k < 1:
            raise ParameterError(f"k ({k}) must be at least 1")
        vectors = np.atleast_2d(np.asarray(query_embeddings, dtype=np.float32))
        if vectors.shape[0] == 0:
            return []
        col = self._get(name)
        if col is None:
            raise StoreError(f"{label or 'collection ' + name} is not indexed in the {self._where()}: index it first")
        n = min(k, int(self._call("counting", col.count)))
        if n == 0:
            return [[] for _ in range(vectors.shape[0])]
        try:
            result = self._call(
                f"querying collection {name}", col.query, query_embeddings=vectors, n_results=n,
                include=["metadatas", "distances"],
            )
        except StoreError as e:
            raise _dimension_mismatch(e, col, "the query embedder") from None
        return [
            [EntryHit(rank=r + 1, distance=float(d), index=int(m["index"]), ranges=_row_ranges(m), tokens=int(m["tokens"]))
             for r, (m, d) in enumerate(zip(metas, dists))]
            for metas, dists in zip(result["metadatas"], result["distances"])
        ]


def _row_ranges(meta: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    """A row's exact ranges: a level entry's ``ranges``, a chunk's one span."""
    if "ranges" in meta:
        return tuple((int(x), int(y)) for x, y in json.loads(str(meta["ranges"])))
    return ((int(meta["start"]), int(meta["end"])),)


_DIMENSION = re.compile(r"dimension of (\d+), got (\d+)")


def _dimension_mismatch(e: StoreError, col: Any, embedder: str) -> StoreError:
    """``e`` as one clear line when Chroma refused vectors of another length than the collection's; else ``e``."""
    m = _DIMENSION.search(str(e))
    if m is None:
        return e
    built = (getattr(col, "metadata", None) or {}).get("embedder") or "another embedder"
    return StoreError(
        f"collection {col.name} holds {m[1]}-dimensional vectors (built with {built}); {embedder} gives {m[2]}: "
        f"use the embedder it was built with, or delete the collection to rebuild it with this one"
    )


def _is_not_found(e: BaseException) -> bool:
    from chromadb.errors import NotFoundError

    return isinstance(e, NotFoundError) or "does not exist" in str(e)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:299] + "…"


_stores: dict[tuple[str, str, float], ChunkStore] = {}
_stores_lock = threading.Lock()


def open_store(
    path: str | Path | None = None,
    host: str | None = None,
    port: int | None = None,
    *,
    timeout_s: float | None = None,
) -> ChunkStore:
    """The store at ``path`` or on ``host:port`` (default: ``CHROMA_HOST``, else embedded), one per location.

    A server store is only kept once it connected; a failed connection is retried next call.

    Raises:
        StoreError: the server cannot be reached (see :class:`ChunkStore`).
        ParameterError: a malformed host or port.
    """
    kind, where = store_location(path, host, port)
    timeout = float(timeout_s) if timeout_s and timeout_s > 0 else chroma_timeout()
    key = (kind, str(where), timeout)
    with _stores_lock:
        store = _stores.get(key)
    if store is not None:
        return store
    if kind == "server":
        h, _, p = str(where).rpartition(":")
        store = ChunkStore(host=h, port=int(p), timeout_s=timeout)
    else:
        store = ChunkStore(path=where, timeout_s=timeout)
    with _stores_lock:
        return _stores.setdefault(key, store)


_SQLITE = "chroma.sqlite3"  # an embedded store's database, made when the client opens


@contextmanager
def store_for_command(
    path: str | Path | None = None, host: str | None = None, port: int | None = None
) -> Iterator[ChunkStore]:
    """:func:`open_store` for one command: an embedded store it creates is removed if the command fails before writing.

    When the body raises (a failure, a cancel, Ctrl-C) and the store is embedded, did not exist
    before (no ``chroma.sqlite3``) and holds no collection, its client is closed and the files
    Chroma made are deleted, the folder too when this call made it and it is empty then. A
    store that existed before is never touched, nor one the command wrote a collection into
    (its rows are kept: the rerun completes them).

    Raises:
        StoreError, ParameterError: as :func:`open_store`.
    """
    kind, where = store_location(path, host, port)
    folder = Path(where) if kind == "embedded" else None
    fresh = folder is not None and not (folder / _SQLITE).exists()
    new_folder = folder is not None and not folder.exists()
    store = open_store(path, host, port)
    try:
        yield store
    except BaseException:
        if fresh and folder is not None:
            _remove_unwritten(store, folder, new_folder)
        raise


def _remove_unwritten(store: ChunkStore, folder: Path, new_folder: bool) -> None:
    """Close ``store`` and delete its files when it holds no collection (of Chunk Lab's or anyone's)."""
    try:
        if store._client.list_collections():
            return
        store._client.close()  # releases the database before its file goes
    except Exception as e:  # chromadb and sqlite errors share no base class; the command's own error matters more
        log.warning("the new Chroma store at %s is left in place: %s", folder, _one_line(e))
        return
    with _stores_lock:
        for key in [k for k, v in _stores.items() if v is store]:
            del _stores[key]
    for name in (_SQLITE, f"{_SQLITE}-journal", f"{_SQLITE}-wal", f"{_SQLITE}-shm"):
        (folder / name).unlink(missing_ok=True)
    if new_folder:
        try:
            folder.rmdir()  # only when empty: nothing but Chroma's own files is ever deleted
        except OSError:
            pass
