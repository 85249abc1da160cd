"""The models a session computes with, and what can be read without running them.

Every model-backed result — a PPL chunking, a pair table, a margin run — belongs to the
models that made it: the language model (by its weights' fingerprint), the session's
embedder and its chat model. :class:`SessionModels` names them once; the pages build it from
their session state (``components.lm_runs.session_models``), the CLI from its flags, and every
task in :mod:`backend.lab` keys, looks up and plans by it.

A page must never freeze on a model call, so every task first asks the output cache alone
(:meth:`SessionModels.cache_only`, :meth:`SessionModels.cached_document_scores`): a document
scored before opens in milliseconds, and a miss raises :class:`~backend.errors.NotCached` at
once instead of loading the model. Only then does it start a background job, where
:meth:`SessionModels.job_scorer` loads the default model if the session has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from backend.chunkers import config_needs
from backend.chunkers.context import ModelContext, unloaded_model_info
from backend.chunking import ChunkerConfig
from backend.config import default_embedder_spec, default_lm_spec
from backend.errors import ModelError, NotCached, one_line
from backend.models.cache import default_cache
from backend.models.chat import LocalChat, RemoteChat, remote_llm_configured
from backend.models.embedder import embedder_name, load_embedder
from backend.models.embeddings import TextEmbedder
from backend.models.identity import embedder_fingerprint_without_loading, fingerprint_without_loading
from backend.models.lm import resolve_spec
from backend.models.remote_embedder import is_remote_embedder
from backend.models.scorer import load_scorer
from backend.models.scoring import scored_tokens, scoring_checkpoint
from backend.models.types import ModelInfo, Scorer, TokenScores
from backend.progress import Progress

__all__ = ["SessionModels", "default_lm_identity", "unloaded_embedder_fingerprint"]


@lru_cache(maxsize=4)
def default_lm_identity(env_spec: str | None) -> tuple[str, str | None, str | None]:
    """``(name, fingerprint, error)`` of the default language model (``CHUNKLAB_LM`` = ``env_spec``), never loaded.

    The fingerprint is None when it cannot be known without loading the model (a checkpoint
    folder, a hub id, a reduced precision); the error is the one line saying why the default
    cannot be used at all. Remembered per ``env_spec`` (hashing a GGUF file takes a moment).
    """
    try:
        kind, location = resolve_spec(None)
        name = location.rstrip("/").split("/")[-1] if kind == "hub" else Path(location).stem
        fingerprint = fingerprint_without_loading(None)
    except ModelError as e:
        return env_spec or "default model", None, one_line(str(e))
    except OSError as e:  # the weights file unreadable while hashing
        return env_spec or "default model", None, one_line(f"the default language model cannot be read: {e}")
    return name, fingerprint, None


def unloaded_embedder_fingerprint(spec: str | None, env_spec: str) -> str | None:
    """The weights' fingerprint of the embedder ``spec`` (None: ``CHUNKLAB_EMBEDDER`` = ``env_spec``), never loaded.

    None when it cannot be known without loading the embedder (a hub id, a remote embedder not
    connected yet) or ``spec`` names none: a job then loads it. Remembered per ``(spec, env_spec)``
    (hashing the weights takes a moment), except a remote embedder's: its identity is the server's.
    """
    if is_remote_embedder(spec if spec is not None else env_spec):
        return embedder_fingerprint_without_loading(spec)  # this process's connection, or None
    return _hashed_embedder_fingerprint(spec, env_spec)


@lru_cache(maxsize=8)
def _hashed_embedder_fingerprint(spec: str | None, env_spec: str) -> str | None:
    """:func:`unloaded_embedder_fingerprint` of a local embedder, remembered."""
    try:
        return embedder_fingerprint_without_loading(spec)
    except (ModelError, OSError):  # no way to know it without loading: the job will load it
        return None


@dataclass(frozen=True)
class SessionModels:
    """The language model, embedder and chat model a session's model-backed work uses.

    Attributes:
        name: The language model's display name (a file stem, a folder name or a remote model's name).
        fingerprint: Its weights' fingerprint; None when it cannot be known without loading
            the model (a default that is a checkpoint folder or a hub id).
        kind: ``ModelInfo.kind`` (``lm`` or ``remote-lm``): part of the cache keys.
        scorer: The session's loaded scorer; None for the default, loaded by the job.
        default: Whether this is the default model because the session has chosen none.
        error: Why the default model cannot be used (a one-line message), else None.
        embedder_spec: The session's embedder (None: the default).
        chat: The session's chat model (a ``ChatModel``); None: the default.
        embedder_loaded: The session's loaded embedder's display name (None: not loaded; named from its spec).
        embedder_loaded_fingerprint: The session's loaded embedder's weights' fingerprint (with ``embedder_loaded``).
    """

    name: str
    fingerprint: str | None
    kind: str = "lm"
    scorer: Scorer | None = field(default=None, compare=False, repr=False)
    default: bool = False
    error: str | None = None
    embedder_spec: str | None = None
    chat: Any = field(default=None, compare=False, repr=False)
    embedder_loaded: str | None = None
    embedder_loaded_fingerprint: str | None = None

    @classmethod
    def of(
        cls, scorer: Scorer | None, *, embedder_spec: str | None = None, chat: Any = None,
        embedder_loaded: str | None = None, embedder_loaded_fingerprint: str | None = None,
    ) -> SessionModels:
        """The models of a session that loaded ``scorer`` (None: the default language model, not loaded)."""
        extra = {"embedder_spec": embedder_spec, "chat": chat, "embedder_loaded": embedder_loaded,
                 "embedder_loaded_fingerprint": embedder_loaded_fingerprint}
        if scorer is not None:
            info = scorer.info
            return cls(info.name, info.fingerprint, info.kind, scorer, **extra)
        name, fingerprint, error = default_lm_identity(default_lm_spec())
        return cls(name, fingerprint, "lm", None, default=True, error=error, **extra)

    @property
    def models_key(self) -> str:
        """What model-backed chunkings are keyed by: the language model, the session's embedder and chat model."""
        # A remote chat model by its settings: its served identity would ask the server at every render.
        chat = "default" if self.chat is None else (
            self.chat.settings_key if isinstance(self.chat, RemoteChat) else self.chat.fingerprint)
        return f"{self.identity}|embedder={self.embedder_spec or 'default'}|chat={chat}"

    @property
    def identity(self) -> str:
        """What results are keyed by: the fingerprint, else the name (until the model is loaded)."""
        return self.fingerprint or f"unresolved:{self.name}"

    @property
    def label(self) -> str:
        """``name``, with "(default)" when the session has chosen no model."""
        return f"{self.name} (default)" if self.default else self.name

    @property
    def info(self) -> ModelInfo:
        """The loaded scorer's identity, else the unloaded model's (name, kind, fingerprint)."""
        if self.scorer is not None:
            return self.scorer.info
        return unloaded_model_info(self.name, self.fingerprint or "", self.kind)

    @property
    def embedder_label(self) -> str:
        """The embedder model-backed chunkers and DS use, by name (never loads it): ``all-MiniLM-L6-v2 (default)``."""
        if self.embedder_loaded is not None:
            return self.embedder_loaded
        return embedder_name(self.embedder_spec) + (" (default)" if self.embedder_spec is None else "")

    @property
    def embedder_fingerprint(self) -> str | None:
        """The embedder's weights' fingerprint (what its cached vectors are keyed by), never loading it.

        The loaded embedder's; else the one its spec names, read from its files; None when that
        cannot be known without loading it (a hub id).
        """
        if self.embedder_loaded is not None:
            return self.embedder_loaded_fingerprint
        return unloaded_embedder_fingerprint(self.embedder_spec, default_embedder_spec())

    @property
    def chat_label(self) -> str:
        """The chat model LLM chunkers use, in a few words (never connects or loads)."""
        if self.chat is None:
            return "the API's chat model (default)" if remote_llm_configured() else "the bundled chat model (default)"
        return "the bundled chat model" if isinstance(self.chat, LocalChat) else str(self.chat.name)

    def needed_by(self, config: ChunkerConfig) -> str:
        """The models ``config`` runs with, named from the registry's ``needs`` (``all-MiniLM-L6-v2 (default)``)."""
        namers = {"lm": lambda: self.label, "embedder": lambda: self.embedder_label, "chat": lambda: self.chat_label}
        names = [namers[need]() for need in config_needs(config) if need in namers]
        return " and ".join(dict.fromkeys(names)) or self.label

    # --- what the output cache answers, with no model call ----------------------------------------

    def cache_only(self) -> ModelContext | None:
        """:meth:`ModelContext.cache_only` around these models; None when the fingerprint is unknown."""
        if self.fingerprint is None:
            return None
        return ModelContext.cache_only(self.info, embedder_spec=self.embedder_spec, chat=self.chat)

    def cached_document_scores(self, text: str) -> TokenScores | None:
        """``text``'s token scores under the language model from the output cache (its default window), or None."""
        context = self.cache_only()
        if context is None:
            return None
        try:
            return context.token_scores(text)
        except NotCached:
            return None

    def scoring_resume_note(self, text: str) -> str | None:
        """``"N of M tokens already scored"`` when an interrupted scoring pass of ``text`` left work; else None.

        Reads the pass's checkpoint in the output cache (the scorer's default window) without
        loading the model; a job started now goes on from it.
        """
        if self.fingerprint is None:
            return None
        partial = scoring_checkpoint(default_cache(), self.fingerprint, text, None, scorer_kind=self.kind)
        if partial is None or partial.scored < 2:
            return None
        return f"{partial.scored - 1:,} of {scored_tokens(partial.scores):,} tokens already scored"

    # --- in a job ------------------------------------------------------------------------------------

    def job_scorer(self, progress: Progress | None = None) -> Scorer:
        """The scorer to compute with, in a job's thread: the session's, or the default loaded now.

        ``backend.models.lm`` keeps one model per process, so loading the default here gives the
        same object every later caller gets (no second copy, no reload). While another run holds
        the model, ``progress`` says the job is queued.
        """
        if self.scorer is not None:
            return self.scorer
        return load_scorer(None, progress=progress)

    def job_embedder(self) -> TextEmbedder:
        """The embedder to compute with, in a job's thread: the session's (loaded once per process) or the default."""
        return load_embedder(self.embedder_spec)
