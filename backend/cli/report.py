"""The ``report`` subcommand of ``python -m backend`` (wired in by :mod:`backend.cli.main`).

Subcommand:
    report [FILE] --config SPEC [--config SPEC …] [--session FILE] [--questions CSV|sample:NAME
           [--corpora DIR]] [--retrieve 5] [--K 0.8] [--delta 0] [--window W] [--bc-mode M] [--cs-rule R]
           [--embedder default|PATH] [--no-quality] [--lm NAME|PATH] [--lm-window N] [--device D] [--no-cache]
           [--tuning DIR] --out FILE
        Writes the one-file HTML report (:func:`backend.report.html.report_html`) of the
        configurations on the document, computing what the output cache lacks first (the
        Summary's :func:`~backend.report.summary.collect` with ``compute=True``: chunk
        statistics, BC, CS and DS with the language model and the embedder, and, with a
        question set, the benchmark), with progress on stderr. Prints the file's path and a
        one-line summary on stdout. Retrieval numbers about FILE come only from the set's
        questions on FILE (a corpus whose text is FILE's); questions on other corpora (e.g.
        ``--questions sample:narrative`` on another document) get their own titled section in
        the report and never enter FILE's row or verdict. Scoring every pair of chunks for CS is the slow part on a
        CPU: ``--window W`` scores only near pairs, ``--no-quality`` scores none (numbers
        already cached still show). ``--tuning DIR`` adds a tuning run's answer (the ``result.json``
        ``python -m backend tune --out DIR`` or the Tune page wrote there) as the report's Tuning section.

``--session FILE`` reads a saved session (:func:`backend.report.session.load_session`): its
document (FILE may be left out when it is a bundled sample; a FILE whose hash differs is an
error), its configurations (``--config`` replaces them), its models and settings (each flag
given overrides the session's) and its question set when it names one. Errors are one line on
stderr: exit 1 for unreadable input (a missing file, a damaged session, a hash mismatch, a
model that cannot be loaded), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext, unloaded_model_info
from backend.chunking import ConfigEntry, tag_for
from backend.cli.common import (
    StderrProgress,
    add_model_flags,
    embedder_spec,
    finite_float,
    load_input,
    non_negative_int,
    parse_config,
    positive_int,
    value_type,
    write,
)
from backend.config import quiet_hub_progress_bars
from backend.errors import InputError, ParameterError
from backend.lab.models import SessionModels
from backend.lab.quality import plan_quality
from backend.lab.session import OpenedSettings, model_spec, opened_settings
from backend.metrics.formulas import BC_MODES, CS_RULES, DEFAULT_K
from backend.report.html import cached_curves, report_html
from backend.report.session import load_session, question_set_hash, resolve_document
from backend.report.summary import METRIC_INFO, METRICS, collect
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import load_question_set, load_sample_question_set
from backend.tune.result import read_result
from backend.tune.types import TuneResult

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("report",)
DEFAULT_RETRIEVE = 5

_retrieve = value_type(int, lambda v: v == -1 or v > 0, "a positive integer or -1")


def add_commands(sub: Any) -> None:
    """Register ``report`` on the ``python -m backend`` subparsers."""
    p = sub.add_parser("report", help="write the one-file HTML report of a comparison (verdict, table, figures)")
    p.add_argument("file", nargs="?", help="document path, or sample:NAME (optional with a session on a bundled sample)")
    p.add_argument("--config", action="append", default=[], metavar="SPEC",
                   help="'NAME key=value … [tokenizer=T]', e.g. 'recursive chunk_size=200' (repeatable; "
                   "replaces a session's configurations)")
    p.add_argument("--session", type=Path, metavar="FILE", help="a saved session: document, configurations, models, settings")
    p.add_argument("--questions", metavar="CSV|sample:NAME",
                   help="question set for recall, precision, IoU and precision-Ω: a Chroma-format CSV or a bundled sample's")
    p.add_argument("--corpora", type=Path, metavar="DIR", help="folder of <corpus_id>.md/.txt (default: corpora/ beside the CSV)")
    p.add_argument("--retrieve", type=_retrieve, metavar="N",
                   help=f"chunks per question (default {DEFAULT_RETRIEVE}); -1: as many as contain excerpts")
    p.add_argument("--K", type=finite_float, help=f"Chunk Stickiness edge threshold (default {DEFAULT_K})")
    p.add_argument("--delta", type=non_negative_int, help="δ of CS's incomplete graph (default 0)")
    p.add_argument("--window", type=positive_int, metavar="W",
                   help="score only chunk pairs with |i - j| <= W for CS (CPU approximation; default every pair)")
    p.add_argument("--bc-mode", choices=BC_MODES, help="reference (default): ratio of mean NLLs; paper: of perplexities")
    p.add_argument("--cs-rule", choices=CS_RULES, help="paper (default) or reference")
    p.add_argument("--embedder", metavar="default|PATH",
                   help="embedder of retrieval and DS: default (CHUNKLAB_EMBEDDER or the bundled all-MiniLM-L6-v2), "
                   "a model folder or a hub id")
    p.add_argument("--no-quality", action="store_true",
                   help="compute no BC, CS or DS (no language-model run over chunk pairs); cached ones are still shown")
    add_model_flags(p, window_flag="--lm-window")
    p.add_argument("--tuning", type=Path, metavar="DIR",
                   help="a tuning run's output folder (python -m backend tune --out DIR): its answer as a section")
    p.add_argument("--out", type=Path, required=True, metavar="FILE", help="the HTML file to write")


def _setting(flag: Any, saved: OpenedSettings | None, section: str, name: str, default: Any) -> Any:
    """A flag given on the command line, else the session's setting ``section.name``, else ``default``."""
    if flag is not None:
        return flag
    return saved.get(section, name, default) if saved is not None else default


