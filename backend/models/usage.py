"""Which language model this process's running jobs are loading or computing with: the sidebar's truthful status.

A background job loads and runs its model in its own thread, outside the session that started
it, so nothing in a session's state says the model is busy, and a page that asks only "is it
loaded" says "not loaded" while a job is loading it. Jobs say so here instead
(:meth:`backend.lab.jobs.JobPlan.run` holds a :func:`model_use` while it loads and computes), and
:func:`lm_status` answers a page without loading or waiting for anything. The record is
process-wide, like the loaded models themselves: model names and counts, nothing of a user's.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from backend.models.lm import loaded_lm
from backend.models.types import ModelInfo

__all__ = ["LMStatus", "ModelUse", "UseHandle", "lm_status", "model_use", "model_uses"]


@dataclass(frozen=True)
class ModelUse:
    """One running job's use of a language model.

    Attributes:
        name: The model's display name.
        fingerprint: Its weights' fingerprint (None while it is not known: a default still loading).
        default: Whether it is the default model (the job's session chose none).
        loading: Whether the job is still loading it (False: computing with it).
    """

    name: str
    fingerprint: str | None
    default: bool
    loading: bool


_uses: dict[int, ModelUse] = {}
_lock = threading.Lock()
_ids = itertools.count()


class UseHandle:
    """What :func:`model_use` yields: the job tells it when the model has loaded."""

    def __init__(self, key: int) -> None:
        self._key = key

    def loaded(self, info: ModelInfo) -> None:
        """The model is loaded (``info``): the job computes with it from now on."""
        with _lock:
            use = _uses.get(self._key)
            if use is not None:
                _uses[self._key] = replace(use, name=info.name, fingerprint=info.fingerprint, loading=False)


@contextmanager
def model_use(name: str, fingerprint: str | None, *, default: bool, loading: bool) -> Iterator[UseHandle]:
    """Record, for the block, that a job is loading (``loading``) or computing with the model ``name``.

    Args:
        name: The model's display name.
        fingerprint: Its weights' fingerprint, if known.
        default: Whether it is the default model.
        loading: Whether the job starts by loading it (call :meth:`UseHandle.loaded` once loaded).
    """
    key = next(_ids)
    with _lock:
        _uses[key] = ModelUse(name, fingerprint, default, loading)
    try:
        yield UseHandle(key)
    finally:
        with _lock:
            _uses.pop(key, None)


def model_uses() -> tuple[ModelUse, ...]:
    """The language models the running jobs of this process are loading or computing with, one per job."""
    with _lock:
        return tuple(_uses.values())


@dataclass(frozen=True)
class LMStatus:
    """What a page says of the language model a session uses: loaded or not, and whether a job is at it.

    Attributes:
        info: The loaded model (the session's choice, else the default if this process loaded
            it); None: not loaded.
        chosen: Whether it is the session's own choice (else the default).
        name: The model's name (``info``'s, or a job's while it loads the default); None: none to name.
        loading: Running jobs loading it now.
        running: Running jobs computing with it now.
    """

    info: ModelInfo | None
    chosen: bool
    name: str | None
    loading: int = 0
    running: int = 0

    @property
    def line(self) -> str:
        """``LM: not loaded``, ``LM: SmolLM2 (default) · in use by a job``, ``… · loading for a job``…"""
        if self.name is None:
            return "LM: not loaded"
        line = f"LM: {self.name}{'' if self.chosen else ' (default)'}"
        if self.loading:
            line += " · loading for a job" if self.loading == 1 else f" · loading for {self.loading} jobs"
        elif self.running:
            line += " · in use by a job" if self.running == 1 else f" · in use by {self.running} jobs"
        return line


def lm_status(chosen: ModelInfo | None) -> LMStatus:
    """The status of the language model a session uses (``chosen``: its choice; None: the default), never waiting.

    A job's use counts for the session's model when it runs the same weights, or (the session
    having chosen none) when it runs or loads the default.
    """
    info = chosen if chosen is not None else loaded_lm(None)
    uses = [u for u in model_uses() if (
        (info is not None and u.fingerprint == info.fingerprint) or (chosen is None and u.default)
    )]
    name = info.name if info is not None else next((u.name for u in uses), None)
    return LMStatus(info, chosen is not None, name, sum(u.loading for u in uses), sum(not u.loading for u in uses))
