"""Match lengths: tune configurations to one mean chunk length (Compare, Quality, ``compare --match-length``).

Both Meta-Chunking and MoC compare chunkers only at equal mean chunk length. For a target
(tokens), :func:`backend.chunkers.match_length.match_length` bisects each configuration's
length parameter (chunk size, PPL threshold or target length) until its mean chunk length is
within ±5 %, or reports the closest reachable. Configurations that need no model are tuned at
once (:func:`run_matches`); as soon as one needs a model, :func:`plan_match` plans the
background job that tunes them all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from backend.chunkers import config_needs
from backend.chunkers.base import Param
from backend.chunkers.context import ModelContext
from backend.chunkers.match_length import DEFAULT_TOLERANCE, MatchResult, match_length
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import Cancelled, ChunkLabError, one_line
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.models.types import Scorer
from backend.progress import Progress
from backend.text.document import Document

__all__ = ["DEFAULT_TARGET", "TARGET", "MatchOutcome", "run_matches", "needs_model", "plan_match", "match_rows", "tuned_entries"]

DEFAULT_TARGET = 200
# The target mean length a user asks for (the Compare and Quality pages' input and its range).
TARGET = Param("target", "int", DEFAULT_TARGET, "Each configuration's own tokenizer counts the tokens.", min=1,
               max=100_000)


@dataclass(frozen=True)
class MatchOutcome:
    """The match of every selected configuration of one document to one target.

    Attributes:
        doc_id: The document's id.
        target: Target mean length (tokens).
        results: ``(uid, MatchResult or one-line error)`` per selected configuration.
    """

    doc_id: str
    target: int
    results: tuple[tuple[int, MatchResult | str], ...]

    @property
    def tunable(self) -> bool:
        """Whether any configuration has a tuned length parameter to use."""
        return any(isinstance(r, MatchResult) and r.parameter for _, r in self.results)


def needs_model(configs: Sequence[tuple[int, ChunkerConfig]]) -> bool:
    """Whether any of ``configs`` runs a model (then the match runs in a background job)."""
    return any(config_needs(c) for _, c in configs)


def run_matches(
    doc: Document, configs: Sequence[tuple[int, ChunkerConfig]], target: float,
    context: Any = None,
) -> MatchOutcome:
    """Match each configuration to ``target``; one failing does not stop the others (a cancel does).

    Args:
        doc: The document.
        configs: ``(uid, config)`` pairs.
        target: Target mean length in tokens.
        context: A factory ``context(part, parts)`` returning the ModelContext for one
            configuration (model-backed chunkers), or None.
    """
    out = []
    for k, (uid, config) in enumerate(configs):
        try:
            ctx = context(k, len(configs)) if context is not None else None
            out.append((uid, match_length(doc, config, target, context=ctx)))
        except Cancelled:
            raise
        except ChunkLabError as e:
            out.append((uid, one_line(str(e))))
    return MatchOutcome(doc.id, int(target), tuple(out))


def plan_match(
    doc: Document, models: SessionModels, configs: Sequence[tuple[int, ChunkerConfig]], target: int
) -> JobPlan:
    """The background job matching ``configs`` (some model-backed) to ``target`` with the session's ``models``.

    Its result is a :class:`MatchOutcome`; each configuration's share of the progress counts
    its own model work.
    """
    configs = tuple(configs)
    needs_lm = any("lm" in config_needs(c) for _, c in configs)

    def body(scorer: Scorer | None, progress: Progress) -> MatchOutcome:
        def context(k: int, n: int) -> ModelContext:
            part = progress.part(k, n, "configuration")
            return ModelContext(scorer=scorer, embedder_spec=models.embedder_spec, chat=models.chat, progress=part)

        return run_matches(doc, configs, float(target), context=context)

    title = f"Matching lengths to {target} tokens" + (f" with {models.name}" if needs_lm else "")
    return JobPlan(
        title, ("match", doc.id, models.models_key, configs, target), body,
        models=models if needs_lm else None, model=models.label,
    )


def match_rows(entries: Sequence[ConfigEntry], outcome: MatchOutcome) -> list[dict[str, Any]]:
    """Table rows: tag, chunker, tuned parameter (before → after), target, achieved, deviation, status."""
    by_uid = {e.uid: e for e in entries}
    rows = []
    for uid, result in outcome.results:
        entry = by_uid.get(uid)
        if entry is None:  # removed since
            continue
        row: dict[str, Any] = {"configuration": entry.tag, "chunker": entry.config.name, "target": outcome.target}
        if isinstance(result, str):
            row.update(parameter="—", before=None, after=None, achieved=None, deviation=None, status=result)
        else:
            name = result.parameter
            row.update(
                parameter=name or "— (no length parameter)",
                before=str(entry.config.params_dict.get(name)) if name else None,
                after=str(result.config.params_dict.get(name)) if name else None,
                achieved=round(result.achieved, 1),
                deviation=round(100 * result.error, 1),
                status=f"within ±{DEFAULT_TOLERANCE:.0%}" if result.within else "closest reachable",
            )
        rows.append(row)
    return rows


def tuned_entries(entries: Sequence[ConfigEntry], outcome: MatchOutcome) -> tuple[list[ConfigEntry], int]:
    """``entries`` with each matched one's configuration replaced by its tuned one (same uid and letter).

    Returns:
        The new entries, and how many changed.
    """
    tuned = {uid: r.config for uid, r in outcome.results if isinstance(r, MatchResult) and r.parameter}
    changed = 0
    out = []
    for entry in entries:
        config = tuned.get(entry.uid)
        if config is not None and config != entry.config:
            entry = replace(entry, config=config)
            changed += 1
        out.append(entry)
    return out, changed
