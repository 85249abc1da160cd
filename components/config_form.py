"""The "Add configuration" form, generated from the chunker registry's specs.

Nothing here knows any particular chunker: one widget per declared parameter, typed by
its spec (int/float → number input with the declared range, str with choices → select,
str → text, bool → toggle). A new chunker in the registry appears here with no UI code.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import streamlit as st

from backend.tokenizers import TOKENIZER_NAMES

__all__ = ["param_label", "param_widget", "rst_to_md", "default_chunker", "add_config_form", "TOKENIZER_HELP"]

# The chunker the form opens on when the registry lists it as model-free (else the first model-free one).
PREFERRED_DEFAULT = "recursive"

TOKENIZER_HELP = {
    "cl100k": "OpenAI cl100k_base (GPT-4, text-embedding-3)",
    "minilm": "WordPiece of all-MiniLM-L6-v2",
    "smollm2": "SmolLM2-135M (byte-level BPE)",
    "words": "whitespace-separated words",
    "chars": "characters",
}


def rst_to_md(text: str) -> str:
    """Docstring markup (``code``) to Markdown (`code`)."""
    return re.sub(r"``(.+?)``", r"`\1`", text)


def param_label(name: str) -> str:
    """``chunk_overlap`` → ``Chunk overlap``."""
    return name.replace("_", " ").capitalize()


def param_widget(param: Mapping[str, Any], key: str) -> Any:
    """One input widget for a parameter spec; returns its value."""
    kind, default, help_ = param["type"], param["default"], rst_to_md(param.get("help") or "")
    label = param_label(param["name"])
    choices = param.get("choices")
    if choices:
        options = list(choices)
        index = options.index(default) if default in options else 0
        return st.selectbox(label, options, index=index, help=help_, key=key)
    if kind == "bool":
        return st.toggle(label, value=bool(default), help=help_, key=key)
    if kind == "int":
        lo, hi = param.get("min"), param.get("max")
        return st.number_input(
            label,
            min_value=int(lo) if lo is not None else None,
            max_value=int(hi) if hi is not None else None,
            value=int(default),
            step=1,
            help=help_,
            key=key,
        )
    if kind == "float":
        lo, hi = param.get("min"), param.get("max")
        return st.number_input(
            label,
            min_value=float(lo) if lo is not None else None,
            max_value=float(hi) if hi is not None else None,
            value=float(default),
            step=0.01,
            format="%.3f",
            help=help_,
            key=key,
        )
    return st.text_input(label, value="" if default is None else str(default), help=help_, key=key)


def default_chunker(specs: Sequence[Mapping[str, Any]], preferred: str = PREFERRED_DEFAULT) -> str:
    """The chunker the form opens on: one that needs no model (``needs`` empty in the registry).

    Picking a configuration must not start a model run by itself, so the default is ``preferred``
    when the registry lists it as model-free, else the first model-free chunker, else the first.
    """
    free = [s["name"] for s in specs if not s.get("needs")]
    if preferred in free:
        return preferred
    return free[0] if free else specs[0]["name"]


def add_config_form(specs: Sequence[Mapping[str, Any]], prefix: str) -> tuple[str, dict[str, Any], str] | None:
    """The chunker picker and a form with the tokenizer and one widget per parameter.

    The chunker is picked outside the form so that the parameter widgets follow the choice
    at once; everything else is batched until "Add configuration" is pressed. It opens on a
    model-free chunker (:func:`default_chunker`).

    Args:
        specs: :func:`backend.chunkers.chunker_specs` output.
        prefix: Session-state key prefix for every widget here.

    Returns:
        ``(chunker name, params, tokenizer)`` on the run where the form was submitted, else ``None``.
    """
    by_name = {s["name"]: s for s in specs}
    names = list(by_name)
    name = st.selectbox(
        "Chunker",
        names,
        index=names.index(default_chunker(specs)),
        format_func=lambda n: f"{n} · {by_name[n]['family']}",
        key=f"{prefix}_chunker",
        persist_state="session",
    )
    spec = by_name[name]
    st.caption(rst_to_md(spec["summary"]), help=rst_to_md(spec["doc"]) if spec["doc"] else None)
    with st.form(f"{prefix}_form", border=True):
        tokenizer = st.selectbox(
            "Tokenizer",
            list(TOKENIZER_NAMES),
            format_func=lambda t: f"{t} — {TOKENIZER_HELP.get(t, t)}",
            key=f"{prefix}_tokenizer",
            help="Counts the tokens of chunk_size and overlap, and the sizes shown in the stats.",
        )
        params = {p["name"]: param_widget(p, key=f"{prefix}_{name}_{p['name']}") for p in spec["params"]}
        submitted = st.form_submit_button(
            "Add configuration", type="primary", icon=":material/add:", key=f"{prefix}_submit", width="stretch"
        )
    return (name, params, tokenizer) if submitted else None
