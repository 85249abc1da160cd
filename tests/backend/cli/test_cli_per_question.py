"""``python -m backend eval --per-question FILE``: the Benchmark page's per-question export, from the command line."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from backend.chunkers import make_chunker
from backend.lab.benchmark import PER_QUESTION_COLUMNS, ROUTING_COLUMNS, per_question
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import load_sample_question_set
from backend.retrieval.store import ChunkStore
from tests.support.cli import run_main

EVAL = ["eval", "--questions", "sample:narrative", "--chunker", "recursive", "--param", "chunk_size=200"]


def _cli(*args: str, data_dir) -> subprocess.CompletedProcess:
    # In-process (one MiniLM load for the file); stdout and stderr as text, as the tests read them.
    proc = run_main(*args, data_dir=data_dir)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8"),
                                       proc.stderr.decode("utf-8"))


def test_eval_writes_the_per_question_table_the_page_downloads(tmp_path) -> None:
    out_csv, out_json = tmp_path / "q.csv", tmp_path / "q.json"
    plain = _cli(*EVAL, "--json", data_dir=tmp_path / "data")
    proc = _cli(*EVAL, "--json", "--per-question", str(out_csv), data_dir=tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    scores = ("recall_mean", "precision_mean", "precision_omega_mean", "iou_mean", "chunks")
    assert [json.loads(proc.stdout)[k] for k in scores] == [json.loads(plain.stdout)[k] for k in scores]  # stdout as before
    assert f"per-question results: {out_csv}" in proc.stderr
    with out_csv.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(PER_QUESTION_COLUMNS)  # no routed configuration: no routing columns
    assert len(rows) == 12 and {r["config"] for r in rows} == {"A"} and {r["omega_units"] for r in rows} == {"chunks"}

    # The same rows as the backend's export of the same benchmark.
    config = make_chunker("recursive", {"chunk_size": 200}).config
    bm = evaluate(load_sample_question_set("narrative"), [config], store=ChunkStore(path=tmp_path / "data" / "chroma"))
    assert rows == [{k: "" if v is None else str(v) for k, v in r.items()} for r in per_question(bm, ["A"]).rows]

    proc = _cli(*EVAL, "--chunker", "mog", "--param", "router=oracle", "--per-question", str(out_json),
                data_dir=tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out_json.read_text(encoding="utf-8"))
    assert list(rows[0]) == list(PER_QUESTION_COLUMNS + ROUTING_COLUMNS) and len(rows) == 12
    assert all(r["omega_units"] == "units" and r["retrieved_levels"] for r in rows)


@pytest.mark.parametrize("name", ["q.txt", "q"])
def test_a_per_question_file_of_another_kind_is_refused_before_anything_runs(tmp_path, name) -> None:
    proc = _cli(*EVAL, "--per-question", str(tmp_path / name), data_dir=tmp_path / "data")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].endswith("the file must end in .csv or .json")
    assert not (tmp_path / "data" / "chroma").exists()
