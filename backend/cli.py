"""The command-line interface: ``python -m backend …``.

Subcommands:
    chunkers    JSON array of the registered chunkers and their parameters.
    tokenizers  JSON array of the tokenizer names.
    samples     JSON array of the bundled sample documents.
    text FILE   The extracted document text, exactly the string chunk offsets index.
    info FILE   Document statistics as JSON (characters, tokens, sentences, pages, language…).
    chunk FILE  One JSON object per chunk and line: {"index","start","end","text","tokens"}.
    compare FILE --config SPEC [--config SPEC …]
                A stats table of several configurations; ``--out DIR`` writes JSONL and CSV;
                ``--match-length N`` first tunes each to a mean chunk length of N tokens (±5 %).
    ppl FILE    Per-sentence perplexity under a causal LM, one JSON object per sentence and line:
                {"index","start","end","text","tokens","nll_mean","ppl"}. Served from the on-disk
                cache of model outputs when this model has scored this exact text before (the
                model is then not even loaded); ``--no-cache`` bypasses the cache.
    cache info  JSON statistics of that cache; ``cache clear`` empties it.
    eval, questions, index, query
                The retrieval lab (Chroma store, question sets, the Chroma report's
                metrics): see :mod:`backend.cli_retrieval`.
    curve FILE --config SPEC
                JSON of what a chunker cuts on (per-unit values, threshold, chunk ends), for
                the chunkers with ``has_curve`` (PPL, margin sampling, semantic).
    metrics FILE --chunker NAME
                MoC's Boundary Clarity, Chunk Stickiness and dissimilarity as one JSON object:
                see :mod:`backend.cli_quality`.

Errors print one line on stderr: exit 1 for unreadable input or a model that cannot be loaded,
2 for bad arguments, 130 when interrupted. Progress goes to stderr, never to stdout.
Per-parameter flags of ``chunk`` (``--chunk_size 200``) are generated from the registry.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, NoReturn, Sequence, TextIO

from backend import cli_quality, cli_retrieval
from backend.errors import ChunkLabError, InputError, ParameterError

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _registry_params() -> dict[str, dict[str, Any]]:
    from backend.chunkers import REGISTRY

    params: dict[str, dict[str, Any]] = {}
    for name, cls in sorted(REGISTRY.items()):
        for p in cls.params:
            entry = params.setdefault(p.name, {"help": p.help, "chunkers": []})
            entry["chunkers"].append(name)
    return params


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; the chunk flags come from the chunker registry."""
    from backend.tokenizers import TOKENIZER_NAMES

    parser = _Parser(prog="python -m backend", description="Chunk Lab command line.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
    _add_model_flags(p_chunk)
    _add_embedder_flag(p_chunk)
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
        type=_positive_float,
        metavar="N",
        help="tune each configuration's length parameter to a mean chunk length of N tokens (±5%%) first",
    )
    _add_model_flags(p_cmp)
    _add_embedder_flag(p_cmp)

    p_curve = sub.add_parser("curve", help="what a chunker cuts on: values, threshold and chunk ends (JSON)")
    p_curve.add_argument("file", help="document path, or sample:NAME")
    p_curve.add_argument("--config", required=True, metavar="SPEC",
                         help="'NAME key=value … [tokenizer=T]' of a chunker with a curve (has_curve in 'chunkers')")
    _add_model_flags(p_curve)
    _add_embedder_flag(p_curve)

    _add_model_commands(sub)
    cli_retrieval.add_commands(sub)
    cli_quality.add_commands(sub)
    return parser


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {raw!r}")
    return value


