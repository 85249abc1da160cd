"""The ``corpus`` subcommand of ``python -m backend``: a set of configurations over a folder or a zip of documents.

Subcommand:
    corpus PATH --config SPEC [--config SPEC …] --out DIR [--metrics stats,bc,cs,ds,retrieval]
           [--pairs N] [--seed S] [--K 0.8] [--bc-mode reference|paper] [--cs-rule paper|reference]
           [--delta 0] [--window W] [--questions CSV|sample:NAME [--corpora DIR]] [--retrieve N]
           [--lm NAME|PATH] [--device D] [--embedder default|PATH]
           [--engine local|ray] [--address ADDR] [--workers N] [--report FILE] [--json]
        Per document of PATH (a folder, read recursively, or a zip) and configuration: the
        statistics, MoC's BC/CS/DS (exact, or with ``--pairs N`` estimates with 95% intervals from
        a seeded sample of at least N units per metric), and the retrieval metrics on the
        question set's questions about that document. Rows go to ``DIR/results.jsonl`` one
        document at a time; files no loader reads go to ``DIR/skipped.jsonl`` with their reason.
        Run again with the same settings, it resumes: rows already written are not recomputed.
        ``--engine ray`` runs documents as Ray tasks and the models in actors (a local Ray, or the
        cluster at ``--address`` / ``RAY_ADDRESS``); ``--engine local`` gives identical numbers.
        stdout: the verdict (the Corpus page's: the best configuration per metric with its 95%
        interval, or a tie), the aggregate table per configuration (mean ± 95% interval over
        documents, spread, documents), then the documents where the configurations disagree most;
        ``--json`` one JSON object instead; ``--report FILE`` also writes the one-file HTML report.
        stderr: a line per document and a closing summary.

Errors are one line on stderr (exit 1 for an unreadable corpus or a model that cannot be loaded,
2 for bad arguments, 130 when interrupted: what was written stays and the next run resumes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from backend.cli.common import (
    StderrProgress,
    add_metric_model_flags,
    add_quality_flags,
    add_question_flags,
    embedder_spec,
    non_negative_int,
    parse_config,
    positive_int,
    quality_settings_of,
    questions_of,
    write,
)
from backend.config import quiet_hub_progress_bars
from backend.corpus.aggregate import AGGREGATE_METRICS, aggregate_table, disagreements
from backend.corpus.engine import ENGINES, make_engine, run_corpus
from backend.corpus.results import CorpusResults, read_results
from backend.corpus.spec import CORPUS_METRICS, CorpusSpec, parse_corpus_metrics, tag_configs
from backend.corpus.work import DocumentOutcome
from backend.errors import InputError, ParameterError
from backend.report.corpus import corpus_report_html, corpus_value, corpus_verdict

__all__ = ["COMMANDS", "add_commands", "run", "aggregate_text"]

COMMANDS = ("corpus",)


def _metrics(raw: str) -> tuple[str, ...]:
    try:
        return parse_corpus_metrics(raw)
    except ParameterError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_commands(sub: Any) -> None:
    """Register ``corpus`` on the ``python -m backend`` subparsers."""
    p = sub.add_parser("corpus", help="configurations over a folder or zip of documents: statistics, BC/CS/DS, "
                                      "retrieval per document, aggregated; resumable; local or on Ray")
    p.add_argument("path", help="a folder of documents (read recursively) or a .zip of them")
    p.add_argument("--config", action="append", required=True, metavar="SPEC",
                   help="'NAME key=value … [tokenizer=T]', e.g. 'recursive chunk_size=200' (repeatable)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the output folder: run.json, results.jsonl, skipped.jsonl (a run there is resumed)")
    p.add_argument("--metrics", type=_metrics, default=("stats",), metavar=",".join(CORPUS_METRICS),
                   help="what to compute per document and configuration (default stats; stats is always in)")
    p.add_argument("--pairs", type=positive_int, metavar="N",
                   help="the budget of BC/CS/DS: a seeded sample of at least N units per metric, document and "
                        "configuration, reported with 95%% intervals (default: every pair, exact)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="S", help="the sample's seed (default 0)")
    add_quality_flags(p)
    add_question_flags(p, "the question set of the retrieval metric (each document gets the questions about its text)")
    add_metric_model_flags(
        p, lm_help="the language model of BC, CS and PPL chunkers (default: CHUNKLAB_LM or the bundled SmolLM2; "
                   "remote: the scorer server)",
        embedder_help="the embedder of DS, retrieval and semantic chunkers (default: CHUNKLAB_EMBEDDER or the "
                      "bundled MiniLM)")
    p.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: this process (default); ray: documents as Ray tasks, models in actors")
    p.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster to join (default RAY_ADDRESS, else a local Ray); needs --engine ray")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="documents run at once on Ray (default: the cluster's CPUs)")
    p.add_argument("--report", type=Path, metavar="FILE", help="also write the one-file HTML report of the run")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the tables")


def aggregate_text(rows: Any, *, source: str, questions: str | None, skipped: int = 0) -> str:
    """The aggregate table and the disagreements as text lines (what the CLI prints; the page shows the same table)."""
    table = aggregate_table(rows)
    documents = len({r["doc"] for r in rows if r.get("error") is None})
    files = f" ({skipped} file{'s' if skipped != 1 else ''} skipped)" if skipped else ""
    lines = [f"Corpus {source}: {documents} document{'s' if documents != 1 else ''} with rows{files}; mean over "
             f"documents ± half-width of its 95% interval [min … max] (n documents)"
             + (f"; retrieval on {questions}" if questions else "")]
    for tag in dict.fromkeys(r["tag"] for r in table):
        mine = [r for r in table if r["tag"] == tag]
        lines.append(f"{tag} · {mine[0]['label']}")
        for r in mine:
            m = r["metric"]
            half = "" if r["ci_low"] is None else f" ± {corpus_value(m, max(r['mean'] - r['ci_low'], r['ci_high'] - r['mean']))}"
            est = f", {r['estimated']} estimated" if r["estimated"] else ""
            lines.append(f"  {AGGREGATE_METRICS[m].label:<20} {corpus_value(m, r['mean'])}{half} "
                         f"[{corpus_value(m, r['min'])} … {corpus_value(m, r['max'])}] (n={r['documents']}{est})")
    for metric in ("bc", "cs_complete", "ds", "iou", "mean_tokens"):
        worst = [d for d in disagreements(rows, metric, top=5) if d["spread"] > 0]
        if worst and len({r["tag"] for r in table}) > 1:
            lines.append(f"Documents where the configurations disagree most on {AGGREGATE_METRICS[metric].label}:")
            for d in worst:
                vals = ", ".join(f"{t} {corpus_value(metric, v)}" for t, v in d["values"].items())
                ends = (f"largest here {d['best']}, smallest {d['worst']}" if AGGREGATE_METRICS[metric].higher_better is None
                        else f"best here {d['best']}, best over the corpus {d['best_overall']}")
                lines.append(f"  {d['doc']}: {vals} (spread {corpus_value(metric, d['spread'])}, "
                             f"{d['scaled_spread']:.1f} corpus SDs; {ends})")
            break
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Run ``corpus``; errors propagate as :class:`~backend.errors.ChunkLabError` for the CLI to print."""
    configs = tag_configs([parse_config(spec).config for spec in args.config])
    if args.address is not None and args.engine != "ray":
        raise ParameterError("--address joins a Ray cluster: it needs --engine ray")
    if args.workers is not None and args.engine != "ray":
        raise ParameterError("--workers sets the Ray tasks run at once: it needs --engine ray")
    if "retrieval" in args.metrics and args.questions is None:
        raise ParameterError("the retrieval metric needs a question set (--questions)")
    qset, qname = questions_of(args)
    spec = CorpusSpec(configs=configs, metrics=args.metrics, settings=quality_settings_of(args), pairs=args.pairs, seed=args.seed,
                      questions=qset, questions_name=qname, retrieve=args.retrieve, lm=args.lm,
                      embedder=embedder_spec(args.embedder), device=args.device)
    quiet_hub_progress_bars()
    engine = make_engine(args.engine, out=args.out, address=args.address, workers=args.workers)
    line = StderrProgress("documents")
    count = 0

    def on_rows(outcome: DocumentOutcome) -> None:
        nonlocal count
        count += 1
        what = f"skipped: {outcome.error}" if outcome.error else f"{len(outcome.rows)} rows"
        print(f"[{count}] {outcome.name}: {what} ({outcome.seconds:.1f} s)", file=sys.stderr)

    with line:
        result = run_corpus(args.path, spec, args.out, engine=engine, progress=line, on_rows=on_rows)
    print(result.summary(), file=sys.stderr)
    everything = read_results(args.out)
    wanted = {e.config.spec for e in configs}
    results = CorpusResults(run=everything.run, rows=tuple(r for r in everything.rows if r["config"] in wanted),
                            skipped=everything.skipped)
    rows = list(results.rows)
    verdict = corpus_verdict(results)
    if args.report is not None:
        try:
            args.report.write_text(corpus_report_html(results), encoding="utf-8")
        except OSError as e:
            raise InputError(f"{args.report}: cannot be written ({e.strerror or e})") from None
        print(f"report: {args.report}", file=sys.stderr)
    if args.json:
        out = {"out": str(args.out), "documents": result.documents, "ran": result.ran,
               "resumed_rows": result.resumed_rows, "skipped": list(result.skipped), "counts": result.counts,
               "verdict": verdict, "aggregate": aggregate_table(rows),
               "disagreements": {m: disagreements(rows, m) for m in AGGREGATE_METRICS}}
        write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
    else:
        write("\n".join(verdict) + "\n\n"
              + aggregate_text(rows, source=str(args.path), questions=qname, skipped=len(result.skipped)))
    return 0
