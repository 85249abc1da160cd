"""Models in the app: loading them, the session's choice, the progress of background jobs, model cards.

Local models (the language model and the embedder) are ``st.cache_resource``: one instance
per server process, shared by every session, never mutated. A session only records *which*
model it chose (and the model's :class:`ModelInfo`, so the sidebar can name it without
loading anything). A remote scorer is the exception: it holds the user's API key, so it
lives in that user's session state only and is never shared or cached.

Long computations run in a background thread (:class:`backend.jobs.Job`), kept in session state:

- Streamlit reruns the script on every click, so a computation running inside the script
  run would block the Cancel button until it finished. In a thread it keeps going between
  reruns, and the Cancel button's rerun sets the job's :class:`~backend.progress.CancelToken`;
  the thread stops at its next progress report (its ``Progress`` raises ``Cancelled`` there).
- The page shows the job through a fragment that reruns itself every second
  (:func:`job_progress`, ``st.fragment(run_every=…)``) to redraw the progress bar and ETA,
  and reruns the whole page once the job has ended, so its results appear. (Each rerun ends
  with Streamlit's full garbage collection, which holds the GIL the scoring thread needs:
  see :func:`freeze_long_lived`.)
- The thread never calls Streamlit: it only writes plain fields of its job (fraction,
  label, result, error), which the script reads.

Session-state keys start with ``models_`` (:data:`components.keys.MODELS`).
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any, Callable

import pandas as pd
import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.models import sentence_nll_chart
from backend.jobs import Job
from backend.lab.document import ScoreSummary
from backend.models.chat import LocalChat, RemoteChat
from backend.models.devices import check_precision
from backend.models.embedder import Embedder, embedder_note, load_embedder, loaded_embedder
from backend.models.lm import loaded_lm
from backend.models.remote import RemoteScorer
from backend.models.scorer import load_scorer
from backend.models.types import ModelInfo, Scorer
from backend.models.usage import lm_status
from backend.progress import format_seconds
from components.keys import (
    CHAT_CHOICE,
    CHAT_KEY,
    EMB_CHOICE,
    EMB_INFO,
    LM_CHOICE,
    LM_INFO,
    LM_PRECISION,
    MODELS,
    REMOTE_SCORER,
    SIDEBAR_LM,
)

__all__ = [
    "session_chat",
    "chat_label",
    "local_scorer",
    "embedder",
    "load_language_model",
    "load_remote_model",
    "load_embedding_model",
    "current_scorer",
    "current_embedder",
    "model_in_use",
    "scorer_in_use",
    "freeze_long_lived",
    "format_parameters",
    "model_card",
    "sidebar_models",
    "job_progress",
    "job_outcome",
    "score_results",
]

_log = logging.getLogger(__name__)


# --- shared models ---------------------------------------------------------------------------


@st.cache_resource(show_spinner=False, max_entries=4)
def local_scorer(spec: str | None, precision: str | None = None) -> Scorer:
    """The local language model ``spec`` as a scorer (None: bundled SmolLM2 or ``CHUNKLAB_LM``) at ``precision`` (CPU)."""
    return load_scorer(spec, precision=precision)


@st.cache_resource(show_spinner=False, max_entries=4)
def embedder(spec: str | None) -> Embedder:
    """The embedder ``spec`` (None: bundled all-MiniLM-L6-v2 or ``CHUNKLAB_EMBEDDER``)."""
    return load_embedder(spec)


def freeze_long_lived() -> None:
    """Exempt everything alive now (a model just loaded) from later garbage collections.

    Streamlit runs a full ``gc.collect()`` after every script run, fragment reruns included.
    With torch and a model in memory that walks about half a million objects (0.2-0.4 s,
    holding the GIL), and a scoring thread waits for the GIL between two tensor operations:
    polled twice a second, scoring ran four times slower or worse. The loaded model lives as
    long as the process, so its objects are moved to the collector's permanent generation
    (``gc.freeze``) once, after collecting what is already garbage.
    """
    gc.collect()
    gc.freeze()


def _attempt(what: str, load: Callable[[], Any]) -> tuple[Any, str | None]:
    """``(load(), None)``, or ``(None, one-line message)`` when loading fails."""
    try:
        model = load()
    except ChunkLabError as e:  # ModelError (missing files, offline hub, server down), ParameterError (device)
        return None, one_line(str(e))
    except Exception as e:  # a loader bug must not take the page down: report it on one line
        _log.exception("loading %s failed", what)
        return None, one_line(f"{what}: could not be loaded ({type(e).__name__}: {e})")
    freeze_long_lived()
    return model, None


def load_language_model(spec: str | None, precision: str | None = None) -> str | None:
    """Load the local language model ``spec`` and make it the session's; the error message on failure.

    ``precision`` (float32, float16, bfloat16, auto on the CPU; None: ``CHUNKLAB_PRECISION``) is this
    session's only: other sessions keep theirs (models are held, and outputs cached, per precision).
    """
    spec = (spec or "").strip() or None
    if precision is not None:
        try:
            check_precision(precision)  # a bad name fails here, in one line
        except ChunkLabError as e:
            return one_line(str(e))
    scorer, error = _attempt(spec or "the bundled language model", lambda: local_scorer(spec, precision))
    if error is None:
        st.session_state[LM_CHOICE] = ("local", spec)
        st.session_state[LM_PRECISION] = precision
        st.session_state[LM_INFO] = scorer.info
        st.session_state.pop(REMOTE_SCORER, None)
    return error


def load_remote_model(base_url: str, model: str, api_key: str) -> str | None:
    """Connect to an OpenAI-compatible server and make it the session's language model.

    Empty fields fall back to the environment (``CHUNKLAB_REMOTE_*``). The scorer, and with
    it the key, stays in this session's state: never in a shared cache, a file or a log.
    """
    scorer, error = _attempt(
        "the remote scorer",
        lambda: RemoteScorer(base_url.strip() or None, model.strip() or None, api_key.strip() or None),
    )
    if error is None:
        st.session_state[REMOTE_SCORER] = scorer
        st.session_state[LM_CHOICE] = ("remote", None)
        st.session_state[LM_INFO] = scorer.info
    return error


def load_embedding_model(spec: str | None) -> str | None:
    """Load the embedder ``spec`` and make it the session's; the error message on failure."""
    spec = (spec or "").strip() or None
    model, error = _attempt(spec or "the bundled embedder", lambda: embedder(spec))
    if error is None:
        st.session_state[EMB_CHOICE] = spec
        st.session_state[EMB_INFO] = model.info
    return error


