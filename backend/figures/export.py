"""Exporting figures: a self-contained HTML file (plotly.js inlined, so it opens offline), PNG when possible.

Every exported file (a figure, a table's CSV, the report) is named by :func:`export_name`: the
document's name, then what the file holds.

A page of several figures (the one-file report) inlines plotly.js once (:func:`plotly_js`) and
each figure as a bare ``<div>`` (:func:`figure_div`), the way :func:`figure_html` does for one.
Both draw with Plotly's own template (:data:`STANDALONE_TEMPLATE`): once Streamlit is imported,
every new figure carries Streamlit's template, whose colours are placeholders only its
frontend fills in, so outside the app they would draw wrong (and a heat map not at all).
"""

from __future__ import annotations

import importlib.util
import os
import re

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

__all__ = [
    "FIGURE_CONFIG", "STANDALONE_TEMPLATE", "export_name", "figure_div", "figure_html", "plotly_js",
    "png_export_available",
]

FIGURE_CONFIG = {"displaylogo": False, "responsive": True}  # no link to plotly's site in the mode bar
STANDALONE_TEMPLATE = "plotly"


def export_name(doc_source: str, view: str) -> str:
    """A file name (without extension): the document's name, then what the file holds, both made safe.

    >>> export_name("My report.pdf", "quality-K0.80")
    'My-report__quality-K0.80'
    """
    name = doc_source.replace("\\", "/").rsplit("/", 1)[-1]
    stem = _safe(os.path.splitext(name)[0]) or "document"
    return f"{stem}__{_safe(view)}"


def _safe(text: str) -> str:
    """Letters, digits, ``.``, ``_`` and ``-`` only (any script), no leading or trailing separators."""
    return re.sub(r"[^\w.-]+", "-", text).strip("-.")


def _standalone(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` with :data:`STANDALONE_TEMPLATE` (the caller's figure is left as it is)."""
    out = go.Figure(fig)
    out.update_layout(template=STANDALONE_TEMPLATE)
    return out


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML page of ``fig`` (plotly.js inlined: it opens offline, with no request to any network)."""
    return _standalone(fig).to_html(include_plotlyjs=True, full_html=True)


def plotly_js() -> str:
    """The plotly.js bundle shipped with the ``plotly`` package, for one inline ``<script>`` (no CDN)."""
    return get_plotlyjs()


def figure_div(fig: go.Figure, div_id: str) -> str:
    """``fig`` as a ``<div>`` and the script that draws it, without plotly.js (see :func:`plotly_js`).

    A fixed ``div_id`` keeps the output the same for the same figure.
    """
    return _standalone(fig).to_html(
        full_html=False, include_plotlyjs=False, include_mathjax=False, div_id=div_id, config=FIGURE_CONFIG
    )


def png_export_available() -> bool:
    """Whether Plotly can write PNG here (it needs the ``kaleido`` package)."""
    return importlib.util.find_spec("kaleido") is not None
