"""Greedy packing of units (sentences, paragraphs) into chunks under a token limit, written once."""

from __future__ import annotations

from typing import Sequence

from backend.chunkers.recursive import SUBSENTENCE_SEPARATORS, recursive_spans
from backend.tokenizers import SpanCounter

__all__ = ["pack_units", "split_oversized"]


def split_oversized(
    text: str, units: Sequence[tuple[int, int]], counter: SpanCounter, size: int
) -> tuple[list[tuple[int, int]], list[int]]:
    """Replace each unit longer than ``size`` tokens by sub-spans that fit; return units and their counts."""
    tokenizer = counter.tokenizer
    counts = counter.count_many(units)
    out_units: list[tuple[int, int]] = []
    out_counts: list[int] = []
    for (s, e), n in zip(units, counts):
        if n <= size:
            out_units.append((s, e))
            out_counts.append(n)
            continue
        subs = recursive_spans(text, tokenizer, size, 0, SUBSENTENCE_SEPARATORS, s, e, counter)
        out_units.extend(subs)
        out_counts.extend(counter.count_many(subs))
    return out_units, out_counts


def pack_units(
    text: str,
    units: Sequence[tuple[int, int]],
    counts: Sequence[int],
    counter: SpanCounter,
    size: int,
    overlap: int = 0,
) -> list[tuple[int, int, int]]:
    """Pack consecutive units greedily into chunks of at most ``size`` tokens.

    A chunk spans from its first unit's start to its last unit's end, so the whitespace
    between units counts too: each chunk's real count is checked and trailing units are
    moved to the next chunk when it is over. The next chunk starts with the trailing whole
    units of the previous one whose counts sum to at most ``overlap`` (never all of them);
    when that start plus its first new unit is still over the limit as one span (tokens can
    merge across a unit boundary), overlap units are dropped from its front until it fits.
    """
    out: list[tuple[int, int, int]] = []
    n_units = len(units)
    i = 0
    carry = 0  # units at the start of the current chunk repeated from the previous one
    while i < n_units:
        j = i
        total = 0
        while j < n_units and (j == i or total + counts[j] <= size):
            total += counts[j]
            j += 1
        a, b = units[i][0], units[j - 1][1]
        tokens = counter.count(a, b)
        while tokens > size:
            if j - 1 > i + carry:  # first give back trailing new units…
                j -= 1
                b = units[j - 1][1]
            elif carry:  # …then the overlap: unit counts sum below the limit, the joined span may not
                i += 1
                carry -= 1
                a = units[i][0]
            else:
                break  # one unit alone, already split to fit by split_oversized
            tokens = counter.count(a, b)
        out.append((a, b, tokens))
        if j >= n_units:
            break
        # Overlap: step back over whole units worth at most `overlap` tokens, keeping progress.
        k = j
        kept = 0
        while overlap > 0 and k - 1 > i and kept + counts[k - 1] <= overlap and counts[k - 1] + counts[j] <= size - kept:
            k -= 1
            kept += counts[k]
        carry = j - k
        i = k
    return out
