"""The shape of the code, checked from its source: one-way imports, a pure backend, no private reach-ins.

The import graph of ``backend/``, ``components/`` and ``pages/`` is built with :mod:`ast` from every
``import`` statement, wherever it stands: at the top, inside a function (the usual way a cycle is
hidden) or under ``if TYPE_CHECKING:`` (a type-only import is still a dependency a reader follows).
An edge goes to the module that is named; ``from pkg import name`` goes to ``pkg.name`` when that
is a module, else to the package ``pkg`` itself.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("backend", "chunklab", "components", "pages")
# A layer imports only itself and the layers before it: chunklab, the library's face, sits on backend alone.
LAYERS = ("backend", "chunklab", "components", "pages")
# Inside backend, the data's one way: file → Document → spans → chunkers → Chunking → metrics / store → CLI.
# A module imports only its own layer and the layers before it (the package root may import anything).
BACKEND_LAYERS = (
    ("errors", "config", "chunking", "curves", "progress"),  # types, settings and progress every layer shares
    ("tokenizers", "text"),  # Document, spans, segmentation, token counts
    ("loaders", "samples"),  # file → Document
    ("models",),  # language models, embedders, chat, the output cache
    ("jobs",),  # background work with progress and cancel
    ("chunkers",),  # Document → Chunking (registry, model context, the one loop over configurations)
    ("metrics",),  # Chunking → statistics and quality metrics
    ("retrieval",),  # Chunking → Chroma store, questions, benchmark
    ("corpus",),  # many documents × configurations → rows (local or Ray engines), aggregates
    ("tune",),  # the search over the chunkers' declared ranges (Optuna): trials, held-out check, the pick
    ("figures",),  # Plotly figures of everything above (no Streamlit): pages and the one-file report draw them
    ("report",),  # the Summary's rows and verdict, the one-file HTML report, saved sessions
    ("lab",),  # the lab's tasks: one module per thing a page or a subcommand does (plan, run, what to show)
    ("cli", "__main__"),  # python -m backend
)


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (project modules only)
    name: str | None  # the imported name for ``from X import name``, else None
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            mods[module_name(path)] = path
    return mods


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, mods: dict[str, Path]) -> list[Import]:
    out: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    out.append(Import(module, alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path, node)
            if target.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in mods:
                    out.append(Import(module, sub, None, node.lineno))
                else:
                    out.append(Import(module, target, alias.name, node.lineno))
    return out


def import_graph() -> tuple[dict[str, set[str]], list[Import]]:
    mods = project_modules()
    edges: list[Import] = []
    for module, path in mods.items():
        edges.extend(imports_of(module, path, mods))
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for e in edges:
        if e.target != e.source:
            graph[e.source].add(e.target)
    return graph, edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_graph_sees_every_kind_of_import(tmp_path):
    # The checker itself: top-level, function-level, TYPE_CHECKING and relative imports all count.
    mods = {"backend.a": tmp_path / "a.py", "backend.b": tmp_path / "b.py", "backend.pkg": tmp_path / "__init__.py"}
    src = (
        "from typing import TYPE_CHECKING\n"
        "import backend.b\n"
        "if TYPE_CHECKING:\n    from backend.pkg import Thing\n"
        "def f():\n    from backend.b import _hidden\n"
    )
    found = imports_of("backend.a", _write(tmp_path / "a.py", src), mods)
    assert [(i.target, i.name) for i in found] == [("backend.b", None), ("backend.pkg", "Thing"), ("backend.b", "_hidden")]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_no_import_cycles():
    graph, _ = import_graph()
    assert cycles(graph) == []


def test_layers_import_only_downward():
    # backend never imports components or pages; components never import pages.
    _, edges = import_graph()
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in edges
        if rank[e.target.split(".")[0]] > rank[e.source.split(".")[0]]
    ]
    assert upward == []


def backend_layer(module: str) -> int | None:
    """The index in BACKEND_LAYERS of a backend module's layer; None for the package root."""
    parts = module.split(".")
    if parts[0] != "backend" or len(parts) == 1:
        return None
    for i, names in enumerate(BACKEND_LAYERS):
        if parts[1] in names:
            return i
    raise AssertionError(f"{module}: add its package to BACKEND_LAYERS")


