"""Meta-Chunking on the command line: ``ppl`` (per-sentence scores, or the page's CSV) and ``theta-curve``.

Both print what the Meta-Chunking page shows, from the same call (:func:`backend.lab.ppl.ppl_view`):

- ``ppl FILE`` prints one JSON object per sentence and line (the scores, as always);
  ``ppl FILE --csv`` prints the page's per-sentence CSV instead (value, drop, boundary, chunk)
  for ``--threshold``, ``--rule``, ``--value``, ``--tokenizer``, ``--target-length`` and ``--overlap``.
- ``theta-curve FILE`` prints the θ → chunk-count curve the page draws under "Help me choose θ"
  (plain PPL chunking over the slider's range) as one JSON object, and with ``--aim N`` the θ
  whose mean chunk length is nearest N tokens (the page's "Set θ").

The view flags are the page's settings (:mod:`backend.lab.settings`): their types, choices,
defaults and help come from there, so the CLI offers exactly what the page does (θ's default is
the chosen chunker's own). The scores come through the model flags' context: from the output
cache when this model scored this text before, else from the model.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from backend.cli.common import add_model_flags, load_input, model_context, positive_float, write
from backend.errors import ParameterError
from backend.lab.ppl import PPLSettings, ppl_view, score_document
from backend.lab.settings import Setting, setting
from backend.models.scoring import score_sentences

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("ppl", "theta-curve")
_CSV_FLAGS = ("threshold", "rule", "value", "tokenizer", "target_length", "overlap")  # what --csv is cut with
_CURVE_FLAGS = ("rule", "value", "tokenizer")  # the curve is plain PPL chunking over every θ
_METAVARS = {"int": "N", "float": "X", "str": "TEXT"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _checked(spec: Setting) -> Callable[[str], Any]:
    """An argparse ``type=`` that converts and checks a value as the page's setting does (exit 2, one line)."""

    def parse(raw: str) -> Any:
        try:
            return spec.param.coerce(raw, spec.section)
        except ParameterError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _add_setting_flags(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """One flag per PPL setting, its type, choices and help read from :mod:`backend.lab.settings`."""
    for name in names:
        spec = setting("ppl", name)
        default = "the chosen chunker's default" if spec.default is None else spec.default
        if spec.param.type == "bool":
            parser.add_argument(_flag(name), dest=name, action="store_true", default=None, help=spec.help)
            continue
        metavar = "{" + ",".join(map(str, spec.choices)) + "}" if spec.choices else _METAVARS[spec.param.type]
        parser.add_argument(
            _flag(name), dest=name, type=_checked(spec), default=None, metavar=metavar,
            help=f"{spec.help} (default: {default})",
        )


def add_commands(sub: Any) -> None:
    """Register ``ppl`` and ``theta-curve``."""
    p_ppl = sub.add_parser(
        "ppl", help="per-sentence perplexity under a causal LM; one JSON object per line (--csv: the page's CSV)"
    )
    p_ppl.add_argument("file", help="document path, or sample:NAME")
    p_ppl.add_argument(
        "--csv", action="store_true",
        help="print the Meta-Chunking page's per-sentence CSV (value, drop, boundary, chunk) instead of JSON lines",
    )
    _add_setting_flags(p_ppl, _CSV_FLAGS)
    add_model_flags(p_ppl)

    p_curve = sub.add_parser(
        "theta-curve", help="the θ → chunk-count curve of PPL chunking (JSON), as the Meta-Chunking page draws it"
    )
    p_curve.add_argument("file", help="document path, or sample:NAME")
    _add_setting_flags(p_curve, _CURVE_FLAGS)
    p_curve.add_argument(
        "--aim", type=positive_float, metavar="N",
        help="a mean chunk length in tokens: also print the θ whose mean length is nearest it",
    )
    add_model_flags(p_curve)


def _settings(args: argparse.Namespace, names: tuple[str, ...]) -> PPLSettings:
    """The view's settings from the flags given (the others: the page's defaults); checked before any reading."""
    settings = PPLSettings.of({name: getattr(args, name) for name in names if getattr(args, name) is not None})
    settings.build_chunker()  # a combination the chunker refuses fails here, before the document or the model
    return settings


def run(args: argparse.Namespace) -> int:
    """Run ``ppl`` or ``theta-curve``; returns the exit code."""
    if args.command == "ppl":
        _ppl(args)
    else:
        _theta_curve(args)
    return 0


def _ppl(args: argparse.Namespace) -> None:
    if not args.csv:
        given = [_flag(n) for n in _CSV_FLAGS if getattr(args, n) is not None]
        if given:
            raise ParameterError(f"{', '.join(given)}: only with --csv (the JSON lines are the scores alone)")
        doc = load_input(args.file)
        with model_context(args, None) as context:
            scores = context.token_scores(doc.text)
        write("".join(json.dumps(s.to_json(), ensure_ascii=False) + "\n" for s in score_sentences(doc, scores)))
        return
    settings = _settings(args, _CSV_FLAGS)
    doc = load_input(args.file)
    with model_context(args, None) as context:
        scores = score_document(doc, context, context.fingerprint or "")
    write(ppl_view(doc, scores, settings).values_csv())


def _theta_curve(args: argparse.Namespace) -> None:
    settings = _settings(args, _CURVE_FLAGS)
    doc = load_input(args.file)
    with model_context(args, None) as context:
        scores = score_document(doc, context, context.fingerprint or "")
    view = ppl_view(doc, scores, settings)
    write(json.dumps(view.curve_json(args.aim), ensure_ascii=False) + "\n")