def _positive_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {raw!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {raw!r}")
    return value


def _add_model_flags(parser: argparse.ArgumentParser, window_flag: str = "--window") -> None:
    """``--lm``, ``--window``, ``--device`` and ``--no-cache``: the model a command (or a model chunker) uses.

    ``window_flag`` renames ``--window`` where a command has a window of its own (``metrics``).
    """
    parser.add_argument(
        "--lm",
        metavar="NAME|PATH",
        help="smollm2 (bundled, the default; CHUNKLAB_LM), a checkpoint folder, a .gguf file or a hub id",
    )
    parser.add_argument(
        window_flag, type=_positive_int, metavar="N", help="context window in tokens (default: the model's)"
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda", "mps"),
        help="where the model runs (default: CHUNKLAB_DEVICE, else auto)",
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache of model outputs")


def _add_embedder_flag(parser: argparse.ArgumentParser) -> None:
    """``--embedder``: the embedding model of the chunkers that need one (``semantic``, ``cluster``…)."""
    parser.add_argument(
        "--embedder",
        metavar="default|PATH",
        help="embedder of the semantic chunkers: default (CHUNKLAB_EMBEDDER or the bundled all-MiniLM-L6-v2), "
        "a model folder or a hub id",
    )


def _add_model_commands(sub: Any) -> None:
    """The subcommands that run models (``ppl``) or manage their output cache (``cache``)."""
    p_ppl = sub.add_parser("ppl", help="per-sentence perplexity under a causal LM; one JSON object per line")
    p_ppl.add_argument("file", help="document path, or sample:NAME")
    _add_model_flags(p_ppl)

    p_cache = sub.add_parser("cache", help="the on-disk cache of model outputs (CHUNKLAB_CACHE_DIR)")
    cache_sub = p_cache.add_subparsers(dest="cache_command", required=True, parser_class=_Parser)
    cache_sub.add_parser("info", help="entries, bytes, directory and size bound (JSON)")
    cache_sub.add_parser("clear", help="delete every entry; prints how many were removed")


def _load(spec: str):
    if spec.startswith("sample:"):
        from backend.samples import load_sample

        return load_sample(spec[len("sample:") :])
    from backend.loaders import load_document

    path = Path(spec)
    if not path.exists():
        raise InputError(f"{spec}: no such file")
    if path.is_dir():
        raise InputError(f"{spec}: is a directory, not a document")
    try:
        return load_document(path)
    except PermissionError as e:
        raise InputError(f"{spec}: permission denied") from e


def _parse_pairs(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"parameter {pair!r} must look like key=value")
        out[key.strip()] = value.strip()
    return out


def _parse_config(spec: str):
    from backend.chunkers import make_chunker

    parts = shlex.split(spec)
    if not parts:
        raise ParameterError("--config needs a chunker name, e.g. 'recursive chunk_size=200'")
    params = _parse_pairs(parts[1:])
    tokenizer = params.pop("tokenizer", "cl100k")
    return make_chunker(parts[0], params, tokenizer)


def _write(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))


def _run(args: argparse.Namespace) -> int:
    if args.command in cli_retrieval.COMMANDS:
        return cli_retrieval.run(args)
    if args.command in cli_quality.COMMANDS:
        return cli_quality.run(args)
    if args.command == "chunkers":
        from backend.chunkers import chunker_specs

        _write(json.dumps(chunker_specs(), indent=2, ensure_ascii=False) + "\n")
    elif args.command == "tokenizers":
        from backend.tokenizers import TOKENIZER_NAMES

        _write(json.dumps(list(TOKENIZER_NAMES)) + "\n")
    elif args.command == "samples":
        from backend.samples import list_samples

        rows = [{"name": s.name, "title": s.title, "description": s.description} for s in list_samples()]
        _write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    elif args.command == "text":
        _write(_load(args.file).text)
    elif args.command == "info":
        from backend.stats import document_stats

        _write(json.dumps(document_stats(_load(args.file), args.tokenizer), ensure_ascii=False, indent=2) + "\n")
    elif args.command == "chunk":
        from backend.chunkers import make_chunker

        params = _parse_pairs(args.param)
        for key, value in vars(args).items():
            if key.startswith("param__") and value is not None:
                params[key[len("param__") :]] = value
        chunker = make_chunker(args.chunker, params, args.tokenizer)  # bad arguments fail before reading
        doc = _load(args.file)
        with _model_context(args, [chunker]) as context:
            chunking = chunker.chunk(doc, context)
        _write(chunking.to_jsonl())
        if chunking.run_report:  # e.g. an LLM chunker's content loss: on stderr, stdout stays JSONL
            print(f"{chunking.config.name}: {chunking.run_report}", file=sys.stderr)
    elif args.command == "compare":
        _compare(args)
    elif args.command == "curve":
        _curve(args)
    elif args.command == "ppl":
        _ppl(args)
    elif args.command == "cache":
        from backend.cache import default_cache

        cache = default_cache()
        if args.cache_command == "info":
            _write(json.dumps(cache.stats(), indent=2) + "\n")
        else:
            removed = cache.clear()
            _write(f"removed {removed} {'entry' if removed == 1 else 'entries'} from {cache.directory}\n")
    return 0


def _compare(args: argparse.Namespace) -> None:
    from backend.stats import chunking_stats

    chunkers = [_parse_config(spec) for spec in args.config]
    doc = _load(args.file)
    matches = None
    with _model_context(args, chunkers) as context:
        if args.match_length is not None:
            from backend.match_length import match_length

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
    _write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(results, 1):
            stem = f"{i:02d}-{r.config.name}"
            (args.out / f"{stem}.jsonl").write_text(r.to_jsonl(), encoding="utf-8")
            (args.out / f"{stem}.csv").write_text(r.to_csv(), encoding="utf-8")


def _curve(args: argparse.Namespace) -> None:
    from backend.chunkers import REGISTRY

    chunker = _parse_config(args.config)
    if not chunker.has_curve():
        with_curve = ", ".join(sorted(name for name, cls in REGISTRY.items() if cls.has_curve()))
        raise ParameterError(f"{chunker.name} has no curve; chunkers with one: {with_curve}")
    doc = _load(args.file)
    with _model_context(args, [chunker]) as context:
        curve = chunker.curve(doc, context)
    _write(json.dumps(curve.to_json(), ensure_ascii=False) + "\n")


def _ppl(args: argparse.Namespace) -> None:
    from backend.scoring import score_sentences

    doc = _load(args.file)
    with _model_context(args, None) as context:
        scores = context.token_scores(doc.text)
    _write("".join(json.dumps(s.to_json(), ensure_ascii=False) + "\n" for s in score_sentences(doc, scores)))


def _embedder_spec(raw: str | None) -> str | None:
    return None if raw is None or raw.strip().lower() == "default" else raw


class _model_context:  # noqa: N801  (used as a context manager, reads like a function)
    """A :class:`ModelContext` from the model flags, with progress on stderr while a model works.

    With ``chunkers`` given and none of them needing a model, no progress line is drawn.
    """

    def __init__(self, args: argparse.Namespace, chunkers: Sequence[Any] | None) -> None:
        from backend.chunkers.context import ModelContext
        from backend.models.types import ProgressTracker

        self._active = chunkers is None or any(c.needs for c in chunkers)
        self._line = _StderrProgress("scoring")
        self.context = ModelContext(
            lm=args.lm,
            device=args.device,
            use_cache=not args.no_cache,
            window=args.window,
            progress=ProgressTracker(report=self._line.report) if self._active else None,
            on_load=self._loading,
            embedder_spec=_embedder_spec(getattr(args, "embedder", None)),
        )

    def _loading(self) -> None:
        # Our own progress line replaces transformers' "Loading weights" bar (read at import).
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        self._line.status("loading model…")

    def __enter__(self) -> Any:
        self._line.__enter__()
        return self.context

    def __exit__(self, *exc: object) -> None:
        self._line.__exit__(*exc)


class _StderrProgress:
    """Progress on stderr: one updating line on a terminal; a plain line every 30 s otherwise."""

    _TTY_INTERVAL = 0.1
    _LOG_INTERVAL = 30.0

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self._what = what
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._last = 0.0
        self._dirty = False

    def __enter__(self) -> _StderrProgress:
        self._last = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dirty:  # leave the terminal line clean for the next output or error
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    def status(self, message: str) -> None:
        """A transient message (terminal only)."""
        if self._tty:
            self._stream.write(f"\r\x1b[K{message}")
            self._stream.flush()
            self._dirty = True

    def report(self, fraction: float, eta: float | None, _label: str) -> None:
        """A :class:`~backend.models.types.ProgressTracker` report callback."""
        now = time.monotonic()
        eta_text = f", ETA {eta:.0f}s" if eta is not None and fraction < 1 else ""
        text = f"{self._what}: {fraction:6.1%}{eta_text}"
        if self._tty:
            if now - self._last >= self._TTY_INTERVAL or fraction >= 1:
                self._last = now
                self.status(text)
        elif now - self._last >= self._LOG_INTERVAL:
            self._last = now
            print(text, file=self._stream, flush=True)


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
        if os.environ.get("CHUNKLAB_DEBUG"):
            raise
        print(f"internal error: {type(e).__name__}: {e} (set CHUNKLAB_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
