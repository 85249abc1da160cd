"""Results of chunking: :class:`Chunk`, :class:`Chunking`, the :class:`ChunkerConfig` that made them, and a
session's :class:`ConfigEntry` (a configuration with its letter)."""

from __future__ import annotations

import bisect
import csv
import io
import json
import shlex
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

__all__ = ["Chunk", "ChunkerConfig", "Chunking", "edit_counts", "edit_summary", "ConfigEntry", "ModelTime", "duration_text", "first_free_tag", "tag_for"]


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
        """A short human label, e.g. ``recursive(chunk_size=200, chunk_overlap=0) · cl100k``.

        An edited copy (``manual``) is named by its base and what the edits do, not by its edit
        list: ``manual(recursive chunk_size=200; 3 cuts added, 1 removed) · cl100k``.
        """
        if self.name == "manual":
            p = self.params_dict
            added, removed = edit_counts(str(p.get("edits", "")))
            return f"manual({p.get('base', '')}; {edit_summary(added, removed)}) · {self.tokenizer}"
        inner = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name}({inner}) · {self.tokenizer}"

    @property
    def spec(self) -> str:
        """The configuration as one string, as ``--config`` and an edited copy's ``base`` take it.

        ``recursive chunk_size=200 chunk_overlap=0`` (``tokenizer=…`` added when not cl100k);
        values with spaces are quoted, so :meth:`parse` reads it back exactly.

        >>> ChunkerConfig.make("recursive", {"chunk_size": 200}, "o200k").spec
        'recursive chunk_size=200 tokenizer=o200k'
        """
        parts = [self.name] + [f"{k}={v}" for k, v in self.params]
        if self.tokenizer != "cl100k":
            parts.append(f"tokenizer={self.tokenizer}")
        return shlex.join(parts)

    @classmethod
    def parse(cls, spec: str, tokenizer: str = "cl100k") -> tuple[str, dict[str, str], str]:
        """Read a :attr:`spec` string: ``(chunker name, raw parameter strings, tokenizer)``.

        The values are strings (the chunker's :class:`~backend.chunkers.base.Param` converts
        and checks them); ``tokenizer`` is used when the string names none.

        Raises:
            ValueError: the string is empty, has unbalanced quotes or a part that is not ``key=value``.
        """
        parts = shlex.split(spec)
        if not parts:
            raise ValueError("a configuration needs a chunker name, e.g. 'recursive chunk_size=200'")
        params: dict[str, str] = {}
        for pair in parts[1:]:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"parameter {pair!r} must look like key=value")
            params[key.strip()] = value.strip()
        return parts[0], params, params.pop("tokenizer", tokenizer)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable form."""
        return {"name": self.name, "params": self.params_dict, "tokenizer": self.tokenizer}


def edit_counts(edits: str) -> tuple[int, int]:
    """How many cuts an edit list adds and removes (``+`` and ``-`` items): ``("+12,-40,+90")`` → ``(2, 1)``."""
    items = [x.strip() for x in edits.replace(";", ",").split(",") if x.strip()]
    return sum(x.startswith("+") for x in items), sum(x.startswith("-") for x in items)


def edit_summary(added: int, removed: int) -> str:
    """``3 cuts added, 1 removed``; ``no edits`` for none."""
    if not added and not removed:
        return "no edits"
    parts = []
    if added:
        parts.append(f"{added} cut{'s' if added != 1 else ''} added")
    if removed:
        parts.append(f"{removed} removed" if added else f"{removed} cut{'s' if removed != 1 else ''} removed")
    return ", ".join(parts)


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


def duration_text(seconds: float) -> str:
    """A duration for people: ``27 ms``, ``1.4 s``, ``8 min 3 s``, ``2 h 5 min``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


@dataclass(frozen=True)
class ModelTime:
    """The model work behind one chunking: scoring, embedding, chat replies, computed now or read from the cache.

    A model output read from the output cache carries the seconds it took when it was computed
    (entries written before that was recorded carry none: they count in ``unknown``).

    Attributes:
        seconds: Known model seconds: those computed in this run plus those recorded in the
            cached outputs read.
        computed_s: The part of ``seconds`` computed in this run (inside the chunking's wall time).
        computed: Model outputs computed in this run.
        cached: Model outputs read from the output cache.
        unknown: Cached outputs stored without their time (older cache entries).
    """

    seconds: float = 0.0
    computed_s: float = 0.0
    computed: int = 0
    cached: int = 0
    unknown: int = 0

    @property
    def known(self) -> bool:
        """Whether every output's time is known (no old cache entry without one)."""
        return self.unknown == 0

    @property
    def source(self) -> str:
        """``from the cache``, ``computed now``, ``partly cached`` or ``no model call``."""
        if self.cached and self.computed:
            return "partly cached"
        if self.cached:
            return "from the cache"
        return "computed now" if self.computed else "no model call"

    def text(self) -> str:
        """``model 8 min 3 s, from the cache``; ``model time unknown, from the cache`` for old entries."""
        if not self.cached and not self.computed:
            return "no model call"
        if not self.known:
            amount = f"≥ {duration_text(self.seconds)}, partly unknown" if self.seconds > 0 else "time unknown"
            return f"model {amount}, {self.source}"
        return f"model {duration_text(self.seconds)}, {self.source}"


