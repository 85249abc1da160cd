"""Chunkers built from spec strings, and what they return.

A spec is the string the CLI's ``--config`` and the app's configuration cards use:
``"recursive chunk_size=200"``, ``"ppl threshold=0.4"``, ``"semantic breakpoint=percentile amount=95
tokenizer=o200k"``. :class:`Chunker` builds the registered chunker once, and a model-backed one
loads its model on first use and keeps it for every later call on the same object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from backend.chunkers import ModelContext, chunker_specs, make_chunker
from backend.chunking import Chunking as BackendChunking
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.text.document import Document

from chunklab.documents import as_document

__all__ = ["Chunk", "Chunking", "Chunker", "chunker", "chunk", "chunkers", "model_context"]


@dataclass(frozen=True)
class Chunk:
    """One chunk: an exact span of its document's text (``text == document.text[start:end]``).

    Attributes:
        index: Its position in the chunking (from 0).
        start: Its first character in ``document.text``.
        end: One past its last character.
        text: ``document.text[start:end]``.
        tokens: Its length in the chunker's tokenizer.
        page: The 1-based page its first character is on (1 for formats without pages).
        last_page: The page its last character is on.
    """

    index: int
    start: int
    end: int
    text: str
    tokens: int
    page: int
    last_page: int

    def to_json(self) -> dict[str, Any]:
        """``python -m backend chunk``'s record (index, start, end, text, tokens) with the pages."""
        return {
            "index": self.index, "start": self.start, "end": self.end, "text": self.text, "tokens": self.tokens,
            "page": self.page, "last_page": self.last_page,
        }


class Chunking(Sequence[Chunk]):
    """A document's chunks, in order, with the configuration that made them.

    A sequence of :class:`Chunk`; ``result`` is the backend's record (timing, the chunker's run
    report) for the metrics and anything else in ``backend``.
    """

    def __init__(self, document: Document, result: BackendChunking) -> None:
        self.document = document
        self.result = result
        page = document.page_of
        self._chunks = tuple(
            Chunk(c.index, c.start, c.end, c.text, c.tokens, page(c.start), page(max(c.start, c.end - 1)))
            for c in result.chunks
        )

    def __getitem__(self, i):  # type: ignore[override]  (int → Chunk, slice → tuple)
        return self._chunks[i]

    def __len__(self) -> int:
        return len(self._chunks)

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self._chunks)

    def __repr__(self) -> str:
        return f"<Chunking {self.spec!r} of {self.document.source!r}: {len(self)} chunks>"

    @property
    def spec(self) -> str:
        """The configuration as a spec string (what :class:`Chunker` takes back)."""
        return self.result.config.spec

    @property
    def texts(self) -> list[str]:
        """The chunks' texts, in order."""
        return [c.text for c in self._chunks]

    @property
    def spans(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every chunk, in order."""
        return [(c.start, c.end) for c in self._chunks]

    @property
    def report(self) -> str | None:
        """What the chunker reported about its run (e.g. an LLM chunker's content loss), else None."""
        return self.result.run_report

    def to_jsonl(self) -> str:
        """One JSON object per chunk and line, as ``python -m backend chunk`` prints, with the pages added."""
        return "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in self._chunks)


class Chunker:
    """A chunker from a spec string, with the models it needs loaded once per object.

    Args:
        spec: ``"NAME key=value … [tokenizer=T]"``, e.g. ``"recursive chunk_size=200"``
            (``chunklab.chunkers()`` lists the names and parameters).
        lm: The language model of the PPL and margin-sampling chunkers: None (``CHUNKLAB_LM`` or
            the bundled SmolLM2-135M), a checkpoint folder, a ``.gguf`` file, a hub id, or
            ``"remote"`` (the OpenAI-compatible server of ``CHUNKLAB_REMOTE_BASE_URL``).
        embedder: The embedder of the semantic chunkers: None (``CHUNKLAB_EMBEDDER`` or the bundled
            all-MiniLM-L6-v2), a model folder, a hub id, ``"remote"`` or an ``http(s)://…/v1`` URL.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"mps"``; None: ``CHUNKLAB_DEVICE``, else auto.
        window: The language model's context window in tokens (None: the model's own).
        cache: Read and write the on-disk cache of model outputs (``CHUNKLAB_CACHE_DIR``).

    Raises:
        chunklab.ParameterError: an unknown chunker, parameter or tokenizer, or a bad value.

    >>> Chunker("recursive chunk_size=200").chunk("Some text.")[0].text
    'Some text.'
    """

    def __init__(
        self,
        spec: str,
        *,
        lm: str | None = None,
        embedder: str | None = None,
        device: str | None = None,
        window: int | None = None,
        cache: bool = True,
    ) -> None:
        if not isinstance(spec, str):
            raise TypeError(f"a chunker spec is a str such as 'recursive chunk_size=200', not {type(spec).__name__}")
        try:
            name, params, tokenizer = ChunkerConfig.parse(spec)
        except ValueError as e:
            raise ParameterError(f"{spec!r}: {e}") from None
        self._chunker = make_chunker(name, params, tokenizer)
        self.context = model_context(lm=lm, embedder=embedder, device=device, window=window, cache=cache)

    @property
    def spec(self) -> str:
        """The configuration as a canonical spec string (defaults filled in)."""
        return self._chunker.config.spec

    @property
    def config(self) -> ChunkerConfig:
        """The backend's configuration record (hashable; what the cache keys and exports use)."""
        return self._chunker.config

    @property
    def name(self) -> str:
        """The registered chunker's name."""
        return self._chunker.config.name

    @property
    def label(self) -> str:
        """A short human label, e.g. ``recursive(chunk_size=200, chunk_overlap=0) · cl100k``."""
        return self._chunker.config.label

    @property
    def needs(self) -> tuple[str, ...]:
        """The models it runs: ``("lm",)``, ``("embedder",)``, ``("chat",)`` or ``()`` for none."""
        return tuple(type(self._chunker).needs_for(self._chunker.config.params_dict, self._chunker.config.tokenizer))

    def chunk(self, document: Document | str) -> Chunking:
        """Chunk a loaded document (:func:`chunklab.load`) or a string (offsets then index the string as given).

        Raises:
            chunklab.ChunkLabError: the model cannot be loaded or fails (one line), or the
                document does not suit the chunker (e.g. an edited copy on another document).
        """
        doc = as_document(document)
        return Chunking(doc, self._chunker.chunk(doc, self.context))

    def __repr__(self) -> str:
        return f"Chunker({self.spec!r})"


def model_context(
    *, lm: str | None = None, embedder: str | None = None, device: str | None = None, window: int | None = None,
    cache: bool = True,
) -> ModelContext:
    """The backend's model context for the library's model settings (see :class:`Chunker`); loads nothing yet."""
    spec = None if embedder is None or embedder.strip().lower() == "default" else embedder
    return ModelContext(lm=lm, device=device, window=window, use_cache=cache, embedder_spec=spec)


def chunker(spec: str, **settings: Any) -> Chunker:
    """``Chunker(spec, **settings)``: see :class:`Chunker`."""
    return Chunker(spec, **settings)


def chunk(document: Document | str, spec: str | Chunker, **settings: Any) -> Chunking:
    """Chunk ``document`` with a spec string (a new :class:`Chunker`) or an existing chunker."""
    return (spec if isinstance(spec, Chunker) else Chunker(spec, **settings)).chunk(document)


def chunkers() -> list[dict[str, Any]]:
    """Every registered chunker: name, family, the models it needs, its parameters (``python -m backend chunkers``)."""
    return chunker_specs()
