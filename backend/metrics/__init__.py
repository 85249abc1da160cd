"""Metrics of chunkings.

- ``stats``: document and chunking statistics (counts, token lengths, overlap).
- ``quality``: MoC's Boundary Clarity, Chunk Stickiness, dissimilarity and CP on cached pair scores.
- ``report``: the metric table and ``quality_row``, one row per chunking for the CLI and the Quality page.
- ``scores``: scoring chunkings for those metrics, reading them back from the cache, and their keys.
- ``cost``: what a scoring run costs (pairs, tokens, time at a measured throughput).
"""
