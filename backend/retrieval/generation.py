"""Generating a question set from a document: the Chroma report's LLM method, or a weaker local fallback.

With an LLM (``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL``, through :func:`backend.models.chat.chat`),
each attempt follows the report's *Dataset Generation*: the model sees a random window of the
document (4,000 characters), the questions already asked (up to 20, sampled) and the report's
prompt, oath included, and answers with a question and its excerpts in JSON. Its reply is
parsed leniently (code fences, Python-style quotes), and the question is kept only when every
excerpt is found in the document — verbatim, or differing only in whitespace, with exact
offsets (:class:`~backend.retrieval.metrics.ExcerptFinder`) — and there are at most 5.

Without one, a local fallback runs on the bundled SmolLM2 (:func:`backend.models.lm.load_lm`):
a model that small cannot follow that prompt, so Chunk Lab picks a passage (one or two
sentences of the document) and the model only writes a question that the passage answers.
The result says so (``weak=True`` and a ``notice``): such questions are simpler and weaker.

Every kept reference is ``Reference(doc.text[start:end], start, end)``: its content is cut
from the document at the offsets found, so ``text[start:end] == content`` holds exactly even
when the model's copy differed in whitespace (the finder maps the whitespace-free match back to
the first and last non-whitespace characters it covers).

Then the report's *Prefiltering*, with the embedder (bundled MiniLM by default): a question
is dropped when its cosine similarity to any of its excerpts is below the excerpt threshold
(default 0.40, the relevance filter), then, in order, when it is more similar than the
duplicate threshold (default 0.70) to an earlier question still kept (the reference's greedy
de-duplication), then when one of its excerpts is nearly identical (cosine above 0.90) to an
excerpt of an earlier question still kept (the same passage asked about twice). Generation
goes on until ``n`` questions survive or the attempts run out. All similarities are kept in
the result, for the report's histograms, and :meth:`GeneratedQuestions.refilter` applies other
thresholds without asking the model again.

Time: every run records its load seconds, seconds per attempt and attempts per kept question
on this machine (:func:`record_rate`, a small JSON file in the data directory), and
:func:`estimate_seconds` predicts the next run from them — nothing is guessed before the first
run of a method and model. While running, progress counts attempts against the attempts the
measured keep rate predicts, so its ETA is the measured rate too.

A third, model-free method (:mod:`backend.retrieval.modelfree`) writes keyword questions for
passages in a second, offline; it returns the same :class:`GeneratedQuestions`.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from backend.config import data_dir
from backend.errors import ModelError, ParameterError
from backend.models.chat import chat, remote_llm_configured, resolve_model
from backend.models.embeddings import TextEmbedder, load_text_embedder
from backend.models.lm import load_lm
from backend.progress import Progress
from backend.retrieval.metrics import ExcerptFinder
from backend.retrieval.questions import Question, QuestionSet, Reference, corpus_id_for
from backend.text.document import Document

__all__ = [
    "Candidate",
    "Rejection",
    "GeneratedQuestions",
    "generate_questions",
    "prefilter",
    "question_messages",
    "parse_reply",
    "SYSTEM_PROMPT",
    "PLEDGE",
    "DEFAULT_DUPLICATE_THRESHOLD",
    "DEFAULT_EXCERPT_THRESHOLD",
    "DEFAULT_EXCERPT_DUPLICATE_THRESHOLD",
    "MAX_REFERENCES",
    "METHODS",
    "METHOD_TITLES",
    "passage_spans",
    "Rate",
    "measured_rate",
    "record_rate",
    "rate_key",
    "estimate_seconds",
    "expected_attempts",
    "default_max_attempts",
]

DEFAULT_DUPLICATE_THRESHOLD = 0.70
DEFAULT_EXCERPT_THRESHOLD = 0.40
DEFAULT_EXCERPT_DUPLICATE_THRESHOLD = 0.90  # "nearly identical": the same passage, not merely the same topic
MAX_REFERENCES = 5


def default_max_attempts(n: int) -> int:
    """How many times generation asks the model for ``n`` questions when not told (``3n + 2``)."""
    return 3 * n + 2


METHODS = ("chat", "bundled", "model-free")
METHOD_TITLES = {
    "chat": "chat model (the report's method)",
    "bundled": "bundled small model (weaker)",
    "model-free": "model-free questions from a passage and its neighbourhood (seconds, offline)",
}
WINDOW_CHARS = 4000
PREVIOUS_QUESTIONS = 20

PLEDGE = (
    "I will not use the word 'and' in the question unless it is part of a proper noun. "
    "I will also make sure the question is concise."
)

# The prompt of the report's appendix ("Synthetic Dataset Prompt").
SYSTEM_PROMPT = f"""You are an agent that generates questions from provided text. Your job is to generate a question and provide the relevant sections from the text as references.

