"""MoC meta-chunking without the fine-tuned experts: the Table 7 prompt, rule parsing and edit-distance recovery.

MoC (Mixtures of Text Chunking Learners) asks a meta-chunker for a list of *rules*, one per
chunk: the chunk's first characters, a placeholder standing for the middle, its last
characters (section 3.2.3, eq. 6). This module turns such an answer back into exact spans
of the document:

- :func:`parse_rules` reads the list leniently (JSON, Python literals, quoted strings, or one
  rule per line) and splits each rule at any of the paper's eight placeholders
  (:data:`PLACEHOLDERS`, spacing and case tolerated). A rule without a placeholder is taken
  as the whole chunk text.
- :func:`recover_spans` maps rules to spans in order (section 3.2.4): an anchor found
  verbatim is used as is; otherwise the substring of the document with the smallest
  Levenshtein distance to it is used, when that distance is at most ``tolerance`` × the
  anchor's length (the paper flags chunks beyond 10 % for manual review; we accept or
  drop automatically). Heads are searched left to right from the previous head, so spans
  never go backwards; a tail is searched between its head and the next head, last match
  first, so chunks never overlap. Text no rule covers becomes a *gap* piece of its own:
  nothing is lost, and the caller reports it as content loss.

Edit distance: the search is Sellers' semi-global variant of the paper's recurrence (the
match may start anywhere in the document), one numpy row per anchor character with the
in-row insertions done by a running minimum. Why not a library: ``regex``'s fuzzy
matching (already installed) takes seconds per anchor on a 1,000-token window, and
``rapidfuzz``/``edlib`` are not dependencies; the row recurrence is twenty lines and
tested against a plain dynamic program.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from backend.text.segment import strip_span as _strip

__all__ = [
    "PLACEHOLDERS",
    "MOC_PROMPT",
    "Rule",
    "Match",
    "Piece",
    "Recovery",
    "moc_messages",
    "parse_rules",
    "split_rule",
    "levenshtein",
    "find_anchor",
    "recover_spans",
]

# Section 3.2.3: the eight special strings that stand for the omitted middle of a chunk.
PLACEHOLDERS: tuple[str, ...] = ("<omitted>", "<ellipsis>", "[MASK]", "[ELLIPSIS]", ".*?", "<...>", "<.*>", "<pad>")
_PLACEHOLDER_RE = re.compile(
    r"<\s*omitted\s*>|<\s*ellipsis\s*>|\[\s*mask\s*\]|\[\s*ellipsis\s*\]|\.\*\?|<\s*\.\.\.\s*>|<\s*\.\*\s*>|<\s*pad\s*>",
    re.IGNORECASE,
)

# Table 7 of the paper, verbatim but for the granularity sentence (see moc_messages).
MOC_PROMPT = """This is a text chunking task. As an expert in text segmentation, you are responsible for segmenting the given text into text chunks. You must adhere to the following four conditions:
1. Combine several consecutive sentences with related content into text chunks, ensuring that each text chunk has a complete logical expression.
2. Avoid making the text chunks too short, and strike a good balance between recognizing content transitions and chunk length.{granularity}
3. The output of the chunking result should be in a list format, where each element represents a text chunk in the document.
4. Each text chunk in the output should consist of the first few characters of the text chunk, followed by "[MASK]" to replace the intermediate content, and end with the last few characters of the text chunk. The output format is as follows:
[
"First few characters of text chunk [MASK] Last few characters of text chunk",
...
]
If you understand, please segment the following text into text chunks and output them in the required list format.
Document content: {text}"""


def moc_messages(text: str, granularity: tuple[int, int | None] | None = None) -> list[dict[str, str]]:
    """The chat messages asking for rules over ``text`` (one user message, Table 7).

    Args:
        text: The window to chunk.
        granularity: ``(low, high)`` tokens per chunk the router chose (``high`` None: no
            upper bound); it adds one sentence to condition 2, standing in for the paper's
            per-granularity experts.
    """
    extra = ""
    if granularity is not None:
        low, high = granularity
        extra = (
            f" Each text chunk should be longer than {low} tokens."
            if high is None
            else f" Each text chunk should be about {max(low, 1)} to {high} tokens long."
        )
    return [{"role": "user", "content": MOC_PROMPT.format(granularity=extra, text=text)}]


@dataclass(frozen=True)
class Rule:
    """One rule of the model's answer: ``head`` ⊕ placeholder ⊕ ``tail``, or a whole chunk (``full``)."""

    head: str
    tail: str
    full: bool
    raw: str


