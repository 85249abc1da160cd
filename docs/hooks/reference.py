"""MkDocs hook: write the generated reference pages before every build (``hooks:`` in ``mkdocs.yml``).

``docs/reference/cli.md`` comes from the CLI's argument parser and ``docs/reference/environment.md``
from ``backend.config.ENVIRONMENT``, through the pure functions of ``backend.cli.docs``;
``docs/reference/changelog.md`` is the repository's ``CHANGELOG.md``. The files are
ignored by git: they exist only as the code's output, so the docs cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # mkdocs runs from anywhere; backend is imported from this checkout
    sys.path.insert(0, str(ROOT))

from backend.cli.docs import cli_markdown, environment_markdown  # noqa: E402
from backend.cli.main import build_parser  # noqa: E402

REFERENCE = ROOT / "docs" / "reference"
CHANGELOG = ROOT / "CHANGELOG.md"


def write_reference(folder: Path = REFERENCE) -> list[Path]:
    """Write ``cli.md``, ``environment.md`` and ``changelog.md`` into ``folder`` (only when their text changed); return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = {
        "cli.md": cli_markdown(build_parser()),
        "environment.md": environment_markdown(),
        "changelog.md": CHANGELOG.read_text(encoding="utf-8"),  # the repository's CHANGELOG.md, on the site
    }
    paths = []
    for name, text in pages.items():
        path = folder / name
        # An unchanged file is left alone, so `mkdocs serve` does not rebuild forever on its own output.
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def on_pre_build(config, **kwargs) -> None:
    """MkDocs' first event of a build: the generated pages are in place before the files are collected."""
    write_reference()
