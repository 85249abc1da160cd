"""``import backend`` stays light: no torch, transformers, chromadb or streamlit."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

HEAVY = ("torch", "transformers", "chromadb", "streamlit", "sentence_transformers", "pypdfium2", "docx", "bs4")


def test_import_backend_loads_no_heavy_module():
    code = (
        "import sys, backend, backend.chunkers, backend.cli.main, backend.loaders, backend.text.segment, backend.metrics.stats\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout.strip()}"


def test_backend_never_imports_streamlit():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "backend").rglob("*.py")
        if "import streamlit" in p.read_text(encoding="utf-8") or "from streamlit" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
