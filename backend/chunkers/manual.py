"""``manual``: another configuration's chunks with cuts added and removed by hand.

An edited copy is a configuration like any other: its parameters are the base configuration
(``base``, the string ``--config`` takes), the edit list (``edits``), how an added cut is
snapped (``snap``) and the document the edits were made on (``doc``), so the CLI, sessions,
exports, the report and every page run it through the registry:

    python -m backend chunk FILE --chunker manual --param base='recursive chunk_size=200' --param edits=+1234,-5678

Cuts. A chunking's *cuts* are the starts of its chunks after the first. The edits change the
base's cut set, in order: ``+N`` adds a cut at character ``N`` snapped to the nearest sentence
start (``snap=sentence``), word start (``word``) or kept as it is (``char``); ``-N`` removes the
cut nearest ``N``. An offset past the document's end is bad input (:func:`check_offsets`: one line naming
it). An added cut must fall strictly inside a chunk with text on both sides, and not where two
chunks of an overlapping base overlap; one that does not (a cut already there, a gap between
chunks, an overlap, nothing left of it) changes nothing
and the run report says so. :func:`canonical_edits` writes the same change as the base's cuts
removed then the cuts added, in offset order: what the app stores, so equal edits give equal
configurations (and cache keys).

Spans. The chunks are rebuilt from the base's chunks and the final cut set alone
(:func:`spans_for_cuts`), so they do not depend on the order of the edits: between two cuts a
chunk starts at the first cut and ends at the base's end before the second when that is a base
cut (its own end, overlap included), else at the second cut less trailing whitespace; removing
a cut joins two chunks with what lay between them. Every character the base covers stays
covered, no character of a non-overlapping base is covered twice, and with no edits (or on
another document, see ``doc``) the chunks are exactly the base's.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.chunkers.base import Chunker, Param, config_needs, make_chunker, register, run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.text.document import Document

__all__ = [
    "SNAPS",
    "MAX_EDITS",
    "Edit",
    "EditResult",
    "EditRow",
    "ManualChunker",
    "apply_edits",
    "base_config",
    "canonical_edits",
    "check_offsets",
    "cuts_of",
    "edit_rows",
    "format_edits",
    "parse_edits",
    "snap_offset",
    "spans_for_cuts",
]

SNAPS = ("sentence", "word", "char")
MAX_EDITS = 20_000
_EDIT = re.compile(r"^([+-])(\d{1,12})$")
_WORD_START = re.compile(r"(?<!\S)\S")


@dataclass(frozen=True)
class Edit:
    """One edit: ``+`` adds a cut at ``offset`` (snapped), ``-`` removes the cut nearest ``offset``."""

    op: str
    offset: int

    def __str__(self) -> str:
        return f"{self.op}{self.offset}"


def parse_edits(raw: str) -> tuple[Edit, ...]:
    """``"+1234,-5678"`` (commas, semicolons or spaces between items) as edits, in order.

    Raises:
        ParameterError: an item is not ``+N`` or ``-N``, or there are more than :data:`MAX_EDITS`.
    """
    items = [x for x in re.split(r"[,;\s]+", raw.strip()) if x]
    if len(items) > MAX_EDITS:
        raise ParameterError(f"manual: edits has {len(items):,} items; at most {MAX_EDITS:,}")
    out = []
    for item in items:
        m = _EDIT.match(item)
        if m is None:
            raise ParameterError(f"manual: edit {item[:40]!r} must be +OFFSET (add a cut) or -OFFSET (remove one)")
        out.append(Edit(m.group(1), int(m.group(2))))
    return tuple(out)


def format_edits(edits: Sequence[Edit]) -> str:
    """The edits as the ``edits`` parameter writes them: ``+1234,-5678``."""
    return ",".join(map(str, edits))


def base_config(spec: str, tokenizer: str) -> ChunkerConfig:
    """The base configuration an edited copy names (``tokenizer``: the copy's, unless the string names one).

    Raises:
        ParameterError: an empty or unreadable string, an unknown chunker, an edited copy as the
            base (edit the base's copy instead), or a bad parameter of the base.
    """
    try:
        name, params, tok = ChunkerConfig.parse(spec, tokenizer)
    except ValueError as e:
        raise ParameterError(f"manual: base {spec[:80]!r}: {e}") from None
    if name == ManualChunker.name:
        raise ParameterError("manual: the base is an edited copy itself; edit a copy of its base instead")
    try:
        chunker = make_chunker(name, params, tok)  # checks the name and every parameter
    except ParameterError as e:
        raise ParameterError(f"manual: base {spec[:80]!r}: {e}") from None
    return chunker.config


def check_offsets(doc: Document, edits: Sequence[Edit]) -> None:
    """Check that every edit's offset lies in ``doc`` (0 to its length; a negative one does not parse).

    Raises:
        ParameterError: the first edit past the end, named with the document's length.
    """
    n = len(doc.text)
    bad = next((e for e in edits if e.offset > n), None)
    if bad is not None:
        raise ParameterError(f"manual: edit {bad} is outside the document: offsets go from 0 to {n:,}")


def snap_offset(doc: Document, offset: int, snap: str, *, word_starts: Sequence[int] | None = None) -> int:
    """``offset`` moved to the nearest sentence start, word start, or kept (``char``), within the text.

    Ties go to the earlier position. With no sentence (word) in the text the offset is kept.
    """
    offset = max(0, min(offset, len(doc.text)))
    if snap == "char":
        return offset
    if snap == "sentence":
        starts: Sequence[int] = [s.start for s in doc.sentences]
    else:
        starts = word_starts if word_starts is not None else [m.start() for m in _WORD_START.finditer(doc.text)]
    if not starts:
        return offset
    k = bisect.bisect_left(starts, offset)
    near = [starts[i] for i in (k - 1, k) if 0 <= i < len(starts)]
    return min(near, key=lambda p: (abs(p - offset), p))


def cuts_of(spans: Sequence[tuple[int, int]]) -> list[int]:
    """A chunking's cuts: the starts of its chunks after the first (in order, without repeats)."""
    return sorted({s for s, _ in spans[1:]})


def _rstrip_end(text: str, start: int, end: int) -> int:
    """``end`` moved back over whitespace, not before ``start``."""
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _lstrip_start(text: str, start: int, end: int) -> int:
    """``start`` moved forward over whitespace, not past ``end``."""
    while start < end and text[start].isspace():
        start += 1
    return start


def spans_for_cuts(text: str, base: Sequence[tuple[int, int]], cuts: Sequence[int]) -> list[tuple[int, int]]:
    """The chunks of ``base`` re-cut at the cut set ``cuts`` (see the module docstring).

    Args:
        text: The document text.
        base: The base chunking's ``(start, end)`` spans, in order.
        cuts: The final cuts: base cuts kept and cuts added (each strictly inside a chunk).
    """
    if not base:
        return []
    base_end_before = {s: e_prev for (_, e_prev), (s, _) in zip(base, base[1:])}
    first, last = base[0][0], max(e for _, e in base)
    marks = [first] + sorted(c for c in set(cuts) if first < c < last)
    out = []
    for i, start in enumerate(marks):
        if i + 1 == len(marks):
            end = last
        else:
            nxt = marks[i + 1]
            end = base_end_before.get(nxt, -1)  # a base cut: the base's own end before it (overlap kept)
            if end <= start:
                end = _rstrip_end(text, start, nxt)
        out.append((start, end))
    return out


@dataclass(frozen=True)
class EditResult:
    """What applying an edit list did.

    Attributes:
        spans: The edited chunks' ``(start, end)``.
        cuts: The final cut set, in order.
        added: Cuts added that the base does not have.
        removed: Base cuts removed.
        ignored: One line per edit that changed nothing, e.g. ``+1234: already a cut``.
    """

    spans: tuple[tuple[int, int], ...]
    cuts: tuple[int, ...]
    added: tuple[int, ...]
    removed: tuple[int, ...]
    ignored: tuple[str, ...] = ()


def apply_edits(doc: Document, base: Sequence[tuple[int, int]], edits: Sequence[Edit], snap: str = "sentence") -> EditResult:
    """Apply ``edits`` in order to the base's cut set and rebuild the chunks (:func:`spans_for_cuts`).

    An added cut must fall strictly inside a chunk of the state it is added to, with text on
    both sides once whitespace at the cut is left out; else the edit is ignored (and named in
    :attr:`EditResult.ignored`). So :attr:`EditResult.added` and :attr:`EditResult.removed` count
    what the edits did, not how many were written: a cut added where one is (or snapped onto one)
    is not counted.

    Raises:
        ParameterError: an offset past the document's end (:func:`check_offsets`).
    """
    check_offsets(doc, edits)
    text = doc.text
    base = [(int(s), int(e)) for s, e in base]
    base_cuts = cuts_of(base)
    cuts = list(base_cuts)
    ignored: list[str] = []
    if not base:
        return EditResult((), (), (), (), tuple(f"{e}: the base has no chunks" for e in edits))
    first, last = base[0][0], max(e for _, e in base)
    base_end_before = {s: e_prev for (_, e_prev), (s, _) in zip(base, base[1:])}

    def piece(k: int) -> tuple[int, int]:
        """The ``k``-th chunk of the current cut set (0: from the first chunk's start), as spans_for_cuts makes it."""
        start = cuts[k - 1] if k > 0 else first
        if k == len(cuts):
            return start, last
        end = base_end_before.get(cuts[k], -1)
        return start, end if end > start else _rstrip_end(text, start, cuts[k])

    word_starts = [m.start() for m in _WORD_START.finditer(text)] if snap == "word" else None
    for edit in edits:
        if edit.op == "-":
            if not cuts:
                ignored.append(f"{edit}: no cut to remove")
                continue
            k = bisect.bisect_left(cuts, edit.offset)
            near = [cuts[i] for i in (k - 1, k) if 0 <= i < len(cuts)]
            cuts.remove(min(near, key=lambda p: (abs(p - edit.offset), p)))
            continue
        q = _lstrip_start(text, snap_offset(doc, edit.offset, snap, word_starts=word_starts), len(text))
        at = f" (snapped to {q})" if q != edit.offset else ""
        k = bisect.bisect_left(cuts, q)
        if k < len(cuts) and cuts[k] == q:
            ignored.append(f"{edit}: already a cut" + (f" (at {q})" if q != edit.offset else ""))
            continue
        start, end = piece(k)  # the chunk whose start is the last mark before q
        if not start < q < end or _rstrip_end(text, start, q) <= start:
            ignored.append(f"{edit}: not inside a chunk{at}")
            continue
        if k > 0 and piece(k - 1)[1] > _rstrip_end(text, start, q):  # an overlapping base: the chunk before reaches past q
            ignored.append(f"{edit}: inside the overlap of two chunks{at}")
            continue
        cuts.insert(k, q)
    spans = spans_for_cuts(text, base, cuts)
    final = set(cuts)
    return EditResult(
        spans=tuple(spans),
        cuts=tuple(cuts),
        added=tuple(sorted(final - set(base_cuts))),
        removed=tuple(sorted(set(base_cuts) - final)),
        ignored=tuple(ignored),
    )


def canonical_edits(result: EditResult) -> tuple[Edit, ...]:
    """The same change as one edit list: the base cuts removed, then the cuts added, each in offset order.

    Applying it to the base (any ``snap``: the offsets are cuts already) gives the same chunks.
    """
    return tuple(Edit("-", c) for c in result.removed) + tuple(Edit("+", c) for c in result.added)


@register
class ManualChunker(Chunker):
    """Another configuration's chunks with cuts added and removed by hand (an edited copy).

    ``base`` is the configuration, written as ``--config`` takes it; ``edits`` the changes in
    order: ``+N`` adds a cut at character N (snapped to the nearest sentence or word start),
    ``-N`` removes the cut nearest N. The chunks between cuts are the base's text, so every
    character the base covers stays covered; an edit that changes nothing is named in the
    run report. ``doc`` ties the edits to the document they were made on: on another one the
    chunks are the base's.
    """

    name = "manual"
    family = "manual"
    params = (
        Param("base", "str", "recursive chunk_size=200",
              "The configuration edited, as --config writes it: chunker name then key=value parameters."),
        Param("edits", "str", "", "Cuts added (+OFFSET) and removed (-OFFSET), in order, separated by commas."),
        Param("snap", "str", "sentence", "Where an added cut moves to: the nearest sentence start, word start, "
              "or the character itself.", choices=SNAPS),
        Param("doc", "str", "", "The id of the document the edits were made on (16 hex digits; empty: any "
              "document); on another document the chunks are the base's."),
    )

    def __init__(self, tokenizer: Any = "cl100k", **params: Any) -> None:
        super().__init__(tokenizer, **params)
        self.needs = config_needs(self.base)  # the base's models: a PPL base needs the language model

    def validate(self) -> None:
        super().validate()
        self.base = base_config(self.values["base"], self.tokenizer.name)
        self.edits = parse_edits(self.values["edits"])
        doc_id = self.values["doc"].strip()
        if doc_id and not re.fullmatch(r"[0-9a-f]{16}", doc_id):
            raise ParameterError(f"manual: doc must be a document id (16 hex digits), got {doc_id[:40]!r}")

    @classmethod
    def needs_for(cls, params: dict[str, Any], tokenizer: str = "cl100k") -> tuple[str, ...]:
        try:
            return config_needs(base_config(str(params.get("base", "")), tokenizer))
        except ParameterError:
            return ()

    def applies_to(self, doc: Document) -> bool:
        """Whether the edits are for ``doc`` (``doc`` is empty or its id)."""
        return self.values["doc"].strip() in ("", doc.id)

    def chunk(self, doc: Document, context: ModelContext | None = None) -> Chunking:
        if context is not None:
            self.context = context
        self._result: EditResult | None = None
        out = self.chunk_with(doc, self.split)
        meta: dict[str, Any] = {"edited_from": self.base.label}
        result = self._result
        if result is None:
            meta.update(edits_not_applied=f"the edits were made on document {self.values['doc']}, not {doc.id}")
        else:
            meta.update(cuts_added=len(result.added), cuts_removed=len(result.removed))
            if result.ignored:
                meta.update(edits_ignored=list(result.ignored))
        return Chunking(config=out.config, chunks=out.chunks, elapsed_s=out.elapsed_s, doc_id=out.doc_id,
                        doc_length=out.doc_length, meta=tuple(sorted(meta.items())), model_time=out.model_time)

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        base = run_chunker(doc, self.base, self.context)
        known = {(c.start, c.end): c.tokens for c in base.chunks}
        if not self.applies_to(doc):
            return [(c.start, c.end, c.tokens) for c in base.chunks]
        result = apply_edits(doc, [(c.start, c.end) for c in base.chunks], self.edits, self.values["snap"])
        self._result = result
        new = [s for s in result.spans if s not in known]
        counts = dict(zip(new, self.tokenizer.count_many([doc.text[s:e] for s, e in new]), strict=True))
        return [(s, e, known.get((s, e), counts.get((s, e), 0))) for s, e in result.spans]



@dataclass(frozen=True)
class EditRow:
    """One edit of an edited copy as the report lists it.

    Attributes:
        op: ``added`` or ``removed`` (a cut).
        offset: The cut's character offset.
        page: The 1-based page it is on.
        before: Up to 60 characters of text before the cut (on one line).
        after: Up to 60 characters after it.
    """

    op: str
    offset: int
    page: int
    before: str
    after: str


def edit_rows(doc: Document, config: ChunkerConfig, context_chars: int = 60) -> tuple[EditRow, ...]:
    """The edits of an edited copy's configuration, each with where it is and the text around it.

    Empty for another configuration, for no edits, or when the edits were made on another document.

    Raises:
        ParameterError: the edit list is not valid.
    """
    if config.name != ManualChunker.name:
        return ()
    p = config.params_dict
    if str(p.get("doc", "")).strip() not in ("", doc.id):
        return ()
    text = doc.text
    rows = []
    for edit in parse_edits(str(p.get("edits", ""))):
        at = max(0, min(edit.offset, len(text)))
        before = " ".join(text[max(0, at - 2 * context_chars):at].split())[-context_chars:]
        after = " ".join(text[at:at + 2 * context_chars].split())[:context_chars]
        rows.append(EditRow("added" if edit.op == "+" else "removed", at, doc.page_of(at), before, after))
    return tuple(rows)
