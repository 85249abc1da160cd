"""Exporting figures: a self-contained HTML file (plotly.js inlined, so it opens offline), PNG when possible."""

from __future__ import annotations

import importlib.util

import plotly.graph_objects as go

__all__ = ["figure_html", "png_export_available"]


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML page of ``fig`` (plotly.js inlined: it opens offline, with no request to any network)."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def png_export_available() -> bool:
    """Whether Plotly can write PNG here (it needs the ``kaleido`` package)."""
    return importlib.util.find_spec("kaleido") is not None
