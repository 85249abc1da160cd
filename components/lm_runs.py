"""Model-backed work in the app: which language model it uses, cache-only lookups, background jobs.

Model-backed chunkers (registry specs with ``"needs": ["lm"]``) and the PPL page run the
session's language model, or the bundled default when the session has chosen none (pages
name it). The model is part of every result's identity: the same configuration on another
model is another result, so results are keyed by the model's fingerprint.

A page must never freeze on a model call. It first asks for the result from the output
cache alone (:func:`cache_only_context`, :func:`cached_document_scores`): the backend's
:meth:`ModelContext.cache_only <backend.chunkers.context.ModelContext.cache_only>` around the
session's models, so a document scored before opens in milliseconds, and a miss raises
:class:`~backend.errors.NotCached` at once instead of loading the model. Only then does the
page start a background :class:`~backend.jobs.Job` (:func:`start_model_job`, shown by
:func:`model_job_panel`): it loads the default model if needed, computes, and fills the
output cache, so the page's next lookup hits.

Session-state keys are the caller's: the model-run panel's come from the page's
:class:`~components.keys.PageKeys` (``keys.lm_results``, ``keys.lm_job``…), on the writing and
the reading side alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Hashable, Sequence

import streamlit as st

from backend.chunkers.context import ModelContext, unloaded_model_info
from backend.chunkers.run import ChunkOutcome, run_configs
from backend.chunking import ChunkerConfig, Chunking
from backend.config import default_lm_spec
from backend.errors import ChunkLabError, ModelError, NotCached, one_line
from backend.jobs import Job, start_job
from backend.models.types import ModelInfo, Scorer
from backend.progress import Progress
from backend.text.document import Document
from components.keys import CHAT_CHOICE, EMB_CHOICE, EMB_INFO, LM_INFO, PageKeys
from components.models import current_scorer, freeze_long_lived, job_progress, session_chat

if TYPE_CHECKING:
    from backend.models.types import TokenScores

__all__ = [
    "SessionLM",
    "session_lm",
    "cache_only_context",
    "cached_document_scores",
    "scoring_resume_note",
    "start_model_job",
    "model_job_panel",
    "finished_job",
    "model_chunking",
    "models_needed",
    "waiting_note",
    "pending_runs_panel",
]


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

    @property
    def info(self) -> ModelInfo:
        """The loaded scorer's identity, else the unloaded model's (name, kind, fingerprint)."""
        if self.scorer is not None:
            return self.scorer.info
        return unloaded_model_info(self.name, self.fingerprint or "", self.kind)


@st.cache_resource(show_spinner=False, max_entries=4)
def _default_identity(env_spec: str) -> tuple[str, str | None, str | None]:
    """``(name, fingerprint, error)`` of the default model (``CHUNKLAB_LM`` = ``env_spec``), without loading it."""
    from backend.models.identity import fingerprint_without_loading
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
    name, fingerprint, error = _default_identity(default_lm_spec())
    return SessionLM(name, fingerprint, "lm", None, default=True, error=error, embedder_spec=embedder_spec, chat=chat)


# --- cache-only lookups --------------------------------------------------------------------------


def cache_only_context(lm: SessionLM) -> ModelContext | None:
    """:meth:`ModelContext.cache_only` around the session's models; None when the fingerprint is unknown."""
    if lm.fingerprint is None:
        return None
    return ModelContext.cache_only(lm.info, embedder_spec=lm.embedder_spec, chat=lm.chat)


def cached_document_scores(lm: SessionLM, text: str) -> TokenScores | None:
    """``text``'s token scores under ``lm`` from the output cache (the scorer's default window), or None."""
    context = cache_only_context(lm)
    if context is None:
        return None
    try:
        return context.token_scores(text)
    except NotCached:
        return None


