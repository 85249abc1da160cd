"""Plotly figure builders: data in, figures out; no Streamlit."""
