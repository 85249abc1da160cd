"""Models in the app: loading them, the session's choice, background scoring jobs, model cards.

Local models (the language model and the embedder) are ``st.cache_resource``: one instance
per server process, shared by every session, never mutated. A session only records *which*
model it chose (and the model's :class:`ModelInfo`, so the sidebar can name it without
loading anything). A remote scorer is the exception: it holds the user's API key, so it
lives in that user's session state only and is never shared or cached.

Long computations run in a background thread (:class:`Job`), kept in session state:

- Streamlit reruns the script on every click, so a computation running inside the script
  run would block the Cancel button until it finished. In a thread it keeps going between
  reruns, and the Cancel button's rerun sets the job's :class:`CancelToken`; the thread
  stops at its next progress report (``ProgressTracker`` raises ``Cancelled`` there).
- The page shows the job through a fragment that reruns itself every second
  (``st.fragment(run_every=…)``) to redraw the progress bar and ETA, and reruns the whole
  page once the job has ended, so its results appear. (Each rerun ends with Streamlit's
  full garbage collection, which holds the GIL the scoring thread needs: see
  :func:`_freeze_long_lived`.)
- The thread never calls Streamlit: it only writes plain fields of its :class:`Job`
  (fraction, label, result, error), which the script reads.

Session-state keys start with ``models_``.
"""

from __future__ import annotations

import gc
import html
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import streamlit as st

from backend.errors import Cancelled, ChunkLabError
from backend.models.types import CancelToken, ModelInfo, Progress, ProgressTracker, Scorer
from components.documents import one_line

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from backend.models.embedder import Embedder
    from backend.models.scoring import SentenceScore

__all__ = [
    "LM_CHOICE",
    "LM_INFO",
    "EMB_CHOICE",
    "EMB_INFO",
    "CHAT_CHOICE",
    "CHAT_KEY",
    "session_chat",
    "chat_label",
    "Job",
    "start_job",
    "local_scorer",
    "embedder",
    "load_language_model",
    "load_remote_model",
    "load_embedding_model",
    "current_scorer",
    "current_embedder",
    "format_parameters",
    "model_card",
    "sidebar_models",
    "job_progress",
    "sentence_nll_chart",
    "score_results",
]

_log = logging.getLogger(__name__)

LM_CHOICE = "models_lm_choice"  # ("local", spec or None) or ("remote", None), set once loaded
LM_INFO = "models_lm_info"  # the loaded language model's ModelInfo
EMB_CHOICE = "models_emb_choice"  # the loaded embedder's spec (None: the default)
EMB_INFO = "models_emb_info"
# The chat model of LLM chunkers: None = the default (an API when OPENAI_* is set, else the bundled
# model), ("local", None) or ("remote", (base_url, model)); the key lives only in CHAT_KEY.
CHAT_CHOICE = "models_chat_choice"
CHAT_KEY = "models_chat_api_key"
_REMOTE = "models_remote_scorer"  # this session's RemoteScorer (it holds the user's key)


# --- shared models ---------------------------------------------------------------------------


@st.cache_resource(show_spinner=False, max_entries=4)
def local_scorer(spec: str | None) -> Scorer:
    """The local language model ``spec`` as a scorer (None: bundled SmolLM2 or ``CHUNKLAB_LM``)."""
    from backend.models.scorer import load_scorer

    return load_scorer(spec)


@st.cache_resource(show_spinner=False, max_entries=4)
def embedder(spec: str | None) -> Embedder:
    """The embedder ``spec`` (None: bundled all-MiniLM-L6-v2 or ``CHUNKLAB_EMBEDDER``)."""
    from backend.models.embedder import load_embedder

    return load_embedder(spec)


def _freeze_long_lived() -> None:
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
    _freeze_long_lived()
    return model, None


def load_language_model(spec: str | None) -> str | None:
    """Load the local language model ``spec`` and make it the session's; the error message on failure."""
    spec = (spec or "").strip() or None
    scorer, error = _attempt(spec or "the bundled language model", lambda: local_scorer(spec))
    if error is None:
        st.session_state[LM_CHOICE] = ("local", spec)
        st.session_state[LM_INFO] = scorer.info
        st.session_state.pop(_REMOTE, None)
    return error


