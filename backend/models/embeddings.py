"""Embeddings of texts through the on-disk output cache, keyed by the embedder's weights (or served identity).

A list of texts (a chunking's chunks, a question set's questions, one live query) is one
cache entry, keyed by the embedder's weight fingerprint and the sha256 of the texts' own
digests: a rerun over the same texts with the same model reads the vectors back without
loading the model. One entry per list, not per text, keeps a 2,000-chunk chunking one read.

Per-text reuse. A list that is not cached may still share most of its texts with lists that
are (an edited chunking differs from its base in the chunks around the edits): when a list is
computed, each text's vector is also stored under the key of the one-text list
(``embeddings_key(fingerprint, [text])``, the entry :func:`embed_texts` of that text alone would
write), and a list not cached looks its texts up there first and embeds only the missing ones.
A text's vector read back is the one computed before (float32, as the list entries hold it);
the missing texts are embedded in parts, each stored per text as it is done, so a run cut
short keeps them. A text's entry is about 2.5 times its 384 floats on disk (1,000 chunks: about
4 MB beside the list's entry); the cache's size bound evicts the least recently used as usual.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from backend.errors import ModelError
from backend.models.cache import OutputCache, text_digest
from backend.models.embedder import embedder_name, load_embedder, resolve_embedder_spec
from backend.models.identity import embedder_fingerprint_without_loading
from backend.models.rates import RateKey, rate_store
from backend.models.remote_embedder import is_remote_embedder
from backend.models.timing import record_cached, timed
from backend.models.types import ModelInfo
from backend.progress import Progress

__all__ = [
    "TextEmbedder",
    "LazyEmbedder",
    "texts_digest",
    "embed_texts",
    "embeddings_key",
    "embedded_in_parts",
    "load_text_embedder",
    "lazy_text_embedder",
    "cached_text_vectors",
]

log = logging.getLogger(__name__)

_VERSION = 1


class TextEmbedder(Protocol):
    """What the retrieval lab needs of an embedder.

    :class:`backend.models.embedder.Embedder` and
    :class:`backend.models.remote_embedder.RemoteEmbedder` are ones.
    """

    info: ModelInfo

    def embed(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        """L2-normalized float32 vectors, one row per text."""
        ...


def load_text_embedder(spec: str | TextEmbedder | None = None) -> TextEmbedder:
    """``spec`` itself when it is already an embedder, else :func:`backend.models.embedder.load_embedder` of it.

    ``None`` and ``"default"`` mean ``CHUNKLAB_EMBEDDER`` or the bundled all-MiniLM-L6-v2.

    Raises:
        ModelError: the model cannot be found or loaded.
    """
    if spec is not None and not isinstance(spec, str):
        return spec
    return load_embedder(None if spec is None or spec.strip().lower() == "default" else spec)


class LazyEmbedder:
    """An embedder known by name and weight fingerprint whose model loads on its first ``embed``.

    For jobs whose vectors may all be in the output cache (a store filled from cached
    embeddings, a benchmark run before): :func:`embed_texts` keys the cache by ``info`` alone,
    so a fully cached run never loads the model. Build one with :func:`lazy_text_embedder`.
    """

    def __init__(self, spec: str | None, info: ModelInfo) -> None:
        self.info = info
        self._spec = spec
        self._model: TextEmbedder | None = None
        self._lock = threading.Lock()

    def model(self) -> TextEmbedder:
        """The loaded embedder (loaded now on first use).

        Raises:
            ModelError: it cannot be loaded, or its weights are not the ones ``info`` names.
        """
        with self._lock:
            if self._model is None:
                model = load_embedder(self._spec)
                if model.info.fingerprint != self.info.fingerprint:
                    what = "the server now serves another model" if model.info.device == "remote" else "its weights changed"
                    raise ModelError(f"{self.info.name}: {what} since it was fingerprinted")
                self._model = model
            return self._model

    @property
    def dimension(self) -> int:
        """The vectors' length (loads the model)."""
        return int(getattr(self.model(), "dimension", 0))

    def embed(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        """L2-normalized float32 vectors, one row per text (loads the model on first use)."""
        return self.model().embed(texts, progress=progress)

    def input_keys(self, texts: Sequence[str]) -> list[bytes] | None:
        """The loaded model's ``input_keys`` of ``texts`` (None when it has none)."""
        keys = getattr(self.model(), "input_keys", None)
        return keys(texts) if keys is not None else None


def lazy_text_embedder(spec: str | None = None) -> TextEmbedder:
    """:func:`load_text_embedder` of ``spec``, deferred to its first ``embed`` when its identity is known without loading.

    A bundled or local embedder folder is fingerprinted from its files (a :class:`LazyEmbedder`);
    a hub id is loaded now, as its fingerprint needs the model. A remote embedder connects now
    (or is the one this process connected to): its identity is what the server says it serves,
    which no setting can stand for, so cached vectors are never looked up by the name asked for.

    Raises:
        ModelError: ``spec`` names no model (or a hub id cannot be loaded).
    """
    resolved = None if spec is None or spec.strip().lower() == "default" else spec
    if is_remote_embedder(resolve_embedder_spec(resolved)):
        return load_text_embedder(resolved)
    fingerprint = embedder_fingerprint_without_loading(resolved)
    if fingerprint is None:
        return load_text_embedder(resolved)
    return LazyEmbedder(resolved, ModelInfo(embedder_name(resolved), resolved or "", "embedder", 0, "", "", fingerprint))


def texts_digest(texts: Sequence[str]) -> str:
    """sha256 over the texts' digests, in order (equal lists, equal digests)."""
    outer = hashlib.sha256()
    for t in texts:
        outer.update(text_digest(t).encode("ascii"))
    return outer.hexdigest()


def embeddings_key(fingerprint: str, texts: Sequence[str]) -> dict[str, str | int]:
    """The cache key of ``texts`` embedded by the model whose weights hash to ``fingerprint``."""
    return {"kind": "embeddings", "model": fingerprint, "texts": texts_digest(texts), "n": len(texts), "version": _VERSION}


EMBED_PART = 256  # texts per checkpoint of a long list: a run cut short keeps its finished parts


def _part_key(key: dict[str, str | int], part: tuple[int, int]) -> dict[str, str | int]:
    return {**key, "kind": "embeddings_part", "lo": part[0], "hi": part[1]}


def _in_parts(
    embedder: TextEmbedder,
    texts: list[str],
    key: dict[str, str | int],
    parts: list[tuple[int, int]],
    cache: OutputCache,
    progress: Progress,
) -> Callable[[], dict[str, np.ndarray]]:
    """``compute`` for :func:`embed_texts` that stores each part as it is done and reuses the parts stored before."""

    def compute() -> dict[str, np.ndarray]:
        rows: list[np.ndarray] = []
        reused = 0
        for lo, hi in parts:
            got = cache.get(_part_key(key, (lo, hi)))
            vectors = None if got is None else np.asarray(got.get("vectors"), dtype=np.float32)
            if vectors is None or vectors.ndim != 2 or vectors.shape[0] != hi - lo:
                sub = progress.slice(lo, hi - lo, len(texts))
                vectors = _measured_embed(embedder, texts[lo:hi], sub)
                cache.put(_part_key(key, (lo, hi)), {"vectors": vectors})
            else:
                reused += hi - lo
                progress(hi, len(texts))
            rows.append(vectors)
        if reused:
            log.info("resumed: %d of %d texts were already embedded", reused, len(texts))
        return {"vectors": np.concatenate(rows, axis=0)}

    return compute


def embedded_in_parts(cache: OutputCache, fingerprint: str, texts: Sequence[str]) -> int:
    """How many of ``texts`` an interrupted :func:`embed_texts` run left embedded (its stored parts); 0 if none.

    0 as well once the whole list is cached. Checks the entries exist without reading them, and
    needs only the embedder's fingerprint (a page asks it to offer "resume" without loading a model).
    """
    texts = list(texts)
    if len(texts) <= EMBED_PART:
        return 0
    key = embeddings_key(fingerprint, texts)
    if cache.contains(key):
        return 0
    parts = [(lo, min(lo + EMBED_PART, len(texts))) for lo in range(0, len(texts), EMBED_PART)]
    return sum(hi - lo for lo, hi in parts if cache.contains(_part_key(key, (lo, hi))))


def cached_text_vectors(cache: OutputCache, fingerprint: str, texts: Sequence[str]) -> list[np.ndarray | None]:
    """Each text's vector stored on its own (:func:`embed_texts` stores them as it computes lists), None where absent.

    A plain lookup, no model: one read per distinct text, and none for a text with no entry
    (checked without reading it).
    """
    found: dict[str, np.ndarray | None] = {}
    for text in texts:
        if text in found:
            continue
        key = embeddings_key(fingerprint, [text])
        value = cache.get(key) if cache.contains(key) else None
        vector = None if value is None else np.asarray(value.get("vectors"), dtype=np.float32)
        found[text] = vector[0] if vector is not None and vector.ndim == 2 and vector.shape[0] == 1 else None
    return [found[t] for t in texts]


def _store_text_vectors(cache: OutputCache, fingerprint: str, texts: Sequence[str], vectors: np.ndarray) -> None:
    """Store each text's row under its one-text key (those stored already are left as they are)."""
    seen: set[str] = set()
    for text, row in zip(texts, vectors, strict=True):
        if text in seen:
            continue
        seen.add(text)
        key = embeddings_key(fingerprint, [text])
        if not cache.contains(key):
            cache.put(key, {"vectors": np.asarray(row, dtype=np.float32)[None, :]})


def _reusing(
    embedder: TextEmbedder, texts: list[str], found: list[np.ndarray | None], cache: OutputCache, progress: Progress
) -> Callable[[], dict[str, np.ndarray]]:
    """``compute`` for :func:`embed_texts` that embeds only the texts with no vector of their own in the cache.

    The missing texts go in parts of :data:`EMBED_PART`, each part's vectors stored per text as it
    is done: a run cut short keeps them, and the next one embeds only the rest.
    """

    def compute() -> dict[str, np.ndarray]:
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        computed: dict[str, np.ndarray] = {}
        for lo in range(0, len(missing), EMBED_PART):
            part = missing[lo : lo + EMBED_PART]
            vectors = _measured_embed(embedder, part, progress.slice(lo, len(part), len(missing)))
            _store_text_vectors(cache, embedder.info.fingerprint, part, vectors)
            computed.update(zip(part, vectors, strict=True))
        rows = [v if v is not None else computed[t] for t, v in zip(texts, found, strict=True)]
        return {"vectors": np.stack(rows).astype(np.float32, copy=False)}

    return compute


def _measured_embed(embedder: TextEmbedder, texts: list[str], progress: Progress) -> np.ndarray:
    """``embedder.embed(texts)`` as float32, its speed added to the rate store (:mod:`backend.models.rates`)."""
    started = time.perf_counter()
    vectors = np.asarray(embedder.embed(texts, progress=progress), dtype=np.float32)
    info = getattr(embedder, "info", None)
    if isinstance(info, ModelInfo):
        chars = float(sum(len(t) for t in texts))
        rate_store().record(RateKey.of(info, "embed"), len(texts), chars, time.perf_counter() - started, chars)
    return vectors


def embed_texts(
    embedder: TextEmbedder,
    texts: Sequence[str],
    *,
    cache: OutputCache | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, bool]:
    """The embeddings of ``texts``, from ``cache`` when this model embedded these texts before.

    Args:
        embedder: The model (its ``info.fingerprint`` keys the cache).
        texts: The texts, in order.
        cache: The output cache; None computes without caching.
        progress: ``progress(texts embedded, texts)`` while embedding (unit ``texts``; all at once on a hit).

    Returns:
        ``(vectors, hit)``: float32 rows, L2-normalized, and whether they came from the cache.
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, getattr(embedder, "dimension", 0)), dtype=np.float32), False
    progress = progress or Progress()
    progress.set_unit("texts")
    info = getattr(embedder, "info", None)
    measured = rate_store().of_model(info, "embed") if isinstance(info, ModelInfo) else None
    progress.expect(measured.units_per_s if measured is not None else None)  # an ETA from the first text

    def compute() -> dict[str, np.ndarray]:
        return {"vectors": _measured_embed(embedder, texts, progress)}

    if cache is None:
        return timed(compute)()["vectors"], False
    fingerprint = embedder.info.fingerprint
    key = embeddings_key(fingerprint, texts)
    parts = [(lo, min(lo + EMBED_PART, len(texts))) for lo in range(0, len(texts), EMBED_PART)]
    if len(texts) > 1 and not cache.contains(key):
        found = cached_text_vectors(cache, fingerprint, texts)
        if any(v is not None for v in found):  # another list held some of these texts: embed only the others
            compute = _reusing(embedder, texts, found, cache, progress)
            parts = [(0, len(texts))]
    if len(parts) > 1:
        compute = _in_parts(embedder, texts, key, parts, cache, progress)
    value, hit = cache.get_or_compute(key, timed(compute), progress=progress)
    if hit:
        record_cached(value)
    for part in parts if len(parts) > 1 else ():
        cache.discard(_part_key(key, part))  # the whole list's entry holds them now
    vectors = np.asarray(value["vectors"], dtype=np.float32)
    if vectors.shape[0] != len(texts):  # a foreign entry under our key: recompute rather than trust it
        vectors, hit = compute()["vectors"], False
    if not hit and len(texts) > 1:
        _store_text_vectors(cache, fingerprint, texts, vectors)
    progress(len(texts), len(texts))  # all done (a hit, or an embedder that reports less often)
    return vectors, hit
