"""The model commands of the CLI: ``ppl`` (real bundled SmolLM2, through the cache) and ``cache info|clear``.

Wall times are not asserted here; ``bench/bench_ppl_cache.py`` measures them. These tests check
structure: the schema, that a rerun is answered from the cache without importing torch, that
``--no-cache`` bypasses the cache, and the one-line errors with their exit codes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.backend.cli.test_cli import assert_one_line_error
from tests.conftest import ROOT
from tests.support.cli import run_main

TEXT = (
    "The clockmaker opened his shop at dawn. Rain tapped against the narrow window.\n\n"
    "He wound each clock by hand, one after another, until the room ticked like a heart. Was it enough?"
)
SCHEMA = {"index", "start", "end", "text", "tokens", "nll_mean", "ppl"}


def run_cli(*args: str, cache_dir: Path, code: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in-process (one SmolLM2 load for the file); with ``code``, a fresh ``python -c code`` instead,
    for the checks that are about the process (whether torch was imported)."""
    if code is None:
        return run_main(*args, data_dir=Path(os.environ["CHUNKLAB_DATA_DIR"]), CHUNKLAB_CACHE_DIR=str(cache_dir))
    env = {**os.environ, "CHUNKLAB_CACHE_DIR": str(cache_dir), "CHUNKLAB_DEVICE": "cpu"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, timeout=600,
                          check=False)


def records(proc: subprocess.CompletedProcess) -> list[dict]:
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]


def cache_info(cache_dir: Path) -> dict:
    proc = run_cli("cache", "info", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


# Runs the CLI in-process and reports on stderr whether torch was imported.
WITH_TORCH_CHECK = (
    "import sys\n"
    "from backend.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "print('torch imported:', 'torch' in sys.modules, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.fixture()
def doc_file(tmp_path: Path) -> Path:
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_ppl_prints_one_record_per_sentence_then_serves_reruns_from_the_cache(doc_file: Path, cache_dir: Path):
    shown = run_cli("text", str(doc_file), cache_dir=cache_dir)
    assert shown.returncode == 0, shown.stderr.decode()
    text = shown.stdout.decode("utf-8")
    first = records(run_cli("ppl", str(doc_file), cache_dir=cache_dir))
    assert len(first) == 4
    for i, r in enumerate(first):
        assert set(r) == SCHEMA and r["index"] == i
        assert text[r["start"] : r["end"]] == r["text"]
        assert r["tokens"] > 0 and 0 < r["nll_mean"] < 20
        assert r["ppl"] == pytest.approx(2.718281828 ** r["nll_mean"], rel=1e-9)
    assert first[0]["text"] == "The clockmaker opened his shop at dawn."
    assert cache_info(cache_dir)["entries"] == 1

    again = run_cli("ppl", str(doc_file), cache_dir=cache_dir, code=WITH_TORCH_CHECK)
    assert records(again) == first
    assert "torch imported: False" in again.stderr.decode()  # the model was not even loaded
    assert cache_info(cache_dir)["entries"] == 1


def test_no_cache_neither_reads_nor_writes(doc_file: Path, cache_dir: Path):
    proc = run_cli("ppl", str(doc_file), "--no-cache", cache_dir=cache_dir, code=WITH_TORCH_CHECK)
    assert len(records(proc)) == 4
    assert "torch imported: True" in proc.stderr.decode()
    assert cache_info(cache_dir)["entries"] == 0


def test_window_is_part_of_the_cache_key(doc_file: Path, cache_dir: Path):
    small = records(run_cli("ppl", str(doc_file), "--window", "16", "--device", "cpu", cache_dir=cache_dir))
    full = records(run_cli("ppl", str(doc_file), cache_dir=cache_dir))
    assert cache_info(cache_dir)["entries"] == 2
    assert [r["tokens"] for r in small] == [r["tokens"] for r in full]
    assert [r["nll_mean"] for r in small] != [r["nll_mean"] for r in full]  # less context, other scores


def test_cache_info_and_clear(cache_dir: Path):
    from backend.models.cache import OutputCache

    info = cache_info(cache_dir)
    assert info == {"entries": 0, "bytes": 0, "directory": str(cache_dir), "max_bytes": 2048 * 1024 * 1024}
    OutputCache(cache_dir).put({"kind": "demo"}, {"x": np.arange(10)})
    info = cache_info(cache_dir)
    assert info["entries"] == 1 and info["bytes"] > 0
    proc = run_cli("cache", "clear", cache_dir=cache_dir)
    assert proc.returncode == 0 and proc.stdout.decode().startswith("removed 1 entry")
    assert cache_info(cache_dir)["entries"] == 0
    assert run_cli("cache", "clear", cache_dir=cache_dir).stdout.decode().startswith("removed 0 entries")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ppl"], "required"),
        (["ppl", "{f}", "--window", "0"], "--window: must be a positive integer, got '0'"),
        (["ppl", "{f}", "--window", "many"], "--window: must be a positive integer"),
        (["ppl", "{f}", "--device", "tpu"], "invalid choice"),
        (["ppl", "{f}", "--frobnicate"], "unrecognized arguments"),
        (["cache"], "required"),
        (["cache", "shrink"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2(doc_file: Path, cache_dir: Path, args, needle):
    proc = run_cli(*[a.replace("{f}", str(doc_file)) for a in args], cache_dir=cache_dir)
    assert_one_line_error(proc, 2, needle)


def test_bad_inputs_exit_1(tmp_path: Path, cache_dir: Path, doc_file: Path):
    line = assert_one_line_error(run_cli("ppl", str(tmp_path / "missing.txt"), cache_dir=cache_dir), 1, "no such file")
    assert line.startswith("error: ")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert_one_line_error(run_cli("ppl", str(empty), cache_dir=cache_dir), 1)
    for spec in (str(tmp_path / "no-model"), str(doc_file)):  # no such folder; a file that is not a GGUF
        proc = run_cli("ppl", str(doc_file), "--lm", spec, cache_dir=cache_dir)
        assert_one_line_error(proc, 1, "cannot load model")
        proc = run_cli("ppl", str(doc_file), "--lm", spec, "--no-cache", cache_dir=cache_dir)
        assert_one_line_error(proc, 1, "cannot load model")


def test_ctrl_c_exits_130(tmp_path: Path, cache_dir: Path):
    long_doc = tmp_path / "long.txt"
    long_doc.write_text((TEXT + "\n\n") * 200, encoding="utf-8")
    env = {**os.environ, "CHUNKLAB_CACHE_DIR": str(cache_dir), "CHUNKLAB_DEVICE": "cpu"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "ppl", str(long_doc), "--no-cache"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # as a terminal's foreground job: a suite started in the background (``cmd &``) ignores SIGINT, and
        # a child would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(3.0)  # importing the CLI's libraries, loading the model or scoring: each ends the same way
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert out == b""
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert lines[-1] == "interrupted" and all(line.startswith("scoring:") for line in lines[:-1]), lines


def test_ctrl_c_while_the_libraries_load_exits_130_without_a_traceback(tmp_path: Path, cache_dir: Path):
    env = {**os.environ, "CHUNKLAB_CACHE_DIR": str(cache_dir), "CHUNKLAB_DEVICE": "cpu"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "ppl", str(tmp_path / "any.txt")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(0.4)  # importing numpy, torch, pyarrow (seconds in all)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err.decode().strip()) == (130, b"", "interrupted")
