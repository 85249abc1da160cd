"""Plotly figures of the pages, built from backend results (no Streamlit)."""