def scoring_resume_note(lm: SessionLM, text: str) -> str | None:
    """``"N of M tokens already scored"`` when an interrupted scoring pass of ``text`` under ``lm`` left work; else None.

    Reads the pass's checkpoint in the output cache (:func:`backend.models.scoring.scoring_checkpoint`,
    the scorer's default window) without loading the model; a job started now goes on from it.
    """
    from backend.models.cache import default_cache
    from backend.models.scoring import scored_tokens, scoring_checkpoint

    if lm.fingerprint is None:
        return None
    partial = scoring_checkpoint(default_cache(), lm.fingerprint, text, None, scorer_kind=lm.kind)
    if partial is None or partial.scored < 2:
        return None
    return f"{partial.scored - 1:,} of {scored_tokens(partial.scores):,} tokens already scored"


# --- jobs ----------------------------------------------------------------------------------------


def _job_scorer(lm: SessionLM, progress: Progress | None = None) -> Scorer:
    """The scorer to compute with, in the job's thread: the session's, or the default loaded now.

    ``backend.models.lm`` keeps one model per process, so this is the same object
    :func:`components.models.local_scorer` returns later (no second copy, no reload).
    """
    if lm.scorer is not None:
        return lm.scorer
    from backend.models.scorer import load_scorer

    scorer = load_scorer(None, progress=progress)  # queued while another run loads a model
    freeze_long_lived()
    return scorer


def start_model_job(title: str, lm: SessionLM, fn: Callable[[Scorer, Progress], Any], signature: Hashable) -> Job:
    """Run ``fn(scorer, progress)`` in a background :class:`Job` with ``lm`` (loaded there if needed).

    The job's result is ``fn``'s; ``signature`` (document, model, parameters…) tells
    :func:`model_job_panel` whether a job is the one a page wants now.
    """

    def run(progress: Progress) -> Any:
        progress.check()  # honours a cancel before the model loads
        return fn(_job_scorer(lm, progress), progress)

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
    confirm: str | None = None,
    confirm_key: str | None = None,
    preview: Callable[[Job], None] | None = None,
    resume: str | None = None,
) -> Job | None:
    """The finished job for ``signature``, or its progress / messages / start button (then None).

    - A running job for ``signature``: its progress bar, ETA and Cancel button.
    - A running job for something else (another document or model): cancelled, superseded.
    - No job yet: started at once when ``auto``, else a ``run_label`` button.
    - A cancelled or failed job: a one-line message and the button (never restarted alone).
    - A done job: returned.

    With ``confirm`` (a run too long to start on one click), the button is disabled until the
    ``confirm`` checkbox is ticked; the tick is forgotten when ``signature`` changes.

    Args:
        job_key: Session-state key of the job.
        signature: What the wanted job computes (compared with ``job.meta["signature"]``).
        start: Starts the job (see :func:`start_model_job`).
        run_label: The button's label, e.g. ``Score with SmolLM2``.
        run_key: The button's widget key.
        cancel_key: The Cancel button's widget key.
        auto: Start without a click when no job for ``signature`` has run yet.
        what: The job's name in messages (``Scoring``, ``Margin sampling``…).
        confirm: The confirmation checkbox's label (what the run costs), or None: no confirmation.
        confirm_key: The checkbox's widget key (required with ``confirm``).
        preview: Draws the running job's partial result under its bar (see :func:`job_progress`).
        resume: What an interrupted run of ``signature`` left (e.g. ``scoring_resume_note``), or
            None. Then no job starts alone: an info line says it and the button reads "Resume"
            (the job goes on from that work).
    """
    job: Job | None = st.session_state.get(job_key)
    mine = job is not None and job.meta.get("signature") == signature
    if job is not None and job.running and not mine:
        job.cancel()  # superseded: its thread stops at its next progress report
        job = None
        mine = False
    if mine and job.running:
        job_progress(job_key, cancel_key, preview)
        return None
    if mine and job.state == "done":
        return job
    if mine and job.state == "cancelled":
        st.warning(f"{what} was cancelled.", icon=":material/stop_circle:")
    elif mine and job.state == "failed":
        st.error(job.error or f"{what} failed.", icon=":material/error:")
    elif auto and confirm is None and resume is None:
        st.session_state[job_key] = start()
        job_progress(job_key, cancel_key, preview)
        return None
    confirmed = True
    if confirm is not None:
        if confirm_key is None:
            raise ValueError("model_job_panel: confirm needs confirm_key")
        seen = f"{confirm_key}_signature"  # the run the tick was given for
        if st.session_state.get(seen) != signature:
            st.session_state[seen] = signature
            st.session_state[confirm_key] = False
        confirmed = st.checkbox(confirm, key=confirm_key)
    if resume is not None:
        st.info(f"{what} was interrupted: {resume}. Resume goes on from there.", icon=":material/history:")
        run_label = "Resume"
    if st.button(run_label, key=run_key, icon=":material/play_arrow:", type="primary", disabled=not confirmed):
        st.session_state[job_key] = start()
        job_progress(job_key, cancel_key, preview)
    return None


