"""A remote embedder known by what it computes: the vectors it returns for one fixed probe text.

A server's listing says little about the weights behind a name: infinity, Text Embeddings
Inference and Ollama give an id only, so the name and the vectors' length are all a cache key
could hold, and a different model served under the same name (a MiniLM copy pooled on
``[CLS]`` instead of the mean) would read the first one's cached vectors and chunks. So each
connection embeds :data:`PROBE_TEXT`, and the vector is compared with the ones this data
directory has seen under the same listed identity (the listing's facts and the vector length,
:class:`~backend.models.openai_compat.ServedModel`): a cosine of at least :data:`SAME_COSINE`
is the same model (float noise of another batch, device or precision stays far above it); anything
else is another model, remembered beside the first one. The identity that keys cached vectors
is the sha256 of the remembered vector it matched, so it does not move with float noise.

The vectors live in ``embedder_probes.json`` in the data directory
(:func:`backend.config.data_dir`), written atomically; a data directory that cannot be written
only costs this check its memory (each process then keys by the vector it got).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backend.config import data_dir
from backend.models.jsonstore import read_json_dict, write_json_atomic

__all__ = ["PROBE_TEXT", "PROBES_FILE", "SAME_COSINE", "ProbeMatch", "match_probe"]

PROBE_TEXT = "Chunk Lab"
"""The text embedded at each connection (it also gives the vectors' length and a first speed)."""
PROBES_FILE = "embedder_probes.json"  # in the data directory
SAME_COSINE = 0.9999
"""The least cosine between two probe vectors of one model (one model's float noise gives > 0.99999)."""
_DECIMALS = 6  # a remembered vector's values (float32 holds about 7 digits)

_lock = threading.Lock()  # one read-modify-write of the file at a time in this process


@dataclass(frozen=True)
class ProbeMatch:
    """Which of the models seen under one listed identity a probe vector is.

    Attributes:
        digest: The sha256 of the remembered vector matched (or just remembered): part of the cache identity.
        index: Its place among the models seen under that identity, from 0 (the first one seen).
        seen: How many models that identity has had here, this one included.
        cosine: When this vector matched none: its highest cosine with one of the others (None otherwise).
    """

    digest: str
    index: int
    seen: int
    cosine: float | None = None

    @property
    def new_model(self) -> bool:
        """Whether this vector is another model than every one seen under the identity before."""
        return self.cosine is not None


def match_probe(identity: str, vector: np.ndarray, path: Path | None = None) -> ProbeMatch:
    """The model among those seen under ``identity`` that computed ``vector``; a new one is remembered.

    Args:
        identity: The listed identity (no URL, no key), e.g. a :meth:`ServedModel.fingerprint`.
        vector: The probe text's vector (any length; compared by cosine).
        path: The file of remembered vectors (default: :data:`PROBES_FILE` in the data directory).
    """
    path = path if path is not None else data_dir() / PROBES_FILE
    row = np.round(np.asarray(vector, dtype=np.float64).ravel(), _DECIMALS)
    with _lock:
        known = read_json_dict(path)
        found = _match(known.get(identity), row)
        if found is not None:
            return found
        others = [np.asarray(v, dtype=np.float64) for v in _rows(known.get(identity))]
        known[identity] = [*_rows(known.get(identity)), row.tolist()]
        write_json_atomic(path, known)  # a read-only data dir: this process keys by its own vector
    cosine = max((_cosine(v, row) for v in others if v.shape == row.shape), default=-1.0) if others else None
    return ProbeMatch(_digest(row), len(others), len(others) + 1, cosine)


def _rows(entries: object) -> list[list[float]]:
    """The remembered vectors of one identity, as stored (anything else dropped)."""
    return [v for v in entries if isinstance(v, list)] if isinstance(entries, list) else []


def _match(entries: object, row: np.ndarray) -> ProbeMatch | None:
    """The remembered vector among ``entries`` that ``row`` is the same model as (the closest); None when none is."""
    seen = [np.asarray(v, dtype=np.float64) for v in _rows(entries)]
    cosines = [_cosine(v, row) if v.shape == row.shape else -1.0 for v in seen]
    if not cosines or max(cosines) < SAME_COSINE:
        return None
    k = int(np.argmax(cosines))
    return ProbeMatch(_digest(seen[k]), k, len(seen))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors (0 when one is zero)."""
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm > 0 else 0.0


def _digest(row: np.ndarray) -> str:
    """sha256 of a remembered vector's values, as stored (rounded to ``_DECIMALS``)."""
    text = ",".join(f"{x:.{_DECIMALS}f}" for x in row)
    return hashlib.sha256(text.encode("ascii")).hexdigest()
