"""The ``tune`` subcommand of ``python -m backend``: search chunker parameters for a document and its questions.

Subcommand:
    tune FILE|DIR --questions CSV|sample:NAME|generate:METHOD --out DIR [--corpora DIR] [--families a,b]
         [--objective iou|recall|precision|precision_omega|bc] [--secondary mean_tokens|chunks|index_cost]
         [--constraint 'mean_tokens<=400' …] [--budget 10m] [--seed S] [--trials N] [--baseline SPEC]
         [--engine local|ray] [--address ADDR] [--workers N] [--questions-per-document N] [--json]
        Tunes the chunkers' declared parameter ranges on about two thirds of the questions and answers
        on the held-out third (see ``docs/tune.md``). It builds the Tune page's request
        (:class:`backend.lab.tune.TuneRequest`) and runs the same job (:func:`backend.lab.tune.plan_tune`).
        The output folder holds ``study.journal``, ``plan.json``, ``trials.jsonl`` and ``result.json``;
        the same command again resumes there (finished trials are not scored again).
        On a folder each trial's documents run through the corpus engine, each document's questions
        retrieving from that document only; ``--engine ray`` (a folder only) runs them as Ray tasks
        (a local Ray, or the cluster at ``--address``) with the same numbers.
        stdout: the verdict, the pick, the top trials, the families left out and why, the warnings;
        ``--json``: ``result.json``'s object instead. stderr: progress (the share of the budget used).

Errors are one line on stderr (exit 2 for a bad family, objective, constraint, budget or other argument;
1 for an unreadable document or question set; 130 when interrupted: the next run resumes).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from backend.cli.common import StderrProgress, non_negative_int, positive_int, write
from backend.config import quiet_hub_progress_bars
from backend.lab.models import SessionModels
from backend.lab.tune import GENERATED_PER_DOCUMENT, MAX_QUESTIONS_PER_DOCUMENT, TuneRequest, plan_tune
from backend.progress import format_seconds
from backend.tune.types import OBJECTIVES, TuneResult

__all__ = ["COMMANDS", "add_commands", "run", "result_text"]

COMMANDS = ("tune",)
_TOP = 10  # trials listed in the summary


def add_commands(sub: Any) -> None:
    """Register ``tune`` on the ``python -m backend`` subparsers."""
    p = sub.add_parser("tune", help="search chunker parameters on a document's questions; answer on held-out ones; "
                                    "resumable")
    p.add_argument("path", help="a document, a folder of documents (read recursively), or sample:NAME")
    p.add_argument("--questions", required=True, metavar="CSV|sample:NAME|generate:METHOD",
                   help="a Chroma-format question CSV, a bundled sample's set, or generate:model-free|bundled|chat "
                        "(generated on each document, saved in the output folder)")
    p.add_argument("--questions-per-document", type=int, default=GENERATED_PER_DOCUMENT, metavar="N",
                   help=f"with generate:METHOD, the questions made on each document (1 to {MAX_QUESTIONS_PER_DOCUMENT}; "
                        f"default {GENERATED_PER_DOCUMENT})")
    p.add_argument("--corpora", metavar="DIR", help="the corpora folder of a question CSV (default: beside it)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the output folder: study.journal, plan.json, trials.jsonl, result.json (resumed there)")
    p.add_argument("--families", metavar="a,b",
                   help="the chunkers searched, comma-separated (default: those the available models allow)")
    p.add_argument("--objective", default="iou", metavar="|".join(OBJECTIVES),
                   help="what is maximised (default iou)")
    p.add_argument("--secondary", metavar="mean_tokens|chunks|index_cost",
                   help="a second objective, minimised: a two-objective (NSGA-II) search with a Pareto front")
    p.add_argument("--constraint", action="append", default=[], metavar="EXPR",
                   help="e.g. 'mean_tokens<=400' (also max_tokens, chunks, index_cost; repeatable): a configuration "
                        "violating one is not scored")
    p.add_argument("--budget", default="10m", metavar="TIME", help="wall-clock budget: 90s, 10m, 1h (default 10m)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="S",
                   help="seeds the sampler and the split (default 0)")
    p.add_argument("--trials", type=positive_int, metavar="N", help="at most N trials (default: until the budget)")
    p.add_argument("--baseline", metavar="SPEC",
                   help="the configuration the pick is compared with (default 'recursive chunk_size=200 "
                        "chunk_overlap=0')")
    p.add_argument("--engine", default="local", metavar="local|ray",
                   help="where a folder's documents run: local (default) or ray (Ray tasks; a folder only)")
    p.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster to join (default RAY_ADDRESS, else a local Ray); needs --engine ray")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="documents run at once on Ray (default: the cluster's CPUs); needs --engine ray")
    p.add_argument("--json", action="store_true", help="result.json's object on stdout instead of the summary")


def _families(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    return tuple(x.strip() for x in raw.split(",") if x.strip())


def _pct(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def result_text(result: TuneResult) -> str:
    """The summary ``tune`` prints: verdict, pick, the top trials, left-out families, warnings."""
    lines = [result.verdict, ""]
    if result.pick is not None:
        lines.append(f"pick: {result.pick.spec}")
    lines.append(f"baseline: {result.baseline.spec}")
    distinct = [t for t in result.trials if not t.reason.startswith("repeats")]
    complete = sorted((t for t in distinct if t.state == "complete"), key=lambda t: -t.objective)
    others = [t for t in distinct if t.state != "complete"]
    shown = (complete + others)[:_TOP]
    repeats = len(result.trials) - len(distinct)
    lines.append(f"top trials ({len(result.trials)} in all" + (f", {repeats} repeating an earlier one" if repeats else "")
                 + f"; {result.objective} on the {len(result.tuning_questions)} tuning questions, mean [95% interval]):")
    for t in shown:
        ivl = t.interval.text() if t.interval is not None else "n/a"
        extra = f" · {t.reason}" if t.reason else ""
        lines.append(f"  #{t.number:<3} {t.state:<8} {ivl:<22} {t.chunks:>5} chunks · {t.mean_tokens:6.1f} tokens · "
                     f"{t.seconds:5.1f}s · {t.config.spec}{extra}")
    if result.pareto:
        lines.append(f"Pareto front ({result.objective} against {result.secondary}): trials "
                     + ", ".join(f"#{n}" for n in result.pareto))
    for x in result.left_out:
        lines.append(f"left out: {x.family}: {x.reason.removeprefix(x.family + ': ')}")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    lines.append(f"time: {format_seconds(result.used_seconds)} used; budget {format_seconds(result.budget_seconds)}"
                 + (" (cancelled)" if result.cancelled else ""))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Run ``tune``; errors propagate as :class:`~backend.errors.ChunkLabError` for the CLI to print."""
    request = TuneRequest(
        sources=(args.path,), questions=args.questions, corpora=args.corpora, families=_families(args.families),
        objective=args.objective, secondary=args.secondary, constraints=tuple(args.constraint), budget=args.budget,
        seed=args.seed, out=str(args.out), baseline=args.baseline, trials=args.trials, engine=args.engine,
        workers=args.workers, address=args.address, questions_per_document=args.questions_per_document,
    )
    plan = plan_tune(request, SessionModels.of(None))
    quiet_hub_progress_bars()
    with StderrProgress("tuning") as line:
        result = plan.run(line)
    write(json.dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n" if args.json else result_text(result))
    return 0