def session_chat() -> Any:
    """The session's chat model for LLM chunkers (a ``ChatModel``), or None for the default.

    Builds no connection and loads nothing: a remote model's served identity is asked of its
    server when a cache key needs it; the local one loads on first use.
    """
    choice = st.session_state.get(CHAT_CHOICE)
    if choice is None:
        return None
    kind, spec = choice
    if kind == "local":
        return LocalChat(None)
    base_url, model = spec
    return RemoteChat(base_url or None, model, st.session_state.get(CHAT_KEY) or None)


def chat_label() -> str:
    """What the session's chat model is, in words (never the key)."""
    choice = st.session_state.get(CHAT_CHOICE)
    if choice is None:
        return "default (an OpenAI-compatible API when OPENAI_BASE_URL/OPENAI_API_KEY are set, else the bundled model)"
    kind, spec = choice
    if kind == "local":
        return "the bundled model (CHUNKLAB_LM or SmolLM2), as a local chat model"
    base_url, model = spec
    return f"{model} at {base_url or 'OPENAI_BASE_URL'}"


def current_scorer() -> Scorer | None:
    """The session's language model, or None until one is loaded (never loads one itself)."""
    choice = st.session_state.get(LM_CHOICE)
    if choice is None:
        return None
    kind, spec = choice
    if kind == "remote":
        return st.session_state.get(REMOTE_SCORER)
    return local_scorer(spec, st.session_state.get(LM_PRECISION))  # loaded before: a cache hit


def current_embedder() -> Embedder | None:
    """The session's embedder, or None until one is loaded."""
    if EMB_INFO not in st.session_state:
        return None
    return embedder(st.session_state.get(EMB_CHOICE))


