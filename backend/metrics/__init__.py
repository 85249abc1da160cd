"""Metrics of chunkings: statistics (``stats``), MoC's chunk-quality metrics (``quality``), the quality report (``report``), its scores (``scores``) and their cost (``cost``)."""