def finished_job(title: str, signature: Hashable, value: Any) -> Job:
    """A job that is already done: a result read from the cache, shown like a computed one."""
    return Job(title, {"signature": signature}, state="done", fraction=1.0, label="from the cache", result=value)


def model_chunking(doc: Document, config: ChunkerConfig, lm: SessionLM, keys: PageKeys) -> Chunking:
    """A model-backed configuration's chunking without a model call: from the page's model runs, else the cache.

    Args:
        doc: The document.
        config: A model-backed configuration.
        lm: The session's models.
        keys: The keys of the page whose model runs to read (``keys.lm_results``, written by
            :func:`pending_runs_panel`).

    Raises:
        NotCached: it needs the model (run it with :func:`pending_runs_panel`).
        ChunkLabError: the run failed (its one-line message).
    """
    from components.cached import chunk_with_model

    held: ChunkOutcome | None = st.session_state.get(keys.lm_results, {}).get((doc.id, lm.models_key, config))
    if held is not None and held.state == "failed":
        raise ChunkLabError(held.error)
    if held is not None and held.chunking is not None:
        return held.chunking
    context = cache_only_context(lm)
    if context is None:
        raise NotCached(f"{lm.name} has not run on this document yet")
    return chunk_with_model(doc, doc.id, config, lm.models_key, context)


def _embedder_name(lm: SessionLM) -> str:
    """The embedder the session's model-backed chunkers use, by name (never loads it)."""
    info: ModelInfo | None = st.session_state.get(EMB_INFO)
    if info is not None:
        return info.name
    from backend.models.embedder import embedder_name

    return embedder_name(lm.embedder_spec) + (" (default)" if lm.embedder_spec is None else "")


def _chat_name() -> str:
    """The chat model the session's LLM chunkers use, in a few words (never connects or loads)."""
    choice = st.session_state.get(CHAT_CHOICE)
    if choice is None:
        from backend.models.chat import remote_llm_configured

        return "the API's chat model (default)" if remote_llm_configured() else "the bundled chat model (default)"
    kind, spec = choice
    return "the bundled chat model" if kind == "local" else spec[1]


def models_needed(lm: SessionLM, config: ChunkerConfig) -> str:
    """The models ``config`` runs with, named from the registry's ``needs``: ``all-MiniLM-L6-v2 (default)``."""
    from backend.chunkers import REGISTRY

    cls = REGISTRY.get(config.name)
    namers = {"lm": lambda: lm.label, "embedder": lambda: _embedder_name(lm), "chat": _chat_name}
    names = [namers[need]() for need in (cls.needs if cls is not None else ()) if need in namers]
    return " and ".join(dict.fromkeys(names)) or lm.label


def _run_signature(doc: Document, lm: SessionLM, configs: Sequence[ChunkerConfig]) -> tuple:
    """What the model-run panel's job computes: the document, the session's models, the configurations."""
    return (doc.id, lm.models_key, tuple(configs))


def _forget_job(job_key: str) -> None:
    """Drop an ended job, so that the model-run panel starts the run again on the next script run."""
    job = st.session_state.get(job_key)
    if job is not None and not job.running:
        del st.session_state[job_key]