Instructions:

1. For each provided text, generate a question that can be answered solely by the facts in the text.
2. Extract all significant facts that answer the generated question.
3. Format the response in JSON format with two fields:

- 'question': A question directly related to these facts, ensuring it can only be answered using the references provided.
- 'references': A list of all text sections that answer the generated question. These must be exact copies from the original text and should be whole sentences where possible.

Notes: Make the question more specific. Do not ask a question about multiple topics. Do not ask a question with over 5 references.

Example:

Text: "Experiment A: The temperature control test showed that at higher temperatures, the reaction rate increased significantly, resulting in quicker product formation. However, at extremely high temperatures, the reaction yield decreased due to the degradation of reactants.

Experiment B: The pH sensitivity test revealed that the reaction is highly dependent on acidity, with optimal results at a pH of 7. Deviating from this pH level in either direction led to a substantial drop in yield.

Experiment C: In the enzyme activity assay, it was found that the presence of a specific enzyme accelerated the reaction by a factor of 3. The absence of the enzyme, however, led to a sluggish reaction with an extended completion time.

Experiment D: The light exposure trial demonstrated that UV light stimulated the reaction, making it complete in half the time compared to the absence of light. Conversely, prolonged light exposure led to unwanted side reactions that contaminated the final product."

Response: {{ 'oath': "{PLEDGE}", 'question': 'What experiments were done in this paper?', 'references': ['Experiment A: The temperature control test showed that at higher temperatures, the reaction rate increased significantly, resulting in quicker product formation.', 'Experiment B: The pH sensitivity test revealed that the reaction is highly dependent on acidity, with optimal results at a pH of 7.', 'Experiment C: In the enzyme activity assay, it was found that the presence of a specific enzyme accelerated the reaction by a factor of 3.', 'Experiment D: The light exposure trial demonstrated that UV light stimulated the reaction, making it complete in half the time compared to the absence of light.'] }}

DO NOT USE THE WORD 'and' IN THE QUESTION UNLESS IT IS PART OF A PROPER NOUN. YOU MUST INCLUDE THE OATH ABOVE IN YOUR RESPONSE. YOU MUST ALSO NOT REPEAT A QUESTION THAT HAS ALREADY BEEN USED."""

_LOCAL_SYSTEM = "Write one short question that the passage answers. Reply with the question only."
# Two worked examples: without them the bundled 135M model paraphrases the passage instead.
_LOCAL_SHOTS = (
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.", "When was the Eiffel Tower completed?"),
    (
        "Honey bees communicate the location of flowers through a waggle dance.",
        "How do honey bees communicate the location of flowers?",
    ),
)
_LOCAL_MAX_NEW_TOKENS = 48
_PASSAGE_CHARS = (40, 500)


@dataclass(frozen=True)
class Candidate:
    """A generated question whose excerpts were all found in the document.

    Attributes:
        question: The question with its excerpt spans.
        excerpt_similarities: Cosine similarity of the question to each excerpt, in order.
        attempt: The attempt (1-based) that produced it.
    """

    question: Question
    excerpt_similarities: tuple[float, ...]
    attempt: int

    @property
    def worst_excerpt_similarity(self) -> float:
        """The lowest question–excerpt similarity (what the excerpt filter compares)."""
        return min(self.excerpt_similarities)


@dataclass(frozen=True)
class Rejection:
    """An attempt that gave no candidate: why, and the start of the model's reply."""

    attempt: int
    reason: str
    reply: str


