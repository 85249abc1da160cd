"""Meta-Chunking (Zhao et al.): perplexity chunking, margin sampling, dynamic combination and overlap.

- ``algorithms``: the boundary rules on per-sentence values, dynamic combination and the
  margin-sampling loop, on plain numbers (no model).
- ``chunkers``: the registered chunkers (``ppl``, ``ppl_combined``, ``ppl_overlap``,
  ``margin_sampling``) that feed those rules with cached model outputs.
"""
