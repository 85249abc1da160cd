"""What every CLI subcommand shares: argument types, model flags, document loading, progress on stderr.

Public names only, so each subcommand module (:mod:`backend.cli.main`, :mod:`backend.cli.quality`,
:mod:`backend.cli.retrieval`) imports from here and never from another subcommand module.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.config import quiet_hub_progress_bars
from backend.errors import InputError, ParameterError
from backend.loaders import load_document
from backend.metrics.formulas import BC_MODES, CS_RULES, DEFAULT_K
from backend.metrics.report import METRICS, QualitySettings
from backend.models.devices import PRECISIONS, set_precision
from backend.progress import Progress, format_seconds
from backend.retrieval.questions import QuestionSet, load_question_set, load_sample_question_set
from backend.samples import load_sample

_T = TypeVar("_T")

__all__ = [
    "Parser",
    "value_type",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "finite_float",
    "add_model_flags",
    "add_embedder_flag",
    "add_metric_model_flags",
    "add_quality_flags",
    "add_question_flags",
    "quality_settings_of",
    "questions_of",
    "load_input",
    "parse_pairs",
    "parse_config",
    "write",
    "embedder_spec",
    "model_context",
    "StderrProgress",
    "show_resume_notes",
]

# Loggers whose INFO lines the CLI shows: a run that goes on from an interrupted one says how much it reused.
_NOTE_LOGGERS = ("backend.models.scoring", "backend.models.embeddings")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def value_type(convert: Callable[[str], _T], ok: Callable[[_T], bool], what: str) -> Callable[[str], _T]:
    """An argparse ``type=``: ``convert`` the raw string, then check it with ``ok``.

    Both failures give the same one-line message, naming what was expected and the value given:
    ``--window: must be a positive integer, got '0'``.
    """

    def parse(raw: str) -> _T:
        try:
            value = convert(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {raw!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {raw!r}")
        return value

    return parse


positive_int = value_type(int, lambda v: v > 0, "a positive integer")
non_negative_int = value_type(int, lambda v: v >= 0, "an integer >= 0")
positive_float = value_type(float, lambda v: 0 < v < math.inf, "a positive number")
finite_float = value_type(float, math.isfinite, "a finite number")


def add_model_flags(parser: argparse.ArgumentParser, window_flag: str = "--window") -> None:
    """``--lm``, ``--window``, ``--device`` and ``--no-cache``: the model a command (or a model chunker) uses.

    ``window_flag`` renames ``--window`` where a command has a window of its own (``metrics``).
    """
    parser.add_argument(
        "--lm",
        metavar="NAME|PATH",
        help="smollm2 (bundled, the default; CHUNKLAB_LM), a checkpoint folder, a .gguf file, a hub id, "
        "or remote (the OpenAI-compatible server of CHUNKLAB_REMOTE_BASE_URL)",
    )
    parser.add_argument(
        window_flag, type=positive_int, metavar="N", help="context window in tokens (default: the model's)"
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda", "mps"),
        help="where the model runs (default: CHUNKLAB_DEVICE, else auto)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        action=_PrecisionAction,
        help="the language model's precision (default: CHUNKLAB_PRECISION, else float32). On the CPU float16 runs "
        "the decoder's matmuls in float16 (a sentence's mean NLL within 0.02 nats, same PPL boundaries on the samples); "
        "bfloat16 under autocast (within 0.15 nats, boundaries may move; faster only on some CPUs); auto is float16 "
        "where measured at least 1.1x faster on this machine, else float32. "
        "On a GPU the whole model runs in the precision given (auto: bfloat16, or float16 where the GPU lacks it; "
        "scripts/device_check.sh measures each against the CPU). Outputs are cached per precision and device kind",
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache of model outputs")


class _PrecisionAction(argparse.Action):
    """``--precision``: stored, and made the process's precision (every model this command loads)."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)
        set_precision(values)


def add_embedder_flag(parser: argparse.ArgumentParser) -> None:
    """``--embedder``: the embedding model of the chunkers that need one (``semantic``, ``cluster``…)."""
    parser.add_argument(
        "--embedder",
        metavar="default|PATH",
        help="embedder of the semantic chunkers: default (CHUNKLAB_EMBEDDER or the bundled all-MiniLM-L6-v2), "
        "a model folder, a hub id, or remote / an http(s)://…/v1 URL (an embeddings server, CHUNKLAB_EMBEDDER_*)",
    )


def load_input(spec: str):
    if spec.startswith("sample:"):
        return load_sample(spec[len("sample:") :])
    path = Path(spec)
    if not path.exists():
        raise InputError(f"{spec}: no such file")
    if path.is_dir():
        raise InputError(f"{spec}: is a directory, not a document")
    try:
        return load_document(path)
    except PermissionError as e:
        raise InputError(f"{spec}: permission denied") from e


def metrics_list(raw: str) -> tuple[str, ...]:
    """``--metrics bc,cs``: the quality metrics named, in order, without repeats (an argparse type)."""
    names = tuple(dict.fromkeys(x.strip() for x in raw.split(",") if x.strip()))
    bad = [x for x in names if x not in METRICS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"choose from {','.join(METRICS)} (comma-separated), got {raw!r}")
    return names


def parse_pairs(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"parameter {pair!r} must look like key=value")
        out[key.strip()] = value.strip()
    return out


def parse_config(spec: str):
    try:
        name, params, tokenizer = ChunkerConfig.parse(spec)
    except ValueError as e:
        raise ParameterError(f"--config {spec!r}: {e}") from None
    return make_chunker(name, params, tokenizer)


