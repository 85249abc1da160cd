"""Questions on this document: the choice of method, its measured time, the generation's plan, and the session set.

One backend for every place that generates questions — the Summary and Retrieval pages' panel
"Questions on this document", the Benchmark page's generation panel and ``python -m backend
questions generate``:

- :func:`generation_options` — the three methods (:data:`backend.retrieval.generation.METHODS`),
  whether each is usable now, its warning and its time estimate from the rate measured on this
  machine (:func:`backend.retrieval.generation.estimate_seconds`; "measured on the first run"
  until a run of that method has been measured, never a guess);
- :func:`plan_generation` — the background job (:func:`backend.retrieval.jobs.generation_job`);
  :func:`runs_inline` says when the model-free method is quick enough to run in the page
  (:func:`generate_now`);
- :func:`session_set_after` — the session's question set once generated questions join it:
  merged when the set is on this document, replaced when it is on another, with one line
  saying which.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from backend.errors import ParameterError
from backend.figures.markdown import md_text
from backend.lab.jobs import JobPlan
from backend.metrics.cost import format_seconds
from backend.models.chat import remote_llm_configured
from backend.retrieval.generation import (
    DEFAULT_DUPLICATE_THRESHOLD,
    DEFAULT_EXCERPT_THRESHOLD,
    METHOD_TITLES,
    METHODS,
    GeneratedQuestions,
    default_max_attempts,
    estimate_seconds,
    measured_rate,
    rate_key,
)
from backend.retrieval.jobs import generation_job
from backend.retrieval.live import corpus_id_in
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document

__all__ = [
    "BUNDLED_WARNING",
    "INLINE_CHARS",
    "ChatEndpoint",
    "MethodOption",
    "SessionSetUpdate",
    "estimate_text",
    "generate_now",
    "generation_is_local",
    "generation_options",
    "on_document",
    "plan_generation",
    "runs_inline",
    "session_set_after",
]

# The model-free method runs in the page below this many characters (about 0.1 s per 20,000 measured
# on the bundled samples on a shared 2-core CPU; a 36-page PDF is about 100,000): above, it is a job.
INLINE_CHARS = 400_000
BUNDLED_WARNING = (
    "The bundled small model (SmolLM2, 135M) only phrases one question for a passage Chunk Lab picks: "
    "its questions are plainly weaker than a chat model's (simpler, one excerpt each, sometimes vague)."
)


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat API: empty fields fall back to ``OPENAI_*``; the key is never shown or compared."""

    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False, compare=False)

    @property
    def configured(self) -> bool:
        """Whether a base URL or key is given here or in the environment."""
        return remote_llm_configured(self.base_url.strip() or None, self.api_key.strip() or None)

    @property
    def name(self) -> str:
        """The model and API in words (never the key)."""
        model = self.model.strip() or "OPENAI_MODEL (or the server's only model)"
        return f"{model} at {self.base_url.strip() or 'OPENAI_BASE_URL'}"

    @property
    def rate_model(self) -> str:
        """What its rate is measured under (:func:`backend.retrieval.generation.rate_key`)."""
        return f"{self.base_url.strip()}|{self.model.strip()}"


@dataclass(frozen=True)
class MethodOption:
    """One way to generate, as the panel offers it.

    Attributes:
        method: ``chat``, ``bundled`` or ``model-free``.
        title: What it is, in a few words.
        available: Whether it can run now (the chat model needs an API).
        why_not: Why not, when unavailable.
        warning: The plain warning shown with it (the bundled model's weakness), or None.
        estimate: The time it is expected to take (:func:`estimate_text`).
    """

    method: str
    title: str
    available: bool
    why_not: str | None
    warning: str | None
    estimate: str


def estimate_text(method: str, n: int, chat: ChatEndpoint | None = None) -> str:
    """``about 3 min`` / ``40 s`` (:func:`~backend.metrics.cost.format_seconds`) from the rate measured on this
    machine, or what the first run will measure.

    Raises:
        ParameterError: an unknown method, or ``n`` below 1.
    """
    if method not in METHODS:
        raise ParameterError(f"method {method!r} is not one of {', '.join(METHODS)}")
    if n < 1:
        raise ParameterError(f"n ({n}) must be at least 1")
    model = chat.rate_model if method == "chat" and chat is not None else None
    seconds = estimate_seconds(n, measured_rate(rate_key(method, model)), default_max_attempts(n))
    if seconds is None:
        # The model-free method takes about 0.1 s per 20,000 characters (INLINE_CHARS' measurement).
        return format_seconds(1.0) if method == "model-free" else "time measured on the first run"
    return format_seconds(seconds)


