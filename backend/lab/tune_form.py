"""The Tune page's form: what it offers, and its values turned into one checked :class:`~backend.lab.tune.TuneRequest`.

:func:`form_options` says what the form offers with the session's models: every family that can be tuned,
those searched by default (the model-free ones and the model-backed ones the session's models allow:
:func:`backend.tune.space.default_families`), the ones left out by default with why, the objectives
(:data:`backend.tune.types.OBJECTIVES`), the second objectives and some budgets. :func:`tune_request`
turns the form's values into the request ``python -m backend tune`` would make, checked by
:func:`backend.lab.tune.check_request` (every bad value a one-line error).

A run reads its documents and questions from files: the session's document is written once, as text,
under ``<data dir>/tune/documents/<document hash>/`` (a bundled sample is named ``sample:NAME`` instead),
and the session's own question set as a Chroma-format CSV under ``<data dir>/tune/questions/<its hash>/``.
The output folder defaults to ``<data dir>/tune/runs/<document>-<hash>/<settings digest>``, so the same
document with the same settings resumes there, and other settings never collide with it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from backend.config import data_dir
from backend.errors import InputError, ParameterError
from backend.lab.models import SessionModels
from backend.lab.tune import GENERATED_PER_DOCUMENT, TuneRequest, check_request, session_available
from backend.report.session import question_set_hash
from backend.retrieval.questions import QuestionSet, save_question_set
from backend.text.document import Document
from backend.tune.space import default_families, family_needs, tunable_families
from backend.tune.types import OBJECTIVES, LeftOut

__all__ = [
    "QUESTION_SOURCES",
    "SECONDARY",
    "BUDGETS",
    "GENERATE_METHOD",
    "TuneFormOptions",
    "tune_home",
    "form_options",
    "constraint_lines",
    "document_source",
    "session_questions_csv",
    "default_out",
    "tune_request",
]

# Where the questions come from: the session's own set, a bundled sample's set, or generated on the document
# with no model (each question an exact excerpt of it).
QUESTION_SOURCES = ("session", "sample", "generate")
GENERATE_METHOD = "model-free"
SECONDARY = ("mean_tokens", "chunks", "index_cost")  # a second objective, minimised (NSGA-II)
BUDGETS = ("1m", "2m", "5m", "10m", "30m", "1h")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NEED_NAMES = {"lm": "the language model", "embedder": "the embedder", "chat": "a chat model"}


def tune_home() -> Path:
    """``<data dir>/tune``: the documents and question sets runs read, and the runs' default output folders."""
    return data_dir() / "tune"


@dataclass(frozen=True)
class TuneFormOptions:
    """What the Tune page's form offers.

    Attributes:
        families: Every family that can be tuned (registry order).
        defaults: The families searched by default with the session's models.
        left_out: The tunable families not searched by default, each with why (one line).
        objectives: The objectives (maximised).
        secondary: The second objectives (minimised; none: a one-objective run).
        budgets: Budgets to pick from.
    """

    families: tuple[str, ...]
    defaults: tuple[str, ...]
    left_out: tuple[LeftOut, ...]
    objectives: tuple[str, ...] = OBJECTIVES
    secondary: tuple[str, ...] = SECONDARY
    budgets: tuple[str, ...] = BUDGETS

    def family_help(self, family: str) -> str:
        """``ppl: needs the language model`` / ``recursive: no model`` (the form's help)."""
        needs = family_needs(family)
        return f"{family}: {'needs ' + ' and '.join(_NEED_NAMES.get(n, n) for n in needs) if needs else 'no model'}"

    def left_out_lines(self) -> list[str]:
        """``ppl: needs the language model, which this session has not loaded`` — one line per family left out."""
        return [f"{x.family}: {x.reason}" for x in self.left_out]


def form_options(models: SessionModels | None, available: Collection[str] | None = None) -> TuneFormOptions:
    """The form's choices with the session's ``models`` (``available``: the model kinds, when already known)."""
    have = session_available(models) if available is None else frozenset(available)
    defaults, left = default_families(have)
    return TuneFormOptions(families=tunable_families(), defaults=defaults, left_out=left)


