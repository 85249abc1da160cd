"""Sentence and paragraph spans: exact, ordered character ranges of a text.

Both functions return :class:`~backend.text.spans.Span` lists that index the text they were
given. Spans are ordered, never overlap, never start or end with whitespace, and together
they cover every non-whitespace character. Offsets are carried along while the text is
consumed (a library's offsets only ever choose where to cut); nothing is looked up again
with ``str.find``.

Why blingfire
    Sentence boundaries inside running prose come from `blingfire
    <https://github.com/microsoft/BlingFire>`_ (Microsoft; a compiled finite-state sentence
    breaker that works offline and needs no model download). The three installed candidates,
    measured on this 2-core machine on 1 MB of English (the papers in ``shared/seeds`` and
    Rust's Markdown release notes) and 300 KB of Chinese:

    =========  ============  ==============  ==============================================
    library    1 MB English  300 KB Chinese  quality on the cases in the tests
    =========  ============  ==============  ==============================================
    blingfire  0.21 s        0.11 s          all but 3 English cases (an e-mail ending,
                                             ``"Stop!" | and ran``, ``(Dr. | Who)``); puts
                                             ``”`` and ``」`` in the next sentence; reads
                                             line breaks as spaces (lists, headings merge)
    pysbd      ~5 s          ~1.4 s          splits inside a URL (``a.b?`` | ``c=d.``);
               (0.50 s for   (0.14 s for     keeps ``I don't know… Really.`` together
               100 KB)       30 KB)
    syntok     11.4 s        3.5 s           no Chinese; keeps ``etc. Then`` together
    =========  ============  ==============  ==============================================

    Only blingfire is fast enough (the target is 1 MB well under a second), and it gets the
    hard English cases right: abbreviations (Dr., Prof., U.S., e.g., i.e., etc.), initials
    (J. R. R. Tolkien), decimals and versions (3.14, $2.50, v2.1.3), URLs, ellipses and
    quotes after a period. ``backend.text.blingfire`` calls its C entry point directly,
    which is 2.5x faster than its Python wrapper (see there).

What is added on top
    blingfire reads a document as one line of prose, so the structure around prose is ours:

    * paragraphs (blank lines) are hard limits;
    * fenced code blocks (three or more backticks or tildes, closed) are never split on
      periods;
      Markdown headings, table rows (``|``-led, two pipes, or tab-separated) and rules are
      one sentence each;
    * each bullet (``-``, ``*``, ``•``, ``1.``, ``a)``, ``(iv)``, …) starts a sentence; a
      wrapped bullet goes on when its next line is indented or starts in lowercase;
    * a short line (at most half the paragraph's longest, itself 40+ characters) without
      final punctuation, followed by a line starting with a capital, a digit or a CJK
      character, ends a sentence (a title glued to its paragraph);
    * CJK sentence marks ``。！？；`` (and ``…`` after CJK text) end a sentence whatever
      the ``language`` argument says; ASCII ``.!?`` right after CJK text does when
      whitespace follows; closing quotes and brackets after a mark (``。”``, ``？」``)
      stay with their sentence;
    * blingfire's breaks are dropped before a lowercase word (``He said "Stop!" and ran``)
      and after a title (``He (Dr. Who) left``); opening brackets it leaves at the end of a
      sentence move to the next one (``![caption](url)``); an e-mail address followed by a
      period and a capital ends a sentence;
    * no sentence is longer than ``max_chars``: a longer one is cut at the last line break
      in the second half of the window, else at the last whitespace, else at a code point
      that keeps a character with its combining marks, ZWJ sequence, skin tone or flag pair.

Speed, this module end to end on the same texts: ``sentence_spans`` takes 0.18-0.39 s on
1 MB of English, 0.13-0.25 s on 300 KB of Chinese and about 0.5 s on 1 MB of Chinese (the
ranges are load from other processes on the shared machine, under which blingfire's own
wrapper alone took 0.21-0.43 s on the English); ``paragraph_spans`` takes 0.02-0.05 s.
Pathological input stays linear: 1 MB of one letter, of dots or of bullets, or 400 KB of
code fences, takes 0.1-0.5 s. The slowest seen: letters alternating with periods
(``a.a.a.…``, ~2 µs a character inside blingfire: 1.3 s for 600 KB) and text made only of
two-character sentences (``。”`` repeated: 300,000 sentences in 600 KB, 3-4 s).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterator

from backend.errors import ParameterError
from backend.text.blingfire import SentenceBreakerError, sentence_starts
from backend.text.spans import Span

__all__ = ["sentence_spans", "paragraph_spans", "strip_span"]

# Line breaks are exactly those of str.splitlines(), so "a line" means one thing everywhere;
# "\r\n" is one break, never "\r" then "\n" (which would make it a blank line).
_BR = r"(?:\r\n|\r(?!\n)|[\n\v\f\x1c\x1d\x1e\x85\u2028\u2029])"
_HWS = r"[^\S\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"
_PARA_SEP = re.compile(rf"{_BR}(?:{_HWS}*{_BR})+|\u2029")
_LINE_BREAK = re.compile(_BR)
_NON_WS = re.compile(r"\S")
_LAST_WS = re.compile(r".*\s", re.S)
_LAST_BR = re.compile(rf".*{_BR}", re.S)

_CJK = (
    "\u2e80-\u2fdf\u3001-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31bf\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f"
)
_CJK_CHAR = re.compile(f"[{_CJK}]")
_CLOSERS = "”’」』）)]】〉》〕〗〙〛｣»›\"'"
_OPENERS = "([{“‘«‹「『（【〈《〔〖"
_TITLE_BEFORE = re.compile(
    r"(?<![\w.])(?:Dr|Mr|Mrs|Ms|Mx|Prof|Rev|Hon|Gen|Sen|Rep|Gov|Capt|Lt|Col|Sgt|Fr)\.[\s\"'”’)\]]*\Z"
)
_STRONG = "。！？；｡"
_WEAK = "…⋯"
# A CJK sentence mark, or an ellipsis right after CJK text, plus any marks and closers after it.
# (Lookbehinds come after a first character: checked at every offset, they cost 3x.)
_CJK_END = re.compile(
    rf"[{_STRONG}{_WEAK}](?:(?<=[{_STRONG}])|(?<=[{_CJK}][{_WEAK}]))"
    rf"[{_STRONG}{_WEAK}.!?]*[{re.escape(_CLOSERS)}]*"
)
_ASCII_END_AFTER_CJK = re.compile(rf"[{_CJK}][.!?]+[{re.escape(_CLOSERS)}]*(?=\s)")
# blingfire keeps "john@example.org. Thanks." together; a capital after the period settles it.
_EMAIL_END = re.compile(r"@(?<=[\w.+-]@)[\w-]+(?:\.[\w-]+)+\.(?=\s+[A-Z])")
# Only the fallback when blingfire fails: a period, ! or ? run, whitespace, then a capital.
_FALLBACK_END = re.compile(rf"[.!?]+[{re.escape(_CLOSERS)}]*(?=\s+[\"'“‘(\[]?[A-Z])")

# One pattern classifies a line; the order matters ("- - -" is a rule, "-\titem" a bullet).
_LINE_KIND = re.compile(
    r"(?P<fence>[ \t]{0,3}(?P<fence_run>`{3,}|~{3,}))"
    r"|(?P<heading>[ \t]{0,3}#{1,6}(?:[ \t]|$))"
    r"|(?P<rule>[ \t]*(?P<rule_char>[-*_=])(?:[ \t]*(?P=rule_char)){2,}[ \t]*$)"
    r"|(?P<bullet>[ \t]*(?:[-*+•‣◦▪▫●○■□►➢➤✓✔]|\d{1,3}[.)]|[a-z][.)]|[A-Z]\)"
    r"|\(\w{1,3}\)|(?:i{1,3}|iv|vi{0,3}|ix|xi{0,3})[.)])[ \t]+\S)"
    r"|(?P<table>[ \t]*\||(?:[^|]*\|){2}|.*?\S\t+\S)"
)
# A line that can close a fence: only the fence characters, and no info string. Group 1 starts
# the line, group 2 is the run.
_BARE_FENCE = re.compile(
    rf"(?:\A|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])([ \t]{{0,3}}(`{{3,}}|~{{3,}}))[ \t]*(?={_BR}|\Z)"
)
_LINE_KINDS = ("fence", "heading", "rule", "bullet", "table")
# A line ending in one of these is not a hard line break: the sentence goes on, or is over anyway.
_NO_BREAK_AFTER = frozenset(".!?。！？；｡…⋯,;:，、：-–—/&([{“‘\"'")
_SHORT_LINE_RATIO = 0.5
_MIN_PROSE_LINE = 40
_ZWJ = "\u200d"
# How far back a cut may move to keep a character with its marks; longer runs are cut anyway.
_MAX_CLUSTER = 32


def paragraph_spans(text: str) -> list[Span]:
    """Split ``text`` into paragraphs: blocks separated by one or more blank lines.

    A line holding only whitespace counts as blank; line breaks are those of
    ``str.splitlines`` (``\\n``, ``\\r\\n``, ``\\r``, ``\\u2028``, …), and a paragraph
    separator ``\\u2029`` ends a paragraph on its own.

    Args:
        text: Any text.

    Returns:
        One span per paragraph, in order, trimmed of surrounding whitespace. Empty for
        empty or whitespace-only text.
    """
    spans: list[Span] = []
    start = 0
    for sep in _PARA_SEP.finditer(text):
        _append_trimmed(text, start, sep.start(), spans)
        start = sep.end()
    _append_trimmed(text, start, len(text), spans)
    return spans


def sentence_spans(text: str, language: str = "en", max_chars: int = 1000) -> list[Span]:
    """Split ``text`` into sentences, none longer than ``max_chars`` characters.

    Sentences never cross a paragraph boundary. English-like prose is split by blingfire;
    CJK marks, bullets, headings, tables, code fences and the length cap are handled here
    (see the module docstring). 1 MB of English takes 0.2-0.4 s on a 2-core machine.

    Args:
        text: Any text.
        language: The document's language code. A hint only: scripts are recognized per
            character, so mixed English and Chinese split the same way whatever it says.
        max_chars: The longest sentence allowed, in characters (code points); longer ones
            are cut, preferably at whitespace.

    Returns:
        Sentence spans, in order, trimmed, covering every non-whitespace character.

    Raises:
        ParameterError: If ``max_chars`` is smaller than 1.
    """
    if max_chars < 1:
        raise ParameterError(f"max_chars ({max_chars}) must be at least 1")
    paragraphs = paragraph_spans(text)
    if not paragraphs:
        return []
    cuts = _sentence_starts(text)
    spans: list[Span] = []
    for start, end, splittable in _blocks(text, paragraphs):
        if splittable:
            i = bisect.bisect_right(cuts, start)
            while i < len(cuts) and cuts[i] < end:
                _append_capped(text, start, cuts[i], max_chars, spans)
                start = cuts[i]
                i += 1
        _append_capped(text, start, end, max_chars, spans)
    return spans


def _append_trimmed(text: str, start: int, end: int, out: list[Span]) -> None:
    """Append ``[start, end)`` without its surrounding whitespace, unless nothing is left."""
    piece = text[start:end]
    stripped = piece.lstrip()
    if not stripped:
        return
    start += len(piece) - len(stripped)
    out.append(Span(start, start + len(stripped.rstrip())))


def _append_capped(text: str, start: int, end: int, max_chars: int, out: list[Span]) -> None:
    """Append ``[start, end)`` trimmed, cut into pieces of at most ``max_chars`` characters."""
    if text[start].isspace() or text[end - 1].isspace():
        piece = text[start:end]
        stripped = piece.lstrip()
        if not stripped:
            return
        start += len(piece) - len(stripped)
        end = start + len(stripped.rstrip())
    while end - start > max_chars:
        cut = _cap_cut(text, start, max_chars)
        left = text[start:cut].rstrip()
        out.append(Span(start, start + len(left)))
        start = _NON_WS.search(text, cut).start()
    out.append(Span(start, end))


def _cap_cut(text: str, start: int, max_chars: int) -> int:
    """Where to end a piece that starts at ``start`` and runs past ``max_chars`` characters."""
    window = text[start : start + max_chars + 1]
    last_break = _LAST_BR.match(window, 1)
    if last_break and last_break.end() - 1 > max_chars // 2:
        return start + last_break.end() - 1
    last_space = _LAST_WS.match(window, 1)
    if last_space:
        return start + last_space.end() - 1
    cut = start + max_chars
    floor = max(start + 1, cut - _MAX_CLUSTER)
    while cut > floor and _joins_previous(text, cut, start):
        cut -= 1
    if _joins_previous(text, cut, start):
        return start + max_chars  # one cluster longer than we look back: cut it anyway
    return cut


def _joins_previous(text: str, i: int, floor: int) -> bool:
    """Whether cutting before ``text[i]`` would break a character sequence apart.

    Flags (pairs of regional indicators) are paired up counting from ``floor``.
    """
    ch, prev = text[i], text[i - 1]
    if prev == _ZWJ or _is_extender(ch):
        return True
    if "\udc00" <= ch <= "\udfff" and "\ud800" <= prev <= "\udbff":
        return True
    if _is_regional_indicator(ch) and _is_regional_indicator(prev):
        run = 1
        while i - run - 1 >= floor and _is_regional_indicator(text[i - run - 1]):
            run += 1
        return run % 2 == 1
    return False


@functools.lru_cache(maxsize=4096)
def _is_extender(ch: str) -> bool:
    """Whether ``ch`` belongs with the character before it (marks, ZWJ, skin tones)."""
    return (
        ch == _ZWJ
        or unicodedata.category(ch) in ("Mn", "Mc", "Me")
        or "\U0001f3fb" <= ch <= "\U0001f3ff"
    )


def _is_regional_indicator(ch: str) -> bool:
    """Whether ``ch`` is half of a flag emoji."""
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def _sentence_starts(text: str) -> list[int]:
    """Sorted offsets where a new sentence may start, before structure and the cap apply."""
    starts = [_before_openers(text, start) for start in _library_starts(text) if _keeps(text, start)]
    starts += [m.end() for m in _CJK_END.finditer(text)]
    starts += [m.end() for m in _ASCII_END_AFTER_CJK.finditer(text)]
    starts += [m.end() for m in _EMAIL_END.finditer(text)]
    n = len(text)
    moved = set()
    for start in starts:
        # A closing quote or bracket right after the mark belongs to the sentence it closes.
        if 0 < start < n and not text[start - 1].isspace():
            floor = max(0, start - _MAX_CLUSTER)
            while start < n and (text[start] in _CLOSERS or _joins_previous(text, start, floor)):
                start += 1
        if 0 < start < n:
            moved.add(start)
    return sorted(moved)


def _keeps(text: str, start: int) -> bool:
    """Whether a blingfire sentence start survives our checks."""
    # A sentence rarely starts in lowercase ('He said "Stop!" and ran'), and a title
    # never ends one ("He (Dr. Who) left", which blingfire splits).
    return not text[start].islower() and _TITLE_BEFORE.search(text, max(0, start - 16), start) is None


def _before_openers(text: str, start: int) -> int:
    """Move a sentence start back over opening brackets left on the previous sentence."""
    while start > 0 and text[start - 1] in _OPENERS:
        start -= 1
    if start > 0 and text[start - 1] == "!" and text[start] == "[":
        start -= 1  # a Markdown image, "![caption](url)"
    return start


def _library_starts(text: str) -> list[int]:
    """Sentence starts found by blingfire, or by a plain punctuation rule should it fail."""
    try:
        return sentence_starts(text)
    except SentenceBreakerError:
        return [m.end() for m in _FALLBACK_END.finditer(text)]


def _blocks(text: str, paragraphs: list[Span]) -> Iterator[tuple[int, int, bool]]:
    """Yield ``(start, end, splittable)`` runs of lines that no sentence may cross.

    Splittable blocks (prose, list items) are cut further at sentence starts; the others
    (code, headings, table rows, rules) stay whole, up to the length cap.
    """
    fences = _FenceCloser(text)
    fence_end = -1  # end of the line closing the current code fence; code lies before it
    for para in paragraphs:
        if para.end <= fence_end:
            yield para.start, para.end, False
            continue
        lines = _lines(text, para.start, para.end)
        longest = max(end - start for start, end in lines)
        block_start, block_kind = -1, ""  # the open block ("prose", "item" or "code"), if any
        for index, (start, end) in enumerate(lines):
            if start < fence_end:
                if block_start < 0:  # the fence was opened in an earlier paragraph
                    block_start, block_kind = start, "code"
                if end >= fence_end:
                    yield block_start, end, False
                    block_start = -1
                continue
            kind = _line_kind(text, start, end)
            if kind == "fence":
                run = _LINE_KIND.match(text, start, end).group("fence_run")
                fence_end = fences.close(end, run)
                if fence_end < 0:
                    kind = "text"  # an unclosed fence would swallow the rest of the document
            if kind == "text" and block_start >= 0:
                if not _starts_new_block(text, lines, index, block_kind, longest):
                    continue
            if block_start >= 0:
                yield block_start, lines[index - 1][1], block_kind != "code"
                block_start = -1
            if kind in ("heading", "rule", "table"):
                yield start, end, False
            else:
                block_start = start
                block_kind = {"fence": "code", "bullet": "item"}.get(kind, "prose")
        if block_start >= 0:
            yield block_start, lines[-1][1], block_kind != "code"


def _line_kind(text: str, start: int, end: int) -> str:
    """``fence``, ``heading``, ``rule``, ``bullet``, ``table`` or ``text``."""
    match = _LINE_KIND.match(text, start, end)
    if match is None:
        return "text"
    return next(kind for kind in _LINE_KINDS if match.group(kind) is not None)


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` ranges of the lines in ``text[start:end]``, without line breaks."""
    lines = []
    for br in _LINE_BREAK.finditer(text, start, end):
        lines.append((start, br.start()))
        start = br.end()
    lines.append((start, end))
    return lines


