"""Model-backed work in the app: which language model it uses, cache-only lookups, background jobs.

Model-backed chunkers (registry specs with ``"needs": ["lm"]``) and the PPL page run the
session's language model, or the bundled default when the session has chosen none (pages
name it). The model is part of every result's identity: the same configuration on another
model is another result, so results are keyed by the model's fingerprint.

A page must never freeze on a model call. It first asks for the result from the output
cache alone (:func:`cache_only_context`, :func:`cached_document_scores`): a context whose
scorer refuses to compute and whose lookups take no lock, so a document scored before opens
in milliseconds, and a miss raises :class:`NotCached` at once instead of loading the model.
Only then does the page start a background :class:`~components.models.Job`
(:func:`start_model_job`, shown by :func:`model_job_panel`): it loads the default model if
needed, computes, and fills the output cache, so the page's next lookup hits.

Session-state keys are the caller's (each page passes its own prefixed keys).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Hashable, Sequence

import streamlit as st

from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.text.document import Document
from backend.errors import Cancelled, ChunkLabError, ModelError
from backend.models.types import ModelInfo, Progress, Scorer
from components.documents import one_line
from components.models import EMB_CHOICE, LM_INFO, session_chat, Job, _freeze_long_lived, current_scorer, job_progress, start_job

if TYPE_CHECKING:
    from backend.models.types import TokenScores

__all__ = [
    "NotCached",
    "SessionLM",
    "session_lm",
    "cache_only_context",
    "cached_document_scores",
    "start_model_job",
    "model_job_panel",
    "scaled_progress",
    "run_configs",
    "finished_job",
    "model_chunking",
    "pending_runs_panel",
]


class NotCached(ChunkLabError):
    """A cache-only lookup missed: computing the result needs the model."""


@dataclass(frozen=True)
class SessionLM:
    """The language model a model-backed computation of this session uses.

    Attributes:
        name: Display name (a file stem, a folder name or a remote model's name).
        fingerprint: The weights' fingerprint; None when it cannot be known without
            loading the model (a default that is a checkpoint folder or a hub id).
        kind: ``ModelInfo.kind`` (``lm`` or ``remote-lm``): part of the cache keys.
        scorer: The session's loaded scorer; None for the default, loaded by the job.
        default: Whether this is the default model because the session has chosen none.
        error: Why the default model cannot be used (a one-line message), else None.
    """

    name: str
    fingerprint: str | None
    kind: str = "lm"
    scorer: Scorer | None = field(default=None, compare=False, repr=False)
    default: bool = False
    error: str | None = None
    embedder_spec: str | None = None
    chat: Any = field(default=None, compare=False, repr=False)  # the session's ChatModel; None: the default

    @property
    def models_key(self) -> str:
        """What model-backed chunkings are keyed by: the language model, the session's embedder and chat model."""
        chat = "default" if self.chat is None else self.chat.fingerprint
        return f"{self.identity}|embedder={self.embedder_spec or 'default'}|chat={chat}"

    @property
    def identity(self) -> str:
        """What results are keyed by: the fingerprint, else the name (until the model is loaded)."""
        return self.fingerprint or f"unresolved:{self.name}"

    @property
    def label(self) -> str:
        """``name``, with "(default)" when the session has chosen no model."""
        return f"{self.name} (default)" if self.default else self.name


@st.cache_resource(show_spinner=False, max_entries=4)
def _default_identity(env_spec: str) -> tuple[str, str | None, str | None]:
    """``(name, fingerprint, error)`` of the default model (``CHUNKLAB_LM`` = ``env_spec``), without loading it."""
    from backend.chunkers.context import fingerprint_without_loading
    from backend.models.lm import resolve_spec

    try:
        kind, location = resolve_spec(None)
        name = location.rstrip("/").split("/")[-1] if kind == "hub" else Path(location).stem
        fingerprint = fingerprint_without_loading(None)
    except ModelError as e:
        return env_spec or "default model", None, one_line(str(e))
    except OSError as e:  # the weights file unreadable while hashing
        return env_spec or "default model", None, one_line(f"the default language model cannot be read: {e}")
    return name, fingerprint, None


def session_lm() -> SessionLM:
    """The session's language model, or the default (not loaded) when the session has chosen none."""
    info: ModelInfo | None = st.session_state.get(LM_INFO)
    embedder_spec = st.session_state.get(EMB_CHOICE)
    chat = session_chat()
    if info is not None:
        scorer = current_scorer()
        if scorer is not None:
            return SessionLM(info.name, info.fingerprint, info.kind, scorer, embedder_spec=embedder_spec, chat=chat)
    name, fingerprint, error = _default_identity(os.environ.get("CHUNKLAB_LM", "").strip())
    return SessionLM(name, fingerprint, "lm", None, default=True, error=error, embedder_spec=embedder_spec, chat=chat)


# --- cache-only lookups --------------------------------------------------------------------------


class _RefusingScorer:
    """A scorer with the real model's identity that refuses every model call (raises :class:`NotCached`)."""

    def __init__(self, info: ModelInfo) -> None:
        self.info = info

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise NotCached(f"not in the output cache for {self.info.name}")

    token_nll = conditional_nll = next_token_probs = _refuse


@dataclass
class _CacheOnlyContext(ModelContext):
    """A :class:`ModelContext` answering from the output cache only, without taking its compute locks.

    (``OutputCache.get_or_compute`` would wait for a job computing the same key: a page
    must not wait.)
    """

    def token_scores(self, text: str) -> TokenScores:
        from backend.models.scoring import cached_token_scores

        cache, info = self.cache, self.scorer.info
        hit = cached_token_scores(cache, info.fingerprint, text, self.window, scorer_kind=info.kind) if cache else None
        if hit is None:
            raise NotCached(f"this document has not been scored by {info.name} yet")
        return hit

    def get_embedder(self) -> Any:
        """Never loads: ``embed`` reads cached vectors without the embedder, a miss ends here."""
        raise NotCached("these embeddings are not in the output cache yet")

    def get_chat(self) -> Any:
        """The default chat model's identity, refusing to answer (cached replies are read by key)."""
        if self.chat is None:
            from backend.models.chat import default_chat_model

            self.chat = _RefusingChat(default_chat_model(self.lm, self.device))
        return self.chat


class _RefusingChat:
    """A chat model with the real one's identity whose every call raises :class:`NotCached`."""

    def __init__(self, inner: Any) -> None:
        self.fingerprint = inner.fingerprint
        self.name = inner.name

    def complete(self, *args: Any, **kwargs: Any) -> str:
        raise NotCached(f"these answers of {self.name} are not in the output cache yet")


def _stand_in_info(lm: SessionLM) -> ModelInfo:
    if lm.scorer is not None:
        return lm.scorer.info
    return ModelInfo(lm.name, "", lm.kind, 0, "", "", lm.fingerprint or "")


def cache_only_context(lm: SessionLM) -> ModelContext | None:
    """A context whose model calls raise :class:`NotCached`; None when the fingerprint is unknown."""
    if lm.fingerprint is None:
        return None
    chat = _RefusingChat(lm.chat) if lm.chat is not None else None
    return _CacheOnlyContext(scorer=_RefusingScorer(_stand_in_info(lm)), embedder_spec=lm.embedder_spec, chat=chat)


def cached_document_scores(lm: SessionLM, text: str) -> TokenScores | None:
    """``text``'s token scores under ``lm`` from the output cache (the scorer's default window), or None."""
    context = cache_only_context(lm)
    if context is None:
        return None
    try:
        return context.token_scores(text)
    except NotCached:
        return None


# --- jobs ----------------------------------------------------------------------------------------


def _job_scorer(lm: SessionLM) -> Scorer:
    """The scorer to compute with, in the job's thread: the session's, or the default loaded now.

    ``backend.models.lm`` keeps one model per process, so this is the same object
    :func:`components.models.local_scorer` returns later (no second copy, no reload).
    """
    if lm.scorer is not None:
        return lm.scorer
    from backend.models.scorer import load_scorer

    scorer = load_scorer(None)
    _freeze_long_lived()
    return scorer


def scaled_progress(progress: Progress, part: int, parts: int) -> Progress:
    """``progress`` for part ``part`` (0-based) of ``parts`` equal parts of a job (per mille)."""
    if parts <= 1:
        return progress

    def report(done: int, total: int) -> None:
        frac = min(1.0, done / total) if total > 0 else 0.0
        progress(int(1000 * (part + frac)), 1000 * parts)

    return report


def start_model_job(title: str, lm: SessionLM, fn: Callable[[Scorer, Progress], Any], signature: Hashable) -> Job:
    """Run ``fn(scorer, progress)`` in a background :class:`Job` with ``lm`` (loaded there if needed).

    The job's result is ``fn``'s; ``signature`` (document, model, parameters…) tells
    :func:`model_job_panel` whether a job is the one a page wants now.
    """

    def run(progress: Progress) -> Any:
        progress(0, 1)  # honours a cancel before the model loads
        return fn(_job_scorer(lm), progress)

    return start_job(title, run, signature=signature, model=lm.label)


def model_job_panel(
    job_key: str,
    signature: Hashable,
    start: Callable[[], Job],
    *,
    run_label: str,
    run_key: str,
    cancel_key: str,
    auto: bool = True,
    what: str = "The run",
) -> Job | None:
    """The finished job for ``signature``, or its progress / messages / start button (then None).

    - A running job for ``signature``: its progress bar, ETA and Cancel button.
    - A running job for something else (another document or model): cancelled, superseded.
    - No job yet: started at once when ``auto``, else a ``run_label`` button.
    - A cancelled or failed job: a one-line message and the button (never restarted alone).
    - A done job: returned.

    Args:
        job_key: Session-state key of the job.
        signature: What the wanted job computes (compared with ``job.meta["signature"]``).
        start: Starts the job (see :func:`start_model_job`).
        run_label: The button's label, e.g. ``Score with SmolLM2``.
        run_key: The button's widget key.
        cancel_key: The Cancel button's widget key.
        auto: Start without a click when no job for ``signature`` has run yet.
        what: The job's name in messages (``Scoring``, ``Margin sampling``…).
    """
    job: Job | None = st.session_state.get(job_key)
    mine = job is not None and job.meta.get("signature") == signature
    if job is not None and job.running and not mine:
        job.cancel()  # superseded: its thread stops at its next progress report
        job = None
        mine = False
    if mine and job.running:
        job_progress(job_key, cancel_key)
        return None
    if mine and job.state == "done":
        return job
    if mine and job.state == "cancelled":
        st.warning(f"{what} was cancelled.", icon=":material/stop_circle:")
    elif mine and job.state == "failed":
        st.error(job.error or f"{what} failed.", icon=":material/error:")
    elif auto:
        st.session_state[job_key] = start()
        job_progress(job_key, cancel_key)
        return None
    if st.button(run_label, key=run_key, icon=":material/play_arrow:", type="primary"):
        st.session_state[job_key] = start()
        job_progress(job_key, cancel_key)
    return None


def finished_job(title: str, signature: Hashable, value: Any) -> Job:
    """A job that is already done: a result read from the cache, shown like a computed one."""
    return Job(title, {"signature": signature}, state="done", fraction=1.0, label="from the cache", result=value)


def run_configs(
    doc: Document,
    configs: Sequence[ChunkerConfig],
    scorer: Scorer,
    progress: Progress,
    embedder_spec: str | None = None,
    chat: Any = None,
) -> dict[ChunkerConfig, Chunking | str]:
    """Run model-backed chunker configurations one after the other (job side).

    The model outputs land in the output cache as well, so any page can read them back.
    One configuration failing does not stop the others; a cancel stops them all.

    Returns:
        Per configuration, its chunking or a one-line error message.
    """
    from backend.chunkers import run_chunker

    out: dict[ChunkerConfig, Chunking | str] = {}
    for k, config in enumerate(configs):
        context = ModelContext(
            scorer=scorer, embedder_spec=embedder_spec, chat=chat, progress=scaled_progress(progress, k, len(configs))
        )
        try:
            out[config] = run_chunker(doc, config, context)
        except Cancelled:
            raise
        except ChunkLabError as e:
            out[config] = one_line(str(e))
    return out


def model_chunking(doc: Document, config: ChunkerConfig, lm: SessionLM, results_key: str) -> Chunking:
    """A model-backed configuration's chunking without a model call: from this session's runs, else the cache.

    Raises:
        NotCached: it needs the model (run it with :func:`pending_runs_panel`).
        ChunkLabError: the run failed (its one-line message).
    """
    from components.cached import chunk_with_model

    held = st.session_state.get(results_key, {}).get((doc.id, lm.models_key, config))
    if isinstance(held, str):
        raise ChunkLabError(held)
    if held is not None:
        return held
    context = cache_only_context(lm)
    if context is None:
        raise NotCached(f"{lm.name} has not run on this document yet")
    return chunk_with_model(doc, doc.id, config, lm.models_key, context)


def pending_runs_panel(doc: Document, lm: SessionLM, configs: Sequence[ChunkerConfig], prefix: str) -> None:
    """Run the model-backed configurations that are not cached, in a background job, with progress and cancel.

    Starts on its own (once per document, model and set of configurations); after a cancel
    or a failure a "Run with <model>" button starts it again. The finished job's chunkings go
    to ``st.session_state[f"{prefix}_lm_results"]`` (this document's only), read by
    :func:`model_chunking`, and the page reruns to show them.
    """
    configs = tuple(configs)
    signature = (doc.id, lm.models_key, configs)
    results_key = f"{prefix}_lm_results"
    n = len(configs)
    st.caption(
        f"{n} configuration{'s' if n != 1 else ''} use{'s' if n == 1 else ''} a model: "
        f"running {'it' if n == 1 else 'them'} with {lm.label} in the background."
    )

    from backend.chunkers import REGISTRY

    needs_lm = any("lm" in REGISTRY[c.name].needs for c in configs if c.name in REGISTRY)

    def start() -> Job:
        run = lambda scorer, progress, d=doc, c=configs, e=lm.embedder_spec, m=lm.chat: run_configs(  # noqa: E731
            d, c, scorer, progress, e, m
        )
        title = f"Running {n} configuration{'s' if n != 1 else ''} with {lm.name}"
        if needs_lm:
            return start_model_job(title, lm, run, signature)
        # Embedder or chat models only: nothing loads the scoring model; the context loads what it needs.
        title = f"Running {n} model-backed configuration{'s' if n != 1 else ''}"
        return start_job(title, lambda progress: run(None, progress), signature=signature, model=lm.label)

    job = model_job_panel(
        f"{prefix}_lm_job", signature, start, run_label=f"Run with {lm.name}", run_key=f"{prefix}_lm_run",
        cancel_key=f"{prefix}_lm_cancel", what="The model run",
    )
    if job is None:
        return
    held = {k: v for k, v in st.session_state.get(results_key, {}).items() if k[0] == doc.id}
    fresh = {(doc.id, lm.models_key, config): out for config, out in job.result.items()}
    if any(k not in held for k in fresh):
        held.update(fresh)
        st.session_state[results_key] = held
        st.rerun()
    st.warning(f"{lm.name} ran, but its results are missing: run again.", icon=":material/warning:")
    if st.button(f"Run with {lm.name}", key=f"{prefix}_lm_rerun", icon=":material/play_arrow:"):
        st.session_state[f"{prefix}_lm_job"] = start()
        st.rerun()
