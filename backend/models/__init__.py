"""Model backend: causal-LM scoring and embeddings on GPU or CPU.

Modules (heavy libraries load inside functions, never on import):

- ``types``: the shared result types and protocols (:class:`ModelInfo`, :class:`TokenScores`,
  :class:`Scorer`, :class:`Progress`, :class:`CancelToken`).
- ``devices``: device selection (``CHUNKLAB_DEVICE``), dtypes, memory-sized batches, OOM back-off.
- ``lm``: loading causal LMs (the bundled SmolLM2 GGUF, a local directory or a hub id), with the
  dequantized weights of the GGUF cached on disk; one instance per process.
- ``scorer``: :class:`LocalScorer` and ``load_scorer`` (one per loaded LM) — document NLL with a sliding KV window, conditional NLL of
  (context, continuation) pairs reusing the context's KV cache, next-token probabilities.
- ``remote``: :class:`RemoteScorer` — the same protocol over an OpenAI-compatible completions
  endpoint that returns prompt log-probs.
- ``embedder``: batched, normalized sentence embeddings (bundled all-MiniLM-L6-v2 by default).
"""

from backend.models.types import CancelToken, ModelInfo, Progress, Scorer, TokenScores

__all__ = ["CancelToken", "ModelInfo", "Progress", "Scorer", "TokenScores"]
