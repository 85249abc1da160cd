"""A tuning run from its request to its answer: inputs, split, plan, search, held-out scoring, files.

:func:`run_tune` is the body of the job :func:`backend.lab.tune.plan_tune` plans (page and CLI alike):

1. **Inputs.** The documents (a file, a folder's supported files, or ``sample:NAME``) and the
   question set (a CSV, ``sample:NAME`` restricted to the documents, or ``generate:METHOD`` run
   on each document and saved in the output folder, so a resumed run uses the same questions).
2. **Split** (:mod:`backend.tune.split`): seeded, per corpus, tuning about 2/3, held out 1/3.
3. **Plan.** The families searched (the request's, or the defaults the session's models allow);
   a model-backed family only when one trial of it fits the budget at a rate measured here
   (:mod:`backend.tune.budget`), otherwise left out with the estimate. ``plan.json`` is written.
4. **Search** (:mod:`backend.tune.study`): Optuna asks, the search space
   (:mod:`backend.tune.space`) names the configuration; trial 0 is the baseline. A configuration
   that violates a constraint is pruned unscored; the rest are scored on a seeded third of the
   tuning questions and pruned when clearly below the incumbent there (:mod:`backend.tune.pruner`),
   else scored on the rest. Each trial's row is appended to ``trials.jsonl`` as it ends. The run
   stops at the trial cap, when the next trial's expected cost no longer fits the budget, or on cancel.
5. **Held-out answer.** The tuning leaders (the top :data:`LEADERS` complete trials by tuning mean)
   and the baseline are scored on the held-out questions; the pick is the best held-out mean among
   them, compared with the baseline and the runner-up by paired bootstrap differences, and every
   leader not told apart from it is named. ``result.json`` is written (also when cancelled).

The ``bc`` objective (MoC's Boundary Clarity) rests on no question: the documents are all it reads
(the question set is not loaded, nothing is held out). A trial scores its boundaries with the
language model through the output cache, first on a seeded sample of a third of the planned
boundaries (the pruner's cheap step, the same interval rule), then on the planned sample
(:func:`backend.tune.budget.plan_bc`; every boundary when the chunking has fewer). The pick is the
best estimate; it is compared with the baseline and the runner-up by the difference of two
independent estimates (:func:`backend.metrics.intervals.independent_difference`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from backend.chunkers import config_needs, make_chunker
from backend.chunking import ChunkerConfig
from backend.corpus.inputs import corpus_inputs
from backend.corpus.ray_engine import ray_session
from backend.corpus.work import load_corpus_document
from backend.errors import Cancelled, ChunkLabError, InputError, ModelError, ParameterError, StoreError, one_line
from backend.loaders import load_document
from backend.metrics.intervals import (
    Interval,
    independent_difference,
    mean_interval,
    paired_difference,
    paired_leaders,
)
from backend.models.rates import rate_store
from backend.models.types import Scorer as LanguageModel
from backend.progress import Progress, format_seconds
from backend.retrieval.agreement import EVIDENCE
from backend.retrieval.evaluate import METRIC_LABELS
from backend.retrieval.generation import generate_questions
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.questions import (
    QuestionSet,
    corpus_id_for,
    load_question_set,
    load_sample_question_set,
    merge_question_sets,
    save_question_set,
)
from backend.samples import load_sample
from backend.text.document import Document
from backend.tokenizers import get_tokenizer
from backend.tune.budget import BC_MIN_BOUNDARIES, BcPlan, Budget, plan_bc, plan_model_families
from backend.tune.corpus import corpus_questions
from backend.tune.corpus_scoring import PER_DOCUMENT_NOTE, CorpusScorer
from backend.tune.pruner import STEP, SUBSET_ATTR, IntervalPruner, incumbent, subset_interval
from backend.tune.result import append_trial, read_plan, read_trials, write_plan, write_result
from backend.tune.scoring import Scorer
from backend.tune.space import BASELINE, default_families, family_needs, search_space
from backend.tune.spec import parse_budget, parse_constraint
from backend.tune.split import Split, split_questions, subset
from backend.tune.study import BASELINE_ATTR, CONFIG_ATTR, open_study, recover, study_name
from backend.tune.types import Comparison, LeftOut, TrialRow, TuneProgress, TuneResult

__all__ = [
    "LEADERS",
    "QUESTION_METHODS",
    "GENERATED_PER_DOCUMENT",
    "SMALL_HELD_OUT",
    "TuneInputs",
    "available_models",
    "check_objective_supported",
    "folder_source",
    "load_inputs",
    "run_tune",
]

LEADERS = 3  # tuning leaders scored on the held-out questions (besides the baseline)
QUESTION_METHODS = ("model-free", "bundled", "chat")  # generate:METHOD
GENERATED_PER_DOCUMENT = 15  # questions generated on each document
SMALL_HELD_OUT = 20  # fewer held-out questions than this: the intervals are wide (a warning)
_FAILURES = 3  # trials in a row that a model or the store failed, or skipped as over budget: the search stops
_REPEATS = 10  # trials in a row that only repeat configurations already scored: the search has converged
_TUNING_VALUES = "tuning_values"  # user attribute: per-question objective values, in tuning order


def check_objective_supported(objective: str, lm: bool | None = None) -> None:
    """Refuse an objective the run cannot score with the models it has, in one line.

    Args:
        objective: The objective (already checked to be one of :data:`~backend.tune.types.OBJECTIVES`).
        lm: Whether the run has the language model (None: not known yet, as when a request is checked).

    Raises:
        ModelError: ``bc`` without the language model (Boundary Clarity scores each boundary with it).
    """
    if objective == "bc" and lm is False:
        raise ModelError("bc needs the language model (Boundary Clarity scores every boundary with it), "
                         "which this session has not loaded; load one or choose iou, recall, precision or "
                         "precision_omega")


def available_models(*, lm: bool, embedder: bool = True) -> frozenset[str]:
    """The kinds of model a session can run (what :func:`~backend.tune.space.default_families` is given)."""
    return frozenset(k for k, ok in (("lm", lm), ("embedder", embedder)) if ok)


@dataclass(frozen=True)
class TuneInputs:
    """The documents and question set a run rests on.

    Attributes:
        documents: The documents, in order.
        questions: The question set (only questions on these documents).
        name: How results name the set (``sample:narrative``, the CSV's path, ``generate:model-free``).
        method: How the questions were made (``hand-written``, ``model-free``, ``bundled-lm``, ``chat``, ``as given``).
    """

    documents: tuple[Document, ...]
    questions: QuestionSet
    name: str
    method: str


def _documents(sources: Sequence[str]) -> tuple[Document, ...]:
    docs: list[Document] = []
    for s in sources:
        if s.startswith("sample:"):
            docs.append(load_sample(s.removeprefix("sample:")))
            continue
        path = Path(s).expanduser()
        if path.is_dir():
            found = corpus_inputs(path)
            if not found.files:
                raise InputError(f"{s}: no document Chunk Lab reads in this folder")
            docs += [load_corpus_document(f) for f in found.files]
        elif path.is_file():
            try:
                docs.append(load_document(path))
            except PermissionError as e:
                raise InputError(f"{s}: permission denied") from e
        else:
            raise InputError(f"{s}: no such file or folder")
    if not docs:
        raise InputError("no document to tune on")
    return tuple(docs)


def _generate(docs: Sequence[Document], method: str, seed: int, out: Path, progress: Progress,
              per_document: int = GENERATED_PER_DOCUMENT) -> QuestionSet:
    """``per_document`` questions generated on each document (``out/questions.csv`` when an earlier run saved them).

    The count asked for is saved beside them (``out/questions.per_document``; a folder without it was
    written when the count was fixed at :data:`GENERATED_PER_DOCUMENT`).

    Raises:
        ParameterError: ``out`` holds questions generated with another count (one line).
    """
    csv, corpora, count = out / "questions.csv", out / "corpora", out / "questions.per_document"
    if csv.is_file():
        saved = count.read_text(encoding="utf-8").strip() if count.is_file() else str(GENERATED_PER_DOCUMENT)
        if saved != str(per_document):
            raise ParameterError(f"{out} holds questions generated with {saved} per document, not {per_document}; "
                                 f"choose another output folder or ask for {saved} per document")
        return load_question_set(csv, corpora)
    merged: QuestionSet | None = None
    used: set[str] = set()
    for i, doc in enumerate(docs):
        part = progress.part(i, len(docs), f"questions on {doc.source}")
        cid = base = corpus_id_for(doc)
        k = 1
        while cid in used:  # a/notes.txt and b/notes.txt: two corpora
            k += 1
            cid = f"{base}-{k}"
        used.add(cid)
        if method == "model-free":
            got = model_free_questions(doc, n=per_document, corpus_id=cid, seed=seed, progress=part)
        else:
            got = generate_questions(doc, n=per_document, corpus_id=cid, method=method, seed=seed,
                                     progress=part)
        merged = merge_question_sets(merged, got.question_set())
    if merged is None:
        raise InputError("no document to generate questions on")
    save_question_set(merged, csv, corpora)
    count.write_text(f"{per_document}\n", encoding="utf-8")
    return merged


def folder_source(sources: Sequence[str]) -> Path | None:
    """The folder a request tunes over through the corpus engine (one source that is a directory), else None."""
    if len(sources) != 1 or sources[0].startswith("sample:"):
        return None
    path = Path(sources[0]).expanduser()
    return path if path.is_dir() else None


def load_inputs(request: Any, out: Path, progress: Progress | None = None) -> TuneInputs:
    """The request's documents and question set (generated ones saved in ``out``; see the module docstring).

    A folder's set comes from :func:`backend.tune.corpus.corpus_questions` (``generate:model-free`` on each
    document, saved under ``out/questions``; or a CSV or sample about the folder's documents).

    Raises:
        InputError: a document or the CSV cannot be read; the set has no question on the documents.
        ParameterError: an unknown sample or question method.
    """
    progress = progress or Progress()
    docs = _documents(request.sources)
    spec = request.questions
    folder = folder_source(request.sources)
    per_document = getattr(request, "questions_per_document", GENERATED_PER_DOCUMENT)
    if folder is not None:
        corpora = Path(request.corpora).expanduser() if request.corpora else None
        qs = corpus_questions(folder, spec, out=out, seed=request.seed, corpora=corpora,
                              per_document=per_document)
        method = ("model-free" if spec.startswith("generate:") else
                  "hand-written" if spec.startswith("sample:") else "as given")
        return TuneInputs(docs, qs, spec, method)
    if spec.startswith("generate:"):
        method = spec.removeprefix("generate:")
        if method not in QUESTION_METHODS:
            raise ParameterError(f"unknown question method {method!r}; choose one of: {', '.join(QUESTION_METHODS)}")
        qs = _generate(docs, method, request.seed, out, progress, per_document)
        return TuneInputs(docs, qs, spec, {"bundled": "bundled-lm"}.get(method, method))
    if spec.startswith("sample:"):
        full, method = load_sample_question_set(spec.removeprefix("sample:")), "hand-written"
    else:
        full, method = load_question_set(spec, request.corpora), "as given"
    parts = [p for p in (full.on_document(d) for d in docs) if p is not None]
    if not parts:
        names = ", ".join(d.source for d in docs)
        raise InputError(f"{spec} has no question on {names}: its corpora are other texts")
    merged = parts[0]
    for p in parts[1:]:
        merged = merge_question_sets(merged, p)
    return TuneInputs(docs, merged, spec, method)


def _bc_inputs(request: Any) -> TuneInputs:
    """The documents of a ``bc`` run as the corpora of a question set with no question (bc rests on none)."""
    docs = _documents(request.sources)
    corpora: dict[str, str] = {}
    for doc in docs:
        cid = base = corpus_id_for(doc)
        k = 1
        while cid in corpora:
            k += 1
            cid = f"{base}-{k}"
        corpora[cid] = doc.text
    return TuneInputs(docs, QuestionSet((), corpora), "none (bc rests on no question)", "none")


def _question_key(qs: QuestionSet) -> list[Any]:
    return [[q.question, q.corpus_id, [list(s) for s in q.spans]] for q in qs.questions]


def _baseline(request: Any) -> ChunkerConfig:
    name, params, tokenizer = ChunkerConfig.parse(request.baseline or BASELINE)
    return make_chunker(name, params, tokenizer).config


def _lm_rate(scorer: LanguageModel | None) -> float | None:
    """Tokens per second of the language model's scoring pass, as measured on this machine (None: not measured)."""
    if scorer is None:
        return None
    rate = rate_store().of_model(scorer.info, "token_nll")
    return rate.units_per_s if rate is not None else None


def _plan_families(request: Any, have: Collection[str], left_s: float, tokens: int,
                   scorer: LanguageModel | None) -> tuple[tuple[str, ...], tuple[LeftOut, ...], dict[str, float]]:
    """The families searched, those left out (a model missing, or a first trial over the budget), the priors."""
    if request.families is None:
        families, missing_out = default_families(have)
        left = list(missing_out)
    else:
        families, left = (), []
        for f in request.families:
            missing = [m for m in family_needs(f) if m not in have]
            if missing:
                what = " and ".join({"lm": "the language model", "embedder": "the embedder"}.get(m, m) for m in missing)
                left.append(LeftOut(f, f"needs {what}, which this session has not loaded"))
            else:
                families += (f,)
    plan = plan_model_families(families, family_needs, tokens, _lm_rate(scorer), left_s,
                               named=request.families is not None)
    return plan.kept, tuple(left) + plan.left_out, plan.priors


def _row(number: int, config: ChunkerConfig, state: str, values: Sequence[float], stats: Any, seconds: float,
         seed: int, secondary: float | None = None, reason: str = "") -> TrialRow:
    ivl = mean_interval(values, seed=seed) if values else None
    return TrialRow(
        number=number, config=config, state=state, objective=ivl.mean if ivl else math.nan, interval=ivl,
        questions=len(values), chunks=stats.chunks if stats else 0, mean_tokens=stats.mean_tokens if stats else 0.0,
        index_cost=stats.index_cost if stats else 0, seconds=seconds, secondary=secondary, reason=reason,
    )


def _violation(constraints: Sequence[Any], stats: Any) -> str:
    for c in constraints:
        if not c.holds(stats.as_dict()):
            value = stats.as_dict()[c.metric]
            shown = f"{value:.0f}" if float(value).is_integer() or value > 100 else f"{value:.1f}"
            return f"violates {c.text} ({shown})"
    return ""


def run_tune(request: Any, **kwargs: Any) -> TuneResult:
    """Run (or resume) the tuning run ``request`` asks for and return its answer (see the module docstring).

    With ``request.engine == "ray"`` (a folder only) one Ray is joined or started for the whole study
    (:func:`backend.corpus.ray_engine.ray_session`) and every trial's documents run as its tasks.
    The keyword arguments are :func:`_run_tune`'s.
    """
    if getattr(request, "engine", "local") == "ray":
        with ray_session(getattr(request, "address", None), getattr(request, "workers", None)):
            return _run_tune(request, **kwargs)
    return _run_tune(request, **kwargs)


def _run_tune(
    request: Any,
    *,
    scorer: LanguageModel | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    models_available: Collection[str] = frozenset({"embedder"}),
    embedder: Any = None,
) -> TuneResult:
    """The body of :func:`run_tune`.

    Args:
        request: A checked :class:`backend.lab.tune.TuneRequest`.
        scorer: The language model, when the run needs one (a PPL family) and the session has it.
        progress: Fraction of the budget used; cancel is honoured between trials.
        clock: Monotonic seconds (a test scripts it).
        models_available: The kinds of model the session can run (:func:`available_models`).
        embedder: The embedder or its spec (None: the default, the bundled MiniLM).

    Raises:
        ParameterError: the output folder holds another run; a question set too small to split.
        InputError: unreadable documents or questions.
    """
    progress = progress or Progress()
    out = Path(request.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(parse_budget(request.budget), clock)
    budget.start()
    bc = request.objective == "bc"
    check_objective_supported(request.objective, lm=scorer is not None)
    progress.publish(TuneProgress((), budget.seconds, 0.0, None, "planning"))
    inputs = _bc_inputs(request) if bc else load_inputs(request, out, progress)
    qs = inputs.questions
    split = Split((), ()) if bc else split_questions([q.corpus_id for q in qs.questions], seed=request.seed)
    baseline = _baseline(request)
    constraints = tuple(parse_constraint(c) for c in request.constraints)
    tokens = sum(get_tokenizer(baseline.tokenizer).count(d.text) for d in inputs.documents)
    families, left_out, budget.priors = _plan_families(request, models_available, budget.left, tokens, scorer)
    if not families:
        raise ParameterError("no family left to search: " + "; ".join(x.reason for x in left_out))
    bc_plan = None
    if bc:  # every trial spends the language model on its boundaries: the sample fits the budget
        bc_plan = plan_bc(float(baseline.params_dict.get("chunk_size", 200)), _lm_rate(scorer), budget.left)
        if bc_plan.trial_seconds is not None:
            for f in families:
                budget.priors[f] = budget.priors.get(f, 0.0) + bc_plan.trial_seconds
    space = search_space(families, baseline.tokenizer)
    # A folder's trials run through the corpus engine; bc reads no question, so its documents are scored here.
    folder = None if bc else folder_source(request.sources)
    if folder is not None:  # each trial's documents through the corpus engine
        scoring: Any = CorpusScorer(folder, inputs.documents, qs, request.objective, out=out,
                                    engine=getattr(request, "engine", "local"),
                                    workers=getattr(request, "workers", None),
                                    address=getattr(request, "address", None), embedder=embedder, lm=scorer)
    else:
        scoring = Scorer(qs, request.objective, store_path=out / "chroma", embedder=embedder, lm=scorer)
    key = {
        "documents": sorted(d.id for d in inputs.documents), "questions": _question_key(qs), "families": families,
        "objective": request.objective, "secondary": request.secondary, "constraints": [c.text for c in constraints],
        "seed": request.seed, "baseline": baseline.spec, "embedder": scoring.embedder.info.fingerprint,
    }
    if request.questions.startswith("generate:"):  # the count asked for (other sets: the key as before)
        key["questions_per_document"] = getattr(request, "questions_per_document", GENERATED_PER_DOCUMENT)
    if folder is not None:
        key["retrieval"] = "per document"
    if bc_plan is not None:
        key["bc_boundaries"] = bc_plan.boundaries
    name = study_name(key)
    old = read_plan(out)
    if old is not None and old.get("study") != name:
        raise ParameterError(f"{out} holds another tuning run (other documents, questions or settings); "
                             "choose another output folder")
    prior = {r.number: r for r in read_trials(out)}
    budget.already_used = sum(r.seconds for r in prior.values())
    plan = {
        "study": name, "documents": [d.source for d in inputs.documents], "question_set": inputs.name,
        "question_method": inputs.method, "questions": len(qs), "split": split.to_json(), "families": list(families),
        "left_out": [x.to_json() for x in left_out], "objective": request.objective,
        "secondary": request.secondary, "constraints": [c.text for c in constraints], "seed": request.seed,
        "baseline": baseline.spec, "budget": request.budget, "budget_seconds": budget.seconds,
        "trials": request.trials, "space_size": _space_size(space), "embedder": scoring.embedder.info.name,
    }
    if folder is not None:
        plan.update(engine=getattr(request, "engine", "local"), retrieval=PER_DOCUMENT_NOTE)
    if bc_plan is not None:
        plan["bc"] = bc_plan.to_json()
    write_plan(out, plan)

    two = request.secondary is not None
    pruner = IntervalPruner()
    study = open_study(out, name, seed=request.seed, two_objectives=two, pruner=None if two else pruner)
    recover(study)
    if not study.trials:
        params = _baseline_params(space, baseline)
        # "space": the space names the baseline (its parameters are recorded); "as is": it is run outside the space.
        study.enqueue_trial(params, user_attrs={BASELINE_ATTR: "space" if params else "as is"})
    cheap, rest = subset(split.tuning, seed=request.seed)
    rows = dict(prior)
    cancelled = False
    stopped = ""
    broken: list[str] = []  # the last trials' failures of a model or the store (not of one configuration)
    stage = "searching"

    def report(count: bool = True) -> None:
        if count:  # counting also honours a cancel
            progress(min(int(budget.used), int(budget.seconds)), max(1, int(budget.seconds)))
        best = _best_number(study, two)
        progress.publish(TuneProgress(tuple(sorted(rows.values(), key=lambda r: r.number)), budget.seconds,
                                      budget.used, best, stage))

    try:
        progress.set_unit("seconds of the budget")
        report()
        while True:
            progress.check()
            if request.trials is not None and len(rows) >= request.trials:
                break
            if len(broken) == _FAILURES:
                stopped = f"stopped: {_FAILURES} trials in a row could not run ({broken[-1]})"
                break
            reserve = _held_out_reserve(budget, split)
            if not budget.fits(budget.cheapest(families) + reserve):
                break
            last = sorted(rows.values(), key=lambda r: r.number)
            if len([r for r in last[-_FAILURES:] if r.reason.startswith("skipped")]) == _FAILURES:
                break  # the sampler keeps proposing what no longer fits
            if len(last) >= _REPEATS and all(r.reason.startswith("repeats") for r in last[-_REPEATS:]):
                stopped = (f"stopped: the last {_REPEATS} trials proposed configurations already scored "
                           "(the search has converged on this space)")
                break
            began = budget.used  # a trial's cost for the budget: everything from here to the next trial
            trial = study.ask()
            t0 = clock()
            family = "?"
            config = None
            stats = None
            try:
                config = _config_of(trial, space, baseline)
                family = config.name
                trial.set_user_attr(CONFIG_ATTR, config.spec)
                same = next((r for r in sorted(rows.values(), key=lambda r: r.number)
                             if r.config == config and r.state in ("complete", "pruned")
                             and not r.reason.startswith("skipped")), None)
                cost = budget.expected(family)
                if same is not None:  # the sampler proposed a configuration already scored: its scores stand
                    if same.state == "complete":
                        study.tell(trial, [same.objective, same.secondary] if two else same.objective)
                    else:
                        study.tell(trial, state=TrialState.PRUNED)
                    row = replace(same, number=trial.number, seconds=clock() - t0,
                                  reason=(same.reason if same.state != "complete" else "")  # bc: its detail
                                  or f"repeats trial {same.number} (not scored again)")
                elif not budget.fits(cost + reserve):  # before chunking: a PPL chunking is the dear part
                    study.tell(trial, state=TrialState.PRUNED)
                    row = _row(trial.number, config, "pruned", [], None, clock() - t0, request.seed,
                               reason=f"skipped: a {family} trial is expected to take {format_seconds(cost)}; "
                                      f"{format_seconds(budget.left)} of the budget is left")
                else:
                    stats = scoring.stats(config)
                    violated = _violation(constraints, stats)
                    if violated:
                        study.tell(trial, state=TrialState.PRUNED)
                        row = _row(trial.number, config, "pruned", [], stats, clock() - t0, request.seed,
                                   reason=violated)
                    elif bc_plan is not None:
                        row = _score_bc_trial(study, trial, config, stats, scoring, two, request, bc_plan, clock,
                                              t0, progress)
                    else:
                        row = _score_trial(study, trial, config, stats, scoring, cheap, rest, two, request, pruner,
                                           clock, t0, progress)
            except Cancelled:
                study.tell(trial, state=TrialState.FAIL)
                study.enqueue_trial(dict(trial.params), user_attrs={k: v for k, v in trial.user_attrs.items()
                                                                   if k in (BASELINE_ATTR, CONFIG_ATTR)})
                raise
            except (ChunkLabError, AssertionError) as e:
                # AssertionError: a chunker's own span check (Chunker.chunk) refused what it cut; the trial fails
                # with that line and the search goes on (three in a row stop it).
                study.tell(trial, state=TrialState.FAIL)
                what = str(e) if isinstance(e, ChunkLabError) else f"{type(e).__name__}: {e}"
                row = _row(trial.number, config or baseline, "failed", [], stats, clock() - t0, request.seed,
                           reason=one_line(what))
                if isinstance(e, (ModelError, StoreError)):  # it would fail every trial alike
                    broken.append(row.reason)
            else:
                broken.clear()
            rows[row.number] = row
            append_trial(out, row)
            report()
            budget.record(family, budget.used - began)
    except Cancelled:
        cancelled = True

    stage = "held-out"
    report(count=False)
    try:
        answer = (_bc_answer(rows, baseline, scoring, request, bc_plan) if bc_plan is not None
                  else _held_out(study, rows, baseline, split, scoring, request, two, cancelled))
    except Cancelled:
        cancelled = True
        answer = _Answer(None, None, None, None, (), ())
    notes = tuple(n for n in (stopped, bc_plan.note if bc_plan is not None else "") if n) + (
        (PER_DOCUMENT_NOTE, *getattr(scoring, "warnings", ())) if folder is not None else ())
    result = _result(request, inputs, split, rows, baseline, answer, left_out, budget, cancelled, study, two, notes)
    write_result(out, result)
    stage = "done"
    report(count=False)
    return result


def _held_out_reserve(budget: Budget, split: Split) -> float:
    """Seconds kept for the held-out stage: the leaders and the baseline, each on the held-out share of a trial."""
    rates = budget.rates()
    if not rates:
        return 0.0
    per_trial = sum(rates.values()) / len(rates)
    share = len(split.held_out) / max(1, len(split.tuning))
    return (LEADERS + 1) * per_trial * share


def _space_size(space: Any) -> int | None:
    try:
        return int(space.size())
    except (TypeError, ValueError, OverflowError):
        return None


def _baseline_params(space: Any, baseline: ChunkerConfig) -> dict[str, Any]:
    """The baseline's parameters in the space ({} when the space cannot name it: then it is run as it is)."""
    try:
        return dict(space.params_of(baseline) or {})
    except (ChunkLabError, KeyError, ValueError):
        return {}


def _config_of(trial: optuna.Trial, space: Any, baseline: ChunkerConfig) -> ChunkerConfig:
    """The configuration of ``trial``: the baseline for the enqueued baseline trial, else the space's suggestion."""
    if trial.user_attrs.get(BASELINE_ATTR) == "as is":
        return baseline
    return space.suggest(trial)


def _score_trial(study: optuna.Study, trial: optuna.Trial, config: ChunkerConfig, stats: Any, scoring: Scorer,
                 cheap: Sequence[int], rest: Sequence[int], two: bool, request: Any, pruner: IntervalPruner,
                 clock: Callable[[], float], t0: float, progress: Progress) -> TrialRow:
    """Score a trial on the cheap subset, prune it or score it on the rest, and tell the study."""
    first = scoring.score(config, cheap)
    values = [first.values[i] for i in cheap]
    ivl = mean_interval(values, seed=request.seed)
    trial.set_user_attr(SUBSET_ATTR, [ivl.mean, ivl.low, ivl.high])
    if not two:
        trial.report(ivl.mean, STEP)
        if trial.should_prune():
            frozen = study.get_trials(deepcopy=False)[trial.number]
            reason = pruner.reason(study, frozen)
            study.tell(trial, state=TrialState.PRUNED)
            return _row(trial.number, config, "pruned", values, stats, clock() - t0, request.seed, reason=reason)
    progress.check()
    second = scoring.score(config, rest) if rest else None
    by_index = {**first.values, **(second.values if second else {})}
    tuning = [by_index[i] for i in sorted(by_index)]
    trial.set_user_attr(_TUNING_VALUES, tuning)
    mean = float(sum(tuning) / len(tuning))
    sec = float(stats.as_dict()[request.secondary]) if two else None
    study.tell(trial, [mean, sec] if two else mean)
    return _row(trial.number, config, "complete", tuning, stats, clock() - t0, request.seed, secondary=sec)


def _bc_text(ivl: Interval) -> str:
    """``0.912 [0.905, 0.919]`` (BC is a ratio near 1: three decimals, unscaled)."""
    return ivl.text(scale=1.0, unit="", digits=3)


def _bc_row(number: int, config: ChunkerConfig, state: str, got: Any, stats: Any, seconds: float,
            secondary: float | None = None, reason: str = "") -> TrialRow:
    ivl = got.interval
    how = f"exact: all {got.total}" if got.exact else f"sampled: {got.scored} of {got.total}"
    detail = f"bc over boundaries ({how})"
    return TrialRow(
        number=number, config=config, state=state, objective=ivl.mean, interval=ivl, questions=0,
        chunks=stats.chunks, mean_tokens=stats.mean_tokens, index_cost=stats.index_cost, seconds=seconds,
        secondary=secondary, reason=f"{reason}; {detail}" if reason else detail,
    )


def _score_bc_trial(study: optuna.Study, trial: optuna.Trial, config: ChunkerConfig, stats: Any, scoring: Scorer,
                    two: bool, request: Any, plan: BcPlan, clock: Callable[[], float], t0: float,
                    progress: Progress) -> TrialRow:
    """Score a trial's Boundary Clarity on a first sample of boundaries, prune it or score the planned sample."""
    first = scoring.boundary_clarity(config, max(BC_MIN_BOUNDARIES, plan.boundaries // 3), seed=request.seed)
    ivl = first.interval
    trial.set_user_attr(SUBSET_ATTR, [ivl.mean, ivl.low, ivl.high])
    if not two and not first.exact:
        trial.report(ivl.mean, STEP)
        if trial.should_prune():
            best = incumbent(study, exclude=trial.number)
            theirs = subset_interval(best) if best is not None else None
            reason = "below the incumbent on a first sample of boundaries"
            if best is not None and theirs is not None:
                reason = (f"below trial {best.number} on a first sample of boundaries: BC "
                          f"[{ivl.low:.3f}, {ivl.high:.3f}] against [{theirs[1]:.3f}, {theirs[2]:.3f}]")
            study.tell(trial, state=TrialState.PRUNED)
            return _bc_row(trial.number, config, "pruned", first, stats, clock() - t0, reason=reason)
    progress.check()
    got = first if first.exact or first.scored >= plan.boundaries else \
        scoring.boundary_clarity(config, plan.boundaries, seed=request.seed)
    sec = float(stats.as_dict()[request.secondary]) if two else None
    study.tell(trial, [got.interval.mean, sec] if two else got.interval.mean)
    return _bc_row(trial.number, config, "complete", got, stats, clock() - t0, secondary=sec)


def _bc_answer(rows: Mapping[int, TrialRow], baseline: ChunkerConfig, scoring: Scorer, request: Any,
               plan: BcPlan) -> _Answer:
    """The pick of a ``bc`` run: the best estimate; its differences from the baseline and the runner-up are
    differences of independent estimates (each configuration's own sample of boundaries)."""
    complete = [r for r in rows.values() if r.state == "complete" and r.interval is not None]
    if not complete:
        return _Answer(None, None, None, None, (), ())
    firsts: dict[ChunkerConfig, TrialRow] = {}
    for r in sorted(complete, key=lambda r: (-r.objective, r.number)):
        firsts.setdefault(r.config, r)
    scores: dict[ChunkerConfig, Interval] = {c: r.interval for c, r in firsts.items() if r.interval is not None}
    pick = next(iter(firsts))
    vs_base = None
    if pick != baseline:
        base = scores.get(baseline)
        if base is None:  # the baseline was pruned or failed: its own estimate on the planned sample
            try:
                base = scoring.boundary_clarity(baseline, plan.boundaries, seed=request.seed).interval
            except ChunkLabError:
                base = None
        if base is not None:
            vs_base = Comparison("baseline", baseline, base, independent_difference(scores[pick], base))
    others = [c for c in firsts if c != pick]
    vs_runner = None
    if others:
        runner = others[0]
        vs_runner = Comparison("runner-up", runner, scores[runner], independent_difference(scores[pick], scores[runner]))
    tied = tuple(c for c in others if not independent_difference(scores[pick], scores[c]).excludes_zero())
    return _Answer(pick, scores[pick], vs_base, vs_runner, tied, tuple(firsts), firsts[pick].reason)


def _best_number(study: optuna.Study, two: bool) -> int | None:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    return max(complete, key=lambda t: t.values[0]).number


@dataclass(frozen=True)
class _Answer:
    pick: ChunkerConfig | None
    pick_score: Interval | None
    vs_baseline: Comparison | None
    vs_runner_up: Comparison | None
    tied: tuple[ChunkerConfig, ...]
    scored: tuple[ChunkerConfig, ...]
    how: str = ""  # bc: how the pick's estimate was made ("bc over boundaries (sampled: 60 of 412)")


def _held_out(study: optuna.Study, rows: Mapping[int, TrialRow], baseline: ChunkerConfig, split: Split,
              scoring: Scorer, request: Any, two: bool, cancelled: bool) -> _Answer:
    """Score the tuning leaders and the baseline on the held-out questions and pick among them."""
    complete = [r for r in rows.values() if r.state == "complete"]
    if not complete:
        return _Answer(None, None, None, None, (), ())
    ranked = sorted(complete, key=lambda r: (-r.objective, r.number))
    firsts: dict[ChunkerConfig, TrialRow] = {}
    for r in ranked:  # distinct configurations, best first (a repeated trial scored the same)
        firsts.setdefault(r.config, r)
    leaders = list(firsts.values())[:LEADERS]
    candidates = list(dict.fromkeys([r.config for r in leaders] + [baseline]))
    held = list(split.held_out)
    scores: dict[ChunkerConfig, list[float]] = {}
    for config in candidates:
        got = scoring.score(config, held)
        scores[config] = [got.values[i] for i in held]
    seed = request.seed
    # The pick is the best on the tuning questions: choosing it by a held-out mean would make that mean the
    # best of several noisy scores (the winner's curse) and no longer a held-out check of the pick.
    pick = leaders[0].config
    pick_score = mean_interval(scores[pick], seed=seed)
    vs_base = None
    if pick != baseline:
        vs_base = Comparison("baseline", baseline, mean_interval(scores[baseline], seed=seed),
                             paired_difference(scores[pick], scores[baseline], seed=seed))
    others = [c for c in candidates if c != pick]
    vs_runner = None
    if others:
        # The runner-up: the next configuration on the tuning questions (the baseline when no other leads).
        runner = next((r.config for r in leaders[1:]), others[0])
        vs_runner = Comparison("runner-up", runner, mean_interval(scores[runner], seed=seed),
                               paired_difference(scores[pick], scores[runner], seed=seed))
    tied = tuple(c for c in others
                 if not paired_difference(scores[pick], scores[c], seed=seed).excludes_zero())
    # paired_leaders agrees when the pick has the best held-out mean; kept as the one rule of "told apart".
    names = {c.spec: c for c in candidates}
    leaders_named = paired_leaders({c.spec: v for c, v in scores.items()}, seed=seed)
    if leaders_named and names[leaders_named[0]] == pick:
        tied = tuple(names[s] for s in leaders_named[1:])
    return _Answer(pick, pick_score, vs_base, vs_runner, tied, tuple(candidates))


def _pareto(study: optuna.Study, two: bool) -> tuple[int, ...]:
    if not two:
        return ()
    return tuple(sorted(t.number for t in study.best_trials))


def _theta_curves(rows: Mapping[int, TrialRow]) -> dict[str, list[tuple[float, float]]]:
    """Per family with a θ (``threshold``), its complete trials' (θ, tuning objective), by θ."""
    curves: dict[str, list[tuple[float, float]]] = {}
    for r in rows.values():
        theta = r.config.params_dict.get("threshold")
        if r.state == "complete" and theta is not None and "lm" in config_needs(r.config):
            curves.setdefault(r.config.name, []).append((float(theta), float(r.objective)))
    return {k: sorted(v) for k, v in curves.items()}


def _points(ivl: Interval) -> str:
    return ivl.text(unit=" points")


def _bc_verdict(docs: str, answer: _Answer, cancelled: bool, baseline: str) -> str:
    """What a ``bc`` run's table shows: no question, intervals over boundaries, the pick against the others."""
    how = answer.how.removeprefix("bc over boundaries (").removesuffix(")") or "sampled"
    head = f"On {docs}, bc rests on no question: no held-out check; intervals are over boundaries ({how})"
    if answer.pick is None or answer.pick_score is None:
        return f"{head}; no trial completed{' before the run was cancelled' if cancelled else ''}: there is no pick."
    text = f"{head}. {answer.pick.spec} has the highest Boundary Clarity ({_bc_text(answer.pick_score)})"
    vs = answer.vs_baseline
    if vs is None:
        text += " and is the baseline" if answer.pick.spec == baseline else "; the baseline has no estimate"
    elif vs is not None and vs.verdict == "better":
        text += f"; it beats the baseline by {_bc_text(vs.difference)}"
    elif vs is not None:
        text += f", but its difference from the baseline is {_bc_text(vs.difference)} ({vs.verdict})"
    n = len(answer.tied)
    if n:
        text += f"; it cannot be told apart from {n} other{'s' if n > 1 else ''}"
    return text + "."


def _verdict(inputs: TuneInputs, split: Split, request: Any, answer: _Answer, cancelled: bool) -> str:
    docs = ", ".join(d.source for d in inputs.documents)
    if request.objective == "bc":
        name, params, tokenizer = ChunkerConfig.parse(request.baseline or BASELINE)
        return _bc_verdict(docs, answer, cancelled, make_chunker(name, params, tokenizer).config.spec)
    label = METRIC_LABELS.get(request.objective, request.objective)
    where = f"On {docs}, with {inputs.name} ({len(split.held_out)} held-out questions, {inputs.method})"
    if answer.pick is None or answer.pick_score is None:
        return f"{where}, no trial completed{' before the run was cancelled' if cancelled else ''}: there is no pick."
    best = f"the best of the trials on the {len(split.tuning)} tuning questions"
    score = f"held-out {label} {answer.pick_score.text()}"
    if answer.vs_baseline is None:  # the pick is the baseline
        head = (f"{where}, no configuration beats the baseline on the held-out questions: the baseline "
                f"{answer.pick.spec} is {best} ({score})")
        tail = ""
    elif answer.vs_baseline.verdict == "better":
        head = f"{where}, {answer.pick.spec} is {best} ({score})"
        tail = f"; it beats the baseline by {_points(answer.vs_baseline.difference)} on the held-out questions"
    else:
        head = (f"{where}, no configuration beats the baseline on the held-out questions: {answer.pick.spec} is "
                f"{best} ({score})")
        tail = f", but its difference from the baseline is {_points(answer.vs_baseline.difference)}"
    n = len(answer.tied)
    if n:
        tail += f"; it cannot be told apart from {n} other{'s' if n > 1 else ''}"
    return head + tail + "."


def _warnings(inputs: TuneInputs, split: Split, cancelled: bool, left_out: Sequence[LeftOut]) -> tuple[str, ...]:
    out: list[str] = []
    if inputs.method == "none":  # bc: no question, so no question warning
        return ("cancelled: the search stopped before its budget or trial cap was spent",) if cancelled else ()
    n = len(split.held_out)
    if n < SMALL_HELD_OUT:
        out.append(f"small: {n} held-out questions (under {SMALL_HELD_OUT}): intervals are wide")
    if inputs.method == "model-free":
        known = EVIDENCE["model-free"]
        out.append(f"model-free questions (keywords in a template, exact excerpts): measured against hand-written ones they "
                   f"rank IoU alike (ρ {known.iou:+.2f}) and recall less closely (ρ {known.recall:+.2f}, "
                   "varying by seed); check a recall pick with questions compare")
    elif inputs.method not in ("hand-written", "as given"):
        out.append(f"generated questions ({inputs.method}): not checked by a person")
    if cancelled:
        out.append("cancelled: the search stopped before its budget or trial cap was spent")
    return tuple(out)


def _result(request: Any, inputs: TuneInputs, split: Split, rows: Mapping[int, TrialRow], baseline: ChunkerConfig,
            answer: _Answer, left_out: Sequence[LeftOut], budget: Budget, cancelled: bool, study: optuna.Study,
            two: bool, notes: tuple[str, ...] = ()) -> TuneResult:
    return TuneResult(
        documents=tuple(d.source for d in inputs.documents), question_set=inputs.name,
        question_method=inputs.method, tuning_questions=split.tuning, held_out_questions=split.held_out,
        objective=request.objective, secondary=request.secondary, constraints=tuple(request.constraints),
        seed=request.seed, trials=tuple(sorted(rows.values(), key=lambda r: r.number)), pick=answer.pick,
        pick_score=answer.pick_score, baseline=baseline, vs_baseline=answer.vs_baseline,
        vs_runner_up=answer.vs_runner_up, tied=answer.tied, pareto=_pareto(study, two), left_out=tuple(left_out),
        warnings=_warnings(inputs, split, cancelled, left_out) + notes, verdict=_verdict(inputs, split, request, answer,
                                                                               cancelled),
        budget_seconds=budget.seconds, used_seconds=budget.used,
        cancelled=cancelled, theta_curves=_theta_curves(rows),
    )