def constraint_lines(text: str) -> tuple[str, ...]:
    """The constraints typed one per line (blank lines skipped; each checked by the request)."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def _safe(name: str, fallback: str) -> str:
    return (_SAFE.sub("_", name).strip("._") or fallback)[:80]


def _write_once(path: Path, text: str) -> Path:
    if path.is_file():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(text.encode("utf-8"))
        tmp.replace(path)
    except OSError as e:
        raise InputError(f"{path}: cannot be written ({e.strerror or e})") from None
    return path


def document_source(doc: Document, sample: str | None = None) -> str:
    """What a run is given for the session's document: ``sample:NAME`` for a bundled sample, else the path of
    its text written once under ``<data dir>/tune/documents/<hash>/<name>.txt`` (read back with the same hash).

    Raises:
        InputError: the file cannot be written.
    """
    if sample is not None:
        return f"sample:{sample}"
    path = tune_home() / "documents" / doc.id / f"{_safe(doc.source, 'document')}.txt"
    return str(_write_once(path, doc.text))


def session_questions_csv(questions: QuestionSet) -> str:
    """The session's question set written once as a Chroma-format CSV (corpora beside it); its path.

    Raises:
        InputError: the files cannot be written.
        ParameterError: a corpus id that is not a safe file name.
    """
    folder = tune_home() / "questions" / question_set_hash(questions)
    csv = folder / "questions.csv"
    if not csv.is_file():
        try:
            save_question_set(questions, csv)
        except OSError as e:
            raise InputError(f"{csv}: cannot be written ({e.strerror or e})") from None
    return str(csv)


def default_out(doc: Document, request: TuneRequest) -> Path:
    """``<data dir>/tune/runs/<document>-<hash>/<digest of the settings>``: the same settings resume there."""
    settings = {
        "sources": list(request.sources), "questions": request.questions, "corpora": request.corpora,
        "families": None if request.families is None else list(request.families), "objective": request.objective,
        "secondary": request.secondary, "constraints": list(request.constraints), "budget": request.budget,
        "seed": request.seed, "engine": request.engine, "baseline": request.baseline, "trials": request.trials,
    }
    if request.questions.startswith("generate:"):  # another count: another folder (other sources: as before)
        settings["questions_per_document"] = request.questions_per_document
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    stem = _safe(Path(doc.source).stem, "document")[:60]
    return tune_home() / "runs" / f"{stem}-{doc.id}" / digest


def tune_request(
    doc: Document | None,
    *,
    sample: str | None = None,
    question_source: str = "generate",
    session_questions: QuestionSet | None = None,
    sample_set: str | None = None,
    families: Sequence[str] | None = None,
    objective: str = "iou",
    secondary: str | None = None,
    constraints: str = "",
    budget: str = "10m",
    seed: int = 0,
    trials: int | None = None,
    baseline: str | None = None,
    out: str = "",
    questions_per_document: int = GENERATED_PER_DOCUMENT,
) -> TuneRequest:
    """The form's values as a checked :class:`~backend.lab.tune.TuneRequest` (the same as the CLI's flags).

    Args:
        doc: The session's document (None: an error).
        sample: The bundled sample it is, if any (named, not written).
        question_source: ``session``, ``sample`` or ``generate`` (:data:`QUESTION_SOURCES`).
        session_questions: The session's question set (``session``).
        sample_set: The bundled question set's name (``sample``).
        families: The families to search (None or empty: the defaults the session's models allow).
        objective: The objective; ``secondary``: a second one (None: one objective).
        constraints: Constraints, one per line (``mean_tokens<=400``).
        budget: The budget (``10m``); ``seed``: the seed; ``trials``: a trial cap (None: none).
        baseline: The baseline's spec (None: recursive 200).
        out: The output folder ("": :func:`default_out`).
        questions_per_document: The questions generated on each document (``generate``; 1 to 200).

    Raises:
        ParameterError, InputError: a missing document or question set, or any value
            :func:`~backend.lab.tune.check_request` refuses (one line).
    """
    if doc is None:
        raise ParameterError("load a document first (the Document page)")
    if question_source == "session":
        if session_questions is None:
            raise ParameterError("the session has no question set: save questions on the Retrieval page, "
                                 "or pick a bundled set or generated questions")
        questions = session_questions_csv(session_questions)
    elif question_source == "sample":
        if not sample_set:
            raise ParameterError("pick a bundled question set")
        questions = f"sample:{sample_set}"
    elif question_source == "generate":
        questions = f"generate:{GENERATE_METHOD}"
    else:
        raise ParameterError(f"unknown question source {question_source!r}; choose one of: "
                             f"{', '.join(QUESTION_SOURCES)}")
    request = TuneRequest(
        sources=(document_source(doc, sample),), questions=questions, out=out.strip() or "-",
        families=tuple(families) if families else None, objective=objective, secondary=secondary or None,
        constraints=constraint_lines(constraints), budget=budget.strip(), seed=int(seed),
        trials=int(trials) if trials else None, baseline=baseline.strip() if baseline and baseline.strip() else None,
        questions_per_document=questions_per_document,
    )
    request = check_request(request)
    if not out.strip():
        request = replace(request, out=str(default_out(doc, request)))
    return request
