"""The command-line interface: ``python -m backend …``.

Subcommands:
    chunkers    JSON array of the registered chunkers and their parameters.
    tokenizers  JSON array of the tokenizer names.
    samples     JSON array of the bundled sample documents.
    text FILE   The extracted document text, exactly the string chunk offsets index.
    info FILE   Document statistics as JSON (characters, tokens, sentences, pages, language…).
    chunk FILE  One JSON object per chunk and line: {"index","start","end","text","tokens"}.
                ``--snippet`` prints the configuration for a pipeline instead (pip line, spec, code for
                the chunklab library, LangChain and LlamaIndex): see :mod:`backend.lab.snippet`.
    compare FILE --config SPEC [--config SPEC …]
                A stats table of several configurations; ``--out DIR`` writes JSONL and CSV;
                ``--match-length N`` first tunes each to a mean chunk length of N tokens (±5 %).
    ppl FILE    Per-sentence perplexity under a causal LM, one JSON object per sentence and line:
                {"index","start","end","text","tokens","nll_mean","ppl"}. Served from the on-disk
                cache of model outputs when this model has scored this exact text before (the
                model is then not even loaded); ``--no-cache`` bypasses the cache. ``--csv`` prints
                the Meta-Chunking page's per-sentence CSV instead: see :mod:`backend.cli.ppl`.
    theta-curve FILE
                JSON of the θ → chunk-count curve of PPL chunking (``--aim N``: the θ for a mean
                chunk length of N tokens), as the Meta-Chunking page draws it.
    cache info  JSON statistics of that cache; ``cache clear`` empties it.
    eval, questions, index, query
                The retrieval lab (Chroma store, question sets, the Chroma report's
                metrics): see :mod:`backend.cli.retrieval`.
    curve FILE --config SPEC
                JSON of what a chunker cuts on (per-unit values, threshold, chunk ends), for
                the chunkers with ``has_curve`` (PPL, margin sampling, semantic).
    metrics FILE --chunker NAME
                MoC's Boundary Clarity, Chunk Stickiness and dissimilarity as one JSON object:
                see :mod:`backend.cli.quality`.
    report [FILE] --config SPEC [--config SPEC …] [--session FILE] [--questions CSV|sample:NAME] --out FILE
                The one-file HTML report (verdict, table, figures), computing what the cache
                lacks first: see :mod:`backend.cli.report`.
    edit FILE --base SPEC --edits +N,-N [--metrics bc,cs,ds] [--questions CSV|sample:NAME]
                An edited copy against its base: statistics, BC/CS/DS scoring only what the
                cache lacks, retrieval: see :mod:`backend.cli.edit`.
    corpus PATH --config SPEC [--config SPEC …] --out DIR [--metrics stats,bc,cs,ds,retrieval] [--engine local|ray]
                Configurations over a folder or zip of documents, resumable, local or on Ray:
                see :mod:`backend.cli.corpus`.
    tune FILE|DIR --questions CSV|sample:NAME|generate:METHOD --out DIR [--families a,b] [--objective iou]
                [--secondary mean_tokens] [--constraint 'mean_tokens<=400' …] [--budget 10m] [--trials N]
                Searches the chunkers' parameter ranges on two thirds of the questions and answers on the
                held-out third, resumable: see :mod:`backend.cli.tune` and ``docs/tune.md``.
    reproduce chroma --data DIR [--out DIR] [--rows id,id] [--embedder default|PATH] [--json]
                The Chroma report's all-MiniLM-L6-v2 table rerun on a Chroma-format folder, each row
                beside the paper's numbers, resumable: see :mod:`backend.cli.reproduce` and
                ``docs/reproducing.md``.

Errors print one line on stderr: exit 1 for unreadable input or a model that cannot be loaded,
2 for bad arguments, 130 when interrupted. Progress goes to stderr, never to stdout.
A run killed or interrupted midway leaves its finished work in the output cache: the next
run over the same input says ``resumed: N of M tokens were already scored`` (or ``… texts
were already embedded``) on stderr and does only the rest. A cache folder that cannot be
written costs one warning line; the run goes on without caching.
Per-parameter flags of ``chunk`` (``--chunk_size 200``) are generated from the registry.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from backend.chunkers import REGISTRY, chunker_specs, make_chunker
from backend.chunkers.match_length import match_length
from backend.cli import corpus as cli_corpus
from backend.cli import edit as cli_edit
from backend.cli import ppl as cli_ppl
from backend.cli import quality as cli_quality
from backend.cli import report as cli_report
from backend.cli import reproduce as cli_reproduce
from backend.cli import retrieval as cli_retrieval
from backend.cli import tune as cli_tune
from backend.cli.common import (
    Parser,
    add_embedder_flag,
    add_model_flags,
    embedder_spec,
    load_input,
    model_context,
    parse_config,
    parse_pairs,
    positive_float,
    show_resume_notes,
    write,
)
from backend.config import debug
from backend.lab.snippet import pipeline_snippet
from backend.errors import ChunkLabError, ParameterError
from backend.metrics.stats import chunking_stats, document_stats
from backend.models.cache import default_cache
from backend.samples import list_samples
from backend.tokenizers import TOKENIZER_NAMES

__all__ = ["main", "build_parser"]


def _registry_params() -> dict[str, dict[str, Any]]:
    params: dict[str, dict[str, Any]] = {}
    for name, cls in sorted(REGISTRY.items()):
        for p in cls.params:
            entry = params.setdefault(p.name, {"help": p.help, "chunkers": []})
            entry["chunkers"].append(name)
    return params


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; the chunk flags come from the chunker registry."""
    parser = Parser(prog="python -m backend", description="Chunk Lab command line.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("chunkers", help="list chunkers and their parameters (JSON)")
    sub.add_parser("tokenizers", help="list tokenizer names (JSON)")
    sub.add_parser("samples", help="list bundled sample documents (JSON)")
    p_text = sub.add_parser("text", help="print the extracted document text")
    p_text.add_argument("file", help="document path, or sample:NAME")
    p_info = sub.add_parser("info", help="document statistics (JSON)")
    p_info.add_argument("file", help="document path, or sample:NAME")
    p_info.add_argument("--tokenizer", default="cl100k", choices=TOKENIZER_NAMES)

    p_chunk = sub.add_parser("chunk", help="chunk a document; one JSON object per line")
    p_chunk.add_argument("file", help="document path, or sample:NAME")
    p_chunk.add_argument("--chunker", required=True, help="registered chunker name (see 'chunkers')")
    p_chunk.add_argument("--tokenizer", default="cl100k", choices=TOKENIZER_NAMES)
    p_chunk.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="chunker parameter (repeatable)"
    )
    p_chunk.add_argument(
        "--snippet",
        action="store_true",
        help="print the configuration for your pipeline instead of chunking: the pip line, the spec, and code for "
        "the chunklab library, LangChain and LlamaIndex (an edited copy: its chunks as data)",
    )
    add_model_flags(p_chunk)
    add_embedder_flag(p_chunk)
    for name, info in _registry_params().items():
        p_chunk.add_argument(
            f"--{name}",
            dest=f"param__{name}",
            metavar="VALUE",
            help=f"{info['help']} ({', '.join(info['chunkers'])})",
        )

    p_cmp = sub.add_parser("compare", help="stats of several configurations; optional JSONL/CSV export")
    p_cmp.add_argument("file", help="document path, or sample:NAME")
    p_cmp.add_argument(
        "--config",
        action="append",
        required=True,
        metavar="SPEC",
        help="'NAME key=value … [tokenizer=T]', e.g. 'recursive chunk_size=200' (repeatable)",
    )
    p_cmp.add_argument("--out", type=Path, help="folder for <config>.jsonl and <config>.csv files")
    p_cmp.add_argument(
        "--match-length",
        type=positive_float,
        metavar="N",
        help="tune each configuration's length parameter to a mean chunk length of N tokens (±5%%) first",
    )
    add_model_flags(p_cmp)
    add_embedder_flag(p_cmp)

    p_curve = sub.add_parser("curve", help="what a chunker cuts on: values, threshold and chunk ends (JSON)")
    p_curve.add_argument("file", help="document path, or sample:NAME")
    p_curve.add_argument("--config", required=True, metavar="SPEC",
                         help="'NAME key=value … [tokenizer=T]' of a chunker with a curve (has_curve in 'chunkers')")
    add_model_flags(p_curve)
    add_embedder_flag(p_curve)

    _add_cache_commands(sub)
    cli_ppl.add_commands(sub)
    cli_retrieval.add_commands(sub)
    cli_quality.add_commands(sub)
    cli_report.add_commands(sub)
    cli_edit.add_commands(sub)
    cli_corpus.add_commands(sub)
    cli_tune.add_commands(sub)
    cli_reproduce.add_commands(sub)
    return parser


