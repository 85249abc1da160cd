"""The chunk-quality subcommand of ``python -m backend`` (wired in by :mod:`backend.cli.main`).

Subcommand:
    metrics FILE --chunker NAME [--param k=v …] [--tokenizer T] [--metrics bc,cs,ds]
            [--K 0.8] [--bc-mode reference|paper] [--cs-rule paper|reference] [--delta 0]
            [--window W] [--pairs N] [--seed S] [--match-length N] [--embedder default|PATH]
            [--lm NAME|PATH] [--lm-window N] [--device D] [--no-cache]
        MoC's Boundary Clarity, Chunk Stickiness (complete and incomplete graphs) and
        dissimilarity of one chunking, as one JSON object: ``{"chunks", "mean_tokens",
        "bc_mean", "bc", "bc_estimate", "cs_complete", "cs_complete_estimate", "cs_incomplete",
        "cs_incomplete_estimate", "ds_mean", "ds", "ds_estimate", "K", "bc_mode", "cs_rule",
        "delta", "window", "pairs", "sample", "seconds"}`` (a metric not asked for is null).
        Each ``<metric>_estimate`` is ``{"estimate", "ci_low", "ci_high", "pairs_scored",
        "pairs_total", "method"}``: without ``--pairs`` every pair is scored (``pairs_scored ==
        pairs_total``, ``ci_low == ci_high``); with ``--pairs N`` only a seeded sample of at
        least N units per metric (``--seed S``, default 0) and the interval is a 95% one.
        ``--window W`` scores only chunk pairs with ``|i - j| <= W`` for CS (an approximation
        for the CPU); the language model's own context window is ``--lm-window``.
        ``--match-length N`` first tunes the configuration's length parameter until its mean
        chunk length is within ±5 % of N tokens, and adds ``"match": {…}``.

Model outputs (pair scores, embeddings) are cached, so a rerun with another ``--K``, rule or
mode calls no model. Errors are one line on stderr (exit 1; bad arguments exit 2).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunkers.match_length import match_length
from backend.cli.common import (
    StderrProgress,
    add_model_flags,
    finite_float,
    load_input,
    metrics_list,
    non_negative_int,
    parse_pairs,
    positive_float,
    positive_int,
    write,
)
from backend.metrics.cost import estimate_cost
from backend.metrics.formulas import BC_MODES, CS_RULES, DEFAULT_K
from backend.metrics.report import QualitySettings, model_needs
from backend.metrics.scores import LazyScorer, quality_report
from backend.tokenizers import TOKENIZER_NAMES

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("metrics",)


def add_commands(sub: Any) -> None:
    """Register ``metrics`` on the ``python -m backend`` subparsers."""
    p = sub.add_parser("metrics", help="Boundary Clarity, Chunk Stickiness and dissimilarity of a chunking (JSON)")
    p.add_argument("file", help="document path, or sample:NAME")
    p.add_argument("--chunker", required=True, help="registered chunker name (see 'chunkers')")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="chunker parameter (repeatable)")
    p.add_argument("--tokenizer", default="cl100k", choices=TOKENIZER_NAMES)
    p.add_argument("--metrics", type=metrics_list, default=("bc", "cs", "ds"), metavar="bc,cs,ds",
                   help="which metrics (default: all three)")
    p.add_argument("--K", type=finite_float, default=DEFAULT_K, help=f"Chunk Stickiness edge threshold (default {DEFAULT_K})")
    p.add_argument("--bc-mode", choices=BC_MODES, default="reference",
                   help="reference: ratio of mean NLLs (the authors' code, default); paper: ratio of perplexities")
    p.add_argument("--cs-rule", choices=CS_RULES, default="paper",
                   help="paper: keep an edge when (ppl(q)-ppl(q|d))/ppl(q) > K (default); reference: ppl(q|d)/ppl(q) > K")
    p.add_argument("--delta", type=non_negative_int, default=0, help="δ of the incomplete graph: pairs with j - i > δ")
    p.add_argument("--window", type=positive_int, metavar="W",
                   help="score only chunk pairs with |i - j| <= W for CS (CPU approximation; default every pair)")
    p.add_argument("--pairs", type=positive_int, metavar="N",
                   help="score only a seeded sample of at least N units per metric (BC, DS: boundaries; CS: pairs) "
                        "and print estimates with 95%% intervals (default: every pair, exact)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="S", help="the sample's seed (default 0)")
    p.add_argument("--match-length", type=positive_float, metavar="N",
                   help="first tune the length parameter to a mean chunk length of N tokens (±5%%)")
    p.add_argument("--embedder", default="default", metavar="default|PATH", help="embedder for dissimilarity")
    add_model_flags(p, window_flag="--lm-window")


def run(args: argparse.Namespace) -> int:
    """Run ``metrics``; errors propagate as :class:`~backend.errors.ChunkLabError` for the CLI to print."""
    chunker = make_chunker(args.chunker, parse_pairs(args.param), args.tokenizer)  # bad arguments fail first
    doc = load_input(args.file)
    started = time.perf_counter()
    line = StderrProgress("scoring")
    with line:
        context = ModelContext(
            lm=args.lm,
            device=args.device,
            use_cache=not args.no_cache,
            window=args.lm_window,
            embedder_spec=None if args.embedder.strip().lower() == "default" else args.embedder,
            progress=line,
            on_load=lambda: line.status("loading model…"),
        )
        match = None
        if args.match_length is not None:
            match = match_length(doc, chunker.config, args.match_length, context=context)
            chunking = match.chunking
        else:
            chunking = chunker.chunk(doc, context)
        texts = [c.text for c in chunking.chunks]
        counts = chunking.token_counts
        needs = model_needs(args.metrics)
        scorer = LazyScorer(context) if needs.scorer and len(texts) > 1 else None
        embedder = None
        if needs.embedder and len(texts) > 1:
            line.status("loading embedder…")
            embedder = context.get_embedder()
        settings = QualitySettings(
            K=args.K, bc_mode=args.bc_mode, cs_rule=args.cs_rule, delta=args.delta, window=args.window
        )
        report = quality_report(
            texts,
            counts,
            metrics=args.metrics,
            scorer=scorer,
            embedder=embedder,
            settings=settings,
            cache=context.cache,
            progress=context.progress,
            pairs=args.pairs,
            seed=args.seed,
        )
    out = report.to_json()
    scored = needs.scorer and len(texts) > 1
    cost = estimate_cost(counts, complete=needs.complete, window=args.window) if scored else {"pairs": 0}
    out["pairs"] = cost["pairs"]
    out["sample"] = None if args.pairs is None else {"pairs": args.pairs, "seed": args.seed}
    out["config"] = chunking.config.to_json()
    if match is not None:
        out["match"] = match.to_json()
    out["seconds"] = round(time.perf_counter() - started, 3)
    write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
    return 0