def model_in_use(kind: str) -> tuple[ModelInfo | None, bool]:
    """The model a page would use for ``kind`` (``"lm"`` or ``"embedder"``) and whether it is loaded by choice.

    The session's choice (Models page) first; else the default model when this process has
    loaded it already — a background job loads the default through the backend's caches
    (``load_scorer``, ``load_embedder``) without touching the session. Never loads anything.

    Returns:
        ``(info, chosen)``: ``chosen`` is True for the session's own choice; ``info`` is None
        when neither is loaded.
    """
    info: ModelInfo | None = st.session_state.get(LM_INFO if kind == "lm" else EMB_INFO)
    if info is not None:
        return info, True
    if kind == "lm":
        return loaded_lm(None), False
    return loaded_embedder(None), False


def scorer_in_use() -> Scorer | None:
    """The session's language model, else the default one when this process has loaded it (never loads)."""
    info, chosen = model_in_use("lm")
    if chosen:
        return current_scorer()
    return local_scorer(None) if info is not None else None  # loaded already: a cache hit


# --- background jobs ---------------------------------------------------------------------------


@st.fragment(run_every=1.0)
def job_progress(job_key: str, cancel_key: str, preview: Callable[[Job], None] | None = None) -> None:
    """Progress bar, ETA and Cancel button of the job at ``st.session_state[job_key]``.

    Reruns itself every second while the job runs, and the whole page once it ends.
    ``preview(job)`` draws, under the bar and at each rerun, what the running job has
    published so far (:attr:`~backend.jobs.Job.partial`): the part of a curve already scored.
    """
    job: Job | None = st.session_state.get(job_key)
    if job is None:
        return
    if not job.running:
        st.rerun()  # the whole page: it shows the results
    line = _lm_line()[0]
    if SIDEBAR_LM in st.session_state and line != st.session_state[SIDEBAR_LM]:
        # The whole page, once per change (the line is noted first: a run that draws no sidebar cannot loop),
        # so the sidebar says what the job does with the model now.
        st.session_state[SIDEBAR_LM] = line
        st.rerun()
    elapsed = time.perf_counter() - job.started
    cancelling = job.cancel_token.cancelled  # the button's callback ran before this
    text = f"{job.title}: {'cancelling…' if cancelling else job.label} · {format_seconds(elapsed)} so far"
    with st.container(horizontal=True, vertical_alignment="center"):
        st.progress(job.fraction, text=text)
        st.button("Cancel", key=cancel_key, icon=":material/stop_circle:", disabled=cancelling, on_click=job.cancel)
    if preview is not None and job.partial is not None:
        preview(job)


def job_outcome(job_key: str, cancel_key: str, what: str, matches: Callable[[Job], bool] | None = None) -> Job | None:
    """The job at ``st.session_state[job_key]`` once it is done; meanwhile its progress, or one line.

    A running job shows :func:`job_progress`; a failed one its one-line error (``"<what> failed."``
    when it has none); a cancelled one ``"<what> was cancelled."``. A job for which ``matches``
    is false (another document, another query) shows nothing.

    Returns:
        The done job, else None.
    """
    job: Job | None = st.session_state.get(job_key)
    if job is None or (matches is not None and not matches(job)):
        return None
    if job.running:
        job_progress(job_key, cancel_key)
        return None
    if job.state == "failed":
        st.error(job.error or f"{what} failed.", icon=":material/error:")
        return None
    if job.state == "cancelled":
        st.warning(f"{what} was cancelled.", icon=":material/stop_circle:")
        return None
    return job


# --- displays ------------------------------------------------------------------------------------


