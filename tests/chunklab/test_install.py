"""The built wheel, installed with ``core`` only in a fresh virtual environment, chunks a PDF and a Markdown file.

The wheel is built from a copy of the sources (the checkout stays clean) and installed with no
package index: every dependency must come from ``.venv/wheelhouse``, the core wheels that
``scripts/setup.sh`` keeps. So a dependency missing from the core list fails here, and the
venv's ``torch`` and ``streamlit`` are not merely unimported but absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from backend.cli.main import main
from tests.conftest import ROOT
from tests.support.core_install import core_install

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]

FILES = (ROOT / "assets/samples/technical_kestrel.pdf", ROOT / "assets/samples/technical_kestrel.md")
SPECS = ("recursive chunk_size=200", "sentence chunk_size=120 chunk_overlap=30", "paragraph", "fixed_token chunk_size=64")

SCRIPT = """
import json, sys
import chunklab
out = {"version": chunklab.__version__, "runs": []}
for path in sys.argv[2:]:
    doc = chunklab.load(path)
    for spec in json.loads(sys.argv[1]):
        chunks = chunklab.Chunker(spec).chunk(doc)
        out["runs"].append({"file": path, "spec": spec, "pages": len(doc.pages),
                            "chunks": [[c.start, c.end, c.tokens, c.page, c.last_page, c.text] for c in chunks]})
heavy = ("torch", "streamlit", "transformers", "chromadb", "pandas", "plotly")
out["imported"] = sorted(m for m in heavy if m in sys.modules)
absent = []
for name in heavy:
    try:
        __import__(name)
    except ModuleNotFoundError:
        absent.append(name)
out["absent"] = sorted(absent)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def core_env(tmp_path_factory):
    """(the venv's python, the built wheel): see :func:`tests.support.core_install.core_install`."""
    try:
        return core_install(tmp_path_factory.mktemp("core"))
    except FileNotFoundError as e:
        pytest.fail(str(e))


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["CHUNKLAB_DATA_DIR"] = str(tmp)
    return env


def _cli_spans(capsysbinary, path: Path, spec: str) -> list[list]:
    name, *pairs = spec.split()
    argv = ["chunk", str(path), "--chunker", name] + [x for p in pairs for x in ("--param", p)]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsysbinary.readouterr().out.decode().splitlines()]
    return [[r["start"], r["end"], r["tokens"], r["text"]] for r in rows]


def test_core_wheel_chunks_a_pdf_and_markdown_without_torch_or_streamlit(core_env, tmp_path, capsysbinary):
    python, _ = core_env
    done = subprocess.run(
        [str(python), "-c", SCRIPT, json.dumps(SPECS), *map(str, FILES)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_env(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["imported"] == []
    assert out["absent"] == ["chromadb", "pandas", "plotly", "streamlit", "torch", "transformers"]
    assert out["version"] == VERSION
    assert {r["pages"] for r in out["runs"]} == {7, 1}  # the PDF's pages, the Markdown file's one
    for run in out["runs"]:
        # The same chunks as this checkout's CLI (full install) prints for the same file and spec.
        assert [[s, e, t, x] for s, e, t, _, _, x in run["chunks"]] == _cli_spans(capsysbinary, Path(run["file"]), run["spec"])
        if run["file"].endswith(".pdf"):
            assert run["chunks"][-1][4] == 7 and run["chunks"][0][3] == 1


def test_core_wheel_ships_the_typed_library_and_its_cli_says_what_to_install(core_env, tmp_path):
    python, wheel = core_env
    names = zipfile.ZipFile(wheel).namelist()
    assert "chunklab/py.typed" in names and "chunklab/integrations/langchain.py" in names
    done = subprocess.run(
        [str(python.parent / "chunk-lab"), "chunk", str(FILES[1]), "--chunker", "recursive"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env(tmp_path),
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: the command line needs pandas, plotly, optuna, which a core install leaves out: "
        'pip install "chunk-lab[app]" (the chunklab library works without them)'
    ]
    bad = subprocess.run(
        [str(python), "-c", "import chunklab; chunklab.load('missing.pdf')"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env(tmp_path),
    )
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "InputError: missing.pdf: no such file (to chunk a string, use chunklab.from_text)"
    )
