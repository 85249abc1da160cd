"""``python -m backend corpus``: the tables, the errors, and a run killed mid-way that resumes recomputing nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.samples import SAMPLES_DIR
from tests.conftest import ROOT
from tests.support.cli import run_main
from tests.support.datadir import shared_models_data_dir


def _env(data: Path, cache: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "CHUNKLAB_DATA_DIR": str(shared_models_data_dir(data)), "CHUNKLAB_TORCH_THREADS": "1"}
    env.pop("CHUNKLAB_CACHE_DIR", None)
    if cache is not None:
        env["CHUNKLAB_CACHE_DIR"] = str(cache)
    return env


def cli(*args: str, data: Path, cache: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "backend", "corpus", *args], cwd=ROOT, capture_output=True,
                          timeout=600, env=_env(data, cache))


def in_process(*args: str, data: Path, cache: Path | None = None) -> subprocess.CompletedProcess:
    """``cli``'s command run by ``main`` in this process (same data folder, cache or none): no start-up to pay."""
    return run_main("corpus", *args, data_dir=data, **({"CHUNKLAB_CACHE_DIR": str(cache)} if cache else {}))


def _corpus(folder: Path, *, big: bool = False, size: int = 1100) -> Path:
    folder.mkdir(parents=True)
    text = (SAMPLES_DIR / "narrative_clockmaker.txt").read_text(encoding="utf-8")
    for i in range(3):
        (folder / f"doc{i}.txt").write_text(text[i * 1200 : i * 1200 + size], encoding="utf-8")
    if big:  # last in name order: the run is still on it (or on doc1, doc2) when the first rows are there
        # Twice a document's size is enough: after doc0's row, three documents' BC tables are still to
        # score, seconds of work against the 50 ms the test takes to see the row and kill the run.
        (folder / "z_big.md").write_text(
            (SAMPLES_DIR / "technical_kestrel.md").read_text(encoding="utf-8")[: 2 * size], encoding="utf-8")
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 not really a docx")
    (folder / "image.png").write_bytes(b"\x89PNG")
    return folder


def test_stats_of_two_configurations_the_tables_and_the_skipped_files(tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "c")
    proc = cli(str(folder), "--config", "recursive chunk_size=60", "--config", "sentence chunk_size=40",
               "--out", str(tmp_path / "out"), "--report", str(tmp_path / "r.html"), data=tmp_path / "data")
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    out = proc.stdout.decode()
    verdict, table = out.split("\n\n", 1)
    assert verdict.splitlines() == [
        f"Corpus {folder}: 3 documents with rows, 2 files skipped; 2 configurations (A, B).",
        "None of the metrics computed (Chunks and Mean chunk tokens) is better higher or lower: nothing singles out "
        "a configuration."]
    assert table.startswith(f"Corpus {folder}: 3 documents with rows (2 files skipped);")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "broken.docx" in page and "image.png" in page and verdict.splitlines()[0][:40] in page
    assert "A · recursive(chunk_overlap=0, chunk_size=60) · cl100k" in out and "  Chunks " in out
    assert "Documents where the configurations disagree most on Mean chunk tokens:" in out
    assert "[1] broken.docx: skipped: " in err
    assert "4 of 4 documents run on local" in err and "2 files skipped" in err
    skipped = {json.loads(x)["doc"] for x in (tmp_path / "out" / "skipped.jsonl").read_text().splitlines()}
    assert skipped == {"broken.docx", "image.png"}
    # The resume in this process: the first run above is the real one (exit code, stderr, files).
    again = in_process(str(folder), "--config", "recursive chunk_size=60", "--config", "sentence chunk_size=40",
                       "--out", str(tmp_path / "out"), "--json", data=tmp_path / "data")
    assert again.returncode == 0, again.stderr.decode()
    body = json.loads(again.stdout)
    assert (body["ran"], body["resumed_rows"], body["documents"]) == (0, 6, 4)
    assert body["verdict"][0] == verdict.splitlines()[0]
    assert {(r["tag"], r["metric"]) for r in body["aggregate"]} == {
        (t, m) for t in "AB" for m in ("chunks", "mean_tokens")}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--config", "recursive chunk_size=60", "--metrics", "bc,ppl"], 2, "unknown metric 'ppl'"),
        (["--config", "nope"], 2, "unknown chunker 'nope'"),
        (["--config", "recursive chunk_size=60", "--metrics", "retrieval"], 2, "needs a question set"),
        (["--config", "recursive chunk_size=60", "--address", "127.0.0.1:1"], 2, "needs --engine ray"),
        (["--config", "recursive chunk_size=60", "--workers", "2"], 2, "needs --engine ray"),
    ],
)
def test_bad_arguments_are_one_line_with_exit_2(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    # main in this process (its return code and stderr are what `python -m backend` exits with and prints);
    # the exit code and one-line stderr of a real process are checked by the missing-corpus test below.
    proc = in_process(str(tmp_path), *args, "--out", str(tmp_path / "out"), data=tmp_path / "data")
    err = proc.stderr.decode()
    assert proc.returncode == code and message in err and "Traceback" not in err, err
    assert len([x for x in err.splitlines() if x.strip()]) == 1, err


def test_a_missing_corpus_is_one_line_with_exit_1(tmp_path: Path) -> None:
    proc = cli(str(tmp_path / "nowhere"), "--config", "recursive", "--out", str(tmp_path / "out"), data=tmp_path)
    assert proc.returncode == 1 and proc.stderr.decode().strip().endswith("no such folder or zip")


def _units(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_run_killed_mid_way_resumes_and_the_scorer_scores_only_what_was_missing(tmp_path: Path) -> None:
    # 600 characters a document (three chunks of 60 tokens, so adjacent pairs to score): what the resume
    # proves does not grow with the documents, while the BC tables' cost does.
    folder = _corpus(tmp_path / "c", big=True, size=600)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "backend", "corpus", str(folder), "--config", "recursive chunk_size=60",
            "--metrics", "stats,bc", "--out", str(out)]
    proc = subprocess.Popen(args, cwd=ROOT, env=_env(tmp_path / "data", tmp_path / "cache1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    results = out / "results.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_text(encoding="utf-8").count("\n") >= 1:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()  # still running: on z_big.md or before it
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    first = _units(out)
    assert 1 <= len(first) < 4
    # Resume with an empty cache: a row recomputed would cost scorer calls; only the missing documents do.
    again = cli(str(folder), "--config", "recursive chunk_size=60", "--metrics", "stats,bc", "--out", str(out),
                "--json", data=tmp_path / "data", cache=tmp_path / "cache2")
    assert again.returncode == 0, again.stderr.decode()
    body = json.loads(again.stdout)
    rows = _units(out)
    new = rows[len(first):]
    assert rows[: len(first)] == first  # the first run's rows are kept, byte for byte
    assert sorted(r["doc"] for r in rows) == ["doc0.txt", "doc1.txt", "doc2.txt", "z_big.md"]
    assert body["resumed_rows"] == len(first) and body["ran"] == len(new)  # broken.docx went first: skipped then
    for r in new:  # a full BC table: every chunk alone, then each adjacent pair
        assert r["work"]["pairs_scored"] == 2 * r["chunks"] - 1
    assert body["counts"]["pairs_scored"] == sum(r["work"]["pairs_scored"] for r in new)
    ran_now = [line.split("] ", 1)[1].split(":")[0] for line in again.stderr.decode().splitlines() if line.startswith("[")]
    assert sorted(ran_now) == sorted(r["doc"] for r in new)
    assert json.loads((out / "skipped.jsonl").read_text(encoding="utf-8").splitlines()[-1])["doc"] == "broken.docx"
