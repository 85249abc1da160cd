"""An API key never lands in the cache, the data directory, an export, a report or a log.

The CLI runs LLM chunkers, a comparison export and a report against the scripted chat server
with a recognisable key in every key variable and Python logging at DEBUG on stderr; a run with
a key the server refuses (its 401 body echoes the key, as OpenAI's does) must not repeat it.
Then every file under the run's folder (data dir, cache dir, outputs) and every captured
stream is searched for the key.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.backend.chunkers.test_llm_chunkers import TEXT, moc_rules_answer
from tests.conftest import ROOT
from tests.support.scripted_chat_server import start_scripted_server

KEY = "sk-chunklab-canary-5f0c1e9a7b3d"
# The CLI with the LLM chunkers registered and every logger at DEBUG, to stderr.
CODE = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)\n"
    "import backend.chunkers.llm.chunkers  # registers llm_split, lumber, moc\n"
    "from backend.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
MOC = ("--config", "moc router=0-120")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args], cwd=ROOT, env=env, capture_output=True, timeout=300)


def test_an_api_key_is_never_written_or_logged(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    with start_scripted_server(reply=moc_rules_answer(), api_key=KEY) as good, \
            start_scripted_server(api_key="sk-the-right-key") as refusing:
        env = {
            **os.environ,
            "CHUNKLAB_DATA_DIR": str(tmp_path / "data"),
            "CHUNKLAB_CACHE_DIR": str(tmp_path / "cache"),
            "CHUNKLAB_DEVICE": "cpu",
            "CHUNKLAB_CHAT": "remote",
            "OPENAI_BASE_URL": good.url,
            "OPENAI_MODEL": "scripted-model",
            "OPENAI_API_KEY": KEY,
            "CHUNKLAB_REMOTE_BASE_URL": good.url,
            "CHUNKLAB_REMOTE_API_KEY": KEY,
        }
        runs = [
            _cli(env, "chunk", str(doc), "--chunker", "moc", "--param", "router=0-120"),
            _cli(env, "compare", str(doc), *MOC, "--config", "recursive chunk_size=60", "--no-cache",
                 "--out", str(out / "cmp.jsonl")),
            _cli(env, "report", str(doc), *MOC, "--no-quality", "--out", str(out / "report.html")),
        ]
        for proc in runs:
            assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        refused = _cli({**env, "OPENAI_BASE_URL": refusing.url, "CHUNKLAB_CACHE_DIR": str(tmp_path / "cache2")},
                       "chunk", str(doc), "--chunker", "moc", "--param", "router=0-120")
        sent = [
            {k.lower(): v for k, v in r["headers"].items()}.get("authorization", "")
            for r in good.requests + refusing.requests  # the model listings and speed probes too
        ]
    assert refused.returncode == 1
    assert refused.stderr.decode().strip().splitlines()[-1]  # the reason, on its last line
    assert len(sent) >= 3 and all(KEY in header for header in sent)  # the key was in use all along
    assert (out / "report.html").stat().st_size > 0 and (out / "cmp.jsonl").stat().st_size > 0
    assert any((tmp_path / "cache").rglob("*"))  # the chat answers were cached
    needle = KEY.encode()
    for proc in [*runs, refused]:
        assert needle not in proc.stdout and needle not in proc.stderr, proc.args[3:5]
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and needle in p.read_bytes()]
    assert leaks == []
