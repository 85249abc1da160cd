"""``python -m backend eval | index | query | questions check`` end to end.

The JSON that must equal the API's and an index that a second process queries run as ``python -m backend``
processes; the text summary, the question-set checks and the one-line errors are about what the CLI prints
and returns, and call ``backend.cli.main.main`` in this process (``main_cli``, as in ``test_cli.py``: stderr
there also carries warnings and log records), in a data folder of their own so that no embedded Chroma
folder is open in two processes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from backend.chunking import ChunkerConfig
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import load_question_set
from backend.retrieval.store import ChunkStore
from tests.backend.cli.test_cli import assert_one_line_error, main_cli  # noqa: F401  (a fixture)
from tests.conftest import ROOT
from tests.support.datadir import shared_models_data_dir

DATA = ROOT / "tests" / "data" / "retrieval"
KEYS = {
    "recall_mean", "recall_std", "precision_mean", "precision_std", "precision_omega_mean",
    "precision_omega_std", "iou_mean", "iou_std", "per_corpus", "chunks", "seconds",
    "retrieved_tokens_mean", "index_seconds", "texts_embedded", "query_seconds", "omega_units",
}
TIMINGS = {"seconds", "index_seconds", "query_seconds", "texts_embedded"}
EVAL = ["eval", "--questions", str(DATA / "questions.csv"), "--corpora", str(DATA / "corpora")]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli-data")


def run_cli(*args: str, data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "CHUNKLAB_DATA_DIR": str(shared_models_data_dir(data_dir)), "CHUNKLAB_DEVICE": "cpu", **env}
    for name in ("CHROMA_HOST", "CHROMA_PORT", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "backend", *args], cwd=ROOT, env=full_env, capture_output=True, timeout=600
    )


@pytest.fixture()
def cli(tmp_path, monkeypatch, main_cli):  # noqa: F811
    """``run_cli`` in this process, in a fresh data folder of its own (the converted models shared)."""
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(shared_models_data_dir(tmp_path / "cli-data")))
    monkeypatch.setenv("CHUNKLAB_DEVICE", "cpu")
    monkeypatch.delenv("CHUNKLAB_CACHE_DIR", raising=False)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        for name in ("CHROMA_HOST", "CHROMA_PORT", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
            if name in env:
                monkeypatch.setenv(name, env[name])
            else:
                monkeypatch.delenv(name, raising=False)
        return main_cli(*args)

    return run


def test_eval_json_matches_the_api(data_dir, tmp_path):
    proc = run_cli(*EVAL, "--chunker", "recursive", "--param", "chunk_size=60", "--retrieve", "3", "--json",
                   data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1
    got = json.loads(lines[0])
    assert set(got) == KEYS
    assert set(got["per_corpus"]) == {"lighthouses", "sourdough"}
    assert all(0.0 <= got[k] <= 1.0 for k in KEYS - TIMINGS - {"per_corpus", "chunks", "retrieved_tokens_mean", "omega_units"})
    assert got["omega_units"] == "chunks" and got["retrieved_tokens_mean"] > 0

    from backend.models.cache import OutputCache

    bench = evaluate(
        load_question_set(DATA / "questions.csv", DATA / "corpora"),
        [ChunkerConfig.make("recursive", {"chunk_size": 60})],
        retrieve=3,
        store=ChunkStore(path=tmp_path / "chroma"),
        cache=OutputCache(tmp_path / "cache"),
    )
    expected = bench.results[0].to_json()
    for key in KEYS - TIMINGS - {"per_corpus", "omega_units"}:
        assert got[key] == pytest.approx(expected[key], abs=1e-9), key
    assert got["per_corpus"]["lighthouses"]["iou_mean"] == pytest.approx(
        expected["per_corpus"]["lighthouses"]["iou_mean"], abs=1e-9
    )


def test_eval_text_summary_with_retrieve_all_containing(cli):
    proc = cli(*EVAL, "--chunker", "sentence", "--param", "chunk_size=30", "--retrieve", "-1",
               "--chunk-spans", "exact")
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "10 questions · retrieve -1" in out and "precision-Ω" in out and "IoU" in out
    assert "exact chunk spans" in out


def test_index_then_query(data_dir):
    doc = str(DATA / "corpora" / "sourdough.txt")
    flags = ["--chunker", "recursive", "--param", "chunk_size=40"]
    proc = run_cli("index", doc, *flags, data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    info = json.loads(proc.stdout)
    assert info["reused"] is False and info["chunks"] > 3 and info["name"].startswith("cl-")
    assert info["store"] == str(data_dir / "chroma")

    proc = run_cli("query", doc, *flags, "--query", "How often do you feed a starter kept in the fridge?",
                   "--k", "2", data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    hits = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [h["rank"] for h in hits] == [1, 2]
    assert set(hits[0]) == {"rank", "distance", "start", "end", "index", "tokens", "text"}
    text = (DATA / "corpora" / "sourdough.txt").read_text(encoding="utf-8")
    assert all(text[h["start"] : h["end"]] == h["text"] for h in hits)
    assert "refrigerator" in hits[0]["text"]


def test_questions_check(cli):
    proc = cli("questions", "check", "--questions", str(DATA / "questions.csv"), "--corpora", str(DATA / "corpora"))
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == {"questions": 10, "corpora": {"lighthouses": 6, "sourdough": 4}, "method": None}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_errors_are_one_line(cli, tmp_path):
    assert_one_line_error(cli(*EVAL, "--chunker", "recursive", "--retrieve", "0"), 2, "--retrieve")
    assert_one_line_error(cli(*EVAL, "--chunker", "nope"), 2, "unknown chunker")
    assert_one_line_error(cli(*EVAL, "--chunker", "recursive", "--param", "chunk_size=-4"), 2, "chunk_size")
    missing = ["eval", "--questions", str(DATA / "questions.csv"), "--corpora", str(tmp_path / "none")]
    assert_one_line_error(cli(*missing, "--chunker", "recursive"), 1, "no such folder")
    bad = tmp_path / "bad.csv"
    bad.write_text((DATA / "questions.csv").read_text(encoding="utf-8").replace('""start_index"": 37', '""start_index"": 38'),
                   encoding="utf-8")
    line = assert_one_line_error(
        cli("eval", "--questions", str(bad), "--corpora", str(DATA / "corpora"), "--chunker", "recursive"), 1,
        "bad.csv row 1: reference 1",
    )
    assert "does not match corpus 'lighthouses'" in line
    port = _closed_port()
    assert_one_line_error(
        cli(*EVAL, "--chunker", "recursive", CHROMA_HOST="127.0.0.1", CHROMA_PORT=str(port)),
        1, f"127.0.0.1:{port}",
    )


def test_bundled_question_sets_by_name(cli):
    proc = cli("questions", "check", "--questions", "sample:technical")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == {"questions": 12, "corpora": {"technical_kestrel": 12}, "method": "hand-written"}
    line = assert_one_line_error(
        cli("questions", "check", "--questions", "sample:nope"), 2, "no bundled question set"
    )
    assert "available: narrative, technical" in line
    proc = cli("eval", "--questions", "sample:narrative", "--chunker", "recursive", "--param", "chunk_size=100",
               "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    got = json.loads(proc.stdout)
    assert set(got["per_corpus"]) == {"narrative_clockmaker"} and got["recall_mean"] > 0
