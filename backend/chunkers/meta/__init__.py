"""Meta-Chunking (Zhao et al.): perplexity chunking, margin sampling, dynamic combination and overlap.

- ``algorithms``: the boundary rules on per-sentence values, dynamic combination, the
  margin-sampling loop and the θ → chunk-count curve, on plain numbers (no model).
- ``chunkers``: the registered chunkers (``ppl``, ``ppl_combined``, ``ppl_overlap``,
  ``margin_sampling``) that feed those rules with cached model outputs; each also chunks from
  outputs already known (``chunk_from_means``, ``chunk_from_steps``), the PPL page's entry.
- ``results``: the per-sentence scores and margin decisions those re-chunks start from, and
  their CSV export.
"""
