"""A CLI run SIGKILLed in the middle of its work: the rerun reuses what was finished and ends with the same result.

The killed run is a real ``python -m backend`` process (tests.support.stalling_cli), SIGKILLed where it
stalls. The rerun that must resume from what it left on disk is ``backend.cli.main.main`` in this process
(``run_main``: exit code, stdout and stderr as a child's), so the rerun's model load is shared with the
test's own uninterrupted reference instead of paid again in a fresh interpreter. The scoring test's last
run (a plain cache hit) stays a real ``python -m backend``: its stdout must equal the resumed run's bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.support.cli import run_main
from tests.support.datadir import shared_models_data_dir
from tests.support.killing import kill_at_marker

DATA = ROOT / "tests" / "data" / "retrieval"
# About 130 tokens: with a 16-token window (8 scored per later window, 8 windows per CPU batch)
# the pass takes two batches, and the first one is checkpointed.
TEXT = ((
    "The lighthouse keeper climbed the stairs at dusk. The lamp had to be lit before the fog rolled in. "
    "Ships relied on the beam to find the harbour mouth. In winter the storms came from the north-east. "
    "Bread rises when the yeast eats the sugars in the flour. A starter kept in the fridge needs feeding weekly. "
) * 2).strip()


def _env(cache: Path, data: Path) -> dict[str, str]:
    env = {**os.environ, "CHUNKLAB_CACHE_DIR": str(cache), "CHUNKLAB_DATA_DIR": str(shared_models_data_dir(data)), "CHUNKLAB_DEVICE": "cpu"}
    for name in ("CHROMA_HOST", "CHROMA_PORT", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CHUNKLAB_DEMO"):
        env.pop(name, None)
    return env


def _kill_at_stall(marker: Path, what: str, cli: list[str], env: dict[str, str], *extra: str) -> None:
    """Run the CLI until it stalls at ``what`` (see tests.support.stalling_cli), then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.stalling_cli", str(marker), what, *extra, "--", *cli],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    kill_at_marker(proc, marker)


def _run(cli: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m backend *cli`` as a process, in ``env``."""
    return subprocess.run([sys.executable, "-m", "backend", *cli], cwd=ROOT, env=env, capture_output=True, timeout=600)


def _rerun(cli: list[str], cache: Path, data: Path) -> subprocess.CompletedProcess:
    """``cli`` in this process (``run_main``), with ``_env``'s cache and data folders."""
    return run_main(*cli, data_dir=data, CHUNKLAB_CACHE_DIR=str(cache))


@pytest.fixture(autouse=True)
def _no_demo(monkeypatch):
    """As ``_env`` gives the killed run: no demo cache for the in-process rerun either."""
    monkeypatch.delenv("CHUNKLAB_DEMO", raising=False)


def test_a_killed_scoring_run_resumes_from_its_checkpoint(tmp_path: Path):
    from backend.models.scorer import load_scorer
    from backend.models.scoring import score_sentences
    from backend.text.document import Document

    doc_path = tmp_path / "long.txt"
    doc_path.write_text(TEXT, encoding="utf-8")
    env = _env(tmp_path / "cache", tmp_path / "data")
    cli = ["ppl", str(doc_path), "--window", "16", "--device", "cpu"]
    _kill_at_stall(tmp_path / "stalled", "checkpoint", cli, env)
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.name.endswith(".entry")]  # the checkpoint

    proc = _rerun(cli, tmp_path / "cache", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr.decode()
    notes = [line for line in proc.stderr.decode().splitlines() if line.startswith("resumed:")]
    assert len(notes) == 1, proc.stderr.decode()
    already, total = (int(w) for w in notes[0].split()[1:4:2])  # "resumed: N of M tokens were already scored"
    assert 0 < already < total

    doc = Document.from_text(TEXT, source="long.txt")
    scorer = load_scorer(device="cpu")  # the model the rerun loaded in this process
    uninterrupted = scorer.token_nll(doc.text, window=16)
    assert total == len(uninterrupted) - 1
    expected = [s.to_json() for s in score_sentences(doc, uninterrupted)]
    got = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [(g["start"], g["end"], g["tokens"]) for g in got] == [(e["start"], e["end"], e["tokens"]) for e in expected]
    assert [g["nll_mean"] for g in got] == pytest.approx([e["nll_mean"] for e in expected], rel=1e-6)

    again = _run(cli, env)  # a real process; finished: a plain cache hit, the checkpoint is gone
    assert again.returncode == 0 and again.stdout == proc.stdout
    assert "resumed:" not in again.stderr.decode()


def test_a_killed_indexing_run_reuses_the_chunks_it_embedded(tmp_path: Path, monkeypatch):
    from backend.models import embeddings

    doc = str(DATA / "corpora" / "sourdough.txt")
    env = _env(tmp_path / "cache", tmp_path / "data")
    cli = ["index", doc, "--chunker", "recursive", "--param", "chunk_size=20"]
    part = ("--embed-part", "4")
    _kill_at_stall(tmp_path / "stalled", "embeddings-part", cli, env, *part)

    monkeypatch.setattr(embeddings, "EMBED_PART", 4)  # the rerun's parts: the killed run's
    proc = _rerun(cli, tmp_path / "cache", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr.decode()
    info = json.loads(proc.stdout)
    notes = [line for line in proc.stderr.decode().splitlines() if line.startswith("resumed:")]
    assert len(notes) == 1, proc.stderr.decode()
    already, total = (int(w) for w in notes[0].split()[1:4:2])  # "resumed: N of M texts were already embedded"
    assert 0 < already < total == info["chunks"]
    assert info["reused"] is False

    # The same vectors as an uninterrupted run, and every chunk in the collection.
    from backend.chunkers import make_chunker
    from backend.cli.common import load_input
    from backend.models.cache import OutputCache
    from backend.models.embeddings import embeddings_key, load_text_embedder

    chunking = make_chunker("recursive", {"chunk_size": 20}).chunk(load_input(doc))
    texts = [c.text for c in chunking.chunks]
    assert len(texts) == total
    embedder = load_text_embedder(None)  # the one the rerun loaded in this process
    stored = OutputCache(tmp_path / "cache").get(embeddings_key(embedder.info.fingerprint, texts))
    assert stored is not None and stored["vectors"].shape[0] == total
    np.testing.assert_allclose(stored["vectors"], embedder.embed(texts), atol=1e-5)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".tmp-")]


def test_an_indexing_run_killed_while_writing_to_chroma_is_completed_without_embedding_again(tmp_path: Path):
    doc = str(DATA / "corpora" / "sourdough.txt")
    env = _env(tmp_path / "cache", tmp_path / "data")
    cli = ["index", doc, "--chunker", "recursive", "--param", "chunk_size=20"]
    _kill_at_stall(tmp_path / "stalled", "upsert", cli, env)  # the embedded store killed between two writes

    proc = _rerun(cli, tmp_path / "cache", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr.decode()
    info = json.loads(proc.stdout)
    assert info["reused"] is False and info["embedded_from_cache"] is True  # the vectors were kept
    from backend.chunkers import make_chunker
    from backend.cli.common import load_input

    assert info["chunks"] == len(make_chunker("recursive", {"chunk_size": 20}).chunk(load_input(doc)))  # all in
