"""Metrics of chunkings.

- ``stats``: document and chunking statistics (counts, token lengths, overlap).
- ``formulas``: MoC's Boundary Clarity, Chunk Stickiness and dissimilarity, and their estimates from a
  sample: pure arithmetic on a pair table or on embeddings (tables in, numbers out, no model).
- ``scores``: which chunk pairs those need, scoring them through the cache (and CP), reading them back
  without a model, their keys, and the Quality page's anytime scoring job.
- ``report``: the metric table and ``quality_row``, one row per chunking for the CLI and the Quality page.
- ``estimate``: an estimate with its 95% interval, and the seeded stratified order samples follow.
- ``cost``: what a scoring run costs (pairs, tokens, time at a measured throughput).
"""
