"""LLM chunkers (llm_split, lumber, moc): recorded and corrupted model answers, invariants, cache, real models.

Most tests feed answers through a fake ChatModel, so what the model said is fixed and the
repair is what is tested; two tests run the real bundled SmolLM2 (in-process, and behind the
OpenAI-compatible test server over HTTP), and two drive the CLI against a scripted server, in this process
(what they check is what ``python -m backend chunk`` prints, not the process; a start-up per command cost more
than the command).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest

from backend.chunkers import ModelContext
from backend.chunkers.base import make_chunker
from backend.chunkers.llm.chunkers import parse_lumber_answer, parse_split_after
from backend.chunkers.llm.granularity import (
    GRANULARITY_NAMES,
    ROUTERS,
    CentroidRouter,
    FixedRouter,
    ParagraphRouter,
    granularity_class,
    make_router,
    register_router,
    router_samples,
    train_router,
)
from backend.chunkers.llm.moc import PLACEHOLDERS, find_anchor, levenshtein, parse_rules, recover_spans, split_rule
from backend.chunkers.recursive import recursive_spans
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.models.chat import LocalChat, RemoteChat
from backend.text.document import Document
from backend.tokenizers import get_tokenizer
from tests.invariants import check_invariants
from tests.support.cli import run_main
from tests.support.scripted_chat_server import start_scripted_server

P1 = (
    "The lighthouse at Corran Point was built in 1851. Its lamp burned whale oil for the first twenty years. "
    "Keepers climbed one hundred and twelve steps to trim the wick. In 1873 the oil gave way to paraffin."
)
P2 = (
    "Bread is made from flour, water, salt and yeast. The dough must rest before it is shaped. "
    "A hot oven gives the crust its colour. Some bakers add a pan of water for steam."
)
P3 = (
    "The committee met on Tuesday. It approved the budget for the new library. "
    "Two members voted against it. The building work starts in May and should last a year."
)
P4 = "Rain fell all night. By morning the river had risen over the path. Nobody minded."
TEXT = "\n\n".join([P1, P2, P3, P4])
CHINESE = (
    "灯塔建于一八五一年。最初二十年里，灯用鲸油点燃。守塔人每天要爬一百一十二级台阶。\n\n"
    "面包由面粉、水、盐和酵母制成。面团在成形之前必须醒发。热烤箱让面包皮变成金黄色。\n\n"
    "委员会周二开会，批准了新图书馆的预算。两名成员投了反对票。工程将于五月开工，预计持续一年。\n\n"
    "雨下了一整夜。到了早上，河水漫过了小路。没有人在意。"
)
TOK = get_tokenizer("cl100k")


def long_text(n: int = 14, seed: int = 3) -> str:
    rng = random.Random(seed)
    words = "river lamp keeper bread oven budget library rain ducks path morning stone harbour wind".split()
    paras = []
    for i in range(n):
        sentences = [
            f"Paragraph {i} sentence {j} " + " ".join(rng.choice(words) for _ in range(rng.randint(6, 16))) + "."
            for j in range(rng.randint(2, 6))
        ]
        paras.append(" ".join(sentences))
    return "\n\n".join(paras)


class FakeChat:
    """A ChatModel answering with ``answer(messages)`` and recording every prompt."""

    name = "fake"

    def __init__(self, answer, fingerprint: str = "fake:1") -> None:
        self.answer = answer
        self.fingerprint = fingerprint
        self.prompts: list[list[dict]] = []

    @property
    def calls(self) -> int:
        return len(self.prompts)

    def complete(self, messages, *, max_tokens, temperature=0.0, progress=None):
        self.prompts.append([dict(m) for m in messages])
        return self.answer(messages) if callable(self.answer) else self.answer.pop(0)


def run(name, doc, chat, cache=None, **params):
    chunker = make_chunker(name, params)
    return chunker.chunk(doc, ModelContext(chat=chat, use_cache=cache is not None, _cache=cache))


def invariants(doc, chunking, size=None):
    check_invariants(doc, chunking, size, False, TOK)


def window_of(messages) -> str:
    content = messages[-1]["content"]
    return content.split("Document content: ", 1)[1]


def moc_rules_answer(corrupt=lambda i, head, tail: (head, tail), skip=()):
    """A MoC answer giving one rule per sentence-pair of the window, through ``corrupt``."""

    def answer(messages):
        text = window_of(messages)
        doc = Document.from_text(text)
        rules = []
        for i, p in enumerate(doc.paragraphs):
            if i in skip:
                continue
            chunk = text[p.start : p.end]
            head, tail = corrupt(i, chunk[:18], chunk[-14:])
            rules.append(f"{head} [MASK] {tail}")
        return json.dumps(rules, ensure_ascii=False)

    return answer


def nonspace(s: str) -> int:
    return sum(not c.isspace() for c in s)


# --- rule parsing and edit-distance recovery ------------------------------------------------------


@pytest.mark.parametrize("placeholder", [*PLACEHOLDERS, "[ MASK ]", "<Omitted>", "< ... >", "[mask]"])
def test_every_placeholder_splits_a_rule(placeholder):
    rule = split_rule(f"The lighthouse at {placeholder} way to paraffin.")
    assert (rule.head, rule.tail, rule.full) == ("The lighthouse at", "way to paraffin.", False)


@pytest.mark.parametrize(
    "reply",
    [
        '["The lighthouse [MASK] paraffin.", "Bread is [MASK] for steam."]',
        "```json\n[\n  \"The lighthouse [MASK] paraffin.\",\n  \"Bread is [MASK] for steam.\",\n]\n```",
        "Sure! ['The lighthouse [MASK] paraffin.', 'Bread is [MASK] for steam.']",
        "1. The lighthouse [MASK] paraffin.\n2. Bread is [MASK] for steam.",
        '- "The lighthouse <omitted> paraffin.",\n- "Bread is .*? for steam."',
    ],
)
def test_rule_lists_are_read_in_any_shape(reply):
    rules = parse_rules(reply)
    assert [(r.head, r.tail) for r in rules] == [("The lighthouse", "paraffin."), ("Bread is", "for steam.")]


@pytest.mark.parametrize("reply", ["", "   ", "[]", "I cannot help with that", "[1, 2, 3]"])
def test_garbage_gives_no_usable_rule_or_a_full_text_rule(reply):
    assert all(r.full for r in parse_rules(reply))


def test_levenshtein_agrees_with_a_plain_dynamic_program():
    def plain(a, b):
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            prev, row[0] = row[:], i
            for j, cb in enumerate(b, 1):
                row[j] = min(prev[j - 1] + (ca != cb), prev[j] + 1, row[j - 1] + 1)
        return row[-1]

    rng = random.Random(0)
    for _ in range(400):
        a = "".join(rng.choice("ab灯c") for _ in range(rng.randint(0, 8)))
        b = "".join(rng.choice("ab灯c") for _ in range(rng.randint(0, 8)))
        assert levenshtein(a, b) == plain(a, b), (a, b)


@pytest.mark.parametrize(
    "anchor",
    [
        "Bread is made from flour",  # verbatim
        "Bread is mde from flour",  # a dropped letter
        "Bread is made form flour",  # swapped letters
        "bread is made from  flour",  # case and spacing
        "Bread was made from flour",  # a word changed
    ],
)
def test_altered_anchors_are_found_at_the_exact_place(anchor):
    m = find_anchor(anchor, TEXT, 0, len(TEXT), 0.3)
    assert m is not None and m.start == TEXT.index("Bread")
    assert TEXT[m.start : m.end].startswith("Bread") and abs(m.end - (m.start + 24)) <= 2


def test_an_anchor_too_far_from_the_text_is_not_forced():
    assert find_anchor("Quantum chromodynamics lattice", TEXT, 0, len(TEXT), 0.3) is None


def test_recovery_maps_corrupted_rules_to_exact_spans_and_keeps_skipped_text():
    rules = parse_rules(json.dumps([
        "The lighthuose at Corran [MASK] way to parafin.",  # typos in both anchors
        # P2 skipped by the model
        "The committee met [MASK] should last a year.",
        "Rain fell all nigth. [MASK]",  # no tail: runs to the end
    ]))
    rec = recover_spans(TEXT, rules, 0, len(TEXT))
    got = [(TEXT[p.start : p.end], p.kind) for p in rec.pieces]
    assert got == [(P1, "approx"), (P2, "gap"), (P3, "rule"), (P4, "approx")]
    assert (rec.rules, rec.dropped, rec.approximate) == (3, 0, 2)


def test_recovery_drops_unmatchable_and_out_of_order_rules_without_losing_text():
    rules = parse_rules(json.dumps([
        "The committee met [MASK] last a year.",
        "The lighthouse at [MASK] to paraffin.",  # before the previous one: cannot go back
        "Completely invented [MASK] nonsense here.",
        "Rain fell [MASK] Nobody minded.",
    ]))
    rec = recover_spans(TEXT, rules, 0, len(TEXT))
    kinds = [(TEXT[p.start : p.end], p.kind) for p in rec.pieces]
    assert kinds == [(P1 + "\n\n" + P2, "gap"), (P3, "rule"), (P4, "rule")]
    assert rec.dropped == 2


# --- moc ---------------------------------------------------------------------------------------


def test_moc_recovers_exact_spans_from_altered_answers_and_reports_content_loss():
    def corrupt(i, head, tail):
        return head.replace("e", "a", 1), tail[1:]  # a typo in each head, a clipped tail

    chat = FakeChat(moc_rules_answer(corrupt, skip={1}))
    doc = Document.from_text(TEXT)
    result = run("moc", doc, chat, router="0-120")
    assert [c.text for c in result.chunks] == [P1, P2, P3, P4]
    meta = result.meta_dict
    assert meta["gap_chunks"] == (1,)
    assert meta["content_loss_chars"] == nonspace(P2)
    assert meta["content_loss"] == pytest.approx(nonspace(P2) / nonspace(TEXT), abs=1e-6)
    assert meta["granularity"] == "0-120" and meta["router"] == "0-120"
    assert meta["rules"] == 3 and meta["rules_approximate"] == 3
    assert chat.calls == 1
    invariants(doc, result)


def test_moc_garbage_answer_falls_back_to_the_recursive_splitter_and_says_why():
    # Issue 25: every anchor missing gave one gap chunk per window (100 % content loss); now the window is
    # split without the model, at the routed granularity (0-120 here: 120 tokens), and the run says so.
    doc = Document.from_text(TEXT)
    result = run("moc", doc, FakeChat(lambda m: "I am sorry, I cannot do that."))
    ends = [p.end for p in doc.paragraphs]
    assert [(c.start, c.end) for c in result.chunks] == [(0, ends[1]), (ends[1] + 2, ends[3])]
    assert [(c.start, c.end) for c in result.chunks] == recursive_spans(TEXT, TOK, 120, 0)
    meta = result.meta_dict
    assert meta["content_loss"] == 0.0 and meta["gap_chunks"] == ()
    assert (meta["rules"], meta["rules_dropped"], meta["windows"]) == (1, 1, ((0, len(TEXT), 1, 1),))
    assert meta["fallback_windows"] == (0,) and meta["fallback_chunks"] == (0, 1)
    assert meta["fallback_reasons"] == ("anchors missing for 1 of 1 rule",)
    assert meta["fallback"] == "recursive splitter at 120 tokens" and meta["fallback_share"] == 1.0
    assert result.degraded
    assert result.run_report == (
        "content loss 0.0 % · granularity 0-120 (paragraph router) · 1 of 1 rule dropped for missing anchors "
        "(per window: 1/1) · fallback: 1 of 1 window had no usable rule (window 1: anchors missing for 1 of 1 rule) "
        "and was split by the recursive splitter at 120 tokens, 100.0 % of the text · 1 model call, 0 cached, 0 repairs"
    )
    invariants(doc, result)


def test_moc_answer_without_rules_falls_back_with_that_reason():
    doc = Document.from_text(TEXT)
    result = run("moc", doc, FakeChat(lambda m: ""), router="150-180")
    meta = result.meta_dict
    assert meta["fallback_reasons"] == ("no rule in the answer",) and meta["fallback_tokens"] == 180
    assert meta["rules"] == 0 and meta["repairs"] == 1
    assert [c.text for c in result.chunks] == [TEXT]  # 145 tokens: one piece at 180
    assert "(window 1: no rule in the answer) and was split by the recursive splitter at 180 tokens" in result.run_report
    invariants(doc, result)


def test_moc_falls_back_only_in_the_windows_without_a_usable_rule():
    doc = Document.from_text(long_text())
    good = moc_rules_answer()

    def answer(messages):  # usable rules for the first window only, invented anchors afterwards
        if len(chat.prompts) == 1:
            return good(messages)
        return json.dumps(["Completely invented [MASK] nonsense here.", "Nothing like [MASK] this text."])

    chat = FakeChat(answer)
    result = run("moc", doc, chat, window_tokens=150, router="0-120")
    meta = result.meta_dict
    windows = meta["windows"]
    assert len(windows) == chat.calls >= 3
    assert [w[2:] for w in windows] == [(windows[0][2], 0)] + [(2, 2)] * (len(windows) - 1)
    assert meta["rules_dropped"] == 2 * (len(windows) - 1)
    assert meta["fallback_windows"] == tuple(range(1, len(windows)))
    assert set(meta["fallback_reasons"]) == {"anchors missing for 2 of 2 rules"}
    # The fallback windows follow one another (no chunk buffer), and their text is split at 120 tokens.
    assert all(a[1] <= b[0] for a, b in zip(windows[1:], windows[2:]))
    fallback = [result.chunks[i] for i in meta["fallback_chunks"]]
    assert fallback and all(c.tokens <= 120 for c in fallback)
    assert fallback[-1].end == len(doc.text.rstrip())
    assert meta["content_loss"] == 0.0
    per_window = ", ".join(f"{w[3]}/{w[2]}" for w in windows)
    assert f"rules dropped for missing anchors (per window: {per_window})" in result.run_report
    named = ", ".join(str(i + 1) for i in meta["fallback_windows"])  # one reason: its windows named together
    assert f"had no usable rule (windows {named}: anchors missing for 2 of 2 rules) and were split" in result.run_report
    invariants(doc, result)


def test_moc_windows_carry_their_last_chunk_into_the_next_window():
    doc = Document.from_text(long_text())
    chat = FakeChat(moc_rules_answer())
    result = run("moc", doc, chat, window_tokens=150)
    windows = [window_of(p) for p in chat.prompts]
    assert len(windows) >= 3
    buffered = 0
    for prev, nxt in zip(windows, windows[1:]):
        assert TOK.count(prev) <= 150
        paras = prev.split("\n\n")
        if len(paras) > 1:  # the chunk buffer of A.3: the last chunk opens the next window
            assert nxt.startswith(paras[-1])
            buffered += 1
        else:  # a window that made one chunk is done with it
            assert not nxt.startswith(paras[0])
    assert buffered >= 2
    assert result.meta_dict["content_loss"] == 0.0
    assert [c.text for c in result.chunks] == [doc.text[p.start : p.end] for p in doc.paragraphs]
    invariants(doc, result)


def test_moc_prompt_is_table_7_with_the_routed_granularity():
    chat = FakeChat(moc_rules_answer())
    run("moc", Document.from_text(TEXT), chat, router="150-180")
    prompt = chat.prompts[0][0]["content"]
    assert "first few characters of the text chunk, followed by \"[MASK]\"" in prompt
    assert "about 150 to 180 tokens" in prompt and prompt.endswith("Document content: " + TEXT)


# --- llm_split ---------------------------------------------------------------------------------


def pieces_of(text):
    return recursive_spans(text, TOK, 50, 0)


def test_llm_split_uses_a_valid_answer_as_is():
    doc = Document.from_text(TEXT)
    pieces = pieces_of(TEXT)
    chat = FakeChat(["split_after: 2, 4"])
    result = run("llm_split", doc, chat)
    ends = [pieces[1][1], pieces[3][1], pieces[-1][1]]
    assert [c.end for c in result.chunks] == ends
    assert chat.calls == 1 and result.meta_dict["repairs"] == 0
    assert "<|start_chunk_1|>" + TEXT[pieces[0][0] : pieces[0][1]] + "<|end_chunk_1|>" in chat.prompts[0][1]["content"]
    invariants(doc, result)


@pytest.mark.parametrize(
    "first, second, expected",
    [
        ("split_after: 4, 2, 2, 99", "split_after: 2, 4", (2, 4)),  # unordered, duplicate, out of range: retried
        ("split_after: 4, 2, 2, 99", "still nonsense", (2, 4)),  # retry fails too: repaired
        ("I would split after chunk two.", "nothing", ()),  # no number at all: no split in the window
        ("split_after: 0, -3, 3", "split_after: 0, 3", (3,)),
    ],
)
def test_llm_split_retries_once_then_repairs(first, second, expected):
    doc = Document.from_text(TEXT)
    pieces = pieces_of(TEXT)
    chat = FakeChat([first, second, "split_after: 5"])
    result = run("llm_split", doc, chat)
    assert "was invalid" in chat.prompts[1][1]["content"]
    ends = [c.end for c in result.chunks]
    assert [pieces[i - 1][1] for i in expected] == ends[: len(expected)]
    invariants(doc, result)


def test_parse_split_after_rules():
    assert parse_split_after("split_after: 3, 5", 1, 9) == ([3, 5], True)
    assert parse_split_after("Split after: 5, 3, 3", 1, 9) == ([3, 5], False)
    assert parse_split_after("split_after: 3, 50", 1, 9) == ([3], False)
    assert parse_split_after("", 1, 9) == ([], False)


# --- lumber ------------------------------------------------------------------------------------


def test_parse_lumber_answer_rules():
    assert parse_lumber_answer("Answer: ID 0003", 1, 5) == (3, True)
    assert parse_lumber_answer("The shift is at ID 4.", 1, 5) == (4, False)
    assert parse_lumber_answer("paragraph 2", 1, 5) == (2, False)
    assert parse_lumber_answer("Answer: ID 1", 1, 5) == (None, False)  # the first paragraph cannot shift
    assert parse_lumber_answer("Answer: ID 42", 1, 5) == (None, False)


def test_lumber_groups_paragraphs_at_the_named_shift_and_repairs_bad_answers():
    doc = Document.from_text(TEXT)
    chat = FakeChat(["Answer: ID 0", "ID 2 is where it changes", "Answer: ID 3", "Answer: ID 3"])
    result = run("lumber", doc, chat)
    assert [c.text for c in result.chunks] == [P1 + "\n\n" + P2, P3, P4]
    # Window 1 (IDs 0-3): invalid, retried, repaired to 2; window 2 (IDs 2-3): 3; window 3: P4 alone.
    assert chat.calls == 3 and result.meta_dict["repairs"] == 1
    assert chat.prompts[0][0]["content"].count("\nID ") == 4
    invariants(doc, result)


# --- all three: invariants, caps, cache ----------------------------------------------------------


def generic_answer(messages):
    content = messages[-1]["content"]
    if "Document content: " in content:
        return moc_rules_answer(lambda i, h, t: (h[: max(2, len(h) - i % 3)], t))(messages)
    ids = [int(x) for x in re.findall(r"<\|start_chunk_(\d+)\|>", content)]
    if ids:
        return "split_after: " + ", ".join(str(i) for i in ids[1::3])
    ids = [int(x) for x in re.findall(r"^ID (\d+):", content, re.M)]
    return f"Answer: ID {ids[len(ids) // 2]}"


# --- the hard cap of llm_split and lumber -----------------------------------------------------------

LONG = Document.from_text(long_text(60, seed=5))  # 4,326 tokens in 60 paragraphs


def test_llm_split_caps_a_chunk_by_default_when_the_model_names_no_split():
    # Issue 25: answers with no usable split point made one 1,668- or 3,489-token chunk; 800 is the default cap.
    assert make_chunker("llm_split", {}).values["max_tokens"] == 800
    result = run("llm_split", LONG, FakeChat(lambda m: "I cannot help with that."))
    assert result.token_counts == [786, 734, 778, 787, 783, 458]
    meta = result.meta_dict
    assert (meta["max_tokens"], meta["over_cap"], meta["over_cap_of"]) == (800, 1, 1)
    assert result.degraded
    assert result.run_report == (
        "1 of 1 chunk was over 800 tokens and was split by the recursive splitter · 12 model calls, 0 cached, 6 repairs"
    )
    invariants(LONG, result, 800)


def test_llm_split_cap_counts_only_the_chunks_over_it():
    doc = Document.from_text(TEXT)
    pieces = pieces_of(TEXT)
    result = run("llm_split", doc, FakeChat(lambda m: "split_after: 2"), max_tokens=60)
    first = TOK.count(TEXT[pieces[0][0] : pieces[1][1]])
    rest = TOK.count(TEXT[pieces[2][0] : pieces[-1][1]])
    assert first <= 60 < rest
    meta = result.meta_dict
    assert (meta["over_cap"], meta["over_cap_of"]) == (1, 2)
    assert result.chunks[0].end == pieces[1][1] and len(result.chunks) > 2
    assert "1 of 2 chunks was over 60 tokens and was split by the recursive splitter" in result.run_report
    invariants(doc, result, 60)


def test_a_chunk_under_the_cap_reports_no_degradation_and_zero_turns_the_cap_off():
    doc = Document.from_text(TEXT)
    capped = run("llm_split", doc, FakeChat(["split_after: 2, 4"]))
    assert (capped.meta_dict["over_cap"], capped.meta_dict["over_cap_of"]) == (0, 3)
    assert not capped.degraded and "recursive splitter" not in capped.run_report
    uncapped = run("llm_split", LONG, FakeChat(lambda m: "no"), max_tokens=0)
    assert "over_cap" not in uncapped.meta_dict and uncapped.token_counts == [TOK.count(LONG.text)]


def test_lumber_caps_a_paragraph_longer_than_the_cap():
    one = Document.from_text(LONG.text.replace("\n\n", " ")[:6000])  # one paragraph, no shift to name
    result = run("lumber", one, FakeChat(lambda m: "Answer: ID 0"))
    meta = result.meta_dict
    assert meta["model_calls"] == 0 and (meta["over_cap"], meta["over_cap_of"]) == (1, 1)
    assert len(result.chunks) > 1 and max(result.token_counts) <= 800
    assert result.run_report.startswith("1 of 1 chunk was over 800 tokens and was split by the recursive splitter")
    invariants(one, result, 800)


DOCS = {
    "english": Document.from_text(TEXT),
    "long": Document.from_text(long_text(20, seed=7)),
    "chinese": Document.from_text(CHINESE),
    "one line": Document.from_text("Just one short sentence here."),
}


@pytest.mark.parametrize("name", ["llm_split", "lumber", "moc"])
@pytest.mark.parametrize("doc_name", sorted(DOCS))
@pytest.mark.parametrize("max_tokens", [0, 30])
def test_invariants_and_hard_cap(name, doc_name, max_tokens):
    doc = DOCS[doc_name]
    result = run(name, doc, FakeChat(generic_answer), max_tokens=max_tokens)
    invariants(doc, result, max_tokens or None)
    assert result.meta_dict["model_calls"] >= (1 if len(doc.paragraphs) > 1 else 0)


@pytest.mark.parametrize("name", ["llm_split", "lumber", "moc"])
def test_a_rerun_is_served_from_the_cache(tmp_path, name):
    cache = OutputCache(tmp_path / "cache")
    doc = DOCS["long"]
    chat = FakeChat(generic_answer)
    first = run(name, doc, chat, cache)
    calls = chat.calls
    second = run(name, doc, chat, cache)
    assert chat.calls == calls and second.meta_dict["model_calls"] == 0
    assert second.meta_dict["cache_hits"] == first.meta_dict["model_calls"] > 0
    assert second.chunks == first.chunks
    # Another model is another answer.
    other = FakeChat(generic_answer, fingerprint="fake:2")
    run(name, doc, other, cache)
    assert other.calls == calls


# --- the granularity router -----------------------------------------------------------------------


def test_granularity_classes_follow_the_paper_intervals():
    assert [granularity_class(x) for x in (1, 120, 120.5, 150, 151, 180, 181, 10_000)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_paragraph_router_takes_the_median_paragraph_length():
    short = "\n\n".join(["A short paragraph of a few words."] * 5)
    long = "\n\n".join([" ".join(["word"] * 200)] * 3)
    router = ParagraphRouter(TOK)
    assert router.route(short) == 0 and router.route(long) == 3
    assert make_router("150-180", TOK) == FixedRouter(2)


def test_trained_router_learns_from_kept_chunkings_and_round_trips(tmp_path):
    fine = Document.from_text(long_text(30, seed=1).replace(". ", ".\n\n"))
    coarse = Document.from_text(long_text(30, seed=2).replace("\n\n", " "))
    samples = []
    for doc, size in ((fine, 60), (coarse, 400)):
        chunks = make_chunker("recursive", {"chunk_size": size}).chunk(doc)
        samples += router_samples(doc.text, [(c.start, c.end, c.tokens) for c in chunks.chunks])
    labels = {label for _t, label in samples}
    assert labels >= {0, 3}
    router = train_router(samples, TOK)
    assert router.route(fine.text[:1024]) == 0 and router.route(coarse.text[:1500]) == 3
    router.save(tmp_path / "r.json")
    again = CentroidRouter.load(tmp_path / "r.json", TOK)
    assert again.route(fine.text[:1024]) == 0 and again.centroids == router.centroids
    with pytest.raises(ParameterError):
        train_router([], TOK)


def test_routers_are_pluggable_and_the_choice_is_reported():
    register_router("always-coarse", lambda tok: FixedRouter(3, name="always-coarse"))
    try:
        result = run("moc", Document.from_text(TEXT), FakeChat(moc_rules_answer()), router="always-coarse")
        assert result.meta_dict["granularity"] == GRANULARITY_NAMES[3]
    finally:
        del ROUTERS["always-coarse"]
    with pytest.raises(ParameterError, match="router must be one of"):
        make_chunker("moc", {"router": "nope"})


# --- real models ----------------------------------------------------------------------------------

SHORT = (
    "The lighthouse was built in 1851. Its lamp burned whale oil.\n\n"
    "Bread is made from flour and water. The dough must rest.\n\n"
    "The committee met on Tuesday. It approved the budget."
)


def test_moc_end_to_end_on_the_bundled_smollm2(tmp_path):
    cache = OutputCache(tmp_path / "cache")
    doc = Document.from_text(SHORT)
    chat = LocalChat(device="cpu")
    result = make_chunker("moc", {"answer_tokens": 24}).chunk(doc, ModelContext(chat=chat, _cache=cache))
    invariants(doc, result)
    meta = result.meta_dict
    assert meta["model_calls"] == 1 and 0.0 <= meta["content_loss"] <= 1.0
    rerun = make_chunker("moc", {"answer_tokens": 24}).chunk(doc, ModelContext(chat=LocalChat(device="cpu"), _cache=cache))
    assert rerun.meta_dict["model_calls"] == 0 and rerun.chunks == result.chunks


def test_lumber_through_the_openai_compatible_test_server(tmp_path):
    from tests.support.openai_compat_server import start_server

    doc = Document.from_text(SHORT)
    with start_server(max_chat_tokens=24) as server:
        chat = RemoteChat(server.url, api_key="EMPTY")
        result = make_chunker("lumber", {}).chunk(doc, ModelContext(chat=chat, _cache=OutputCache(tmp_path / "c")))
    invariants(doc, result)
    assert result.meta_dict["model_calls"] >= 1


@pytest.fixture()
def main_cli(tmp_path, monkeypatch):
    """``python -m backend ARGS`` in this process, as ``run_cli`` runs it: exit code, stdout and stderr.

    The LLM chunkers are registered (imported above), as the old ``-c`` wrapper did before calling ``main``.
    """
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CHUNKLAB_DEVICE", "cpu")

    def run(*args: str) -> subprocess.CompletedProcess:
        return run_main(*args)

    return run


def _serve_openai(monkeypatch, url: str) -> None:
    for name, value in {"OPENAI_BASE_URL": url, "OPENAI_MODEL": "scripted-model", "OPENAI_API_KEY": "sk-cli"}.items():
        monkeypatch.setenv(name, value)


def test_cli_chunk_with_moc_through_the_registry(tmp_path, monkeypatch, main_cli):
    doc_file = tmp_path / "doc.txt"
    doc_file.write_text(TEXT, encoding="utf-8")
    with start_scripted_server(reply=moc_rules_answer(skip={2})) as server:
        _serve_openai(monkeypatch, server.url)
        args = ("chunk", str(doc_file), "--chunker", "moc", "--param", "router=0-120")
        first = main_cli(*args)
        second = main_cli(*args)
        assert len(server.chat_requests) == 1  # the rerun read the cache
    for proc in (first, second):
        assert proc.returncode == 0, proc.stderr.decode()
        records = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        assert [r["text"] for r in records] == [P1, P2, P3, P4]
        assert all(TEXT[r["start"] : r["end"]] == r["text"] for r in records)
    # The run report goes to stderr (stdout stays JSONL): the skipped paragraph is content loss.
    report = first.stderr.decode().strip().splitlines()[-1]
    assert report.startswith("moc: content loss ") and "(1 gap chunk)" in report and "1 model call" in report
    loss = float(report.split("content loss ")[1].split(" %")[0])
    share = 100 * sum(not c.isspace() for c in P2) / sum(not c.isspace() for c in TEXT)
    assert 0.8 * share < loss <= share  # about one paragraph of four (the rules' anchors cover its edges)
    assert "0 model calls, 1 cached" in second.stderr.decode()
    assert sys.executable


def test_cli_prints_the_cap_and_the_moc_fallback(tmp_path, monkeypatch, main_cli):
    long_file, short_file = tmp_path / "long.txt", tmp_path / "short.txt"
    long_file.write_text(LONG.text, encoding="utf-8")
    short_file.write_text(TEXT, encoding="utf-8")
    with start_scripted_server(reply=lambda messages: "I cannot split this.") as server:
        _serve_openai(monkeypatch, server.url)
        split = main_cli("chunk", str(long_file), "--chunker", "llm_split")
        moc = main_cli("chunk", str(short_file), "--chunker", "moc")
    for proc in (split, moc):
        assert proc.returncode == 0, proc.stderr.decode()
    records = [json.loads(line) for line in split.stdout.decode().splitlines()]
    assert [r["tokens"] for r in records] == [786, 734, 778, 787, 783, 458]
    report = split.stderr.decode().strip().splitlines()[-1]
    assert report == (
        "llm_split: 1 of 1 chunk was over 800 tokens and was split by the recursive splitter · "
        "12 model calls, 0 cached, 6 repairs"
    )
    records = [json.loads(line) for line in moc.stdout.decode().splitlines()]
    assert " ".join(r["text"] for r in records).split() == TEXT.split()  # nothing lost
    report = moc.stderr.decode().strip().splitlines()[-1]
    assert report.startswith("moc: content loss 0.0 % · granularity 0-120 (paragraph router) · 1 of 1 rule dropped")
    assert ("fallback: 1 of 1 window had no usable rule (window 1: anchors missing for 1 of 1 rule) and was split "
            "by the recursive splitter at 120 tokens, 100.0 % of the text") in report
