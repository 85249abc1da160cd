"""Text for Streamlit's Markdown: user input (a query, a model or corpus name, a configuration's label) made inert.

Captions and notes the lab builds (:mod:`backend.lab`) are Markdown strings; anything in them that
came from a user or a file goes through :func:`md_text` first, so ``*``, ``[…](…)`` or ``<b>`` show
as typed.
"""

from __future__ import annotations

import re

__all__ = ["md_text"]

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")


def md_text(text: str) -> str:
    """``text`` (a query, a model or corpus name) safe to place in Markdown: special characters escaped, one line."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))
