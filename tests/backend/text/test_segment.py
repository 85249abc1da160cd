"""Sentence and paragraph spans: pinned outputs for small inputs, and invariants for any text."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.errors import ParameterError
from backend.text import blingfire as _segment_blingfire
from backend.text import segment
from backend.text.blingfire import SentenceBreakerError
from backend.text.segment import paragraph_spans, sentence_spans
from backend.text.spans import Span
from tests.conftest import ROOT


def sentences(text: str, **kwargs: object) -> list[str]:
    return [span.slice(text) for span in sentence_spans(text, **kwargs)]


def paragraphs(text: str) -> list[str]:
    return [span.slice(text) for span in paragraph_spans(text)]


FUZZ_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- pinned outputs -------------------------------------------------------------------------

ENGLISH = [
    (
        "Dr. Smith met Mr. and Mrs. Jones. Prof. Brown was late.",
        ["Dr. Smith met Mr. and Mrs. Jones.", "Prof. Brown was late."],
    ),
    (
        "We moved to the U.S. in May. The U.K. came later.",
        ["We moved to the U.S. in May.", "The U.K. came later."],
    ),
    (
        "Bring tools, e.g. a hammer, i.e. something heavy, etc. and go. Then stop.",
        ["Bring tools, e.g. a hammer, i.e. something heavy, etc. and go.", "Then stop."],
    ),
    ("I bought apples, pears, etc. Then I left.", ["I bought apples, pears, etc.", "Then I left."]),
    ("J. R. R. Tolkien wrote it. He died in 1973.", ["J. R. R. Tolkien wrote it.", "He died in 1973."]),
    (
        "Pi is 3.14 and it costs $2.50 today. Version v2.1.3 is out.",
        ["Pi is 3.14 and it costs $2.50 today.", "Version v2.1.3 is out."],
    ),
    (
        "Visit https://example.com/a.b?c=d. Or mail john.doe@example.org. Thanks.",
        ["Visit https://example.com/a.b?c=d.", "Or mail john.doe@example.org.", "Thanks."],
    ),
    ("Wait... what? I don't know… Really.", ["Wait... what?", "I don't know…", "Really."]),
    ('"He left." She stayed.', ['"He left."', "She stayed."]),
    ('He said "Stop!" and ran. Then he came back.', ['He said "Stop!" and ran.', "Then he came back."]),
    (
        "He (Dr. Who) left. It was 5 a.m. The sun rose.",
        ["He (Dr. Who) left.", "It was 5 a.m.", "The sun rose."],
    ),
    ("Hi!!! How are you?? Fine.", ["Hi!!!", "How are you??", "Fine."]),
    ("no punctuation at all just words", ["no punctuation at all just words"]),
]

STRUCTURE = [
    pytest.param(
        "Shopping:\n- eggs\n* milk\n• bread\n1. one\n2) two\na) three\n(iv) four",
        ["Shopping:", "- eggs", "* milk", "• bread", "1. one", "2) two", "a) three", "(iv) four"],
        id="bullets-without-punctuation",
    ),
    pytest.param(
        "Steps:\n- install the package and\n  run it\n- done\nThen go home.",
        ["Steps:", "- install the package and\n  run it", "- done", "Then go home."],
        id="wrapped-bullet",
    ),
    pytest.param(
        "# Title\nSome text. More text.\n## Sub title\nBody",
        ["# Title", "Some text.", "More text.", "## Sub title", "Body"],
        id="headings",
    ),
    pytest.param(
        "Before.\n```python\nx = 1. y = 2.\nprint(x.y)\n```\nAfter. Done.",
        ["Before.", "```python\nx = 1. y = 2.\nprint(x.y)\n```", "After.", "Done."],
        id="code-fence",
    ),
    pytest.param(
        "```\na = 1. B = 2.\n\nc = 3. D = 4.\n```",
        ["```\na = 1. B = 2.", "c = 3. D = 4.\n```"],
        id="code-fence-split-only-at-blank-line",
    ),
    pytest.param(
        "Text.\n```\nnever closed. So this is prose.",
        ["Text.\n```\nnever closed.", "So this is prose."],
        id="unclosed-fence-is-text",
    ),
    pytest.param(
        "| a | b |\n| --- | --- |\n| Dr. X | 2. 3 |\nAfter the table.",
        ["| a | b |", "| --- | --- |", "| Dr. X | 2. 3 |", "After the table."],
        id="table-rows",
    ),
    pytest.param("Title\n=====\nText here.", ["Title", "=====", "Text here."], id="setext-rule"),
    pytest.param(
        "Introduction\nThis paper introduces meta chunking, a granularity between sentences\n"
        "and paragraphs. It works.",
        [
            "Introduction",
            "This paper introduces meta chunking, a granularity between sentences\nand paragraphs.",
            "It works.",
        ],
        id="title-glued-to-paragraph",
    ),
    pytest.param("Name: John\nAge: 42", ["Name: John\nAge: 42"], id="short-lines-alone-stay-together"),
    pytest.param(
        "  a  \t b.   \n\n\n\t  C d.\r\n\r\nE.  ",
        ["a  \t b.", "C d.", "E."],
        id="whitespace-runs",
    ),
    pytest.param("First line\n\nsecond line", ["First line", "second line"], id="blank-line-always-splits"),
    pytest.param(
        "See the corpus.\n\n![Similarity of all query pairs.](https://x.org/a.png)\n\nNext.",
        ["See the corpus.", "![Similarity of all query pairs.](https://x.org/a.png)", "Next."],
        id="markdown-image",
    ),
    pytest.param(
        "Wait...... Then go. Next----- line here. End.",
        ["Wait......", "Then go.", "Next----- line here.", "End."],
        id="punctuation-runs",
    ),
]

CHINESE = [
    ("今天天气很好。我们去公园吧！你去吗？好的；走吧。", ["今天天气很好。", "我们去公园吧！", "你去吗？", "好的；", "走吧。"]),
    (
        "他说：“我明天再来。”然后他走了。她问：「你去哪里？」我不知道……",
        ["他说：“我明天再来。”", "然后他走了。", "她问：「你去哪里？」", "我不知道……"],
    ),
    ("我很好. 你呢? 我也好!", ["我很好.", "你呢?", "我也好!"]),
    ("This is English. 这是中文。Mixed again.", ["This is English.", "这是中文。", "Mixed again."]),
    ("价格是3.14元。版本是v2.1。", ["价格是3.14元。", "版本是v2.1。"]),
    ("我想……也许吧。（注：这是括号。）好。", ["我想……", "也许吧。", "（注：这是括号。）", "好。"]),
    ("- 第一项\n- 第二项\n# 标题\n正文。", ["- 第一项", "- 第二项", "# 标题", "正文。"]),
    ("- 第一项很长\n\u3000接着写\n- 第二项", ["- 第一项很长\n\u3000接着写", "- 第二项"]),
    (
        "第一章 引言\n文本分块是检索增强生成流程中至关重要却常被忽视的环节，它直接影响知识密集型任务的质量\n以及效率",
        ["第一章 引言", "文本分块是检索增强生成流程中至关重要却常被忽视的环节，它直接影响知识密集型任务的质量\n以及效率"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), ENGLISH)
def test_english_sentences(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize(("text", "expected"), STRUCTURE)
def test_structure_sentences(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize(("text", "expected"), CHINESE)
@pytest.mark.parametrize("language", ["zh", "en", "und"])
def test_chinese_sentences_whatever_the_language_argument(
    text: str, expected: list[str], language: str
) -> None:
    assert sentences(text, language=language) == expected


def test_offsets_are_exact() -> None:
    text = "\n  Hello there. 你好。\n\n- item\r\n"
    assert sentence_spans(text) == [Span(3, 15), Span(16, 19), Span(21, 27)]


def test_empty_and_whitespace_only_texts_have_no_spans() -> None:
    for text in ["", " ", "\n\n\t \r\n\u3000"]:
        assert sentence_spans(text) == []
        assert paragraph_spans(text) == []


# --- the length cap -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        pytest.param("aaaa bbbb cccc", 9, ["aaaa bbbb", "cccc"], id="at-whitespace"),
        pytest.param("x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5], id="hard-cut"),
        pytest.param(
            "one two three four five six", 12, ["one two", "three four", "five six"], id="last-whitespace"
        ),
        pytest.param(
            "aaaaaaaaaaaa\nbb cc dd ee", 20, ["aaaaaaaaaaaa", "bb cc dd ee"], id="prefers-line-break"
        ),
        pytest.param("e\u0301" * 4, 3, ["e\u0301"] * 4, id="combining-mark-stays"),
        pytest.param("ab\U0001f44d\U0001f3fd", 3, ["ab", "\U0001f44d\U0001f3fd"], id="skin-tone-stays"),
        pytest.param(
            "\U0001f1eb\U0001f1f7\U0001f1e9\U0001f1ea",
            3,
            ["\U0001f1eb\U0001f1f7", "\U0001f1e9\U0001f1ea"],
            id="flags",
        ),
        pytest.param("\u0301" * 5, 2, ["\u0301" * 2, "\u0301" * 2, "\u0301"], id="all-marks-hard-cut"),
        pytest.param("天" * 7, 3, ["天天天", "天天天", "天"], id="cjk-without-punctuation"),
    ],
)
def test_length_cap(text: str, max_chars: int, expected: list[str]) -> None:
    assert sentences(text, max_chars=max_chars) == expected


def test_code_block_is_capped_at_line_breaks() -> None:
    code = "```\n" + "\n".join(f"x{i} = {i}. y" for i in range(10)) + "\n```"
    spans = sentence_spans(code, max_chars=40)
    assert len(spans) > 1
    assert all(len(span) <= 40 for span in spans)
    assert all(code[span.end] == "\n" for span in spans[:-1])
    assert all(span.slice(code).count(". ") > 1 for span in spans[:-1])


@pytest.mark.parametrize("max_chars", [0, -5])
def test_max_chars_must_be_positive(max_chars: int) -> None:
    with pytest.raises(ParameterError, match=rf"max_chars \({max_chars}\)"):
        sentence_spans("Some text.", max_chars=max_chars)


# --- paragraphs -----------------------------------------------------------------------------


def test_paragraph_spans() -> None:
    text = "  Para one.\nline two.\n\n \t \nPara two.\r\n\r\nThree\u2029Four  \n"
    assert paragraphs(text) == ["Para one.\nline two.", "Para two.", "Three", "Four"]
    assert paragraph_spans(text)[0] == Span(2, 21)


def test_single_line_breaks_do_not_split_paragraphs() -> None:
    assert paragraphs("a\nb\rc\r\nd") == ["a\nb\rc\r\nd"]


# --- robustness: the breaker failing, lone surrogates, import cost -------------------------


def test_falls_back_to_punctuation_when_blingfire_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(text: str) -> list[int]:
        raise SentenceBreakerError("simulated")

    monkeypatch.setattr(segment, "sentence_starts", broken)
    assert sentences("Hello there. World here. 你好。好") == ["Hello there.", "World here. 你好。", "好"]


def test_c_error_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_segment_blingfire, "_entry_point", lambda: lambda *args: -1)
    with pytest.raises(SentenceBreakerError, match="returned -1"):
        _segment_blingfire.sentence_starts("One. Two.")


def test_public_wrapper_is_used_without_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "One sentence here. Another one there. 第三句。"
    expected = _segment_blingfire.sentence_starts(text)
    monkeypatch.setattr(_segment_blingfire, "_entry_point", lambda: None)
    assert _segment_blingfire.sentence_starts(text) == expected == [19, 38]


@FUZZ_SETTINGS
@given(st.text(alphabet=st.sampled_from("ab .-。!😀\u0301"), max_size=80))
def test_squeezed_offsets_map_back(text: str) -> None:
    short, removed_before = _segment_blingfire._squeeze(text)
    offsets = _segment_blingfire._unsqueeze(list(range(len(short))), removed_before)
    assert "".join(text[offset] for offset in offsets) == short
    assert offsets == sorted(set(offsets))


def test_lone_surrogates_are_allowed() -> None:
    text = "Broken \ud800 text. Next \udc00 one."
    assert sentences(text) == ["Broken \ud800 text.", "Next \udc00 one."]


def test_import_does_not_load_blingfire_or_numpy() -> None:
    code = "import sys, backend.text.segment; print(any(m in sys.modules for m in ('blingfire', 'numpy')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- invariants for any text ----------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "Dr.", "U.S.", "e.g.", "3.14", "v2.1.3", "word", "Word", "a", ".", "!", "?", "...", "…", ",",
        " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n \n", "\u2029", "\u2028", "\u3000", "\x0b", "\x1c",
        "- ", "* ", "1. ", "a) ", "# ", "```", "~~~", "|", "---", "\"", "”", "」", "（", "）",
        "。", "！", "？", "；", "中文", "你好", "e\u0301", "\u0301", "\u200d", "\U0001f600",
        "\U0001f44d\U0001f3fd", "\U0001f1eb\U0001f1f7", "\U0001f468\u200d\U0001f469", "x" * 70,
        "https://example.com/a.b?c=d", "john.doe@example.org", "\ud800", "\u3000- ", "Dr. Who",
        "![", "    ", "```x", "## ", "\t|",
    ]
)
TEXTS = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=60).map("".join),
)


def assert_partition(text: str, spans: list[Span]) -> None:
    """Ordered, disjoint, in bounds, non-empty, trimmed, and covering every non-space character."""
    covered = [False] * len(text)
    previous_end = 0
    for span in spans:
        assert previous_end <= span.start < span.end <= len(text)
        assert not text[span.start].isspace() and not text[span.end - 1].isspace()
        covered[span.start : span.end] = [True] * len(span)
        previous_end = span.end
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())


def line_breaks(gap: str) -> int:
    return len(("x" + gap + "x").splitlines()) - 1


@FUZZ_SETTINGS
@given(TEXTS)
def test_paragraph_invariants(text: str) -> None:
    spans = paragraph_spans(text)
    assert_partition(text, spans)
    for span in spans:
        body = span.slice(text)
        assert "\u2029" not in body
        assert all(line.strip() for line in body.splitlines())
    for left, right in zip(spans, spans[1:]):
        gap = text[left.end : right.start]
        assert "\u2029" in gap or line_breaks(gap) >= 2


@FUZZ_SETTINGS
@given(TEXTS, st.sampled_from([1, 2, 7, 50]))
def test_sentence_invariants(text: str, max_chars: int) -> None:
    spans = sentence_spans(text, max_chars=max_chars)
    assert_partition(text, spans)
    assert all(len(span) <= max_chars for span in spans)
    paras = paragraph_spans(text)
    index = 0
    for span in spans:
        while paras[index].end < span.end:
            index += 1
        assert paras[index].start <= span.start and span.end <= paras[index].end
    assert sentence_spans(text, language="zh", max_chars=max_chars) == spans


@FUZZ_SETTINGS
@given(TEXTS)
def test_direct_c_call_matches_blingfire_wrapper(text: str) -> None:
    if not text.strip():
        return
    clean = _segment_blingfire._SURROGATE.sub("\ufffd", text)
    entry_point = _segment_blingfire._entry_point()
    direct = _segment_blingfire._starts_from_c(entry_point, clean)
    assert direct == _segment_blingfire._starts_from_wrapper(clean)
