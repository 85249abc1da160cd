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

Then the report's *Prefiltering*, with the embedder (bundled MiniLM by default): a question
is dropped when its cosine similarity to any of its excerpts is below the excerpt threshold
(default 0.40), then, in order, when it is more similar than the duplicate threshold (default
0.70) to an earlier question still kept (the reference's greedy de-duplication). Generation
goes on until ``n`` questions survive or the attempts run out. All similarities are kept in
the result, for the report's histograms, and :meth:`GeneratedQuestions.refilter` applies other
thresholds without asking the model again.
"""

from __future__ import annotations

import ast
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

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
    "MAX_REFERENCES",
]

DEFAULT_DUPLICATE_THRESHOLD = 0.70
DEFAULT_EXCERPT_THRESHOLD = 0.40
MAX_REFERENCES = 5
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

    def refilter(self, duplicate_threshold: float, excerpt_threshold: float) -> GeneratedQuestions:
        """The same candidates filtered with other thresholds (no model call)."""
        kept, reasons = prefilter(self.candidates, self.question_similarity, duplicate_threshold, excerpt_threshold)
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
        )

    def question_set(self) -> QuestionSet:
        """The kept questions as a :class:`QuestionSet` over the document."""
        return QuestionSet(self.questions, {self.corpus_id: self.corpus_text})

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
            "duplicate_threshold": self.duplicate_threshold,
            "excerpt_threshold": self.excerpt_threshold,
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
) -> tuple[list[bool], list[str | None]]:
    """The report's prefilters: which candidates survive, and why the others do not.

    A candidate is dropped when its similarity to any excerpt is below ``excerpt_threshold``;
    then, in order, when its similarity to an earlier surviving question is above
    ``duplicate_threshold``.

    Raises:
        ParameterError: a threshold outside -1..1.
    """
    _check_thresholds(duplicate_threshold, excerpt_threshold)
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


def _passages(doc: Document, rng: random.Random) -> list[tuple[int, int]]:
    """Candidate excerpts for the local model: one or two consecutive sentences of a sensible length, shuffled."""
    lo, hi = _PASSAGE_CHARS
    spans = [(s.start, s.end) for s in doc.sentences]
    out = []
    for i, (s, e) in enumerate(spans):
        if lo <= e - s <= hi:
            out.append((s, e))
        elif e - s < lo and i + 1 < len(spans) and lo <= spans[i + 1][1] - s <= hi:
            out.append((s, spans[i + 1][1]))
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


# --- the loop --------------------------------------------------------------------------------


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.clip(a @ b.T, -1.0, 1.0)


def generate_questions(
    doc: Document,
    *,
    n: int = 10,
    corpus_id: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    local: bool | None = None,
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
        lm: The local model spec for the fallback (default: the bundled SmolLM2).
        embedder: The embedder of the filters (default: ``CHUNKLAB_EMBEDDER`` or MiniLM).
        duplicate_threshold: Drop a question more similar than this to an earlier one.
        excerpt_threshold: Drop a question less similar than this to any of its excerpts.
        max_attempts: How many times to ask the model (default ``3 * n + 2``).
        window_chars: Characters of the document shown per attempt (LLM method).
        temperature: Sampling temperature of the LLM method (the fallback is greedy).
        seed: Seeds the windows, the sampled previous questions and the passages.
        progress: ``progress(kept, n)`` after each attempt; may raise ``Cancelled``.

    Raises:
        ParameterError: ``n`` or ``max_attempts`` below 1, thresholds outside -1..1.
        ModelError: no LLM configured with ``local=False``; the server failed twice in a
            row; the local or embedding model cannot be loaded.
    """
    if n < 1:
        raise ParameterError(f"n ({n}) must be at least 1")
    attempts_allowed = max_attempts if max_attempts is not None else 3 * n + 2
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
    rejected: list[Rejection] = []
    kept_idx: list[int] = []
    failures = 0
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
            if progress is not None:
                progress(len(kept_idx), n)
            continue
        q = Question(question, tuple(Reference(doc.text[s:e], s, e) for s, e in found), cid)
        vecs = np.asarray(emb.embed([q.question, *(r.content for r in q.references)]), dtype=np.float32)
        sims = tuple(float(x) for x in _cos(vecs[:1], vecs[1:])[0])
        candidates.append(Candidate(q, sims, attempt))
        vectors.append(vecs[0])
        i = len(candidates) - 1
        if min(sims) >= excerpt_threshold and all(
            float(vecs[0] @ vectors[j]) <= duplicate_threshold for j in kept_idx
        ):
            kept_idx.append(i)
        if progress is not None:
            progress(len(kept_idx), n)

    matrix = _cos(np.stack(vectors), np.stack(vectors)) if vectors else np.zeros((0, 0), dtype=np.float32)
    kept, reasons = prefilter(candidates, matrix, duplicate_threshold, excerpt_threshold)
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
    )