def generation_options(n: int, chat: ChatEndpoint | None) -> tuple[MethodOption, ...]:
    """The three methods for ``n`` questions.

    Args:
        n: Questions wanted.
        chat: The session's chat API (empty fields: ``OPENAI_*``); None when the session chose
            the bundled model as its chat model. The chat method is usable when it names an API.
    """
    endpoint = chat or ChatEndpoint()
    chat_ok = chat is not None and endpoint.configured
    return (
        MethodOption(
            "chat", f"Chat model · {endpoint.name}" if chat_ok else "Chat model", chat_ok,
            None if chat_ok else "no chat model configured (OPENAI_BASE_URL / OPENAI_API_KEY, or the Models page)",
            None, estimate_text("chat", n, endpoint),
        ),
        MethodOption("bundled", "Bundled small model (weaker)", True, None, BUNDLED_WARNING, estimate_text("bundled", n)),
        MethodOption(
            "model-free", "Model-free (seconds, offline)", True, None,
            "Keyword questions (the three most distinctive words of a passage): weaker than a model's, but instant.",
            estimate_text("model-free", n),
        ),
    )


def generation_is_local(local: bool, base_url: str, api_key: str) -> bool:
    """Whether generation runs the bundled model: asked for, or no LLM API given or configured."""
    return local or not remote_llm_configured(base_url.strip() or None, api_key.strip() or None)


def plan_generation(
    doc: Document,
    n: int,
    *,
    method: str,
    chat: ChatEndpoint | None = None,
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    excerpt_threshold: float = DEFAULT_EXCERPT_THRESHOLD,
) -> JobPlan:
    """Question generation from ``doc`` by ``method`` (:func:`backend.retrieval.jobs.generation_job`).

    The API key lives only in the job's body: it is never part of the signature or the meta.
    The meta holds ``doc_id``, ``method`` and ``estimate`` (what the panel promised).

    Raises:
        ParameterError: an unknown method, ``n`` below 1, or ``chat`` with no API configured.
    """
    endpoint = chat or ChatEndpoint()
    estimate = estimate_text(method, int(n), endpoint)
    if method == "chat" and (chat is None or not endpoint.configured):
        raise ParameterError("No chat model configured: set OPENAI_BASE_URL / OPENAI_API_KEY, or pick another method.")
    body = generation_job(
        doc, int(n), method=method, base_url=endpoint.base_url, api_key=endpoint.api_key, model=endpoint.model,
        duplicate_threshold=duplicate_threshold, excerpt_threshold=excerpt_threshold,
    )
    signature: Hashable = ("generate", doc.id, int(n), method, endpoint.base_url.strip(), endpoint.model.strip())
    title = f"Generating {int(n)} questions ({METHOD_TITLES[method]})"
    return JobPlan(title, signature, lambda _scorer, progress: body(progress),
                   meta={"doc_id": doc.id, "method": method, "estimate": estimate})


def runs_inline(method: str, doc: Document) -> bool:
    """Whether ``method`` is quick enough on ``doc`` to run in the page: model-free below :data:`INLINE_CHARS`."""
    return method == "model-free" and len(doc.text) < INLINE_CHARS


def generate_now(doc: Document, n: int, *, seed: int = 0) -> GeneratedQuestions:
    """The model-free questions, here and now (see :func:`runs_inline`)."""
    return model_free_questions(doc, n=int(n), seed=seed)


def on_document(qset: QuestionSet | None, doc: Document) -> bool:
    """Whether every corpus of ``qset`` is ``doc``'s text (an empty or missing set is on no document)."""
    return qset is not None and bool(qset.corpora) and all(text == doc.text for text in qset.corpora.values())


@dataclass(frozen=True)
class SessionSetUpdate:
    """The session's question set after generation, and what happened to it (Markdown, one line)."""

    qset: QuestionSet
    added: int
    message: str


def session_set_after(current: QuestionSet | None, gen: GeneratedQuestions, doc: Document) -> SessionSetUpdate:
    """The session set once ``gen``'s kept questions join it.

    Merged when the current set is on ``doc`` (questions it already holds are not added twice),
    replaced when it is on another document or empty.

    Raises:
        ParameterError: ``gen`` kept no question, or was written on another text.
    """
    if not gen.questions:
        raise ParameterError("No question was kept: nothing to add.")
    if gen.corpus_text != doc.text:
        raise ParameterError("These questions were generated on another document.")
    name = md_text(doc.source or "this document")
    if on_document(current, doc):
        cid = corpus_id_in(current, doc)
        have = {(q.question, tuple(q.spans)) for q in current.questions if q.corpus_id == cid}
        fresh = QuestionSet.from_document(doc, gen.questions, cid)
        new = [q for q in fresh.questions if (q.question, tuple(q.spans)) not in have]
        merged = current.with_questions(new, {cid: doc.text}) if new else current
        return SessionSetUpdate(
            merged, len(new),
            f"Added **{len(new)}** question(s) on {name} to the session's set (now {len(merged)}; "
            f"{len(gen.questions) - len(new)} already there).",
        )
    fresh = QuestionSet.from_document(doc, gen.questions, corpus_id_in(None, doc))
    before = f" (it held {len(current)} question(s) on another document)" if current is not None and len(current) else ""
    return SessionSetUpdate(
        fresh, len(fresh), f"The session's set is now **{len(fresh)}** question(s) on {name}{before}."
    )