@dataclass(frozen=True)
class Chunking:
    """The chunks a configuration produced for one document, and the time it took.

    ``elapsed_s`` is the wall time of the chunking call (model work done in it included);
    ``model_time`` the model work behind it, cached or not (None: the chunker runs no model).
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
    model_time: ModelTime | None = None

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
        4 model calls, 2 cached, 1 repair``; an LLM chunker's degradations are stated in it:
        ``3 of 41 chunks were over 800 tokens and were split by the recursive splitter``,
        ``12 of 12 rules dropped for missing anchors (per window: 3/3, …)``, ``fallback: 4 of 4
        windows had no usable rule (window 1: …) and were split by the recursive splitter at
        150 tokens, 100.0 % of the text``.
        """
        m = self.meta_dict
        parts = []
        if "edited_from" in m:  # an edited copy (manual): its base, what the edits did, what they could not do
            if "edits_not_applied" in m:
                parts.append(f"{m['edited_from']}, not edited: {m['edits_not_applied']}")
            else:
                parts.append(f"{m['edited_from']}: {edit_summary(int(m.get('cuts_added', 0)), int(m.get('cuts_removed', 0)))}")
            ignored = list(m.get("edits_ignored") or ())
            if ignored:
                shown = "; ".join(ignored[:3]) + (f"; {len(ignored) - 3} more" if len(ignored) > 3 else "")
                parts.append(f"{len(ignored)} edit{'s' if len(ignored) != 1 else ''} changed nothing ({shown})")
        if "content_loss" in m:
            gaps = len(m.get("gap_chunks") or ())
            parts.append(f"content loss {100 * float(m['content_loss']):.1f} %"
                         + (f" ({gaps} gap chunk{'s' if gaps != 1 else ''})" if gaps else ""))
        if "granularity" in m:
            router = f" ({m['router']} router)" if m.get("router") else ""
            parts.append(f"granularity {m['granularity']}{router}")
        if m.get("over_cap"):
            n, of = m["over_cap"], m.get("over_cap_of", "?")
            parts.append(f"{n} of {of} chunk{'s' if of != 1 else ''} {'was' if n == 1 else 'were'} over "
                         f"{m.get('max_tokens', '?')} tokens and {'was' if n == 1 else 'were'} split by the recursive "
                         "splitter")
        if m.get("rules_dropped"):
            per_window = ", ".join(f"{w[3]}/{w[2]}" for w in m.get("windows") or ())
            of = m.get("rules", "?")
            parts.append(f"{m['rules_dropped']} of {of} rule{'s' if of != 1 else ''} dropped for missing anchors"
                         + (f" (per window: {per_window})" if per_window else ""))
        if m.get("fallback_windows"):
            fell, total = len(m["fallback_windows"]), len(m.get("windows") or ()) or "?"
            by_reason: dict[str, list[str]] = {}  # windows with one reason are named together
            for i, reason in zip(m["fallback_windows"], m.get("fallback_reasons") or ()):
                by_reason.setdefault(reason, []).append(str(i + 1))
            why = [f"window{'s' if len(w) > 1 else ''} {', '.join(w)}: {r}" for r, w in by_reason.items()]
            why_text = "; ".join(why[:4]) + (f"; {len(why) - 4} more reasons" if len(why) > 4 else "")
            share = f", {100 * float(m['fallback_share']):.1f} % of the text" if "fallback_share" in m else ""
            were = "was" if fell == 1 else "were"
            parts.append(f"fallback: {fell} of {total} window{'s' if total != 1 else ''} had no usable rule "
                         f"({why_text}) and {were} split by the "
                         f"{m.get('fallback', 'recursive splitter')}{share}")
        calls = [(m[k], label) for k, label in (("model_calls", "model call"), ("cache_hits", "cached"),
                                                ("repairs", "repair")) if k in m]
        if calls:
            parts.append(", ".join(f"{n} {label}{'s' if n != 1 and label != 'cached' else ''}" for n, label in calls))
        return " · ".join(parts) or None

    @property
    def degraded(self) -> bool:
        """Whether the chunker fell back on a model-free split (an LLM chunker's cap or window fallback)."""
        m = self.meta_dict
        return bool(m.get("over_cap") or m.get("fallback_windows"))

    @property
    def cut_s(self) -> float:
        """Seconds spent cutting: the wall time less the model work computed in it (cache reads stay in)."""
        computed = self.model_time.computed_s if self.model_time is not None else 0.0
        return max(0.0, self.elapsed_s - computed)

    @property
    def total_s(self) -> float | None:
        """Model seconds (cached or not) plus cutting; None when a cached output's time is unknown."""
        if self.model_time is None:
            return self.elapsed_s
        if not self.model_time.known:
            return None
        return self.model_time.seconds + self.cut_s

    @property
    def time_text(self) -> str:
        """``27 ms``; ``8 min 3 s (model 8 min 3 s, from the cache; cut 27 ms)``; ``cut 27 ms (model time unknown, …)``."""
        if self.model_time is None:
            return duration_text(self.elapsed_s)
        cut = f"cut {duration_text(self.cut_s)}"
        total = self.total_s
        if total is None:
            return f"{cut} ({self.model_time.text()})"
        return f"{duration_text(total)} ({self.model_time.text()}; {cut})"

    @property
    def time_note(self) -> str | None:
        """What the time stands on, for a table's cell (None: no model): ``model 8 min 3 s (cached) + cut 27 ms``."""
        if self.model_time is None:
            return None
        m = self.model_time
        where = {"from the cache": " (cached)", "partly cached": " (partly cached)"}.get(m.source, "")
        if not m.cached and not m.computed:
            model = "no model call"
        elif not m.known:
            model = f"model time unknown{where}"
        else:
            model = f"model {duration_text(m.seconds)}{where}"
        return f"{model} + cut {duration_text(self.cut_s)}"

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
