"""Running a multi-granularity retriever over built indexes: gather each level's candidates, route, select.

The engine behind :class:`backend.retrieval.retriever.levels.LevelRetriever` (``mog``, ``mogg``,
``freechunker`` in the retriever registry), which builds the indexes
(:func:`backend.retrieval.multi.index.build_index`) and calls: :func:`run_retriever` for the
benchmark, :func:`training_data` for router training (``python -m backend router train``, a live
``cv`` router), :func:`live_retrieve` for the live query.

Routing (``router=`` of ``mog``/``mogg``): the router's weights per question come from

- ``cv`` — 5-fold cross-fitting on the question set's own soft labels: each question is routed
  by a router trained on the other folds (:func:`backend.retrieval.multi.level_router.cross_fit`);
  one more router trained on every question gives the training curve shown;
- ``uniform`` — all weights 1 (the chosen level is then level 1, the finest, by eq. 2's tie rule);
- ``oracle`` — the question's own soft label (an upper bound; uniform where no level's top-1
  touches the answer);
- ``level:N`` — weight 1 on level N only: MoG's selection on one fixed level (the paper's
  "without router");
- a router file — trained by ``python -m backend router train``, refused unless its levels,
  base and embedder match.

Soft labels (MoG eq. 3): per question and level the top-1 entry is compared with the answer
(``label=iou|recall|embedding``); the best level gets 0.8 and the runner-up 0.2 (``soft=0.7/0.3``
also); questions where no level's top-1 touches the answer are dropped from training.
Candidates per level are ``max(k_r, k)`` deep, so a fixed level can still return ``k`` entries.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from backend.chunkers.multi import RetrieverChunker
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder, embed_texts
from backend.retrieval.metrics import containing_chunks
from backend.retrieval.multi.index import MultiIndex
from backend.retrieval.multi.level_router import TrainReport, cross_fit, load_router, soft_labels, train_router
from backend.retrieval.multi.select import (
    Candidates,
    Selection,
    chosen_level,
    freechunker_select,
    level_similarities,
    mog_select,
)
from backend.retrieval.questions import QuestionSet
from backend.retrieval.store import ChunkStore, entry_text

__all__ = [
    "Agreement",
    "Routing",
    "RetrieverRun",
    "LiveRetrieval",
    "TrainingData",
    "gather_candidates",
    "router_weights",
    "run_retriever",
    "training_data",
    "live_retrieve",
    "label_depth",
    "MAX_AUTO_RETRIEVE",
]

MAX_AUTO_RETRIEVE = 20


@dataclass(frozen=True)
class Agreement:
    """How often the router chose the oracle level, over the questions that have one.

    Attributes:
        agreed: Questions whose chosen level is their oracle level.
        counted: Questions with an oracle level (some level's top-1 entry touches the answer).
        questions: All questions.
    """

    agreed: int
    counted: int
    questions: int

    @property
    def share(self) -> float | None:
        """``agreed / counted``; None when no question has an oracle level."""
        return self.agreed / self.counted if self.counted else None

    @property
    def without_oracle(self) -> int:
        """Questions with no oracle level (not counted)."""
        return self.questions - self.counted


@dataclass(frozen=True)
class Routing:
    """How a routed retriever weighed the levels for each question of a set.

    Attributes:
        level_names: One name per level, finest first.
        router: The ``router=`` value as read (``cv``, ``level:2``, ``router file x``).
        weights: ``(questions, levels)`` router weights.
        chosen: ``(questions,)`` the chosen level, 1-based.
        similarities: ``(questions, levels)`` each level's top-1 similarity to the answer.
        labels: ``(questions, levels)`` the soft labels.
        oracle: ``(questions,)`` the best level by similarity, 1-based; 0 where no level's top-1 touches the answer.
        training: The curve of the router trained on every usable question (``cv``), else None.
    """

    level_names: tuple[str, ...]
    router: str
    weights: np.ndarray
    chosen: np.ndarray
    similarities: np.ndarray
    labels: np.ndarray
    oracle: np.ndarray
    training: TrainReport | None

    def confusion(self) -> np.ndarray:
        """``(levels, levels)`` counts: rows the oracle level, columns the chosen one (questions with an oracle only)."""
        n = len(self.level_names)
        out = np.zeros((n, n), dtype=np.int64)
        for o, c in zip(self.oracle.tolist(), self.chosen.tolist()):
            if o > 0:
                out[o - 1, c - 1] += 1
        return out

    def agreement(self) -> Agreement:
        """The chosen level against the oracle level (the one place oracle agreement is computed)."""
        oracle = np.asarray(self.oracle)
        has = oracle > 0
        agreed = int((oracle[has] == np.asarray(self.chosen)[has]).sum())
        return Agreement(agreed, int(has.sum()), int(oracle.size))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: names, router, chosen levels and their histogram, oracle agreement, the training report."""
        hist = np.bincount(self.chosen - 1, minlength=len(self.level_names)).tolist() if self.chosen.size else []
        return {
            "levels": list(self.level_names),
            "router": self.router,
            "chosen_histogram": hist,
            "oracle_agreement": self.agreement().share,
            "mean_weights": self.weights.mean(axis=0).round(4).tolist() if self.weights.size else [],
            "training": self.training.to_json() if self.training is not None else None,
        }


@dataclass(frozen=True)
class RetrieverRun:
    """A retriever's answers to a question set: one selection per question, and its routing.

    Attributes:
        selections: Per question, in question-set order.
        routing: MoG(G)'s routing (None for FreeChunker).
        query_seconds: Mean seconds per question from candidates to selection (training a
            ``cv`` router excluded; applying it included).
    """

    selections: tuple[Selection, ...]
    routing: Routing | None
    query_seconds: float


def gather_candidates(
    indexes: Mapping[str, MultiIndex],
    store: ChunkStore,
    q_vectors: np.ndarray,
    depth: int,
    corpus_of: Sequence[str] | None = None,
) -> list[list[list[tuple[str, Any]]]]:
    """Each question's top ``depth`` entries per level, over every corpus (or its own: ``corpus_of``).

    Returns:
        ``out[question][level]``: ``(corpus_id, EntryHit)`` pairs by increasing distance.
    """
    n = int(np.atleast_2d(q_vectors).shape[0]) if len(q_vectors) else 0
    levels = max(len(ix.levels) for ix in indexes.values())
    pooled: list[list[list[tuple[float, int, str, Any]]]] = [[[] for _ in range(levels)] for _ in range(n)]
    for order, (cid, index) in enumerate(indexes.items()):
        rows = list(range(n)) if corpus_of is None else [i for i in range(n) if corpus_of[i] == cid]
        if not rows:
            continue
        for g, level in enumerate(index.levels):
            answers = store.query_level(level.collection, np.atleast_2d(q_vectors)[rows], depth)
            for i, hits in zip(rows, answers):
                pooled[i][g].extend((h.distance, order, cid, h) for h in hits)
    return [
        [[(cid, h) for _, _, cid, h in sorted(level, key=lambda x: (x[0], x[1], x[3].index))[:depth]] for level in q]
        for q in pooled
    ]


def router_weights(
    chunker: RetrieverChunker,
    q_vectors: np.ndarray,
    labels: np.ndarray,
    *,
    embedder_fingerprint: str,
    embedder_name: str = "",
    seed: int = 0,
) -> tuple[np.ndarray, TrainReport | None]:
    """Per-question weights of the retriever's ``router=`` (see the module docstring).

    Returns:
        ``(weights, training)``: ``(questions, levels)`` weights, and the training report of
        the router fitted on every usable question (``cv`` only).

    Raises:
        InputError: a router file that cannot be read or does not match.
    """
    spec = chunker.level_routing
    n, levels = labels.shape[0], chunker.values["levels"]
    if spec.kind == "uniform":
        return np.ones((n, levels)), None
    if spec.kind == "level":
        w = np.zeros((n, levels))
        w[:, spec.level - 1] = 1.0
        return w, None
    if spec.kind == "oracle":
        w = labels.astype(np.float64).copy()
        w[w.sum(axis=1) <= 0] = 1.0
        return w, None
    if spec.kind == "path":
        router = load_router(spec.path, levels=levels, base=chunker.level_spec(), embedder_fingerprint=embedder_fingerprint)
        return np.atleast_2d(router.predict(q_vectors)), None
    weights = cross_fit(q_vectors, labels, folds=5, seed=seed)
    training = None
    if int((labels.sum(axis=1) > 0).sum()) >= 2:
        _, training = train_router(q_vectors, labels, seed=seed, **_router_meta(chunker, embedder_name, embedder_fingerprint))
    return weights, training


def _router_meta(chunker: RetrieverChunker, embedder_name: str, fingerprint: str) -> dict[str, Any]:
    return {
        "base": chunker.level_spec(),
        "embedder": embedder_name,
        "embedder_fingerprint": fingerprint,
        "label": chunker.values["label"],
        "soft": chunker.values["soft"],
    }


def _labels(chunker: RetrieverChunker, sims: np.ndarray) -> np.ndarray:
    top, second = chunker.soft_label_weights
    return np.vstack([soft_labels(row, top, second) for row in sims]) if len(sims) else np.zeros((0, 0))


def _embedding_inputs(
    candidates: Sequence[Candidates],
    indexes: Mapping[str, MultiIndex],
    answers: Sequence[str],
    embedder: TextEmbedder,
    cache: OutputCache | None,
) -> tuple[list[list[np.ndarray | None]], np.ndarray]:
    """For ``label=embedding``: the top-1 entries' vectors and the answers' vectors (through the cache)."""
    keys: dict[tuple[str, int, int], int] = {}
    texts: list[str] = []
    for per_level in candidates:
        for g, hits in enumerate(per_level):
            if hits:
                cid, h = hits[0]
                key = (cid, g, h.index)
                if key not in keys:
                    keys[key] = len(texts)
                    texts.append(entry_text(indexes[cid].doc.text, h.ranges))
    vectors, _ = embed_texts(embedder, texts, cache=cache)
    answer_vectors, _ = embed_texts(embedder, list(answers), cache=cache)
    per_q: list[list[np.ndarray | None]] = []
    for per_level in candidates:
        row: list[np.ndarray | None] = []
        for g, hits in enumerate(per_level):
            row.append(vectors[keys[(hits[0][0], g, hits[0][1].index)]] if hits else None)
        per_q.append(row)
    return per_q, answer_vectors


def _answers(questions: QuestionSet) -> list[str]:
    return ["\n".join(r.content for r in q.references) for q in questions.questions]


def label_depth(chunker: RetrieverChunker, retrieve: int) -> int:
    """Entries per level a soft label scores: ``label_k``, or with ``label_k=0`` the retrieve depth (1 for -1)."""
    return int(chunker.values["label_k"]) or (retrieve if retrieve > 0 else 1)


def _soft_labelled(
    chunker: RetrieverChunker,
    candidates: Sequence[Candidates],
    indexes: Mapping[str, MultiIndex],
    questions: QuestionSet,
    embedder: TextEmbedder,
    cache: OutputCache | None,
    top: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each question's per-level similarity to its answer (``label=``, the ``top`` best entries) and its soft labels."""
    qs = questions.questions
    label = chunker.values["label"]
    extra: dict[str, Any] = {}
    if label == "embedding":
        vecs, answers = _embedding_inputs(candidates, indexes, _answers(questions), embedder, cache)
        extra = {"entry_vectors": vecs, "answer_vectors": answers}
    sims = level_similarities(candidates, [q.corpus_id for q in qs], [q.spans for q in qs], label, top=top, **extra)
    return sims, _labels(chunker, sims)


def run_retriever(
    questions: QuestionSet,
    chunker: RetrieverChunker,
    indexes: Mapping[str, MultiIndex],
    store: ChunkStore,
    embedder: TextEmbedder,
    q_vectors: np.ndarray,
    *,
    retrieve: int = 5,
    cross_corpus: bool = True,
    cache: OutputCache | None = None,
) -> RetrieverRun:
    """Answer every question of ``questions`` with a retriever whose corpora are indexed (``indexes``).

    Args:
        questions: The question set (its excerpts make the soft labels of ``cv`` and ``oracle``).
        chunker: The retriever's registry entry (validated).
        indexes: Each corpus's index, in question-set corpus order.
        store: The Chroma store.
        embedder: The embedder (the one ``q_vectors`` came from).
        q_vectors: The questions' vectors, in question-set order.
        retrieve: Entries per question; -1: as many entries of the chosen level as hold
            excerpts (FreeChunker: units), at most 20.
        cross_corpus: Candidates from every corpus (False: the question's own).
        cache: The output cache.

    Raises:
        ParameterError: a bad ``retrieve``.
        InputError: a router file that cannot be used.
        StoreError, ModelError: the store or the embedder fails.
    """
    if retrieve != -1 and retrieve < 1:
        raise ParameterError(f"retrieve ({retrieve}) must be a positive number of entries, or -1")
    qs = questions.questions
    t0 = time.perf_counter()
    depth = max(chunker.values.get("k_r", 1), chunker.values.get("label_k", 1),
                retrieve if retrieve > 0 else MAX_AUTO_RETRIEVE)  # label_k=0 follows retrieve
    corpus_of = None if cross_corpus else [q.corpus_id for q in qs]
    candidates = gather_candidates(indexes, store, q_vectors, depth, corpus_of)
    routing = None
    if chunker.routed:
        sims, labels = _soft_labelled(chunker, candidates, indexes, questions, embedder, cache,
                                      label_depth(chunker, retrieve))
        t_route = time.perf_counter()
        weights, training = router_weights(
            chunker, q_vectors, labels, embedder_fingerprint=embedder.info.fingerprint, embedder_name=embedder.info.name
        )
        t0 += time.perf_counter() - t_route  # training a router is not query time
        chosen = np.array([chosen_level(w) for w in weights], dtype=np.int64)
        oracle = np.where(labels.max(axis=1) > 0, labels.argmax(axis=1) + 1, 0) if labels.size else np.zeros(0, np.int64)
        routing = Routing(tuple(chunker.level_names()), chunker.level_routing.label(), weights, chosen, sims, labels,
                          oracle.astype(np.int64), training)
    selections = []
    for i, q in enumerate(qs):
        k = retrieve if retrieve > 0 else _auto_k(indexes[q.corpus_id], q.spans, routing.chosen[i] if routing else None)
        cand = [[(cid, h) for cid, h in level[: max(chunker.values.get("k_r", 1), k)]] for level in candidates[i]]
        if routing is not None:
            # k_r candidates per level, but never fewer than k (so level:N can return k entries).
            selections.append(mog_select(indexes, cand, routing.weights[i], k))
        else:
            selections.append(freechunker_select(indexes, [level[:k] for level in candidates[i]], k))
    query_seconds = (time.perf_counter() - t0) / max(1, len(qs))
    return RetrieverRun(tuple(selections), routing, query_seconds)


def _auto_k(index: MultiIndex, excerpts: Sequence[tuple[int, int]], level: int | None) -> int:
    """retrieve=-1: entries of the chosen level (FreeChunker: units) holding excerpt characters, 1..20."""
    entries = index.levels[(level or 1) - 1].entries
    spans = [(e.start, e.end) for e in entries]
    return max(1, min(MAX_AUTO_RETRIEVE, len(containing_chunks(spans, list(excerpts)))))


@dataclass(frozen=True)
class TrainingData:
    """What a router is trained on: the questions' vectors and soft labels, and the similarities behind them."""

    vectors: np.ndarray
    labels: np.ndarray
    similarities: np.ndarray
    questions: int
    dropped: int
    level_names: tuple[str, ...]

    @property
    def usable(self) -> int:
        """Questions with a label (some level's top entries touch the answer)."""
        return self.questions - self.dropped

    def histogram(self) -> list[int]:
        """Questions whose best label is at each level (dropped questions excluded)."""
        keep = self.labels.max(axis=1) > 0 if self.labels.size else np.zeros(0, bool)
        return np.bincount(self.labels[keep].argmax(axis=1), minlength=len(self.level_names)).tolist()


def training_data(
    questions: QuestionSet,
    chunker: RetrieverChunker,
    indexes: Mapping[str, MultiIndex],
    store: ChunkStore,
    embedder: TextEmbedder,
    *,
    retrieve: int = 5,
    cache: OutputCache | None = None,
) -> TrainingData:
    """The soft-labelled questions of a set for the router of a routed retriever (``mog`` or ``mogg``).

    ``retrieve`` is the depth the router will be used at: with ``label_k=0`` the labels score
    each level's top ``retrieve`` entries.

    Args:
        questions: The question set.
        chunker: The retriever's registry entry.
        indexes: Each corpus's index.
        store: The Chroma store.
        embedder: The embedder of the indexes.
        retrieve: The depth the router will be used at.
        cache: The output cache.

    Raises:
        ParameterError: a retriever without a router (FreeChunker).
        StoreError, ModelError: the store or the embedder fails.
    """
    if not chunker.routed:
        raise ParameterError(f"{chunker.name} has no router; train one for mog or mogg")
    q_vectors, _ = embed_texts(embedder, [q.question for q in questions.questions], cache=cache)
    qs = questions.questions
    top = label_depth(chunker, retrieve)
    candidates = gather_candidates(indexes, store, q_vectors, max(chunker.values["k_r"], top))
    sims, labels = _soft_labelled(chunker, candidates, indexes, questions, embedder, cache, top)
    dropped = int((labels.max(axis=1) <= 0).sum()) if labels.size else len(qs)
    return TrainingData(q_vectors, labels, sims, len(qs), dropped, tuple(chunker.level_names()))


@dataclass(frozen=True)
class LiveRetrieval:
    """One live query through a retriever, with what the Retrieval page draws.

    Attributes:
        config: The retriever configuration.
        index: The document's index (levels, entries, MoGG's graph).
        selection: What it returns.
        candidates: Per level, the candidates (best first).
        note: How the weights were made when ``router=`` could not be followed as given
            (``cv`` without a question set, ``oracle`` without a marked answer), else "".
        similarities: Each level's top-1 similarity to the marked answer (None without marks).
    """

    config: ChunkerConfig
    index: MultiIndex
    selection: Selection
    candidates: tuple[tuple[tuple[str, Any], ...], ...]
    note: str
    similarities: np.ndarray | None


def live_retrieve(
    index: MultiIndex,
    chunker: RetrieverChunker,
    store: ChunkStore,
    embedder: TextEmbedder,
    query: str,
    k: int,
    *,
    marks: Sequence[tuple[int, int]] = (),
    training: TrainingData | None = None,
    cache: OutputCache | None = None,
) -> LiveRetrieval:
    """Answer one query over one indexed document with a retriever.

    ``router=cv`` trains a router on ``training`` (the session's question set, labelled by
    :func:`training_data`) when it has two usable questions or more, else falls back to
    uniform weights; ``oracle`` uses the soft label of the marked answer, else uniform. The
    fallback is said in ``note``.

    Raises:
        InputError: a router file that cannot be used.
        StoreError, ModelError: the store or the embedder fails.
    """
    q_vec, _ = embed_texts(embedder, [query], cache=cache)
    cid = index.doc.id
    config = chunker.config
    depth = max(chunker.values.get("k_r", 1), chunker.values.get("label_k", 1), k)  # label_k=0 follows k
    cand = gather_candidates({cid: index}, store, q_vec, depth)[0]
    sims = None
    if marks:
        routed = chunker.routed
        sims = level_similarities([cand], [cid], [list(marks)], "recall" if routed and chunker.values["label"] == "recall"
                                  else "iou", top=label_depth(chunker, k) if routed else 1)[0]
    note = ""
    if not chunker.routed:
        selection = freechunker_select({cid: index}, [level[:k] for level in cand], k)
        return LiveRetrieval(config, index, selection, tuple(tuple(c) for c in cand), note, sims)
    spec = chunker.level_routing
    levels = chunker.values["levels"]
    fp = embedder.info.fingerprint
    if spec.kind == "oracle":
        if sims is not None and sims.max() > 0:
            weights = _labels(chunker, sims[None, :])[0]
        else:
            weights = np.ones(levels)
            note = ("no level's top entry meets the marked answer: uniform weights" if sims is not None
                    else "oracle needs a marked answer: uniform weights")
    elif spec.kind == "cv":
        weights, note = _live_cv(chunker, training, embedder, q_vec, levels)
    else:
        weights = router_weights(chunker, q_vec, np.zeros((1, levels)), embedder_fingerprint=fp,
                                 embedder_name=embedder.info.name)[0][0]
    selection = mog_select({cid: index}, cand, weights, k)
    return LiveRetrieval(config, index, selection, tuple(tuple(c) for c in cand), note, sims)


def _live_cv(
    chunker: RetrieverChunker, training: TrainingData | None, embedder: TextEmbedder, q_vec: np.ndarray, levels: int
) -> tuple[np.ndarray, str]:
    """``router=cv`` on a live query: a router trained on the session's question set, else uniform."""
    if training is None or training.questions == 0:
        return np.ones(levels), "no question set to train a router on: uniform weights"
    if training.usable < 2:
        return np.ones(levels), "fewer than 2 usable questions to train a router on: uniform weights"
    router, _ = train_router(training.vectors, training.labels, **_router_meta(chunker, embedder.info.name,
                                                                              embedder.info.fingerprint))
    return np.atleast_2d(router.predict(q_vec))[0], f"router trained on the session's {training.usable} usable question(s)"
