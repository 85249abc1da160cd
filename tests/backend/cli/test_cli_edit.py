"""``python -m backend edit``: an edited copy against its base, as the Edit page's panel shows it, and its errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig
from backend.lab.edit_metrics import edit_stats
from backend.text.document import Document
from tests.support.cli import run_main

TEXT = " ".join(f"Sentence number {i} tells about topic {i % 5} and more." for i in range(12))


def run_cli(*args: str, data: Path) -> subprocess.CompletedProcess:
    # In-process: the file loads SmolLM2 and MiniLM once, not once a call.
    return run_main("edit", *args, data_dir=data)


@pytest.fixture()
def doc_file(tmp_path: Path) -> Path:
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def _one_line(proc: subprocess.CompletedProcess, code: int) -> str:
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == code, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_statistics_of_the_copy_against_its_base(doc_file, tmp_path) -> None:
    proc = run_cli(str(doc_file), "--base", "recursive chunk_size=40", "--edits", "+200", "--json",
                   data=tmp_path / "data")
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    doc = Document.from_text(TEXT, source="doc.txt")
    base = run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 40}))
    assert out["edits"] == "+200" and out["base"] == "recursive chunk_overlap=0 chunk_size=40"
    rows = out["stats"]["rows"]
    assert [(r["metric"], r["base"], r["edited"]) for r in rows[:1]] == [("chunks", len(base), len(base) + 1)]
    assert out["stats"]["summary"].startswith(f"doc.txt: chunks {len(base)} → {len(base) + 1} · mean tokens ")
    assert "quality" not in out and "retrieval" not in out
    text = run_cli(str(doc_file), "--base", "recursive chunk_size=40", "--edits", "+200", data=tmp_path / "data")
    assert text.stdout.decode().splitlines()[0] == out["stats"]["summary"]
    assert len(edit_stats(doc, base, base).rows) == len(rows)


def test_bc_of_both_scores_the_base_then_only_the_edit(doc_file, tmp_path) -> None:
    data = tmp_path / "data"
    first = run_cli(str(doc_file), "--base", "recursive chunk_size=40", "--metrics", "bc", "--json", data=data)
    assert first.returncode == 0, first.stderr.decode()
    assert "scoring: " in first.stderr.decode()
    again = run_cli(str(doc_file), "--base", "recursive chunk_size=40", "--edits", "+200", "--metrics", "bc", "--json",
                    data=data)
    assert again.returncode == 0, again.stderr.decode()
    quality = json.loads(again.stdout)["quality"]
    assert quality["changed_pairs"] == 5
    assert "scoring: 5 pairs" in again.stderr.decode()  # the base's pairs came from the cache
    bc = quality["metrics"]["bc"]
    assert bc["base"]["pairs_scored"] == bc["base"]["pairs_total"] and bc["edited"]["pairs_scored"] == bc["edited"][
        "pairs_total"]
    assert quality["line"] == f"BC {bc['base']['estimate']:.2f} → {bc['edited']['estimate']:.2f}"


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--base", "recursive chunk_size=x"], 2, "error: manual: base 'recursive chunk_size=x': recursive: chunk_size must be int"),
    (["--base", "manual"], 2, "error: manual: the base is an edited copy itself"),
    (["--base", "recursive", "--edits", "12"], 2, "error: manual: edit '12' must be +OFFSET"),
    (["--base", "recursive", "--metrics", "xx"], 2, "argument --metrics: choose from bc,cs,ds"),
    (["--base", "recursive", "--corpora", "x"], 2, "error: --corpora needs --questions"),
    (["--base", "recursive", "--edits", "+99999999"], 2,
     "error: manual: edit +99999999 is outside the document: offsets go from 0 to 577"),
    (["--base", "recursive", "--edits", "+40,-578"], 2,
     "error: manual: edit -578 is outside the document: offsets go from 0 to 577"),
])
def test_bad_arguments_exit_2_with_one_line(doc_file, tmp_path, args, code, needle) -> None:
    assert needle in _one_line(run_cli(str(doc_file), *args, data=tmp_path / "data"), code)


def test_bad_input_exits_1_with_one_line(tmp_path) -> None:
    line = _one_line(run_cli(str(tmp_path / "missing.txt"), "--base", "recursive", data=tmp_path / "data"), 1)
    assert line.endswith("missing.txt: no such file")


def test_retrieval_on_a_question_set_embeds_only_the_new_chunks(tmp_path) -> None:
    proc = run_cli("sample:narrative", "--base", "recursive chunk_size=200", "--edits", "+1500",
                   "--questions", "sample:narrative", data=tmp_path / "data")
    assert proc.returncode == 0 and "already a cut" not in proc.stderr.decode(), proc.stderr.decode()
    assert proc.stdout.decode().splitlines()[0].endswith("(1 cut added)")
    last = proc.stdout.decode().splitlines()[-1]
    assert last.startswith("sample:narrative (12 questions): IoU ") and " · recall " in last
    assert last.endswith(" (the edited copy's index embedded 2 chunks)"), last
    off = run_cli(str(_write(tmp_path, TEXT)), "--base", "recursive chunk_size=40", "--questions", "sample:narrative",
                  data=tmp_path / "data")
    assert off.returncode == 0, off.stderr.decode()
    assert off.stdout.decode().splitlines()[-1] == (
        "The question set sample:narrative (12 questions) is not on doc.txt: the edits change none of its answers")


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "doc.txt"
    p.write_text(text, encoding="utf-8")
    return p


def test_an_edit_that_changes_nothing_is_named_on_stderr(tmp_path) -> None:
    proc = run_cli("sample:narrative", "--base", "recursive chunk_size=200", "--edits", "+2000", data=tmp_path / "data")
    assert proc.returncode == 0
    assert proc.stderr.decode().splitlines() == ["edit +2000: already a cut (at 2016)"]
    assert proc.stdout.decode().splitlines()[0].endswith("chunks 25 → 25 · mean tokens 154.0 → 154.0 · min tokens "
                                                         "26 → 26 · max tokens 195 → 195 (no edits)")


def test_the_summary_counts_what_the_edits_did(doc_file, tmp_path) -> None:
    # +200 and +205 snap to the same sentence start: one cut added, the other named on stderr
    proc = run_cli(str(doc_file), "--base", "recursive chunk_size=200", "--edits", "+200,+205", data=tmp_path / "data")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr.decode().splitlines() == ["edit +205: already a cut (at 192)"]
    assert proc.stdout.decode().splitlines()[0].endswith("(1 cut added)")
