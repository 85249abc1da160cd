"""What each chunker cut on: its curve (values, threshold, chunk ends), for Compare and ``python -m backend curve``.

Any registered chunker that overrides ``Chunker.curve`` has one (:func:`has_curve`). A
model-backed chunker's curve is read from the output cache only, through the same cache-only
context as its chunking: a miss raises :class:`~backend.errors.NotCached` and never calls a model.
"""

from __future__ import annotations

from typing import Sequence

from backend.chunkers import REGISTRY, config_needs, make_chunker
from backend.chunking import ChunkerConfig
from backend.curves import Curve
from backend.errors import ChunkLabError, NotCached
from backend.lab.models import SessionModels
from backend.text.document import Document

__all__ = ["has_curve", "grows_while_scored", "cached_curve_of"]


def has_curve(config: ChunkerConfig) -> bool:
    """Whether ``config``'s chunker has a curve (the registry's ``has_curve``)."""
    cls = REGISTRY.get(config.name)
    return cls is not None and cls.has_curve()


def grows_while_scored(configs: Sequence[ChunkerConfig]) -> bool:
    """Whether a first scoring pass of these configurations can show its curve growing (a PPL-style curve)."""
    return any(has_curve(c) and "lm" in config_needs(c) for c in configs)


def cached_curve_of(doc: Document, config: ChunkerConfig, models: SessionModels | None) -> Curve | None:
    """``config``'s curve of ``doc`` with no model call.

    Raises:
        NotCached: it needs a model run that the output cache does not hold (or no models yet).
        ChunkLabError: the session's language model cannot be used (its one line).
    """
    chunker = make_chunker(config.name, config.params_dict, config.tokenizer)
    if not chunker.needs:
        return chunker.curve(doc, None)
    if models is None:
        raise NotCached("no model for this configuration yet")
    if models.error:
        raise ChunkLabError(models.error)
    context = models.cache_only()
    if context is None:
        raise NotCached(f"{models.name} has not run on this document yet")
    return chunker.curve(doc, context)
