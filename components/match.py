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

import pandas as pd
import streamlit as st

from backend.chunking import ConfigEntry
from backend.lab.match import TARGET, MatchOutcome, match_rows, needs_model, plan_match, run_matches, tuned_entries
from backend.text.document import Document
from components.keys import CONFIGS, PageKeys
from components.lm_runs import model_job_panel, session_models
from components.state import configurations

__all__ = ["match_lengths_panel"]


def _on_replace(keys: PageKeys) -> None:
    """The "Use the tuned configurations" button's callback."""
    outcome: MatchOutcome | None = st.session_state.get(keys("match_result"))
    if outcome is None:
        return
    entries, n = tuned_entries(configurations(), outcome)
    st.session_state[CONFIGS] = entries
    plural = "s" if n != 1 else ""
    st.session_state[keys("match_note")] = f"Replaced {n} configuration{plural} with the tuned one{plural}."
    st.session_state.pop(keys("match_result"), None)


def match_lengths_panel(doc: Document, entries: Sequence[ConfigEntry], keys: PageKeys) -> None:
    """Target input, configuration picker, "Match lengths" button, the results and "Use the tuned ones".

    Args:
        doc: The current document.
        entries: The session's configurations (``configurations()``).
        keys: The page's session-state keys (``COMPARE``, ``QUALITY``).
    """
    note = st.session_state.pop(keys("match_note"), None)
    if note:
        st.success(note, icon=":material/check:")
    if not entries:
        st.caption("No configurations to match.")
        return
    by_uid = {e.uid: e for e in entries}
    sel_key = keys("match_sel_" + "_".join(map(str, by_uid)))  # a configuration added or removed: all again
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        target = st.number_input(
            "Target mean length (tokens)", min_value=TARGET.min, max_value=TARGET.max, value=TARGET.default, step=10,
            key=keys("match_target"), width=220, help=TARGET.help,
        )
        chosen = st.multiselect(
            "Configurations", list(by_uid), default=list(by_uid), key=sel_key,
            format_func=lambda u: f"{by_uid[u].tag} · {by_uid[u].config.name}" if u in by_uid else str(u),
        )
        clicked = st.button("Match lengths", key=keys("match_run"), icon=":material/straighten:")
    chosen = [u for u in chosen if u in by_uid]
    configs = tuple((u, by_uid[u].config) for u in chosen)
    request_key, result_key = keys("match_request"), keys("match_result")
    if clicked:
        st.session_state.pop(result_key, None)
        if not configs:
            st.error("Pick at least one configuration to match.", icon=":material/error:")
        elif not needs_model(configs):
            with st.spinner("Matching lengths…", show_time=True):
                st.session_state[result_key] = run_matches(doc, configs, float(target))
            st.session_state.pop(request_key, None)
        else:  # any model: a background job, never inline
            st.session_state[request_key] = (doc.id, configs, int(target))
    request = st.session_state.get(request_key)
    if request is not None and request[0] == doc.id:
        lm = session_models()
        _doc_id, req_configs, req_target = request
        plan = plan_match(doc, lm, req_configs, req_target)
        if plan.needs_lm and lm.error:
            st.error(lm.error, icon=":material/error:")
            st.session_state.pop(request_key, None)
        else:
            job = model_job_panel(
                keys("match_job"), plan, run_label="Match lengths again",
                run_key=keys("match_retry"), cancel_key=keys("match_cancel"), what="Matching lengths",
            )
            if job is not None:
                st.session_state[result_key] = job.result
                st.session_state.pop(request_key, None)
    outcome: MatchOutcome | None = st.session_state.get(result_key)
    if outcome is None or outcome.doc_id != doc.id:
        return
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
    st.button(
        "Use the tuned configurations", key=keys("match_apply"), icon=":material/published_with_changes:",
        type="primary", disabled=not outcome.tunable, on_click=_on_replace, args=(keys,),
        help="Replace each matched configuration with its tuned one (it keeps its letter).",
    )
