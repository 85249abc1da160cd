"""Editing a chunking by hand: the edited copy, its edits with undo and redo, and what each edit did.

An edited copy is a ``manual`` configuration (:mod:`backend.chunkers.manual`): its base, the
edits in canonical form (base cuts removed, then cuts added, in offset order), how added cuts
snap and the document they were made on. :func:`edit_copy` makes one from any configuration
(a copy of an edited copy keeps its base and edits). :class:`EditState` is what the Edit page
holds per edited copy: the edit history, so undo and redo walk it, and the configuration of
the current state. The operations (:func:`add_cut`, :func:`remove_cut`, :func:`move_cut`,
:func:`toggle_cut`) take the document and the base's chunk spans, apply one change through
:func:`~backend.chunkers.manual.apply_edits` — the rule the chunker runs — and return the new
state with one line saying what happened (or why nothing did).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from backend.chunkers import make_chunker
from backend.chunkers.manual import (
    Edit,
    EditResult,
    apply_edits,
    base_config,
    canonical_edits,
    cuts_of,
    format_edits,
    parse_edits,
    snap_offset,
)
from backend.chunking import ChunkerConfig, ConfigEntry, edit_summary
from backend.errors import ParameterError
from backend.text.document import Document

__all__ = [
    "MAX_HISTORY",
    "EditOutcome",
    "EditState",
    "add_cut",
    "base_cuts",
    "current_cuts",
    "edit_copy",
    "edited_title",
    "is_edited",
    "move_cut",
    "remove_cut",
    "toggle_cut",
]

MAX_HISTORY = 500  # undo steps an edited copy keeps (the oldest go first)


def is_edited(config: ChunkerConfig) -> bool:
    """Whether ``config`` is an edited copy (the ``manual`` chunker)."""
    return config.name == "manual"


def edit_copy(config: ChunkerConfig, doc: Document, snap: str = "sentence") -> ChunkerConfig:
    """A new edited copy of ``config`` on ``doc``, with no edits (a copy of an edited copy keeps its base and edits).

    Raises:
        ParameterError: ``config`` cannot be a base (its parameters are not valid).
    """
    if is_edited(config):
        p = config.params_dict
        return ChunkerConfig.make("manual", {**p, "doc": doc.id}, config.tokenizer)
    base_config(config.spec, config.tokenizer)  # a base the manual chunker accepts
    return ChunkerConfig.make(
        "manual", {"base": config.spec, "edits": "", "snap": snap, "doc": doc.id}, config.tokenizer
    )


def edited_title(entry: ConfigEntry, entries: Sequence[ConfigEntry]) -> str:
    """``C = A, edited: 3 cuts added, 1 removed``: an edited copy named by its base's letter (else the base's label).

    For a configuration that is not an edited copy, its usual title.
    """
    if not is_edited(entry.config):
        return entry.title
    p = entry.config.params_dict
    try:
        base = base_config(str(p.get("base", "")), entry.config.tokenizer)
    except ParameterError:
        return entry.title
    edits = parse_edits(str(p.get("edits", "")))
    what = edit_summary(sum(e.op == "+" for e in edits), sum(e.op == "-" for e in edits))
    origin = next((e.tag for e in entries if e.uid != entry.uid and _normal(e.config) == base), None)
    return f"{entry.tag} = {origin or base.label}, edited: {what}"


def _normal(config: ChunkerConfig) -> ChunkerConfig:
    """``config`` with every parameter the chunker gives it (as a base is read back), else as it is."""
    try:
        return make_chunker(config.name, config.params_dict, config.tokenizer).config
    except ParameterError:
        return config


@dataclass(frozen=True)
class EditState:
    """An edited copy as the Edit page holds it: its settings and its edit history.

    Attributes:
        base: The configuration edited.
        doc_id: The document the edits are made on.
        snap: Where an added cut moves to (``sentence``, ``word``, ``char``).
        history: Canonical edit lists, oldest first (``""``: no edits).
        position: The current one's index in ``history`` (undo moves back, redo forward).
    """

    base: ChunkerConfig
    doc_id: str
    snap: str = "sentence"
    history: tuple[str, ...] = ("",)
    position: int = 0

    @classmethod
    def of(cls, config: ChunkerConfig) -> EditState:
        """The state of an edited copy's configuration (its edits as the only history step).

        Raises:
            ParameterError: ``config`` is not a valid edited copy.
        """
        if not is_edited(config):
            raise ParameterError(f"{config.label} is not an edited copy")
        p = config.params_dict
        base = base_config(str(p.get("base", "")), config.tokenizer)
        edits = format_edits(parse_edits(str(p.get("edits", ""))))
        return cls(base, str(p.get("doc", "")), str(p.get("snap", "sentence")), (edits,), 0)

    @property
    def edits(self) -> str:
        """The current canonical edit list."""
        return self.history[self.position]

    @property
    def config(self) -> ChunkerConfig:
        """The edited copy's configuration in the current state."""
        return ChunkerConfig.make(
            "manual", {"base": self.base.spec, "edits": self.edits, "snap": self.snap, "doc": self.doc_id},
            self.base.tokenizer,
        )

    @property
    def can_undo(self) -> bool:
        return self.position > 0

    @property
    def can_redo(self) -> bool:
        return self.position + 1 < len(self.history)

    def undo(self) -> EditState:
        """One step back (unchanged when there is none)."""
        return replace(self, position=self.position - 1) if self.can_undo else self

    def redo(self) -> EditState:
        """One step forward (unchanged when there is none)."""
        return replace(self, position=self.position + 1) if self.can_redo else self

    def pushed(self, edits: str) -> EditState:
        """A new state with ``edits`` after the current one (the redo steps are dropped); unchanged if equal."""
        if edits == self.edits:
            return self
        history = self.history[: self.position + 1] + (edits,)
        history = history[-MAX_HISTORY:]
        return replace(self, history=history, position=len(history) - 1)

    def result(self, doc: Document, base_spans: Sequence[tuple[int, int]]) -> EditResult:
        """The current edits applied to the base's spans."""
        return apply_edits(doc, base_spans, parse_edits(self.edits), self.snap)