def _document(args: argparse.Namespace, session: Any) -> Any:
    """FILE, or the session's document (its bundled sample, or FILE once its hash matches)."""
    if session is None:
        return load_input(args.file)
    candidate = load_input(args.file) if args.file is not None and session.doc.sample is None else None
    doc = resolve_document(session.doc, candidate)
    if args.file is not None and session.doc.sample is not None:
        given = load_input(args.file)
        if given.id != doc.id:
            raise InputError(f"{args.file} is not the session's document (hash {given.id}, expected {doc.id})")
    return doc


def _question_set(args: argparse.Namespace, saved: OpenedSettings | None) -> tuple[Any, str | None]:
    """``--questions``/``--corpora``, else the session's question set; ``(set or None, its name)``.

    The session's own set when it embeds one, else the bundled sample set its benchmark ran on.
    """
    if args.questions is not None:
        if args.questions.startswith("sample:"):
            if args.corpora is not None:
                raise ParameterError("--corpora is not used with --questions sample:NAME (the sample is the corpus)")
            return load_sample_question_set(args.questions.removeprefix("sample:")), args.questions
        return load_question_set(Path(args.questions).expanduser(), args.corpora), Path(args.questions).name
    if args.corpora is not None:
        raise ParameterError("--corpora needs --questions")
    if saved is None:
        return None, None
    if saved.questions is not None:
        return saved.questions, f"session set {question_set_hash(saved.questions)}"
    if saved.sample_questions is not None:
        return load_sample_question_set(saved.sample_questions.removeprefix("sample:")), saved.sample_questions
    return None, None


def _tuning(folder: Path | None) -> TuneResult | None:
    """The tuning result ``--tuning DIR`` names (None without the flag); a folder with no result is an error."""
    if folder is None:
        return None
    if not folder.expanduser().is_dir():
        raise InputError(f"{folder}: no such folder (--tuning takes a tuning run's output folder)")
    result = read_result(folder.expanduser())
    if result is None:
        raise InputError(f"{folder}: no result.json yet (the tuning run has not finished; run it again to resume)")
    return result


def _models(context: Any, benchmark: Any) -> dict[str, str]:
    """The models the report ran with, by role: name and fingerprint where known."""
    out: dict[str, str] = {}
    if context.scorer is not None:
        info = context.scorer.info
        out["lm"] = f"{info.name} ({info.fingerprint[:12]})"
    else:
        fp = context.fingerprint
        out["lm"] = f"{context.lm or 'default (bundled SmolLM2)'}" + (f" ({fp[:12]})" if fp else "")
    if context.embedder is not None:
        info = context.embedder.info
        out["embedder"] = f"{info.name} ({info.fingerprint[:12]})"
    elif benchmark is not None:
        out["embedder"] = f"{benchmark.embedder} ({benchmark.embedder_fingerprint[:12]})"
    return out


def _figure_data(doc: Any, tagged: list[tuple[str, Any]], context: Any, window: int | None) -> dict[str, Any]:
    """Chunkings, pair tables, curves and document scores for the figures, from what is cached.

    :func:`collect` has just computed (or found) the model outputs; they are read back here
    through a cache-only context with the same model identity (the pair tables as the Quality
    page's plan finds them, :func:`~backend.lab.quality.plan_quality`), so nothing is computed
    twice and, with ``--no-quality``, nothing is computed at all. A pair table, a curve or the
    document's per-sentence scores that no run produced are left out (the report says
    "not computed yet").
    """
    chunkers = {tag: make_chunker(c.name, c.params_dict, c.tokenizer) for tag, c in tagged}
    chunkings = {tag: chunkers[tag].chunk(doc, context) for tag, _ in tagged}
    quality: dict[str, Any] = {}
    curves: dict[str, Any] = {}
    ppl = None
    fp = context.fingerprint
    if fp is not None and context.cache is not None:
        info = context.scorer.info if context.scorer is not None else unloaded_model_info(context.lm or "SmolLM2", fp)
        models = SessionModels(info.name, fp, info.kind, context.scorer)
        boundaries = [  # a chunking of one chunk has no pair to draw
            (ConfigEntry(i, tag, config), chunkings[tag]) for i, (tag, config) in enumerate(tagged)
            if len(chunkings[tag].chunks) >= 2
        ]
        plan = plan_quality(doc, boundaries, models, metrics=("bc", "cs"), window=window, store={}, cache=context.cache)
        quality = {c.entry.tag: c.data for c in plan.configs if c.table is not None}
        lookup = ModelContext.cache_only(info)
        lookup.window = context.window
        curves, ppl = cached_curves(doc, chunkings, lookup)
    return {"chunkings": chunkings, "quality": quality, "curves": curves, "ppl": ppl}