@dataclass(frozen=True, eq=False)
class GeneratedQuestions:
    """The outcome of :func:`generate_questions`.

    Attributes:
        questions: The questions kept by both filters, in generation order.
        candidates: Every candidate (excerpts found), kept or not.
        kept: For each candidate, whether it was kept.
        drop_reasons: For each candidate, why it was dropped (None when kept).
        question_similarity: Cosine similarities between the candidates' questions (n × n).
        rejected: Attempts that gave no candidate (unparseable reply, excerpt not found…).
        duplicate_threshold: The duplicate threshold applied.
        excerpt_threshold: The excerpt threshold applied.
        corpus_id: The corpus id of the document.
        corpus_text: The document text the excerpts index.
        model: The model that wrote the questions.
        embedder: The embedder the filters used.
        weak: True for the local fallback's questions.
        notice: A sentence for the user about the fallback (None for an LLM).
        seconds: Wall time.
        method: How the questions were made: ``chat``, ``bundled`` or ``model-free`` (:data:`METHODS`), or
            ``model-free keywords`` (the model-free method's earlier style, for comparisons).
        excerpt_pair_similarity: Per pair of candidates, the highest cosine similarity between an
            excerpt of one and an excerpt of the other (n × n); None when no embedder ran.
        excerpt_duplicate_threshold: Drop a candidate whose excerpt is more similar than this to an
            excerpt of an earlier kept one.
        filter_note: How the filters ran when not as the report's (the model-free method's reason).
    """

    questions: tuple[Question, ...]
    candidates: tuple[Candidate, ...]
    kept: tuple[bool, ...]
    drop_reasons: tuple[str | None, ...]
    question_similarity: np.ndarray
    rejected: tuple[Rejection, ...]
    duplicate_threshold: float
    excerpt_threshold: float
    corpus_id: str
    corpus_text: str = field(repr=False)
    model: str
    embedder: str
    weak: bool
    notice: str | None
    seconds: float
    method: str = "chat"
    excerpt_pair_similarity: np.ndarray | None = field(default=None, repr=False)
    excerpt_duplicate_threshold: float = DEFAULT_EXCERPT_DUPLICATE_THRESHOLD
    filter_note: str | None = None

    @property
    def attempts(self) -> int:
        """How many times the model was asked."""
        return len(self.candidates) + len(self.rejected)

    @property
    def duplicate_similarities(self) -> list[float]:
        """The similarity of every pair of candidate questions (the report's pairwise histogram)."""
        n = len(self.candidates)
        return [float(x) for x in self.question_similarity[np.triu_indices(n, k=1)]] if n > 1 else []

    @property
    def excerpt_similarities(self) -> list[float]:
        """Every question–excerpt similarity of every candidate (the report's excerpt histogram)."""
        return [s for c in self.candidates for s in c.excerpt_similarities]

    @property
    def how(self) -> str:
        """One line on how the set was made: method, model, filters and thresholds, time (plain text)."""
        if self.filter_note:
            filters = self.filter_note
        else:
            filters = (
                f"filters by {self.embedder}: relevance ≥ {self.excerpt_threshold:.2f}, duplicate questions > "
                f"{self.duplicate_threshold:.2f}, duplicate excerpts > {self.excerpt_duplicate_threshold:.2f}"
            )
        return (
            f"{len(self.questions)} kept of {self.attempts} attempted · {METHOD_TITLES.get(self.method, self.method)}"
            f" · model {self.model} · {filters} · {self.seconds:.1f} s"
        )

    def refilter(self, duplicate_threshold: float, excerpt_threshold: float) -> GeneratedQuestions:
        """The same candidates filtered with other thresholds (no model call)."""
        if self.filter_note:  # no embedder ran: nothing to refilter on
            return self
        kept, reasons = prefilter(
            self.candidates, self.question_similarity, duplicate_threshold, excerpt_threshold,
            excerpt_pair_similarity=self.excerpt_pair_similarity,
            excerpt_duplicate_threshold=self.excerpt_duplicate_threshold,
        )
        return GeneratedQuestions(
            questions=tuple(c.question for c, k in zip(self.candidates, kept) if k),
            candidates=self.candidates,
            kept=tuple(kept),
            drop_reasons=tuple(reasons),
            question_similarity=self.question_similarity,
            rejected=self.rejected,
            duplicate_threshold=duplicate_threshold,
            excerpt_threshold=excerpt_threshold,
            corpus_id=self.corpus_id,
            corpus_text=self.corpus_text,
            model=self.model,
            embedder=self.embedder,
            weak=self.weak,
            notice=self.notice,
            seconds=self.seconds,
            method=self.method,
            excerpt_pair_similarity=self.excerpt_pair_similarity,
            excerpt_duplicate_threshold=self.excerpt_duplicate_threshold,
            filter_note=self.filter_note,
        )

    def question_set(self) -> QuestionSet:
        """The kept questions as a :class:`QuestionSet` over the document, stating their :attr:`method`."""
        return QuestionSet(self.questions, {self.corpus_id: self.corpus_text}, method=self.method)

    def to_json(self) -> dict[str, Any]:
        """A JSON summary (no similarities matrix): counts, model, weak/notice, rejections."""
        return {
            "kept": len(self.questions),
            "candidates": len(self.candidates),
            "attempts": self.attempts,
            "rejected": [{"attempt": r.attempt, "reason": r.reason} for r in self.rejected],
            "dropped": [
                {"question": c.question.question, "reason": why}
                for c, why in zip(self.candidates, self.drop_reasons)
                if why is not None
            ],
            "method": self.method,
            "duplicate_threshold": self.duplicate_threshold,
            "excerpt_threshold": self.excerpt_threshold,
            "excerpt_duplicate_threshold": self.excerpt_duplicate_threshold,
            "filter_note": self.filter_note,
            "corpus_id": self.corpus_id,
            "model": self.model,
            "embedder": self.embedder,
            "weak": self.weak,
            "notice": self.notice,
            "seconds": round(self.seconds, 3),
        }


