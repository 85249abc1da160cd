"""The ``edit`` subcommand of ``python -m backend``: an edited copy against its base, as the Edit page's panel shows it.

Subcommand:
    edit FILE --base SPEC [--edits +1234,-5678] [--snap sentence|word|char] [--metrics bc,cs,ds]
         [--window W] [--K 0.8] [--bc-mode reference|paper] [--cs-rule paper|reference] [--delta 0]
         [--graph complete|incomplete] [--questions CSV|sample:NAME [--corpora DIR]] [--retrieve N]
         [--lm NAME|PATH] [--device D] [--embedder default|PATH] [--json]
        The base configuration (``--base``, as ``--config`` takes it) and its copy with the edits
        (``+N`` adds a cut at character N snapped to ``--snap``, ``-N`` removes the cut nearest N):
        the statistics of both, then BC/CS/DS of both with ``--metrics`` (only the pairs not in
        the output cache are scored: after the base, an edit's few), then the retrieval metrics
        of both on ``--questions``. Text lines as the page shows them; ``--json`` one JSON object.

Errors are one line on stderr (exit 1 for unreadable input or a model that cannot be loaded,
2 for bad arguments); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunkers.manual import SNAPS, base_config, check_offsets, format_edits, parse_edits
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.cli.common import (
    StderrProgress,
    add_metric_model_flags,
    add_quality_flags,
    add_question_flags,
    embedder_spec,
    load_input,
    metrics_list,
    quality_settings_of,
    questions_of,
    write,
)
from backend.config import quiet_hub_progress_bars
from backend.errors import InputError, ParameterError
from backend.lab.edit_metrics import (
    EditQuality,
    edit_stats,
    plan_edit_quality,
    plan_edit_retrieval,
    retrieval_changes,
)
from backend.lab.models import SessionModels
from backend.lab.quality import fold_scoring
from backend.metrics.formulas import GRAPHS
from backend.metrics.report import model_needs
from backend.models.cache import default_cache
from backend.models.scorer import load_scorer
from backend.text.document import Document

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("edit",)


def add_commands(sub: Any) -> None:
    """Register ``edit`` on the ``python -m backend`` subparsers."""
    p = sub.add_parser("edit", help="an edited copy of a configuration against its base: statistics, BC/CS/DS, "
                                    "retrieval")
    p.add_argument("file", help="document path, or sample:NAME")
    p.add_argument("--base", required=True, metavar="SPEC",
                   help="the configuration edited, as --config takes it: 'recursive chunk_size=200'")
    p.add_argument("--edits", default="", metavar="+N,-N",
                   help="cuts added (+OFFSET) and removed (-OFFSET, the cut nearest), in order, comma-separated")
    p.add_argument("--snap", choices=SNAPS, default="sentence", help="where an added cut moves to (default sentence)")
    p.add_argument("--metrics", type=metrics_list, default=(), metavar="bc,cs,ds",
                   help="the quality metrics to compare, scoring the pairs not cached yet (default: none)")
    add_quality_flags(p)
    p.add_argument("--graph", choices=GRAPHS, default="complete", help="CS's graph shown (default complete)")
    add_question_flags(p, "a question set: the retrieval metrics of both on it (re-indexing only the changed chunks)")
    add_metric_model_flags(
        p, lm_help="the language model of BC and CS (default: CHUNKLAB_LM or the bundled SmolLM2)",
        embedder_help="the embedder of DS and retrieval (default: CHUNKLAB_EMBEDDER or the bundled MiniLM)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text lines")


def _edited_config(base: ChunkerConfig, doc: Document, edits: str, snap: str) -> ChunkerConfig:
    return ChunkerConfig.make("manual", {"base": base.spec, "edits": edits, "snap": snap, "doc": doc.id},
                              base.tokenizer)


def _quality(args: argparse.Namespace, doc: Document, entries: tuple, chunkings: tuple,
             line: StderrProgress) -> EditQuality:
    """BC/CS/DS of both, scoring what the cache lacks (the job the page runs), then read back."""
    emb = embedder_spec(args.embedder)
    scorer = load_scorer(args.lm, device=args.device) if args.lm is not None and model_needs(args.metrics).scorer else None
    models = SessionModels.of(scorer, embedder_spec=emb)
    if model_needs(args.metrics).scorer and models.error:
        raise InputError(models.error)
    settings = quality_settings_of(args)
    cache = default_cache()
    store: dict = {}

    def plan() -> EditQuality:
        return plan_edit_quality(doc, entries[0], chunkings[0], entries[1], chunkings[1], models,
                                 metrics=args.metrics, window=args.window, store=store, settings=settings,
                                 graph=args.graph, cache=cache)

    quality = plan()
    if quality.job is not None:
        print(f"scoring: {quality.cost_label}", file=sys.stderr)
        fold_scoring(quality.plan, quality.job.run(line), store)
        quality = plan()
        if quality.job is not None:  # the store holds the job's tables, so only DS's vectors can be missing here
            raise InputError(f"the scores were computed but not kept: {cache.problem or 'the cache refused them'}")
    return quality


def run(args: argparse.Namespace) -> int:
    """Run ``edit``; errors propagate as :class:`~backend.errors.ChunkLabError` for the CLI to print."""
    base = base_config(args.base, "cl100k")  # bad arguments fail before the document is read
    parsed = parse_edits(args.edits)
    edits = format_edits(parsed)
    if args.corpora is not None and args.questions is None:
        raise ParameterError("--corpora needs --questions")  # before the document is read
    doc = load_input(args.file)
    check_offsets(doc, parsed)  # an offset past the end: exit 2 before any model loads
    edited_config = _edited_config(base, doc, edits, args.snap)
    entries = (ConfigEntry(0, "A", base), ConfigEntry(1, "B", edited_config))
    line = StderrProgress("scoring")
    quiet_hub_progress_bars()  # the progress line says what loads
    out: dict[str, Any] = {"document": doc.source, "base": base.spec, "edits": edits}
    with line:
        context = ModelContext(lm=args.lm, device=args.device, progress=line, embedder_spec=embedder_spec(args.embedder))
        chunkings = (run_chunker(doc, base, context), run_chunker(doc, edited_config, context))
        ignored = chunkings[1].meta_dict.get("edits_ignored") or []
        for item in ignored:
            print(f"edit {item}", file=sys.stderr)
        stats = edit_stats(doc, *chunkings)
        out["stats"] = {"summary": stats.summary, "rows": list(stats.rows)}
        lines = [stats.summary, *(f"  {r['metric']}: {r['base']} → {r['edited']} ({r['change']})" for r in stats.rows)]
        if args.metrics:
            quality = _quality(args, doc, entries, chunkings, line)
            out["quality"] = {
                "line": quality.line, "note": quality.note, "changed_pairs": quality.changed_pairs,
                "metrics": {c.metric: {"base": c.base.to_json() if c.base else None,
                                       "edited": c.edited.to_json() if c.edited else None} for c in quality.changes},
            }
            lines += [quality.line, quality.note]
        if args.questions is not None:
            qset, name = questions_of(args)
            retrieval = plan_edit_retrieval(
                doc, entries[0], chunkings[0], entries[1], qset, SessionModels.of(None, embedder_spec=embedder_spec(args.embedder)),
                qset_name=name, embedder=embedder_spec(args.embedder), retrieve=args.retrieve, auto=False,
                cross_corpus=True,
            )
            if retrieval.job is None:
                lines.append(retrieval.message)
                out["retrieval"] = {"message": retrieval.message}
            else:
                result = retrieval.job.run(line)
                text = retrieval_changes(result.benchmark, name)
                lines.append(text)
                out["retrieval"] = {"line": text, "base": result.benchmark.results[0].summary.to_json(),
                                    "edited": result.benchmark.results[1].summary.to_json()}
    write(json.dumps(out, ensure_ascii=False, indent=2) + "\n" if args.json else "\n".join(lines) + "\n")
    return 0
