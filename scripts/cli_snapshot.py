"""Run a fixed list of CLI subcommands and save what each printed, timings removed: a refactor's before/after check.

``python scripts/cli_snapshot.py OUT_DIR`` writes one file per command (``NN-name.out``: its exit code, then
stdout with every number that is a time — keys named ``seconds``, ``*_seconds``, ``time_ms``, ``elapsed*``,
``query_seconds`` and the like, and the report's generation time — replaced by ``<t>``). Diff two such folders
(``diff -r before after``) to see what a change did to the command line's output. The commands use the bundled
samples and models, a fresh data directory and the output cache of ``CHUNKLAB_CACHE_DIR`` (kept between runs,
so the second run is quick). They take some minutes on a 2-core CPU the first time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_KEY = re.compile(r'("(?:[a-z_]*seconds[a-z_]*|time_ms|elapsed[a-z_]*|saved_at|created|generated)"\s*:\s*)("[^"]*"|[-0-9.eE+]+|null)')
TIME_TEXT = re.compile(r"\b\d+(?:\.\d+)?\s*(?:s|ms)\b")

NARRATIVE = "sample:narrative"
COMMANDS: list[tuple[str, list[str]]] = [
    ("chunkers", ["chunkers"]),
    ("tokenizers", ["tokenizers"]),
    ("samples", ["samples"]),
    ("text", ["text", NARRATIVE]),
    ("info", ["info", "sample:technical-pdf"]),
    ("chunk-recursive", ["chunk", NARRATIVE, "--chunker", "recursive", "--chunk_size", "200"]),
    ("chunk-fixed", ["chunk", NARRATIVE, "--chunker", "fixed_token", "--param", "chunk_size=250", "--param", "chunk_overlap=125"]),
    ("chunk-sentence-zh", ["chunk", "sample:chinese", "--chunker", "sentence"]),
    ("chunk-mog-units", ["chunk", NARRATIVE, "--chunker", "mog"]),
    ("compare", ["compare", NARRATIVE, "--config", "recursive chunk_size=200", "--config", "fixed_token chunk_size=250 chunk_overlap=125"]),
    ("compare-match", ["compare", NARRATIVE, "--config", "recursive chunk_size=200", "--config", "sentence", "--match-length", "150"]),
    ("ppl", ["ppl", NARRATIVE]),
    ("chunk-ppl", ["chunk", NARRATIVE, "--chunker", "ppl", "--param", "threshold=0.3"]),
    ("chunk-ppl-combined", ["chunk", NARRATIVE, "--chunker", "ppl_combined", "--param", "target_length=150"]),
    ("curve-ppl", ["curve", NARRATIVE, "--config", "ppl threshold=0.5"]),
    ("chunk-semantic", ["chunk", NARRATIVE, "--chunker", "semantic"]),
    ("metrics-bc-ds", ["metrics", "sample:release-notes", "--chunker", "recursive", "--param", "chunk_size=60", "--metrics", "bc,ds"]),
    ("metrics-cs", ["metrics", "sample:release-notes", "--chunker", "recursive", "--param", "chunk_size=60", "--metrics", "bc,cs", "--window", "2"]),
    ("index", ["index", NARRATIVE, "--chunker", "recursive", "--param", "chunk_size=200"]),
    ("query", ["query", NARRATIVE, "--chunker", "recursive", "--param", "chunk_size=200", "--query", "Who owned the lighthouse?", "--k", "3"]),
    ("query-mog", ["query", NARRATIVE, "--chunker", "mog", "--param", "router=uniform", "--query", "Who owned the lighthouse?", "--k", "3"]),
    ("query-freechunker", ["query", NARRATIVE, "--chunker", "freechunker", "--query", "Who owned the lighthouse?", "--k", "3"]),
    ("index-mogg", ["index", NARRATIVE, "--chunker", "mogg"]),
    ("eval", ["eval", "--questions", NARRATIVE, "--chunker", "recursive", "--param", "chunk_size=200", "--json"]),
    ("eval-text", ["eval", "--questions", "sample:technical", "--chunker", "fixed_token", "--chunk-spans", "exact"]),
    ("eval-mog-oracle", ["eval", "--questions", NARRATIVE, "--chunker", "mog", "--param", "router=oracle", "--json"]),
    ("eval-freechunker", ["eval", "--questions", NARRATIVE, "--chunker", "freechunker", "--json"]),
    ("questions-check", ["questions", "check", "--questions", "sample:technical"]),
    ("router-train", ["router", "train", "--questions", NARRATIVE, "--chunker", "mog", "--epochs", "20", "--out", "{tmp}/mog.router.npz"]),
    ("report", ["report", NARRATIVE, "--config", "recursive chunk_size=200", "--config", "fixed_token chunk_size=250",
                "--questions", NARRATIVE, "--no-quality", "--out", "{tmp}/report.html"]),
    ("bad-args", ["chunk", NARRATIVE, "--chunker", "recursive", "--param", "chunk_size=0"]),
    ("bad-file", ["info", "/nonexistent.pdf"]),
]


def normalize(text: str) -> str:
    text = TIME_KEY.sub(r"\1<t>", text)
    return TIME_TEXT.sub("<t>", text)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: cli_snapshot.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CHUNKLAB_DATA_DIR": tmp, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        for i, (name, args) in enumerate(COMMANDS):
            argv = [a.replace("{tmp}", tmp) for a in args]
            proc = subprocess.run([sys.executable, "-m", "backend", *argv], cwd=ROOT, env=env, capture_output=True, text=True)
            body = proc.stdout.replace(tmp, "<tmp>")
            if name == "report":
                body = f"{json.dumps(sorted(Path(tmp).glob('report.html')) != [])}\n" + body
            (out / f"{i:02d}-{name}.out").write_text(f"exit {proc.returncode}\n{normalize(body)}", encoding="utf-8")
            err = proc.stderr.strip().splitlines()
            (out / f"{i:02d}-{name}.err").write_text(normalize(err[-1] if err else "") + "\n", encoding="utf-8")
            print(f"{name}: exit {proc.returncode}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