def _check_thresholds(duplicate_threshold: float, excerpt_threshold: float) -> None:
    for name, value in (("duplicate_threshold", duplicate_threshold), ("excerpt_threshold", excerpt_threshold)):
        if not -1.0 <= value <= 1.0:
            raise ParameterError(f"{name} ({value}) must be a cosine similarity in -1..1")


def prefilter(
    candidates: Sequence[Candidate],
    question_similarity: np.ndarray,
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    excerpt_threshold: float = DEFAULT_EXCERPT_THRESHOLD,
    *,
    excerpt_pair_similarity: np.ndarray | None = None,
    excerpt_duplicate_threshold: float = DEFAULT_EXCERPT_DUPLICATE_THRESHOLD,
) -> tuple[list[bool], list[str | None]]:
    """The report's prefilters: which candidates survive, and why the others do not.

    A candidate is dropped when its similarity to any excerpt is below ``excerpt_threshold``;
    then, in order, when its similarity to an earlier surviving question is above
    ``duplicate_threshold``; then when an excerpt of it is more similar than
    ``excerpt_duplicate_threshold`` to an excerpt of an earlier survivor
    (``excerpt_pair_similarity[j, i]``; skipped when None).

    Raises:
        ParameterError: a threshold outside -1..1.
    """
    _check_thresholds(duplicate_threshold, excerpt_threshold)
    _check_thresholds(excerpt_duplicate_threshold, excerpt_threshold)
    kept: list[bool] = []
    reasons: list[str | None] = []
    survivors: list[int] = []
    for i, c in enumerate(candidates):
        worst = c.worst_excerpt_similarity
        if worst < excerpt_threshold:
            kept.append(False)
            reasons.append(f"excerpt similarity {worst:.2f} is below {excerpt_threshold:.2f}")
            continue
        twin = next((j for j in survivors if question_similarity[j, i] > duplicate_threshold), None)
        if twin is not None:
            kept.append(False)
            reasons.append(
                f"near-duplicate of candidate {twin + 1} (similarity {question_similarity[twin, i]:.2f} "
                f"above {duplicate_threshold:.2f})"
            )
            continue
        if excerpt_pair_similarity is not None:
            twin = next((j for j in survivors if excerpt_pair_similarity[j, i] > excerpt_duplicate_threshold), None)
            if twin is not None:
                kept.append(False)
                reasons.append(
                    f"near-duplicate excerpt of candidate {twin + 1} (similarity "
                    f"{excerpt_pair_similarity[twin, i]:.2f} above {excerpt_duplicate_threshold:.2f})"
                )
                continue
        survivors.append(i)
        kept.append(True)
        reasons.append(None)
    return kept, reasons


# --- the LLM method --------------------------------------------------------------------------