def test_backend_layers_import_only_downward():
    _, edges = import_graph()
    upward = []
    for e in edges:
        src, dst = backend_layer(e.source), backend_layer(e.target)
        if src is not None and dst is not None and dst > src:
            upward.append(f"{e.source}:{e.line} imports {e.target}")
    assert upward == []


def test_backend_never_imports_streamlit():
    offenders = []
    for module, path in project_modules().items():
        if not module.startswith("backend"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            offenders += [f"{module}:{node.lineno}" for n in names if n.split(".")[0] == "streamlit"]
    assert offenders == []


def test_no_private_name_crosses_modules():
    # ``from x import _name`` (or ``import x._mod``) from another module: promote the name instead.
    _, edges = import_graph()
    private = [
        f"{e.source}:{e.line} imports {e.target}.{e.name}"
        for e in edges
        if (e.name or "").startswith("_") and e.name != "__version__"
    ]
    private += [
        f"{e.source}:{e.line} imports {e.target}"
        for e in edges
        if any(part.startswith("_") and part != "__init__" for part in e.target.split("."))
    ]
    assert private == []


def test_package_inits_reexport_only_their_own_modules():
    # chonkie's one-way __init__: what a package offers in ``__all__`` comes from its own modules.
    offenders = []
    mods = project_modules()
    for module, path in mods.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exported: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                exported = {elt.value for elt in node.value.elts}  # type: ignore[attr-defined]
        for e in imports_of(module, path, mods):
            inside = e.target == module or e.target.startswith(module + ".")
            if not inside and e.name in exported:
                offenders.append(f"{module}:{e.line} re-exports {e.target}.{e.name}")
    assert offenders == []



def test_metric_formulas_are_tables_in_numbers_out():
    # One room, one job: the formulas of BC, CS and DS read a pair table or embeddings and return numbers.
    # Which pairs to score, scoring them and reading them back is backend.metrics.scores; the formulas
    # import neither it nor a model, the cache or the scorer, so a walk through a metrics call enters each once.
    graph, _ = import_graph()
    assert graph["backend.metrics.formulas"] <= {"backend.errors", "backend.metrics.estimate"}
    assert "backend.metrics.formulas" in graph["backend.metrics.scores"]

# --- contracts you can read: imports at the top, lazy only for heavy dependencies in their adapters ---------

# Third-party modules a function may import lazily, and the only modules that may: each is slow to import
# (measured on the 2-core CI machine: torch, transformers and sentence-transformers take seconds, chromadb
# about 1 s, openai ~0.6 s, bm25s ~1 s with scipy, the document parsers and gguf 0.2-0.5 s) and needed only by
# the adapter that wraps it, so `import backend` and every command that does not use it stay fast
# (tests/backend/test_imports.py). Everything else is imported at the top of its module.
# The model adapters outside backend/models: FreeChunker's encoder, MoG's router MLP (trained with torch), and
# question generation's local chat model.
_MODEL_ADAPTERS = (
    "backend.models.", "backend.retrieval.multi.freechunker", "backend.retrieval.multi.level_router",
    "backend.retrieval.generation",
)
LAZY_IMPORTS: dict[str, tuple[str, ...]] = {
    "torch": _MODEL_ADAPTERS,
    "transformers": ("backend.models.", "backend.tokenizers"),
    "safetensors": _MODEL_ADAPTERS,
    "sentence_transformers": ("backend.models.",),
    "accelerate": ("backend.models.",),
    "gguf": ("backend.models.", "backend.tokenizers"),
    "chromadb": ("backend.retrieval.store",),
    "openai": ("backend.models.",),
    "httpx": ("backend.models.openai_compat", "backend.retrieval.store"),
    "pypdfium2": ("backend.loaders.",),
    "docx": ("backend.loaders.",),
    "bs4": ("backend.loaders.",),
    "lxml": ("backend.loaders.",),
    "blingfire": ("backend.text.blingfire",),
    "numpy": ("backend.text.blingfire",),  # segmentation alone loads no numpy (tests/backend/text/test_segment.py)
    "tiktoken": ("backend.tokenizers",),
    "tokenizers": ("backend.tokenizers",),
    "bm25s": ("backend.retrieval.multi.graph",),
    "kaleido": ("backend.figures.export",),
    "ray": ("backend.corpus.ray_engine",),
}


@dataclass(frozen=True)
class LocalImport:
    module: str  # the importing module
    target: str  # the imported module, as written (absolute)
    line: int


def local_imports(module: str, path: Path) -> list[LocalImport]:
    """Every ``import`` inside a function or class body of ``module`` (each statement once)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    seen: dict[int, LocalImport] = {}
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(scope):
            if id(node) in seen:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    seen[id(node)] = LocalImport(module, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                target = _absolute(module, path, node) if node.level else node.module or ""
                seen[id(node)] = LocalImport(module, target, node.lineno)
    return sorted(seen.values(), key=lambda i: i.line)


def import_rule_violations(found: list[LocalImport]) -> list[str]:
    """The local imports that break the rule: any project module, or a third-party one outside its adapter."""
    out = []
    for imp in found:
        root = imp.target.split(".")[0]
        if root in PACKAGES or root in ("tests", "bench"):
            out.append(f"{imp.module}:{imp.line} imports {imp.target} inside a function (move it to the top)")
            continue
        allowed = LAZY_IMPORTS.get(root)
        if allowed is None or not any(imp.module == a.rstrip(".") or imp.module.startswith(a) for a in allowed):
            out.append(f"{imp.module}:{imp.line} imports {imp.target} lazily (not a heavy dependency in its adapter)")
    return out


def test_imports_are_at_the_top_and_lazy_only_for_heavy_dependencies_in_their_adapters():
    found = [imp for module, path in project_modules().items() for imp in local_imports(module, path)]
    assert import_rule_violations(found) == []


def test_the_import_rule_fails_on_a_crafted_module(tmp_path):
    src = (
        "import numpy as np\n"
        "def load():\n    import torch\n    return torch\n"
        "def hidden():\n    from backend.errors import InputError\n    return InputError\n"
        "def plot():\n    import plotly.graph_objects as go\n    return go\n"
        "class C:\n    def m(self):\n        from . import sibling\n"
    )
    path = _write(tmp_path / "mod.py", src)
    in_adapter = import_rule_violations(local_imports("backend.models.fake", path))
    assert in_adapter == [
        "backend.models.fake:6 imports backend.errors inside a function (move it to the top)",
        "backend.models.fake:9 imports plotly.graph_objects lazily (not a heavy dependency in its adapter)",
        "backend.models.fake:13 imports backend.models inside a function (move it to the top)",
    ]
    elsewhere = import_rule_violations(local_imports("backend.metrics.fake", path))
    assert elsewhere[0] == "backend.metrics.fake:3 imports torch lazily (not a heavy dependency in its adapter)"


# --- private names: tests and benchmarks use the public API too --------------------------------------


def private_imports(root: Path, packages: tuple[str, ...]) -> list[str]:
    """``from project.module import _name`` anywhere under ``packages`` of ``root``."""
    out = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom) or not node.module:
                    continue
                if node.module.split(".")[0] not in (*PACKAGES, "tests", "bench"):
                    continue
                out += [
                    f"{path.relative_to(root)}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return out


def test_tests_and_benchmarks_import_no_private_name():
    assert private_imports(ROOT, ("tests", "bench", "scripts")) == []


def test_the_private_name_rule_fails_on_a_crafted_test(tmp_path):
    (tmp_path / "tests").mkdir()
    _write(tmp_path / "tests" / "test_x.py", "from backend.models.remote import RemoteScorer, _align\n")
    assert private_imports(tmp_path, ("tests",)) == ["tests/test_x.py:1 imports backend.models.remote._align"]


# --- pages read widgets, make one call and render ---------------------------------------------------------

# What a page or component must not loop over: the document's units and a chunking's parts are the
# backend's business (backend/lab for data, backend/figures for views), so the page and the CLI agree.
UNIT_NAMES = frozenset({
    "chunks", "sentences", "tokens", "token_counts", "spans", "hits", "picks", "ranges", "units", "pages",
    "questions", "starts", "ends", "nll",
})


def _names_in(node: ast.AST) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Name):
            names.add(sub.id)
    return names


def unit_loops(module: str, path: Path) -> list[str]:
    """Loops and comprehensions of ``module`` whose iterable walks a document's or a chunking's units."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        iters = []
        if isinstance(node, (ast.For, ast.AsyncFor)):
            iters = [node.iter]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            iters = [g.iter for g in node.generators]
        for it in iters:
            hit = sorted(_names_in(it) & UNIT_NAMES)
            if hit:
                out.append(f"{module}:{it.lineno} loops over {', '.join(hit)}")
    return out


def test_pages_and_components_loop_over_no_unit():
    found = []
    for module, path in project_modules().items():
        if module.split(".")[0] in ("pages", "components"):
            found += unit_loops(module, path)
    assert found == []


def test_the_loop_rule_fails_on_a_crafted_page(tmp_path):
    src = (
        "for e in entries:\n    pass\n"  # the session's configurations: fine
        "texts = [c.text for c in chunking.chunks]\n"
        "total = sum(s.tokens for s in doc.sentences)\n"
    )
    found = unit_loops("pages.fake", _write(tmp_path / "fake.py", src))
    assert found == ["pages.fake:3 loops over chunks", "pages.fake:4 loops over sentences"]


def job_calls(module: str, path: Path) -> list[str]:
    """Calls that start a job or plan one by hand: ``start_job(…)`` and ``JobPlan(…)``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("start_job", "JobPlan"):
                out.append(f"{module}:{node.lineno} calls {name} (a job's plan comes from backend.lab)")
    return out


def test_pages_and_components_build_no_job():
    found = []
    for module, path in project_modules().items():
        if module.split(".")[0] in ("pages", "components"):
            found += job_calls(module, path)
    assert found == []


def test_the_job_rule_fails_on_a_crafted_page(tmp_path):
    src = "job = start_job('x', fn, signature=(doc.id, 3))\nplan = JobPlan('t', ('sig',), body)\nplan.start()\n"
    assert job_calls("pages.fake", _write(tmp_path / "fake.py", src)) == [
        "pages.fake:1 calls start_job (a job's plan comes from backend.lab)",
        "pages.fake:2 calls JobPlan (a job's plan comes from backend.lab)",
    ]


# --- a page's surface on the backend: few names, each a call a form handler makes --------------------------

# The most distinct backend names a page may import (``from backend.x import a`` counts ``a``, ``import
# backend.x`` counts ``backend.x``; scripts/architecture_stats.py reports the same count per page). A page
# that needs more is planning work that belongs in backend/lab. Lower it as the largest pages thin out
# (2026-11-28: retrieval 16, ppl 15, corpus 13, benchmark 11, edit 10).
MAX_PAGE_BACKEND_NAMES = 16


def page_backend_names(path: Path) -> set[str]:
    """The distinct backend names a page imports, as ``module.name`` (or the module, for ``import backend.x``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "backend":
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "backend")
    return names


def test_pages_import_few_backend_names():
    over = {
        module: len(names)
        for module, path in project_modules().items()
        if module.startswith("pages.") and len(names := page_backend_names(path)) > MAX_PAGE_BACKEND_NAMES
    }
    assert over == {}


def test_the_page_name_count_fails_on_a_crafted_page(tmp_path):
    src = (
        "import backend.lab.compare\n"
        "from backend.errors import ChunkLabError, one_line\n"
        "from backend.lab.compare import chunk_entries\n"
        "from components.keys import COMPARE\n"
        "def f():\n    from backend.errors import one_line\n"
    )
    assert page_backend_names(_write(tmp_path / "fake.py", src)) == {
        "backend.lab.compare", "backend.errors.ChunkLabError", "backend.errors.one_line",
        "backend.lab.compare.chunk_entries",
    }