def write(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))


def embedder_spec(raw: str | None) -> str | None:
    return None if raw is None or raw.strip().lower() == "default" else raw


class model_context:  # noqa: N801  (used as a context manager, reads like a function)
    """A :class:`ModelContext` from the model flags, with progress on stderr while a model works.

    With ``chunkers`` given and none of them needing a model, no progress line is drawn.
    """

    def __init__(self, args: argparse.Namespace, chunkers: Sequence[Any] | None) -> None:
        self._active = chunkers is None or any(c.needs for c in chunkers)
        self._line = StderrProgress("scoring")
        self.context = ModelContext(
            lm=args.lm,
            device=args.device,
            use_cache=not args.no_cache,
            window=args.window,
            progress=self._line if self._active else None,
            on_load=self._loading,
            embedder_spec=embedder_spec(getattr(args, "embedder", None)),
        )

    def _loading(self) -> None:
        # Our own progress line replaces transformers' "Loading weights" bar (read at import).
        quiet_hub_progress_bars()
        self._line.status("loading model…")

    def __enter__(self) -> Any:
        self._line.__enter__()
        return self.context

    def __exit__(self, *exc: object) -> None:
        self._line.__exit__(*exc)


def show_resume_notes(stream: TextIO | None = None) -> None:
    """Print the backend's "resumed: N of M … already …" lines on stderr (once per process)."""
    for name in _NOTE_LOGGERS:
        logger = logging.getLogger(name)
        if any(getattr(h, "_chunklab_notes", False) for h in logger.handlers):
            continue
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.setLevel(logging.INFO)
        handler._chunklab_notes = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


class StderrProgress(Progress):
    """Progress drawn on stderr: one updating line on a terminal; a plain line every 30 s otherwise.

    Used as a context manager around the work (it leaves the terminal line clean) and handed
    to the backend as its ``progress``; the line shows the fraction and the ETA.
    """

    _TTY_INTERVAL = 0.1
    _LOG_INTERVAL = 30.0

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        super().__init__(self.report)
        self._what = what
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._drawn = 0.0  # when the line was last written
        self._dirty = False

    def __enter__(self) -> StderrProgress:
        self._drawn = time.monotonic()
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
        """This progress's report callback: draw the fraction and the ETA."""
        now = time.monotonic()
        eta_text = f", ETA {format_seconds(eta)}" if eta is not None and fraction < 1 else ""
        text = f"{self._what}: {fraction:6.1%}{eta_text}"
        if self._tty:
            if now - self._drawn >= self._TTY_INTERVAL or fraction >= 1:
                self._drawn = now
                self.status(text)
        elif now - self._drawn >= self._LOG_INTERVAL:
            self._drawn = now
            print(text, file=self._stream, flush=True)


def add_quality_flags(parser: argparse.ArgumentParser) -> None:
    """``--K``, ``--bc-mode``, ``--cs-rule``, ``--delta``, ``--window``: the settings BC and CS are computed under."""
    parser.add_argument("--K", type=finite_float, default=DEFAULT_K, help=f"CS edge threshold (default {DEFAULT_K})")
    parser.add_argument("--bc-mode", choices=BC_MODES, default="reference", help="BC's mode (default reference)")
    parser.add_argument("--cs-rule", choices=CS_RULES, default="paper", help="CS's edge rule (default paper)")
    parser.add_argument("--delta", type=non_negative_int, default=0, help="δ of CS's incomplete graph (default 0)")
    parser.add_argument("--window", type=positive_int, metavar="W",
                        help="score only chunk pairs with |i - j| <= W for CS (default every pair)")


def quality_settings_of(args: argparse.Namespace) -> QualitySettings:
    """The :class:`QualitySettings` of :func:`add_quality_flags`'s flags."""
    return QualitySettings(K=args.K, bc_mode=args.bc_mode, cs_rule=args.cs_rule, delta=args.delta, window=args.window)


def add_question_flags(parser: argparse.ArgumentParser, questions_help: str) -> None:
    """``--questions``, ``--corpora``, ``--retrieve``: the question set of the retrieval metrics."""
    parser.add_argument("--questions", metavar="CSV|sample:NAME", help=questions_help)
    parser.add_argument("--corpora", type=Path, metavar="DIR", help="the corpora folder of a --questions CSV")
    parser.add_argument("--retrieve", type=positive_int, default=5, help="chunks retrieved per question (default 5)")


def questions_of(args: argparse.Namespace) -> tuple[QuestionSet | None, str | None]:
    """The question set of :func:`add_question_flags`'s flags and its name (``sample:NAME`` or the file's); (None, None) without.

    Raises:
        ParameterError: ``--corpora`` without ``--questions``.
        InputError: the set cannot be read.
    """
    if args.questions is None:
        if args.corpora is not None:
            raise ParameterError("--corpora needs --questions")
        return None, None
    if args.questions.startswith("sample:"):
        return load_sample_question_set(args.questions.removeprefix("sample:")), args.questions
    return load_question_set(Path(args.questions).expanduser(), args.corpora), Path(args.questions).name


def add_metric_model_flags(parser: argparse.ArgumentParser, *, lm_help: str, embedder_help: str) -> None:
    """``--lm``, ``--device``, ``--embedder``: the models of the quality and retrieval metrics."""
    parser.add_argument("--lm", metavar="NAME|PATH", help=lm_help)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"), help="where the models run")
    parser.add_argument("--embedder", metavar="default|PATH", help=embedder_help)
