"""The Edit page's view (backend.lab.edit_view): windows at sentence starts, the cuts in a window, the escaped
clickable HTML, the actions a click asks for, the curve with minima and BC."""

from __future__ import annotations

import math

import pytest

from backend.chunkers.meta.results import PPLScores
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import ParameterError
from backend.figures.edit import CutMark
from backend.lab.edit import EditState, edit_copy
from backend.lab.edit_view import (
    OpenCopy,
    edit_action,
    edit_view,
    edit_windows,
    edited_copies,
    open_copy,
    page_of,
    sentence_start,
)
from backend.models.scoring import SentenceScore
from backend.text.document import Document

TEXT = "One <b>a</b>. Two here. Three now. Four end."
SPANS = [(0, 23), (24, 44)]  # the base: two chunks, one cut at 24 (sentence 3)


def _setup():
    doc = Document.from_text(TEXT, source="h.txt")
    return doc, EditState.of(edit_copy(ChunkerConfig.make("recursive", {"chunk_size": 8}), doc))


def _scores(doc: Document, nll: list[float]) -> PPLScores:
    sentences = tuple(
        SentenceScore(i, s.start, s.end, doc.text[s.start:s.end], 3, v, math.exp(v))
        for i, (s, v) in enumerate(zip(doc.sentences, nll))
    )
    return PPLScores(doc.id, "m", "tiny model", sentences)


def test_windows_start_at_sentence_starts_and_a_view_shows_one():
    doc, state = _setup()
    assert [(s.start, s.end) for s in doc.sentences] == [(0, 13), (14, 23), (24, 34), (35, 44)]
    assert edit_windows(doc, 20) == (0, 24)
    assert edit_windows(doc) == (0,)
    assert page_of(doc, 30, 20) == 2
    view = edit_view(doc, state, SPANS, page=2, window=20)
    assert view.window.caption(len(TEXT)) == "Characters 24–44 of 44 · sentences 3–4 of 4 (page 2 of 2)"
    assert view.counts == "2 chunks (base 2): no edits"
    assert view.marks == (CutMark(24, 3, "base"),)
    assert edit_view(doc, state, SPANS, page=9, window=20).window.page == 2  # clipped to the pages there are
    with pytest.raises(ParameterError):
        edit_windows(doc, 0)


def test_the_window_html_escapes_the_text_and_marks_gaps_cuts_and_the_selected_cut():
    doc, state = _setup()
    view = edit_view(doc, state, SPANS, window=20)
    assert view.html == (
        '<div class="ed-root"><span class="s c0" data-o="0">One &lt;b&gt;a&lt;/b&gt;. </span>'
        '<i class="gap" data-o="14" data-n="2"></i><span class="s c0" data-o="14">Two here. </span></div>'
    )
    added = edit_action(state, doc, SPANS, "toggle", 14).outcome.state
    view = edit_view(doc, added, SPANS, window=20, selected=14, bc=[0.5, None])
    assert view.marks == (CutMark(14, 2, "added", 0.5),)
    assert view.html == (
        '<div class="ed-root"><span class="s c0" data-o="0">One &lt;b&gt;a&lt;/b&gt;. </span>'
        '<span class="cut added sel" data-act="remove" data-o="14" title="Cut you added at character 14 '
        '(sentence 2) · BC 0.500 — click to remove"><span class="mv" data-act="move" data-o="14" data-step="-1" '
        'title="Move this cut one sentence back">◀</span><span class="bc">0.50</span><span class="mv" '
        'data-act="move" data-o="14" data-step="1" title="Move this cut one sentence forward">▶</span></span>'
        '<span class="s c1" data-o="14">Two here. </span></div>'
    )
    assert "<b>" not in view.html
    assert [view.cut_label(c) for c in view.cuts] == [
        "character 14 · sentence 2 (added)", "character 24 · sentence 3 (base)"
    ]


