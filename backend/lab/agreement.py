"""``questions compare``: does a cheap question set rank configurations as a trusted one does?

:func:`compare_question_sets` is what ``python -m backend questions compare SET_A SET_B`` calls.
Each set is named the way the CLI names sets (:func:`question_set_for`): a Chroma-format CSV, a
bundled sample's hand-written set (``sample:NAME``), or ``generate:METHOD`` — questions generated
on set A's corpora by ``model-free``, ``model-free-keywords`` (the model-free method's earlier
style), ``bundled`` or ``chat``. Both sets run the same benchmark
(:func:`backend.retrieval.evaluate.evaluate`: one embedder, the same chunks retrieved per
question) over the same configurations, and each metric's agreement is Spearman's ρ between the
configurations' orders with a bootstrap interval over questions
(:func:`backend.retrieval.agreement.rank_agreement`).

The two sets must be on the same corpora (the same texts, under any ids): ranking chunkings of
one text by questions about another says nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.chunkers import make_chunker
from backend.chunking import ChunkerConfig
from backend.errors import InputError, ParameterError
from backend.progress import Progress
from backend.retrieval.agreement import DRAWS, Agreement, rank_agreement
from backend.retrieval.evaluate import METRIC_LABELS, METRICS, Benchmark, evaluate
from backend.retrieval.generation import generate_questions
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.questions import (
    QuestionSet,
    load_question_set,
    load_sample_question_set,
    merge_question_sets,
)

__all__ = [
    "DEFAULT_CONFIGS",
    "GENERATE_METHODS",
    "SetComparison",
    "compare_question_sets",
    "question_set_for",
]

# The ten configurations the held-back benchmark ranked: four sizes of the recursive
# splitter, fixed tokens at two sizes, sentences, paragraphs and two embedding chunkers.
DEFAULT_CONFIGS = (
    "recursive chunk_size=100 chunk_overlap=0",
    "recursive chunk_size=200 chunk_overlap=0",
    "recursive chunk_size=400 chunk_overlap=0",
    "recursive chunk_size=800 chunk_overlap=0",
    "fixed_token chunk_size=100 chunk_overlap=0",
    "fixed_token chunk_size=250 chunk_overlap=125",
    "sentence chunk_size=200",
    "paragraph",
    "cluster max_chunk_size=200",
    "semantic_max chunk_size=300",
)
GENERATE_METHODS = ("model-free", "model-free-keywords", "bundled", "chat")
# Model-free questions cost nothing, and more of them steady the order: on the bundled samples, 72 per
# corpus gave recall ρ +0.87 to +0.89 over three seeds where 36 gave +0.72 to +0.92 (bench_questions.py).
# A model's questions cost seconds to minutes each.
DEFAULT_PER_CORPUS = {"model-free": 72, "model-free-keywords": 72, "bundled": 12, "chat": 12}


@dataclass(frozen=True)
class SetComparison:
    """Two question sets' orders of the same configurations, per metric.

    Attributes:
        names: How the two sets were named (``sample:narrative``, a CSV's path, ``generate:model-free``).
        methods: How each set's questions were made (``""`` when the set does not say).
        questions: Questions in each set.
        corpora: The corpora both sets are on (set A's ids).
        configs: The configurations' specs (``recursive chunk_overlap=0 chunk_size=100``), in order.
        means: ``metric`` → ``(A's means, B's means)`` per configuration.
        agreements: One :class:`~backend.retrieval.agreement.Agreement` per metric (:data:`METRICS` order).
        embedder: The embedder both benchmarks used.
        retrieve: Chunks retrieved per question.
        seconds: Wall time of each set's generation (0 for a set read from disk) and benchmark.
    """

    names: tuple[str, str]
    methods: tuple[str, str]
    questions: tuple[int, int]
    corpora: tuple[str, ...]
    configs: tuple[str, ...]
    means: dict[str, tuple[tuple[float, ...], tuple[float, ...]]]
    agreements: tuple[Agreement, ...]
    embedder: str
    retrieve: int
    seconds: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: the sets, the configurations' means per metric, and each metric's ρ with its interval."""
        return {
            "sets": [
                {"name": n, "method": m or None, "questions": q}
                for n, m, q in zip(self.names, self.methods, self.questions)
            ],
            "corpora": list(self.corpora), "embedder": self.embedder, "retrieve": self.retrieve,
            "configs": [
                {"config": c, **{m: {"a": self.means[m][0][i], "b": self.means[m][1][i]} for m in self.means}}
                for i, c in enumerate(self.configs)
            ],
            "agreement": [a.to_json() for a in self.agreements],
            "seconds": self.seconds,
        }

    def lines(self) -> list[str]:
        """The comparison as text: what was compared, each configuration's means, each metric's ρ."""
        a, b = self.names
        out = [
            f"A: {a} ({self.questions[0]} questions, {self.methods[0] or 'method not stated'})",
            f"B: {b} ({self.questions[1]} questions, {self.methods[1] or 'method not stated'})",
            f"on {len(self.corpora)} corpus(es): {', '.join(self.corpora)} · {self.embedder} · "
            f"{self.retrieve} chunks retrieved per question · {len(self.configs)} configurations",
            "",
        ]
        width = max(len(c) for c in self.configs) + 2
        head = "".join(f"{METRIC_LABELS[m] + ' A':>14}{METRIC_LABELS[m] + ' B':>14}" for m in self.means)
        out.append(f"{'configuration (mean %)':<{width}}{head}")
        for i, c in enumerate(self.configs):
            cells = "".join(f"{100 * self.means[m][0][i]:>14.1f}{100 * self.means[m][1][i]:>14.1f}" for m in self.means)
            out.append(f"{c:<{width}}{cells}")
        out.append("")
        draws = self.agreements[0].draws if self.agreements else 0
        out.append(f"Spearman ρ of the configurations' order, A against B ({draws} bootstrap draws over questions):")
        for ag in self.agreements:
            note = f" ({ag.undefined} draws without a ρ left out)" if ag.undefined else ""
            label = METRIC_LABELS[ag.metric]
            out.append(f"  {label:<12} ρ = {ag.rho:+.2f}   {ag.confidence:.0%} interval {ag.interval}{note}")
        return out


def _corpus_key(qs: QuestionSet) -> dict[str, str]:
    """Each corpus's document id (its text, as loaded) → its corpus id."""
    ids = qs.document_ids
    return {ids[cid]: cid for cid in qs.corpus_ids}


def _generated(on: QuestionSet, method: str, n: int, seed: int, embedder: Any, progress: Progress) -> QuestionSet:
    merged: QuestionSet | None = None
    cids = on.corpus_ids
    for i, cid in enumerate(cids):
        part = progress.part(i, len(cids), f"{method} questions on {cid}")
        doc = on.document(cid)
        if method in ("model-free", "model-free-keywords"):
            style = "context" if method == "model-free" else "keywords"
            got = model_free_questions(doc, n=n, corpus_id=cid, seed=seed, style=style, progress=part)
        else:
            got = generate_questions(doc, n=n, corpus_id=cid, method=method, seed=seed, embedder=embedder,
                                     progress=part)
        merged = merge_question_sets(merged, got.question_set())
    if merged is None or not len(merged):
        raise InputError(f"generate:{method} made no question on {', '.join(cids)}")
    return merged


def question_set_for(
    spec: str,
    corpora: str | Path | None = None,
    *,
    on: QuestionSet | None = None,
    per_corpus: int | None = None,
    seed: int = 0,
    embedder: Any = None,
    progress: Progress | None = None,
) -> QuestionSet:
    """The question set ``spec`` names: a CSV, ``sample:NAME`` or ``generate:METHOD`` (on ``on``'s corpora).

    Raises:
        ParameterError: an unknown sample or method; ``generate:`` without a set to generate on;
            ``--corpora`` given with a set that is not a CSV.
        InputError: an unreadable CSV or corpora folder; a generation that kept no question.
    """
    progress = progress or Progress()
    if spec.startswith("generate:"):
        method = spec.removeprefix("generate:")
        if method not in GENERATE_METHODS:
            raise ParameterError(f"unknown question method {method!r}; choose one of: {', '.join(GENERATE_METHODS)}")
        if on is None:
            raise ParameterError("generate:METHOD needs set A to generate on its corpora: give it as SET_B")
        if corpora is not None:
            raise ParameterError("a corpora folder is not used with generate:METHOD (it uses set A's corpora)")
        n = DEFAULT_PER_CORPUS[method] if per_corpus is None else per_corpus
        return _generated(on, method, n, seed, embedder, progress)
    if spec.startswith("sample:"):
        if corpora is not None:
            raise ParameterError("a corpora folder is not used with sample:NAME (the sample is the corpus)")
        return load_sample_question_set(spec.removeprefix("sample:"))
    return load_question_set(Path(spec).expanduser(), corpora)


def _aligned(a: QuestionSet, b: QuestionSet, names: tuple[str, str]) -> tuple[str, ...]:
    """Set A's corpus ids when both sets are on the same texts; else a one-line InputError."""
    ka, kb = _corpus_key(a), _corpus_key(b)
    if set(ka) != set(kb):
        only_a = sorted(ka[d] for d in set(ka) - set(kb))
        only_b = sorted(kb[d] for d in set(kb) - set(ka))
        what = "; ".join(
            part for part in (
                f"only {names[0]} has {', '.join(only_a)}" if only_a else "",
                f"only {names[1]} has {', '.join(only_b)}" if only_b else "",
            ) if part
        )
        raise InputError(f"the two sets are on different corpora ({what}): their rankings cannot be compared")
    return tuple(a.corpus_ids)


def compare_question_sets(
    set_a: str,
    set_b: str,
    configs: Sequence[str | ChunkerConfig] = DEFAULT_CONFIGS,
    *,
    corpora_a: str | Path | None = None,
    corpora_b: str | Path | None = None,
    embedder: Any = None,
    retrieve: int = 5,
    per_corpus: int | None = None,
    draws: int = DRAWS,
    seed: int = 0,
    progress: Progress | None = None,
) -> SetComparison:
    """Benchmark the same configurations on two question sets and compare their orders (see the module docstring).

    Args:
        set_a: The trusted set: a CSV, ``sample:NAME``.
        set_b: The set to check: a CSV, ``sample:NAME`` or ``generate:METHOD`` (on A's corpora).
        configs: At least three configurations (specs such as ``recursive chunk_size=200``).
        corpora_a: A's corpora folder (default: ``corpora/`` beside its CSV).
        corpora_b: B's.
        embedder: The one embedder of both benchmarks (and of a generation's filters).
        retrieve: Chunks retrieved per question.
        per_corpus: Questions generated per corpus for ``generate:METHOD`` (None: the method's
            :data:`DEFAULT_PER_CORPUS`).
        draws: Bootstrap draws of each interval.
        seed: Seeds the generation and the draws.
        progress: The run's progress (generation, then each benchmark); may raise ``Cancelled``.

    Raises:
        ParameterError: fewer than three configurations, a bad configuration, set or number.
        InputError: unreadable sets; sets on different corpora.
    """
    progress = progress or Progress()
    parsed = [c if isinstance(c, ChunkerConfig) else _config(c) for c in configs]
    if len(parsed) < 3:
        raise ParameterError(f"a ranking needs at least 3 configurations, got {len(parsed)}")
    if len(set(c.spec for c in parsed)) < len(parsed):
        raise ParameterError("a configuration is given twice")
    if per_corpus is not None and per_corpus < 1:
        raise ParameterError(f"questions per corpus ({per_corpus}) must be at least 1")
    if set_a.startswith("generate:"):
        raise ParameterError("set A is the trusted set: a CSV or sample:NAME (generate:METHOD goes in SET_B)")
    names = (set_a, set_b)
    a = question_set_for(set_a, corpora_a)
    t0 = time.perf_counter()
    b = question_set_for(set_b, corpora_b, on=a, per_corpus=per_corpus, seed=seed, embedder=embedder,
                         progress=progress.part(0, 3, "questions"))
    seconds = {"generation": time.perf_counter() - t0}
    corpora = _aligned(a, b, names)
    benches: list[Benchmark] = []
    for i, qs in enumerate((a, b), start=1):
        t0 = time.perf_counter()
        benches.append(evaluate(qs, parsed, embedder=embedder, retrieve=retrieve,
                                progress=progress.part(i, 3, f"benchmark of set {'AB'[i - 1]}")))
        seconds[f"benchmark {'AB'[i - 1]}"] = time.perf_counter() - t0
    scores = {m: (benches[0].matrix(m).T, benches[1].matrix(m).T) for m in METRICS}  # configurations × questions
    agreements = tuple(rank_agreement(m, *scores[m], draws=draws, seed=seed) for m in METRICS)
    means = {m: tuple(tuple(float(x) for x in s.mean(axis=1)) for s in scores[m]) for m in METRICS}
    method = "generate:" + set_b.removeprefix("generate:") if set_b.startswith("generate:") else ""
    return SetComparison(
        names=names,
        methods=(a.method, b.method or method),
        questions=(len(a), len(b)),
        corpora=corpora,
        configs=tuple(c.spec for c in parsed),
        means=means,
        agreements=agreements,
        embedder=benches[0].embedder,
        retrieve=retrieve,
        seconds={k: round(v, 2) for k, v in seconds.items()},
    )


def _config(spec: str) -> ChunkerConfig:
    try:
        name, params, tokenizer = ChunkerConfig.parse(spec)
        return make_chunker(name, params, tokenizer).config
    except (ValueError, ParameterError) as e:
        raise ParameterError(f"configuration {spec!r}: {e}") from None