def split_rule(raw: str) -> Rule:
    """Split a rule at its placeholders: before the first is the head, after the last the tail."""
    found = list(_PLACEHOLDER_RE.finditer(raw))
    if not found:
        return Rule(raw.strip(), "", True, raw)
    return Rule(raw[: found[0].start()].strip(), raw[found[-1].end() :].strip(), False, raw)


_FENCE_RE = re.compile(r"```[a-zA-Z]*\n?|```")
_QUOTED_RE = re.compile(r'"((?:[^"\\\n]|\\.)+)"|“([^”\n]+)”')
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def parse_rules(reply: str) -> list[Rule]:
    """The rules in a model's answer, in order, read as leniently as possible (never raises).

    Tried in turn: the outermost ``[...]`` as JSON, then as a Python literal; every
    double-quoted string; every non-empty line (bullets, numbering, quotes and trailing
    commas removed). Empty rules are dropped.
    """
    text = _FENCE_RE.sub("", reply or "")
    items: list[str] | None = None
    lo, hi = text.find("["), text.rfind("]")
    while lo != -1 and hi > lo and items is None:
        candidate = text[lo : hi + 1]
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(candidate)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                items = list(value)
                break
        if items is None:
            # The first '[' may open a "[MASK]" inside the first rule: try the next one.
            lo = text.find("[", lo + 1)
    if items is None:
        quoted = [a or b for a, b in _QUOTED_RE.findall(text)]
        if quoted:
            items = [q.replace('\\"', '"').replace("\\n", "\n") for q in quoted]
    if items is None:
        items = []
        for line in text.splitlines():
            line = _BULLET_RE.sub("", line).strip().rstrip(",").strip().strip("'\"").strip()
            if line and line not in {"[", "]", "...", "…"}:
                items.append(line)
    rules = [split_rule(item) for item in items]
    return [r for r in rules if r.head or r.tail]


def levenshtein(a: str, b: str) -> int:
    """The edit distance between ``a`` and ``b`` (insert, delete, substitute one character each)."""
    if not a or not b:
        return max(len(a), len(b))
    row = _dp_rows(a, b, global_start=True)
    return int(row[-1])


def _dp_rows(anchor: str, hay: str, global_start: bool) -> np.ndarray:
    """The last row of the edit-distance table of ``anchor`` against ``hay``.

    ``global_start`` False lets the match begin anywhere in ``hay`` (row 0 all zeros: Sellers).
    """
    codes = np.frombuffer(hay.encode("utf-32-le"), dtype=np.uint32)
    n = codes.shape[0]
    idx = np.arange(n + 1, dtype=np.int64)
    prev = idx.copy() if global_start else np.zeros(n + 1, dtype=np.int64)
    for i, ch in enumerate(anchor, 1):
        cost = (codes != ord(ch)).astype(np.int64)
        cur = np.empty(n + 1, dtype=np.int64)
        cur[0] = i
        # Substitution/match from the diagonal, deletion from above.
        cur[1:] = np.minimum(prev[:-1] + cost, prev[1:] + 1)
        # Insertions along the row: cur[j] = min_k<=j (cur[k] + j - k), a running minimum.
        cur = np.minimum.accumulate(cur - idx) + idx
        prev = cur
    return prev


@dataclass(frozen=True)
class Match:
    """Where an anchor was found: ``text[start:end]``, at edit distance ``distance``."""

    start: int
    end: int
    distance: int