def _add_cache_commands(sub: Any) -> None:
    """The subcommands that manage the output cache of model outputs (``cache``)."""
    p_cache = sub.add_parser("cache", help="the on-disk cache of model outputs (CHUNKLAB_CACHE_DIR)")
    cache_sub = p_cache.add_subparsers(dest="cache_command", required=True, parser_class=Parser)
    cache_sub.add_parser("info", help="entries, bytes, directory and size bound (JSON)")
    cache_sub.add_parser("clear", help="delete every entry; prints how many were removed")


def _run(args: argparse.Namespace) -> int:
    show_resume_notes()
    if args.command in cli_ppl.COMMANDS:
        return cli_ppl.run(args)
    if args.command in cli_retrieval.COMMANDS:
        return cli_retrieval.run(args)
    if args.command in cli_quality.COMMANDS:
        return cli_quality.run(args)
    if args.command in cli_report.COMMANDS:
        return cli_report.run(args)
    if args.command in cli_edit.COMMANDS:
        return cli_edit.run(args)
    if args.command in cli_corpus.COMMANDS:
        return cli_corpus.run(args)
    if args.command in cli_tune.COMMANDS:
        return cli_tune.run(args)
    if args.command in cli_reproduce.COMMANDS:
        return cli_reproduce.run(args)
    if args.command == "chunkers":
        write(json.dumps(chunker_specs(), indent=2, ensure_ascii=False) + "\n")
    elif args.command == "tokenizers":
        write(json.dumps(list(TOKENIZER_NAMES)) + "\n")
    elif args.command == "samples":
        rows = [{"name": s.name, "title": s.title, "description": s.description} for s in list_samples()]
        write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    elif args.command == "text":
        write(load_input(args.file).text)
    elif args.command == "info":
        write(json.dumps(document_stats(load_input(args.file), args.tokenizer), ensure_ascii=False, indent=2) + "\n")
    elif args.command == "chunk":
        params = parse_pairs(args.param)
        for key, value in vars(args).items():
            if key.startswith("param__") and value is not None:
                params[key[len("param__") :]] = value
        chunker = make_chunker(args.chunker, params, args.tokenizer)  # bad arguments fail before reading
        doc = load_input(args.file)
        if args.snippet:
            snippet = pipeline_snippet(chunker.config, lm=args.lm, embedder=embedder_spec(args.embedder), document=doc.source)
            write(snippet.text())
            return 0
        with model_context(args, [chunker]) as context:
            chunking = chunker.chunk(doc, context)
        write(chunking.to_jsonl())
        if chunking.run_report:  # e.g. an LLM chunker's content loss: on stderr, stdout stays JSONL
            print(f"{chunking.config.name}: {chunking.run_report}", file=sys.stderr)
    elif args.command == "compare":
        _compare(args)
    elif args.command == "curve":
        _curve(args)
    elif args.command == "cache":
        cache = default_cache()
        if args.cache_command == "info":
            write(json.dumps(cache.stats(), indent=2) + "\n")
        else:
            removed = cache.clear()
            write(f"removed {removed} {'entry' if removed == 1 else 'entries'} from {cache.directory}\n")
    return 0