def question_messages(text: str, previous: Sequence[str] = ()) -> list[dict[str, str]]:
    """The chat messages of one attempt: the report's prompt, then the text and the questions already asked."""
    asked = "\n".join(previous) if previous else "(none yet)"
    user = (
        f"Text: {text}\n\n"
        f"The following questions have already been used. Do not repeat them:\n{asked}\n\n"
        "Do not repeat the above questions. Make your next question unique. Respond with the oath, "
        "references and a question in JSON. DO NOT USE THE WORD 'and' IN THE QUESTION UNLESS IT IS "
        "PART OF A PROPER NOUN."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_FENCE = re.compile(r"```(?:json|JSON|python)?\s*(.*?)```", re.DOTALL)


def parse_reply(reply: str) -> tuple[str, list[str]]:
    """The question and excerpts of a model reply.

    Accepts JSON, JSON in a code fence, or the Python-style dict of the report's example
    (single quotes); ``references`` items may be strings or ``{"content": …}`` objects.

    Raises:
        ValueError: with a short reason (no JSON object, no question, no references…).
    """
    text = reply.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the reply holds no JSON object")
    blob = text[start : end + 1]
    try:
        obj = json.loads(blob)
    except ValueError:
        try:
            obj = ast.literal_eval(blob)  # literals only: safe on untrusted text
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as e:
            raise ValueError("the reply's JSON does not parse") from e
    if not isinstance(obj, dict):
        raise ValueError("the reply's JSON is not an object")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the reply has no 'question'")
    refs = obj.get("references")
    if not isinstance(refs, list) or not refs:
        raise ValueError("the reply has no 'references' list")
    excerpts = []
    for item in refs:
        if isinstance(item, dict):
            item = item.get("content")
        if not isinstance(item, str) or not item.strip():
            raise ValueError("a reference is not a non-empty string")
        excerpts.append(item)
    return question.strip(), excerpts


def _window(text: str, rng: random.Random, size: int) -> str:
    if len(text) <= size:
        return text
    start = rng.randint(0, len(text) - size)
    return text[start : start + size]


# --- the local fallback ----------------------------------------------------------------------


def passage_spans(doc: Document) -> list[tuple[int, int]]:
    """Candidate excerpts, in document order: one sentence of 40–500 characters, or a short one with the next.

    The bundled model's and the model-free method's passages (each an exact ``(start, end)`` of ``doc.text``).
    """
    lo, hi = _PASSAGE_CHARS
    spans = [(s.start, s.end) for s in doc.sentences]
    out = []
    for i, (s, e) in enumerate(spans):
        if lo <= e - s <= hi:
            out.append((s, e))
        elif e - s < lo and i + 1 < len(spans) and lo <= spans[i + 1][1] - s <= hi:
            out.append((s, spans[i + 1][1]))
    return out


def _passages(doc: Document, rng: random.Random) -> list[tuple[int, int]]:
    """:func:`passage_spans`, shuffled (the bundled model asks about them in this order)."""
    out = passage_spans(doc)
    rng.shuffle(out)
    return out


def _local_question(lm: Any, passage: str) -> str:
    """The bundled model's question for ``passage`` (greedy, under the model's lock)."""
    import torch

    messages = [{"role": "system", "content": _LOCAL_SYSTEM}]
    for shown, asked in _LOCAL_SHOTS:
        messages += [{"role": "user", "content": f"Passage: {shown}"}, {"role": "assistant", "content": asked}]
    messages.append({"role": "user", "content": f"Passage: {passage}"})
    tok = lm.tokenizer
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False).to(lm.model.device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with lm.lock, torch.inference_mode():
        out = lm.model.generate(
            **enc, max_new_tokens=_LOCAL_MAX_NEW_TOKENS, do_sample=False, pad_token_id=pad,
            temperature=None, top_p=None, top_k=None,
        )
    return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def _clean_local(reply: str) -> str:
    line = reply.strip().split("\n", 1)[0].strip()
    if "?" not in line:
        raise ValueError("the local model wrote no question")
    line = line[: line.index("?") + 1].strip().strip('"').strip()
    if len(line) < 8:
        raise ValueError("the local model's question is too short")
    if any(line == asked for _, asked in _LOCAL_SHOTS):
        raise ValueError("the local model repeated its worked example")
    return line


# --- measured rates --------------------------------------------------------------------------

RATES_FILE = "generation_rates.json"  # in the data directory
_rates_lock = threading.Lock()


@dataclass(frozen=True)
class Rate:
    """What generation cost on this machine, measured over the runs of one method and model.

    Attributes:
        setup_seconds: Loading the models and the document (the slowest run's: a cold start).
        seconds_per_attempt: Mean seconds per attempt over every attempt measured.
        attempts_per_kept: Attempts per kept question over every run (how many a kept one costs).
        attempts: Attempts measured so far.
    """

    setup_seconds: float
    seconds_per_attempt: float
    attempts_per_kept: float
    attempts: int


def rate_key(method: str, model: str | None = None) -> str:
    """The key a method and model are measured under (``bundled:default``, ``chat:URL|MODEL``, ``model-free``)."""
    if method == "model-free":
        return method
    return f"{method}:{model or 'default'}"


def _rates_path() -> Path:
    return data_dir() / RATES_FILE


def _read_rates() -> dict[str, Any]:
    try:
        raw = json.loads(_rates_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def measured_rate(key: str) -> Rate | None:
    """The rate measured under ``key`` on this machine, or None before its first run (or when unreadable)."""
    entry = _read_rates().get(key)
    try:
        rate = Rate(float(entry["setup_seconds"]), float(entry["seconds_per_attempt"]),
                    float(entry["attempts_per_kept"]), int(entry["attempts"]))
    except (TypeError, KeyError, ValueError):
        return None
    ok = rate.attempts > 0 and rate.seconds_per_attempt >= 0 and rate.attempts_per_kept >= 1 and rate.setup_seconds >= 0
    return rate if ok else None


def record_rate(key: str, setup_seconds: float, attempt_seconds: float, attempts: int, kept: int) -> Rate | None:
    """Add one run's measurement to the rate under ``key`` (running means; a failed write is not an error).

    Returns:
        The updated rate, or None when the run made no attempt.
    """
    if attempts < 1:
        return None
    with _rates_lock:
        old = measured_rate(key)
        total = attempts + (old.attempts if old else 0)
        seconds = attempt_seconds + (old.seconds_per_attempt * old.attempts if old else 0.0)
        # Attempts per kept question over all runs; a run that kept nothing counts as all its attempts for one.
        kept_runs = (old.attempts / old.attempts_per_kept if old else 0.0) + max(kept, 1)
        # The setup kept is the slowest seen (a cold start loads the models; a warm process does not).
        setup = max(setup_seconds, old.setup_seconds if old else 0.0)
        rate = Rate(round(setup, 3), round(seconds / total, 4), round(max(1.0, total / kept_runs), 4), total)
        rates = _read_rates()
        rates[key] = {"setup_seconds": rate.setup_seconds, "seconds_per_attempt": rate.seconds_per_attempt,
                      "attempts_per_kept": rate.attempts_per_kept, "attempts": rate.attempts}
        path = _rates_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(rates, indent=1, sort_keys=True), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass  # the estimate is a convenience: a read-only data directory only loses it
    return rate


def expected_attempts(n: int, rate: Rate | None, max_attempts: int) -> int:
    """Attempts a run for ``n`` questions is expected to make: the measured attempts per kept question (at most ``max_attempts``)."""
    per_kept = rate.attempts_per_kept if rate is not None else 1.0
    return max(1, min(max_attempts, math.ceil(n * per_kept)))


def estimate_seconds(n: int, rate: Rate | None, max_attempts: int) -> float | None:
    """Seconds a run for ``n`` questions is expected to take, from the measured rate; None before any measurement."""
    if rate is None:
        return None
    return rate.setup_seconds + expected_attempts(n, rate, max_attempts) * rate.seconds_per_attempt


# --- the loop --------------------------------------------------------------------------------


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.clip(a @ b.T, -1.0, 1.0)


def _max_cos(a: np.ndarray, b: np.ndarray) -> float:
    """The highest cosine similarity between a row of ``a`` and a row of ``b`` (unit vectors)."""
    return float(_cos(a, b).max())


def generate_questions(
    doc: Document,
    *,
    n: int = 10,
    corpus_id: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    local: bool | None = None,
    method: str | None = None,
    lm: str | None = None,
    embedder: str | TextEmbedder | None = None,
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    excerpt_threshold: float = DEFAULT_EXCERPT_THRESHOLD,
    max_attempts: int | None = None,
    window_chars: int = WINDOW_CHARS,
    temperature: float = 0.7,
    seed: int | None = 0,
    progress: Progress | None = None,
) -> GeneratedQuestions:
    """Generate up to ``n`` questions with excerpts from ``doc`` (see the module docstring).

    Args:
        doc: The document; excerpts index ``doc.text``.
        n: Questions wanted (after the filters).
        corpus_id: The corpus id to give them (default: from the document's file name).
        base_url: An OpenAI-compatible API (default ``OPENAI_BASE_URL``).
        api_key: Its key (default ``OPENAI_API_KEY``); never stored in the result.
        model: The chat model (default ``OPENAI_MODEL`` or the server's only model).
        local: True forces the local fallback, False requires an LLM API; None (default)
            uses the API when a base URL or key is configured, else the fallback.
        method: ``chat`` (as ``local=False``) or ``bundled`` (as ``local=True``); overrides
            ``local`` when given (``model-free`` is :func:`backend.retrieval.modelfree.model_free_questions`).
        lm: The local model spec for the fallback (default: the bundled SmolLM2).
        embedder: The embedder of the filters (default: ``CHUNKLAB_EMBEDDER`` or MiniLM).
        duplicate_threshold: Drop a question more similar than this to an earlier one.
        excerpt_threshold: Drop a question less similar than this to any of its excerpts.
        max_attempts: How many times to ask the model (default :func:`default_max_attempts`).
        window_chars: Characters of the document shown per attempt (LLM method).
        temperature: Sampling temperature of the LLM method (the fallback is greedy).
        seed: Seeds the windows, the sampled previous questions and the passages.
        progress: ``progress(attempt, expected attempts)`` (unit ``attempts``) after each attempt,
            the expected attempts from this machine's measured keep rate (:func:`expected_attempts`),
            so its ETA is the measured rate; publishes ``(kept, attempts)``; may raise ``Cancelled``.

    Raises:
        ParameterError: ``n`` or ``max_attempts`` below 1, thresholds outside -1..1, an unknown method.
        ModelError: no LLM configured with ``local=False``; the server failed twice in a
            row; the local or embedding model cannot be loaded.
    """
    if n < 1:
        raise ParameterError(f"n ({n}) must be at least 1")
    if method is not None:
        if method not in ("chat", "bundled"):
            raise ParameterError(f"method {method!r} is not chat or bundled")
        local = method == "bundled"
    attempts_allowed = max_attempts if max_attempts is not None else default_max_attempts(n)
    if attempts_allowed < 1:
        raise ParameterError(f"max_attempts ({attempts_allowed}) must be at least 1")
    if window_chars < 200:
        raise ParameterError(f"window_chars ({window_chars}) must be at least 200")
    _check_thresholds(duplicate_threshold, excerpt_threshold)
    use_local = not remote_llm_configured(base_url, api_key) if local is None else local
    if not use_local and not remote_llm_configured(base_url, api_key):
        raise ModelError("no LLM configured: set OPENAI_API_KEY or OPENAI_BASE_URL, or use the local fallback")
    t0 = time.perf_counter()
    cid = corpus_id or corpus_id_for(doc)
    rng = random.Random(seed)
    finder = ExcerptFinder(doc.text)
    emb = load_text_embedder(embedder)

    key = rate_key("bundled", lm) if use_local else rate_key("chat", f"{base_url or ''}|{model or ''}")
    planned = expected_attempts(n, measured_rate(key), attempts_allowed)
    if use_local:
        local_lm = load_lm(lm)
        model_name = local_lm.info.name
        passages = iter(_passages(doc, rng))
        notice = (
            f"No LLM API configured (OPENAI_API_KEY / OPENAI_BASE_URL), so the bundled {model_name} wrote "
            "these: it only phrases a question for a passage Chunk Lab picked, so they are simpler and weaker "
            "than the report's LLM-generated questions (one excerpt each, sometimes vague)."
        )
    else:
        model_name = resolve_model(base_url, model, api_key)
        notice = None

    candidates: list[Candidate] = []
    vectors: list[np.ndarray] = []
    excerpt_vectors: list[np.ndarray] = []
    rejected: list[Rejection] = []
    kept_idx: list[int] = []
    failures = 0
    setup_seconds = time.perf_counter() - t0

    def report(attempt: int) -> None:
        nonlocal planned
        if progress is None:
            return
        if attempt >= planned and len(kept_idx) < n:
            planned = attempts_allowed  # more than measured: count against the ceiling (a new ETA)
        progress.publish((len(kept_idx), attempt))
        progress(attempt, planned)

    if progress is not None:
        progress.set_unit("attempts")
        progress(0, planned)
    for attempt in range(1, attempts_allowed + 1):
        if len(kept_idx) >= n:
            break
        reply = ""
        try:
            if use_local:
                span = next(passages, None)
                if span is None:
                    rejected.append(Rejection(attempt, "no passage left to ask about", ""))
                    break
                reply = _local_question(local_lm, doc.text[span[0] : span[1]])
                question, found = _clean_local(reply), [span]
            else:
                asked = [c.question.question for c in candidates]
                if len(asked) > PREVIOUS_QUESTIONS:
                    asked = rng.sample(asked, PREVIOUS_QUESTIONS)
                try:
                    reply = chat(
                        question_messages(_window(doc.text, rng, window_chars), asked),
                        base_url=base_url, api_key=api_key, model=model_name,
                        temperature=temperature, max_tokens=1024,
                    )
                    failures = 0
                except ModelError as e:
                    failures += 1
                    if failures >= 2 or not candidates and not rejected:
                        raise
                    rejected.append(Rejection(attempt, f"request failed: {e}", ""))
                    continue
                question, excerpts = parse_reply(reply)
                if len(excerpts) > MAX_REFERENCES:
                    raise ValueError(f"{len(excerpts)} references, more than {MAX_REFERENCES}")
                found = []
                for j, excerpt in enumerate(excerpts, 1):
                    match = finder.find(excerpt)
                    if match is None:
                        raise ValueError(f"reference {j} is not in the document")
                    found.append((match.start, match.end))
        except ValueError as e:
            rejected.append(Rejection(attempt, str(e), reply[:300]))
            report(attempt)
            continue
        # The content is cut from the document at the offsets found: text[start:end] == content, exactly.
        q = Question(question, tuple(Reference(doc.text[s:e], s, e) for s, e in found), cid)
        vecs = np.asarray(emb.embed([q.question, *(r.content for r in q.references)]), dtype=np.float32)
        sims = tuple(float(x) for x in _cos(vecs[:1], vecs[1:])[0])
        candidates.append(Candidate(q, sims, attempt))
        vectors.append(vecs[0])
        excerpt_vectors.append(vecs[1:])
        i = len(candidates) - 1
        if (
            min(sims) >= excerpt_threshold
            and all(float(vecs[0] @ vectors[j]) <= duplicate_threshold for j in kept_idx)
            and all(_max_cos(vecs[1:], excerpt_vectors[j]) <= DEFAULT_EXCERPT_DUPLICATE_THRESHOLD for j in kept_idx)
        ):
            kept_idx.append(i)
        report(attempt)

    matrix = _cos(np.stack(vectors), np.stack(vectors)) if vectors else np.zeros((0, 0), dtype=np.float32)
    pairs = np.array(
        [[_max_cos(a, b) for b in excerpt_vectors] for a in excerpt_vectors], dtype=np.float32
    ).reshape(len(excerpt_vectors), len(excerpt_vectors))
    kept, reasons = prefilter(candidates, matrix, duplicate_threshold, excerpt_threshold,
                              excerpt_pair_similarity=pairs)
    record_rate(key, setup_seconds, time.perf_counter() - t0 - setup_seconds, len(candidates) + len(rejected), sum(kept))
    return GeneratedQuestions(
        questions=tuple(c.question for c, k in zip(candidates, kept) if k),
        candidates=tuple(candidates),
        kept=tuple(kept),
        drop_reasons=tuple(reasons),
        question_similarity=matrix,
        rejected=tuple(rejected),
        duplicate_threshold=duplicate_threshold,
        excerpt_threshold=excerpt_threshold,
        corpus_id=cid,
        corpus_text=doc.text,
        model=model_name,
        embedder=emb.info.name,
        weak=use_local,
        notice=notice,
        seconds=time.perf_counter() - t0,
        method="bundled" if use_local else "chat",
        excerpt_pair_similarity=pairs,
    )
