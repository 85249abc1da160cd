"""Streamlit widgets, plots and session helpers used by the pages (the backend never imports these)."""

__all__ = ["cached", "charts", "config_form", "documents", "layout", "render", "state", "views"]