def waiting_note(
    doc: Document, lm: SessionLM, config: ChunkerConfig, keys: PageKeys
) -> tuple[str, Callable[[], None] | None]:
    """What a configuration's card says while it has no chunks, and a callback that runs it again.

    ``Waiting for <the models it needs>…`` while its run is queued or running; when the panel's
    run for it was cancelled or failed, that, with a callback (for a button's ``on_click``)
    after which :func:`pending_runs_panel` starts the run again.
    """
    models = models_needed(lm, config)
    job: Job | None = st.session_state.get(keys.lm_job)
    signature = job.meta.get("signature") if job is not None else None
    ended = (
        job is not None and not job.running and isinstance(signature, tuple) and len(signature) == 3
        and signature[:2] == _run_signature(doc, lm, ())[:2] and config in signature[2]
    )
    if ended and job.state in ("cancelled", "failed"):
        what = "was cancelled" if job.state == "cancelled" else "failed"
        return f"The run with {models} {what}.", partial(_forget_job, keys.lm_job)
    return f"Waiting for {models}…", None


def pending_runs_panel(
    doc: Document,
    lm: SessionLM,
    configs: Sequence[ChunkerConfig],
    keys: PageKeys,
    preview: Callable[[Job], None] | None = None,
) -> None:
    """Run the model-backed configurations that are not cached, in a background job, with progress and cancel.

    Starts on its own (once per document, model and set of configurations); after a cancel
    or a failure a "Run with <model>" button starts it again. The finished job's outcomes
    (:func:`backend.chunkers.run.run_configs`: a chunking or a one-line error each) go to
    ``st.session_state[keys.lm_results]`` (this document's only), read by
    :func:`model_chunking`, and the page reruns to show them. ``preview(job)`` draws what
    the running job has published so far under its bar (see :func:`model_job_panel`).
    """
    configs = tuple(configs)
    signature = _run_signature(doc, lm, configs)
    n = len(configs)
    models = " and ".join(dict.fromkeys(models_needed(lm, c) for c in configs))  # from the registry's needs
    st.caption(
        f"{n} configuration{'s' if n != 1 else ''} use{'s' if n == 1 else ''} a model: "
        f"running {'it' if n == 1 else 'them'} with {models} in the background."
    )

    from backend.chunkers import REGISTRY

    needs_lm = any("lm" in REGISTRY[c.name].needs for c in configs if c.name in REGISTRY)

    def start() -> Job:
        run = lambda scorer, progress, d=doc, c=configs, e=lm.embedder_spec, m=lm.chat: run_configs(  # noqa: E731
            d, c, scorer, progress, e, m
        )
        title = f"Running {n} configuration{'s' if n != 1 else ''} with {models}"
        if needs_lm:
            return start_model_job(title, lm, run, signature)
        # Embedder or chat models only: nothing loads the scoring model; the context loads what it needs.
        return start_job(title, lambda progress: run(None, progress), signature=signature, model=models)

    job = model_job_panel(
        keys.lm_job, signature, start, run_label=f"Run with {models}", run_key=keys.lm_run,
        cancel_key=keys.lm_cancel, what="The model run", preview=preview,
        resume=scoring_resume_note(lm, doc.text) if needs_lm else None,
    )
    if job is None:
        return
    held = {k: v for k, v in st.session_state.get(keys.lm_results, {}).items() if k[0] == doc.id}
    fresh = {(doc.id, lm.models_key, outcome.config): outcome for outcome in job.result}
    if any(k not in held for k in fresh):
        held.update(fresh)
        st.session_state[keys.lm_results] = held
        st.rerun()
    st.warning(f"{models} ran, but the results are missing: run again.", icon=":material/warning:")
    if st.button(f"Run with {models}", key=keys.lm_rerun, icon=":material/play_arrow:"):
        st.session_state[keys.lm_job] = start()
        st.rerun()
