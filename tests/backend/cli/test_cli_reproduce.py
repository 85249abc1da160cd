"""``python -m backend reproduce chroma``: one-line errors, Ctrl-C keeps the finished rows, the rerun resumes."""

from __future__ import annotations

import json

import backend.lab.reproduce as lab_reproduce
from tests.support.chroma_folder import chroma_folder
from tests.support.cli import run_main

ROWS = "tokentext-250-0,recursive-200-0"


def test_a_missing_folder_is_one_line_and_exit_1(tmp_path):
    done = run_main("reproduce", "chroma", "--data", str(tmp_path / "nowhere"))
    assert done.returncode == 1
    err = done.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and "no such folder" in err and "Traceback" not in err


def test_a_folder_without_corpora_is_exit_1(tmp_path):
    folder = chroma_folder(tmp_path / "set")
    for f in (folder / "corpora").iterdir():
        f.unlink()
    (folder / "corpora").rmdir()
    done = run_main("reproduce", "chroma", "--data", str(folder))
    assert done.returncode == 1 and "corpora" in done.stderr.decode() and len(done.stderr.splitlines()) == 1


def test_a_bad_row_id_is_exit_2_listing_the_ids(tmp_path):
    done = run_main("reproduce", "chroma", "--data", str(tmp_path), "--rows", "recursive-250-125,nope")
    assert done.returncode == 2
    err = done.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and "'nope'" in err and "cluster-200" in err and "tokentext-250-0" in err


def test_ctrl_c_keeps_the_finished_rows_and_the_rerun_resumes(tmp_path, monkeypatch):
    folder, out = chroma_folder(tmp_path / "set"), tmp_path / "rows"
    real = lab_reproduce.evaluate
    calls = []

    def interrupted_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lab_reproduce, "evaluate", interrupted_second)
    done = run_main("reproduce", "chroma", "--data", str(folder), "--out", str(out), "--rows", ROWS)
    assert done.returncode == 130 and done.stderr.decode().strip().endswith("interrupted")
    assert [f.name.split("-")[0] for f in out.glob("*.json")] == ["tokentext"]
    monkeypatch.setattr(lab_reproduce, "evaluate", real)
    done = run_main("reproduce", "chroma", "--data", str(folder), "--out", str(out), "--rows", ROWS, "--json")
    assert done.returncode == 0, done.stderr
    assert "resumed: 1 of 2 rows were already done" in done.stderr.decode()
    doc = json.loads(done.stdout)
    assert [(r["id"], r["reused"]) for r in doc["rows"]] == [("tokentext-250-0", True), ("recursive-200-0", False)]
    assert doc["question_set"]["path"] == str(folder / "questions_df.csv") and doc["embedder"]["name"]
    assert doc["rows"][1]["metrics"]["recall"]["paper"] == 75.7
