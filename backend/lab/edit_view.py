"""The Edit page's view in one call: the window of text with its cuts, the curve beside it, the cut list.

:func:`edit_view` takes an edited copy's :class:`~backend.lab.edit.EditState`, the base's
chunk spans and which window to show, applies the edits once (the rule the ``manual``
chunker runs) and returns everything the page draws: the window (a page of about
:data:`WINDOW_CHARS` characters that starts and ends at sentence starts), its clickable HTML
(:func:`backend.figures.edit.edit_text_html`), the cuts in it (the base's kept, those added,
the base's removed), the perplexity minima as hints and the curve of the window's sentences
when the document's per-sentence scores are held (:class:`~backend.chunkers.meta.results.PPLScores`,
never a model call here). Only the window is drawn: on a 36-page PDF a click costs a page of
text, not the document.

The page's other steps are one call each too: :func:`edited_copies` (the session's edited copies
and their titles), :func:`open_copy` (the state of the copy picked, or one line saying why it
cannot be edited here), :func:`edit_base` (the base's chunking, its spans and the held
per-sentence scores) and :func:`editor_view` (:func:`edit_view` with each cut's Boundary Clarity
from what is known).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from backend.chunkers.manual import EditResult, check_offsets, parse_edits
from backend.chunkers.meta.algorithms import boundary_candidates, sentence_values
from backend.chunkers.meta.results import PPLScores
from backend.chunkers.run import ChunkFn
from backend.chunking import ChunkerConfig, Chunking, ConfigEntry, edit_summary
from backend.errors import ParameterError
from backend.figures.edit import CurvePoint, CutMark, edit_curve, edit_text_html
from backend.lab.compare import Column, chunk_entries
from backend.lab.edit import EditOutcome, EditState, add_cut, edited_title, is_edited, move_cut, remove_cut, toggle_cut
from backend.lab.edit_metrics import boundary_values
from backend.lab.models import SessionModels
from backend.lab.ppl import held_scores
from backend.text.document import Document

__all__ = [
    "WINDOW_CHARS",
    "EditWindow",
    "EditView",
    "EditAction",
    "ACTIONS",
    "edit_action",
    "edit_windows",
    "page_of",
    "edit_view",
    "sentence_start",
    "chunk_spans",
    "EditedCopies",
    "edited_copies",
    "OpenCopy",
    "open_copy",
    "EditBase",
    "edit_chunking",
    "edit_base",
    "editor_view",
]

WINDOW_CHARS = 6_000  # characters per page of the Edit page's text (a page ends at a sentence start)


@dataclass(frozen=True)
class EditWindow:
    """The part of the text the Edit page shows.

    Attributes:
        page: Which window (1-based).
        pages: How many windows the text has.
        start: Its first character (a sentence start, or 0).
        end: Its end (exclusive; the next window's start).
        first_sentence: The 1-based number of its first sentence (0 when it has none).
        last_sentence: The number of its last sentence (0 when it has none).
        sentences: How many sentences the document has.
    """

    page: int
    pages: int
    start: int
    end: int
    first_sentence: int
    last_sentence: int
    sentences: int

    def caption(self, doc_length: int) -> str:
        """``Characters 0–6,012 of 71,234 · sentences 1–64 of 795 (page 1 of 12)``."""
        what = f"Characters {self.start:,}–{self.end:,} of {doc_length:,}"
        if self.first_sentence:
            what += f" · sentences {self.first_sentence:,}–{self.last_sentence:,} of {self.sentences:,}"
        return f"{what} (page {self.page} of {self.pages})"


def edit_windows(doc: Document, window: int = WINDOW_CHARS) -> tuple[int, ...]:
    """Where each window starts: a new one at the first sentence start ``window`` characters or more after the last.

    A document without sentences is cut every ``window`` characters.
    """
    if window < 1:
        raise ParameterError(f"window must be at least 1 character, got {window}")
    if not doc.sentences:
        return tuple(range(0, max(len(doc.text), 1), window))
    starts = [0]
    for s in doc.sentences:
        if s.start - starts[-1] >= window:
            starts.append(s.start)
    return tuple(starts)


def chunk_spans(chunking: Chunking) -> tuple[tuple[int, int], ...]:
    """A chunking's ``(start, end)`` spans, in order: what the edits apply to."""
    return tuple((c.start, c.end) for c in chunking.chunks)


def sentence_start(doc: Document, number: int) -> int:
    """Where sentence ``number`` (1-based) starts: the offset of "a cut before sentence ``number``".

    Raises:
        ParameterError: there is no such sentence, or it is the first (nothing comes before it).
    """
    n = len(doc.sentences)
    if not 2 <= number <= n:
        raise ParameterError(f"a cut goes before sentence 2 to {n:,}, got {number:,}" if n > 1 else
                             "this document has a single sentence: there is nowhere to cut between sentences")
    return doc.sentences[number - 1].start


@dataclass(frozen=True)
class EditView:
    """What the Edit page draws for one edited copy and window.

    Attributes:
        doc_id: The document.
        window: The window shown.
        result: The current edits applied to the base (spans, cuts, cuts added and removed, edits ignored).
        base_chunks: How many chunks the base has.
        marks: The cuts inside the window (the base's kept, added, the base's removed).
        minima: Offsets in the window where a perplexity minimum would put a cut (empty unless asked and scored).
        html: The window's clickable text (:func:`backend.figures.edit.edit_text_html`).
        curve: The window's per-sentence values with its cuts, or None when the scores are not held.
        selected: The cut with move buttons, when it is a current cut.
        sentence_starts: Every sentence's start (for labels).
    """

    doc_id: str
    window: EditWindow
    result: EditResult
    base_chunks: int
    marks: tuple[CutMark, ...]
    minima: tuple[int, ...]
    html: str
    curve: go.Figure | None
    selected: int | None
    sentence_starts: tuple[int, ...]

    @property
    def chunks(self) -> int:
        """How many chunks the edited copy has."""
        return len(self.result.spans)

    @property
    def cuts(self) -> tuple[int, ...]:
        """The current cuts, in order."""
        return self.result.cuts

    def sentence_of(self, offset: int) -> int:
        """The 1-based number of the sentence ``offset`` falls in (1 before the first)."""
        return max(1, bisect.bisect_right(self.sentence_starts, offset))

    def cut_label(self, offset: int) -> str:
        """``character 1,234 · sentence 12 (added)`` for the selectbox of cuts."""
        kind = "added" if offset in self.result.added else "base"
        return f"character {offset:,} · sentence {self.sentence_of(offset):,} ({kind})"

    @property
    def cuts_version(self) -> str:
        """A short digest of the cut set: it changes when any cut does (a widget listing the cuts is keyed by it)."""
        return hashlib.sha256(",".join(map(str, self.result.cuts)).encode()).hexdigest()[:12]

    @property
    def counts(self) -> str:
        """``115 chunks (base 114): 3 cuts added, 1 removed``."""
        what = edit_summary(len(self.result.added), len(self.result.removed))
        return f"{self.chunks:,} chunks (base {self.base_chunks:,}): {what}"


def _window_of(doc: Document, starts: Sequence[int], page: int) -> EditWindow:
    pages = len(starts)
    page = min(max(page, 1), pages)
    start = starts[page - 1]
    end = starts[page] if page < pages else len(doc.text)
    sentence_starts = [s.start for s in doc.sentences]
    first = bisect.bisect_left(sentence_starts, start)
    last = bisect.bisect_left(sentence_starts, end)
    if last > first:
        return EditWindow(page, pages, start, end, first + 1, last, len(sentence_starts))
    return EditWindow(page, pages, start, end, 0, 0, len(sentence_starts))


def page_of(doc: Document, offset: int, window: int = WINDOW_CHARS) -> int:
    """The window (1-based) that shows character ``offset``."""
    return max(1, bisect.bisect_right(edit_windows(doc, window), offset))


def edit_view(
    doc: Document,
    state: EditState,
    base_spans: Sequence[tuple[int, int]],
    *,
    page: int = 1,
    window: int = WINDOW_CHARS,
    scores: PPLScores | None = None,
    value: str = "nll",
    show_minima: bool = False,
    bc: Sequence[float | None] | None = None,
    selected: int | None = None,
) -> EditView:
    """The Edit page's view of ``state`` on ``doc`` at window ``page`` (clipped to the pages there are).

    Args:
        doc: The document.
        state: The edited copy's state (its base, edits, snap).
        base_spans: The base chunking's ``(start, end)`` spans, in order.
        page: The window to show (1-based).
        window: Characters per window.
        scores: The document's per-sentence scores when held (the curve and the minima), else None.
        value: ``nll`` or ``ppl``: the value the curve draws.
        show_minima: Whether to mark the perplexity minima (needs ``scores``).
        bc: The Boundary Clarity of each current cut, in cut order (None where not scored), when known.
        selected: The cut that gets move buttons.
    """
    base_spans = [(int(s), int(e)) for s, e in base_spans]
    result = state.result(doc, base_spans)
    shown = _window_of(doc, edit_windows(doc, window), page)
    sentence_starts = tuple(s.start for s in doc.sentences)
    bc_of = dict(zip(result.cuts, bc)) if bc is not None else {}

    def number(offset: int) -> int:
        return max(1, bisect.bisect_right(sentence_starts, offset))

    def inside(offsets: Sequence[int]) -> list[int]:
        return list(offsets[bisect.bisect_left(offsets, shown.start):bisect.bisect_left(offsets, shown.end)])

    added = set(result.added)
    marks = [CutMark(c, number(c), "added" if c in added else "base", bc_of.get(c)) for c in inside(result.cuts)]
    marks += [CutMark(c, number(c), "removed") for c in inside(result.removed)]
    marks.sort(key=lambda m: (m.offset, m.kind != "removed"))

    minima_numbers: list[int] = []
    if scores is not None and scores.doc_id == doc.id and show_minima:
        values = sentence_values(scores.nll, value)
        minima_numbers = [c.index + 1 for c in boundary_candidates(values, "reference")]
    # A minimum ends its chunk: the PPL chunker's cut goes before the next sentence.
    minima = tuple(o for o in inside([sentence_starts[n] for n in minima_numbers if n < len(sentence_starts)]))

    curve = None
    if scores is not None and scores.doc_id == doc.id and shown.first_sentence:
        values = sentence_values(scores.nll, value)
        points = [
            CurvePoint(s.index + 1, s.start, float(v), s.text)
            for s, v in zip(scores.sentences[shown.first_sentence - 1:shown.last_sentence],
                            values[shown.first_sentence - 1:shown.last_sentence])
        ]
        in_window = [n for n in minima_numbers if shown.first_sentence <= n <= shown.last_sentence]
        curve = edit_curve(points, marks, in_window, value.upper() if value == "ppl" else "mean NLL",
                           revision=f"{doc.id}:{shown.page}:{value}")

    html = edit_text_html(
        doc.text, shown.start, shown.end, sentence_starts, [s for s, _ in result.spans], marks, minima,
        selected if selected in result.cuts else None,
    )
    return EditView(
        doc_id=doc.id,
        window=shown,
        result=result,
        base_chunks=len(base_spans),
        marks=tuple(marks),
        minima=minima,
        html=html,
        curve=curve,
        selected=selected if selected in result.cuts else None,
        sentence_starts=sentence_starts,
    )



ACTIONS = ("toggle", "add", "remove", "move")  # what a click (or a button) on the Edit page asks for


@dataclass(frozen=True)
class EditAction:
    """What one action on the Edit page did: its outcome and the cut to select after it.

    Attributes:
        outcome: The edit's :class:`~backend.lab.edit.EditOutcome` (new state, message, changed).
        cut: The cut the action made or moved (the page selects it, with its move buttons), else None.
    """

    outcome: EditOutcome
    cut: int | None


def edit_action(
    state: EditState, doc: Document, base_spans: Sequence[tuple[int, int]], action: str, offset: int, step: int = 0
) -> EditAction:
    """One action of the Edit page: ``toggle`` (a click on the text or the curve), ``add``, ``remove``, ``move``.

    Args:
        state: The edited copy's state.
        doc: The document.
        base_spans: The base's chunk spans.
        action: One of :data:`ACTIONS`.
        offset: Where: the clicked sentence's start, or the cut to remove or move.
        step: For ``move``: -1 back, +1 forward.

    Raises:
        ParameterError: an unknown action, or a move with a step other than -1 or 1.
    """
    base_spans = [(int(s), int(e)) for s, e in base_spans]
    offset = int(offset)
    if action == "toggle":
        outcome = toggle_cut(state, doc, base_spans, offset)
    elif action == "add":
        outcome = add_cut(state, doc, base_spans, offset)
    elif action == "remove":
        outcome = remove_cut(state, doc, base_spans, offset)
    elif action == "move":
        if step not in (-1, 1):
            raise ParameterError(f"a cut moves by -1 or 1 sentence, got {step}")
        outcome = move_cut(state, doc, base_spans, offset, step)
    else:
        raise ParameterError(f"unknown edit action {action!r}: one of {', '.join(ACTIONS)}")
    cut = None
    if outcome.changed:
        new = sorted(set(outcome.state.result(doc, base_spans).cuts) - set(state.result(doc, base_spans).cuts))
        cut = new[0] if len(new) == 1 else None
    return EditAction(outcome, cut)


# --- the page's steps, one call each ---------------------------------------------------------------


@dataclass(frozen=True)
class EditedCopies:
    """The session's edited copies, in order, and what the page's picker calls each.

    Attributes:
        entries: The edited copies (``manual`` configurations) among the session's configurations.
        titles: Per uid, ``C = A, edited`` (its base's letter, else the base's label).
    """

    entries: tuple[ConfigEntry, ...]
    titles: Mapping[int, str]

    @property
    def uids(self) -> list[int]:
        return [e.uid for e in self.entries]


def edited_copies(entries: Sequence[ConfigEntry]) -> EditedCopies:
    """The edited copies among ``entries`` and their picker titles (the count line follows each edit apart)."""
    copies = tuple(e for e in entries if is_edited(e.config))
    return EditedCopies(copies, {e.uid: edited_title(e, entries).rsplit(": ", 1)[0] for e in copies})


@dataclass(frozen=True)
class OpenCopy:
    """The edited copy the page opens: its state, or why it cannot be edited on this document.

    Attributes:
        entry: The copy's configuration entry.
        state: Its edit state (the one held when it is still the copy's, else read from its configuration).
        problem: One line when the copy cannot be edited at all (its edits are unreadable, or an offset
            lies outside the document); ``state`` is then None.
        other_document: One line when the edits were made on another document (the page offers a new copy).
        base_entry: The session's configuration the copy was made from, when it is still there.
    """

    entry: ConfigEntry
    state: EditState | None
    problem: str | None = None
    other_document: str | None = None
    base_entry: ConfigEntry | None = None


def open_copy(doc: Document, entries: Sequence[ConfigEntry], uid: int, held: EditState | None) -> OpenCopy:
    """Open the edited copy ``uid`` of ``entries`` on ``doc``, keeping ``held`` (its undo history) while it is current."""
    entry = next(e for e in entries if e.uid == uid)
    state = held
    if state is None or state.config != entry.config:  # e.g. a session just opened: its edits as one step
        try:
            state = EditState.of(entry.config)
        except ParameterError as e:
            return OpenCopy(entry, None, problem=str(e))
    if state.doc_id and state.doc_id != doc.id:
        return OpenCopy(entry, state, other_document=(
            f"{entry.tag} was edited on another document: on this one its chunks are its base's. "
            "Make a new copy to edit this document."))
    try:
        check_offsets(doc, parse_edits(state.edits))
    except ParameterError as e:
        return OpenCopy(entry, None, problem=f"{entry.tag} cannot be edited here: {e}")
    base_entry = next((e for e in entries if e.uid != uid and e.config == state.base), None)
    return OpenCopy(entry, state, base_entry=base_entry)


def edit_chunking(doc: Document, config: ChunkerConfig, chunk: ChunkFn, with_model: ChunkFn) -> Column:
    """``config``'s chunking as Compare gets it (:func:`backend.lab.compare.chunk_entries`): done, pending or failed."""
    return chunk_entries(doc, [ConfigEntry(-1, "base", config)], chunk, with_model)[0]


@dataclass(frozen=True)
class EditBase:
    """What the edits apply to: the base's chunking (or why there is none yet) and the document's held scores.

    Attributes:
        column: The base's chunking, pending a model run, or failed.
        spans: The base's chunk spans (empty unless done).
        scores: The document's per-sentence scores under the session's model when held (cache included), else None.
        error: ``The base … failed: …`` when it failed, else None.
    """

    column: Column
    spans: tuple[tuple[int, int], ...]
    scores: PPLScores | None
    error: str | None


def edit_base(doc: Document, state: EditState, chunk: ChunkFn, with_model: ChunkFn, models: SessionModels) -> EditBase:
    """The base of ``state`` on ``doc`` (:func:`edit_chunking`) and the held scores (never a model call)."""
    column = edit_chunking(doc, state.base, chunk, with_model)
    error = None
    if column.chunking is None and not column.pending:
        error = f"The base {state.base.label} failed: {column.error}"
    spans = chunk_spans(column.chunking) if column.chunking is not None else ()
    scores = held_scores(None, doc, models) if doc.sentences else None
    return EditBase(column, spans, scores, error)


def editor_view(
    doc: Document,
    state: EditState,
    base_spans: Sequence[tuple[int, int]],
    edited: Chunking | None,
    models: SessionModels,
    store: Mapping[Hashable, Any],
    *,
    bc_mode: str,
    bc_window: int | None,
    **view: Any,
) -> EditView:
    """:func:`edit_view` with the BC of each cut of ``edited`` from what is known (the Quality store, else the cache).

    Args:
        doc: The document.
        state: The edited copy's state.
        base_spans: The base's chunk spans.
        edited: The copy's chunking (None: not chunked, no BC).
        models: The session's models (BC's language model; never called).
        store: The session's quality store.
        bc_mode: BC's mode.
        bc_window: The pair window the store's tables were scored with.
        **view: :func:`edit_view`'s keyword arguments (``page``, ``scores``, ``show_minima``, ``selected``…).
    """
    bc = (boundary_values(doc, edited, models, store, mode=bc_mode, window=bc_window)
          if edited is not None else None)
    return edit_view(doc, state, base_spans, bc=bc or None, **view)
