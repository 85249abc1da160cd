"""What model-backed chunkers run with: which language model or embedder, the output cache, progress.

Chunkers that need a model declare ``needs = ("lm",)`` (or ``("embedder",)``);
:meth:`Chunker.chunk` hands them a :class:`ModelContext`. The CLI builds one from ``--lm``/``--device``/``--no-cache``; the app
builds one around the session's model and a progress tracker. The model itself is not part
of a chunker's configuration: the same configuration on another model is another result,
and callers key their caches by :attr:`ModelContext.fingerprint` as well.

:meth:`ModelContext.cache_only` builds a context that answers from the output cache alone:
every model call raises :class:`~backend.errors.NotCached` at once, and its lookups take no
compute lock. A page asks it first, so a document chunked before opens in milliseconds and
a miss never freezes the page; the model run then happens in a background job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.errors import ModelError, NotCached
from backend.models.cache import OutputCache, default_cache
from backend.models.chat import ChatModel, RemoteChat, default_chat_model
from backend.models.embedder import load_embedder
from backend.models.embeddings import TextEmbedder, embed_texts, embeddings_key
from backend.models.identity import embedder_fingerprint_without_loading, fingerprint_without_loading
from backend.models.remote import RemoteScorer, is_remote_lm
from backend.models.scorer import load_scorer
from backend.models.scoring import cached_token_scores, document_token_scores, scored_tokens
from backend.models.timing import record_cached
from backend.models.types import ModelInfo, Scorer, TokenScores
from backend.progress import Progress

__all__ = ["ModelContext", "unloaded_model_info"]


@dataclass
class ModelContext:
    """The language model, cache and progress a model-backed chunker uses.

    Attributes:
        scorer: A loaded :class:`~backend.models.types.Scorer`; None loads ``lm`` on first use.
        lm: The local model to load when ``scorer`` is None (None: ``CHUNKLAB_LM`` or the bundled one);
            ``remote``: a :class:`~backend.models.remote.RemoteScorer` on the ``CHUNKLAB_REMOTE_*`` server.
        device: Where to load it (None: ``CHUNKLAB_DEVICE`` or automatic).
        use_cache: Read and write the on-disk cache of model outputs.
        window: Context window for document scoring (None: the model's).
        progress: The model work's progress (tokens scored, texts embedded); one with a cancel
            token stops the work.
        on_load: Called with no argument just before a model is loaded (e.g. to show "loading…").
        chat: The chat model of LLM chunkers (``needs = ("chat",)``); None picks one on first
            use: an OpenAI-compatible API when one is configured, else ``lm`` as a local chat
            model (see :func:`backend.models.chat.default_chat_model` and ``CHUNKLAB_CHAT``).
        embedder: A loaded embedder (:class:`~backend.models.embeddings.TextEmbedder`); None
            loads ``embedder_spec`` on first use.
        embedder_spec: The embedder to load when ``embedder`` is None (None: ``CHUNKLAB_EMBEDDER``
            or the bundled all-MiniLM-L6-v2); loaded on ``device``.
    """

    scorer: Scorer | None = None
    lm: str | None = None
    device: str | None = None
    use_cache: bool = True
    window: int | None = None
    progress: Progress | None = None
    on_load: Any = None
    chat: ChatModel | None = None
    embedder: TextEmbedder | None = None
    embedder_spec: str | None = None
    _cache: OutputCache | None = field(default=None, repr=False)

    @classmethod
    def cache_only(
        cls, model: ModelInfo, *, embedder_spec: str | None = None, chat: ChatModel | None = None
    ) -> ModelContext:
        """A context that answers from the output cache only: any model call raises ``NotCached``.

        Its scorer and chat model carry the real models' identities (the cache keys are made of
        them) but refuse to compute; its embedder is never loaded. Its lookups take none of the
        cache's compute locks (``OutputCache.get_or_compute`` would wait for a job computing the
        same key, and a page must not wait).

        Args:
            model: The language model's identity (its ``ModelInfo``, or :func:`unloaded_model_info`).
            embedder_spec: The embedder whose cached vectors to read (None: the default one).
            chat: The chat model whose cached answers to read (None: the default one).
        """
        refusing_chat = _RefusingChat(chat) if chat is not None else None
        return _CacheOnlyContext(scorer=_RefusingScorer(model), embedder_spec=embedder_spec, chat=refusing_chat)

    @property
    def cache(self) -> OutputCache | None:
        """The output cache (the process default), or None when caching is off."""
        if not self.use_cache:
            return None
        if self._cache is None:
            self._cache = default_cache()
        return self._cache

    def get_scorer(self) -> Scorer:
        """The scorer, loading the local model (or connecting to the remote one) on first use.

        Raises:
            ModelError: the model cannot be loaded, or the remote server cannot be reached.
        """
        if self.scorer is None:
            if self.on_load is not None:
                self.on_load()
            if is_remote_lm(self.lm):
                self.scorer = RemoteScorer()
            else:
                self.scorer = load_scorer(self.lm, self.device, self.progress)
        return self.scorer

    @property
    def fingerprint(self) -> str | None:
        """The model's fingerprint when known without loading it (a loaded scorer, or a GGUF spec)."""
        if self.scorer is not None:
            return self.scorer.info.fingerprint
        if is_remote_lm(self.lm):
            return None  # the server names its model: known once connected
        try:
            return fingerprint_without_loading(self.lm)
        except ModelError:
            return None

    def token_scores(self, text: str) -> TokenScores:
        """Per-token NLLs of ``text``: from the cache when possible (without loading the model), else scored."""
        cache = self.cache
        if cache is not None and self.scorer is None:
            fp = self.fingerprint
            if fp is not None:
                hit = cached_token_scores(cache, fp, text, self.window)
                if hit is not None:
                    if self.progress is not None:
                        self.progress.set_unit("tokens")
                        self.progress(scored_tokens(hit), scored_tokens(hit))
                    return hit
        scores, _hit = document_token_scores(
            text, self.get_scorer(), window=self.window, cache=cache, progress=self.progress
        )
        return scores

    def get_embedder(self) -> TextEmbedder:
        """The embedder, loading ``embedder_spec`` on first use.

        Raises:
            ModelError: the embedder cannot be loaded.
        """
        if self.embedder is None:
            if self.on_load is not None:
                self.on_load()
            self.embedder = load_embedder(self.embedder_spec, self.device)
        return self.embedder

    @property
    def embedder_fingerprint(self) -> str | None:
        """The embedder's fingerprint when known without loading it (a loaded embedder, or a local folder)."""
        if self.embedder is not None:
            return self.embedder.info.fingerprint
        try:
            return embedder_fingerprint_without_loading(self.embedder_spec)
        except ModelError:
            return None

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalized embeddings of ``texts``: from the cache when possible (without loading the embedder)."""
        cache = self.cache
        if texts and cache is not None and self.embedder is None:
            fp = self.embedder_fingerprint
            if fp is not None:
                hit = cache.get(embeddings_key(fp, texts))
                if hit is not None and len(hit.get("vectors", ())) == len(texts):
                    record_cached(hit)
                    if self.progress is not None:
                        self.progress.set_unit("texts")
                        self.progress(len(texts), len(texts))
                    return np.asarray(hit["vectors"], dtype=np.float32)
        vectors, _hit = embed_texts(self.get_embedder(), texts, cache=cache, progress=self.progress)
        return vectors

    @property
    def _local_lm(self) -> str | None:
        """``lm`` as a local model spec (the remote scorer's server is no chat model: None, the default)."""
        return None if is_remote_lm(self.lm) else self.lm

    def get_chat(self) -> ChatModel:
        """The chat model, chosen on first use (see the ``chat`` attribute).

        Raises:
            ModelError: ``CHUNKLAB_CHAT`` asks for an API that is not configured.
        """
        if self.chat is None:
            self.chat = default_chat_model(self._local_lm, self.device, self.on_load)
        return self.chat


def unloaded_model_info(name: str, fingerprint: str, kind: str = "lm") -> ModelInfo:
    """The identity of a language model known by name and fingerprint but not loaded (size, device unknown)."""
    return ModelInfo(name, "", kind, 0, "", "", fingerprint)


class _RefusingScorer:
    """A scorer with the real model's identity that refuses every model call (raises :class:`NotCached`)."""

    def __init__(self, info: ModelInfo) -> None:
        self.info = info

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        """Raise :class:`NotCached`: computing needs the model."""
        raise NotCached(f"not in the output cache for {self.info.name}")

    token_nll = conditional_nll = next_token_probs = _refuse


@dataclass
class _CacheOnlyContext(ModelContext):
    """The context :meth:`ModelContext.cache_only` builds: cache lookups without compute locks, misses raise."""

    def token_scores(self, text: str) -> TokenScores:
        """``text``'s cached token scores under the scorer's model; :class:`NotCached` on a miss."""
        cache, info = self.cache, self.scorer.info
        hit = cached_token_scores(cache, info.fingerprint, text, self.window, scorer_kind=info.kind) if cache else None
        if hit is None:
            raise NotCached(f"this document has not been scored by {info.name} yet")
        return hit

    def get_embedder(self) -> TextEmbedder:
        """Never loads: ``embed`` reads cached vectors without the embedder, a miss ends here."""
        raise NotCached("these embeddings are not in the output cache yet")

    def get_chat(self) -> ChatModel:
        """The default chat model's identity, refusing to answer (cached replies are read by key)."""
        if self.chat is None:
            self.chat = _RefusingChat(default_chat_model(self._local_lm, self.device))
        return self.chat


class _RefusingChat:
    """A chat model with the real one's identity whose every call raises :class:`NotCached`.

    A remote model's identity is the one its server confirmed lately, asked of no server: a page
    renders with this context, and must not wait on a server. Unconfirmed, every lookup is
    :class:`NotCached` (the job that follows asks the server, then reads the same answers).
    """

    def __init__(self, inner: ChatModel) -> None:
        if isinstance(inner, RemoteChat):
            # "unconfirmed" is no model's identity: every lookup under it misses.
            self.fingerprint = inner.confirmed_fingerprint() or "unconfirmed"
            self.name = "the remote chat model"  # its name may need the server too
        else:
            self.fingerprint = inner.fingerprint
            self.name = inner.name

    def complete(self, *args: Any, **kwargs: Any) -> str:
        """Raise :class:`NotCached`: these answers need the chat model."""
        raise NotCached(f"these answers of {self.name} are not in the output cache yet")
