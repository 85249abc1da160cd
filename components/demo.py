"""Demo mode: the bundled sample, the demo configurations, model outputs from the shipped cache, a short tour.

``CHUNKLAB_DEMO=1`` starts every session in demo mode; the sidebar's "Demo mode" switch
turns it on in a running app. Turning it on opens :data:`backend.samples.DEMO`: its sample,
its configurations on Compare (replacing the session's), its question on Retrieval (searched
on the page's first visit) and the benchmark of its bundled question set, run as it opens, so
the Summary — whichever page is visited first — has its recall and IoU beside BC, CS and DS.
The model outputs all of this needs are read through the same code paths as always, from the
read-only entries ``scripts/make_demo_cache.py`` ships
(:func:`backend.models.cache.enable_demo_cache`): cache hits, not special cases, so every page
draws at once and no model loads. The benchmark is answered in the opening run itself (the
plan's ``from_cache``, under the session's cache-only model context); only where the cache
lacks something (a demo cache from other models) does it run as a background job.

The tour is one caption per page saying what to look at, until the session hides it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from backend.config import demo
from backend.errors import ChunkLabError, one_line
from backend.lab.benchmark import plan_benchmark, qset_name
from backend.lab.settings import QUESTION_SOURCES
from backend.models.cache import enable_demo_cache
from backend.progress import Progress
from backend.samples import DEMO
from components.cached import sample_questions
from components.documents import load_bundled_sample
from components.keys import BENCHMARK, CONFIGS, DEMO_MODE, DEMO_ON, PageKeys
from components.lm_runs import session_models
from components.retrieval import start_benchmark
from components.settings import put
from components.state import add_configuration, configurations, normalized_config

__all__ = ["TOUR", "init_demo", "demo_sidebar", "tour_caption", "take_demo_start", "demo_question", "end_demo_runs"]

_TOGGLE = DEMO_MODE("toggle")
_PENDING = DEMO_MODE("pending")  # prefixes of the pages whose one-time demo run has not happened yet
_HIDDEN = DEMO_MODE("tour_hidden")
_STARTING = ("ret",)  # Retrieval: its demo search starts on the page's first visit
_PROBLEM = DEMO_MODE("problem")  # why the demo benchmark could not start (one line), shown in the tour

# What to look at, per page title (the navigation's).
TOUR: dict[str, str] = {
    "Summary": "The verdict: which configuration retrieves best and cuts cleanest, with every number behind it.",
    "Document": "The bundled short story: its size, sentences and language. Every page works on this text.",
    "Compare": "Four chunkers side by side: the boundary strip shows where each cuts, the histograms how long "
    "its chunks are, and the curves (at the bottom) what PPL and semantic chunking cut on.",
    "Meta-Chunking": "Each sentence's perplexity given the text before it: minima deep enough (θ) end a chunk. "
    "Move θ: the chunks below re-cut at once, with no model call.",
    "Quality": "Boundary clarity (higher is better) and dissimilarity per configuration: the table's best "
    "values are green; the chart shows BC at every boundary.",
    "Retrieval": "A question from the story's bundled set, asked of every configuration: compare their top "
    "chunks and scores against the marked answer.",
    "Benchmark": "All twelve bundled questions × the four configurations: IoU, recall and precision per "
    "configuration, then per question in the heat map.",
    "Models": "The bundled models every result came from; in demo mode their outputs are read from the "
    "shipped cache.",
}


def _apply() -> None:
    """Open the demo: its sample, its configurations (replacing the session's), its one-time runs, the tour."""
    enable_demo_cache()
    load_bundled_sample(DEMO.sample)
    st.session_state[CONFIGS] = []
    for name, params in DEMO.configs:
        add_configuration(normalized_config(name, params))
    st.session_state[_PENDING] = set(_STARTING)
    st.session_state[_HIDDEN] = False
    _start_benchmark()


def _start_benchmark() -> None:
    """The demo's benchmark: the sample's bundled question set × every demo configuration, as the Benchmark page runs it.

    The Benchmark page's settings are set to that run first, so the page shows it as its own.
    Answered here from the shipped cache when it holds every output (chunkings through the
    session's cache-only language model, embeddings from the cache); else a background job.
    """
    put("benchmark", "source", QUESTION_SOURCES[1])
    put("benchmark", "sample", DEMO.sample)
    put("benchmark", "retrieve", DEMO.k)
    put("benchmark", "auto", False)
    put("benchmark", "cross", True)
    st.session_state.pop(BENCHMARK("configs"), None)  # every configuration is picked
    st.session_state.pop(_PROBLEM, None)
    models = session_models()
    try:
        plan = plan_benchmark(
            sample_questions(DEMO.sample), configurations(), models, embedder=None, retrieve=DEMO.k, auto=False,
            cross_corpus=True, name=qset_name(QUESTION_SOURCES[1], DEMO.sample),
        )
    except ChunkLabError as e:
        st.session_state[_PROBLEM] = one_line(f"the demo benchmark could not start: {e}")
        return
    context = models.cache_only()
    refusing = context.scorer if context is not None else None  # NotCached on any language-model call
    if refusing is not None:
        body = plan.body
        plan = replace(plan, from_cache=lambda: body(refusing, Progress()))
    start_benchmark(plan)


def init_demo() -> None:
    """On a session's first run: demo mode when ``CHUNKLAB_DEMO`` is set (after the shared session keys exist)."""
    if DEMO_ON in st.session_state:
        return
    st.session_state[DEMO_ON] = demo()
    st.session_state[_TOGGLE] = st.session_state[DEMO_ON]
    if not st.session_state[DEMO_ON]:
        return
    if "session" in st.query_params:
        enable_demo_cache()  # the link's session stays: it was opened just before (a reload's ?configs= does not)
        st.session_state[_HIDDEN] = False
        return
    _apply()


def end_demo_runs() -> None:
    """Forget the demo's one-time runs not started yet (a session opened over the demo keeps its own state)."""
    st.session_state.pop(_PENDING, None)


def _on_toggle() -> None:
    """The sidebar switch: turning demo mode on opens the demo again; off keeps what is open, without the tour."""
    on = bool(st.session_state[_TOGGLE])
    st.session_state[DEMO_ON] = on
    if on:
        _apply()


def demo_sidebar() -> None:
    """The "Demo mode" switch, in the sidebar."""
    st.session_state.setdefault(_TOGGLE, bool(st.session_state.get(DEMO_ON)))
    with st.sidebar:
        st.toggle(
            "Demo mode", key=_TOGGLE, on_change=_on_toggle,
            help="Open the bundled story with four configurations and precomputed model outputs, "
            "so every page shows its full content at once; with a short tour. Replaces the configurations.",
        )


def tour_caption(page_title: str) -> None:
    """The tour's caption for the page titled ``page_title``, with a button that hides the tour for the session."""
    text = TOUR.get(page_title)
    if not st.session_state.get(DEMO_ON) or st.session_state.get(_HIDDEN) or text is None:
        return
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key=DEMO_MODE("tour")):
        problem = st.session_state.get(_PROBLEM)
        st.caption(f":material/tour: **Tour** · {text}" + (f" ({problem})" if problem else ""), width="stretch")
        st.button(
            "Hide the tour", key=DEMO_MODE("tour_hide"), type="tertiary", icon=":material/close:",
            on_click=lambda: st.session_state.update({_HIDDEN: True}),
        )


def take_demo_start(keys: PageKeys) -> bool:
    """Whether the page of ``keys`` should start its demo run now: True once per demo opening, then False."""
    pending: set[str] = st.session_state.get(_PENDING) or set()
    if not st.session_state.get(DEMO_ON) or keys.prefix not in pending:
        return False
    st.session_state[_PENDING] = pending - {keys.prefix}
    return True


def demo_question() -> Any:
    """The bundled question the demo asks on the Retrieval page (a ``Question``: text and answer spans)."""
    return sample_questions(DEMO.sample).questions[DEMO.question]