def load_remote_model(base_url: str, model: str, api_key: str) -> str | None:
    """Connect to an OpenAI-compatible server and make it the session's language model.

    Empty fields fall back to the environment (``CHUNKLAB_REMOTE_*``). The scorer, and with
    it the key, stays in this session's state: never in a shared cache, a file or a log.
    """
    from backend.models.remote import RemoteScorer

    scorer, error = _attempt(
        "the remote scorer",
        lambda: RemoteScorer(base_url.strip() or None, model.strip() or None, api_key.strip() or None),
    )
    if error is None:
        st.session_state[_REMOTE] = scorer
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

    Builds no connection and loads nothing: a remote model is named, so its cache identity
    (``openai-compatible:<model>``) needs no request; the local one loads on first use.
    """
    choice = st.session_state.get(CHAT_CHOICE)
    if choice is None:
        return None
    from backend.models.chat import LocalChat, RemoteChat

    kind, spec = choice
    if kind == "local":
        return LocalChat(None)
    base_url, model = spec
    return RemoteChat(base_url or None, st.session_state.get(CHAT_KEY) or None, model)


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
        return st.session_state.get(_REMOTE)
    return local_scorer(spec)  # loaded before: a cache hit (reloaded if the cache was cleared)


def current_embedder() -> Embedder | None:
    """The session's embedder, or None until one is loaded."""
    if EMB_INFO not in st.session_state:
        return None
    return embedder(st.session_state.get(EMB_CHOICE))


# --- background jobs ---------------------------------------------------------------------------


