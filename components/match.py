"""The "Match lengths" panel (Compare and Quality pages): tune configurations to one mean chunk length.

Both Meta-Chunking and MoC compare chunkers only at equal mean chunk length. For a target
(tokens), :func:`backend.chunkers.match_length.match_length` bisects each selected configuration's
length parameter (chunk size, PPL threshold or target length) until its mean chunk length is
within ±5 %, or reports the closest reachable. Configurations that need no model are tuned
in the script run (chunking is fast); as soon as one needs a model (language model, embedder
or chat model), all of them are tuned in a background job with progress and Cancel. The user then replaces the
configurations with the tuned ones (same letters).

Session-state keys: the page's ``match_*`` (``keys("match_result")``…, see :mod:`components.keys`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from backend.chunkers.match_length import DEFAULT_TOLERANCE, MatchResult, match_length
from backend.chunking import ChunkerConfig
from backend.errors import Cancelled, ChunkLabError, one_line
from backend.text.document import Document
from components.cached import specs
from components.keys import CONFIGS, PageKeys
from components.state import configurations

__all__ = ["MatchOutcome", "match_rows", "run_matches", "replace_with_tuned", "match_lengths_panel"]

DEFAULT_TARGET = 200


@dataclass(frozen=True)
class MatchOutcome:
    """The match of every selected configuration of one document to one target.

    Attributes:
        doc_id: The document's id.
        target: Target mean length (tokens).
        results: ``(uid, MatchResult or one-line error)`` per selected configuration.
    """

    doc_id: str
    target: int
    results: tuple[tuple[int, MatchResult | str], ...]


def run_matches(
    doc: Document, configs: Sequence[tuple[int, ChunkerConfig]], target: float, context: Any = None,
    progress: Any = None,
) -> tuple[tuple[int, MatchResult | str], ...]:
    """Match each configuration to ``target``; one failing does not stop the others (a cancel does).

    Args:
        doc: The document.
        configs: ``(uid, config)`` pairs.
        target: Target mean length in tokens.
        context: A factory ``context(part, parts)`` returning the ModelContext for one
            configuration (model-backed chunkers), or None.
        progress: ``progress(done, total)`` after each configuration.
    """
    out = []
    for k, (uid, config) in enumerate(configs):
        try:
            ctx = context(k, len(configs)) if context is not None else None
            out.append((uid, match_length(doc, config, target, context=ctx)))
        except Cancelled:
            raise
        except ChunkLabError as e:
            out.append((uid, one_line(str(e))))
        if progress is not None:
            progress(k + 1, len(configs))
    return tuple(out)


def match_rows(entries: Sequence[dict[str, Any]], outcome: MatchOutcome) -> list[dict[str, Any]]:
    """Table rows: tag, chunker, tuned parameter (before → after), target, achieved, deviation, status."""
    by_uid = {e["uid"]: e for e in entries}
    rows = []
    for uid, result in outcome.results:
        entry = by_uid.get(uid)
        if entry is None:  # removed since
            continue
        row = {"configuration": entry["tag"], "chunker": entry["config"].name, "target": outcome.target}
        if isinstance(result, str):
            row.update(parameter="—", before=None, after=None, achieved=None, deviation=None, status=result)
        else:
            name = result.parameter
            row.update(
                parameter=name or "— (no length parameter)",
                before=str(entry["config"].params_dict.get(name)) if name else None,
                after=str(result.config.params_dict.get(name)) if name else None,
                achieved=round(result.achieved, 1),
                deviation=round(100 * result.error, 1),
                status=f"within ±{DEFAULT_TOLERANCE:.0%}" if result.within else "closest reachable",
            )
        rows.append(row)
    return rows


def replace_with_tuned(outcome: MatchOutcome) -> int:
    """Replace each matched configuration by its tuned one (same uid and letter); how many changed."""
    tuned = {uid: r.config for uid, r in outcome.results if isinstance(r, MatchResult) and r.parameter}
    changed = 0
    new = []
    for e in configurations():
        cfg = tuned.get(e["uid"])
        if cfg is not None and cfg != e["config"]:
            e = {**e, "config": cfg}
            changed += 1
        new.append(e)
    st.session_state[CONFIGS] = new
    return changed


def _on_replace(keys: PageKeys) -> None:
    """The "Use the tuned configurations" button's callback."""
    outcome: MatchOutcome | None = st.session_state.get(keys("match_result"))
    if outcome is None:
        return
    n = replace_with_tuned(outcome)
    plural = "s" if n != 1 else ""
    st.session_state[keys("match_note")] = f"Replaced {n} configuration{plural} with the tuned one{plural}."
    st.session_state.pop(keys("match_result"), None)