def find_anchor(
    anchor: str, text: str, lo: int, hi: int, tolerance: float, prefer: str = "first"
) -> Match | None:
    """The span of ``text[lo:hi]`` that best matches ``anchor``.

    A verbatim occurrence wins (the first or, with ``prefer="last"``, the last). Otherwise
    the substring with the smallest edit distance, if it is at most ``tolerance`` ×
    ``len(anchor)``; among equally close ones the first or last to end. None when nothing
    is close enough.
    """
    if not anchor or hi <= lo:
        return None
    at = text.find(anchor, lo, hi) if prefer == "first" else text.rfind(anchor, lo, hi)
    if at != -1:
        return Match(at, at + len(anchor), 0)
    limit = int(tolerance * len(anchor))
    if limit < 1:
        return None
    hay = text[lo:hi]
    last = _dp_rows(anchor, hay, global_start=False)
    best = int(last[1:].min()) if len(last) > 1 else len(anchor)
    if best > limit:
        return None
    ends = np.flatnonzero(last == best)
    ends = ends[ends > 0]
    end = int(ends[0] if prefer == "first" else ends[-1])
    # The start: the one whose global distance to the anchor is the best, nearest to end - len(anchor).
    start, start_dist = None, None
    span = len(anchor)
    for s in sorted(range(max(0, end - span - limit), min(end, end - span + limit) + 1), key=lambda s: abs(end - span - s)):
        if s >= end:
            continue
        d = levenshtein(anchor, hay[s:end])
        if start_dist is None or d < start_dist:
            start, start_dist = s, d
    if start is None or start_dist is None or start_dist > limit:
        return None
    return Match(lo + start, lo + end, start_dist)


@dataclass(frozen=True)
class Piece:
    """A recovered span: ``kind`` is ``rule`` (anchors verbatim), ``approx`` (an anchor altered) or ``gap``."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class Recovery:
    """Spans recovered from one answer over ``text[lo:hi]``, and what it took."""

    pieces: tuple[Piece, ...]
    rules: int
    dropped: int
    approximate: int
    tail_repairs: int


def recover_spans(text: str, rules: Sequence[Rule], lo: int, hi: int, tolerance: float = 0.3) -> Recovery:
    """Map ``rules`` to exact, ordered, non-overlapping spans of ``text[lo:hi]`` (see the module docstring).

    Every non-whitespace character of ``text[lo:hi]`` ends up in exactly one piece.
    """
    heads: list[tuple[Rule, Match]] = []
    cursor = lo
    dropped = approximate = repairs = 0
    for rule in rules:
        if not rule.head:  # a rule that opens with the placeholder: it continues where we are
            heads.append((rule, Match(cursor, cursor, 0)))
            continue
        m = find_anchor(rule.head, text, cursor, hi, tolerance, "first")
        if m is None:
            dropped += 1
            continue
        heads.append((rule, m))
        cursor = m.end
    spans: list[tuple[int, int, bool]] = []
    for k, (rule, m) in enumerate(heads):
        limit = heads[k + 1][1].start if k + 1 < len(heads) else hi
        approx = m.distance > 0
        if rule.full:
            end = m.end
        elif rule.tail:
            t = find_anchor(rule.tail, text, m.start, limit, tolerance, "last")
            if t is None or t.end <= m.start:
                end = limit
                repairs += 1
            else:
                end = t.end
                approx = approx or t.distance > 0
        else:
            end = limit
        s, e = _strip(text, m.start, max(end, m.end))
        if spans and s < spans[-1][1]:
            s = spans[-1][1]
            s, e = _strip(text, s, e)
        if e > s:
            spans.append((s, e, approx))
            approximate += approx
    pieces: list[Piece] = []
    at = lo
    for s, e, approx in spans:
        gs, ge = _strip(text, at, s)
        if ge > gs:
            pieces.append(Piece(gs, ge, "gap"))
        pieces.append(Piece(s, e, "approx" if approx else "rule"))
        at = e
    gs, ge = _strip(text, at, hi)
    if ge > gs:
        pieces.append(Piece(gs, ge, "gap"))
    return Recovery(tuple(pieces), len(rules), dropped, approximate, repairs)
