"""Model-backed configurations: their chunkings without a model call, and one job per model group for the rest.

A configuration whose chunker ``needs`` a model (the language model for ``ppl``, the embedder
for ``semantic``, the chat model for ``moc``) never runs inside a page: its chunking is read
from the output cache through a cache-only context, else it is *pending* and
:func:`plan_model_runs` plans the background jobs that compute the pending ones of a page
(with the session's models), filling the cache so the next lookup hits.

The pending configurations are split by the model they run (:func:`model_group`): one job
for the language model's, one for the embedder's, one for the chat model's. Jobs on different
models run side by side (a semantic chunking no longer waits behind a PPL pass); jobs on one
model take turns through that model's lock (``LanguageModel.lock``, ``Embedder.lock``), their
bars saying ``queued behind another run`` meanwhile. Each group's job has its own signature,
so a finished group's chunkings are shown as soon as it ends and are never run again because
another group is still running.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from backend.chunkers import config_needs
from backend.chunkers.run import ChunkOutcome, run_configs
from backend.chunking import ChunkerConfig
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.models.types import Scorer
from backend.progress import Progress
from backend.text.document import Document

__all__ = ["MODEL_GROUPS", "model_group", "plan_model_runs", "runs_cover", "GroupRun", "ModelRuns"]

_KIND = "model-runs"

MODEL_GROUPS = ("lm", "embedder", "chat")
"""The model groups, in the order their jobs are shown: the language model, the embedder, the chat model."""


def model_group(config: ChunkerConfig) -> str:
    """The model group of a model-backed configuration: what its chunker ``needs`` (``lm``, ``embedder``, ``chat``).

    A chunker that needs several models forms a group of its own (``lm_embedder``); one the
    registry does not know, or that needs none, counts as the language model's (where a
    model-backed run has always gone).
    """
    return "_".join(dict.fromkeys(config_needs(config))) or "lm"


@dataclass(frozen=True)
class ModelRuns:
    """The models a set of configurations needs, in words, and whether one of them is the language model."""

    names: str
    needs_lm: bool

    @classmethod
    def of(cls, models: SessionModels, configs: Sequence[ChunkerConfig]) -> ModelRuns:
        """What ``configs`` run with under ``models`` (from the registry's ``needs``)."""
        names = " and ".join(dict.fromkeys(models.needed_by(c) for c in configs))
        needs_lm = any("lm" in config_needs(c) for c in configs)
        return cls(names, needs_lm)


@dataclass(frozen=True)
class GroupRun:
    """The job of one model group.

    Attributes:
        group: The group (:func:`model_group`): ``lm``, ``embedder`` or ``chat``.
        configs: Its configurations, in the page's order.
        plan: The job that runs them; its result is one
            :class:`~backend.chunkers.run.ChunkOutcome` per configuration, in order.
    """

    group: str
    configs: tuple[ChunkerConfig, ...]
    plan: JobPlan


def _signature(doc: Document, models: SessionModels, group: str, configs: Sequence[ChunkerConfig]) -> Hashable:
    return (_KIND, doc.id, models.models_key, group, tuple(configs))


def _group_plan(doc: Document, models: SessionModels, group: str, configs: tuple[ChunkerConfig, ...]) -> JobPlan:
    """The job that runs ``configs`` (all of ``group``) on ``doc``."""
    runs = ModelRuns.of(models, configs)
    n = len(configs)

    def body(scorer: Scorer | None, progress: Progress) -> list[ChunkOutcome]:
        return run_configs(doc, configs, scorer, progress, models.embedder_spec, models.chat)

    return JobPlan(
        f"Running {n} configuration{'s' if n != 1 else ''} with {runs.names}", _signature(doc, models, group, configs),
        body, models=models if runs.needs_lm else None, model=runs.names,
    )


def plan_model_runs(doc: Document, models: SessionModels, configs: Sequence[ChunkerConfig]) -> tuple[GroupRun, ...]:
    """The jobs that run ``configs`` (model-backed, not cached) on ``doc`` with the session's ``models``.

    One job per model group (:func:`model_group`), in the order of :data:`MODEL_GROUPS` (then
    any group of several models, in the order of its first configuration). A job of only
    embedder or chat models loads no language model. Two groups' jobs can run at once; each
    has its own signature, which names its group and configurations only.
    """
    groups: dict[str, list[ChunkerConfig]] = {}
    for config in configs:
        groups.setdefault(model_group(config), []).append(config)
    order = sorted(groups, key=lambda g: MODEL_GROUPS.index(g) if g in MODEL_GROUPS else len(MODEL_GROUPS))
    return tuple(GroupRun(g, tuple(groups[g]), _group_plan(doc, models, g, tuple(groups[g]))) for g in order)


def runs_cover(signature: Any, doc: Document, models: SessionModels, config: ChunkerConfig) -> bool:
    """Whether a model-run job's ``signature`` (:func:`plan_model_runs`) ran ``config`` on ``doc`` with ``models``."""
    return (
        isinstance(signature, tuple) and len(signature) == 5 and signature[0] == _KIND
        and signature[1:3] == (doc.id, models.models_key) and signature[3] == model_group(config)
        and config in signature[4]
    )