def match_lengths_panel(doc: Document, entries: Sequence[dict[str, Any]], keys: PageKeys) -> None:
    """Target input, configuration picker, "Match lengths" button, the results and "Use the tuned ones".

    Args:
        doc: The current document.
        entries: The session's configurations (``configurations()``).
        keys: The page's session-state keys (``COMPARE``, ``QUALITY``).
    """
    from components.lm_runs import model_job_panel, session_lm, start_model_job

    note = st.session_state.pop(keys("match_note"), None)
    if note:
        st.success(note, icon=":material/check:")
    if not entries:
        st.caption("No configurations to match.")
        return
    by_uid = {e["uid"]: e for e in entries}
    sel_key = keys("match_sel_" + "_".join(map(str, by_uid)))  # a configuration added or removed: all again
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        target = st.number_input(
            "Target mean length (tokens)", min_value=1, max_value=100_000, value=DEFAULT_TARGET, step=10,
            key=keys("match_target"), width=220,
            help="Each configuration's own tokenizer counts the tokens.",
        )
        chosen = st.multiselect(
            "Configurations", list(by_uid), default=list(by_uid), key=sel_key,
            format_func=lambda u: f"{by_uid[u]['tag']} · {by_uid[u]['config'].name}" if u in by_uid else str(u),
        )
        clicked = st.button("Match lengths", key=keys("match_run"), icon=":material/straighten:")
    chosen = [u for u in chosen if u in by_uid]
    configs = tuple((u, by_uid[u]["config"]) for u in chosen)
    needs = {s["name"]: set(s.get("needs") or ()) for s in specs()}
    needs_model = any(needs.get(c.name) for _, c in configs)  # any model: a background job, never inline
    request_key, result_key = keys("match_request"), keys("match_result")
    if clicked:
        st.session_state.pop(result_key, None)
        if not configs:
            st.error("Pick at least one configuration to match.", icon=":material/error:")
        elif not needs_model:
            with st.spinner("Matching lengths…", show_time=True):
                results = run_matches(doc, configs, float(target))
            st.session_state[result_key] = MatchOutcome(doc.id, int(target), results)
            st.session_state.pop(request_key, None)
        else:
            st.session_state[request_key] = (doc.id, configs, int(target))
    request = st.session_state.get(request_key)
    if request is not None and request[0] == doc.id:
        lm = session_lm()
        _doc_id, req_configs, req_target = request
        needs_lm = any("lm" in needs.get(c.name, ()) for _, c in req_configs)
        if needs_lm and lm.error:
            st.error(lm.error, icon=":material/error:")
            st.session_state.pop(request_key, None)
        else:
            signature = ("match", doc.id, lm.models_key, req_configs, req_target)

            def start():
                from backend.chunkers.context import ModelContext
                from backend.jobs import start_job

                def run(scorer, progress, d=doc, c=req_configs, t=req_target, emb=lm.embedder_spec, chat=lm.chat):
                    def context(k: int, n: int) -> ModelContext:
                        part = progress.part(k, n, "configuration")
                        return ModelContext(scorer=scorer, embedder_spec=emb, chat=chat, progress=part)

                    return MatchOutcome(d.id, t, run_matches(d, c, float(t), context=context))

                title = f"Matching lengths to {req_target} tokens"
                if needs_lm:
                    return start_model_job(f"{title} with {lm.name}", lm, run, signature)
                # Embedder or chat models only: the context loads what it needs; the scoring model stays unloaded.
                return start_job(title, lambda progress: run(None, progress), signature=signature, model=lm.label)

            job = model_job_panel(
                keys("match_job"), signature, start, run_label="Match lengths again",
                run_key=keys("match_retry"), cancel_key=keys("match_cancel"), what="Matching lengths",
            )
            if job is not None:
                st.session_state[result_key] = job.result
                st.session_state.pop(request_key, None)
    outcome: MatchOutcome | None = st.session_state.get(result_key)
    if outcome is None or outcome.doc_id != doc.id:
        return
    import pandas as pd

    rows = match_rows(entries, outcome)
    if not rows:
        return
    st.dataframe(
        pd.DataFrame(rows),
        key=keys("match_table"),
        hide_index=True,
        column_config={
            "configuration": st.column_config.TextColumn("", width=40),
            "chunker": st.column_config.TextColumn("Chunker"),
            "parameter": st.column_config.TextColumn("Tuned parameter"),
            "before": st.column_config.TextColumn("Before"),
            "after": st.column_config.TextColumn("After"),
            "target": st.column_config.NumberColumn("Target", format="%d"),
            "achieved": st.column_config.NumberColumn("Achieved", format="%.1f", help="Mean chunk length in tokens"),
            "deviation": st.column_config.NumberColumn("Deviation %", format="%+.1f"),
            "status": st.column_config.TextColumn("Status"),
        },
    )
    tunable = [r for _, r in outcome.results if isinstance(r, MatchResult) and r.parameter]
    st.button(
        "Use the tuned configurations", key=keys("match_apply"), icon=":material/published_with_changes:",
        type="primary", disabled=not tunable, on_click=_on_replace, args=(keys,),
        help="Replace each matched configuration with its tuned one (it keeps its letter).",
    )
