"""PROVISIONAL: replaced by the documents work (language detection)."""

from __future__ import annotations

import re

__all__ = ["detect_language"]

_HAN = re.compile(r"[\u4e00-\u9fff]")


def detect_language(text: str) -> str:
    sample = text[:20000]
    han = len(_HAN.findall(sample))
    letters = sum(ch.isalpha() for ch in sample)
    if letters and han / letters > 0.3:
        return "zh"
    return "en" if letters else "und"
