"""The docs: the site builds strict, the generated references match the code, and the README stays a landing page.

The site is built once per run (``mkdocs build --strict`` into a temporary folder); its hook writes
``docs/reference/cli.md`` and ``docs/reference/environment.md`` from ``backend.cli.docs``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cli.docs import (
    cli_markdown,
    commands,
    documented_options,
    environment_markdown,
    missing_options,
    missing_variables,
)
from backend.cli.main import build_parser
from backend.config import ENVIRONMENT
from tests.conftest import ROOT

README = ROOT / "README.md"
QUICK_START = (
    "bash scripts/app.sh     # installs everything into .venv (first run only) and starts the app on http://localhost:8501",
    "bash scripts/test.sh    # installs everything (and Chromium for the browser test) and runs the whole test suite",
)
PICTURES = ("compare.png", "meta-chunking.png", "summary.png", "tune.png")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs built once with ``mkdocs build --strict``: the site's folder (the build's output is in the failure)."""
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def test_the_site_builds_strict_with_the_generated_references(site: Path, parser):
    # The hook wrote exactly what the pure functions return, and the site shows it.
    assert (ROOT / "docs/reference/cli.md").read_text(encoding="utf-8") == cli_markdown(parser)
    assert (ROOT / "docs/reference/environment.md").read_text(encoding="utf-8") == environment_markdown()
    cli_page = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    assert "--chunk_size" in cli_page and "--match-length" in cli_page
    assert "CHUNKLAB_TORCH_THREADS" in (site / "reference/environment/index.html").read_text(encoding="utf-8")
    for picture in PICTURES:
        assert (site / "assets/screenshots" / picture).stat().st_size > 10_000


def test_the_generator_writes_each_argument_with_its_help_default_and_choices():
    tool = argparse.ArgumentParser(prog="tool")
    cut = tool.add_subparsers(dest="command").add_parser("cut", help="cut a document")
    cut.add_argument("file", help="the document")
    cut.add_argument("--size", type=int, default=200, help="tokens per chunk (default %(default)s)")
    cut.add_argument("--rule", choices=["paper", "reference"], default="paper")
    cut.add_argument("--config", action="append", required=True, metavar="SPEC", help="a configuration | <one>")
    cut.add_argument("--no-cache", action="store_true", help="skip the cache")
    cut.add_argument("--secret", help=argparse.SUPPRESS)
    markdown = cli_markdown(tool)
    assert markdown[markdown.index("## `cut`"):].splitlines() == [
        "## `cut`", "", "Cut a document.", "",
        "```text", "tool cut [-h] [--size SIZE] [--rule {paper,reference}] --config SPEC [--no-cache] file", "```", "",
        "| argument | help | default | choices |",
        "| --- | --- | --- | --- |",
        "| `FILE` | the document |  |  |",
        "| `--size` SIZE | tokens per chunk (default 200) | `200` |  |",
        "| `--rule` |  | `paper` | `paper`, `reference` |",
        "| `--config` SPEC | a configuration \\| &lt;one&gt; *(required, repeatable)* |  |  |",
        "| `--no-cache` | skip the cache *(flag)* |  |  |",
    ]
    assert missing_options(tool, markdown) == {}


def test_the_cli_reference_lists_every_option_of_every_subcommand(parser):
    names = [c.name for c in commands(parser)]
    assert {"chunk", "compare", "ppl", "metrics", "report", "edit", "corpus", "cache info", "questions generate",
            "router train"} <= set(names)
    markdown = cli_markdown(parser)
    assert missing_options(parser, markdown) == {}
    # The chunk flags come from the chunker registry, the model flags from the shared helpers.
    assert {"--chunker", "--param", "--chunk_size", "--threshold", "--lm", "--embedder"} <= documented_options(markdown)["chunk"]


def test_the_check_flags_a_page_that_lacks_one_option(parser):
    markdown = cli_markdown(parser)
    chunk_size_row = next(line for line in markdown.splitlines() if line.startswith("| `--chunk_size`"))
    assert missing_options(parser, markdown.replace(chunk_size_row + "\n", "")) == {"chunk": {"--chunk_size"}}
    # An option named only in another one's help does not pass for documented.
    doctored = markdown.replace(chunk_size_row, "| `--chunker` CHUNKER | see --chunk_size |  |  |")
    assert missing_options(parser, doctored) == {"chunk": {"--chunk_size"}}


def test_the_check_flags_a_page_that_lacks_a_whole_command(parser):
    markdown = cli_markdown(parser)
    start = markdown.index("## `corpus`")
    end = markdown.find("\n## `", start + 1)  # the commands after it (tune) stay on the page
    without = markdown[:start] + (markdown[end + 1:] if end >= 0 else "")
    assert set(missing_options(parser, without)) == {"corpus"}
    assert "--engine" in missing_options(parser, without)["corpus"]


def test_the_environment_reference_has_a_row_for_every_registered_variable():
    markdown = environment_markdown()
    assert missing_variables(markdown) == set()
    assert len(ENVIRONMENT) == len({v.name for v in ENVIRONMENT})
    doctored = "\n".join(line for line in markdown.splitlines() if not line.startswith("| `CHROMA_PORT` |"))
    assert missing_variables(doctored) == {"CHROMA_PORT"}


def test_the_readme_is_a_landing_page():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 250
    for command in QUICK_START:
        assert command in lines
        assert command in (ROOT / "docs/getting-started.md").read_text(encoding="utf-8").splitlines()
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert sorted(Path(p).name for p in pictures) == sorted(PICTURES)
    for picture in pictures:
        assert (ROOT / picture).is_file(), picture
        assert (ROOT / picture).stat().st_size < 400 * 1024, picture


def test_every_page_the_readme_links_to_exists(site: Path):
    # After the build, so that the generated reference pages are there too.
    links = re.findall(r"(?<!!)\[[^\]]*\]\(([^)\s#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert local and all((ROOT / link).exists() for link in local), [link for link in local if not (ROOT / link).exists()]
