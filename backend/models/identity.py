"""A model's identity without loading it: the fingerprint its cached outputs are keyed by.

A rerun looks up the output cache by the model's fingerprint (the sha256 of its weights).
When the weights are files on disk, that fingerprint is known from the files alone, so a
cache hit needs no model, no torch and no GPU. A hub id has no local files to hash: its
fingerprint is known only once it is loaded (None here). A remote embedder's identity is what
its server says it serves: known once this process has connected to it, None before (a cache
lookup must not trust the name asked for).
"""

from __future__ import annotations

from pathlib import Path

from backend.models.devices import requested_precision
from backend.models.embedder import DEFAULT_EMBEDDER, resolve_embedder_spec, weights_fingerprint
from backend.models.lm import file_sha256, resolve_spec
from backend.models.remote_embedder import connected_remote_embedder, is_remote_embedder
from backend.tokenizers import minilm_dir

__all__ = ["fingerprint_without_loading", "embedder_fingerprint_without_loading"]


def fingerprint_without_loading(spec: str | None) -> str | None:
    """The weights' fingerprint of a GGUF language-model spec (hashed once, then remembered); None for other kinds.

    Args:
        spec: A model spec for :func:`backend.models.lm.load_lm` (None: ``CHUNKLAB_LM`` or the bundled one).

    Raises:
        ModelError: ``spec`` names no model.
    """
    kind, location = resolve_spec(spec)  # a spec naming no model fails here, before any loading
    if requested_precision() != "float32":
        return None  # its key depends on the device it lands on (the CPU only has precisions): load to know
    return file_sha256(Path(location)) if kind == "gguf" else None


def embedder_fingerprint_without_loading(spec: str | None) -> str | None:
    """The weights' fingerprint of the bundled embedder or a local embedder folder; None for a hub id.

    A remote embedder's served fingerprint when this process has connected to it; None before.

    Args:
        spec: An embedder spec for :func:`backend.models.embedder.load_embedder` (None:
            ``CHUNKLAB_EMBEDDER`` or the bundled all-MiniLM-L6-v2).

    Raises:
        ModelError: ``spec`` names no embedder.
    """
    resolved = resolve_embedder_spec(spec)  # a spec naming no model fails here, before any loading
    if resolved == DEFAULT_EMBEDDER:
        return weights_fingerprint(minilm_dir())
    if is_remote_embedder(resolved):
        connected = connected_remote_embedder(resolved)
        return connected.info.fingerprint if connected is not None else None
    path = Path(resolved)
    return weights_fingerprint(path) if path.is_absolute() else None
