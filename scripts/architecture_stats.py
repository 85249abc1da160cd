"""Numbers about the code's shape, printed as JSON: what a new maintainer trips over, measured the same way each time.

- ``page_backend_names``: per page, the distinct names it imports from ``backend`` (``from backend.x import a``
  counts ``a``; ``import backend.x`` counts ``backend.x``).
- ``retriever_branches``: places in ``backend/``, ``components/`` and ``pages/`` that ask whether a
  configuration is a retriever (``is_retriever(``, ``.omega_units``, ``isinstance(…, RetrieverChunker)``,
  ``family == "retriever"``, ``.is_multi``), by file.
- ``in_function_project_imports``: ``import`` statements naming a project module inside a function body in
  ``backend/`` (each statement once).
- ``progress_helpers``: functions and classes in ``backend/`` that wrap a progress callback into another one
  (a nested ``def …(done, total)`` returned, or a class with ``__call__(self, done, total)``).
- ``live_query``: the backend modules one warm live query enters (``python -m backend query`` on the
  narrative sample with ``mog``), and how often control crosses from one module into another; and the
  same path without the shared leaf modules (text, tokens, settings, progress, errors, the cache…):
  ``stays`` (runs of consecutive calls in one module), ``modules`` and ``returns`` (stays in a module
  entered before).

Usage: ``.venv/bin/python scripts/architecture_stats.py [--no-trace]``.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import io
import json
import re
import sys
import tempfile
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Modules every path calls into for small shared things: left out of the live query's path.
LEAVES = (
    "backend.text.", "backend.tokenizers", "backend.config", "backend.errors", "backend.progress", "backend.chunking",
    "backend.models.cache", "backend.loaders", "backend.samples", "backend.lab.settings", "backend.models.devices",
    "backend.curves",
)
BRANCH = re.compile(r"is_retriever\(|\.omega_units\b|RetrieverChunker\)|family == [\"']retriever[\"']|\.is_multi\b")


def page_backend_names() -> dict[str, int]:
    out = {}
    for path in sorted((ROOT / "pages").glob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("backend"):
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names if a.name.startswith("backend"))
        out[path.stem] = len(names)
    out["total"] = sum(out.values())
    return out


def retriever_branches() -> dict[str, int]:
    out: dict[str, int] = collections.Counter()
    for package in ("backend", "components", "pages"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for line in path.read_text(encoding="utf-8").splitlines():
                code = line.split("#", 1)[0]
                if BRANCH.search(code) and not code.lstrip().startswith(("def ", "class ", '"', "'")):
                    out[str(path.relative_to(ROOT))] += 1
    return {"total": sum(out.values()), "files": len(out), **dict(sorted(out.items()))}


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def in_function_project_imports() -> dict[str, int]:
    out: dict[str, int] = collections.Counter()
    for path in sorted((ROOT / "backend").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen = set()
        for fn in _functions(tree):
            for node in ast.walk(fn):
                if id(node) in seen:
                    continue
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("backend")):
                    seen.add(id(node))
                    out[str(path.relative_to(ROOT))] += 1
                elif isinstance(node, ast.Import) and any(a.name.startswith("backend") for a in node.names):
                    seen.add(id(node))
                    out[str(path.relative_to(ROOT))] += 1
    return {"total": sum(out.values()), **dict(sorted(out.items()))}


def _done_total(fn: ast.FunctionDef) -> bool:
    names = [a.arg for a in fn.args.args if a.arg != "self"]
    return len(names) == 2 and names[1] in ("total", "t", "n")


def progress_helpers() -> list[str]:
    found = []
    for path in sorted((ROOT / "backend").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                call = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__call__"), None)
                if call is not None and _done_total(call):
                    found.append(f"{rel}:{node.name}")
            elif isinstance(node, ast.FunctionDef):
                inner = [b for b in node.body if isinstance(b, ast.FunctionDef) and _done_total(b)]
                returns = {r.value.id for r in ast.walk(node) if isinstance(r, ast.Return) and isinstance(r.value, ast.Name)}
                if any(f.name in returns for f in inner):
                    found.append(f"{rel}:{node.name}")
    return found


def live_query_trace() -> dict[str, object]:
    """Run the CLI's ``query`` twice (the first indexes), tracing the second: modules entered and crossings."""
    sys.path.insert(0, str(ROOT))
    from backend.cli.main import main

    argv = ["query", "sample:narrative", "--chunker", "mog", "--param", "router=uniform", "--query",
            "Who owned the lighthouse?", "--k", "3"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(argv)
    prefix = str(ROOT / "backend") + os.sep
    entries: collections.Counter[str] = collections.Counter()
    order: list[str] = []  # the callee module of every cross-module call, in order

    def module_of(filename: str) -> str | None:
        if not filename.startswith(prefix):
            return None
        rel = Path(filename).relative_to(ROOT).with_suffix("")
        return ".".join(rel.parts)

    def profile(frame, event, arg):  # noqa: ANN001
        if event != "call":
            return
        callee = module_of(frame.f_code.co_filename)
        if callee is None or callee.startswith("backend.cli"):
            return
        back = frame.f_back
        while back is not None and module_of(back.f_code.co_filename) is None:
            back = back.f_back
        caller = module_of(back.f_code.co_filename) if back is not None else None
        if caller != callee:
            entries[callee] += 1
            order.append(callee)

    import threading

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    path = [m for m in order if not m.startswith(LEAVES)]
    stays = [m for i, m in enumerate(path) if i == 0 or path[i - 1] != m]
    return {
        "modules": len(entries),
        "crossings": sum(entries.values()),
        "path": {"stays": len(stays), "modules": len(set(stays)), "returns": len(stays) - len(set(stays)),
                 "sequence": stays},
        "per_module": dict(entries.most_common()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-trace", action="store_true", help="skip the live query trace (it loads the embedder)")
    args = parser.parse_args()
    report: dict[str, object] = {
        "page_backend_names": page_backend_names(),
        "retriever_branches": retriever_branches(),
        "in_function_project_imports": in_function_project_imports(),
        "progress_helpers": progress_helpers(),
    }
    if not args.no_trace:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ.setdefault("CHUNKLAB_DATA_DIR", tmp)
            os.environ.setdefault("CHUNKLAB_CACHE_DIR", os.path.join(tmp, "cache"))
            report["live_query"] = live_query_trace()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
