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
  saying which;
- the Benchmark page's generation panel: :func:`generation_form` (what its fields ask for) and
  :func:`generation_view` (the kept questions at the thresholds chosen, the caption, the histograms);
- the session set as the Retrieval and Benchmark pages handle it: :func:`question_set_view` (its
  questions on a document and its downloads), :func:`save_question`, :func:`merge_questions` and
  :func:`load_question_set_at` (a set on the server's disk).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go

from backend.errors import InputError, ParameterError
from backend.figures.markdown import md_text
from backend.figures.retrieval import similarity_histogram
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
from backend.retrieval.live import add_questions, corpus_id_in, questions_over
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.questions import (
    Question,
    QuestionSet,
    load_question_set,
    merge_question_sets,
    question_set_zip,
    questions_to_csv,
)
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
    "GenerationForm",
    "generation_form",
    "GenerationView",
    "generation_view",
    "QuestionSetView",
    "question_set_view",
    "save_question",
    "merge_questions",
    "load_question_set_at",
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
    duplicate_threshold: float | None = DEFAULT_DUPLICATE_THRESHOLD,
    excerpt_threshold: float | None = DEFAULT_EXCERPT_THRESHOLD,
) -> JobPlan:
    """Question generation from ``doc`` by ``method`` (:func:`backend.retrieval.jobs.generation_job`).

    The API key lives only in the job's body: it is never part of the signature or the meta.
    The meta holds ``doc_id``, ``method`` and ``estimate`` (what the panel promised). A threshold
    of None is the report's (:data:`~backend.retrieval.generation.DEFAULT_DUPLICATE_THRESHOLD`, …).

    Raises:
        ParameterError: an unknown method, ``n`` below 1, or ``chat`` with no API configured.
    """
    endpoint = chat or ChatEndpoint()
    estimate = estimate_text(method, int(n), endpoint)
    if method == "chat" and (chat is None or not endpoint.configured):
        raise ParameterError("No chat model configured: set OPENAI_BASE_URL / OPENAI_API_KEY, or pick another method.")
    duplicate_threshold = DEFAULT_DUPLICATE_THRESHOLD if duplicate_threshold is None else duplicate_threshold
    excerpt_threshold = DEFAULT_EXCERPT_THRESHOLD if excerpt_threshold is None else excerpt_threshold
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


# --- the Benchmark page's generation panel ----------------------------------------------------------

LOCAL_WARNING = (
    "No LLM API in use: the bundled small model will phrase one question per passage Chunk Lab picks. "
    "Its questions are plainly weaker than the report's LLM-generated ones (simpler, one excerpt each, "
    "sometimes vague)."
)


@dataclass(frozen=True)
class GenerationForm:
    """What the generation form asks for: the method, the chat API, and the warning shown with it.

    Attributes:
        method: ``bundled`` (asked for, or no LLM API given or configured) or ``chat``.
        chat: The API the form names (empty fields: ``OPENAI_*``).
        warning: The bundled model's warning, when it is the method; else None.
    """

    method: str
    chat: ChatEndpoint
    warning: str | None

    @property
    def local(self) -> bool:
        return self.method == "bundled"


def generation_form(local: bool, base_url: str, api_key: str, model: str) -> GenerationForm:
    """The generation form's fields read: the bundled model when asked for or when no API is given (:func:`generation_is_local`)."""
    use_local = generation_is_local(local, base_url, api_key)
    return GenerationForm("bundled" if use_local else "chat",
                          ChatEndpoint(base_url=base_url, model=model, api_key=api_key),
                          LOCAL_WARNING if use_local else None)


@dataclass(frozen=True)
class GenerationView:
    """A finished generation at the thresholds chosen.

    Attributes:
        shown: The generation re-filtered at the thresholds (:meth:`GeneratedQuestions.refilter`).
        duplicate_threshold: The duplicate threshold used (the report's when none was chosen).
        excerpt_threshold: The excerpt threshold used.
        caption: ``**7** kept of 10 candidates (12 attempts, …) · model … · 3.2 s`` (Markdown).
        duplicate_histogram: The question–question similarities with the threshold.
        excerpt_histogram: The question–excerpt similarities with the threshold.
    """

    shown: GeneratedQuestions
    duplicate_threshold: float
    excerpt_threshold: float
    caption: str
    duplicate_histogram: go.Figure = field(compare=False, repr=False)
    excerpt_histogram: go.Figure = field(compare=False, repr=False)


def generation_view(gen: GeneratedQuestions, duplicate_threshold: float | None = None,
                    excerpt_threshold: float | None = None) -> GenerationView:
    """``gen`` re-filtered at the thresholds (None: the report's 0.70 and 0.40), its caption and histograms."""
    dup = DEFAULT_DUPLICATE_THRESHOLD if duplicate_threshold is None else float(duplicate_threshold)
    exc = DEFAULT_EXCERPT_THRESHOLD if excerpt_threshold is None else float(excerpt_threshold)
    shown = gen.refilter(dup, exc)
    caption = (
        f"**{len(shown.questions)}** kept of {len(gen.candidates)} candidates ({gen.attempts} attempts, "
        f"{len(gen.rejected)} rejected: reply unparseable or an excerpt not in the document) · "
        f"model {md_text(gen.model)} · {gen.seconds:.1f} s"
    )
    return GenerationView(
        shown, dup, exc, caption,
        similarity_histogram(gen.duplicate_similarities, dup, "question–question cosine similarity", "below"),
        similarity_histogram(gen.excerpt_similarities, exc, "question–excerpt cosine similarity", "above"),
    )


# --- the session's question set ---------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionSetView:
    """A question set as the pages offer it.

    Attributes:
        saved: Its questions on the document given, in order (the Retrieval page's "Load" picker).
        csv: ``questions.csv`` (the Chroma format).
        zip: Builds ``questions.csv`` and ``corpora/<corpus_id>.md`` as one zip (called on download).
    """

    saved: tuple[Question, ...]
    csv: str
    zip: Callable[[], bytes] = field(compare=False, repr=False)


def question_set_view(qset: QuestionSet, doc: Document | None = None) -> QuestionSetView:
    """``qset``'s questions on ``doc`` (none without one) and its downloads."""
    saved = tuple(questions_over(qset, doc)) if doc is not None else ()
    return QuestionSetView(saved, questions_to_csv(qset), lambda: question_set_zip(qset))


def save_question(qset: QuestionSet | None, doc: Document, query: str, marks: Sequence[tuple[int, int]]) -> QuestionSet:
    """``qset`` (or a new set) with the query and its marked answer on ``doc`` added.

    Raises:
        ParameterError: an empty query or no marks.
    """
    return add_questions(qset, doc, query, marks)


def merge_questions(qset: QuestionSet | None, more: QuestionSet) -> QuestionSet:
    """``qset`` (or none) with ``more``'s questions and corpora added (an import, or generated questions kept).

    Raises:
        ParameterError: a corpus id both sets hold with different texts.
    """
    return merge_question_sets(qset, more)


def load_question_set_at(csv_path: str, corpora: str = "") -> QuestionSet:
    """The question set at ``csv_path`` on this machine, its corpora in ``corpora`` (empty: ``corpora/`` beside it).

    Raises:
        ParameterError: no CSV path given.
        InputError: the files cannot be read, or do not hold a valid set (one line).
    """
    if not csv_path.strip():
        raise ParameterError("Give the path of questions.csv.")
    folder = Path(corpora.strip()).expanduser() if corpora.strip() else None
    try:
        return load_question_set(Path(csv_path.strip()).expanduser(), folder)
    except OSError as e:
        raise InputError(f"cannot read the question set: {e}") from e
