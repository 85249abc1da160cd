"""The docs' reference pages, generated from the code so they cannot drift from it.

- :func:`cli_markdown`: every subcommand of ``python -m backend`` (nested ones too, such as
  ``cache info``) with every option, its help, default and choices, walked from the real parser
  (:func:`backend.cli.main.build_parser`, whose ``chunk`` flags come from the chunker registry).
- :func:`environment_markdown`: the table of environment variables, from
  :data:`backend.config.ENVIRONMENT`, the registry the readers in :mod:`backend.config` look names up in.
- :func:`missing_options` and :func:`missing_variables`: what a page lacks against the code — the
  docs' tests use them, and a test proves they flag a page with one option left out.

The functions are pure (a parser or a registry in, Markdown out); the MkDocs hook
``docs/hooks/reference.py`` writes their output into ``docs/reference/`` at build time.

argparse has no public way to list a parser's arguments; like sphinx-argparse and argparse's
own help formatter, the walk reads ``parser._actions`` and a subparsers action's ``choices``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from backend.config import ENVIRONMENT, EnvVar

__all__ = [
    "Command",
    "commands",
    "cli_markdown",
    "environment_markdown",
    "documented_options",
    "missing_options",
    "missing_variables",
]

_HEADING = re.compile(r"^## `(?P<path>[^`]*)`\s*$")
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")
_VARIABLE_ROW = re.compile(r"^\| `(?P<name>[A-Z][A-Z0-9_]*)` \|")


@dataclass(frozen=True)
class Command:
    """One subcommand as the parser defines it: its words after ``python -m backend``, help and parser."""

    path: tuple[str, ...]
    help: str
    parser: argparse.ArgumentParser

    @property
    def name(self) -> str:
        """The words of the command, e.g. ``"questions generate"``."""
        return " ".join(self.path)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The parser's subcommands action, if it has one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every command under ``parser``, depth first in the order they were added; a group with subcommands too.

    Args:
        parser: the top-level parser (``build_parser()``) or a subparser.
        path: the words leading to ``parser``.
    """
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    for name, child in sub.choices.items():
        command = Command(path + (name,), helps.get(name, ""), child)
        yield command
        yield from commands(child, command.path)


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's documented arguments: not ``--help``, not subcommand actions, not hidden ones."""
    return [
        a for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS
    ]


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of the parser's documented arguments (``--chunk_size``, ``-k``…)."""
    return {s for a in _arguments(parser) for s in a.option_strings}


def _cell(text: str) -> str:
    """Text made safe for one cell of a Markdown table (pipes, angle brackets, emphasis marks, line breaks)."""
    text = " ".join(text.split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("*", "\\*")


def _code(text: str) -> str:
    """``text`` as inline code inside a table cell."""
    return f"`{text.replace('|', '&#124;')}`"


def _help(action: argparse.Action, prog: str) -> str:
    """The action's help with its ``%(default)s``-style fields filled in, as ``--help`` prints it."""
    if not action.help:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return action.help % params


def _metavar(action: argparse.Action) -> str:
    """What follows the option on a command line (``SPEC``, ``N``…), '' for a flag that takes no value."""
    if action.nargs == 0:
        return ""
    if isinstance(action.metavar, tuple):
        return " ".join(action.metavar)
    if action.metavar:
        return action.metavar
    if action.choices is not None:
        return ""  # the choices have their own column
    return action.dest.upper()


def _default(action: argparse.Action) -> str:
    """The default as a cell: '' when there is none worth showing (None, a flag's False, an empty list)."""
    value = action.default
    if value is None or value is argparse.SUPPRESS or action.nargs == 0 or value == []:
        return ""
    return _code(str(value))


def _notes(action: argparse.Action) -> list[str]:
    """Words on how the argument is given: required, repeatable, a flag."""
    notes = []
    if action.option_strings and action.required:
        notes.append("required")
    repeatable = isinstance(action, (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction))
    if repeatable and "repeatable" not in (action.help or ""):
        notes.append("repeatable")
    if action.nargs == 0 and not isinstance(action, argparse._CountAction):
        notes.append("flag")
    if not action.option_strings and action.nargs in ("?", "*"):
        notes.append("optional")
    return notes


def _row(action: argparse.Action, prog: str) -> str:
    """One table row: the argument, its help, default and choices."""
    metavar = _metavar(action)
    if action.option_strings:
        first = ", ".join(_code(s) for s in action.option_strings)
        argument = f"{first} {_cell(metavar)}" if metavar else first
    else:
        argument = _code(action.metavar if isinstance(action.metavar, str) else action.dest.upper())
    notes = _notes(action)
    help_text = _cell(_help(action, prog))
    if notes:
        help_text = f"{help_text} *({', '.join(notes)})*" if help_text else f"*({', '.join(notes)})*"
    choices = ", ".join(_code(str(c)) for c in action.choices) if action.choices is not None else ""
    return f"| {argument} | {help_text} | {_default(action)} | {choices} |"


def _usage(parser: argparse.ArgumentParser, width: int = 100) -> list[str]:
    """The usage line, wrapped between whole ``[…]`` groups at ``width``.

    argparse wraps it at the terminal's width; joined and wrapped here, the page is the same everywhere.
    """
    words, depth, current = [], 0, ""
    for char in " ".join(parser.format_usage().split()).removeprefix("usage: "):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == " " and depth == 0:
            words.append(current)
            current = ""
        else:
            current += char
    words.append(current)
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) > width:
            lines.append("    " + word)
        else:
            lines[-1] += " " + word
    return lines


