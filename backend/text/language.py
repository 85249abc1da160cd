"""Language detection: the writing system first, then stopwords for Latin-script text.

Chunk Lab needs the language only to pick sentence rules and to label documents, so a
small, deterministic, dependency-free detector is enough: count letters per script in the
first 50,000 characters, and for Latin script let a few dozen very frequent function words
of English, German, French, Spanish, Italian, Portuguese and Dutch vote. Statistical
detectors (langdetect, fastText) are larger, slower to import, and langdetect is
non-deterministic unless seeded; none of that buys anything here.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["detect_language", "UNDETERMINED", "SAMPLE_CHARS"]

UNDETERMINED = "und"
SAMPLE_CHARS = 50_000

# One ideograph carries about as much text as three Latin letters (a short word), so CJK
# characters count three times when scripts are compared; a Hangul syllable, twice.
_SCRIPT_WEIGHT = {"han": 3.0, "kana": 3.0, "hangul": 2.0}
_MIN_WEIGHT = 2.0  # less evidence than this (one Latin letter, say) is "und"
_KANA_SHARE_FOR_JAPANESE = 0.1  # of han + kana: Chinese text almost never has kana
_DOMINANCE = 0.5  # the winning script's share of all weighted letters

_SCRIPT_LANGUAGE = {
    "hangul": "ko",
    "cyrillic": "ru",
    "arabic": "ar",
    "greek": "el",
    "hebrew": "he",
    "thai": "th",
    "devanagari": "hi",
}

_STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "the and of to is was that it with for as on are be this by not but have from they "
        "which you at his her had were been their would there what when will can an or".split()
    ),
    "de": frozenset(
        "der die das und ist nicht ein eine zu den mit sich auf dem für von auch es sie "
        "im wird werden wir ich aber oder wie bei nach noch".split()
    ),
    "fr": frozenset(
        "le la les et des est une un du en que qui dans pour pas sur au avec il elle sont "
        "ce cette mais ou nous vous aux été être".split()
    ),
    "es": frozenset(
        "el la los las y de que en un una es por con para del se no al como su lo más pero "
        "sus este esta está son fue también".split()
    ),
    "it": frozenset(
        "il la di e che è per un una non del della sono con gli le nel alla si da anche come "
        "questo questa ma più dei delle".split()
    ),
    "pt": frozenset(
        "o a os as de que e do da em um uma para com não é no na por se mais dos das ao foi "
        "também pelo pela são mas".split()
    ),
    "nl": frozenset(
        "de het een en van is dat niet te in op met voor zijn er maar ook als bij aan dit "
        "wordt worden om naar wij ik".split()
    ),
}
# A word in several lists is weak evidence for each of them.
_WORD_VOTES: dict[str, dict[str, float]] = {}
for _lang, _words in _STOPWORDS.items():
    for _word in _words:
        _WORD_VOTES.setdefault(_word, {})[_lang] = 1.0
for _word, _votes in _WORD_VOTES.items():
    for _lang in _votes:
        _votes[_lang] = 1.0 / len(_votes)

_WORD = re.compile(r"[^\W\d_]+")
_MIN_VOTES = 1.0
_MARGIN = 1.25  # the winner needs this many times the runner-up's votes


def _script(ch: str) -> str | None:
    """The script of one letter, as a short name (``None`` for scripts we do not track)."""
    code = ord(ch)
    if code < 0x250:
        return "latin"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x3FFFF:
        return "han"
    if 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF or 0xFF66 <= code <= 0xFF9F:
        return "kana"
    if 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "hangul"
    if 0x0400 <= code <= 0x052F:
        return "cyrillic"
    if 0x0600 <= code <= 0x06FF or 0x0750 <= code <= 0x077F or 0xFB50 <= code <= 0xFEFF:
        return "arabic"
    if 0x0370 <= code <= 0x03FF or 0x1F00 <= code <= 0x1FFF:
        return "greek"
    if 0x0590 <= code <= 0x05FF:
        return "hebrew"
    if 0x0E00 <= code <= 0x0E7F:
        return "thai"
    if 0x0900 <= code <= 0x097F:
        return "devanagari"
    if 0x1E00 <= code <= 0x1EFF or 0xFF21 <= code <= 0xFF5A:
        return "latin"
    return None


def _latin_language(text: str) -> str:
    """Vote among the Latin-script languages by stopword counts."""
    scores: Counter[str] = Counter()
    for match in _WORD.finditer(text.lower()):
        votes = _WORD_VOTES.get(match.group())
        if votes:
            scores.update(votes)
    if not scores:
        return UNDETERMINED
    ranked = scores.most_common(2)
    best_lang, best = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    if best < _MIN_VOTES or best < _MARGIN * runner_up:
        return UNDETERMINED
    return best_lang


def detect_language(text: str) -> str:
    """Guess the language of a text.

    The dominant writing system decides for non-Latin scripts: ``zh`` (Han, simplified or
    traditional), ``ja`` (Han with a noticeable share of kana), ``ko``, ``ru`` (any Cyrillic),
    ``ar``, ``el``, ``he``, ``th``, ``hi``. Latin-script text is one of ``en``, ``de``, ``fr``,
    ``es``, ``it``, ``pt`` or ``nl`` by a stopword vote. Only the first 50,000 characters
    are read.

    Args:
        text: Any text.

    Returns:
        A language code, or ``"und"`` when the text is empty or the evidence is too thin
        or too mixed.
    """
    sample = unicodedata.normalize("NFC", text[:SAMPLE_CHARS])
    counts: Counter[str] = Counter()
    for ch in sample:
        if ch.isalpha():
            script = _script(ch)
            if script is not None:
                counts[script] += 1
    weights = {script: n * _SCRIPT_WEIGHT.get(script, 1.0) for script, n in counts.items()}
    total = sum(weights.values())
    if total < _MIN_WEIGHT:
        return UNDETERMINED

    cjk = weights.get("han", 0.0) + weights.get("kana", 0.0)
    if cjk >= _DOMINANCE * total:
        kana_share = counts["kana"] / (counts["han"] + counts["kana"])
        return "ja" if kana_share >= _KANA_SHARE_FOR_JAPANESE else "zh"

    script, weight = max(weights.items(), key=lambda item: (item[1], item[0]))
    if weight < _DOMINANCE * total:
        return UNDETERMINED
    if script == "latin":
        return _latin_language(sample)
    return _SCRIPT_LANGUAGE.get(script, UNDETERMINED)
