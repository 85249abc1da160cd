"""Metrics of chunkings: statistics (``stats``) and MoC's chunk-quality metrics (``quality``)."""
