"""What a corpus run computes: :class:`CorpusSpec`.

Every engine runs the same spec through :func:`backend.corpus.work.document_rows`; the output
folder's ``run.json`` holds :meth:`CorpusSpec.to_json`, and a resumed run must have the same
:meth:`CorpusSpec.digest` (the configurations may differ: rows are keyed by document and
configuration, so a configuration added later runs on every document, and one dropped is kept).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.chunkers import make_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import ParameterError
from backend.metrics.report import METRICS as QUALITY_METRICS
from backend.metrics.report import QualitySettings
from backend.retrieval.questions import QuestionSet

__all__ = ["CORPUS_METRICS", "CorpusSpec", "parse_corpus_metrics", "question_set_digest", "tag_configs"]

CORPUS_METRICS = ("stats", *QUALITY_METRICS, "retrieval")  # what ``--metrics`` and the page offer
MODEL_METRICS = (*QUALITY_METRICS, "retrieval")


def parse_corpus_metrics(raw: str | Sequence[str]) -> tuple[str, ...]:
    """``stats,bc,retrieval`` → ``("stats", "bc", "retrieval")``: in :data:`CORPUS_METRICS` order, ``stats`` always in.

    Raises:
        ParameterError: an unknown name, naming the choices.
    """
    names = [x.strip() for x in (raw.split(",") if isinstance(raw, str) else raw) if x.strip()]
    bad = [x for x in names if x not in CORPUS_METRICS]
    if bad:
        raise ParameterError(f"unknown metric {bad[0]!r}; choose from {','.join(CORPUS_METRICS)} (comma-separated)")
    return tuple(m for m in CORPUS_METRICS if m == "stats" or m in names)


def tag_configs(configs: Sequence[ChunkerConfig]) -> tuple[ConfigEntry, ...]:
    """Letters A, B, … for the configurations, in order (a repeated configuration is refused)."""
    specs = [c.spec for c in configs]
    for i, s in enumerate(specs):
        if s in specs[:i]:
            raise ParameterError(f"configuration {s!r} is given twice")
    for c in configs:
        make_chunker(c.name, c.params_dict, c.tokenizer)  # a bad parameter fails before any document is read
    if len(configs) > 26:
        raise ParameterError(f"{len(configs)} configurations: at most 26")
    return tuple(ConfigEntry(i, chr(ord("A") + i), c) for i, c in enumerate(configs))


def question_set_digest(qset: QuestionSet | None) -> str | None:
    """A sha256 of the questions and their corpora's texts (None without a set)."""
    if qset is None:
        return None
    h = hashlib.sha256()
    for q in qset.questions:
        h.update(json.dumps([q.question, q.corpus_id, [r.to_json() for r in q.references]], ensure_ascii=False).encode("utf-8"))
    for cid in sorted(qset.corpora):
        h.update(cid.encode("utf-8") + b"\0" + qset.corpora[cid].encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class CorpusSpec:
    """The configurations, metrics and settings of one corpus run.

    Attributes:
        configs: The configurations, lettered (:func:`tag_configs`).
        metrics: Of :data:`CORPUS_METRICS` (``stats`` always).
        settings: K, rules, δ and the pair window of the quality metrics.
        pairs: The budget of the quality metrics: a seeded sample of at least this many units per
            metric, document and configuration, reported as estimates with 95% intervals (None:
            every pair, exact).
        seed: The sample's seed.
        questions: The question set of ``retrieval`` (each document is evaluated on the questions
            whose corpus is its text, :meth:`~backend.retrieval.questions.QuestionSet.on_document`).
        questions_name: How the set is named in tables (its file name, or ``sample:NAME``).
        retrieve: Chunks retrieved per question.
        lm: The language model of BC and CS and of model-backed chunkers (None: the default).
        embedder: The embedder of DS, retrieval and semantic chunkers (None: the default).
        device: Where the local models run (None: automatic).
    """

    configs: tuple[ConfigEntry, ...]
    metrics: tuple[str, ...] = ("stats",)
    settings: QualitySettings = QualitySettings()
    pairs: int | None = None
    seed: int = 0
    questions: QuestionSet | None = None
    questions_name: str | None = None
    retrieve: int = 5
    lm: str | None = None
    embedder: str | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        if not self.configs:
            raise ParameterError("a corpus run needs at least one configuration (--config)")
        if "retrieval" in self.metrics and self.questions is None:
            raise ParameterError("the retrieval metric needs a question set (--questions)")
        if self.pairs is not None and self.pairs < 1:
            raise ParameterError(f"pairs ({self.pairs}) must be at least 1")
        if self.retrieve < 1:
            raise ParameterError(f"retrieve ({self.retrieve}) must be at least 1")

    @property
    def quality_metrics(self) -> tuple[str, ...]:
        """The MoC metrics asked for (``bc``, ``cs``, ``ds``)."""
        return tuple(m for m in QUALITY_METRICS if m in self.metrics)

    def to_json(self) -> dict[str, Any]:
        """What ``run.json`` records (no question text: its digest and name)."""
        return {
            "configs": [{"tag": e.tag, "spec": e.config.spec, "label": e.config.label} for e in self.configs],
            "metrics": list(self.metrics),
            "settings": self.settings.to_json(),
            "pairs": self.pairs,
            "seed": self.seed,
            "questions": self.questions_name,
            "questions_digest": question_set_digest(self.questions),
            "retrieve": self.retrieve,
            "lm": self.lm,
            "embedder": self.embedder,
        }

    def digest(self) -> str:
        """What a resumed run must match: everything but the configurations (rows are keyed by those) and the device."""
        body = self.to_json()
        body.pop("configs")
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:16]
