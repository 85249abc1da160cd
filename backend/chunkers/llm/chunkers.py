"""LLM chunkers: ``llm_split`` (Chroma's LLMSemanticChunker), ``lumber`` (LumberChunker) and ``moc`` (MoC).

All three ask a chat model (``needs = ("chat",)``: the :class:`~backend.chunkers.context.ModelContext`'s
``get_chat()``, an OpenAI-compatible API when configured, else the bundled SmolLM2) and
never let its answer touch the text: the model only names boundaries (piece numbers,
paragraph numbers, or MoC's anchor rules), and the spans are cut from the document here,
so every chunk is an exact span. Answers are asked at temperature 0 and kept in the output
cache per (model, messages), so a rerun makes no model call. Answers that are malformed,
out of range, unordered or duplicated are retried once with a note, then repaired; a
chunker never fails on what a model wrote, and never loses text.

Degrading honestly: ``max_tokens`` (default 800 for ``llm_split`` and ``lumber``, 0: off for
``moc``) is a hard limit; a chunk longer than that, e.g. the whole window of a model that named
no split point, is split inside by the recursive splitter, and the run reports how many were.
A ``moc`` window where no rule placed a chunk (no rule in the answer, or every anchor missing)
is split by the recursive splitter at the routed granularity instead of becoming one gap
chunk, and the run says so and why.

Each run reports in :attr:`Chunking.meta`: ``model_calls``, ``cache_hits``, ``repairs``
(answers that needed repairing); with a cap, ``max_tokens``, ``over_cap`` (chunks that were
over it and were split) and ``over_cap_of`` (chunks before the cap); for ``moc`` also
``granularity``, ``router``, ``content_loss`` (share of the document's non-whitespace
characters that no rule covered, fallback windows excluded), ``content_loss_chars``,
``gap_chunks`` (indices of the chunks made of such text), ``rules``, ``rules_dropped``
(anchors missing), ``rules_approximate``, ``windows`` (``(start, end, rules, dropped)`` per
window), and when a window fell back: ``fallback`` (what split it), ``fallback_tokens``,
``fallback_windows`` (window indices), ``fallback_reasons`` (one per such window),
``fallback_chunks`` (chunk indices) and ``fallback_share`` (share of the non-whitespace text).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Any, Sequence

from backend.chunkers.base import Chunker, Param, register
from backend.chunkers.context import ModelContext
from backend.chunkers.llm.granularity import GRANULARITIES, GRANULARITY_NAMES, ROUTERS, make_router
from backend.chunkers.llm.moc import moc_messages, parse_rules, recover_spans
from backend.chunkers.recursive import enforce_size, recursive_spans
from backend.chunking import Chunking
from backend.errors import ParameterError
from backend.models.chat import cached_reply
from backend.text.document import Document
from backend.tokenizers import SpanCounter

__all__ = [
    "LLMSemanticChunker",
    "LumberChunker",
    "MoCChunker",
    "split_after_messages",
    "parse_split_after",
    "lumber_messages",
    "parse_lumber_answer",
]

# 800 tokens: the largest chunk size the Chroma report evaluates (and OpenAI's file-search default),
# over three times the mean chunk of its LLM chunker (~240 tokens, GPT-4o) and above LumberChunker's
# 550-token window, so a model that names its split points never meets the cap; it bounds only the
# chunks of a model that named none (1,668 and 3,489 tokens were seen without it).
_MAX_TOKENS = Param(
    "max_tokens", "int", 800, "Hard limit on chunk length in tokens (0: none); a longer chunk is split inside "
    "by the recursive splitter, and the run report counts it.", min=0, max=100_000,
)
# MoC reads windows under 1,024 tokens, so its chunks have that bound already: no cap by default.
_MOC_MAX_TOKENS = dataclasses.replace(_MAX_TOKENS, default=0)


class _LLMChunker(Chunker):
    """What the LLM chunkers share: the cached model call, the hard cap, the run report."""

    family = "llm"
    needs = ("chat",)

    def chunk(self, doc: Document, context: ModelContext | None = None) -> Chunking:
        self._meta: dict[str, Any] = {"model_calls": 0, "cache_hits": 0, "repairs": 0}
        self._over_cap = self._before_cap = 0
        result = super().chunk(doc, context)
        if self.values["max_tokens"]:
            # The hard cap's work: how many of the chunks the method made were over it (and split again).
            self._meta.update(max_tokens=self.values["max_tokens"], over_cap=self._over_cap,
                              over_cap_of=self._before_cap)
        return dataclasses.replace(result, meta=tuple(sorted(self._meta.items())))

    def _ask(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        reply, hit = cached_reply(
            self.context.get_chat(), messages, max_tokens=max_tokens, temperature=0.0, cache=self.context.cache,
            progress=self.context.progress,
        )
        self._meta["cache_hits" if hit else "model_calls"] += 1
        return reply

    def _progress(self, done: int, total: int) -> None:
        if self.context.progress is not None:
            self.context.progress(done, total)

    def _cap(self, text: str, spans: Sequence[tuple[int, int]], counter: SpanCounter) -> list[tuple[int, int, int]]:
        """Spans with token counts; with ``max_tokens`` set, over-long ones split by the recursive splitter (counted)."""
        size = self.values["max_tokens"]
        counts = counter.count_many(spans)
        out: list[tuple[int, int, int]] = []
        self._before_cap += len(spans)
        for (s, e), n in zip(spans, counts):
            if not size or n <= size:
                out.append((s, e, n))
                continue
            self._over_cap += 1
            subs = recursive_spans(text, self.tokenizer, size, 0, lo=s, hi=e, counter=counter)
            out.extend(enforce_size(text, subs, self.tokenizer, size, counter=counter))
        return out


# --- llm_split: Chroma's LLMSemanticChunker ------------------------------------------------------

# The reference implementation's prompt (chunking_evaluation, LLMSemanticChunker.get_prompt).
_SPLIT_SYSTEM = (
    "You are an assistant specialized in splitting text into thematically consistent sections. "
    "The text has been divided into chunks, each marked with <|start_chunk_X|> and <|end_chunk_X|> tags, where X is the chunk number. "
    "Your task is to identify the points where splits should occur, such that consecutive chunks of similar themes stay together. "
    "Respond with a list of chunk IDs where you believe a split should be made. For example, if chunks 1 and 2 belong together but chunk 3 starts a new topic, you would suggest a split after chunk 2. THE CHUNKS MUST BE IN ASCENDING ORDER."
    "Your response should be in the form: 'split_after: 3, 5'."
)


def split_after_messages(tagged: str, first_id: int, invalid: Sequence[int] | None = None) -> list[dict[str, str]]:
    """The reference prompt for one window of tagged pieces whose first id is ``first_id``."""
    user = (
        "CHUNKED_TEXT: " + tagged + "\n\n"
        "Respond only with the IDs of the chunks where you believe a split should occur. YOU MUST RESPOND WITH AT "
        "LEAST ONE SPLIT. THESE SPLITS MUST BE IN ASCENDING ORDER AND EQUAL OR LARGER THAN: " + str(first_id) + "."
    )
    if invalid is not None:
        user += f"\nThe previous response of {list(invalid)} was invalid. DO NOT REPEAT THIS ARRAY OF NUMBERS. Please try again."
    return [{"role": "system", "content": _SPLIT_SYSTEM}, {"role": "user", "content": user}]


_SPLIT_LINE_RE = re.compile(r"split[\s_-]*after\s*:?(.*)", re.IGNORECASE)


def parse_split_after(reply: str, first_id: int, last_id: int) -> tuple[list[int], bool]:
    """The split ids of an answer, repaired, and whether the answer was valid as written.

    Reads the numbers on the first ``split_after`` line (or, lacking one, all numbers in the
    answer); valid means at least one number, all within ``[first_id, last_id]``, strictly
    ascending. The repaired list keeps the in-range numbers, sorted, without duplicates.
    """
    match = _SPLIT_LINE_RE.search(reply or "")
    raw = [int(x) for x in re.findall(r"\d+", match.group(1) if match else (reply or ""))]
    in_range = [n for n in raw if first_id <= n <= last_id]
    valid = bool(raw) and match is not None and in_range == raw and all(a < b for a, b in zip(raw, raw[1:]))
    return sorted(set(in_range)), valid


@register
class LLMSemanticChunker(_LLMChunker):
    """LLM split points (Chroma's LLMSemanticChunker): the model names the pieces after which to split.

    The document is cut into pieces of at most ``piece_size`` tokens by the recursive
    splitter; a window of consecutive pieces (up to ``window_tokens``) is shown to the model
    wrapped in ``<|start_chunk_i|>…<|end_chunk_i|>`` tags, and it answers ``split_after: 3, 5``.
    The next window starts after the last split. A chunk is the run of pieces between
    splits, from its first piece's start to its last piece's end. A chunk over ``max_tokens``
    (default 800: the largest size the Chroma report evaluates, over three times its LLM
    chunker's ~240-token mean) is split inside by the recursive splitter and counted.
    """

    name = "llm_split"
    length_param = "max_tokens"
    params = (
        Param("piece_size", "int", 50, "Tokens per tagged piece (the report: 50).", min=5, max=1000),
        Param("window_tokens", "int", 800, "Tokens of pieces shown per request (the reference: 800).", min=50,
              max=100_000),
        _MAX_TOKENS,
    )

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        text = doc.text
        counter = SpanCounter(self.tokenizer, text)
        pieces = recursive_spans(text, self.tokenizer, self.values["piece_size"], 0, counter=counter)
        n = len(pieces)
        if n == 0:
            return []
        counts = counter.count_many(pieces)
        splits: set[int] = set()  # 1-based ids of pieces that end a chunk
        current = 0  # 0-based index of the first piece of the next window
        while current < n - 1:
            self._progress(current, n)
            tokens, stop = 0, current
            while stop < n:
                tokens += counts[stop]
                stop += 1
                if tokens > self.values["window_tokens"]:
                    break
            first_id, last_id = current + 1, stop
            tagged = "".join(
                f"<|start_chunk_{i + 1}|>{text[a:b]}<|end_chunk_{i + 1}|>" for i, (a, b) in enumerate(pieces[current:stop], current)
            )
            reply = self._ask(split_after_messages(tagged, first_id), 200)
            ids, valid = parse_split_after(reply, first_id, last_id)
            if not valid:
                shown = [int(x) for x in re.findall(r"\d+", reply or "")][:20]
                reply = self._ask(split_after_messages(tagged, first_id, shown), 200)
                retried, valid = parse_split_after(reply, first_id, last_id)
                if not valid:  # repair: the retry's usable numbers, else the first answer's
                    self._meta["repairs"] += 1
                ids = retried if valid or retried else ids
            splits.update(i for i in ids if i < n)
            # Like the reference, go on after the last split; with none, after the window.
            current = max(ids) if ids else last_id
        self._progress(n, n)
        spans, start = [], 0
        for i in range(n):
            if i + 1 in splits or i == n - 1:
                spans.append((pieces[start][0], pieces[i][1]))
                start = i + 1
        return self._cap(text, spans, counter)


# --- lumber: LumberChunker ----------------------------------------------------------------------

# The reference implementation's prompt (LumberChunker-Segmentation.py), sent as the user message.
_LUMBER_PROMPT = """You will receive as input an english document with paragraphs identified by 'ID XXXX: <text>'.

Task: Find the first paragraph (not the first one) where the content clearly changes compared to the previous paragraphs.

Output: Return the ID of the paragraph with the content shift as in the exemplified format: 'Answer: ID XXXX'.

Additional Considerations: Avoid very long groups of paragraphs. Aim for a good balance between identifying content shifts and keeping groups manageable."""


def lumber_messages(numbered: str, invalid: str | None = None) -> list[dict[str, str]]:
    """The reference prompt for one window of ``ID n: paragraph`` lines."""
    content = _LUMBER_PROMPT + f"\nDocument:\n{numbered}"
    if invalid is not None:
        content += f"\n\nThe previous answer '{invalid}' was invalid: answer with one ID of this document other than the first."
    return [{"role": "user", "content": content}]


_ANSWER_RE = re.compile(r"answer\s*:?\s*(?:id\s*[:#]?\s*)?(\d+)", re.IGNORECASE)
_ID_RE = re.compile(r"\bid\s*[:#]?\s*(\d+)", re.IGNORECASE)


def parse_lumber_answer(reply: str, first_id: int, last_id: int) -> tuple[int | None, bool]:
    """The paragraph id an answer names, and whether it was valid as written.

    Valid: ``Answer: ID n`` with ``first_id < n <= last_id``. Otherwise the first ``ID n``,
    then the first number, is taken when in that range; else None.
    """
    reply = reply or ""
    m = _ANSWER_RE.search(reply)
    if m is not None and first_id < int(m.group(1)) <= last_id:
        return int(m.group(1)), True
    for candidate in (_ID_RE.search(reply), re.search(r"\d+", reply)):
        if candidate is not None:
            k = int(candidate.group(1) if candidate.re is _ID_RE else candidate.group(0))
            if first_id < k <= last_id:
                return k, False
    return None, False


@register
class LumberChunker(_LLMChunker):
    """LumberChunker: the model reads a window of paragraphs and names the first one where the content shifts.

    Paragraphs are numbered (``ID n: …``); a window holds consecutive paragraphs up to
    ``window_tokens`` (the paper: 550), and the group ends before the paragraph the model
    names. The next window starts at that paragraph. A chunk runs from its first paragraph's
    start to its last paragraph's end. A chunk over ``max_tokens`` (default 800: above the
    paper's 550-token window, the Chroma report's largest evaluated size; reached only by a
    paragraph longer than that or a model that named no shift) is split inside by the
    recursive splitter and counted.
    """

    name = "lumber"
    length_param = "window_tokens"
    params = (
        Param("window_tokens", "int", 550, "Tokens of paragraphs shown per request (the paper: 550).", min=20,
              max=100_000),
        _MAX_TOKENS,
    )

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        text = doc.text
        paras = [(p.start, p.end) for p in doc.paragraphs]
        n = len(paras)
        if n == 0:
            return []
        counter = SpanCounter(self.tokenizer, text)
        counts = counter.count_many(paras)
        starts = [0]  # indices of paragraphs that open a group
        current = 0
        while current < n - 1:
            self._progress(current, n)
            # As the reference: add paragraphs while under the budget, then drop the one that crossed it.
            stop, tokens = current, 0
            while stop < n and tokens < self.values["window_tokens"]:
                tokens += counts[stop]
                stop += 1
            if tokens > self.values["window_tokens"] and stop - current > 1:
                stop -= 1
            if stop - current < 2:  # a lone paragraph: nothing to ask
                current = stop
                starts.append(current)
                continue
            numbered = "\n".join(f"ID {i}: {text[a:b]}" for i, (a, b) in enumerate(paras[current:stop], current))
            reply = self._ask(lumber_messages(numbered), 32)
            k, valid = parse_lumber_answer(reply, current, stop - 1)
            if not valid:
                reply = self._ask(lumber_messages(numbered, (reply or "").strip()[:80]), 32)
                retried, valid = parse_lumber_answer(reply, current, stop - 1)
                if not valid:  # repair: the retry's usable id, else the first answer's
                    self._meta["repairs"] += 1
                k = retried if valid or retried is not None else k
            # No usable answer: the whole window is one group.
            current = k if k is not None else stop
            starts.append(current)
        self._progress(n, n)
        bounds = sorted(set(s for s in starts if s < n))
        spans = [(paras[a][0], paras[b - 1][1]) for a, b in zip(bounds, [*bounds[1:], n])]
        return self._cap(text, spans, counter)


# --- moc: MoC meta-chunker ----------------------------------------------------------------------


@register
class MoCChunker(_LLMChunker):
    """MoC meta-chunker: the model lists each chunk as "first characters [MASK] last characters".

    A router first picks the granularity ((0,120], (120,150], (150,180] or (180,∞) tokens
    per chunk; ``router``: ``paragraph``, ``trained`` or a class name, see
    ``backend.chunkers.llm.granularity``), which the Table 7 prompt then asks for. The document is read in
    windows under ``window_tokens`` (ending at a paragraph or sentence end where possible);
    each answer's rules are mapped back to exact spans by edit-distance recovery
    (``backend.chunkers.llm.moc``), anchors the model altered matched within ``anchor_tolerance`` × their
    length. The last chunk of a window opens the next window (the paper's chunk buffer).
    Text no rule covers becomes a chunk of its own and is reported as content loss. A window
    where no rule placed a chunk is split by the recursive splitter at the routed granularity
    (:meth:`fallback_tokens`) and reported as a fallback, with the reason and the rules dropped.
    """

    name = "moc"
    length_param = "max_tokens"
    params = (
        Param("router", "str", "paragraph", "Granularity router: paragraph, trained, or a class "
              "(0-120, 120-150, 150-180, 180+)."),
        Param("window_tokens", "int", 1000, "Tokens per window (the paper: under 1024).", min=50, max=1023),
        Param("anchor_tolerance", "float", 0.3, "Largest edit distance accepted for an altered anchor, as a "
              "share of its length.", min=0.0, max=1.0),
        Param("answer_tokens", "int", 512, "Longest answer per window, in model tokens.", min=16, max=4096),
        _MOC_MAX_TOKENS,
    )

    def validate(self) -> None:
        super().validate()
        router = self.values["router"]
        if router not in ROUTERS and router not in GRANULARITY_NAMES:
            known = ", ".join([*ROUTERS, *GRANULARITY_NAMES])
            raise ParameterError(f"moc: router must be one of {known}, got {router!r}")

    def fallback_tokens(self, granularity: tuple[int, int | None]) -> int:
        """The size of the model-free split of a window with no usable rule: the routed class's upper bound.

        MoC describes no rule-free fallback (its meta-chunkers are trained, and anchors beyond
        10 % edit distance go to manual review), so the recursive splitter cuts such a window
        at the granularity the prompt asked for: the class's upper bound, twice the lower bound
        for the open class (180+), and never above ``max_tokens`` when that is set.
        """
        low, high = granularity
        size = high if high is not None else 2 * low
        cap = self.values["max_tokens"]
        return min(size, cap) if cap else size

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        text = doc.text
        counter = SpanCounter(self.tokenizer, text)
        label = make_router(self.values["router"], self.tokenizer).route(text)
        granularity = GRANULARITIES[label]
        fallback_size = self.fallback_tokens(granularity)
        self._meta.update(granularity=GRANULARITY_NAMES[label], router=self.values["router"])
        cuts = _cut_points(doc)
        pieces: list[tuple[int, int, str]] = []
        windows: list[tuple[int, int, int, int]] = []  # (start, end, rules, rules dropped) per window
        fallbacks: list[tuple[int, str]] = []  # (window index, why) for each window split without the model
        rules = dropped = approximate = 0
        pos = _skip_space(text, 0)
        while pos < len(text):
            self._progress(pos, len(text))
            end = _window_end(text, pos, cuts, counter, self.values["window_tokens"])
            reply = self._ask(moc_messages(text[pos:end], granularity), self.values["answer_tokens"])
            parsed = parse_rules(reply)
            rec = recover_spans(text, parsed, pos, end, self.values["anchor_tolerance"])
            if not parsed:
                self._meta["repairs"] += 1
            windows.append((pos, end, rec.rules, rec.dropped))
            rules += rec.rules
            dropped += rec.dropped
            approximate += rec.approximate
            self._meta["repairs"] += rec.tail_repairs
            found = list(rec.pieces)
            if not any(p.kind != "gap" for p in found):
                # No rule placed a chunk: one gap chunk per window would lose it all; split without the model.
                fallbacks.append((len(windows) - 1, _no_rule_reason(rec.rules, rec.dropped)))
                spans = recursive_spans(text, self.tokenizer, fallback_size, 0, lo=pos, hi=end, counter=counter)
                spans = [(s, e) for s, e, _ in enforce_size(text, spans, self.tokenizer, fallback_size, counter=counter)]
                pieces.extend((s, e, "fallback") for s, e in spans)
                pos = _skip_space(text, max(end, pos + 1))
                continue
            if end < len(text) and len(found) > 1:
                # Chunk buffer (A.3): the window's last chunk is chunked again as the start of the next.
                nxt = found.pop().start
            else:
                nxt = end
            pieces.extend((p.start, p.end, p.kind) for p in found)
            pos = _skip_space(text, max(nxt, pos + 1))
        self._progress(len(text), len(text))
        out: list[tuple[int, int, int]] = []
        gaps: list[int] = []
        fallback_chunks: list[int] = []
        lost = fallback_chars = 0
        for s, e, kind in pieces:
            capped = self._cap(text, [(s, e)], counter)
            if kind == "gap":
                gaps.extend(range(len(out), len(out) + len(capped)))
                lost += sum(not ch.isspace() for ch in text[s:e])
            elif kind == "fallback":
                fallback_chunks.extend(range(len(out), len(out) + len(capped)))
                fallback_chars += sum(not ch.isspace() for ch in text[s:e])
            out.extend(capped)
        visible = sum(not ch.isspace() for ch in text)
        self._meta.update(
            content_loss=round(lost / visible, 6) if visible else 0.0,
            content_loss_chars=lost,
            gap_chunks=tuple(gaps),
            rules=rules,
            rules_dropped=dropped,
            rules_approximate=approximate,
            windows=tuple(windows),
        )
        if fallbacks:
            self._meta.update(
                fallback=f"recursive splitter at {fallback_size} tokens",
                fallback_tokens=fallback_size,
                fallback_windows=tuple(i for i, _ in fallbacks),
                fallback_reasons=tuple(why for _, why in fallbacks),
                fallback_chunks=tuple(fallback_chunks),
                fallback_share=round(fallback_chars / visible, 6) if visible else 0.0,
            )
        return out


def _no_rule_reason(rules: int, dropped: int) -> str:
    """Why a window has no usable rule, in words (``no rule in the answer``, ``anchors missing for 3 of 3 rules``)."""
    if rules == 0:
        return "no rule in the answer"
    if dropped == rules:
        return f"anchors missing for {dropped} of {rules} rule{'s' if rules != 1 else ''}"
    return f"{rules - dropped} matched rule{'s' if rules - dropped != 1 else ''} covered no text"


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _cut_points(doc: Document) -> tuple[list[int], list[int]]:
    """Paragraph ends and sentence ends of ``doc``, ascending."""
    return sorted({p.end for p in doc.paragraphs}), sorted({s.end for s in doc.sentences})


def _window_end(
    text: str, pos: int, cuts: tuple[list[int], list[int]], counter: SpanCounter, budget: int
) -> int:
    """Where a window from ``pos`` ends: within ``budget`` tokens, at a paragraph end (when that fills
    half the window), else a sentence end, else the end of the recursive splitter's first piece."""
    if counter.count(pos, len(text)) <= budget:
        return len(text)

    def last_fitting(ends: list[int]) -> int | None:
        lo, hi = bisect.bisect_right(ends, pos), len(ends)  # token counts grow with the end: bisect
        while lo < hi:
            mid = (lo + hi) // 2
            if counter.count(pos, ends[mid]) <= budget:
                lo = mid + 1
            else:
                hi = mid
        return ends[lo - 1] if lo > 0 and ends[lo - 1] > pos else None

    paragraph_ends, sentence_ends = cuts
    paragraph = last_fitting(paragraph_ends)
    if paragraph is not None and counter.count(pos, paragraph) >= budget // 2:
        return paragraph
    candidates = [e for e in (paragraph, last_fitting(sentence_ends)) if e is not None]
    if candidates:
        return max(candidates)
    # One sentence longer than the window: the recursive splitter's first piece.
    spans = recursive_spans(text, counter.tokenizer, budget, 0, lo=pos, hi=len(text), counter=counter)
    return spans[0][1] if spans and spans[0][1] > pos else min(len(text), pos + 1)
