"""What model-backed chunkers run with: which language model, the output cache, progress.

Chunkers that need a model declare ``needs = ("lm",)``; :meth:`Chunker.chunk` hands them a
:class:`ModelContext`. The CLI builds one from ``--lm``/``--device``/``--no-cache``; the app
builds one around the session's model and a progress tracker. The model itself is not part
of a chunker's configuration: the same configuration on another model is another result,
and callers key their caches by :attr:`ModelContext.fingerprint` as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.errors import ModelError

if TYPE_CHECKING:
    from backend.cache import OutputCache
    from backend.llm import ChatModel
    from backend.models.types import Progress, Scorer, TokenScores

__all__ = ["ModelContext", "fingerprint_without_loading"]


def fingerprint_without_loading(spec: str | None) -> str | None:
    """The weights' fingerprint of a GGUF spec (hashed once, then remembered); None for other kinds.

    Lets a rerun find its cached scores without loading the model at all.
    """
    from backend.models.lm import file_sha256, resolve_spec

    kind, location = resolve_spec(spec)  # a spec naming no model fails here, before any loading
    return file_sha256(Path(location)) if kind == "gguf" else None


@dataclass
class ModelContext:
    """The language model, cache and progress a model-backed chunker uses.

    Attributes:
        scorer: A loaded :class:`~backend.models.types.Scorer`; None loads ``lm`` on first use.
        lm: The local model to load when ``scorer`` is None (None: ``CHUNKLAB_LM`` or the bundled one).
        device: Where to load it (None: ``CHUNKLAB_DEVICE`` or automatic).
        use_cache: Read and write the on-disk cache of model outputs.
        window: Context window for document scoring (None: the model's).
        progress: ``progress(done, total)``; a ``ProgressTracker`` with a cancel token stops the work.
        on_load: Called with no argument just before a model is loaded (e.g. to show "loading…").
        chat: The chat model of LLM chunkers (``needs = ("chat",)``); None picks one on first
            use: an OpenAI-compatible API when one is configured, else ``lm`` as a local chat
            model (see :func:`backend.llm.default_chat_model` and ``CHUNKLAB_CHAT``).
    """

    scorer: Scorer | None = None
    lm: str | None = None
    device: str | None = None
    use_cache: bool = True
    window: int | None = None
    progress: Progress | None = None
    on_load: Any = None
    chat: ChatModel | None = None
    _cache: OutputCache | None = field(default=None, repr=False)

    @property
    def cache(self) -> OutputCache | None:
        """The output cache (the process default), or None when caching is off."""
        if not self.use_cache:
            return None
        if self._cache is None:
            from backend.cache import default_cache

            self._cache = default_cache()
        return self._cache

    def get_scorer(self) -> Scorer:
        """The scorer, loading the local model on first use.

        Raises:
            ModelError: the model cannot be loaded.
        """
        if self.scorer is None:
            if self.on_load is not None:
                self.on_load()
            from backend.models.lm import load_scorer

            self.scorer = load_scorer(self.lm, self.device)
        return self.scorer

    @property
    def fingerprint(self) -> str | None:
        """The model's fingerprint when known without loading it (a loaded scorer, or a GGUF spec)."""
        if self.scorer is not None:
            return self.scorer.info.fingerprint
        try:
            return fingerprint_without_loading(self.lm)
        except ModelError:
            return None

    def token_scores(self, text: str) -> TokenScores:
        """Per-token NLLs of ``text``: from the cache when possible (without loading the model), else scored."""
        from backend.scoring import cached_token_scores, document_token_scores

        cache = self.cache
        if cache is not None and self.scorer is None:
            fp = self.fingerprint
            if fp is not None:
                hit = cached_token_scores(cache, fp, text, self.window)
                if hit is not None:
                    if self.progress is not None:
                        self.progress(1, 1)
                    return hit
        scores, _hit = document_token_scores(
            text, self.get_scorer(), window=self.window, cache=cache, progress=self.progress
        )
        return scores

    def get_chat(self) -> ChatModel:
        """The chat model, chosen on first use (see the ``chat`` attribute).

        Raises:
            ModelError: ``CHUNKLAB_CHAT`` asks for an API that is not configured.
        """
        if self.chat is None:
            from backend.llm import default_chat_model

            self.chat = default_chat_model(self.lm, self.device, self.on_load)
        return self.chat
