"""Model-backed configurations: their chunkings without a model call, and the one job that runs the missing ones.

A configuration whose chunker ``needs`` a model (the language model for ``ppl``, the embedder
for ``semantic``, the chat model for ``moc``) never runs inside a page: its chunking is read
from the output cache through a cache-only context, else it is *pending* and
:func:`plan_model_runs` plans the background job that computes every pending one of a page
(with the session's models), filling the cache so the next lookup hits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

from backend.chunkers import REGISTRY
from backend.chunkers.run import ChunkOutcome, run_configs
from backend.chunking import ChunkerConfig
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.models.types import Scorer
from backend.progress import Progress
from backend.text.document import Document

__all__ = ["plan_model_runs", "runs_cover", "ModelRuns"]

_KIND = "model-runs"


@dataclass(frozen=True)
class ModelRuns:
    """The models a set of configurations needs, in words, and whether one of them is the language model."""

    names: str
    needs_lm: bool

    @classmethod
    def of(cls, models: SessionModels, configs: Sequence[ChunkerConfig]) -> ModelRuns:
        """What ``configs`` run with under ``models`` (from the registry's ``needs``)."""
        names = " and ".join(dict.fromkeys(models.needed_by(c) for c in configs))
        needs_lm = any("lm" in REGISTRY[c.name].needs for c in configs if c.name in REGISTRY)
        return cls(names, needs_lm)


def _signature(doc: Document, models: SessionModels, configs: Sequence[ChunkerConfig]) -> Hashable:
    return (_KIND, doc.id, models.models_key, tuple(configs))


def plan_model_runs(doc: Document, models: SessionModels, configs: Sequence[ChunkerConfig]) -> JobPlan:
    """The job that runs ``configs`` (model-backed, not cached) on ``doc`` with the session's ``models``.

    Its result is one :class:`~backend.chunkers.run.ChunkOutcome` per configuration (a
    chunking, or a one-line error), in order. A job of only embedder or chat models loads no
    language model.
    """
    configs = tuple(configs)
    runs = ModelRuns.of(models, configs)
    n = len(configs)

    def body(scorer: Scorer | None, progress: Progress) -> list[ChunkOutcome]:
        return run_configs(doc, configs, scorer, progress, models.embedder_spec, models.chat)

    return JobPlan(
        f"Running {n} configuration{'s' if n != 1 else ''} with {runs.names}", _signature(doc, models, configs), body,
        models=models if runs.needs_lm else None, model=runs.names,
    )


def runs_cover(signature: Any, doc: Document, models: SessionModels, config: ChunkerConfig) -> bool:
    """Whether a model-run job's ``signature`` (:func:`plan_model_runs`) ran ``config`` on ``doc`` with ``models``."""
    return (
        isinstance(signature, tuple) and len(signature) == 4 and signature[0] == _KIND
        and signature[1:3] == (doc.id, models.models_key) and config in signature[3]
    )