@dataclass
class Job:
    """A computation running in a background thread, polled by the page.

    Attributes:
        title: What it does, for the progress line.
        meta: What it was started on (document id, model fingerprint…), for the page.
        state: ``running``, ``done``, ``cancelled`` or ``failed``.
        fraction: Progress in ``[0, 1]``.
        label: Progress text (``done/total · ETA``).
        result: The computation's return value once ``done``.
        error: The one-line message once ``failed``.
        seconds: Wall time once ended.
    """

    title: str
    meta: dict[str, Any] = field(default_factory=dict)
    state: str = "running"
    fraction: float = 0.0
    label: str = "starting…"
    result: Any = None
    error: str | None = None
    seconds: float = 0.0
    cancel_token: CancelToken = field(default_factory=CancelToken, repr=False)
    started: float = field(default_factory=time.perf_counter, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        """Whether the computation has not ended yet."""
        return self.state == "running"

    def cancel(self) -> None:
        """Ask the computation to stop at its next progress report."""
        self.cancel_token.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the thread ends (tests, the CLI); whether it did."""
        if self.thread is not None:
            self.thread.join(timeout)
        return not self.running

    def _report(self, fraction: float, eta: float | None, label: str) -> None:
        self.fraction, self.label = fraction, label

    def _run(self, fn: Callable[[Progress], Any]) -> None:
        try:
            result = fn(ProgressTracker(self._report, self.cancel_token))
        except Cancelled:
            state, result, error = "cancelled", None, None
        except ChunkLabError as e:
            state, result, error = "failed", None, one_line(str(e))
        except Exception as e:  # the thread's end is the only place left to report it
            _log.exception("%s failed", self.title)
            state, result, error = "failed", None, one_line(f"{type(e).__name__}: {e}")
        else:
            error = None
            state = "done"
        self.seconds = time.perf_counter() - self.started
        self.result, self.error = result, error
        self.state = state  # last: readers that see the end see its result too


def start_job(title: str, fn: Callable[[Progress], Any], **meta: Any) -> Job:
    """Run ``fn(progress)`` in a daemon thread; ``progress`` raises ``Cancelled`` after :meth:`Job.cancel`.

    ``fn`` must not call Streamlit (it runs outside any script run).
    """
    # A job importing a module the script thread is importing at the same moment can be handed
    # a partially initialized module ("PIL.Image has no attribute Image", seen in the tests):
    # import the shared heavy ones here first, in the script thread.
    import PIL.Image  # noqa: F401

    job = Job(title, meta)
    job.thread = threading.Thread(target=job._run, args=(fn,), name=f"chunklab-job: {title}", daemon=True)
    job.thread.start()
    return job


@st.fragment(run_every=1.0)
def job_progress(job_key: str, cancel_key: str) -> None:
    """Progress bar, ETA and Cancel button of the job at ``st.session_state[job_key]``.

    Reruns itself every second while the job runs, and the whole page once it ends.
    """
    job: Job | None = st.session_state.get(job_key)
    if job is None:
        return
    if not job.running:
        st.rerun()  # the whole page: it shows the results
    elapsed = time.perf_counter() - job.started
    cancelling = job.cancel_token.cancelled  # the button's callback ran before this
    text = f"{job.title}: {'cancelling…' if cancelling else job.label} · {elapsed:.0f}s"
    with st.container(horizontal=True, vertical_alignment="center"):
        st.progress(job.fraction, text=text)
        st.button("Cancel", key=cancel_key, icon=":material/stop_circle:", disabled=cancelling, on_click=job.cancel)


# --- displays ------------------------------------------------------------------------------------


def format_parameters(n: int) -> str:
    """``134515008`` → ``134.5M``; 0 (unknown) → ``—``."""
    if n <= 0:
        return "—"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def model_card(info: ModelInfo | None, key: str) -> None:
    """A bordered card with the model's name, source, size, device, dtype and context length."""
    with st.container(border=True, key=key):
        if info is None:
            st.caption("Not loaded.")
            return
        st.text(info.name)  # names and paths are user or server input: plain text
        st.caption(info.source)
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


def sidebar_models() -> None:
    """Which models this session has loaded (from session state: never loads one)."""
    lm: ModelInfo | None = st.session_state.get(LM_INFO)
    emb: ModelInfo | None = st.session_state.get(EMB_INFO)
    st.markdown("**Models**")
    st.text(f"LM: {lm.name}" if lm else "LM: not loaded")
    if lm:
        st.caption(_summary(lm))
    st.text(f"Embedder: {emb.name}" if emb else "Embedder: not loaded")
    if emb:
        st.caption(_summary(emb))
    choice = st.session_state.get(CHAT_CHOICE)
    chat = "default" if choice is None else "bundled model" if choice[0] == "local" else f"{choice[1][1]} (API)"
    st.text(f"Chat: {chat}")


def sentence_nll_chart(scores: list[SentenceScore]) -> go.Figure:
    """Mean NLL per sentence as a line, with each sentence's start in the hover label."""
    import plotly.graph_objects as go

    def preview(text: str) -> str:
        flat = " ".join(text[:160].split())
        return html.escape(flat[:79] + "…" if len(flat) > 80 else flat, quote=False)

    fig = go.Figure(
        go.Scatter(
            x=[s.index for s in scores],
            y=[s.nll_mean for s in scores],
            mode="lines+markers",
            marker={"size": 4},
            line={"width": 1.5, "color": "#2563eb"},
            customdata=[[s.tokens, s.ppl, preview(s.text)] for s in scores],
            hovertemplate="sentence %{x}<br>mean NLL %{y:.2f} · PPL %{customdata[1]:.1f}"
            " · %{customdata[0]} tokens<br>%{customdata[2]}<extra></extra>",
        )
    )
    fig.update_layout(
        height=260,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis_title="sentence",
        yaxis_title="mean NLL (nats)",
    )
    return fig


def score_results(scores: list[SentenceScore], seconds: float, model: str) -> None:
    """Summary figures, the per-sentence NLL line and the table of sentence scores."""
    import pandas as pd

    scored = [s for s in scores if s.tokens]
    total = sum(s.tokens for s in scored)
    mean = sum(s.nll_mean * s.tokens for s in scored) / total if total else float("nan")
    cols = st.columns(4)
    cols[0].metric("Sentences", f"{len(scores):,}", border=True)
    cols[1].metric("Scored tokens", f"{total:,}", border=True)
    cols[2].metric("Mean NLL", f"{mean:.3f}", help="Token-weighted mean, natural log", border=True)
    cols[3].metric("Time", f"{seconds:.1f} s", help="Including cache lookups", border=True)
    st.caption("Model")
    st.text(model)  # a remote server names its own models: plain text
    if len(scored) > 1:
        st.plotly_chart(sentence_nll_chart(scores), key="models_nll_chart", config={"displaylogo": False})
    rows = [s.to_json() for s in scores]
    table = pd.DataFrame(rows, columns=["index", "tokens", "nll_mean", "ppl", "text"])
    st.dataframe(
        table,
        key="models_scores",
        hide_index=True,
        column_config={
            "index": st.column_config.NumberColumn("#", format="%d", width=50),
            "tokens": st.column_config.NumberColumn("Tokens", format="%d", width=70),
            "nll_mean": st.column_config.NumberColumn("Mean NLL", format="%.3f", width=90),
            "ppl": st.column_config.NumberColumn("PPL", format="%.2f", width=90),
            "text": st.column_config.TextColumn("Sentence", width="large"),  # cells are plain text, never HTML
        },
    )
