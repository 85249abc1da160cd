"""Running a corpus: :func:`run_corpus` plans what is left, hands it to an engine and writes what comes back.

An engine takes the documents left (each with the configurations it still lacks) and calls
``deliver`` with each :class:`~backend.corpus.work.DocumentOutcome` as it completes, in any
order. Two engines, one protocol:

- :class:`LocalEngine`: this process, one document after the other, one model context (each
  model loaded once); model outputs go straight into the output cache.
- :class:`backend.corpus.ray_engine.RayEngine`: documents as Ray tasks, model work in actors.

The driver (this function) is the only writer of the output folder, so rows are never
interleaved or duplicated; what the engine returns is written at once, one document at a time,
and a killed run resumes where it stopped (:mod:`backend.corpus.results`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend.config import ray_address
from backend.corpus.inputs import CorpusInputs, Skipped, corpus_inputs
from backend.corpus.ray_engine import RayEngine
from backend.corpus.results import CorpusResults, ResultsWriter, read_results
from backend.corpus.spec import CorpusSpec
from backend.corpus.work import CountedContext, DocumentOutcome, Unit, WorkCounts, document_rows
from backend.errors import ParameterError
from backend.models.cache import OutputCache, default_cache
from backend.progress import Progress
from backend.retrieval.store import open_store

__all__ = ["ENGINES", "CorpusRun", "Engine", "LocalEngine", "make_engine", "plan_units", "run_corpus"]

ENGINES = ("local", "ray")
EXTRACTED = "documents"  # where a zip corpus is extracted, inside the output folder


class Engine(Protocol):
    """Runs units and delivers each document's outcome as it completes."""

    name: str

    def run(self, units: Sequence[Unit], spec: CorpusSpec, deliver: Callable[[DocumentOutcome], None], *,
            progress: Progress) -> WorkCounts:
        """Run every unit; call ``deliver`` once per unit (from this thread); return the model work counted."""


def store_folder(out: Path) -> Path:
    """The run's own Chroma folder (its retrieval indexes, kept for a resumed run)."""
    return out / "chroma"


@dataclass
class LocalEngine:
    """This process, one document after the other, each model loaded once for the whole run."""

    name: str = "local"
    cache: OutputCache | None = field(default=None)
    store_path: Path | None = None

    def run(self, units: Sequence[Unit], spec: CorpusSpec, deliver: Callable[[DocumentOutcome], None], *,
            progress: Progress) -> WorkCounts:
        cache = self.cache if self.cache is not None else default_cache()
        context = CountedContext(lm=spec.lm, device=spec.device, embedder_spec=spec.embedder, _cache=cache)
        store = open_store(self.store_path) if "retrieval" in spec.metrics and self.store_path is not None else None
        for unit in units:
            progress.check()
            deliver(document_rows(unit.file, spec, context, cache=cache, store=store, configs=unit.configs))
        return context.counts


def make_engine(name: str, *, out: Path, address: str | None = None, workers: int | None = None,
                cache: OutputCache | None = None) -> Engine:
    """The engine named ``local`` or ``ray`` (``address``: a Ray cluster to join; ``workers``: document tasks at once).

    Raises:
        ParameterError: an unknown name, or Ray options given to the local engine.
    """
    if name == "local":
        if address is not None:
            raise ParameterError("--address joins a Ray cluster: it needs --engine ray")
        return LocalEngine(cache=cache, store_path=store_folder(out))
    if name == "ray":
        return RayEngine(address=address if address is not None else ray_address(), workers=workers, cache=cache)
    raise ParameterError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}")


def plan_units(inputs: CorpusInputs, spec: CorpusSpec, existing: CorpusResults) -> list[Unit]:
    """The documents still to run, each with the configurations it lacks (a skipped file is done)."""
    done = existing.done()
    skipped = {s["doc"] for s in existing.skipped}
    units = []
    for f in inputs.files:
        if f.name in skipped:
            continue
        missing = tuple(e for e in spec.configs if (f.name, e.config.spec) not in done)
        if missing:
            units.append(Unit(f, missing))
    return units


