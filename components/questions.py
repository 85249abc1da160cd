"""The "Questions on this document" panel: generate a question set on the loaded document in one click.

Shown on the Summary and Retrieval pages (each with its own :class:`~components.keys.PageKeys`).
The user picks a method — the session's chat model when one is configured, the bundled small
model (with its plain warning) or the model-free questions — and how many; the button
says how long it is expected to take on this machine. A model runs as a background job
(progress, ETA, Cancel: :func:`components.lm_runs.model_job_panel`); the model-free method runs
in the page when the document is small enough (:func:`backend.lab.questions.runs_inline`). The
kept questions become the session's question set (``st.session_state[QSET]``): merged when it
holds questions on this document, replaced otherwise — the set the session file embeds and
the Retrieval page's hand marks add to. Everything it decides is :mod:`backend.lab.questions`.
"""

from __future__ import annotations

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.markdown import md_text
from backend.jobs import Job
from backend.lab.questions import (
    ChatEndpoint,
    generate_now,
    generation_options,
    on_document,
    plan_generation,
    runs_inline,
    session_set_after,
)
from backend.retrieval.generation import GeneratedQuestions
from backend.text.document import Document
from components.keys import CHAT_CHOICE, CHAT_KEY, QSET, PageKeys
from components.lm_runs import model_job_panel
from components.retrieval import candidates_frame

__all__ = ["panel_expanded", "question_generation_panel", "session_chat_endpoint"]

_ORDER = ("chat", "model-free", "bundled")


def session_chat_endpoint() -> ChatEndpoint | None:
    """The session's chat API for generation: its Models-page choice, else ``OPENAI_*``; None when it chose the bundled chat."""
    choice = st.session_state.get(CHAT_CHOICE)
    if choice is None:
        return ChatEndpoint()
    kind, spec = choice
    if kind == "local":
        return None
    base_url, model = spec
    return ChatEndpoint(base_url=base_url or "", model=model or "", api_key=st.session_state.get(CHAT_KEY) or "")


def _preview(job: Job) -> None:
    """The running job's kept and attempted counts and what the panel promised."""
    kept, attempts = job.partial
    st.caption(f"{kept} kept of {attempts} attempted so far · expected {job.meta.get('estimate', '?')}")


def _apply(doc: Document, gen: GeneratedQuestions, keys: PageKeys) -> None:
    """Make ``gen``'s kept questions the session's set (merged or replaced), remember what happened, redraw the page.

    The whole page reruns, so what it drew of the session's set above the panel shows the new one.
    """
    st.session_state[keys("qgen_result")] = gen
    try:
        update = session_set_after(st.session_state.get(QSET), gen, doc)
    except ChunkLabError as e:
        st.session_state[keys("qgen_message")] = one_line(str(e))
        return
    st.session_state[QSET] = update.qset
    st.session_state[keys("qgen_message")] = update.message
    st.rerun()


def _forget(keys: PageKeys) -> None:
    """Drop the finished run, so the panel offers the button again."""
    for name in ("qgen_job", "qgen_result", "qgen_message", "qgen_applied"):
        st.session_state.pop(keys(name), None)


def panel_expanded(doc: Document, keys: PageKeys) -> bool:
    """Whether the page opens the panel's expander: no question set on this document yet, or a result to show."""
    held: GeneratedQuestions | None = st.session_state.get(keys("qgen_result"))
    return not on_document(st.session_state.get(QSET), doc) or (held is not None and held.corpus_text == doc.text)


def question_generation_panel(doc: Document, keys: PageKeys) -> None:
    """One click "Generate questions on this document": method, count, estimate, progress, and the result.

    Args:
        doc: The loaded document.
        keys: The page's keys (every widget and job key of the panel is ``keys("qgen_…")``).
    """
    chat = session_chat_endpoint()
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    n = int(right.number_input("Questions", min_value=1, max_value=100, value=10, step=1, key=keys("qgen_n"),
                                 persist_state="session"))
    options = generation_options(n, chat)
    # One click should not start minutes of work unasked: without a chat model, model-free comes first.
    by_method = {o.method: o for o in sorted(options, key=lambda o: _ORDER.index(o.method)) if o.available}
    method = left.radio(
        "Method", list(by_method), key=keys("qgen_method"), horizontal=True, persist_state="session",
        format_func=lambda m: f"{by_method[m].title} · {by_method[m].estimate}",
        help="The chat model follows the Chroma report; the bundled model and the model-free questions "
        "are weaker but need no API (the model-free ones, measured, rank chunkings closer to hand-written "
        "questions than the bundled model's do).",
    )
    unavailable = [o for o in options if not o.available]
    for o in unavailable:
        st.caption(f"{o.title}: {o.why_not}.")
    chosen = by_method[method]
    if chosen.warning and method == "bundled":
        st.warning(chosen.warning, icon=":material/warning:")
    elif chosen.warning:
        st.caption(chosen.warning)
    label = f"Generate questions on this document · {chosen.estimate}"

    held: GeneratedQuestions | None = st.session_state.get(keys("qgen_result"))
    if held is not None and held.corpus_text != doc.text:
        _forget(keys)  # another document: its result is not this one's
    if runs_inline(method, doc):
        if st.button(label, key=keys("qgen_go"), icon=":material/auto_awesome:", type="primary"):
            try:
                _apply(doc, generate_now(doc, n), keys)
            except ChunkLabError as e:
                st.error(one_line(str(e)), icon=":material/error:")
    else:
        try:
            plan = plan_generation(doc, n, method=method, chat=chat)
        except ChunkLabError as e:
            st.error(one_line(str(e)), icon=":material/error:")
            return
        job = model_job_panel(
            keys("qgen_job"), plan, run_label=label, run_key=keys("qgen_go"), cancel_key=keys("qgen_cancel"),
            auto=False, what="Question generation", preview=_preview,
        )
        if job is not None and st.session_state.get(keys("qgen_applied")) is not job:
            st.session_state[keys("qgen_applied")] = job
            _apply(doc, job.result, keys)
        elif job is not None:
            st.button("Generate again", key=keys("qgen_again"), icon=":material/refresh:", on_click=_forget, args=(keys,))

    gen: GeneratedQuestions | None = st.session_state.get(keys("qgen_result"))
    if gen is None:
        return
    if gen.weak and gen.notice:
        st.caption(md_text(gen.notice))
    st.caption(md_text(gen.how))
    message = st.session_state.get(keys("qgen_message"))
    if message:
        (st.success if gen.questions else st.warning)(message, icon=":material/playlist_add_check:")
    with st.expander(f"Candidates ({len(gen.candidates)}: kept or why not)"):
        st.dataframe(candidates_frame(gen), key=keys("qgen_table"), hide_index=True)
