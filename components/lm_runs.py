"""Model-backed work in the app: which language model it uses, cache-only lookups, background jobs.

Model-backed chunkers (registry specs with ``"needs": ["lm"]``) and the PPL page run the
session's language model, or the bundled default when the session has chosen none (pages
name it). The model is part of every result's identity: the same configuration on another
model is another result, so results are keyed by the model's fingerprint.

A page must never freeze on a model call. It first asks for the result from the output
cache alone (:meth:`SessionModels.cache_only <backend.lab.models.SessionModels.cache_only>`,
:meth:`~backend.lab.models.SessionModels.cached_document_scores`) around the session's models
(:func:`session_models`), so a document scored before opens in milliseconds, and a miss raises
:class:`~backend.errors.NotCached` at once instead of loading the model. Only then does the
page starts the background job a task of :mod:`backend.lab` planned (a
:class:`~backend.lab.jobs.JobPlan`: its signature, title and body; :func:`start_plan`, shown by
:func:`model_job_panel`): it loads the default model if needed, computes, and fills the output
cache, so the page's next lookup hits.

Session-state keys are the caller's: the model-run panel's come from the page's
:class:`~components.keys.PageKeys` (``keys.lm_results``, ``keys.lm_job``…), on the writing and
the reading side alike.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

import streamlit as st

from backend.chunkers.run import ChunkOutcome
from backend.chunking import ChunkerConfig, Chunking, ConfigEntry
from backend.errors import ChunkLabError, NotCached
from backend.jobs import Job
from backend.lab.compare import chunk_entries, pending, ready
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.lab.runs import GroupRun, model_group, plan_model_runs, runs_cover
from backend.models.types import ModelInfo
from backend.text.document import Document
from components.cached import chunk_document, chunk_with_model
from components.keys import EMB_CHOICE, EMB_INFO, LM_INFO, PageKeys
from components.models import current_scorer, freeze_long_lived, job_progress, session_chat

__all__ = [
    "session_models",
    "start_plan",
    "model_job_panel",
    "model_chunking",
    "waiting_note",
    "pending_runs_panel",
    "page_chunkings",
]


def session_models() -> SessionModels:
    """The session's models: its loaded language model, or the default (not loaded) when it has chosen none."""
    scorer = current_scorer() if st.session_state.get(LM_INFO) is not None else None
    embedder: ModelInfo | None = st.session_state.get(EMB_INFO)
    return SessionModels.of(
        scorer, embedder_spec=st.session_state.get(EMB_CHOICE), chat=session_chat(),
        embedder_loaded=embedder.name if embedder is not None else None,
        embedder_loaded_fingerprint=embedder.fingerprint if embedder is not None else None,
    )


# --- jobs ----------------------------------------------------------------------------------------


def start_plan(plan: JobPlan) -> Job:
    """Start ``plan`` in the background; a model it loads is frozen out of Streamlit's garbage collections."""
    return plan.start(on_model_loaded=freeze_long_lived)


