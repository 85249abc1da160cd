"""The retrievers on the command line: ``chunkers``, ``eval``, ``router train``, ``index`` and ``query``."""

from __future__ import annotations

import json

import pytest

from tests.backend.cli.test_cli import assert_one_line_error
from tests.backend.cli.test_retrieval_cli import DATA
from tests.support.cli import run_main as run_cli

QS = ["--questions", str(DATA / "questions.csv"), "--corpora", str(DATA / "corpora")]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli-multi")


def test_chunkers_lists_the_retrievers(data_dir):
    proc = run_cli("chunkers", data_dir=data_dir)
    assert proc.returncode == 0
    specs = {s["name"]: s for s in json.loads(proc.stdout)}
    assert {n for n, s in specs.items() if s["family"] == "retriever"} == {"mog", "mogg", "freechunker"}
    assert "router" in {p["name"] for p in specs["mog"]["params"]}


def test_router_train_then_eval_with_the_file(data_dir, tmp_path):
    out = tmp_path / "r.router.npz"
    proc = run_cli("router", "train", *QS, "--param", "chunk_size=20", "--epochs", "50", "--out", str(out),
                   data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["questions"] == 10 and report["used"] + report["dropped"] == 10
    assert len(report["label_histogram"]) == 5 and sum(report["label_histogram"]) == report["used"]
    assert report["train_loss"] is not None and out.is_file()

    proc = run_cli("eval", *QS, "--chunker", "mog", "--param", "chunk_size=20", "--param", f"router={out}",
                   "--retrieve", "2", "--json", data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    got = json.loads(proc.stdout)
    assert got["omega_units"] == "units" and got["routing"]["router"] == "router file r.router.npz"
    assert got["texts_embedded"] == 0  # the training run indexed every level already

    # The same file for levels built another way: one line, exit 1.
    proc = run_cli("eval", *QS, "--chunker", "mog", "--param", "chunk_size=30", "--param", f"router={out}",
                   data_dir=data_dir)
    assert_one_line_error(proc, 1, "chunk_size")


def test_eval_text_summary_of_a_retriever(data_dir):
    proc = run_cli("eval", *QS, "--chunker", "freechunker", "--retrieve", "2", data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "retrieved tokens" in out and "precision-Ω*" in out and "finest units" in out


@pytest.mark.parametrize(
    "params, needle",
    [(["--param", "router=level:7"], "level"), (["--param", "t_graph=2"], "t_graph"), (["--param", "edge=x"], "edge")],
)
def test_bad_retriever_parameters_exit_2(data_dir, params, needle):
    proc = run_cli("eval", *QS, "--chunker", "mogg", *params, data_dir=data_dir)
    assert_one_line_error(proc, 2, needle)


def test_a_router_for_freechunker_is_refused(data_dir, tmp_path):
    proc = run_cli("router", "train", *QS, "--chunker", "freechunker", "--out", str(tmp_path / "x"), data_dir=data_dir)
    assert proc.returncode == 2


def test_index_and_query_a_retriever(data_dir):
    doc = str(DATA / "corpora" / "sourdough.txt")
    proc = run_cli("index", doc, "--chunker", "mog", "--param", "chunk_size=20", "--param", "levels=3",
                   data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    info = json.loads(proc.stdout)
    assert [lv["level"] for lv in info["levels"]] == [1, 2, 3]
    proc = run_cli("query", doc, "--chunker", "mog", "--param", "chunk_size=20", "--param", "levels=3",
                   "--param", "router=level:2", "--query", "How long does the dough rest?", "--k", "2",
                   data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    text = (DATA / "corpora" / "sourdough.txt").read_text(encoding="utf-8")
    assert 1 <= len(rows) <= 2 and all(r["level"] == 2 for r in rows)
    for r in rows:
        assert r["text"] == "\n".join(text[s:e] for s, e in r["ranges"])
    assert "chosen level" in proc.stderr.decode()
