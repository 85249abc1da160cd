"""MoG, MoGG and FreeChunker indexes before and after "each distinct text embedded once": build time and first search.

What "before" is: the code of ``backend/retrieval/multi/index.py`` at a commit before the change
(``--before`` 26bfc3e, the branch point of issue 24's work), read with ``git show`` and imported as a
module of its own; it runs against today's store, embedder, output cache and chunkers, so the only
difference measured is the index builder (each level embedded by its own call, every text of it,
against one call of the distinct texts of all levels, texts the model reads alike once). Both are
measured in the same run, on the same machine, alternating (before, after, after, before, …) so a
change of load hits both alike; the best of ``--repeat`` runs of each is kept.

Each build starts from a fresh embedded Chroma store and a fresh output cache in a temporary folder
(nothing cached: every text is embedded), with the bundled all-MiniLM-L6-v2 loaded and warmed up
before timing (loading is not counted) and torch on ``--threads`` intra-op threads (1 by default;
CHUNKLAB_TORCH_THREADS is set to the same). Retrievers run with their default parameters.

- **index**: ``LevelRetriever.index`` of one document, per retriever: seconds, texts embedded,
  entries over all levels; the ratio is before / after.
- **first search**: what the Retrieval page's first search with the three retrievers does on a
  fresh store and cache (``LevelRetriever.answer`` of each: its index, then the query; no question
  set, so ``router=cv`` falls back to uniform weights): seconds before and after, and whether the
  picks (ranges and level) are the same.

Documents: by default (quick, a few minutes on a loaded 2-core machine) the bundled sample
``technical`` (``--sample NAME`` for another); ``--pdf PATH`` loads a file with the project's loader
(the issue's 36-page PDF: /usr/share/doc/libtasn1-doc/libtasn1.pdf).

Run:  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/bench_multi_index.py
          [--sample technical | --pdf PATH] [--retrievers mog,mogg,freechunker] [--repeat 1]
          [--skip-search] [--threads 1] [--before-threads N] [--before COMMIT] [--json OUT]

``--before-threads 2`` (on this 2-core machine) runs "before" as the app ran before issue 24: the old
index builder on torch's default of one thread per core, against the new builder on the new default of
one thread here (see CHUNKLAB_TORCH_THREADS in the docs' environment variables).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from backend.chunkers import make_chunker  # noqa: E402
from backend.errors import ChunkLabError  # noqa: E402
from backend.loaders import load_document  # noqa: E402
from backend.models.cache import OutputCache  # noqa: E402
from backend.models.embedder import load_embedder  # noqa: E402
from backend.retrieval.multi.index import CountingEmbedder  # noqa: E402
from backend.retrieval.retriever.levels import LevelRetriever  # noqa: E402
from backend.retrieval.store import ChunkStore  # noqa: E402
from backend.samples import load_sample  # noqa: E402
from backend.text.document import Document  # noqa: E402

BEFORE = "26bfc3e"  # the branch point of issue 24: per-level embedding calls
RETRIEVERS = ("mog", "mogg", "freechunker")
QUERY = "How is an encoding decoded, and what errors can it return?"
INDEX_PATH = "backend/retrieval/multi/index.py"


def load_before(commit: str, folder: Path) -> Any:
    """The index module as it was at ``commit`` (``git show``), imported under a name of its own."""
    try:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{INDEX_PATH}"], check=True,
                                capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        sys.exit(f"bench_multi_index: cannot read {INDEX_PATH} at {commit} with git: {detail}")
    path = folder / "index_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("chunklab_index_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class BeforeRetriever(LevelRetriever):
    """A level retriever whose index is built by the old code."""

    old: Any = None

    def index(self, doc, store, embedder, *, cache=None, progress=None):
        return self.old.build_index(doc, self.chunker, self.finest_units(doc), store, embedder, cache=cache,
                                    progress=progress)


def fresh(folder: Path, tag: str) -> tuple[ChunkStore, OutputCache]:
    """An empty embedded Chroma store and an empty output cache."""
    where = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=folder))
    return ChunkStore(path=where / "chroma"), OutputCache(where / "cache")


def build_once(kind: type[LevelRetriever], name: str, doc: Document, embedder: Any, folder: Path) -> dict[str, Any]:
    """One index of ``doc`` from nothing: seconds, texts embedded, entries."""
    store, cache = fresh(folder, f"{name}-{kind.__name__}")
    counting = CountingEmbedder(embedder)
    retriever = kind(make_chunker(name, {}).config)
    t0 = time.perf_counter()
    index = retriever.index(doc, store, counting, cache=cache)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "texts_embedded": counting.texts, "entries": index.entries,
            "levels": [len(lv) for lv in index.levels]}


def search_once(kind: type[LevelRetriever], names: list[str], doc: Document, embedder: Any, folder: Path) -> dict:
    """The first search of the retrievers on a fresh store and cache: seconds, texts embedded, the picks."""
    store, cache = fresh(folder, f"search-{kind.__name__}")
    counting = CountingEmbedder(embedder)
    picks = {}
    t0 = time.perf_counter()
    for name in names:
        answer = kind(make_chunker(name, {}).config).answer(doc, store, counting, QUERY, 5, cache=cache)
        picks[name] = [(p.level, [list(r) for r in p.ranges]) for p in answer.live.selection.picks]
    return {"seconds": time.perf_counter() - t0, "texts_embedded": counting.texts, "picks": picks}


def on_threads(threads: int, fn: Callable[[], dict]) -> Callable[[], dict]:
    """``fn`` run with torch on ``threads`` intra-op threads (0: leave them), the setting restored after."""
    import torch

    def run() -> dict:
        kept = torch.get_num_threads()
        if threads > 0:
            torch.set_num_threads(threads)
        try:
            return fn()
        finally:
            torch.set_num_threads(kept)

    return run


def alternate(repeat: int, before: Callable[[], dict], after: Callable[[], dict]) -> tuple[dict, dict]:
    """Run both ``repeat`` times, alternating which goes first; the fastest run of each."""
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(repeat):
        order = (("before", before), ("after", after)) if i % 2 == 0 else (("after", after), ("before", before))
        for key, fn in order:
            runs[key].append(fn())
    return min(runs["before"], key=lambda r: r["seconds"]), min(runs["after"], key=lambda r: r["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--sample", default="technical", help="a bundled sample (default: technical)")
    where.add_argument("--pdf", metavar="PATH", help="a document file, loaded with the project's loader")
    parser.add_argument("--retrievers", default=",".join(RETRIEVERS), help="comma-separated: mog,mogg,freechunker")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (the fastest is kept)")
    parser.add_argument("--skip-search", action="store_true", help="only the index builds")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--before-threads", type=int, default=0,
                        help="torch threads of the 'before' runs (default: --threads; "
                             f"{os.cpu_count()}: the default before issue 24, one per core)")
    parser.add_argument("--before", default=BEFORE, help=f"the commit whose {INDEX_PATH} is 'before'")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = parser.parse_args()
    names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
    bad = [n for n in names if n not in RETRIEVERS]
    if bad or not names:
        parser.error(f"--retrievers: {', '.join(bad) or '(none)'} not among {', '.join(RETRIEVERS)}")
    if args.repeat < 1:
        parser.error(f"--repeat ({args.repeat}) must be at least 1")
    if args.threads > 0:
        os.environ["CHUNKLAB_TORCH_THREADS"] = str(args.threads)
    if args.before_threads < 0:
        parser.error(f"--before-threads ({args.before_threads}) must be at least 0")
    before_threads = args.before_threads or args.threads
    try:
        doc = load_document(args.pdf) if args.pdf else load_sample(args.sample)
    except (ChunkLabError, OSError) as e:
        sys.exit(f"bench_multi_index: {e}")

    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    embedder = load_embedder(device="cpu")
    embedder.embed(["warm-up", doc.text[:2000]])  # not timed
    what = args.pdf or f"sample:{args.sample}"
    print(f"document {what}: {len(doc.text):,} characters, {len(doc.sentences):,} sentences; embedder "
          f"{embedder.info.name} on the CPU, torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"before: {INDEX_PATH} at {args.before} on {before_threads or 'default'} torch thread(s); after: this "
          f"checkout on {torch.get_num_threads()}. Fresh store and cache for every run; "
          f"best of {args.repeat}.\n")
    out: dict[str, Any] = {"document": what, "characters": len(doc.text), "before": args.before,
                           "torch_threads": torch.get_num_threads(), "before_threads": before_threads, "load_start": os.getloadavg(), "index": {}}
    with tempfile.TemporaryDirectory(prefix="bench-multi-index-") as tmp:
        folder = Path(tmp)
        BeforeRetriever.old = load_before(args.before, folder)
        print(f"{'index':12s} {'before s':>9s} {'after s':>8s} {'ratio':>6s}   texts embedded before → after   entries")
        for name in names:
            b, a = alternate(args.repeat,
                             on_threads(before_threads, partial(build_once, BeforeRetriever, name, doc, embedder, folder)),
                             partial(build_once, LevelRetriever, name, doc, embedder, folder))
            ratio = b["seconds"] / a["seconds"]
            out["index"][name] = {"before": b, "after": a, "ratio": ratio}
            print(f"{name:12s} {b['seconds']:9.1f} {a['seconds']:8.1f} {ratio:5.2f}x   "
                  f"{b['texts_embedded']:>6,} → {a['texts_embedded']:<6,}{'':17s} {a['entries']:,}", flush=True)
        if not args.skip_search:
            b, a = alternate(args.repeat,
                             on_threads(before_threads, lambda: search_once(BeforeRetriever, names, doc, embedder, folder)),
                             lambda: search_once(LevelRetriever, names, doc, embedder, folder))
            same = b["picks"] == a["picks"]
            out["first_search"] = {"before": b, "after": a, "ratio": b["seconds"] / a["seconds"], "same_picks": same}
            print(f"\nfirst search ({'+'.join(names)}, k=5, fresh store and cache): {b['seconds']:.1f} s before, "
                  f"{a['seconds']:.1f} s after: {b['seconds'] / a['seconds']:.2f}x; texts embedded "
                  f"{b['texts_embedded']:,} → {a['texts_embedded']:,}; same picks: {'yes' if same else 'NO'}")
    out["load_end"] = os.getloadavg()
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in out['load_end'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