def _one_line_summary(summary: Any) -> str:
    known = sum(1 for r in summary.rows for m in METRICS if r.values.get(m) is not None)
    total = len(summary.rows) * len(METRICS)
    best = [f"{METRIC_INFO[m].label} {t}" for m in METRICS if (t := summary.best(m)) is not None]
    return (
        f"{summary.doc_name} ({summary.doc_id}): {len(summary.rows)} configurations, {known} of {total} numbers"
        + (f"; best: {', '.join(best)}" if best else "")
        + (f"; {summary.elsewhere.heading}" if summary.elsewhere is not None else "")
    )


def run(args: argparse.Namespace) -> int:
    """Run ``report``; errors propagate as :class:`~backend.errors.ChunkLabError` for the CLI to print."""
    if not args.config and args.session is None:
        raise ParameterError("report needs --config SPEC (repeatable) or --session FILE")
    if args.file is None and args.session is None:
        raise ParameterError("report needs a document: FILE (a path or sample:NAME), or --session FILE")
    tagged = [(tag_for(i), parse_config(spec).config) for i, spec in enumerate(args.config)]  # bad specs: exit 2 first
    session = None
    if args.session is not None:
        session = load_session(args.session)
        if not tagged:
            tagged = list(session.configs)
    if not tagged:
        raise ParameterError("the session has no configuration; add --config SPEC")
    doc = _document(args, session)
    tuning = _tuning(args.tuning)
    saved = opened_settings(session.settings, str(args.session.name)) if session is not None else None
    questions, questions_name = _question_set(args, saved)
    cs_threshold = float(_setting(args.K, saved, "quality", "K", DEFAULT_K))
    delta = int(_setting(args.delta, saved, "quality", "delta", 0))
    window = _setting(args.window, saved, "quality", "window", None) or None  # a saved 0 scores every pair
    bc_mode = str(_setting(args.bc_mode, saved, "quality", "bc_mode", "reference"))
    cs_rule = str(_setting(args.cs_rule, saved, "quality", "cs_rule", "paper"))
    retrieve = int(args.retrieve if args.retrieve is not None else (saved and saved.retrieve) or DEFAULT_RETRIEVE)
    models = session.models if session is not None else {}
    embedder = embedder_spec(args.embedder if args.embedder is not None else model_spec(models, "embedder"))
    lm = args.lm if args.lm is not None else model_spec(models, "lm")

    quiet_hub_progress_bars()  # our progress lines replace transformers' bars
    context = ModelContext(lm=lm, device=args.device, use_cache=not args.no_cache, window=args.lm_window,
                           embedder_spec=embedder)
    benchmark = None
    if questions is not None:
        with StderrProgress("benchmark") as line:
            line.status("benchmark: loading the embedder…")
            benchmark = evaluate(
                questions, list(dict.fromkeys(c for _, c in tagged)), embedder=context.get_embedder(),
                retrieve=retrieve, cache=context.cache, use_cache=not args.no_cache, context=context,
                progress=line,
            )
    with StderrProgress("scoring") as line:
        context.on_load = lambda: line.status("loading model…")
        context.progress = line
        summary = collect(
            doc, tagged, context=context, question_set=questions, embedder_spec=embedder, K=cs_threshold, delta=delta,
            window=window, cs_rule=cs_rule, bc_mode=bc_mode, retrieve=retrieve, compute=not args.no_quality,
            progress=context.progress, benchmark=benchmark, question_set_name=questions_name,
        )
        context.progress = None
        line.status("drawing the figures…")
        data = _figure_data(doc, tagged, context, window)
    page = report_html(
        summary, doc, data["chunkings"], benchmark=benchmark, quality=data["quality"], ppl=data["ppl"],
        curves=data["curves"], questions=questions, models=_models(context, benchmark), tuning=tuning,
    )
    try:
        args.out.write_text(page, encoding="utf-8")
    except OSError as e:
        raise InputError(f"{args.out}: cannot be written ({e.strerror or e})") from e
    write(f"{args.out}\n{_one_line_summary(summary)}\n")
    return 0
