""""Open an earlier run's output folder": the expander the Tune and Corpus pages share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from backend.errors import ChunkLabError, one_line

__all__ = ["open_folder_expander"]


def open_folder_expander(*, key: Callable[[str], str], opened_key: str, check: Callable[[Any], Path],
                         command: str, placeholder: str | None = None) -> None:
    """A folder input and "Open": a folder ``check`` accepts is kept (as text) under ``opened_key``.

    Args:
        key: The page's widget-key maker (``TUNE``, ``CORPUS``): the input is ``key("open_path")``, the button
            ``key("open_run")``.
        opened_key: The session key of the folder opened.
        check: Returns the checked folder, or raises a :class:`~backend.errors.ChunkLabError` (shown in one line).
        command: The CLI command whose ``--out`` also writes such a folder (``tune``, ``corpus``).
        placeholder: The input's placeholder.
    """
    with st.expander("Open an earlier run's output folder"):
        with st.container(horizontal=True, vertical_alignment="bottom"):
            raw = st.text_input("Output folder", key=key("open_path"), placeholder=placeholder,
                                help=f"A folder a run of this page or `python -m backend {command} --out` wrote")
            if st.button("Open", key=key("open_run"), icon=":material/folder_open:"):
                try:
                    st.session_state[opened_key] = str(check(raw))
                except ChunkLabError as e:
                    st.error(one_line(str(e)), icon=":material/error:")
