"""Sentence starts from blingfire's sentence breaker, as character offsets of the text.

blingfire's Python wrapper, ``text_to_sentences_and_offsets``, maps the breaker's UTF-8 byte
offsets back to characters in a pure-Python loop over every byte: 0.17 s of its 0.27 s on
1 MB of English. This module calls the same C entry point (``TextToSentencesWithOffsets``,
declared in blingfire's ``blingfiretokdll.h``) through the library the package has already
loaded, and does that mapping with numpy (a dependency of blingfire) in milliseconds. Where
the entry point is not found (another package layout), the public wrapper is used.

blingfire also spends about 3 µs on each character of a punctuation run ("-----", dot
leaders, "。。。"), against 0.04 µs on letters: runs longer than 3 are shortened before
the call and the offsets shifted back, so a page of rules costs what a page of prose does.

blingfire and numpy are imported on first use: ``import backend`` stays light.
"""

from __future__ import annotations

import bisect
import ctypes
import re
from collections.abc import Callable

__all__ = ["SentenceBreakerError", "sentence_starts"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_KEPT_RUN = 3
_PUNCT_RUN = re.compile(rf"([^\w\s])\1{{{_KEPT_RUN},}}")


class SentenceBreakerError(RuntimeError):
    """blingfire could not split a text (it reports an error, or its offsets do not map)."""


def sentence_starts(text: str) -> list[int]:
    """Offsets where blingfire starts a sentence, in order; the first sentence's excluded.

    Args:
        text: Any text; lone surrogates are allowed (blingfire sees U+FFFD in their place).

    Returns:
        Character offsets ``0 < offset < len(text)``, increasing.

    Raises:
        SentenceBreakerError: If blingfire fails on this text.
    """
    if not text.strip():
        return []  # blingfire's wrapper asserts on empty input; nothing to split anyway
    # blingfire needs valid UTF-8. U+FFFD is one code point for one, so offsets still hold.
    clean = _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text
    short, removed_before = _squeeze(clean)
    entry_point = _entry_point()
    starts = _starts_from_wrapper(short) if entry_point is None else _starts_from_c(entry_point, short)
    return _unsqueeze(starts, removed_before) if removed_before else starts


def _squeeze(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Shorten runs of one punctuation character to 3: blingfire spends ~3 µs per such character.

    Returns:
        The shorter text, and for each squeezed run ``(end of the run in the shorter text,
        characters removed up to there)``, in order.
    """
    runs = list(_PUNCT_RUN.finditer(text))
    if not runs:
        return text, []
    pieces, removed_before, removed, previous = [], [], 0, 0
    for run in runs:
        keep = run.start() + _KEPT_RUN
        pieces.append(text[previous:keep])
        removed += run.end() - keep
        removed_before.append((run.end() - removed, removed))
        previous = run.end()
    pieces.append(text[previous:])
    return "".join(pieces), removed_before


def _unsqueeze(offsets: list[int], removed_before: list[tuple[int, int]]) -> list[int]:
    """Offsets in the squeezed text back to offsets in the text it came from."""
    ends = [end for end, _ in removed_before]
    shifted = []
    for offset in offsets:
        index = bisect.bisect_right(ends, offset)
        shifted.append(offset + (removed_before[index - 1][1] if index else 0))
    return shifted


def _entry_point() -> Callable[..., int] | None:
    """blingfire's C ``TextToSentencesWithOffsets``, or None where it cannot be reached."""
    import blingfire  # noqa: PLC0415 - loads numpy: paid on first use, not on import

    library = getattr(blingfire, "blingfire", None)
    return getattr(library, "TextToSentencesWithOffsets", None)


def _starts_from_c(entry_point: Callable[..., int], text: str) -> list[int]:
    """Call the C breaker and map its byte offsets to character offsets."""
    import numpy as np  # noqa: PLC0415 - already loaded by blingfire

    data = text.encode("utf-8")
    size = len(data)
    # The sizes blingfire's own wrappers use: the output may grow, one offset per sentence.
    capacity = 2 * size + 1
    out = ctypes.create_string_buffer(capacity)
    starts = np.empty(capacity, dtype=np.int32)
    ends = np.empty(capacity, dtype=np.int32)
    written = entry_point(
        ctypes.c_char_p(data),
        ctypes.c_int(size),
        out,
        starts.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
        ends.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
        ctypes.c_int(capacity),
    )
    if written <= 0 or written > capacity:
        raise SentenceBreakerError(f"blingfire returned {written} for a text of {size} bytes")
    # The output holds the sentences joined by "\n" plus a final NUL byte.
    count = ctypes.string_at(out, written - 1).count(b"\n") + 1
    byte_starts = starts[1:count].astype(np.int64)
    if count > capacity or (byte_starts.size and (byte_starts.min() <= 0 or byte_starts.max() >= size)):
        raise SentenceBreakerError("blingfire returned offsets outside the text")
    is_lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
    if not is_lead[byte_starts].all():
        raise SentenceBreakerError("blingfire returned an offset inside a UTF-8 sequence")
    char_index = np.cumsum(is_lead) - 1
    return np.unique(char_index[byte_starts]).tolist()


def _starts_from_wrapper(text: str) -> list[int]:
    """The same through blingfire's public Python wrapper (slower, same result)."""
    import blingfire  # noqa: PLC0415

    try:
        _, offsets = blingfire.text_to_sentences_and_offsets(text)
    except AssertionError as e:  # the wrapper checks its byte-to-character mapping with assert
        raise SentenceBreakerError("blingfire's offsets do not map to characters") from e
    return sorted({start for start, _ in offsets[1:] if 0 < start < len(text)})
