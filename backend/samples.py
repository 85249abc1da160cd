"""The sample documents shipped with Chunk Lab (``assets/samples/``).

All sample texts are original, written for Chunk Lab, so they can be shipped and quoted
freely. They are chosen to exercise chunkers differently: an English short story
(dialogue, abbreviations such as "Dr." and "Mr.", decimals such as 3.5), an English
technical guide as Markdown and as the same text laid out in a PDF (headings, lists, code
blocks, version numbers like v2.1.3, "e.g.", "i.e.", "U.S."), a Chinese story (full-width
punctuation, no spaces), and a small HTML page. They load through
:func:`backend.loaders.load_document`, exactly like an upload.

Some samples also ship a question set (``assets/samples/questions/<name>.csv``, the Chroma
format, written by ``make_questions.py`` beside it from hand-copied excerpts): the sample file
itself is the corpus, so the folder of corpora is ``assets/samples/``. They make the
Benchmark page and ``python -m backend eval --questions sample:NAME`` usable with no set of
one's own; :func:`backend.retrieval.questions.load_sample_question_set` loads one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.errors import ParameterError
from backend.loaders import load_document
from backend.text.document import Document

__all__ = [
    "Sample",
    "SAMPLES_DIR",
    "DEFAULT_SAMPLE",
    "QUESTIONS_DIR",
    "list_samples",
    "get_sample",
    "load_sample",
    "SampleQuestions",
    "list_question_sets",
    "get_question_set",
    "DemoSetup",
    "DEMO",
]

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "assets" / "samples"
QUESTIONS_DIR = SAMPLES_DIR / "questions"
# The upload limit (CHUNKLAB_MAX_FILE_MB) is for user files; the bundled samples are
# small and trusted, and should load whatever the limit is set to.
_SAMPLE_MAX_BYTES = 50 * 2**20


@dataclass(frozen=True)
class Sample:
    """A bundled sample document.

    Attributes:
        name: Short identifier, used by :func:`load_sample` and the CLI.
        title: What the app shows in its sample picker.
        description: One sentence on what the sample is good for.
        path: The file.
    """

    name: str
    title: str
    description: str
    path: Path


_SAMPLES: tuple[Sample, ...] = (
    Sample(
        name="narrative",
        title="English narrative — The Clockmaker of Harrow Lane",
        description="A short story of about 3,000 words: dialogue, scene breaks, abbreviations "
        "(Mr., Dr.) and numbers such as 3.5 that naive sentence splitters trip over.",
        path=SAMPLES_DIR / "narrative_clockmaker.txt",
    ),
    Sample(
        name="technical",
        title="English technical guide (Markdown) — Kestrel Object Store",
        description="An operator guide of about 2,900 words in Markdown: headings, bullet and "
        "numbered lists, code blocks, versions like v2.1.3, e.g./i.e./U.S.",
        path=SAMPLES_DIR / "technical_kestrel.md",
    ),
    Sample(
        name="technical-pdf",
        title="English technical guide (PDF) — Kestrel Object Store",
        description="The same guide typeset as a 7-page PDF, to see what PDF extraction "
        "changes: rebuilt paragraphs, page boundaries, page-number footers.",
        path=SAMPLES_DIR / "technical_kestrel.pdf",
    ),
    Sample(
        name="chinese",
        title="Chinese narrative — 雨季里的茶馆 (The Teahouse in the Rainy Season)",
        description="A story of about 3,600 characters in simplified Chinese: full-width "
        "punctuation (。！？；“”), no spaces between words, numbered sections.",
        path=SAMPLES_DIR / "chinese_teahouse.txt",
    ),
    Sample(
        name="release-notes",
        title="English web page (HTML) — Kestrel v2.1.3 release notes",
        description="A short HTML page with a list, a table and a code block, plus script, "
        "style and hidden elements that must not reach the text.",
        path=SAMPLES_DIR / "release_notes.html",
    ),
)

DEFAULT_SAMPLE = _SAMPLES[0].name


def list_samples() -> list[Sample]:
    """The bundled samples; the first is the one the app opens on.

    Returns:
        A new list of :class:`Sample` (safe to modify).
    """
    return list(_SAMPLES)


def get_sample(name: str) -> Sample:
    """Look up a sample by name.

    Args:
        name: A :attr:`Sample.name`.

    Returns:
        The sample.

    Raises:
        ParameterError: No sample has that name.
    """
    for sample in _SAMPLES:
        if sample.name == name:
            return sample
    available = ", ".join(sample.name for sample in _SAMPLES)
    raise ParameterError(f"unknown sample '{name}'; available: {available}")


def load_sample(name: str) -> Document:
    """Load a bundled sample through the normal loaders.

    Args:
        name: A :attr:`Sample.name`, e.g. ``"narrative"``.

    Returns:
        The loaded document (``source`` is the sample's file name).

    Raises:
        ParameterError: No sample has that name.
    """
    return load_document(get_sample(name).path, max_bytes=_SAMPLE_MAX_BYTES)


@dataclass(frozen=True)
class SampleQuestions:
    """A bundled question set over one sample, in the Chroma format.

    Attributes:
        name: The sample's :attr:`Sample.name`, used by the CLI's ``--questions sample:NAME``.
        title: The sample's title.
        csv_path: ``assets/samples/questions/<name>.csv``.
        corpora_dir: The folder of corpora: ``assets/samples/`` (the sample file is the corpus).
    """

    name: str
    title: str
    csv_path: Path
    corpora_dir: Path


def list_question_sets() -> list[SampleQuestions]:
    """The bundled question sets, in sample order (load one with
    :func:`backend.retrieval.questions.load_sample_question_set`).

    Returns:
        A new list of :class:`SampleQuestions`.
    """
    found = [(sample, QUESTIONS_DIR / f"{sample.name}.csv") for sample in _SAMPLES]
    return [SampleQuestions(s.name, s.title, path, SAMPLES_DIR) for s, path in found if path.is_file()]


def get_question_set(name: str) -> SampleQuestions:
    """Look up a bundled question set by its sample's name.

    Raises:
        ParameterError: No sample of that name ships a question set.
    """
    sets = list_question_sets()
    for entry in sets:
        if entry.name == name:
            return entry
    raise ParameterError(f"no bundled question set '{name}'; available: {', '.join(e.name for e in sets)}")


@dataclass(frozen=True)
class DemoSetup:
    """What demo mode opens (``CHUNKLAB_DEMO=1``, or the app's "Demo mode" switch).

    ``scripts/make_demo_cache.py`` runs the bundled models on exactly this and ships the
    output-cache entries it writes in ``assets/demo/cache``; the app opens this and reads
    them back through its usual code paths, so every page draws at once with no model run.

    Attributes:
        sample: The sample document (the smallest English one that ships a question set).
        configs: ``(chunker, parameters)`` of the Compare page's configurations, in order.
        question: Which of the sample's bundled questions the Retrieval page asks (and marks).
        k: The Retrieval page's top k; the Benchmark retrieves as many per question.
    """

    sample: str
    configs: tuple[tuple[str, dict[str, Any]], ...]
    question: int
    k: int


DEMO = DemoSetup(
    sample="narrative",
    configs=(
        ("recursive", {"chunk_size": 200, "chunk_overlap": 0}),
        ("fixed_token", {"chunk_size": 250, "chunk_overlap": 125}),
        ("ppl", {}),
        ("semantic", {}),
    ),
    question=0,
    k=5,
)