@dataclass(frozen=True)
class EditOutcome:
    """What one edit did: the new state, and one line for the page (what changed, or why nothing did).

    Attributes:
        state: The state after the edit (the same state when nothing changed).
        message: ``Cut added at 1,234 (sentence 12)``; ``No cut added: 1,234 is already a cut``.
        changed: Whether the chunks changed.
    """

    state: EditState
    message: str
    changed: bool


def _apply(state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]], extra: Sequence[Edit], done: str,
           undone: str) -> EditOutcome:
    base_spans = [(int(s), int(e)) for s, e in base_spans]
    if state.doc_id and state.doc_id != doc.id:
        return EditOutcome(state, f"{undone}: this edited copy was made on another document", False)
    edits = parse_edits(state.edits) + tuple(extra)
    result = apply_edits(doc, base_spans, edits, state.snap)
    new = format_edits(canonical_edits(result))
    if new == state.edits:
        why = result.ignored[-1].split(": ", 1)[-1] if result.ignored else "nothing changed"
        return EditOutcome(state, f"{undone}: {why}", False)
    return EditOutcome(state.pushed(new), done, True)


def _sentence_no(doc: Document, offset: int) -> int:
    starts = [s.start for s in doc.sentences]
    return max(1, bisect.bisect_right(starts, offset))


def add_cut(state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]], offset: int) -> EditOutcome:
    """Add a cut at ``offset`` (snapped as the state says)."""
    q = snap_offset(doc, offset, state.snap)
    return _apply(state, doc, base_spans, [Edit("+", offset)],
                  f"Cut added at character {q:,} (sentence {_sentence_no(doc, q):,})", f"No cut added at {q:,}")


def remove_cut(state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]], cut: int) -> EditOutcome:
    """Remove the cut nearest ``cut`` (the chunks on both sides join)."""
    cuts = list(state.result(doc, base_spans).cuts) if base_spans else []
    if not cuts:
        return EditOutcome(state, "No cut removed: the chunking has a single chunk", False)
    k = bisect.bisect_left(cuts, cut)
    near = min((cuts[i] for i in (k - 1, k) if 0 <= i < len(cuts)), key=lambda p: (abs(p - cut), p))
    return _apply(state, doc, base_spans, [Edit("-", near)], f"Cut at character {near:,} removed",
                  f"No cut removed at {near:,}")


def toggle_cut(state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]], offset: int) -> EditOutcome:
    """A click between sentences: remove the cut there if there is one, else add one."""
    cuts = state.result(doc, base_spans).cuts
    q = offset if offset in cuts else snap_offset(doc, offset, state.snap)
    if q in cuts:
        return remove_cut(state, doc, base_spans, q)
    return add_cut(state, doc, base_spans, offset)


def move_cut(state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]], cut: int, step: int) -> EditOutcome:
    """Move the cut at ``cut`` to the neighbouring sentence (word, character) start: ``step`` -1 back, +1 forward.

    The move is one edit (one undo step); it is refused when the neighbour is a cut already or
    outside the chunks joined by the move.
    """
    result = state.result(doc, base_spans)
    if cut not in result.cuts:
        return EditOutcome(state, f"No cut moved: there is no cut at {cut:,}", False)
    target = _neighbour(doc, cut, step, state.snap)
    if target is None:
        return EditOutcome(state, "No cut moved: no sentence start that way", False)
    if target in result.cuts:  # moving onto a cut would only remove this one
        return EditOutcome(state, f"No cut moved: {target:,} is a cut already", False)
    edits = parse_edits(state.edits) + (Edit("-", cut), Edit("+", target))
    moved = apply_edits(doc, [(int(s), int(e)) for s, e in base_spans], edits, state.snap)
    if target not in moved.cuts or cut in moved.cuts:
        return EditOutcome(state, f"No cut moved: {target:,} is a cut already or not inside a chunk", False)
    new = format_edits(canonical_edits(moved))
    return EditOutcome(state.pushed(new), f"Cut moved from character {cut:,} to {target:,}", True)


def _neighbour(doc: Document, cut: int, step: int, snap: str) -> int | None:
    """The sentence (word, character) start next to ``cut`` in direction ``step``."""
    text = doc.text
    if snap == "char":
        starts = list(range(len(text)))
    elif snap == "word":
        starts = [i for i in range(len(text)) if not text[i].isspace() and (i == 0 or text[i - 1].isspace())]
    else:
        starts = [s.start for s in doc.sentences]
    if step < 0:
        k = bisect.bisect_left(starts, cut) - 1
    else:
        k = bisect.bisect_right(starts, cut)
    return starts[k] if 0 <= k < len(starts) and starts[k] > 0 else None


def current_cuts(state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """The cuts of the current state."""
    return state.result(doc, base_spans).cuts


def base_cuts(base_spans: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """The base's cuts."""
    return tuple(cuts_of(base_spans))
