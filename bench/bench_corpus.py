"""Corpus runs: ``--engine ray`` with 2 workers against ``--engine local``, on 200 documents made from the samples.

The corpus (``--docs``, default 200) is made here from the bundled samples: distinct slices of the
narrative, Chinese and technical samples as ``.txt`` and ``.md`` files, ``.html`` pages of the
release notes' paragraphs with a slice of the narrative each, and ``.docx`` (python-docx) and ``.pdf`` (reportlab) files of slices,
the way the loaders' tests build theirs. Two runs, each on both engines with a fresh output
folder and a fresh cache folder, timed end to end (the Ray engine's start, actors and shutdown
included):

1. model-free: ``stats`` for three model-free chunkers (recursive, sentence, paragraph);
2. one model metric: ``ds`` (the bundled all-MiniLM-L6-v2 embedder) for two chunkers.

For each it prints the wall times, the ratio ray/local measured in this run, and when the first
document's rows were written (what a page would show first). Then the per-document cost by kind
of work, from the rows' ``work`` of the local runs (chunking, quality and retrieval seconds, pairs
scored and texts embedded per document), and — from a small BC run on ``--bc-docs`` documents with
``--pairs 8`` — the seconds per scored pair of the bundled SmolLM2-135M: the figures the docs'
"Scale on paper" (docs/corpus-runs.md) projects from. The machine's load average is printed before and after: the
machine is shared, so compare the ratios of one run only. Nothing is asserted.

Run:  .venv/bin/python bench/bench_corpus.py [--docs 200] [--workers 2] [--bc-docs 6]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from html import escape as html_escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from backend.chunkers import make_chunker  # noqa: E402
from backend.chunking import ChunkerConfig  # noqa: E402
from backend.corpus.engine import LocalEngine, run_corpus  # noqa: E402
from backend.corpus.ray_engine import RayEngine  # noqa: E402
from backend.corpus.results import read_results  # noqa: E402
from backend.corpus.spec import CorpusSpec, tag_configs  # noqa: E402
from backend.models.cache import OutputCache  # noqa: E402

SAMPLES = ROOT / "assets" / "samples"
MODEL_FREE = ("recursive chunk_size=120", "sentence chunk_size=80", "paragraph")
WITH_MODEL = ("recursive chunk_size=120", "sentence chunk_size=80")


def _config(spec: str):
    name, params, tokenizer = ChunkerConfig.parse(spec)
    return make_chunker(name, params, tokenizer).config


def _slice(text: str, i: int, size: int) -> str:
    """A distinct slice of ``text`` (its start moves with ``i``), cut at whitespace."""
    start = (i * 397) % max(1, len(text) - size)
    start = text.find(" ", start) + 1 if text.find(" ", start) >= 0 else start
    return text[start:start + size].strip()


def _docx(text: str) -> bytes:
    import docx

    document = docx.Document()
    for para in text.split("\n\n"):
        if para.strip():
            document.add_paragraph(para.strip())
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _pdf(text: str) -> bytes:
    from xml.sax.saxutils import escape

    from reportlab import rl_config
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    rl_config.invariant = 1
    buffer = io.BytesIO()
    style = getSampleStyleSheet()["BodyText"]
    SimpleDocTemplate(buffer, pagesize=A4).build(
        [Paragraph(escape(p.strip()), style) for p in text.split("\n\n") if p.strip()])
    return buffer.getvalue()


def make_corpus(folder: Path, count: int) -> dict[str, int]:
    """``count`` distinct documents in ``folder``; how many of each format."""
    narrative = (SAMPLES / "narrative_clockmaker.txt").read_text(encoding="utf-8")
    chinese = (SAMPLES / "chinese_teahouse.txt").read_text(encoding="utf-8")
    technical = (SAMPLES / "technical_kestrel.md").read_text(encoding="utf-8")
    html = (SAMPLES / "release_notes.html").read_text(encoding="utf-8")
    head, _, rest = html.partition("<body>")
    blocks = [b[b.index("<p"):] + "</p>" for b in rest.split("</p>")[:-1] if "<p" in b]
    kinds: dict[str, int] = {}
    for i in range(count):
        kind = ("txt", "md", "html", "txt-zh", "docx", "pdf", "md", "txt")[i % 8]
        size = 1200 + (i * 131) % 1600
        if kind == "txt":
            name, data = f"narrative/{i:03d}.txt", _slice(narrative, i, size).encode()
        elif kind == "txt-zh":
            name, data = f"chinese/{i:03d}.txt", _slice(chinese, i, size // 3).encode()
        elif kind == "md":
            name, data = f"technical/{i:03d}.md", _slice(technical, i, size).encode()
        elif kind == "html":
            k = 2 + i % max(1, len(blocks) - 2)
            picked = [blocks[(i + j) % len(blocks)] for j in range(k)]
            own = "".join(f"<p>{html_escape(p)}</p>" for p in _slice(narrative, i + 3, size // 2).split("\n\n") if p.strip())
            name, data = f"web/{i:03d}.html", f"{head}<body>{''.join(picked)}{own}</body></html>".encode()
        elif kind == "docx":
            name, data = f"office/{i:03d}.docx", _docx(_slice(narrative, i + 7, size))
        else:
            name, data = f"office/{i:03d}.pdf", _pdf(_slice(technical, i + 11, size))
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        ext = Path(name).suffix
        kinds[ext] = kinds.get(ext, 0) + 1
    return kinds


def timed_run(corpus: Path, spec: CorpusSpec, engine, out: Path) -> tuple[float, float, object]:
    """Wall seconds, seconds to the first document's rows, and the run."""
    t0 = time.perf_counter()
    first: list[float] = []

    def on_rows(outcome) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    result = run_corpus(corpus, spec, out, engine=engine, on_rows=on_rows)
    return time.perf_counter() - t0, first[0] if first else float("nan"), result


