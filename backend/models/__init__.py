"""Model backend: causal-LM scoring and embeddings on GPU or CPU.

Modules (heavy libraries load inside functions, never on import):

- ``types``: the shared result types and protocols (:class:`ModelInfo`, :class:`TokenScores`,
  :class:`PartialTokenScores`, :class:`Scorer`); progress and cancel live in :mod:`backend.progress`.
- ``devices``: device selection (``CHUNKLAB_DEVICE``), dtypes, memory-sized batches, OOM back-off.
- ``lm``: loading causal LMs (the bundled SmolLM2 GGUF, a local directory or a hub id), with the
  dequantized weights of the GGUF cached on disk; one instance per process.
- ``scorer``: :class:`LocalScorer` and ``load_scorer`` (one per loaded LM) — document NLL with a
  sliding KV window, conditional NLL of (context, continuation) pairs reusing the context's KV
  cache, next-token probabilities.
- ``remote``: :class:`RemoteScorer` — the same protocol over an OpenAI-compatible completions
  endpoint that returns prompt log-probs.
- ``chat``: chat models for the LLM chunkers and question generation — :class:`RemoteChat` over
  an OpenAI-compatible API, :class:`LocalChat` over a local LM — and the on-disk reply cache.
- ``openai_compat``: the one client layer ``chat``, ``remote`` and ``remote_embedder`` share —
  their constructor (:class:`RemoteClient`), settings, the ``openai`` client, retries, model
  discovery, key-free error messages.
- ``identity``: a model's fingerprint without loading it (cache lookups with no model).
- ``embedder``: batched, normalized sentence embeddings (bundled all-MiniLM-L6-v2 by default).
- ``remote_embedder``: :class:`RemoteEmbedder` — embeddings from an OpenAI-compatible
  ``/v1/embeddings`` server (``--embedder remote``), keyed by the served model, its dimension
  and what it computes for a probe text.
- ``probes``: the probe vectors seen under each served name, which tell apart models served
  under one name.
- ``embeddings``: embeddings of text lists through the output cache, keyed by the weights.
- ``hub``: whether the Hugging Face hub is reachable (probed before a hub id is fetched).
- ``cache``: the persistent, checksummed, size-bounded on-disk cache of model outputs.
- ``scoring``: document, sentence and pair scores through that cache (used by pages and CLI).
- ``usage``: which language model the running jobs are loading or computing with (the sidebar's status).
"""

from backend.models.types import ModelInfo, Scorer, TokenScores

__all__ = ["ModelInfo", "Scorer", "TokenScores"]