def _compare(args: argparse.Namespace) -> None:
    chunkers = [parse_config(spec) for spec in args.config]
    doc = load_input(args.file)
    matches = None
    with model_context(args, chunkers) as context:
        if args.match_length is not None:
            matches = [match_length(doc, c.config, args.match_length, context=context) for c in chunkers]
            results = [m.chunking for m in matches]
        else:
            results = [c.chunk(doc, context) for c in chunkers]
    rows = chunking_stats(results)
    for row, r in zip(rows, results):
        if r.meta:  # the chunker's own report, machine-readable (content loss, model calls…)
            row["meta"] = r.meta_dict
    if matches is not None:
        for row, m in zip(rows, matches):
            row["match"] = m.to_json()
    write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(results, 1):
            stem = f"{i:02d}-{r.config.name}"
            (args.out / f"{stem}.jsonl").write_text(r.to_jsonl(), encoding="utf-8")
            (args.out / f"{stem}.csv").write_text(r.to_csv(), encoding="utf-8")


def _curve(args: argparse.Namespace) -> None:
    chunker = parse_config(args.config)
    if not chunker.has_curve():
        with_curve = ", ".join(sorted(name for name, cls in REGISTRY.items() if cls.has_curve()))
        raise ParameterError(f"{chunker.name} has no curve; chunkers with one: {with_curve}")
    doc = load_input(args.file)
    with model_context(args, [chunker]) as context:
        curve = chunker.curve(doc, context)
    write(json.dumps(curve.to_json(), ensure_ascii=False) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 bad input, 2 bad arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:
        # The reader (e.g. `head`) went away; stay quiet like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ChunkLabError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the last line of defence: one line, never a traceback
        if debug():
            raise
        print(f"internal error: {type(e).__name__}: {e} (set CHUNKLAB_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
