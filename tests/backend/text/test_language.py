"""Tests for backend.text.language.detect_language."""

from __future__ import annotations

import pytest

from backend.text.language import SAMPLE_CHARS, detect_language

ENGLISH = (
    "The storage engine writes each segment to disk when the buffer is full. It was designed for "
    "teams that need durable storage, and the operators who run it have found that it is easy to repair."
)
SIMPLIFIED = "我们镇子坐落在两座山之间，一条河从镇中间穿过，把街道分成了东西两半。每年五月一到，雨就来了。"
TRADITIONAL = "我們鎮子坐落在兩座山之間，一條河從鎮中間穿過，把街道分成了東西兩半。每年五月一到，雨就來了。"


@pytest.mark.parametrize(
    ("text", "language"),
    [
        (ENGLISH, "en"),
        (SIMPLIFIED, "zh"),
        (TRADITIONAL, "zh"),
        ("今日は公園に散歩に行きました。天気がとても良かったです。あなたはどう思いますか？", "ja"),
        ("오늘 우리는 공원에 산책하러 갔습니다. 날씨가 아주 좋았어요.", "ko"),
        ("Привет, как дела? Это тестовый текст на русском языке.", "ru"),
        ("مرحبا كيف حالك اليوم؟ هذا نص تجريبي باللغة العربية.", "ar"),
        ("Der schnelle braune Fuchs springt über den faulen Hund. Es ist nicht so einfach, wie wir dachten.", "de"),
        ("Le renard brun saute par-dessus le chien paresseux. Il est dans la maison avec elle et les enfants.", "fr"),
        ("El zorro marrón salta sobre el perro perezoso. Los niños están en la casa con su madre.", "es"),
        ("La volpe marrone salta sopra il cane pigro. Non è vero che gli uomini sono così per questo.", "it"),
        ("A raposa marrom pula sobre o cão preguiçoso. Não é verdade que os homens são assim para sempre.", "pt"),
        ("De snelle bruine vos springt over de luie hond. Het is niet waar dat wij dit voor hem doen.", "nl"),
    ],
)
def test_languages(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_mostly_english_with_some_chinese_is_english() -> None:
    mixed = ENGLISH + " The 数据库 and 向量 modules handle the indexing. " + ENGLISH
    assert detect_language(mixed) == "en"


def test_mostly_chinese_with_some_english_is_chinese() -> None:
    assert detect_language(SIMPLIFIED * 3 + " Kestrel v2.1.3 uses the S3 API. " + SIMPLIFIED) == "zh"


@pytest.mark.parametrize("text", ["", "   \n\t ", "12345 67.89 -- !!", "x", "Kestrel Harrow Abernathy"])
def test_undetermined(text: str) -> None:
    assert detect_language(text) == "und"


def test_only_the_beginning_is_read() -> None:
    english = (ENGLISH + " ") * (SAMPLE_CHARS // len(ENGLISH) + 1)
    assert detect_language(english + SIMPLIFIED * 10_000) == "en"


def test_deterministic() -> None:
    text = ENGLISH + SIMPLIFIED
    assert len({detect_language(text) for _ in range(5)}) == 1
