"""``python -m backend report``: the one-file report end to end on a bundled sample, sessions, and its exit codes.

Run in process (:func:`backend.cli.main.main`), like a subprocess would but sharing the loaded
embedder between tests. The end-to-end run uses ``--no-quality``: scoring every pair of chunks
with the language model takes minutes on a CPU (the quality figures are covered by
``tests/backend/report/test_report_html.py`` with a stand-in scorer's tables).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from backend.cli.main import main  # noqa: E402
from backend.report.html import SECTIONS  # noqa: E402
from backend.samples import load_sample  # noqa: E402
from tests.backend.report.test_report_html import parse  # noqa: E402

CONFIGS = ["--config", "recursive chunk_size=400", "--config", "fixed_token chunk_size=400"]


class Sections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.figures: dict[str, int] = {}
        self.summary = ""
        self._current = ""
        self._in_summary = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self._current = attrs.get("id") or ""
            self.sections.append(self._current)
        elif tag == "div" and (attrs.get("id") or "").startswith("figure-"):
            self.figures[self._current] = self.figures.get(self._current, 0) + 1
        elif tag == "script" and attrs.get("id") == "summary-data":
            self._in_summary = True

    def handle_endtag(self, tag):
        self._in_summary = self._in_summary and tag != "script"

    def handle_data(self, data):
        if self._in_summary:
            self.summary += data


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_report_on_a_sample_with_retrieval(capsys, tmp_path: Path):
    out_file = tmp_path / "report.html"
    code, out, err = run(capsys, "report", "sample:technical", *CONFIGS, "--questions", "sample:technical",
                         "--no-quality", "--out", str(out_file))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == str(out_file) and len(lines) == 2
    doc = load_sample("technical")
    assert doc.id in lines[1] and "2 configurations" in lines[1]
    page = out_file.read_text(encoding="utf-8")
    parsed = Sections()
    parsed.feed(page)
    assert parsed.sections == [sid for sid, _ in SECTIONS]
    assert parsed.figures["boundaries"] >= 3  # the strip and the two agreement heat maps
    assert parsed.figures["sizes"] == 2
    assert parsed.figures["retrieval"] >= 3  # bars, IoU and recall per question, what was retrieved where
    data = json.loads(parsed.summary)
    assert data["doc_id"] == doc.id
    rows = {row["tag"]: row for row in data["rows"]}
    assert set(rows) == {"A", "B"}
    assert rows["A"]["config"]["name"] == "recursive" and rows["B"]["config"]["name"] == "fixed_token"
    assert all(row["values"]["recall"] is not None and row["values"]["iou"] is not None for row in rows.values())
    n = data["retrieval"]["questions"]
    for row in rows.values():  # each retrieval mean with its interval over the questions on this document
        assert set(row["intervals"]) == {"recall", "precision", "iou", "precision_omega"}
        assert row["intervals"]["iou"]["n"] == n and row["intervals"]["iou"]["mean"] == row["values"]["iou"]
    assert set(data["paired"]) == {"recall", "precision", "iou", "precision_omega"}
    assert data["paired"]["iou"]["questions"] == n and (data["best"]["iou"] is not None) == (
        len(data["paired"]["iou"]["leaders"]) == 1)
    external = [(t, a) for t, a in parse(page).tags if any((a.get(k) or "").startswith("http") for k in ("src", "href"))]
    assert external == []


def test_report_on_another_document_keeps_the_sample_sets_numbers_apart(capsys, tmp_path: Path):
    """``--questions sample:narrative`` on a PDF that is not the narrative: no IoU or recall sentence about the PDF;
    a titled section names the corpus the numbers come from."""
    from backend.report.html import ELSEWHERE_SECTION
    from backend.samples import get_sample

    pdf = get_sample("technical-pdf").path
    out_file = tmp_path / "report.html"
    code, out, err = run(capsys, "report", str(pdf), *CONFIGS, "--questions", "sample:narrative", "--no-quality",
                         "--out", str(out_file))
    assert code == 0, err
    heading = "Retrieval on the bundled English narrative set, 1 corpus — not this document"
    assert out.splitlines()[1].endswith(f"; {heading}")
    page = out_file.read_text(encoding="utf-8")
    parsed = Sections()
    parsed.feed(page)
    assert parsed.sections == [sid for sid, _ in SECTIONS] + [ELSEWHERE_SECTION]
    assert parsed.figures[ELSEWHERE_SECTION] >= 3 and "retrieval" not in parsed.figures
    text = "".join(parse(page).text)
    verdict = text.split("Verdict", 1)[1].split("The numbers", 1)[0]
    assert "IoU (" not in verdict and "recall (" not in verdict
    assert "no benchmark on questions about this document" in verdict
    assert f"<h2>{heading}</h2>" in page
    data = json.loads(parsed.summary)
    assert all(row["values"][m] is None for row in data["rows"] for m in ("recall", "precision", "iou"))
    assert data["retrieval"] is None and data["elsewhere"]["scope"]["corpora"] == ["narrative_clockmaker"]
    assert all(row["values"]["iou"] is not None for row in data["elsewhere"]["rows"])


@pytest.mark.parametrize(
    "args, needle",
    [
        (["sample:technical", "--config", "nope", "--out", "x.html"], "nope"),
        (["sample:technical", "--config", "recursive chunk_size=-3", "--out", "x.html"], "chunk_size"),
        (["sample:technical", "--out", "x.html"], "--config"),
        (["--config", "recursive", "--out", "x.html"], "document"),
        (["sample:technical", "--config", "recursive", "--questions", "sample:technical", "--corpora", "d",
          "--out", "x.html"], "--corpora"),
    ],
)
def test_bad_arguments_exit_2(capsys, tmp_path, args, needle):
    code, out, err = run(capsys, "report", *args)
    assert code == 2 and out == ""
    assert needle.lower() in one_line(err).lower()
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("args", [["--retrieve", "0"], ["--K", "nan"], ["--window", "0"]])
def test_bad_flag_values_exit_2(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(["report", "sample:technical", "--config", "recursive", *args, "--out", "x.html"])
    assert e.value.code == 2
    assert one_line(capsys.readouterr().err)


def test_a_missing_file_exits_1(capsys, tmp_path):
    out_file = tmp_path / "report.html"
    code, out, err = run(capsys, "report", str(tmp_path / "missing.txt"), "--config", "recursive",
                         "--out", str(out_file))
    assert code == 1 and out == ""
    assert "no such file" in one_line(err)
    assert not out_file.exists()


def _save(tmp_path: Path, doc, sample: str | None, sha: str | None = None) -> Path:
    session = pytest.importorskip("backend.report.session")
    from backend.chunking import ChunkerConfig

    ref = session.DocRef(sample=sample, name=doc.source, sha=sha or doc.id)
    configs = [("A", ChunkerConfig.make("recursive", {"chunk_size": 300})),
               ("C", ChunkerConfig.make("paragraph", {"chunk_size": 300}))]
    # What the app saves: settings by page (quality.K…), models by role.
    settings = {"quality": {"K": 0.7, "window": 2}, "benchmark": {"source": "Bundled sample set", "sample": "technical"}}
    return session.save_session(session.Session.make(ref, configs, settings=settings), tmp_path / "s.json")


def test_a_session_on_a_sample_needs_no_file(capsys, tmp_path):
    doc = load_sample("technical")
    path = _save(tmp_path, doc, "technical")
    out_file = tmp_path / "report.html"
    code, out, err = run(capsys, "report", "--session", str(path), "--no-quality", "--out", str(out_file))
    assert code == 0, err
    parsed = Sections()
    parsed.feed(out_file.read_text(encoding="utf-8"))
    data = json.loads(parsed.summary)
    assert data["doc_id"] == doc.id
    assert [(r["tag"], r["config"]["name"]) for r in data["rows"]] == [("A", "recursive"), ("C", "paragraph")]
    assert data["settings"]["K"] == 0.7 and data["settings"]["window"] == 2
    assert data["settings"]["question_set"] == "sample:technical"  # the session's benchmark ran on it


def test_a_session_whose_document_hash_differs_exits_1(capsys, tmp_path):
    other = tmp_path / "doc.txt"
    other.write_text("Not the session's document. It has other words in it.\n", encoding="utf-8")
    doc = load_sample("technical")
    path = _save(tmp_path, doc, None, sha="0123456789abcdef")
    out_file = tmp_path / "report.html"
    code, out, err = run(capsys, "report", str(other), "--session", str(path), "--out", str(out_file))
    assert code == 1 and out == ""
    assert "0123456789abcdef" in one_line(err)
    assert not out_file.exists()
