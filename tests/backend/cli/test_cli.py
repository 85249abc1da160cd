"""The CLI: JSON outputs, exact text, chunk records, and one-line errors with the right exit codes.

Most commands run in this process (``main_cli``): what they check is what the CLI prints and returns, and
a Python start-up per command cost more than the command. As a process would, stderr there holds the log
records at WARNING and above and the warnings too. The registry listing, the exact text on stdout and a
directory's error still run as ``python -m backend``, for the module entry, the bytes and the exit code.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.cli import run_main


def run_cli(*args: str, input_bytes: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "backend", *args], cwd=ROOT, capture_output=True, input=input_bytes, timeout=300
    )


@pytest.fixture()
def main_cli(caplog):
    """``run_cli`` in this process: ``backend.cli.main.main`` with its exit code, stdout and stderr."""

    def run(*args: str) -> subprocess.CompletedProcess:
        caplog.clear()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            proc = run_main(*args)
        err = proc.stderr.decode("utf-8")
        err += "".join(f"{r.levelname}:{r.name}:{r.getMessage()}\n" for r in caplog.records
                       if r.levelno >= logging.WARNING)
        err += "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in seen
                       if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)))
        return subprocess.CompletedProcess(list(args), proc.returncode, proc.stdout, err.encode("utf-8"))

    return run


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, needle: str = "") -> str:
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == code, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert needle.lower() in lines[0].lower(), lines[0]
    return lines[0]


@pytest.fixture()
def sample_txt(tmp_path: Path) -> Path:
    p = tmp_path / "doc.txt"
    body = "\n\n".join(
        f"Paragraph {i}. Dr. Smith paid $3.50 for item {i}, e.g. a pen. Was it worth it? Yes!" for i in range(40)
    )
    p.write_text(body + "\n\n中文句子在这里。第二句！第三句？", encoding="utf-8")
    return p


def test_chunkers_lists_registry_as_json():
    proc = run_cli("chunkers")
    assert proc.returncode == 0
    specs = json.loads(proc.stdout)
    names = {s["name"] for s in specs}
    assert {"fixed_token", "recursive", "sentence", "paragraph"} <= names
    recursive = next(s for s in specs if s["name"] == "recursive")
    assert [p["name"] for p in recursive["params"]] == ["chunk_size", "chunk_overlap"]


def test_text_prints_exactly_the_indexed_string(sample_txt: Path):
    from backend.loaders import load_document

    proc = run_cli("text", str(sample_txt))
    assert proc.returncode == 0
    assert proc.stdout.decode("utf-8") == load_document(sample_txt).text


@pytest.mark.parametrize(
    "args",
    [
        ["--chunker", "recursive", "--chunk_size", "40"],
        ["--chunker", "fixed_token", "--param", "chunk_size=30", "--param", "chunk_overlap=10"],
        ["--chunker", "sentence", "--chunk_size", "25", "--tokenizer", "words"],
        ["--chunker", "paragraph", "--tokenizer", "chars", "--chunk_size", "120"],
    ],
)
def test_chunk_prints_exact_records(sample_txt: Path, args, main_cli):
    text = main_cli("text", str(sample_txt)).stdout.decode("utf-8")
    proc = main_cli("chunk", str(sample_txt), *args)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert records, "no chunks"
    for i, r in enumerate(records):
        assert set(r) == {"index", "start", "end", "text", "tokens"}
        assert r["index"] == i
        assert text[r["start"] : r["end"]] == r["text"]


def test_compare_writes_exports(sample_txt: Path, tmp_path: Path, main_cli):
    out = tmp_path / "out"
    proc = main_cli(
        "compare", str(sample_txt), "--config", "recursive chunk_size=50", "--config",
        "fixed_token chunk_size=60 chunk_overlap=30", "--out", str(out),
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["chunker"] for r in rows] == ["recursive", "fixed_token"]
    assert rows[1]["overlap_chars"] > 0 and rows[0]["overlap_chars"] == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "01-recursive.csv", "01-recursive.jsonl", "02-fixed_token.csv", "02-fixed_token.jsonl",
    ]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["chunk", "{f}", "--chunker", "nope"], "unknown chunker 'nope'"),
        (["chunk", "{f}", "--chunker", "recursive", "--chunk_size", "abc"], "chunk_size must be int"),
        (["chunk", "{f}", "--chunker", "recursive", "--chunk_size", "10", "--chunk_overlap", "20"], "chunk_overlap (20)"),
        (["chunk", "{f}", "--chunker", "paragraph", "--chunk_overlap", "5"], "unknown parameter"),
        (["chunk", "{f}", "--chunker", "recursive", "--param", "oops"], "key=value"),
        (["chunk", "{f}", "--chunker", "recursive", "--tokenizer", "gpt9"], "invalid choice"),
        (["chunk", "{f}"], "required"),
        (["frobnicate"], "invalid choice"),
        (["compare", "{f}", "--config", "nope chunk_size=3"], "unknown chunker"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(sample_txt: Path, args, needle, main_cli):
    proc = main_cli(*[a.replace("{f}", str(sample_txt)) for a in args])
    assert_one_line_error(proc, 2, needle)


def test_bad_files_exit_1_with_one_line(tmp_path: Path, main_cli):
    cases = {
        "missing.txt": None,
        "empty.txt": b"",
        "binary.txt": bytes(range(256)) * 20,
        "x.xyz": b"hello",
        "broken.pdf": b"%PDF-1.7\n1 0 obj << /Type /Catalog",
        "broken.docx": b"PK\x03\x04 not really a zip",
    }
    for name, data in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        for cmd in (["text", str(path)], ["chunk", str(path), "--chunker", "recursive"]):
            line = assert_one_line_error(main_cli(*cmd), 1)
            assert line.startswith("error: "), line


def test_a_truncated_pdf_names_its_missing_marker_once(tmp_path: Path, main_cli):
    # PDFs spell the marker "%%EOF": the message prints it as written there, once, not as an escape.
    path = tmp_path / "cut.pdf"
    path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n")
    line = assert_one_line_error(main_cli("text", str(path)), 1)
    assert line == (
        "error: 'cut.pdf' is truncated: it lacks the end-of-file marker every complete PDF ends with (\"%%EOF\"); "
        "upload the complete file"
    )


def test_directory_is_a_bad_input(tmp_path: Path):
    assert_one_line_error(run_cli("text", str(tmp_path)), 1, "directory")


def test_sample_documents_by_name(main_cli):
    listed = json.loads(main_cli("samples").stdout)
    assert len(listed) >= 3
    proc = main_cli("chunk", f"sample:{listed[0]['name']}", "--chunker", "recursive")
    assert proc.returncode == 0 and proc.stdout.count(b"\n") > 1


def test_argument_value_types_name_what_they_expect():
    import argparse

    from backend.cli.common import finite_float, non_negative_int, positive_float, positive_int, value_type

    assert (positive_int("3"), non_negative_int("0"), positive_float("0.5"), finite_float("-2")) == (3, 0, 0.5, -2.0)
    odd = value_type(int, lambda v: v % 2 == 1, "an odd integer")
    assert odd("7") == 7
    messages = []
    for parse, raw in [(positive_int, "0"), (positive_int, "x"), (non_negative_int, "-1"), (positive_float, "inf"),
                       (finite_float, "nan"), (odd, "8")]:
        with pytest.raises(argparse.ArgumentTypeError) as info:
            parse(raw)
        messages.append(str(info.value))
    assert messages == [
        "must be a positive integer, got '0'",
        "must be a positive integer, got 'x'",
        "must be an integer >= 0, got '-1'",
        "must be a positive number, got 'inf'",
        "must be a finite number, got 'nan'",
        "must be an odd integer, got '8'",
    ]


def test_chunk_with_an_edited_copy_of_any_configuration(sample_txt: Path, main_cli):
    base = [json.loads(line) for line in main_cli("chunk", str(sample_txt), "--chunker", "recursive",
                                                 "--chunk_size", "60").stdout.decode("utf-8").splitlines()]
    cut = base[2]["start"]
    text = main_cli("text", str(sample_txt)).stdout.decode("utf-8")
    para = text.index("Was it worth it?", text.index("Paragraph 30."))
    proc = main_cli("chunk", str(sample_txt), "--chunker", "manual", "--param", "base=recursive chunk_size=60",
                   "--param", f"edits=+{para + 3},-{cut}")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert len(records) == len(base)  # one cut added, one removed
    assert records[1]["start"] == base[1]["start"] and records[1]["end"] == base[2]["end"]  # the removal joined 1 and 2
    assert any(r["start"] == para for r in records)  # the cut snapped to the sentence start
    assert all(text[r["start"]:r["end"]] == r["text"] for r in records)
    assert_one_line_error(main_cli("chunk", str(sample_txt), "--chunker", "manual", "--param", "edits=+1,oops"), 2,
                          "must be +OFFSET")
    assert_one_line_error(main_cli("chunk", str(sample_txt), "--chunker", "manual", "--param", "base=nope size=1"), 2,
                          "manual: base 'nope size=1': unknown chunker")


@pytest.mark.parametrize(("edits", "line"), [
    ("+99999999", "error: manual: edit +99999999 is outside the document: offsets go from 0 to 75"),
    ("+10,-76", "error: manual: edit -76 is outside the document: offsets go from 0 to 75"),
    ("+-5", "error: manual: edit '+-5' must be +OFFSET (add a cut) or -OFFSET (remove one)"),
])
def test_chunk_with_an_edit_outside_the_document_exits_2_with_one_line(tmp_path: Path, edits, line):
    doc = tmp_path / "doc.txt"
    doc.write_text("First sentence here. Second sentence there. Third one now. Fourth and last.", encoding="utf-8")
    proc = run_cli("chunk", str(doc), "--chunker", "manual", "--param", "base=recursive chunk_size=200",
                   "--param", f"edits={edits}")
    assert assert_one_line_error(proc, 2) == line
    assert proc.stdout == b""


def test_chunk_reports_what_the_edits_did_not_how_many_were_written(tmp_path: Path):
    doc = tmp_path / "doc.txt"
    doc.write_text("First sentence here. Second sentence there. Third one now. Fourth and last.", encoding="utf-8")
    # +60 snaps onto the cut +59 made, +75 (the end) snaps there too: one cut added
    proc = run_cli("chunk", str(doc), "--chunker", "manual", "--param", "base=recursive chunk_size=200",
                   "--param", "edits=+59,+60,+75")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode("utf-8").splitlines() == [
        "manual: recursive(chunk_overlap=0, chunk_size=200) · cl100k: 1 cut added · 2 edits changed nothing "
        "(+60: already a cut (at 59); +75: already a cut (at 59))"
    ]
