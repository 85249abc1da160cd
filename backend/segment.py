"""PROVISIONAL: replaced by the segmentation work (sentence and paragraph spans)."""

from __future__ import annotations

import re

from backend.document import Span

__all__ = ["sentence_spans", "paragraph_spans"]

_PARA = re.compile(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*$)", re.S)
_SENT = re.compile(r"\S.*?(?:[.!?。！？；]+(?=\s|$)|$)", re.S)


def paragraph_spans(text: str) -> list[Span]:
    return [Span(m.start(), m.end()) for m in _PARA.finditer(text)]


def sentence_spans(text: str, language: str = "en") -> list[Span]:
    return [Span(m.start(), m.end()) for m in _SENT.finditer(text)]
