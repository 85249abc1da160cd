"""Model-free questions: a passage's words and its neighbourhood's, asked about passages spread over the document.

No language model and no embedder runs; a set takes milliseconds. How a question is made, exactly:

1. **Passages.** The candidate excerpts are :func:`~backend.retrieval.generation.passage_spans`:
   one sentence of 40–500 characters, or a short sentence with the next — the bundled model's
   passages too. The excerpt *is* the passage, ``Reference(doc.text[start:end], start, end)``,
   so ``text[start:end] == content`` holds by construction. A passage needs at least
   :data:`MIN_TERMS` distinct content terms.
2. **Terms.** Words of three or more characters that are not English stop words (lower-cased;
   words with a digit, such as ``v2.1.3`` or ``1889``, count from two characters); a run of CJK
   characters gives its character bigrams. Each term weighs its inverse document frequency over
   the document's sentences, ``idf = ln((1 + S) / (1 + df)) + 1``.
3. **Spread, weighted to dense passages.** The document is cut into ``n`` stretches of equal
   length; each stretch gives one passage, drawn (``random.Random(seed)``) with probability
   proportional to its density squared — the sum of its distinct terms' idf over its number of
   words, so a sentence full of rare terms outweighs boilerplate. When a passage is dropped,
   further rounds draw again from the stretches, up to ``3n + 2`` attempts.
4. **The question.** The passage's three most distinctive terms (highest tf × idf within the
   passage; ties: the longer term, then the first to appear), in the order they appear and as
   written there, and — style ``context``, the default — the :data:`CONTEXT_TERMS` most
   distinctive term of its neighbourhood that the passage does not contain (tf × idf over
   :data:`CONTEXT_CHARS` characters on each side, :func:`context_terms`) fill one template:
   ``What does the text say about A, B and C in connection with D?``. Style ``keywords`` (the
   method before issue 37) leaves the neighbourhood out: ``What does the text say about A, B and C?``.
5. **Filters, without embeddings.** Loading the embedder alone takes longer than this whole
   method, so the report's embedding filters are replaced, and the result says so
   (``filter_note``): relevance holds by construction (the question's terms are the excerpt's
   words); a question whose term set equals an earlier kept one's is a duplicate question;
   an excerpt whose terms overlap an earlier kept excerpt's by :data:`EXCERPT_OVERLAP` or more
   (Jaccard) — or whose text is the same once whitespace and case are ignored — is a
   duplicate excerpt.

**Why the neighbourhood.** A reader's question names what a passage is about the way the text
around it does ("How old was *Tobias Abernathy* when he died?" for the excerpt "had died in
his sleep at the age of 91"), so a small chunk holding the excerpt but not its subject is
harder to retrieve — that is why recall grows with chunk size under real questions. Questions
made of the passage's own words alone find the passage's words wherever they are: on a
held-back benchmark of a strong chat model's 472 questions over five corpora, keyword
questions ranked ten configurations by IoU as the model's did (Spearman ρ 0.99) but by recall
not at all (ρ −0.36). With one term of the neighbourhood, on the bundled samples' 96
hand-written questions (``bench/bench_questions.py``, 72 questions per corpus), the order of
ten configurations agrees with the hand-written one at ρ +0.87 to +0.89 on recall over three
seeds (keywords: +0.37 to +0.64; the bundled SmolLM2's questions: +0.44) and +0.96 to +1.00 on
IoU; against the 72 held-out questions alone, +0.73 to +0.82 on recall. Two hand-written sets
of those samples agree with each other at +0.53 on recall: recall orders on documents this
small are loose whoever writes the questions, and the intervals say so.
These questions remain weaker than a chat model's: keywords in a template, one excerpt each.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from backend.errors import ParameterError
from backend.progress import Progress
from backend.retrieval.generation import (
    Candidate,
    GeneratedQuestions,
    Rejection,
    default_max_attempts,
    passage_spans,
    rate_key,
    record_rate,
)
from backend.retrieval.questions import Question, Reference, corpus_id_for
from backend.text.document import Document

__all__ = [
    "CONTEXT_CHARS",
    "CONTEXT_TERMS",
    "EXCERPT_OVERLAP",
    "MIN_TERMS",
    "MODEL_NAME",
    "STYLES",
    "context_terms",
    "keyword_question",
    "model_free_questions",
    "passage_terms",
]

MIN_TERMS = 3
QUESTION_TERMS = 3
CONTEXT_TERMS = 1
CONTEXT_CHARS = 600
STYLES = ("context", "keywords")
EXCERPT_OVERLAP = 0.8
MODEL_NAME = "none (keyword template)"
KEYWORDS_NOTICE = (
    "Model-free keyword questions (the earlier style): each names three words of a passage Chunk Lab picked "
    "(\"What does the text say about A, B and C?\"). On a strong model's benchmark they ranked chunkings by IoU "
    "alike (ρ 0.99) but by recall not at all (ρ −0.36): do not read a recall order from them."
)
FILTER_NOTE = (
    "no embedder (loading one takes longer than this method): relevance holds by construction, "
    f"duplicate questions are equal term sets, duplicate excerpts share ≥ {EXCERPT_OVERLAP:.0%} of their terms"
)
NOTICE = (
    "Model-free questions: each names three words of a passage Chunk Lab picked and one word of the text "
    "around it (\"What does the text say about A, B and C in connection with D?\"). Measured on the bundled "
    "samples' 96 hand-written questions, 72 such questions per document order ten chunkings like the hand-written ones on IoU "
    "(Spearman ρ about +0.98) and a little less closely on recall (+0.87 to +0.89 by seed); keyword questions "
    "without the neighbourhood did not rank recall at all on a strong model's benchmark (ρ −0.36). They take "
    "about a second, offline; ask for many, and check a verdict on recall against a trusted set "
    "(questions compare)."
)

_WORD = re.compile(r"\w+(?:[.'\-]\w+)*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_STOP = frozenset((
    "about", "above", "after", "again", "against", "all", "also", "although", "among", "and", "any", "are", "aren't",
    "around", "because", "been", "before", "being", "below", "between", "both", "but", "can", "cannot", "could",
    "couldn't", "did", "didn't", "does", "doesn't", "doing", "don't", "down", "during", "each", "either", "else",
    "even", "ever", "every", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't",
    "having", "her", "here", "hers", "herself", "him", "himself", "his", "how", "however", "into", "isn't", "its",
    "itself", "just", "least", "less", "let", "like", "made", "make", "many", "may", "might", "more", "most", "much",
    "must", "myself", "neither", "never", "nor", "not", "now", "off", "often", "once", "one", "only", "onto",
    "other", "others", "our", "ours", "ourselves", "out", "over", "own", "per", "quite", "rather", "said", "same",
    "say", "says", "see", "she", "should", "shouldn't", "since", "some", "still", "such", "than", "that", "the",
    "their", "theirs", "them", "themselves", "then", "there", "therefore", "these", "they", "this", "those",
    "though", "through", "thus", "too", "two", "under", "until", "upon", "use", "used", "uses", "using", "very",
    "was", "wasn't", "way", "well", "were", "weren't", "what", "when", "where", "whether", "which", "while", "who",
    "whom", "whose", "why", "will", "with", "within", "without", "won't", "would", "wouldn't", "yes", "yet", "you",
    "your", "yours", "yourself", "yourselves", "he's", "she's", "it's", "i'm", "i've", "i'll", "i'd", "we're",
    "we've", "they're", "they've", "you're", "you've", "that's", "there's", "what's", "let's",
))


def _terms(text: str) -> list[tuple[str, str]]:
    """``(term, surface)`` of every content term of ``text``, in order (see the module docstring)."""
    out = []
    for m in _WORD.finditer(text):
        word = m.group()
        if _CJK.search(word):
            run = "".join(ch for ch in word if _CJK.match(ch))
            out.extend((run[i : i + 2], run[i : i + 2]) for i in range(len(run) - 1))
            continue
        term = word.lower()
        has_digit = any(ch.isdigit() for ch in term)
        if term in _STOP or len(term) < (2 if has_digit else 3):
            continue
        out.append((term, word))
    return out


def passage_terms(text: str) -> list[str]:
    """The content terms of ``text``, lower-cased, in order of appearance (duplicates kept)."""
    return [t for t, _ in _terms(text)]


def _listed(surfaces: Sequence[str]) -> str:
    return surfaces[0] if len(surfaces) == 1 else ", ".join(surfaces[:-1]) + " and " + surfaces[-1]


def keyword_question(surfaces: Sequence[str], context: Sequence[str] = ()) -> str:
    """The template's question for terms as written.

    ``What does the text say about A, B and C?``, or with ``context`` terms
    ``What does the text say about A, B and C in connection with D, E and F?``.
    """
    if not surfaces:
        raise ParameterError("a keyword question needs at least one term")
    around = f" in connection with {_listed(context)}" if context else ""
    return f"What does the text say about {_listed(surfaces)}{around}?"


def context_terms(text: str, start: int, end: int, idf: dict[str, float]) -> list[tuple[str, str]]:
    """The :data:`CONTEXT_TERMS` most distinctive terms around ``text[start:end]`` that it does not contain.

    ``(term, surface)`` in the order they first appear, read from :data:`CONTEXT_CHARS` characters
    on each side of the passage; ranked by tf × idf within that neighbourhood (ties: the longer
    term, then the first to appear), as the passage's own terms are.
    """
    own = {t for t, _ in _terms(text[start:end])}
    near = _terms(text[max(0, start - CONTEXT_CHARS) : start]) + _terms(text[end : end + CONTEXT_CHARS])
    counts = Counter(t for t, _ in near if t not in own)
    first: dict[str, tuple[int, str]] = {}
    for i, (t, surface) in enumerate(near):
        first.setdefault(t, (i, surface))
    best = sorted(counts, key=lambda t: (-counts[t] * idf.get(t, 1.0), -len(t), first[t][0]))[:CONTEXT_TERMS]
    return [(t, first[t][1]) for t in sorted(best, key=lambda t: first[t][0])]


def _idf(doc: Document) -> tuple[dict[str, float], int]:
    """Each term's idf over the document's sentences, and the sentence count."""
    df: Counter[str] = Counter()
    sentences = doc.sentences
    for s in sentences:
        df.update(set(passage_terms(doc.text[s.start : s.end])))
    total = max(1, len(sentences))
    return {t: math.log((1 + total) / (1 + c)) + 1.0 for t, c in df.items()}, total


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def model_free_questions(
    doc: Document,
    *,
    n: int = 10,
    corpus_id: str | None = None,
    max_attempts: int | None = None,
    seed: int | None = 0,
    style: str = "context",
    progress: Progress | None = None,
) -> GeneratedQuestions:
    """Up to ``n`` keyword questions with exact one-passage excerpts over ``doc`` (see the module docstring).

    Args:
        doc: The document; excerpts index ``doc.text``.
        n: Questions wanted.
        corpus_id: The corpus id to give them (default: from the document's file name).
        max_attempts: Passages tried at most (default ``3n + 2``).
        seed: Seeds the draws: the same document, ``n`` and seed give the same questions.
        style: ``context`` (the default: the passage's words and its neighbourhood's, see the
            module docstring) or ``keywords`` (the passage's words alone, the method before
            Chunk Lab measured that it does not rank recall; kept for comparison).
        progress: ``progress(attempt, max_attempts)`` (unit ``attempts``); may raise ``Cancelled``.

    Returns:
        A :class:`~backend.retrieval.generation.GeneratedQuestions` with ``method="model-free"``,
        ``weak=True`` and its ``notice`` and ``filter_note``; every candidate's excerpt similarity
        is NaN (no embedder ran) and its question similarity is the Jaccard overlap of term sets.

    Raises:
        ParameterError: ``n`` or ``max_attempts`` below 1, or an unknown ``style``.
    """
    if style not in STYLES:
        raise ParameterError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    if n < 1:
        raise ParameterError(f"n ({n}) must be at least 1")
    allowed = max_attempts if max_attempts is not None else default_max_attempts(n)
    if allowed < 1:
        raise ParameterError(f"max_attempts ({allowed}) must be at least 1")
    t0 = time.perf_counter()
    cid = corpus_id or corpus_id_for(doc)
    rng = random.Random(seed)
    idf, _ = _idf(doc)
    text = doc.text
    # Per passage: its span, its terms with weights, and its density.
    pool: list[tuple[tuple[int, int], list[tuple[str, str]], float]] = []
    for start, end in passage_spans(doc):
        terms = _terms(text[start:end])
        distinct = list(dict.fromkeys(t for t, _ in terms))
        if len(distinct) < MIN_TERMS:
            continue
        words = max(1, len(_WORD.findall(text[start:end])))
        pool.append(((start, end), terms, sum(idf.get(t, 1.0) for t in distinct) / words))
    stretch_of = [min(n - 1, span[0] * n // max(1, len(text))) for span, _, _ in pool]
    left = [[i for i, s in enumerate(stretch_of) if s == k] for k in range(n)]
    setup_seconds = time.perf_counter() - t0

    candidates: list[Candidate] = []
    kept: list[bool] = []
    reasons: list[str | None] = []
    term_sets: list[frozenset[str]] = []
    excerpt_terms: list[frozenset[str]] = []
    excerpt_texts: list[str] = []
    rejected: list[Rejection] = []
    if progress is not None:
        progress.set_unit("attempts")
        progress(0, allowed)
    attempt = 0
    while attempt < allowed and sum(kept) < n and any(left):
        for k in range(n):
            if attempt >= allowed or sum(kept) >= n:
                break
            if not left[k]:
                continue
            weights = [pool[i][2] ** 2 for i in left[k]]
            pick = rng.choices(left[k], weights=weights)[0]
            left[k].remove(pick)
            attempt += 1
            (start, end), terms, _ = pool[pick]
            counts = Counter(t for t, _ in terms)
            order = {t: j for j, (t, _) in reversed(list(enumerate(terms)))}  # first appearance
            surface = {}
            for t, s in terms:
                surface.setdefault(t, s)
            best = sorted(counts, key=lambda t: (-counts[t] * idf.get(t, 1.0), -len(t), order[t]))[:QUESTION_TERMS]
            chosen = sorted(best, key=order.__getitem__)
            around = context_terms(text, start, end, idf) if style == "context" else []
            asked = keyword_question([surface[t] for t in chosen], [s for _, s in around])
            question = Question(asked, (Reference(text[start:end], start, end),), cid)
            mine, words = frozenset(chosen) | frozenset(t for t, _ in around), frozenset(counts)
            normalized = " ".join(text[start:end].split()).lower()
            why = None
            for j in (j for j, ok in enumerate(kept) if ok):
                overlap = _jaccard(excerpt_terms[j], words)
                if excerpt_texts[j] == normalized or overlap >= EXCERPT_OVERLAP:
                    why = f"near-duplicate excerpt of candidate {j + 1} (terms overlap {overlap:.2f})"
                    break
                if term_sets[j] == mine:
                    why = f"near-duplicate of candidate {j + 1} (the same terms)"
                    break
            candidates.append(Candidate(question, (math.nan,), attempt))
            kept.append(why is None)
            reasons.append(why)
            term_sets.append(mine)
            excerpt_terms.append(words)
            excerpt_texts.append(normalized)
            if progress is not None:
                progress.publish((sum(kept), attempt))
                progress(attempt, allowed)
    if not pool:
        rejected.append(Rejection(1, f"no passage of 40–500 characters with {MIN_TERMS} content terms", ""))
    similarity = np.array([[_jaccard(a, b) for b in term_sets] for a in term_sets], dtype=np.float32)
    similarity = similarity.reshape(len(term_sets), len(term_sets))
    seconds = time.perf_counter() - t0
    record_rate(rate_key("model-free"), setup_seconds, seconds - setup_seconds, len(candidates), sum(kept))
    if progress is not None:
        progress(allowed, allowed)
    return GeneratedQuestions(
        questions=tuple(c.question for c, ok in zip(candidates, kept) if ok),
        candidates=tuple(candidates),
        kept=tuple(kept),
        drop_reasons=tuple(reasons),
        question_similarity=similarity,
        rejected=tuple(rejected),
        duplicate_threshold=1.0,
        excerpt_threshold=-1.0,
        corpus_id=cid,
        corpus_text=text,
        model=MODEL_NAME,
        embedder="none",
        weak=True,
        notice=NOTICE if style == "context" else KEYWORDS_NOTICE,
        seconds=seconds,
        method="model-free" if style == "context" else "model-free keywords",
        excerpt_pair_similarity=None,
        excerpt_duplicate_threshold=EXCERPT_OVERLAP,
        filter_note=FILTER_NOTE,
    )
