"""The Document page with hostile uploads: names holding HTML, Markdown or folders, and hostile text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from components.retrieval import md_text
from tests.conftest import ROOT
from tests.support.apptest import TIMEOUT
from tests.support.apptest import run as checked_run


@pytest.fixture
def at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    checked_run(app)
    return checked_run(app)  # the second run settles the widget ids (see tests/app/test_pages.py)


def _upload(at: AppTest, name: str, data: bytes) -> AppTest:
    generation = at.session_state["docpage_upload_gen"] if "docpage_upload_gen" in at.session_state else 0
    at.file_uploader(key=f"docpage_upload_{generation}").set_value((name, data, "text/plain")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _rendered(at: AppTest) -> str:
    """Everything the page hands to the browser as Markdown or HTML."""
    parts = [e.value for e in (*at.markdown, *at.html, *at.subheader, *at.caption, *at.error, *at.info)]
    return "\n".join(str(p) for p in parts)


NAME = "<img src=x onerror=alert(1)>[link](javascript:alert(2)) **bold**.txt"
TEXT = "مرحبا بالعالم. <b>not bold</b> שלום עולם.\n\nCombining e\u0301 and 👨\u200d👩\u200d👧 emoji."


def test_an_upload_name_with_html_and_markdown_is_shown_escaped(at: AppTest) -> None:
    _upload(at, NAME, TEXT.encode())
    doc = at.session_state["doc"]
    assert doc.source == NAME and not at.error
    assert at.subheader[0].value == md_text(NAME)
    rendered = _rendered(at)
    assert not re.search(r"(?<!\\)<img src=x", rendered) and "<b>not bold</b>" not in rendered
    assert "[link]" not in rendered and "**bold**" not in rendered
    assert "&lt;b&gt;not bold&lt;/b&gt;" in "".join(h.value for h in at.html)  # the text, escaped


@pytest.mark.parametrize(("name", "source"), [("../../escape.txt", "escape.txt"), ("a/b\\c.pdf.txt", "c.pdf.txt")])
def test_an_upload_name_with_folders_writes_nothing_and_keeps_its_last_part(
    at: AppTest, tmp_path: Path, name: str, source: str
) -> None:
    before = set(ROOT.parent.iterdir())
    _upload(at, name, b"Some uploaded text.")
    assert at.session_state["doc"].source == source and not at.error
    assert at.subheader[0].value == md_text(source)
    assert set(ROOT.parent.iterdir()) == before
    assert not [p for p in tmp_path.rglob("*") if p.name in (source, "escape", "c.pdf.txt")]
