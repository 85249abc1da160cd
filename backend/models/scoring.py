"""LM scoring of documents, sentences and (context, continuation) pairs, through the output cache.

The pages and the CLI call these functions rather than a scorer directly, so that a rerun on
the same text with the same model never touches the model: every result is cached under the
model's fingerprint and the sha256 of the exact input text (see :mod:`backend.models.cache`).
Scorers are anything that follows :class:`backend.models.types.Scorer` (the local
:class:`LocalScorer` or the remote one); nothing here imports torch.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.models.cache import OutputCache, text_digest
from backend.models.rates import rate_store
from backend.models.timing import SECONDS_FIELD, record_cached, record_computed, stored_seconds, timed
from backend.models.types import ModelInfo, PartialTokenScores, Scorer, TokenScores
from backend.progress import Progress
from backend.text.document import Document

__all__ = [
    "SCORES_VERSION",
    "CHECKPOINT_SECONDS",
    "SentenceScore",
    "cached_conditional_scores",
    "cached_token_scores",
    "checkpoint_key",
    "conditional_scores",
    "missing_pairs",
    "pair_key",
    "pair_work",
    "document_token_scores",
    "partial_sentence_scores",
    "score_sentences",
    "sentence_scores",
    "scored_tokens",
    "scoring_checkpoint",
    "token_scores_key",
]

log = logging.getLogger(__name__)

# Bump when the way scores are computed changes, so old cache entries stop matching.
SCORES_VERSION = 1


@dataclass(frozen=True)
class SentenceScore:
    """The perplexity of one sentence of a document.

    Attributes:
        index: The sentence's position in the document (0-based).
        start: Character offset of the sentence in ``Document.text``.
        end: Character offset just past the sentence.
        text: ``Document.text[start:end]``.
        tokens: How many scored tokens start inside the sentence (the document's first
            token has no context and is never scored).
        nll_mean: Mean NLL (natural log) of those tokens; ``nan`` when there are none.
        ppl: ``exp(nll_mean)``; ``nan`` when there are no tokens.
    """

    index: int
    start: int
    end: int
    text: str
    tokens: int
    nll_mean: float
    ppl: float

    def to_json(self) -> dict[str, Any]:
        """``{"index", "start", "end", "text", "tokens", "nll_mean", "ppl"}``; nan and inf become None."""
        return {
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "tokens": self.tokens,
            "nll_mean": _finite_or_none(self.nll_mean),
            "ppl": _finite_or_none(self.ppl),
        }


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def token_scores_key(fingerprint: str, text: str, window: int | None, *, scorer_kind: str = "lm") -> dict[str, Any]:
    """The cache key of ``text``'s per-token scores under a model and a context window.

    Args:
        fingerprint: ``ModelInfo.fingerprint`` (the weights' hash; for a remote model the
            served model's identity, ``served:<sha256>``, never its URL or API key).
        text: The exact text scored.
        window: The window asked for (None: the scorer's default).
        scorer_kind: ``ModelInfo.kind``, so local and remote scores stay apart.
    """
    return {
        "kind": "token_nll",
        "model": fingerprint,
        "scorer": scorer_kind,
        "text": text_digest(text),
        "window": window,
        "version": SCORES_VERSION,
    }


def cached_token_scores(
    cache: OutputCache, fingerprint: str, text: str, window: int | None, *, scorer_kind: str = "lm"
) -> TokenScores | None:
    """The cached token scores of ``text``, or None; needs only the model's fingerprint, not the model.

    The CLI uses it to answer a rerun without loading the model at all.
    """
    value = cache.get(token_scores_key(fingerprint, text, window, scorer_kind=scorer_kind))
    if value is None:
        return None
    record_cached(value)
    return _scores_from_value(value)


def _scores_from_value(value: dict[str, Any]) -> TokenScores:
    return TokenScores(starts=value["starts"], ends=value["ends"], nll=value["nll"], window=int(value["window"]))


def document_token_scores(
    doc_text: str,
    scorer: Scorer,
    *,
    window: int | None = None,
    cache: OutputCache | None = None,
    progress: Progress | None = None,
) -> tuple[TokenScores, bool]:
    """Per-token NLLs of a whole text, from the cache when this model has scored it before.

    With a cache and a resumable scorer (the local one), a pass stores its finished windows as
    it goes (a checkpoint entry, :func:`checkpoint_key`: after the first batch of windows, then
    at most every :data:`CHECKPOINT_SECONDS`, and on a cancel or an error). A pass killed or
    cancelled midway leaves that checkpoint; the next pass over the same text, model and
    window scores only the windows after it (its progress starts at the tokens kept) and
    ends with the same values. The checkpoint is deleted once the whole result is stored.

    Args:
        doc_text: The exact text to score (usually ``Document.text``).
        scorer: A :class:`~backend.models.types.Scorer`.
        window: Context window in tokens; None lets the scorer choose (its default).
        cache: Where to look up and store the result; None computes without caching.
        progress: Counts tokens, passed to the scorer; one with a cancel token stops the work
            by raising :class:`~backend.errors.Cancelled`.

    Returns:
        The scores, and whether they came from the cache.
    """
    progress = progress or Progress()
    progress.set_unit("tokens")
    progress.check()  # honours a cancel before anything starts
    if cache is None:
        started = time.perf_counter()
        scores = scorer.token_nll(doc_text, window=window, progress=progress)
        record_computed(time.perf_counter() - started)
        return scores, False

    def compute() -> dict[str, Any]:
        ts = scorer.token_nll(doc_text, window=window, progress=progress)
        return {
            "starts": np.asarray(ts.starts, dtype=np.int64),
            "ends": np.asarray(ts.ends, dtype=np.int64),
            "nll": np.asarray(ts.nll, dtype=np.float64),
            "window": int(ts.window),
        }

    info = scorer.info
    key = token_scores_key(info.fingerprint, doc_text, window, scorer_kind=info.kind)
    if getattr(scorer, "resumable", False):
        compute = _checkpointed(doc_text, scorer, window, cache, progress)
    value, hit = cache.get_or_compute(key, timed(compute), progress=progress)
    scores = _scores_from_value(value)
    if hit:
        record_cached(value)
        progress(scored_tokens(scores), scored_tokens(scores))
    return scores, hit


CHECKPOINT_SECONDS = 2.0  # after its first batch, a scoring pass stores its finished windows at most this often


def checkpoint_key(fingerprint: str, text: str, window: int | None, *, scorer_kind: str = "lm") -> dict[str, Any]:
    """The cache key of the finished windows of an unfinished scoring pass (see :func:`document_token_scores`)."""
    return {**token_scores_key(fingerprint, text, window, scorer_kind=scorer_kind), "kind": "token_nll_partial"}


def scoring_checkpoint(
    cache: OutputCache, fingerprint: str, text: str, window: int | None, *, scorer_kind: str = "lm"
) -> PartialTokenScores | None:
    """What an interrupted scoring pass of ``text`` left (its leading scored tokens), or None.

    Needs only the model's fingerprint: a page asks it to offer "resume" without loading the model.
    ``partial.scored - 1`` of ``len(partial.scores) - 1`` tokens are scored (the first has no context).
    """
    value = cache.get(checkpoint_key(fingerprint, text, window, scorer_kind=scorer_kind))
    if value is None:
        return None
    try:
        return PartialTokenScores(_scores_from_value(value), int(value["scored"]), "")
    except (KeyError, TypeError, ValueError):
        return None


class _Checkpoint(Progress):
    """The progress a resumable scorer gets: its parent's, and it stores the partial results now and then."""

    def __init__(self, cache: OutputCache, key: dict[str, Any], progress: Progress, earlier: float = 0.0) -> None:
        super().__init__()
        self.earlier = earlier  # model seconds of the passes this one resumes
        self.started = time.perf_counter()
        self._follow(progress)  # counts, unit, queued state and cancel go to ``progress`` unchanged
        self.cache, self.key = cache, key
        self.latest: PartialTokenScores | None = None
        self.saved = 0  # tokens in the stored checkpoint
        self.at: float | None = None  # when it was stored (None: not yet, so the first batch is kept at once)
        self.cost = 0.0  # seconds the last store took: a long text's checkpoints come less often (≤ 5 % of the time)

    def publish(self, value: Any) -> None:
        """Pass ``value`` on; keep it (and store it when due) if it is an unfinished scoring pass."""
        super().publish(value)
        if isinstance(value, PartialTokenScores) and not value.complete:
            self.latest = value
            if self.at is None or time.monotonic() - self.at >= max(CHECKPOINT_SECONDS, 20 * self.cost):
                self.save()

    def save(self) -> None:
        """Store the latest partial result (atomically, like every cache entry) unless stored already."""
        p = self.latest
        if p is None or p.scored <= self.saved:
            return
        ts = p.scores
        t0 = time.monotonic()
        self.cache.put(self.key, {
            "starts": np.asarray(ts.starts, dtype=np.int64),
            "ends": np.asarray(ts.ends, dtype=np.int64),
            "nll": np.asarray(ts.nll, dtype=np.float64),
            "window": int(ts.window),
            "scored": int(p.scored),
            SECONDS_FIELD: self.earlier + time.perf_counter() - self.started,
        })
        self.saved = p.scored
        self.at = time.monotonic()
        self.cost = self.at - t0


def _checkpointed(
    doc_text: str, scorer: Scorer, window: int | None, cache: OutputCache, progress: Progress
) -> Callable[[], dict[str, Any]]:
    """``compute`` for :func:`document_token_scores` that checkpoints its finished windows and resumes from them."""
    info = scorer.info

    def compute() -> dict[str, Any]:
        ckey = checkpoint_key(info.fingerprint, doc_text, window, scorer_kind=info.kind)
        resume = scoring_checkpoint(cache, info.fingerprint, doc_text, window, scorer_kind=info.kind)
        if resume is not None:
            log.info(
                "resumed: %d of %d tokens were already scored", max(0, resume.scored - 1), scored_tokens(resume.scores)
            )
        earlier = 0.0
        if resume is not None:  # the passes before this one took time too
            earlier = stored_seconds(cache.get(ckey) or {}) or 0.0
        sink = _Checkpoint(cache, ckey, progress, earlier)
        try:
            ts = scorer.token_nll(doc_text, window=window, progress=sink, resume=resume)  # type: ignore[call-arg]
        except BaseException:
            sink.save()  # a cancel or an error keeps what was scored; a kill keeps the last checkpoint
            raise
        cache.discard(ckey)
        return {
            "starts": np.asarray(ts.starts, dtype=np.int64),
            "ends": np.asarray(ts.ends, dtype=np.int64),
            "nll": np.asarray(ts.nll, dtype=np.float64),
            "window": int(ts.window),
            SECONDS_FIELD: earlier,  # timed() adds this pass's seconds
        }

    return compute


def scored_tokens(scores: TokenScores) -> int:
    """How many tokens a scoring pass scored (every token but the first): the unit of its progress."""
    return max(0, len(scores) - 1)


def score_sentences(doc: Document, scores: TokenScores) -> list[SentenceScore]:
    """Each sentence's mean NLL and perplexity over the scored tokens whose first character it holds."""
    return _sentence_list(doc, [(s.start, s.end) for s in doc.sentences], scores)


def _sentence_list(doc: Document, spans: list[tuple[int, int]], scores: TokenScores) -> list[SentenceScore]:
    """One :class:`SentenceScore` per span (the document's leading sentences), numbered from 0."""
    out = []
    for i, ((start, end), (nll_mean, n)) in enumerate(zip(spans, scores.span_stats(spans), strict=True)):
        ppl = math.exp(nll_mean) if n and nll_mean < 700 else (math.inf if n else math.nan)
        out.append(SentenceScore(i, start, end, doc.text[start:end], n, nll_mean, ppl))
    return out


def partial_sentence_scores(doc: Document, partial: PartialTokenScores) -> list[SentenceScore]:
    """The leading sentences of ``doc`` whose every token is scored in ``partial``: never one half-scored.

    A sentence counts once every token starting inside it is among the ``partial.scored``
    leading tokens, i.e. it ends at or before the first unscored token's start. Their values
    equal those :func:`score_sentences` gives once the pass ends (the tokens' NLLs are final),
    so the list is a prefix of the final one.
    """
    ts, k = partial.scores, partial.scored
    if k <= 0:
        return []
    limit = int(ts.starts[k]) if k < len(ts) else len(doc.text)
    spans = [(s.start, s.end) for s in doc.sentences]
    done = 0
    while done < len(spans) and spans[done][1] <= limit:
        done += 1
    return _sentence_list(doc, spans[:done], ts)


def sentence_scores(
    doc: Document,
    scorer: Scorer,
    *,
    window: int | None = None,
    cache: OutputCache | None = None,
    progress: Progress | None = None,
) -> list[SentenceScore]:
    """Perplexity of every sentence of ``doc``, from one (cached) scoring pass over the whole text.

    Args:
        doc: The document; its ``sentences`` are the units.
        scorer: A :class:`~backend.models.types.Scorer`.
        window: Context window in tokens; None lets the scorer choose.
        cache: Where to look up and store the token scores; None computes without caching.
        progress: ``progress(done, total)``, see :func:`document_token_scores`.
    """
    scores, _hit = document_token_scores(doc.text, scorer, window=window, cache=cache, progress=progress)
    return score_sentences(doc, scores)


def pair_key(fingerprint: str, scorer_kind: str, context: str, continuation: str) -> dict[str, Any]:
    """The cache key of one pair's conditional NLL under a model (its fingerprint and ``ModelInfo.kind``)."""
    return {
        "kind": "conditional_nll",
        "model": fingerprint,
        "scorer": scorer_kind,
        "context": text_digest(context),
        "continuation": text_digest(continuation),
        "version": SCORES_VERSION,
    }


def _pair_key(info: ModelInfo, context: str, continuation: str) -> dict[str, Any]:
    return pair_key(info.fingerprint, info.kind, context, continuation)


def missing_pairs(
    pairs: Sequence[tuple[str, str]], fingerprint: str, scorer_kind: str, cache: OutputCache
) -> list[tuple[str, str]]:
    """The distinct pairs of ``pairs`` with no entry in ``cache`` (first-seen order): what scoring them still costs.

    A cheap lookup (:meth:`~backend.models.cache.OutputCache.contains`: no entry is read), so a
    page can count the work left on every run; :func:`conditional_scores` scores exactly these
    (an entry evicted or corrupted meanwhile aside).
    """
    digests: dict[str, str] = {}

    def digest(text: str) -> str:
        hit = digests.get(text)
        if hit is None:
            hit = digests[text] = text_digest(text)
        return hit

    out: dict[tuple[str, str], None] = {}
    for d, q in pairs:
        pair = (str(d), str(q))
        if pair in out:
            continue
        key = {"kind": "conditional_nll", "model": fingerprint, "scorer": scorer_kind, "context": digest(pair[0]),
               "continuation": digest(pair[1]), "version": SCORES_VERSION}
        if not cache.contains(key):
            out[pair] = None
    return list(out)


def pair_work(pairs: Sequence[tuple[str, str]]) -> list[float]:
    """What each distinct pair weighs for the model, in characters read: its continuation, and its share of its context.

    Pairs sharing a context run it once (:meth:`~backend.models.scorer.LocalScorer.conditional_nll`),
    so each carries ``len(context) / pairs sharing it``. The rate store's ``pairs`` work and the
    scoring job's ETA are measured in this weight, so a long pair late in a run does not fool them.
    """
    sharing: dict[str, int] = {}
    for d, _ in pairs:
        sharing[d] = sharing.get(d, 0) + 1
    return [len(q) + max(len(d), 1) / sharing[d] for d, q in pairs]


GROUP_PAIRS = 64  # pairs per scorer call (whole contexts) when results are cached as they come


def _context_groups(pairs: list[tuple[str, str]], size: int) -> list[list[tuple[str, str]]]:
    """``pairs`` grouped by context (first-seen order), contexts packed into groups of about ``size`` pairs."""
    by_context: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        by_context.setdefault(pair[0], []).append(pair)
    groups: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    for same in by_context.values():
        if current and len(current) + len(same) > size:
            groups.append(current)
            current = []
        current.extend(same)
    if current:
        groups.append(current)
    return groups


def conditional_scores(
    pairs: Sequence[tuple[str, str]],
    scorer: Scorer,
    *,
    cache: OutputCache | None = None,
    progress: Progress | None = None,
) -> list[float]:
    """Mean NLL of each continuation q given its context d, for ``(d, q)`` pairs.

    Each pair's value is cached on its own; only the pairs missing from the cache (each
    distinct pair once) go to the scorer, in groups of whole contexts. ``progress`` counts
    those pairs (``progress(pairs scored, pairs to score)``, unit ``pairs``); a fully
    cached call reports nothing.

    Args:
        pairs: ``(context, continuation)`` pairs.
        scorer: A :class:`~backend.models.types.Scorer`.
        cache: Where to look up and store the values; None computes without caching.
        progress: Counts pairs, passed to the scorer.

    Returns:
        One value per pair, in order.
    """
    pairs = [(str(d), str(q)) for d, q in pairs]
    progress = progress or Progress()
    progress.set_unit("pairs")
    progress.check()  # honours a cancel before anything starts
    out: list[float | None] = [None] * len(pairs)
    keys = [_pair_key(scorer.info, d, q) for d, q in pairs] if cache is not None else []
    missing: dict[tuple[str, str], list[int]] = {}
    for i, pair in enumerate(pairs):
        hit = cache.get(keys[i]) if cache is not None else None
        if hit is not None:
            record_cached(hit)
            out[i] = float(hit["nll"])
        else:
            missing.setdefault(pair, []).append(i)
    if missing:
        todo = list(missing)
        # Scored in groups of whole contexts (the scorer shares each context's keys and values
        # across its continuations), each group cached as soon as it is done: a cancel or an
        # error late in a long run keeps everything scored before it.
        groups = _context_groups(todo, GROUP_PAIRS) if cache is not None else [todo]
        weight = dict(zip(todo, pair_work(todo), strict=True))
        total_work = sum(weight.values())
        rates = rate_store()
        measured = rates.of_model(scorer.info, "pairs")
        progress.expect(measured.work_per_s if measured is not None else None)
        done, done_work = 0, 0.0
        progress(0, len(todo), work=(0.0, total_work))
        for group in groups:
            group_work = sum(weight[pair] for pair in group)
            part = progress.slice(done, len(group), len(todo), work=(done_work, group_work, total_work))
            started = time.perf_counter()
            values = scorer.conditional_nll(group, progress=part)
            if len(values) != len(group):
                raise RuntimeError(f"scorer returned {len(values)} values for {len(group)} pairs")
            seconds = time.perf_counter() - started
            record_computed(seconds, len(group))
            # A local scorer records its speed as it goes (the lock held, so a wait is not counted):
            # the ETA steadies on it, and the page's next plan knows it.
            measured = rates.of_model(scorer.info, "pairs") or measured
            progress.expect(measured.work_per_s if measured is not None else None)
            each = seconds / len(group)  # a group is scored at once: each pair gets its share
            for pair, value in zip(group, values, strict=True):
                indices = missing[pair]
                for i in indices:
                    out[i] = float(value)
                if cache is not None:
                    cache.put(keys[indices[0]], {"nll": np.array(float(value), dtype=np.float64), SECONDS_FIELD: each})
            done += len(group)
            done_work += group_work
            progress(done, len(todo), work=(done_work, total_work))
    return [float(v) for v in out]  # type: ignore[arg-type]


def cached_conditional_scores(
    pairs: Sequence[tuple[str, str]], info: ModelInfo, cache: OutputCache
) -> list[float | None]:
    """The cached values of ``(context, continuation)`` pairs under the model ``info`` (None: not cached).

    A plain lookup with no model: what an anytime scoring job reads back before it scores the
    rest, and what a page reads of a cancelled job's sampled pairs.
    """
    out: list[float | None] = []
    for d, q in pairs:
        hit = cache.get(_pair_key(info, str(d), str(q)))
        if hit is not None:
            record_cached(hit)
        out.append(None if hit is None else float(hit["nll"]))
    return out
