"""Editing by hand (backend.lab.edit): edited copies, add/remove/move/toggle, undo and redo."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.lab.edit import EditState, add_cut, edit_copy, edited_title, move_cut, remove_cut, toggle_cut
from backend.text.document import Document

TEXT = " ".join(f"Sentence number {i} says something." for i in range(40))
BASE = ChunkerConfig.make("recursive", {"chunk_size": 60})


def _setup():
    doc = Document.from_text(TEXT, source="s.txt")
    base = run_chunker(doc, BASE)
    spans = [(c.start, c.end) for c in base.chunks]
    return doc, base, spans, EditState.of(edit_copy(BASE, doc))


def _spans(doc, state):
    return [(c.start, c.end) for c in run_chunker(doc, state.config).chunks]


def test_an_edited_copy_starts_as_its_base_and_names_it():
    doc, base, spans, state = _setup()
    assert _spans(doc, state) == spans
    a = ConfigEntry(0, "A", BASE)
    c = ConfigEntry(2, "C", state.config)
    assert edited_title(c, [a, c]) == "C = A, edited: no edits"
    copy_of_copy = edit_copy(state.config, doc)
    assert EditState.of(copy_of_copy).base == ChunkerConfig.make("recursive", {"chunk_size": 60, "chunk_overlap": 0})


def test_add_remove_move_and_toggle_change_one_cut_each():
    doc, base, spans, state = _setup()
    mid = doc.sentences[3].start + 4  # inside sentence 4: snaps to its start
    out = add_cut(state, doc, spans, mid)
    assert out.changed and "Cut added" in out.message
    assert len(run_chunker(doc, out.state.config)) == len(base) + 1
    again = add_cut(out.state, doc, spans, mid)
    assert not again.changed and "already a cut" in again.message
    cut = doc.sentences[3].start
    moved = move_cut(out.state, doc, spans, cut, +1)
    assert moved.changed and doc.sentences[4].start in moved.state.result(doc, spans).cuts
    removed = remove_cut(moved.state, doc, spans, doc.sentences[4].start)
    assert removed.changed and _spans(doc, removed.state) == spans
    assert removed.state.edits == ""
    toggled = toggle_cut(state, doc, spans, spans[1][0])  # a base cut: removed
    assert toggled.changed and len(run_chunker(doc, toggled.state.config)) == len(base) - 1
    title = edited_title(ConfigEntry(1, "B", toggled.state.config), [ConfigEntry(0, "A", BASE)])
    assert title == "B = A, edited: 1 cut removed"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "toggle", "left", "right"]), st.integers(0, len(TEXT))),
                min_size=1, max_size=12))
def test_undo_then_redo_walks_the_same_states(ops):
    doc, _base, spans, state = _setup()
    states = [state]
    for op, at in ops:
        s = states[-1]
        cuts = s.result(doc, spans).cuts
        if op == "add":
            out = add_cut(s, doc, spans, at)
        elif op == "remove":
            out = remove_cut(s, doc, spans, at)
        elif op == "toggle":
            out = toggle_cut(s, doc, spans, at)
        else:
            out = move_cut(s, doc, spans, min(cuts, key=lambda c: abs(c - at)) if cuts else at, -1 if op == "left" else 1)
        if out.changed:
            states.append(out.state)
    edits = [s.edits for s in states]
    chunkings = [_spans(doc, s) for s in states]
    s = states[-1]
    for k in range(len(states) - 1, 0, -1):  # undo to the start
        s = s.undo()
        assert s.edits == edits[k - 1] and _spans(doc, s) == chunkings[k - 1]
    assert not s.can_undo and s.edits == ""
    for k in range(1, len(states)):  # redo to the end
        s = s.redo()
        assert s.edits == edits[k] and _spans(doc, s) == chunkings[k]
    assert not s.can_redo
    # a new edit after an undo drops the redo steps
    if len(states) > 2:
        back = s.undo().undo()
        branch = back.pushed("+1")
        assert not branch.can_redo and branch.edits == "+1"
