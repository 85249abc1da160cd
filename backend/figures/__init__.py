"""Plotly figures built from backend results: data in, ``go.Figure`` out, no Streamlit.

- ``traces``: helpers shared by the figures (gaps for non-finite values, many segments as one trace).
- ``ppl``: the Meta-Chunking page's figures (per-sentence values, drops, θ curve, margins).
- ``curves``: any chunker's :class:`~backend.curves.Curve` (the Compare page's Curves section).
- ``quality``: the Quality page's figures (BC along the document, CS against K, stickiness graphs).
- ``retrieval``: the Retrieval and Benchmark pages' figures (metric bars, heat maps, coverage, histograms).
"""

__all__ = ["curves", "ppl", "quality", "retrieval", "traces"]