def model_job_panel(
    job_key: str,
    plan: JobPlan,
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
    """The finished job for ``plan``, or its progress / messages / start button (then None).

    - A running job with the plan's signature: its progress bar, ETA and Cancel button.
    - A running job for something else (another document or model): cancelled, superseded.
    - No job yet: started at once when ``auto``, else a ``run_label`` button.
    - A cancelled or failed job: a one-line message and the button (never restarted alone).
    - A done job: returned.

    With ``confirm`` (a run too long to start on one click), the button is disabled until the
    ``confirm`` checkbox is ticked; the tick is forgotten when the plan's signature changes.

    Args:
        job_key: Session-state key of the job.
        plan: The wanted job (its signature is compared with ``job.meta["signature"]``).
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
    signature = plan.signature
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
        st.session_state[job_key] = start_plan(plan)
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
        st.session_state[job_key] = start_plan(plan)
        job_progress(job_key, cancel_key, preview)
    return None


def model_chunking(doc: Document, config: ChunkerConfig, lm: SessionModels, keys: PageKeys) -> Chunking:
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
    held: ChunkOutcome | None = st.session_state.get(keys.lm_results, {}).get((doc.id, lm.models_key, config))
    if held is not None and held.state == "failed":
        raise ChunkLabError(held.error)
    if held is not None and held.chunking is not None:
        return held.chunking
    context = lm.cache_only()
    if context is None:
        raise NotCached(f"{lm.name} has not run on this document yet")
    return chunk_with_model(doc, doc.id, config, lm.models_key, context)


def _forget_job(job_key: str) -> None:
    """Drop an ended job, so that the model-run panel starts the run again on the next script run."""
    job = st.session_state.get(job_key)
    if job is not None and not job.running:
        del st.session_state[job_key]


def waiting_note(
    doc: Document, lm: SessionModels, config: ChunkerConfig, keys: PageKeys
) -> tuple[str, Callable[[], None] | None]:
    """What a configuration's card says while it has no chunks, and a callback that runs it again.

    ``Waiting for <the models it needs>…`` while its group's run (:func:`backend.lab.runs.model_group`)
    is queued or running; when that run was cancelled or failed, that, with a callback (for a
    button's ``on_click``) after which :func:`pending_runs_panel` starts the run again. Another
    group's job never speaks for this card.
    """
    models = lm.needed_by(config)
    job_key = keys.group_job(model_group(config))
    job: Job | None = st.session_state.get(job_key)
    ended = job is not None and not job.running and runs_cover(job.meta.get("signature"), doc, lm, config)
    if ended and job.state in ("cancelled", "failed"):
        what = "was cancelled" if job.state == "cancelled" else "failed"
        return f"The run with {models} {what}.", partial(_forget_job, job_key)
    return f"Waiting for {models}…", None


def pending_runs_panel(
    doc: Document,
    lm: SessionModels,
    configs: Sequence[ChunkerConfig],
    keys: PageKeys,
    preview: Callable[[Job], None] | None = None,
) -> None:
    """Run the model-backed configurations that are not cached in background jobs, one per model, side by side.

    :func:`backend.lab.runs.plan_model_runs` splits them by the model they run (language
    model, embedder, chat model); each group's job starts on its own (once per document,
    models and set of configurations) with its own progress bar and Cancel button, and runs at
    the same time as the others (jobs on one model take turns: the waiting one's bar says it
    is queued). After a cancel or a failure a "Run with <model>" button starts that group's job
    again. A finished job's outcomes (:func:`backend.chunkers.run.run_configs`: a chunking or a
    one-line error each) go to ``st.session_state[keys.lm_results]`` (this document's only),
    read by :func:`model_chunking`, and the page reruns to show them while the other groups
    go on. ``preview(job)`` draws what the language model's running job has published so far
    under its bar (see :func:`model_job_panel`).
    """
    runs = plan_model_runs(doc, lm, configs)
    n = len(configs)
    names = " and ".join(dict.fromkeys(run.plan.model for run in runs))
    together = " side by side" if len(runs) > 1 else ""
    st.caption(
        f"{n} configuration{'s' if n != 1 else ''} use{'s' if n == 1 else ''} a model: "
        f"running {'it' if n == 1 else 'them'} with {names}{together} in the background."
    )
    arrived = False
    for run in runs:
        arrived = _group_panel(doc, lm, run, keys, preview if run.group == "lm" else None, several=len(runs) > 1) or arrived
    if arrived:
        st.rerun()


def _group_panel(
    doc: Document, lm: SessionModels, run: GroupRun, keys: PageKeys, preview: Callable[[Job], None] | None,
    *, several: bool,
) -> bool:
    """One group's job in the panel; whether its finished outcomes were new (stored: the page must rerun)."""
    plan, group = run.plan, run.group
    models = plan.model
    job = model_job_panel(
        keys.group_job(group), plan, run_label=f"Run with {models}", run_key=keys.group_run(group),
        cancel_key=keys.group_cancel(group), what=f"The run with {models}" if several else "The model run",
        preview=preview, resume=lm.scoring_resume_note(doc.text) if plan.needs_lm else None,
    )
    if job is None:
        return False
    held = {k: v for k, v in st.session_state.get(keys.lm_results, {}).items() if k[0] == doc.id}
    fresh = {(doc.id, lm.models_key, outcome.config): outcome for outcome in job.result}
    if any(k not in held for k in fresh):
        held.update(fresh)
        st.session_state[keys.lm_results] = held
        return True
    st.warning(f"{models} ran, but the results are missing: run again.", icon=":material/warning:")
    if st.button(f"Run with {models}", key=keys.group_rerun(group), icon=":material/play_arrow:"):
        st.session_state[keys.group_job(group)] = start_plan(plan)
        st.rerun()
    return False


def page_chunkings(
    doc: Document, entries: Sequence[ConfigEntry], lm: SessionModels | None, keys: PageKeys
) -> tuple[list[tuple[ConfigEntry, Chunking]], list[ConfigEntry]]:
    """The page's configurations chunked (:func:`backend.lab.compare.chunk_entries`): model-backed ones from the
    page's model runs or the cache, the rest at once; a failure is one line each, the pending ones run in the
    model-run panel (when the session's models are usable).

    Returns:
        ``(entry, chunking)`` of those that have chunks, and the entries still waiting for a model run.
    """
    columns = chunk_entries(
        doc, entries, lambda d, c: chunk_document(d, d.id, c), lambda d, c: model_chunking(d, c, lm, keys)
    )
    for column in columns:
        if column.error:
            st.error(f"{column.entry.tag}: {column.error}", icon=":material/error:")
    waiting = pending(columns)
    if waiting and lm is not None and not lm.error:
        pending_runs_panel(doc, lm, [e.config for e in waiting], keys)
    return ready(columns), waiting