@dataclass(frozen=True)
class CorpusRun:
    """What a run did.

    Attributes:
        out: The output folder.
        documents: Documents in the corpus (readable by extension).
        resumed_rows: Rows found from an earlier run (not recomputed).
        ran: Documents run now.
        skipped: Files skipped (by extension, or unreadable), this run and before.
        counts: The model work of this run.
        seconds: Its wall time.
        engine: The engine's name.
    """

    out: Path
    documents: int
    resumed_rows: int
    ran: int
    skipped: tuple[dict[str, str], ...]
    counts: dict[str, int]
    seconds: float
    engine: str

    def summary(self) -> str:
        """One line for stderr: what ran, what was resumed, what was skipped, the model work."""
        c = self.counts
        parts = [f"{self.ran} of {self.documents} documents run on {self.engine}"]
        if self.resumed_rows:
            parts.append(f"resumed: {self.resumed_rows} rows already in {self.out} were not recomputed")
        if self.skipped:
            parts.append(f"{len(self.skipped)} files skipped (see {self.out / 'skipped.jsonl'})")
        parts.append(f"model work: {c.get('pairs_scored', 0):,} pairs scored, {c.get('tokens_scored', 0):,} tokens "
                     f"scored, {c.get('texts_embedded', 0):,} texts embedded")
        return "; ".join(parts) + f" ({self.seconds:.1f} s)"


def run_corpus(
    path: str | os.PathLike[str],
    spec: CorpusSpec,
    out: str | os.PathLike[str],
    *,
    engine: Engine | str = "local",
    progress: Progress | None = None,
    on_rows: Callable[[DocumentOutcome], Any] | None = None,
) -> CorpusRun:
    """Run ``spec`` over the corpus at ``path`` (a folder or a zip), writing into ``out``; resume what is there.

    Args:
        path: The corpus folder or zip.
        spec: What to compute.
        out: The output folder (see :mod:`backend.corpus.results`).
        engine: An engine, or ``local``/``ray`` (:func:`make_engine` with its defaults).
        progress: Counts documents (``progress(done, total)``, unit ``documents``); its cancel token stops the run
            between documents (what was written stays).
        on_rows: Called after each document's outcome is written (a page refreshes its table).

    Raises:
        InputError: the corpus or the output folder cannot be read or written.
        ParameterError: the output folder holds a run with other settings.
        ModelError: a model cannot be loaded.
    """
    t0 = time.perf_counter()
    folder = Path(out)
    progress = progress or Progress()
    progress.set_unit("documents")
    inputs = corpus_inputs(path, extract_to=folder / EXTRACTED)
    eng = make_engine(engine, out=folder) if isinstance(engine, str) else engine
    writer = ResultsWriter(folder, spec, source=str(path), engine=eng.name)
    existing = writer.existing
    known_skips = {s["doc"] for s in existing.skipped}
    writer.skipped(s for s in inputs.skipped if s.name not in known_skips)
    units = plan_units(inputs, spec, existing)
    wanted = {e.config.spec for e in spec.configs}
    resumed_rows = sum(1 for r in existing.rows if r["config"] in wanted)
    total = len(units)
    done = 0
    progress(0, total)

    def deliver(outcome: DocumentOutcome) -> None:
        nonlocal done
        if outcome.error is not None:
            writer.skipped([Skipped(outcome.name, outcome.error)])
        else:
            writer.rows(outcome.rows)
        done += 1
        progress(done, total)
        if on_rows is not None:
            on_rows(outcome)

    counts = eng.run(units, spec, deliver, progress=progress) if units else WorkCounts()
    final = read_results(folder)
    return CorpusRun(out=folder, documents=len(inputs.files), resumed_rows=resumed_rows, ran=done,
                     skipped=final.skipped, counts=counts.snapshot(), seconds=time.perf_counter() - t0, engine=eng.name)