class _FenceCloser:
    """Finds the line that closes a code fence, in linear time over a whole document."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines: list[tuple[int, int, str, int]] | None = None  # found on first use
        self._line_starts: list[int] = []
        # A fence character and the shortest run for which no closer was left: later, longer
        # openers of that character cannot close either.
        self._hopeless: dict[str, int] = {}

    def close(self, pos: int, run: str) -> int:
        """End of the first line after ``pos`` that closes a fence opened by ``run``; -1 if none."""
        char, length = run[0], len(run)
        if length >= self._hopeless.get(char, length + 1):
            return -1
        if self._lines is None:
            self._lines = [
                (m.start(1), m.end(), m.group(2)[0], len(m.group(2)))
                for m in _BARE_FENCE.finditer(self._text)
            ]
            self._line_starts = [start for start, _, _, _ in self._lines]
        # Lines skipped here end up inside the fence, so no later opener scans them again.
        for index in range(bisect.bisect_right(self._line_starts, pos), len(self._lines)):
            _, end, line_char, line_length = self._lines[index]
            if line_char == char and line_length >= length:
                return end
        self._hopeless[char] = length
        return -1


def _starts_new_block(
    text: str, lines: list[tuple[int, int]], index: int, block_kind: str, longest: int
) -> bool:
    """Whether the plain line ``lines[index]`` starts a new block rather than continuing one."""
    start, end = lines[index]
    if block_kind == "item":
        # A wrapped bullet goes on indented or in lowercase; anything else is new text.
        return not text[start].isspace() and not _first_char(text, start, end).islower()
    if longest < _MIN_PROSE_LINE:
        return False
    prev_start, prev_end = lines[index - 1]
    prev = text[prev_start:prev_end].rstrip()
    if prev[-1] in _NO_BREAK_AFTER or len(prev) > longest * _SHORT_LINE_RATIO:
        return False
    first = _first_char(text, start, end)
    return first.isupper() or first.isdigit() or _CJK_CHAR.match(first) is not None


def _first_char(text: str, start: int, end: int) -> str:
    """The first non-whitespace character of a line (paragraphs hold no blank line)."""
    return text[_NON_WS.search(text, start, end).start()]


def strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` narrowed past the whitespace at both ends of ``text[start:end]``."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
