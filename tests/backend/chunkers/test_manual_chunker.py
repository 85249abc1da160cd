"""The ``manual`` chunker (edited copies): exact spans under random edits, the edit grammar, the CLI spelling."""

from __future__ import annotations

import collections

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.chunkers import config_needs, make_chunker, run_chunker
from backend.chunkers.manual import (
    Edit,
    apply_edits,
    canonical_edits,
    format_edits,
    parse_edits,
    snap_offset,
    spans_for_cuts,
)
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.text.document import Document
from backend.tokenizers import get_tokenizer
from tests.invariants import check_invariants

_words = st.sampled_from(
    ["alpha", "beta", "Gamma", "delta.", "Epsilon!", "zeta?", "eta,", "theta;", "  ", "\n", "\n\n", "Dr.", "3.14",
     "北京。", "😀", "e\u0301", "x" * 30]
)
TEXTS = st.lists(_words, min_size=1, max_size=120).map(" ".join)
BASES = st.sampled_from([
    "recursive chunk_size=12", "recursive chunk_size=25 chunk_overlap=0", "sentence chunk_size=20",
    "paragraph chunk_size=30", "fixed_token chunk_size=9", "fixed_token chunk_size=9 chunk_overlap=3",
    "sentence chunk_size=30 chunk_overlap=10",
])
EDITS = st.lists(st.tuples(st.sampled_from("+-"), st.integers(0, 1500)), max_size=25)


def _doc(text: str) -> Document:
    return Document.from_text(text, source="edits.txt")


def _coverage(text: str, spans) -> collections.Counter:
    """How many chunks cover each non-whitespace character."""
    count: collections.Counter = collections.Counter()
    for s, e in spans:
        for i in range(s, e):
            if not text[i].isspace():
                count[i] += 1
    return count


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, base=BASES, edits=EDITS, snap=st.sampled_from(["sentence", "word", "char"]))
def test_random_edits_never_lose_or_duplicate_a_character(text, base, edits, snap):
    doc = _doc(text)
    edit_str = ",".join(f"{op}{n % (len(text) + 1)}" for op, n in edits)  # inside the document: 0 to its length
    config = ChunkerConfig.make("manual", {"base": base, "edits": edit_str, "snap": snap})
    chunking = run_chunker(doc, config)
    base_ch = run_chunker(doc, ChunkerConfig.make(*ChunkerConfig.parse(base)[:2]))
    overlap = "chunk_overlap" in base and not base.endswith("chunk_overlap=0")
    check_invariants(doc, chunking, None, overlap_allowed=overlap, tokenizer=get_tokenizer("cl100k"))
    spans = [(c.start, c.end) for c in chunking.chunks]
    before = _coverage(text, [(c.start, c.end) for c in base_ch.chunks])
    after = _coverage(text, spans)
    assert set(after) >= set(before), "a character the base covered is lost"
    if not overlap:
        assert all(n == 1 for n in after.values()), "a character is in two chunks"
    # the canonical list gives the same chunks, whatever the snap, and applying it again changes nothing
    result = apply_edits(doc, [(c.start, c.end) for c in base_ch.chunks], parse_edits(edit_str), snap)
    assert list(result.spans) == spans
    canon = format_edits(canonical_edits(result))
    again = run_chunker(doc, ChunkerConfig.make("manual", {"base": base, "edits": canon, "snap": "char"}))
    assert [(c.start, c.end) for c in again.chunks] == spans
    assert len(spans) == len(base_ch.chunks) + len(result.added) - len(result.removed)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, base=BASES)
def test_no_edits_or_another_document_gives_exactly_the_base(text, base):
    doc = _doc(text)
    base_ch = run_chunker(doc, ChunkerConfig.make(*ChunkerConfig.parse(base)[:2]))
    plain = run_chunker(doc, ChunkerConfig.make("manual", {"base": base}))
    other = run_chunker(doc, ChunkerConfig.make("manual", {"base": base, "edits": "-5,+40", "doc": "0" * 16}))
    for ch in (plain, other):
        assert [(c.start, c.end, c.tokens) for c in ch.chunks] == [(c.start, c.end, c.tokens) for c in base_ch.chunks]
    assert "not edited" in (other.run_report or "")


def test_adding_and_removing_a_cut_on_sentences():
    text = "One two three. Four five six. Seven eight nine. Ten eleven."
    doc = _doc(text)
    base = "recursive chunk_size=200"  # one chunk
    four, seven = text.index("Four"), text.index("Seven")
    ch = run_chunker(doc, ChunkerConfig.make("manual", {"base": base, "edits": f"+{four + 3},+{seven - 2}"}))
    assert [c.text for c in ch.chunks] == ["One two three.", "Four five six.", "Seven eight nine. Ten eleven."]
    assert ch.meta_dict["cuts_added"] == 2
    back = run_chunker(doc, ChunkerConfig.make("manual", {"base": base, "edits": f"+{four},+{seven},-{four + 1}"}))
    assert [c.text for c in back.chunks] == ["One two three. Four five six.", "Seven eight nine. Ten eleven."]
    assert "1 cut added" in back.run_report


