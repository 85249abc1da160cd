"""The one loop over chunker configurations: each one's chunking, or why there is none.

Every page that chunks several configurations, and the jobs that run the model-backed
ones, go through here, so they agree on what happens when one configuration cannot be
chunked: it never hides the others. Per configuration a :class:`ChunkOutcome` says

- ``done``: here is its chunking;
- ``pending``: it needs a model run that is not in the output cache yet
  (:class:`~backend.errors.NotCached`, raised by a cache-only context);
- ``failed``: a one-line message — a :class:`~backend.errors.ChunkLabError`'s own, or
  ``Type: message`` for any other exception, whose traceback goes to the log.

A cancel (:class:`~backend.errors.Cancelled`) stops the whole loop. How one configuration
is chunked is the caller's (a callable): the app passes its cached lookups, so this module
keeps no cache and no session of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

from backend.chunkers.base import config_needs, run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import Cancelled, ChunkLabError, NotCached, one_line
from backend.models.types import Scorer
from backend.progress import Progress
from backend.text.document import Document

__all__ = ["ChunkOutcome", "ChunkFn", "needs_model", "chunk_all", "run_configs"]

_log = logging.getLogger(__name__)

# chunk(document, configuration) -> its chunking; may raise NotCached, ChunkLabError, anything.
ChunkFn = Callable[["Document", "ChunkerConfig"], "Chunking"]


@dataclass(frozen=True)
class ChunkOutcome:
    """What became of one configuration.

    Attributes:
        config: The configuration.
        state: ``done`` (``chunking`` is set), ``pending`` (needs a model run that is not
            cached) or ``failed`` (``error`` is set).
        chunking: The chunking when ``done``, else None.
        error: The one-line message when ``failed``, else None.
    """

    config: ChunkerConfig
    state: Literal["done", "pending", "failed"]
    chunking: Chunking | None = None
    error: str | None = None


def needs_model(config: ChunkerConfig) -> bool:
    """Whether the configuration's chunker runs a model (:func:`~backend.chunkers.base.config_needs`)."""
    return bool(config_needs(config))


def _outcome(doc: Document, config: ChunkerConfig, chunk: ChunkFn) -> ChunkOutcome:
    """``chunk(doc, config)`` as an outcome; only a cancel propagates."""
    try:
        chunking = chunk(doc, config)
    except Cancelled:
        raise
    except NotCached:
        return ChunkOutcome(config, "pending")
    except ChunkLabError as e:
        return ChunkOutcome(config, "failed", error=one_line(str(e)))
    except Exception as e:  # one failing chunker must not hide the others: one line here, the traceback logged
        _log.exception("chunking with %s failed", config.label)
        return ChunkOutcome(config, "failed", error=one_line(f"{type(e).__name__}: {e}"))
    return ChunkOutcome(config, "done", chunking=chunking)


def chunk_all(
    doc: Document,
    configs: Iterable[ChunkerConfig],
    chunk: ChunkFn | None = None,
    *,
    with_model: ChunkFn | None = None,
) -> list[ChunkOutcome]:
    """Chunk ``doc`` with every configuration, in order: one :class:`ChunkOutcome` each.

    Args:
        doc: The document.
        configs: The configurations (the same one twice gives two outcomes).
        chunk: How a configuration is chunked (default: ``run_chunker(doc, config)``).
        with_model: How a model-backed configuration (:func:`needs_model`) is chunked, when
            that differs: the app reads those from its model runs or a cache-only context,
            so a miss is ``pending`` instead of a model loading in the page.

    Returns:
        The outcomes, one per configuration and in the same order.

    Raises:
        Cancelled: ``chunk`` was cancelled (the remaining configurations do not run).
    """
    if chunk is None:
        chunk = run_chunker
    out = []
    for config in configs:
        fn = with_model if with_model is not None and needs_model(config) else chunk
        out.append(_outcome(doc, config, fn))
    return out


def run_configs(
    doc: Document,
    configs: Sequence[ChunkerConfig],
    scorer: Scorer | None,
    progress: Progress,
    embedder_spec: str | None = None,
    chat: Any = None,
) -> list[ChunkOutcome]:
    """Run model-backed configurations one after the other, computing what is not cached (a job's body).

    Each runs with a :class:`~backend.chunkers.context.ModelContext` around ``scorer`` (None:
    loaded on first use), the embedder ``embedder_spec`` and the chat model ``chat`` (None:
    the default), and its share of ``progress``: its label counts that configuration's own
    units (tokens scored, pairs, texts embedded) as they are done. The model outputs land in the output cache,
    so a cache-only context reads them back afterwards. One configuration failing does not
    stop the others; a cancel stops them all.

    Returns:
        One outcome per configuration, ``done`` or ``failed``.

    Raises:
        Cancelled: ``progress`` was cancelled.
    """
    out = []
    for k, config in enumerate(configs):
        part = progress.part(k, len(configs), "configuration")
        context = ModelContext(scorer=scorer, embedder_spec=embedder_spec, chat=chat, progress=part)
        out.append(_outcome(doc, config, lambda d, c, ctx=context: run_chunker(d, c, ctx)))
    return out