def per_document(out: Path) -> dict[str, float]:
    """Mean per document of each kind of work (summed over the document's configurations)."""
    docs: dict[str, dict[str, float]] = {}
    for row in read_results(out).rows:
        work = row.get("work")
        if work is None:
            continue
        d = docs.setdefault(row["doc"], {})
        for k, v in work.items():
            d[k] = d.get(k, 0.0) + float(v)
    keys = ("chunk_s", "quality_s", "retrieval_s", "pairs_scored", "texts_embedded")
    return {k: statistics.fmean(d.get(k, 0.0) for d in docs.values()) if docs else 0.0 for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bc-docs", type=int, default=6, help="documents of the BC run (0: skip it)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    os.environ.setdefault("CHUNKLAB_DATA_DIR", str(work / "data"))
    try:
        corpus = work / "corpus"
        kinds = make_corpus(corpus, args.docs)
        print(f"corpus: {args.docs} documents made from assets/samples ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before")
        runs = (("model-free (stats; recursive, sentence, paragraph)", MODEL_FREE, ("stats",)),
                ("one model metric (ds, all-MiniLM-L6-v2; recursive, sentence)", WITH_MODEL, ("stats", "ds")))
        costs = {}
        for title, configs, metrics in runs:
            spec = CorpusSpec(configs=tag_configs([_config(c) for c in configs]), metrics=metrics)
            tag = metrics[-1]
            local_s, local_first, local = timed_run(
                corpus, spec, LocalEngine(cache=OutputCache(work / f"cache-local-{tag}"),
                                          store_path=work / f"local-{tag}" / "chroma"), work / f"local-{tag}")
            ray_engine = RayEngine(workers=args.workers, cache=OutputCache(work / f"cache-ray-{tag}"))
            ray_s, ray_first, on_ray = timed_run(corpus, spec, ray_engine, work / f"ray-{tag}")
            differing, largest = _difference(_numbers(work / f"local-{tag}"), _numbers(work / f"ray-{tag}"))
            print(f"\n{title}: {len(spec.configs)} configurations x {local.ran} documents"
                  f" ({len(local.skipped)} skipped, {len(on_ray.skipped)} on ray)")
            print(f"  local          {local_s:7.1f} s   first document's rows after {local_first:5.1f} s")
            print(f"  ray, {args.workers} workers {ray_s:7.1f} s   first document's rows after {ray_first:5.1f} s"
                  f"   ({ray_engine.plan['scorer_actors']} LM actor, {ray_engine.plan['embedder_actors']} embedder actor)")
            print(f"  ratio ray/local: {ray_s / local_s:.2f}   rows whose numbers differ (all but work): {differing} of "
                  f"{len(_numbers(work / f'local-{tag}'))}, by at most {largest:.1e}")
            print(f"  model work: local {local.counts}, ray {on_ray.counts}")
            print("  (where two documents share a chunk's text the local engine reuses the vector the first one stored, "
                  "embedded in another batch; a Ray task running beside it cannot see it yet and embeds it in its own: "
                  "more texts embedded, and float32 rounding of a batch in DS's last digits)")
            costs[tag] = per_document(work / f"local-{tag}")
        if args.bc_docs > 0:
            sub = work / "bc-corpus"
            for f in sorted(p for p in corpus.rglob("*") if p.suffix in (".txt", ".md"))[: args.bc_docs]:
                dest = sub / f.relative_to(corpus)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(f, dest)
            spec = CorpusSpec(configs=tag_configs([_config(WITH_MODEL[0])]), metrics=("stats", "bc"), pairs=8)
            bc_s, _, bc = timed_run(sub, spec, LocalEngine(cache=OutputCache(work / "cache-bc"),
                                                           store_path=work / "bc" / "chroma"), work / "bc")
            costs["bc"] = per_document(work / "bc")
            print(f"\nBC with --pairs 8 (SmolLM2-135M), local, {bc.ran} text documents, 1 configuration: {bc_s:.1f} s "
                  f"(model load included), {bc.counts['pairs_scored']} pairs scored")
        print("\nper document, local engine (mean over documents, summed over configurations):")
        print(f"  {'run':<6} {'chunk_s':>8} {'quality_s':>10} {'retrieval_s':>12} {'pairs':>6} {'texts':>6}")
        for tag, c in costs.items():
            print(f"  {tag:<6} {c['chunk_s']:8.4f} {c['quality_s']:10.4f} {c['retrieval_s']:12.4f} "
                  f"{c['pairs_scored']:6.1f} {c['texts_embedded']:6.1f}")
        if "ds" in costs:
            print(f"  embedder: {_rate(work / 'local-ds', 'texts_embedded') * 1000:.1f} ms per text embedded "
                  "(DS's quality seconds / texts, the first document's, which loads the model, left out)")
        if "bc" in costs:
            print(f"  language model: {_rate(work / 'bc', 'pairs_scored'):.3f} s per pair scored "
                  "(BC's quality seconds / pairs, the first document's, which loads the model, left out)")
        print(f"\nload average {os.getloadavg()[0]:.2f} after")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rate(out: Path, unit: str) -> float:
    """Quality seconds per ``unit`` (pairs or texts) over the documents after the first one written."""
    rows = [r for r in read_results(out).rows if "work" in r]
    later = [r for r in rows if r["doc"] != rows[0]["doc"]] if rows else []
    units = sum(r["work"][unit] for r in later)
    return sum(r["work"]["quality_s"] for r in later) / units if units else float("nan")


def _difference(a: dict, b: dict) -> tuple[int, float]:
    """Rows that differ between two runs, and the largest absolute difference of a number (inf: not a number)."""
    def flat(row: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in row.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    differing, largest = 0, 0.0
    for key in a.keys() | b.keys():
        x, y = flat(a.get(key, {})), flat(b.get(key, {}))
        if x == y:
            continue
        differing += 1
        for f in x.keys() | y.keys():
            u, v = x.get(f), y.get(f)
            if u != v:
                both = isinstance(u, (int, float)) and isinstance(v, (int, float))
                largest = max(largest, abs(u - v) if both else float("inf"))
    return differing, largest


def _numbers(out: Path) -> dict:
    rows = {}
    for r in read_results(out).rows:
        r = dict(r)
        r.pop("work", None)  # what it cost: a document may reuse a vector another one's task had not stored yet
        rows[(r["doc"], r["config"])] = r
    return rows


if __name__ == "__main__":
    main()