def format_parameters(n: int) -> str:
    """``134515008`` → ``134.5M``; 0 (unknown) → ``—``."""
    if n <= 0:
        return "—"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def model_card(info: ModelInfo | None, key: str, note: str | None = None) -> None:
    """A bordered card with the model's name, source, size, device, dtype and context length (and ``note``)."""
    with st.container(border=True, key=key):
        if info is None:
            st.caption("Not loaded.")
            return
        st.text(info.name)  # names and paths are user or server input: plain text
        st.caption(info.source)
        if note:
            st.caption(note)
        # Two by two: four metrics side by side truncate "float32" and "134.5M" in a half-width column.
        top, bottom = st.columns(2), st.columns(2)
        top[0].metric("Parameters", format_parameters(info.parameters), help=f"{info.parameters:,}" if info.parameters else "Unknown for a remote model")
        top[1].metric("Device", info.device)
        bottom[0].metric("Dtype", info.dtype)
        ctx = f"{info.context_length:,}" if info.context_length else "—"
        bottom[1].metric("Context", ctx, help="Maximum tokens the model reads at once")


def _summary(info: ModelInfo) -> str:
    size = format_parameters(info.parameters)
    parts = [p for p in (size if size != "—" else "", info.device, info.dtype if info.dtype != info.device else "") if p]
    return " · ".join(parts)


def _in_use_line(label: str, info: ModelInfo | None, chosen: bool) -> None:
    """``LM: name`` (``(default)`` when a job loaded it, not the session), else ``LM: not loaded``."""
    if info is None:
        st.text(f"{label}: not loaded")
        return
    st.text(f"{label}: {info.name}{'' if chosen else ' (default)'}")  # a model name is user input: plain text
    st.caption(_summary(info))


def _lm_line() -> tuple[str, ModelInfo | None]:
    """The sidebar's language-model line (:func:`~backend.models.usage.lm_status`: a job's use included), its info."""
    status = lm_status(st.session_state.get(LM_INFO))
    return status.line, status.info


def sidebar_models() -> None:
    """Which models this session uses, whether they are loaded (its choice, else a default a job loaded) and in use.

    A job loads and runs its model in its own thread: the language model's line says so
    (``· loading for a job``, ``· in use by a job``); :func:`job_progress` redraws the page
    when the line it would draw now differs from the one drawn (:data:`~components.keys.SIDEBAR_LM`).
    """
    st.markdown("**Models**")
    line, info = _lm_line()
    st.session_state[SIDEBAR_LM] = line
    st.text(line)  # a model name is user input: plain text
    if info is not None:
        st.caption(_summary(info))
    _in_use_line("Embedder", *model_in_use("embedder"))
    note = embedder_note(st.session_state.get(EMB_CHOICE))
    if note is not None:
        st.text(f"⚠ {note}")  # names a server sent: plain text, as the model names above
    choice = st.session_state.get(CHAT_CHOICE)
    chat = "default" if choice is None else "bundled model" if choice[0] == "local" else f"{choice[1][1]} (API)"
    st.text(f"Chat: {chat}")


def score_results(summary: ScoreSummary, seconds: float) -> None:
    """Summary figures, the per-sentence NLL line and the table of sentence scores (:class:`ScoreSummary`)."""
    cols = st.columns(4)
    cols[0].metric("Sentences", f"{len(summary.sentences):,}", border=True)
    cols[1].metric("Scored tokens", f"{summary.scored_tokens:,}", border=True)
    cols[2].metric("Mean NLL", f"{summary.mean_nll:.3f}", help="Token-weighted mean, natural log", border=True)
    cols[3].metric("Time", f"{seconds:.1f} s", help="Including cache lookups", border=True)
    st.caption("Model")
    st.text(summary.model)  # a remote server names its own models: plain text
    if summary.curve_ready:
        st.plotly_chart(sentence_nll_chart(list(summary.sentences)), key=MODELS("nll_chart"), config={"displaylogo": False})
    table = pd.DataFrame(summary.rows(), columns=["index", "tokens", "nll_mean", "ppl", "text"])
    st.dataframe(
        table,
        key=MODELS("scores"),
        hide_index=True,
        column_config={
            "index": st.column_config.NumberColumn("#", format="%d", width=50),
            "tokens": st.column_config.NumberColumn("Tokens", format="%d", width=70),
            "nll_mean": st.column_config.NumberColumn("Mean NLL", format="%.3f", width=90),
            "ppl": st.column_config.NumberColumn("PPL", format="%.2f", width=90),
            "text": st.column_config.TextColumn("Sentence", width="large"),  # cells are plain text, never HTML
        },
    )