def _section(command: Command) -> list[str]:
    """The Markdown of one command: heading, help, usage and its arguments' table."""
    lines = [f"## `{command.name}`", ""]
    if command.help:
        lines += [_cell(command.help[:1].upper() + command.help[1:]) + ".", ""]
    lines += ["```text", *_usage(command.parser), "```", ""]
    sub = _subparsers(command.parser)
    if sub is not None:
        lines += ["Subcommands: " + ", ".join(f"[`{command.name} {n}`](#{_anchor(command.name + ' ' + n)})"
                                              for n in sub.choices) + ".", ""]
    arguments = _arguments(command.parser)
    if arguments:
        lines += ["| argument | help | default | choices |", "| --- | --- | --- | --- |"]
        lines += [_row(a, command.parser.prog) for a in arguments]
        lines.append("")
    elif sub is None:
        lines += ["No arguments.", ""]
    return lines


def _anchor(name: str) -> str:
    """The anchor MkDocs' table of contents gives the heading ``## `name` ``."""
    return re.sub(r"[^\w\s-]", "", name).strip().lower().replace(" ", "-")


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    """The command-line reference page: every subcommand of ``parser`` with every option.

    Args:
        parser: the CLI's parser, ``backend.cli.main.build_parser()``.

    Returns:
        Markdown: a title, a list of the commands linking to their sections, and one section per
        command with its usage and a table of its arguments (help, default, choices).
    """
    found = list(commands(parser))
    lines = [
        "# Command-line reference",
        "",
        "<!-- Generated by backend.cli.docs.cli_markdown from backend.cli.main.build_parser(); do not edit. -->",
        "",
        f"Every subcommand of `{parser.prog}` with every option, as `--help` shows it: this page is generated from the",
        "argument parser when the docs are built, so it lists exactly what the command line accepts. The `chunk`",
        "flags named after chunker parameters (`--chunk_size`…) come from the chunker registry.",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    lines += [f"| [`{c.name}`](#{_anchor(c.name)}) | {_cell(c.help)} |" for c in found]
    lines.append("")
    for command in found:
        lines += _section(command)
    return "\n".join(lines)


def environment_markdown(variables: Sequence[EnvVar] = ENVIRONMENT) -> str:
    """The environment-variable reference page: one table row per variable of ``variables``.

    Args:
        variables: the registry, :data:`backend.config.ENVIRONMENT` by default.

    Returns:
        Markdown: a title, how the variables are read, and the table (variable, default, meaning).
    """
    lines = [
        "# Environment variables",
        "",
        "<!-- Generated by backend.cli.docs.environment_markdown from backend.config.ENVIRONMENT; do not edit. -->",
        "",
        "Every variable is read in `backend/config.py` (one typed function each, read at call time), which",
        "declares each one in its `ENVIRONMENT` registry: this table is generated from it. A blank variable",
        "counts as unset; a number that does not parse or is out of range falls back to its default, except a",
        "port or a device, which are errors.",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
    ]
    lines += [f"| `{v.name}` | {v.default} | {v.help} |" for v in variables]
    lines.append("")
    return "\n".join(lines)


def documented_options(markdown: str) -> dict[str, set[str]]:
    """The option strings each command's section of a CLI page lists in its table's first column.

    Only the first cell of each table row counts, so an option mentioned in another's help does
    not pass for documented.

    Returns:
        ``{"chunk": {"--chunker", …}, "cache info": set(), …}`` for every ``## `command` `` heading.
    """
    found: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = found.setdefault(heading["path"], set())
        elif current is not None and line.startswith("| ") and not line.startswith("| ---"):
            first = line[2:].split(" | ", 1)[0]
            current.update(_OPTION.findall(first))
    return found


def missing_options(parser: argparse.ArgumentParser, markdown: str) -> dict[str, set[str]]:
    """What a CLI page lacks against the parser: per command, the option strings it does not list.

    A command with no section at all counts with every option (and ``"(no section)"`` when it has none).

    Returns:
        Only the commands that lack something; ``{}`` when the page is complete.
    """
    documented = documented_options(markdown)
    missing: dict[str, set[str]] = {}
    for command in commands(parser):
        if command.name not in documented:
            missing[command.name] = _options(command.parser) or {"(no section)"}
            continue
        lacking = _options(command.parser) - documented[command.name]
        if lacking:
            missing[command.name] = lacking
    return missing


def missing_variables(markdown: str, variables: Sequence[EnvVar] = ENVIRONMENT) -> set[str]:
    """The names of ``variables`` that have no row of their own in an environment page's table."""
    rows = {m["name"] for m in map(_VARIABLE_ROW.match, markdown.splitlines()) if m}
    return {v.name for v in variables} - rows
