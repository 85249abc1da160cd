"""Building blocks of the Compare page: the grid of columns, configuration cards, the inspector."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence, TypeVar

import streamlit as st

from backend.chunking import ChunkerConfig, Chunking, ConfigEntry, edit_counts
from backend.figures.export import export_name
from backend.figures.text import esc, inspector_html, tag_badge_html
from backend.lab.compare import neighbours
from backend.lab.edit import edited_title, is_edited
from backend.text.document import Document
from components.edit import edit_copy_button
from components.keys import COMPARE
from components.pipeline import pipeline_panel, snippet_models
from components.state import configurations, last_removed, remove_configuration, undo_remove

__all__ = ["grid", "export_name", "export_stem", "download_buttons", "config_title", "config_card", "undo_remove_bar", "chunk_inspector"]

T = TypeVar("T")


def grid(items: Sequence[T], per_row: int) -> Iterator[tuple[Any, T]]:
    """Lay ``items`` out in rows of at most ``per_row`` equal columns; yields ``(column, item)``.

    A wrapped last row keeps the width of the full rows, so columns line up.
    """
    width = min(len(items), per_row)
    for row_start in range(0, len(items), per_row):
        row = items[row_start : row_start + per_row]
        yield from zip(st.columns(width), row)


def export_stem(doc_source: str, tag: str, chunking: Chunking) -> str:
    """A file name (without extension) naming the document and the configuration.

    >>> export_stem("My report.pdf", "B", chunking)  # doctest: +SKIP
    'My-report__B-fixed_token-chunk_overlap125_chunk_size250-cl100k'
    """
    cfg = chunking.config
    if cfg.name == "manual":  # an edited copy: its base's chunker and what the edits did, not the long edit list
        p = cfg.params_dict
        added, removed = edit_counts(str(p.get("edits", "")))
        try:
            base = ChunkerConfig.parse(str(p.get("base", "")))[0]
        except ValueError:
            base = "base"
        return export_name(doc_source, f"{tag}-manual-{base}-{added}added-{removed}removed")
    params = "_".join(f"{k}{v}" for k, v in cfg.params)
    return export_name(doc_source, f"{tag}-{cfg.name}-{params}-{cfg.tokenizer}")


def download_buttons(entry: ConfigEntry, chunking: Chunking, doc_source: str, key: str) -> None:
    """The JSONL and CSV downloads of a chunking (``key`` has a ``{}`` for the format: ``jsonl``, ``csv``)."""
    stem = export_stem(doc_source, entry.tag, chunking)
    # Callables: the files are only built when a button is pressed.
    st.download_button(
        "JSONL", chunking.to_jsonl, file_name=f"{stem}.jsonl", mime="application/jsonl",
        key=key.format("jsonl"), icon=":material/download:", on_click="ignore",
        help="One JSON object per chunk: index, start, end, text, tokens",
    )
    st.download_button(
        "CSV", chunking.to_csv, file_name=f"{stem}.csv", mime="text/csv",
        key=key.format("csv"), icon=":material/download:", on_click="ignore",
        help="Columns index, start, end, tokens, text",
    )


def config_title(entry: ConfigEntry, color: str) -> None:
    """The configuration's coloured tag and chunker name."""
    st.html(f"{tag_badge_html(entry.tag, color)}<b>{esc(entry.config.name)}</b>")


def config_card(
    entry: ConfigEntry, chunking: Chunking | None, error: str | None, doc_source: str, color: str,
    note: str | None = None,
    on_retry: Callable[[], None] | None = None,
    doc: Document | None = None,
) -> None:
    """A bordered card: what the configuration is, how it did, its downloads, "Edit a copy", a remove button and
    "Use in your pipeline" (:func:`components.pipeline.pipeline_panel`, with the session's models).

    ``note`` says why a configuration has no chunks yet (e.g. it waits for a language model);
    ``on_retry`` (its model run was cancelled or failed) adds a "Run again" button calling it;
    ``doc`` (the document shown) adds "Edit a copy" once the configuration has chunks. An edited
    copy's card names it by its base ("C = A, edited: 3 cuts added, 1 removed").
    """
    uid, cfg = entry.uid, entry.config
    with st.container(border=True, key=COMPARE(f"card_{uid}")):
        config_title(entry, color)
        if is_edited(cfg):  # the edit list can be long: the title says what it did, the Edit page shows it
            st.caption(f"{esc(edited_title(entry, configurations()))} · tokenizer {cfg.tokenizer}")
        else:
            params = ", ".join(f"{k} = {v}" for k, v in cfg.params) or "default parameters"
            st.caption(f"{params} · tokenizer {cfg.tokenizer}")
        if error:
            st.error(error, icon=":material/error:")
        elif chunking is not None:
            st.caption(f"**{len(chunking.chunks):,}** chunks · {chunking.time_text}")
            if chunking.degraded:  # an LLM chunker fell back on a model-free split: say it where it is seen
                st.warning(esc(chunking.run_report or ""), icon=":material/warning:")
            elif chunking.run_report:  # what the chunker reported, e.g. an LLM chunker's content loss
                st.caption(esc(chunking.run_report))
        elif note:
            st.caption(note)
        with st.container(horizontal=True, gap="small"):
            if chunking is not None:
                download_buttons(entry, chunking, doc_source, COMPARE(f"dl_{{}}_{uid}"))
                if doc is not None:
                    edit_copy_button(cfg, doc, entry.tag, COMPARE(f"edit_{uid}"))
            if chunking is None and on_retry is not None:
                st.button(
                    "Run again", key=COMPARE(f"retry_{uid}"), icon=":material/replay:", on_click=on_retry,
                    help="Start this configuration's model run again",
                )
            st.button(
                "Remove", key=COMPARE(f"remove_{uid}"), icon=":material/close:", type="tertiary",
                on_click=remove_configuration, args=(uid,), help="Remove this configuration",
            )
        lm, embedder = snippet_models(cfg)
        pipeline_panel(cfg, chunking, doc_source, COMPARE(f"pipe_{uid}"), tag=entry.tag, lm=lm, embedder=embedder)


def undo_remove_bar() -> None:
    """After a Remove: which configuration went, and an Undo that puts it back with its letter and place."""
    entry = last_removed()
    if entry is None:
        return
    with st.container(horizontal=True, gap="small", vertical_alignment="center"):
        st.caption(f"Removed {entry.tag}: {esc(entry.config.label)}")
        st.button(
            "Undo", key=COMPARE("undo_remove"), icon=":material/undo:", on_click=undo_remove,
            help="Put the removed configuration back, with its letter and place",
        )


def chunk_inspector(entry: ConfigEntry, chunking: Chunking, text: str, key: str) -> None:
    """A chunk picker and the picked chunk with its previous and next neighbours.

    Args:
        entry: The configuration entry (for its tag).
        chunking: Its chunks.
        text: The document text.
        key: Session-state key of the picker (the strip's click handler writes it too).
    """
    if not len(chunking):
        st.caption(f"{entry.tag}: no chunks")
        return
    last = len(chunking) - 1
    index = st.number_input(
        f"{entry.tag} · chunk index", min_value=0, max_value=last, step=1, key=key, persist_state="session",
        help=f"0 to {last:,}: the index used in the exports",
    )
    view = neighbours(chunking, int(index))
    st.html(inspector_html(text, view.previous, view.current, view.next))