def test_removing_a_base_cut_joins_the_chunks_with_what_lay_between():
    doc = _doc("Alpha beta.\n\nGamma delta.\n\nEpsilon zeta.")
    base = run_chunker(doc, ChunkerConfig.make("paragraph", {"chunk_size": 5}))
    assert len(base) == 3
    cut = base.chunks[1].start
    ch = run_chunker(doc, ChunkerConfig.make("manual", {"base": "paragraph chunk_size=5", "edits": f"-{cut}"}))
    assert [c.text for c in ch.chunks] == ["Alpha beta.\n\nGamma delta.", "Epsilon zeta."]
    # put it back: exactly the base again, and the canonical form is empty
    result = apply_edits(doc, [(c.start, c.end) for c in base.chunks], [Edit("-", cut), Edit("+", cut)], "char")
    assert list(result.spans) == [(c.start, c.end) for c in base.chunks]
    assert canonical_edits(result) == ()


def test_an_edit_that_changes_nothing_is_reported():
    doc = _doc("Alpha beta gamma. Delta epsilon.")
    ch = run_chunker(doc, ChunkerConfig.make("manual", {"base": "sentence chunk_size=5", "edits": "+18,-0"}))
    assert len(ch) == 1
    assert "changed nothing" in ch.run_report and "already a cut" in ch.run_report


def test_an_offset_past_the_end_is_a_one_line_error_and_the_counts_are_what_the_edits_did():
    doc = _doc("Alpha beta. Gamma delta. Epsilon zeta.")  # 38 characters, one chunk
    with pytest.raises(ParameterError, match=r"^manual: edit \+39 is outside the document: offsets go from 0 to 38$"):
        apply_edits(doc, [(0, 38)], parse_edits("+12,+39"))
    # +14 snaps onto the cut +12 made, +38 (the end) to 25, -0 removes 12, +25 is a cut already: 1 added, 4 written
    result = apply_edits(doc, [(0, 38)], parse_edits("+12,+14,+38,-0,+25"))
    assert (result.added, result.removed) == ((25,), ())
    assert result.ignored == ("+14: already a cut (at 12)", "+25: already a cut")


def test_snapping_goes_to_the_nearest_sentence_or_word_start():
    doc = _doc("Alpha beta. Gamma delta.")
    assert snap_offset(doc, 14, "sentence") == 12
    assert snap_offset(doc, 8, "word") == 6
    assert snap_offset(doc, 8, "char") == 8
    assert snap_offset(doc, 10_000, "char") == len(doc.text)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"edits": "+12,x4"}, r"must be \+OFFSET"),
        ({"base": "nonsense chunk_size=3"}, "unknown chunker"),
        ({"base": "recursive chunk_size=zero"}, "chunk_size must be int"),
        ({"base": "manual base=recursive"}, "edited copy itself"),
        ({"base": "recursive 'chunk"}, "manual: base"),
        ({"base": ""}, "needs a chunker name"),
        ({"snap": "page"}, "snap must be one of"),
        ({"doc": "abc"}, "doc must be a document id"),
    ],
)
def test_bad_parameters_are_one_line_errors(params, message):
    with pytest.raises(ParameterError, match=message):
        make_chunker("manual", params)


def test_an_edited_copy_needs_its_bases_models():
    assert config_needs(ChunkerConfig.make("manual", {"base": "ppl threshold=0.4"})) == ("lm",)
    assert config_needs(ChunkerConfig.make("manual", {"base": "recursive chunk_size=50"})) == ()
    assert make_chunker("manual", {"base": "ppl"}).needs == ("lm",)


def test_spec_round_trips_through_parse():
    config = ChunkerConfig.make("recursive", {"chunk_size": 200, "chunk_overlap": 20}, "words")
    name, params, tok = ChunkerConfig.parse(config.spec)
    assert make_chunker(name, params, tok).config == config
    label = ChunkerConfig.make("manual", {"base": "recursive chunk_size=200", "edits": "-3,+9,+40"}).label
    assert label == "manual(recursive chunk_size=200; 2 cuts added, 1 removed) · cl100k"


def test_spans_for_cuts_keeps_a_bases_overlap_at_its_own_cuts():
    text = "aaaa bbbb cccc dddd"
    base = [(0, 9), (5, 14), (10, 19)]  # overlapping
    assert spans_for_cuts(text, base, [5, 10]) == base
    assert spans_for_cuts(text, base, [10]) == [(0, 14), (10, 19)]  # the joined chunk ends where its last part did
    assert spans_for_cuts(text, base, []) == [(0, 19)]
