"""What the ``chunklab`` library costs a pipeline: a core install against the full one, and the bridges' overhead.

Measured in one run on this machine:

1. **Install size and import time, core against full.** The wheel is built from this checkout and
   installed with ``[core]`` into a fresh virtual environment, offline, from ``.venv/wheelhouse``
   (what ``tests/chunklab/test_install.py`` does); the full install is this checkout's ``.venv``
   (``requirements-dev.txt``: the app, the models, the bridges and the test tools), both with their
   bytecode compiled as pip installs it. Sizes are the
   venvs' ``site-packages`` on disk. Import times are the median of ``--imports`` fresh
   processes each, interleaved: ``import chunklab`` in the core venv and in the full one, and
   the full install's app stack (``import chunklab, torch, transformers, streamlit``) for scale.
2. **Bridge throughput against a direct call.** The same chunker object and text through
   ``Chunker.chunk`` directly, LangChain's ``ChunkLabTextSplitter.create_documents`` and
   LlamaIndex's ``ChunkLabNodeParser.get_nodes_from_documents``; characters per second from the fastest
   of ``--repeat`` interleaved runs (the one least disturbed by other work on the machine: a call takes
   about 0.1 s, and a median moved by ±10% between runs on this shared 2-core machine), each bridge as a
   ratio to the direct call (target ≥ 0.95×).
3. **Against each library's own splitter** on the same text, counting the same cl100k tokens:
   LangChain's ``RecursiveCharacterTextSplitter`` and LlamaIndex's ``SentenceSplitter``, both at
   ``--chunk-size`` tokens without overlap, against our ``recursive chunk_size=N`` through the bridge.

The text is the bundled English samples joined and repeated to ``--chars`` characters. Nothing
is asserted. Run:  .venv/bin/python bench/bench_library.py [--chars 400000] [--repeat 15] [--imports 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import chunklab  # noqa: E402
from backend.samples import load_sample  # noqa: E402
from backend.tokenizers import get_tokenizer  # noqa: E402
from chunklab.integrations.langchain import ChunkLabTextSplitter  # noqa: E402
from chunklab.integrations.llamaindex import ChunkLabNodeParser  # noqa: E402
from langchain_text_splitters import RecursiveCharacterTextSplitter  # noqa: E402
from llama_index.core import Document as LIDocument  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from tests.support.core_install import core_install  # noqa: E402

STACK = "import chunklab, torch, transformers, streamlit"


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _import_seconds(python: Path, statement: str, cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True, cwd=cwd, env=env)
    return float(done.stdout.strip().splitlines()[-1])


def _timed(fn, repeat: int) -> list[float]:
    """Wall times of ``repeat`` calls, each after a full collection and with the collector off while it runs."""
    out = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        finally:
            gc.enable()
    return out


def _text(chars: int) -> str:
    parts = [load_sample(name).text for name in ("narrative", "technical", "release-notes")]
    joined = "\n\n".join(parts)
    return ("\n\n".join([joined] * (chars // len(joined) + 1)))[:chars]


def install_part(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        t = time.perf_counter()
        try:
            core_py, _ = core_install(base, compile_bytecode=True)
        except (FileNotFoundError, RuntimeError) as e:
            raise SystemExit(f"error: {e}") from None
        install_s = time.perf_counter() - t
        full_py = ROOT / ".venv/bin/python"
        core_size, full_size = _size(_site_packages(core_py.parents[1])), _size(_site_packages(ROOT / ".venv"))
        runs: dict[str, list[float]] = {"core": [], "full": [], "stack": []}
        for _ in range(args.imports):  # interleaved, each in a fresh process, outside the checkout
            runs["core"].append(_import_seconds(core_py, "import chunklab", base))
            runs["full"].append(_import_seconds(full_py, "import chunklab", ROOT))
            runs["stack"].append(_import_seconds(full_py, STACK, ROOT))
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "core_build_and_install_s": round(install_s, 1),
        "core_site_packages_mb": round(core_size / 2**20, 1),
        "full_site_packages_mb": round(full_size / 2**20, 1),
        "size_ratio_core_to_full": round(core_size / full_size, 4),
        "import_chunklab_core_s": round(med["core"], 3),
        "import_chunklab_full_s": round(med["full"], 3),
        "import_ratio_core_to_full": round(med["core"] / med["full"], 3),
        "import_app_stack_full_s": round(med["stack"], 3),
        "import_ratio_core_to_app_stack": round(med["core"] / med["stack"], 3),
        "imports_per_median": args.imports,
    }


def throughput_part(args: argparse.Namespace) -> dict:
    text = _text(args.chars)
    spec = f"recursive chunk_size={args.chunk_size}"
    chunker = chunklab.Chunker(spec)
    splitter, parser = ChunkLabTextSplitter(chunker), ChunkLabNodeParser(chunker)
    tokens = get_tokenizer("cl100k")
    lc_own = RecursiveCharacterTextSplitter(chunk_size=args.chunk_size, chunk_overlap=0, length_function=tokens.count)
    li_own = SentenceSplitter(chunk_size=args.chunk_size, chunk_overlap=0, tokenizer=tokens.encode)
    li_doc = LIDocument(text=text)
    calls = {
        "direct": lambda: chunker.chunk(chunklab.from_text(text)),
        "langchain_bridge": lambda: splitter.create_documents([text]),
        "llamaindex_bridge": lambda: parser.get_nodes_from_documents([li_doc]),
        "langchain_own": lambda: lc_own.create_documents([text]),
        "llamaindex_own": lambda: li_own.get_nodes_from_documents([li_doc]),
    }
    counts = {
        "direct": len(chunker.chunk(chunklab.from_text(text))),
        "langchain_own": len(lc_own.split_text(text)),
        "llamaindex_own": len(li_own.get_nodes_from_documents([li_doc])),
    }
    times: dict[str, list[float]] = {k: [] for k in calls}
    for name, fn in calls.items():  # warm-up (tokenizer tables, first allocations)
        fn()
    for _ in range(args.repeat):  # interleaved
        for name, fn in calls.items():
            times[name] += _timed(fn, 1)
    best = {k: min(v) for k, v in times.items()}
    cps = {k: len(text) / v for k, v in best.items()}
    return {
        "text_chars": len(text),
        "spec": chunker.spec,
        "chunks": counts,
        "chars_per_s": {k: round(v) for k, v in cps.items()},
        "langchain_bridge_to_direct": round(cps["langchain_bridge"] / cps["direct"], 3),
        "llamaindex_bridge_to_direct": round(cps["llamaindex_bridge"] / cps["direct"], 3),
        "langchain_bridge_to_own_recursive": round(cps["langchain_bridge"] / cps["langchain_own"], 3),
        "llamaindex_bridge_to_own_sentence": round(cps["llamaindex_bridge"] / cps["llamaindex_own"], 3),
        "repeat": args.repeat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=400_000, help="characters of text for the throughput part")
    parser.add_argument("--chunk-size", type=int, default=200, help="tokens per chunk (cl100k)")
    parser.add_argument("--repeat", type=int, default=15, help="interleaved timings per call (the fastest counts)")
    parser.add_argument("--imports", type=int, default=5, help="fresh-process imports per median")
    parser.add_argument("--skip-install", action="store_true", help="only the throughput part")
    args = parser.parse_args()
    out = {"throughput": throughput_part(args)}
    if not args.skip_install:
        out["install"] = install_part(args)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