def test_actions_toggle_remove_and_move_and_say_which_cut_to_select():
    doc, state = _setup()
    added = edit_action(state, doc, SPANS, "toggle", 14)
    assert (added.cut, added.outcome.message, added.outcome.state.edits) == (
        14, "Cut added at character 14 (sentence 2)", "+14"
    )
    again = edit_action(added.outcome.state, doc, SPANS, "toggle", 14)  # a click on a cut's place removes it
    assert (again.cut, again.outcome.state.edits) == (None, "")
    removed = edit_action(added.outcome.state, doc, SPANS, "remove", 24)
    assert (removed.cut, removed.outcome.message, removed.outcome.state.edits) == (
        None, "Cut at character 24 removed", "-24,+14"
    )
    ghost = edit_view(doc, removed.outcome.state, SPANS)
    assert ghost.marks == (CutMark(14, 2, "added"), CutMark(24, 3, "removed"))
    assert ghost.counts == "2 chunks (base 2): 1 cut added, 1 removed"
    refused = edit_action(added.outcome.state, doc, SPANS, "move", 14, 1)  # sentence 3 is a cut already
    assert (refused.cut, refused.outcome.changed, refused.outcome.message) == (
        None, False, "No cut moved: 24 is a cut already"
    )
    moved = edit_action(removed.outcome.state, doc, SPANS, "move", 14, 1)
    assert (moved.cut, moved.outcome.state.edits) == (24, "")  # back onto the base's removed cut: the base again
    with pytest.raises(ParameterError):
        edit_action(state, doc, SPANS, "move", 14, 2)
    with pytest.raises(ParameterError):
        edit_action(state, doc, SPANS, "split", 14)


def test_a_cut_before_sentence_n():
    doc, _ = _setup()
    assert sentence_start(doc, 2) == 14
    assert sentence_start(doc, 4) == 35
    for bad in (1, 5):
        with pytest.raises(ParameterError, match="before sentence 2 to 4"):
            sentence_start(doc, bad)


def test_the_curve_draws_the_window_sentences_minima_and_bc():
    doc, state = _setup()
    scores = _scores(doc, [3.0, 1.0, 2.0, 2.5])
    plain = edit_view(doc, state, SPANS, scores=scores)
    assert plain.minima == ()
    hinted = edit_view(doc, state, SPANS, scores=scores, show_minima=True, bc=[0.75])
    assert hinted.minima == (24,)  # the minimum is sentence 2: the PPL chunker cuts before sentence 3
    names = [t.name for t in hinted.curve.data]
    assert names == ["cut of the base", "mean NLL", "perplexity minimum", "BC of the cut"]
    line = hinted.curve.data[1]
    assert list(line.x) == [1, 2, 3, 4] and list(line.y) == [3.0, 1.0, 2.0, 2.5]
    assert [c[0] for c in line.customdata] == [0, 14, 24, 35]  # a click on a point: a cut before its sentence
    assert list(hinted.curve.data[2].x) == [2]
    assert list(hinted.curve.data[3].x) == [2.5] and list(hinted.curve.data[3].y) == [0.75]
    assert '<span class="min"' in hinted.html
    assert edit_view(doc, state, SPANS).curve is None
    other = PPLScores("0" * 16, "m", "tiny model", scores.sentences)
    assert edit_view(doc, state, SPANS, scores=other, show_minima=True).curve is None  # another document's scores


def test_the_page_s_copies_and_the_copy_it_opens():
    # Moved from pages/edit.py: which configurations are edited copies, their titles, the state opened.
    doc, state = _setup()
    base = ConfigEntry(0, "A", state.base)
    copy = ConfigEntry(1, "B", state.config)
    copies = edited_copies([base, copy])
    assert (copies.uids, dict(copies.titles)) == ([1], {1: "B = A, edited"})
    opened = open_copy(doc, [base, copy], 1, None)
    assert opened == OpenCopy(copy, state, base_entry=base)
    assert open_copy(doc, [base, copy], 1, state.pushed("+14")).state == state  # a held state of another config
    other = Document.from_text(TEXT + " Five.", source="other.txt")
    assert open_copy(other, [base, copy], 1, None).other_document == (
        "B was edited on another document: on this one its chunks are its base's. Make a new copy to edit this document.")
    far = ConfigEntry(2, "C", ChunkerConfig.make("manual", {**state.config.params_dict, "edits": "+14,+99"}))
    assert open_copy(doc, [base, far], 2, None) == OpenCopy(
        far, None, problem="C cannot be edited here: manual: edit +99 is outside the document: offsets go from 0 to 44")
