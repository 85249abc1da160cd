""""Use in your pipeline": a configuration's pip line, spec and ready code, on a Compare card and the tuning result.

Everything shown is :func:`backend.lab.snippet.pipeline_snippet`'s (one call); this module only draws it,
in a collapsed expander: the note, the spec, the pip line, the code in three tabs (each ``st.code`` block
has its own copy button) and a download of it all. An edited copy (``manual``) is tied to its document:
its note says so plainly and it offers its chunks' JSONL, under the file name its data snippets read.
"""

from __future__ import annotations

import streamlit as st

from backend.chunkers import config_needs
from backend.chunking import ChunkerConfig, Chunking
from backend.figures.export import export_name
from backend.figures.markdown import md_text
from backend.lab.snippet import pipeline_snippet
from components.keys import EMB_CHOICE, LM_CHOICE

__all__ = ["pipeline_panel", "snippet_models"]

_TABS = ("Plain", "LangChain", "LlamaIndex")


def snippet_models(config: ChunkerConfig) -> tuple[str | None, str | None]:
    """The session's language model and embedder as ``chunklab.Chunker(lm=…, embedder=…)`` takes them.

    None where the session uses the default, so the snippet names no model: the language model's
    spec as the Models page loaded it (a local path or hub id; ``remote`` for the OpenAI-compatible
    server, whose address the library reads from ``CHUNKLAB_REMOTE_BASE_URL``) and the embedder's
    spec (a path, a hub id, ``remote`` or a server URL). The language model is named only for a
    chunker that scores with it: the app's LLM chunkers use the session's chat model, never its
    language model, so theirs keeps the library's default.
    """
    lm = None
    choice = st.session_state.get(LM_CHOICE)
    if choice is not None and "lm" in config_needs(config):
        kind, spec = choice
        lm = "remote" if kind == "remote" else spec
    return lm, st.session_state.get(EMB_CHOICE) or None


def pipeline_panel(
    config: ChunkerConfig, chunking: Chunking | None, doc_name: str, key: str, *, tag: str,
    lm: str | None = None, embedder: str | None = None,
) -> None:
    """A collapsed "Use in your pipeline" expander for ``config`` (not inside another expander).

    Args:
        config: The configuration (an edited copy gives the data form).
        chunking: Its chunks, when it has them (an edited copy's JSONL download); None: pending, failed, or
            not needed (the tuning pick).
        doc_name: The document's file name (the snippet's ``chunklab.load`` line, an edited copy's data file).
        key: The expander's key; its download buttons' keys add ``_snippet`` and ``_data``.
        tag: The configuration's letter (``pick`` for the tuning result): part of the download's file name.
        lm: The session's language model spec when it is not the default (see :func:`snippet_models`).
        embedder: The session's embedder spec when it is not the default.
    """
    snippet = pipeline_snippet(config, lm=lm, embedder=embedder, document=doc_name)
    with st.expander("Use in your pipeline", icon=":material/integration_instructions:", key=key):
        if snippet.tied:
            st.info(md_text(snippet.note), icon=":material/link:")
        else:
            st.caption(md_text(snippet.note))
        st.code(snippet.spec, language=None, wrap_lines=True)
        st.code(snippet.pip, language="bash")
        for tab, code in zip(st.tabs(_TABS), (snippet.plain, snippet.langchain, snippet.llamaindex)):
            tab.code(code, language="python")
        with st.container(horizontal=True, gap="small"):
            st.download_button(
                "Snippet", snippet.text(), file_name=export_name(f"chunklab-{tag}", config.name) + ".txt",
                mime="text/plain", key=f"{key}_snippet", icon=":material/download:", on_click="ignore",
                help="The note, spec, pip line and the three snippets as one text file",
            )
            if snippet.tied and chunking is not None:
                st.download_button(
                    "Chunks (JSONL)", chunking.to_jsonl, file_name=snippet.data_file, mime="application/jsonl",
                    key=f"{key}_data", icon=":material/download:", on_click="ignore",
                    help="The edited copy's chunks, one JSON object per line: what the snippets above read",
                )
        if snippet.tied and chunking is None:
            st.caption("Its chunks can be downloaded here once it has them (when its run is done).")
