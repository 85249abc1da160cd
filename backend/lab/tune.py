"""The Tune page's work and ``python -m backend tune``'s: one request, checked, planned as a background job.

The page reads its widgets into a :class:`TuneRequest`, :func:`check_request` turns every bad
input into one line, and :func:`plan_tune` gives the :class:`~backend.lab.jobs.JobPlan` whose body
is :func:`backend.tune.run.run_tune` (the CLI runs the very same plan with :meth:`JobPlan.run`).
While the job runs, the page follows the output folder with :mod:`backend.tune.result`'s readers
(``plan.json``, ``trials.jsonl``, ``result.json``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from backend.chunkers import config_needs, make_chunker
from backend.chunking import ChunkerConfig
from backend.errors import InputError, ParameterError
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.models.rates import rate_store
from backend.models.types import Scorer
from backend.progress import Progress
from backend.tune.run import (
    GENERATED_PER_DOCUMENT,
    QUESTION_METHODS,
    available_models,
    check_objective_supported,
    folder_source,
    run_tune,
)
from backend.tune.space import BASELINE, check_families, default_families, family_needs
from backend.tune.spec import check_objective, check_secondary, parse_budget, parse_constraint
from backend.tune.types import TuneResult

__all__ = [
    "ENGINES", "GENERATED_PER_DOCUMENT", "MAX_QUESTIONS_PER_DOCUMENT", "TuneRequest", "check_request",
    "session_available", "plan_tune",
]

ENGINES = ("local", "ray")  # where the trials run (ray: a folder's documents as Ray tasks, one Ray per study)
MAX_QUESTIONS_PER_DOCUMENT = 200  # generate:METHOD makes at most this many questions on each document


@dataclass(frozen=True, kw_only=True)
class TuneRequest:
    """What a tuning run is asked to do (the page's widgets, the CLI's flags).

    Attributes:
        sources: Document paths: one file, or a folder's files (a folder path is read as its files);
            ``sample:NAME`` is a bundled sample document.
        questions: ``CSV path``, ``sample:NAME`` (a bundled set) or ``generate:METHOD``
            (``model-free``, ``bundled`` or ``chat``: generated on each document and saved in ``out``).
        corpora: The corpora folder of a CSV question set (None: beside the CSV).
        families: The chunker families searched (None: the defaults the session's models allow).
        objective: What is maximised (:data:`~backend.tune.types.OBJECTIVES`).
        secondary: ``mean_tokens``, ``chunks`` or ``index_cost``, minimised: a two-objective (NSGA-II) run.
        constraints: ``mean_tokens<=400`` and the like: a configuration violating one is not scored.
        budget: Wall-clock budget (``10m``, ``90s``, ``1h``).
        seed: Seeds the sampler and the split.
        engine: Where trials run (:data:`ENGINES`): ``ray`` runs a folder's documents as Ray tasks
            (a folder only; each trial is a corpus run).
        out: The output folder (journal, plan, trials, result); the same request there resumes.
        baseline: The configuration the pick is compared with (a spec; None: ``BASELINE``).
        trials: At most this many trials (None: until the budget is spent).
        workers: Ray's documents in flight at once (``ray`` only; None: its default).
        address: The Ray cluster to join (``ray`` only; None: ``RAY_ADDRESS``, else a local Ray).
        questions_per_document: How many questions ``generate:METHOD`` makes on each document (1 to
            :data:`MAX_QUESTIONS_PER_DOCUMENT`; not used with a CSV or a bundled set).
    """

    sources: tuple[str, ...]
    questions: str
    out: str
    corpora: str | None = None
    families: tuple[str, ...] | None = None
    objective: str = "iou"
    secondary: str | None = None
    constraints: tuple[str, ...] = ()
    budget: str = "10m"
    seed: int = 0
    engine: str = "local"
    baseline: str | None = None
    trials: int | None = None
    workers: int | None = None
    address: str | None = None
    questions_per_document: int = GENERATED_PER_DOCUMENT

    @property
    def baseline_spec(self) -> str:
        """The baseline's spec (the request's, else :data:`~backend.tune.space.BASELINE`)."""
        return self.baseline or BASELINE


def _check_sources(sources: tuple[str, ...]) -> tuple[str, ...]:
    if not sources:
        raise ParameterError("choose a document or a folder of documents to tune on")
    for s in sources:
        if s.startswith("sample:"):
            continue
        if not Path(s).expanduser().exists():
            raise InputError(f"{s}: no such file or folder")
    return tuple(sources)


def _check_questions(questions: str, corpora: str | None) -> None:
    q = questions.strip()
    if not q:
        raise ParameterError("choose a question set: a CSV, sample:NAME or generate:METHOD")
    if q.startswith("generate:"):
        method = q.removeprefix("generate:")
        if method not in QUESTION_METHODS:
            raise ParameterError(f"unknown question method {method!r}; choose one of: {', '.join(QUESTION_METHODS)}")
        if corpora:
            raise ParameterError("--corpora is not used with generated questions (the documents are the corpora)")
    elif q.startswith("sample:"):
        if corpora:
            raise ParameterError("--corpora is not used with --questions sample:NAME (the sample is the corpus)")
    elif not Path(q).expanduser().is_file():
        raise InputError(f"{q}: no such question CSV")


def _check_per_document(n: object) -> int:
    try:
        value = int(n)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ParameterError(f"questions per document ({n!r}) must be a whole number") from None
    if value != n and not (isinstance(n, str) and n.strip() == str(value)):
        raise ParameterError(f"questions per document ({n!r}) must be a whole number")
    if not 1 <= value <= MAX_QUESTIONS_PER_DOCUMENT:
        raise ParameterError(f"questions per document ({value}) must be between 1 and {MAX_QUESTIONS_PER_DOCUMENT}")
    return value


def _check_engine(request: TuneRequest) -> None:
    if request.engine not in ENGINES:
        raise ParameterError(f"engine {request.engine!r} is not available for tuning; "
                             f"choose one of: {', '.join(ENGINES)}")
    if request.engine == "ray":
        if importlib.util.find_spec("ray") is None:  # looked up, not imported (that takes seconds)
            raise ParameterError("--engine ray needs the ray package, which is not installed; use --engine local")
        if folder_source(tuple(request.sources)) is None:
            raise ParameterError("--engine ray runs a folder's documents as Ray tasks; a single document tunes "
                                 "with --engine local")
    else:
        if request.address is not None:
            raise ParameterError("--address joins a Ray cluster: it needs --engine ray")
        if request.workers is not None:
            raise ParameterError("--workers sets the Ray tasks run at once: it needs --engine ray")
    if request.workers is not None and int(request.workers) < 1:
        raise ParameterError(f"workers ({request.workers}) must be at least 1")


def check_request(request: TuneRequest) -> TuneRequest:
    """``request`` checked, with its names normalised (lower-case objective, families in order, no repeats).

    Raises:
        ParameterError: a bad family, objective, secondary objective, constraint, budget, engine,
            baseline, trial cap or questions per document; no document or question set; no output folder (one line each).
        InputError: a document, folder or question CSV that is not there.
    """
    sources = _check_sources(tuple(request.sources))
    _check_questions(request.questions, request.corpora)
    families = None if request.families is None else check_families(tuple(request.families))
    objective = check_objective(str(request.objective).strip().lower())
    check_objective_supported(objective)
    secondary = check_secondary(str(request.secondary).strip().lower()) if request.secondary else None
    constraints = tuple(parse_constraint(c).text for c in request.constraints)
    parse_budget(request.budget)
    _check_engine(request)
    if not str(request.out).strip():
        raise ParameterError("choose an output folder (--out DIR)")
    if request.trials is not None and int(request.trials) < 1:
        raise ParameterError(f"trials ({request.trials}) must be at least 1")
    per_document = _check_per_document(request.questions_per_document)
    baseline = None
    if request.baseline:
        name, params, tokenizer = ChunkerConfig.parse(request.baseline)
        baseline = make_chunker(name, params, tokenizer).config.spec
    return replace(
        request, sources=sources, questions=request.questions.strip(), families=families, objective=objective,
        secondary=secondary, constraints=constraints, baseline=baseline, seed=int(request.seed),
        trials=None if request.trials is None else int(request.trials), questions_per_document=per_document,
        workers=None if request.workers is None else int(request.workers),
    )


def _needs_lm(request: TuneRequest, have: frozenset[str], models: SessionModels) -> bool:
    """Whether the run loads the language model: the ``bc`` objective, a family searched that needs it, or bundled
    questions.

    The default families keep a PPL family only when the model's scoring rate was measured on this
    machine (:func:`backend.tune.budget.plan_model_families`): without one the model is not loaded.
    """
    if request.objective == "bc" or request.questions == "generate:bundled":
        return True
    if request.families is not None:
        families = request.families
    elif models.fingerprint is not None and rate_store().find(models.fingerprint, "token_nll", kind=models.kind):
        families = default_families(have)[0]
    else:
        families = ()
    if any("lm" in family_needs(f) for f in families):
        return True
    baseline = ChunkerConfig.parse(request.baseline_spec)
    return "lm" in config_needs(make_chunker(*baseline).config)


def session_available(models: SessionModels | None) -> frozenset[str]:
    """The kinds of model a run may use with the session's ``models``: the embedder always (the bundled
    one), and the language model when the session has models that loaded without an error.

    The one rule :func:`plan_tune` and the Tune page's form (:mod:`backend.lab.tune_form`) both apply.
    """
    return available_models(lm=models is not None and models.error is None, embedder=True)


def plan_tune(request: TuneRequest, models: SessionModels | None) -> JobPlan:
    """The tuning run as a background job: its body is :func:`~backend.tune.run.run_tune`, its signature the request.

    The job loads the language model only when the run needs it (``bc``, a PPL family, bundled
    questions) and the session has one; without ``models`` the default families leave the
    model-backed ones out (each with its reason in ``plan.json``). Its ``meta`` holds ``out``.

    Raises:
        ParameterError, InputError: as :func:`check_request`.
    """
    request = check_request(request)
    have = session_available(models)
    use_lm = "lm" in have and models is not None and _needs_lm(request, have, models)

    embedder = models.embedder_spec if models is not None else None

    def body(scorer: Scorer | None, progress: Progress) -> TuneResult:
        return run_tune(request, scorer=scorer, progress=progress, models_available=have, embedder=embedder)

    docs = ", ".join(Path(s).name for s in request.sources)
    title = f"Tuning on {docs} ({request.objective}, budget {request.budget})"
    meta = MappingProxyType({"out": str(request.out)})
    return JobPlan(title, ("tune", request, embedder), body, models=models if use_lm else None, meta=meta)
