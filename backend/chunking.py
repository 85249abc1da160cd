"""Results of chunking: :class:`Chunk`, :class:`Chunking`, the :class:`ChunkerConfig` that made them, and a
session's :class:`ConfigEntry` (a configuration with its letter)."""

from __future__ import annotations

import bisect
import csv
import io
import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

__all__ = ["Chunk", "Chunking", "ChunkerConfig", "ConfigEntry", "tag_for", "first_free_tag"]


@dataclass(frozen=True)
class ChunkerConfig:
    """Which chunker ran, with which parameters and tokenizer. Hashable, so usable as a cache key."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    tokenizer: str = "cl100k"

    @classmethod
    def make(cls, name: str, params: Mapping[str, Any] | None = None, tokenizer: str = "cl100k") -> ChunkerConfig:
        """Build a config from a plain dict of parameters."""
        return cls(name=name, params=tuple(sorted((params or {}).items())), tokenizer=tokenizer)

    @property
    def params_dict(self) -> dict[str, Any]:
        """The parameters as a dict."""
        return dict(self.params)

    @property
    def label(self) -> str:
        """A short human label, e.g. ``recursive(chunk_size=200, chunk_overlap=0) · cl100k``."""
        inner = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name}({inner}) · {self.tokenizer}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable form."""
        return {"name": self.name, "params": self.params_dict, "tokenizer": self.tokenizer}


def tag_for(n: int) -> str:
    """The ``n``-th configuration letter (from 0): A, B, …, Z, AA, AB, …"""
    out = ""
    while True:
        out = chr(ord("A") + n % 26) + out
        n = n // 26 - 1
        if n < 0:
            return out


def first_free_tag(used: Iterable[str]) -> str:
    """The first letter not in ``used`` (A, B, C… reused after removals).

    >>> first_free_tag(["A", "C"])
    'B'
    """
    taken = set(used)
    n = 0
    while tag_for(n) in taken:
        n += 1
    return tag_for(n)


@dataclass(frozen=True)
class ConfigEntry:
    """One configuration of a session: what the pages list, colour and key their widgets by.

    Attributes:
        uid: A stable id, never reused in a session (widget keys and colours are built from it).
        tag: Its letter (``A``, ``B``…), reused after a removal; what tables and charts name it by.
        config: The chunker configuration.
    """

    uid: int
    tag: str
    config: ChunkerConfig

    @property
    def title(self) -> str:
        """``A · recursive(chunk_size=200, chunk_overlap=0) · cl100k``: how selectors name it."""
        return f"{self.tag} · {self.config.label}"


@dataclass(frozen=True)
class Chunk:
    """One chunk: an exact span of the document text.

    Invariant: ``text == document.text[start:end]``.
    """

    index: int
    start: int
    end: int
    text: str
    tokens: int

    def to_json(self) -> dict[str, Any]:
        """The record the CLI prints and the exports write."""
        return {"index": self.index, "start": self.start, "end": self.end, "text": self.text, "tokens": self.tokens}


@dataclass(frozen=True)
class Chunking:
    """The chunks a configuration produced for one document, and the time it took.

    ``meta`` holds what a chunker reports about its run beyond the chunks, as sorted
    ``(name, value)`` pairs of JSON-ready values (e.g. an LLM chunker's ``content_loss`` and
    ``granularity``); empty for most chunkers.
    """

    config: ChunkerConfig
    chunks: tuple[Chunk, ...]
    elapsed_s: float
    doc_id: str
    doc_length: int
    meta: tuple[tuple[str, Any], ...] = ()

    def __len__(self) -> int:
        return len(self.chunks)

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.chunks)

    @property
    def meta_dict(self) -> dict[str, Any]:
        """``meta`` as a dict."""
        return dict(self.meta)

    @property
    def run_report(self) -> str | None:
        """A one-line summary of ``meta`` for people (None when the chunker reported nothing).

        E.g. ``content loss 12.5 % (3 gap chunks) · granularity 120-150 (paragraph router) ·
        4 model calls, 2 cached, 1 repair``.
        """
        m = self.meta_dict
        parts = []
        if "content_loss" in m:
            gaps = len(m.get("gap_chunks") or ())
            parts.append(f"content loss {100 * float(m['content_loss']):.1f} %"
                         + (f" ({gaps} gap chunk{'s' if gaps != 1 else ''})" if gaps else ""))
        if "granularity" in m:
            router = f" ({m['router']} router)" if m.get("router") else ""
            parts.append(f"granularity {m['granularity']}{router}")
        calls = [(m[k], label) for k, label in (("model_calls", "model call"), ("cache_hits", "cached"),
                                                ("repairs", "repair")) if k in m]
        if calls:
            parts.append(", ".join(f"{n} {label}{'s' if n != 1 and label != 'cached' else ''}" for n, label in calls))
        return " · ".join(parts) or None

    @property
    def token_counts(self) -> list[int]:
        """Token count of each chunk, in order."""
        return [c.tokens for c in self.chunks]

    @property
    def boundaries(self) -> list[int]:
        """Character offsets where a chunk ends (the last chunk excluded)."""
        return [c.end for c in self.chunks[:-1]]

    def chunk_at(self, offset: int) -> Chunk | None:
        """The first chunk whose span holds ``offset``, if any."""
        i = bisect.bisect_right([c.start for c in self.chunks], offset) - 1
        while i >= 0:
            c = self.chunks[i]
            if c.start <= offset < c.end:
                return c
            if c.end <= offset:
                break
            i -= 1
        return None

    def to_jsonl(self) -> str:
        """One JSON object per line: ``{"index","start","end","text","tokens"}``."""
        return "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in self.chunks)

    def to_csv(self) -> str:
        """CSV with a header row: index,start,end,tokens,text."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["index", "start", "end", "tokens", "text"])
        for c in self.chunks:
            writer.writerow([c.index, c.start, c.end, c.tokens, c.text])
        return buf.getvalue()
