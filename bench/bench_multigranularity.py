"""Multi-granularity retrievers (MoG, MoGG, FreeChunker) against fixed chunkers: retrieval scores and index cost.

Part 1 — retrieval. One ``evaluate`` run (``retrieve=5``, cross-corpus, the bundled
all-MiniLM-L6-v2 on the CPU unless CHUNKLAB_DEVICE says otherwise) over these rows, side by side:

- ``mog`` with ``router=cv`` (a router cross-fitted in 5 folds on the question set itself);
- ``mogg`` with ``router=cv``, ``edge=cosine``;
- ``freechunker`` with ``encoder=mean`` and with ``encoder=exact``;
- ``recursive`` at 50, 100, 200, 400 and 800 tokens: plain chunkings at MoG's five level
  sizes. They are close analogues of the levels, not the levels themselves: MoG's level 1 is
  ``recursive`` at 50 tokens, but its level j joins two adjacent level-(j−1) chunks, whereas
  ``recursive`` at 2^(j−1)·50 tokens cuts the text afresh;
- ``mog`` with ``router=level:N`` (MoG's selection on one fixed level; N = 1..5 by default),
  ``router=uniform`` and ``router=oracle`` (each question's own soft label: an upper bound
  of routing, from the excerpts);
- ``mog`` ``router=cv`` and ``router=oracle`` with ``label_k=1``: the paper's labels, which
  score each level's top-1 entry only (the default ``label_k=0`` scores what a level returns
  at the retrieve depth).

Per row: recall, precision, precision-Ω (a retriever's on its finest units, marked ``u``),
IoU mean ± population std, tokens retrieved per question, index seconds, texts embedded,
query milliseconds per question; for routed rows the chosen-level histogram, the agreement
with the oracle level and the mean router weights. MoG's routed rows share one index (the
router is not part of it), so only the first of them pays for indexing. The line "MoG oracle
IoU ≥ best single level IoU" compares the oracle row with the best plain level and the best
``level:N`` row. The whole evaluation then runs again on the same store and output cache
(warm): texts embedded should be 0 on every row; the ratio is cold / warm wall time. Last,
the check is repeated at ``retrieve=1`` on the warm store (cheap): the depth the paper's
top-1 soft labels describe.

The question set is SYNTHETIC (there is no network here, so no public set can be fetched):
built deterministically (seeded RNG) over the bundled English samples — the narrative, the
technical guide and the release notes page — in the Chroma format (``questions.csv`` +
``corpora/``, written to a temporary folder and read back with ``load_question_set``). Its
excerpts vary in granularity on purpose, since that is what a multi-granularity retriever is
for: ``--per-granularity`` questions each on one sentence, on 2–3 adjacent sentences of a
paragraph, on one whole paragraph (2+ sentences) and on two adjacent paragraphs. Every
excerpt is an exact span (``content == corpus[start:end]``). A question's text is a fixed
template around the excerpt's rarest content words (3, 4, 5 or 6 of them by granularity;
rarity counted over the corpora's sentences), so it is lexically easy and says nothing of how
people ask; the 24 hand-written questions of ``sample:narrative`` and ``sample:technical``
are added as they are. ``--questions CSV --corpora DIR`` runs a real Chroma-format set instead.

Part 2 — index cost, after FreeChunker's Table 1 (processing time: FreeChunker ≈ traditional
≪ semantic < PPL). One corpus (``--kchars``: the English samples — narrative, technical
Markdown, the technical PDF's text and the release notes — concatenated, cycled and cut at a
paragraph end to about that many thousand characters); each method starts from a fresh
Chroma store and a fresh output cache (so nothing is reused: the semantic chunker's sentence
windows are embedded and the language model really scores the text), and is timed from the
document to its index in the store: ``sentence`` chunking at 256 tokens (the baseline: the
paper's "traditional" packs sentences up to 256 tokens), ``freechunker`` (``mean``, and
``exact``), ``semantic`` (percentile breakpoint at 50, the paper's setting) and ``ppl``
(Meta-Chunking perplexity chunking, threshold 0.5 as in the paper, on the bundled
SmolLM2-135M where the paper used Qwen2.5-1.5B). The embedder and the language model are loaded, and
warmed up on a few texts, BEFORE timing; loading is not counted. Each method runs once per
``--repeat`` (fresh each time) and the best time is kept. Ratios are method / sentence.
"≈" in the ordering check means within a factor of 2 of the baseline, "≪" at least 2× slower.

Threads: torch runs with ``--threads`` intra-op threads, 1 by default. On the shared 2-core
machine this was written on, torch's default (2 threads) collapsed whenever other processes
were running: 100 sentences embedded in 8.6–14.7 s with 2 threads against 1.1–1.6 s with 1, and
one router training (the ``cv`` router trains 6) in 10.1 s against 0.33 s. One thread keeps the
default run short and its ratios stable; ``--threads 0`` leaves torch's default. The load
average is printed at the start and the end.

The output cache of the whole run lives in a temporary folder (CHUNKLAB_CACHE_DIR is pointed
there), so the user's cache is neither read nor filled.

Run:  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/bench_multigranularity.py
          [--per-granularity 50] [--retrieve 5] [--fixed-levels 1,2,3,4,5] [--seed 3]
          [--questions CSV --corpora DIR] [--save-questions DIR]
          [--kchars 60] [--repeat 1] [--skip-retrieval] [--skip-index] [--skip-ppl] [--threads 1]
          [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402

from backend.chunkers import ModelContext, make_chunker  # noqa: E402
from backend.chunking import ChunkerConfig  # noqa: E402
from backend.models.cache import OutputCache, default_cache  # noqa: E402
from backend.retrieval.evaluate import Benchmark, evaluate  # noqa: E402
from backend.retrieval.multi.index import CountingEmbedder  # noqa: E402
from backend.retrieval.questions import (  # noqa: E402
    Question,
    QuestionSet,
    Reference,
    load_question_set,
    load_sample_question_set,
    merge_question_sets,
    save_question_set,
)
from backend.retrieval.retriever.registry import make_retriever  # noqa: E402
from backend.retrieval.store import ChunkStore  # noqa: E402
from backend.samples import load_sample  # noqa: E402
from backend.text.document import Document  # noqa: E402

GRANULARITIES = ("sentence", "2-3 sentences", "paragraph", "2 paragraphs")
KEYWORDS = {"sentence": 3, "2-3 sentences": 4, "paragraph": 5, "2 paragraphs": 6}
TEMPLATE = "What does the text say about {}?"
LEVEL_SIZES = (50, 100, 200, 400, 800)  # MoG's levels at chunk_size=50: 50 · 2^(j-1) tokens
# FreeChunker's Table 1, single-document QA, jina-embeddings-v2-small-en column (seconds).
PAPER_SECONDS = {"traditional": 2.11, "FreeChunker": 2.75, "semantic": 12.87, "PPL": 33.09}
WORD = re.compile(r"[A-Za-z][A-Za-z-]{3,}")


# --- the synthetic question set ---------------------------------------------------------------


def _stopwords() -> frozenset[str]:
    """bm25s's extended English list (the one MoGG's bm25 edges use), not a hand-written one."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


def _words(text: str, stop: frozenset[str]) -> list[str]:
    return [w for w in (m.group(0).lower().strip("-") for m in WORD.finditer(text)) if len(w) >= 4 and w not in stop]


def _candidates(doc: Document, rng: random.Random) -> dict[str, list[tuple[int, int]]]:
    """Excerpt spans of each granularity in one corpus (exact spans of its text)."""
    sents = [(s.start, s.end) for s in doc.sentences]
    paras = [(p.start, p.end) for p in doc.paragraphs]
    text = doc.text

    def prose(a: int, b: int) -> bool:  # headings, code fences and table rows make no question
        return not text[a:b].lstrip().startswith(("#", "```", "|", "    "))

    inside = [[s for s in sents if a <= s[0] and s[1] <= b] for a, b in paras]
    out: dict[str, list[tuple[int, int]]] = {g: [] for g in GRANULARITIES}
    out["sentence"] = [(a, b) for a, b in sents if 40 <= b - a <= 400 and prose(a, b)]
    for (a, b), ss in zip(paras, inside):
        if not prose(a, b):
            continue
        for i in range(len(ss) - 1):
            n = rng.choice((2, 3))
            run = ss[i : i + n]
            if len(run) >= 2 and 80 <= run[-1][1] - run[0][0] <= 900:
                out["2-3 sentences"].append((run[0][0], run[-1][1]))
        if len(ss) >= 2 and 150 <= b - a <= 2000:
            out["paragraph"].append((a, b))
    for (a, b), (c, d) in zip(paras, paras[1:]):
        if prose(a, b) and prose(c, d) and b - a >= 80 and d - c >= 80 and d - a <= 3000:
            out["2 paragraphs"].append((a, d))
    return out


def synthetic_question_set(per_granularity: int, seed: int) -> tuple[QuestionSet, list[str]]:
    """The bundled hand-written sets plus ``per_granularity`` synthetic questions per granularity.

    Returns:
        The set, and each question's granularity label (``hand-written`` for the bundled ones).
    """
    hand = merge_question_sets(load_sample_question_set("narrative"), load_sample_question_set("technical"))
    corpora = dict(hand.corpora)
    corpora["release_notes"] = load_sample("release-notes").text  # the HTML page's extracted text
    stop = _stopwords()
    base = QuestionSet((), corpora, dict(hand.suffixes))
    rng = random.Random(seed)
    df: Counter[str] = Counter()
    pools: dict[str, list[tuple[str, int, int]]] = {g: [] for g in GRANULARITIES}
    for cid in sorted(corpora):
        doc = base.document(cid)
        for s in doc.sentences:
            df.update(set(_words(doc.text[s.start : s.end], stop)))
        for g, spans in _candidates(doc, rng).items():
            pools[g] += [(cid, a, b) for a, b in spans]
    questions: list[Question] = []
    labels: list[str] = []
    used: set[tuple[str, int, int]] = set()
    for g in GRANULARITIES:
        pool = [c for c in pools[g] if c not in used]
        rng.shuffle(pool)
        made = 0
        for cid, a, b in pool:
            if made == per_granularity:
                break
            excerpt = corpora[cid][a:b]
            words = list(dict.fromkeys(_words(excerpt, stop)))
            if len(words) < KEYWORDS[g]:
                continue
            # The rarest words (ties: first occurrence) say most about where the excerpt is.
            picked = sorted(words, key=lambda w: (df[w], words.index(w)))[: KEYWORDS[g]]
            rng.shuffle(picked)
            text = TEMPLATE.format(", ".join(picked[:-1]) + " and " + picked[-1])
            questions.append(Question(text, (Reference(excerpt, a, b),), cid))
            labels.append(g)
            used.add((cid, a, b))
            made += 1
    full = base.with_questions(hand.questions + tuple(questions))
    return full, ["hand-written"] * len(hand) + labels


# --- part 1: retrieval ------------------------------------------------------------------------


def _config(name: str, **params: Any) -> ChunkerConfig:
    return make_chunker(name, params).config


def retrieval_rows(fixed_levels: Sequence[int]) -> list[tuple[str, ChunkerConfig]]:
    """(short name, configuration) per row, in table order."""
    rows = [
        ("MoG cv", _config("mog", router="cv")),
        ("MoGG cv cosine", _config("mogg", router="cv", edge="cosine")),
        ("FreeChunker mean", _config("freechunker", encoder="mean")),
        ("FreeChunker exact", _config("freechunker", encoder="exact")),
    ]
    rows += [(f"recursive {s} (~L{j})", _config("recursive", chunk_size=s, chunk_overlap=0))
             for j, s in enumerate(LEVEL_SIZES, 1)]
    rows += [(f"MoG level:{n}", _config("mog", router=f"level:{n}")) for n in fixed_levels]
    rows += [("MoG uniform", _config("mog", router="uniform")), ("MoG oracle", _config("mog", router="oracle"))]
    # The paper's labels score each level's top-1 entry only (label_k=1); ours (label_k=0) score what a
    # level returns at the retrieve depth.
    rows += [("MoG cv top-1 labels", _config("mog", router="cv", label_k=1)),
             ("MoG oracle top-1 labels", _config("mog", router="oracle", label_k=1))]
    return rows


def print_table(names: Sequence[str], bench: Benchmark) -> None:
    head = (f"  {'configuration':22s} {'recall':>6s} {'prec':>6s} {'prec-Ω':>8s} {'IoU mean ± std':>16s} "
            f"{'ret tok':>7s} {'index s':>7s} {'embedded':>8s} {'query ms':>8s}")
    print(head)
    print("  " + "-" * (len(head) - 2))
    for name, r in zip(names, bench.results):
        s = r.summary
        omega = f"{s.precision_omega_mean:.4f}" + ("u" if r.omega_units == "units" else " ")
        print(f"  {name:22s} {s.recall_mean:6.3f} {s.precision_mean:6.3f} {omega:>8s} "
              f"{s.iou_mean:7.4f} ± {s.iou_std:6.4f} {r.retrieved_tokens_mean:7.0f} {r.index_seconds:7.2f} "
              f"{r.texts_embedded:8d} {1000 * r.query_seconds:8.2f}")
    print("  (prec-Ω marked u: on the retriever's finest units — MoG level 1, MoGG nodes, FreeChunker units —"
          " not on what it returns)")


def print_routing(names: Sequence[str], bench: Benchmark) -> None:
    for name, r in zip(names, bench.results):
        if r.routing is None:
            continue
        j = r.routing.to_json()
        agree = "n/a" if j["oracle_agreement"] is None else f"{j['oracle_agreement']:.3f}"
        weights = " ".join(f"{w:.2f}" for w in j["mean_weights"])
        print(f"  {name:22s} chosen per level {j['chosen_histogram']}  oracle agreement {agree}  "
              f"mean weights [{weights}]")
    first = next((r for r in bench.results if r.routing is not None), None)
    if first is not None:
        oracle = first.routing.oracle
        hist = np.bincount(oracle[oracle > 0] - 1, minlength=len(first.routing.level_names)).tolist()
        print(f"  oracle (best top-1 level) per level {hist}, {int((oracle == 0).sum())} question(s) with no "
              f"level's top-1 touching the excerpt; levels {list(first.routing.level_names)}")


def granularity_iou(names: Sequence[str], bench: Benchmark, labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """Mean IoU per configuration and excerpt granularity."""
    groups = list(dict.fromkeys(labels))
    out: dict[str, dict[str, float]] = {}
    for name, r in zip(names, bench.results):
        out[name] = {g: float(np.mean([q.iou for q, lab in zip(r.questions, labels) if lab == g])) for g in groups}
    counts = Counter(labels)
    print(f"  {'configuration':22s} " + " ".join(f"{g[:13]:>13s}" for g in groups))
    print(f"  {'(questions)':22s} " + " ".join(f"{counts[g]:13d}" for g in groups))
    for name in names:
        print(f"  {name:22s} " + " ".join(f"{out[name][g]:13.4f}" for g in groups))
    best = {g: max(names, key=lambda n: out[n][g]) for g in groups}
    print("  best per granularity: " + "; ".join(f"{g}: {best[g]} ({out[best[g]][g]:.4f})" for g in groups))
    return out


def oracle_check(names: Sequence[str], bench: Benchmark, note: bool = True) -> dict[str, Any]:
    iou = {n: r.summary.iou_mean for n, r in zip(names, bench.results)}
    plain = {n: v for n, v in iou.items() if n.startswith("recursive ")}
    fixed = {n: v for n, v in iou.items() if n.startswith("MoG level:")}
    best_plain = max(plain, key=plain.get)
    out: dict[str, Any] = {"oracle_iou": iou["MoG oracle"], "best_plain": [best_plain, plain[best_plain]]}
    print(f"  MoG oracle IoU {iou['MoG oracle']:.4f} vs best plain level {best_plain} {plain[best_plain]:.4f}: "
          f"{'holds' if iou['MoG oracle'] >= plain[best_plain] else 'DOES NOT hold'} "
          f"(oracle − best = {iou['MoG oracle'] - plain[best_plain]:+.4f})")
    if fixed:
        best_fixed = max(fixed, key=fixed.get)
        out["best_level_n"] = [best_fixed, fixed[best_fixed]]
        print(f"  MoG oracle IoU {iou['MoG oracle']:.4f} vs best fixed level {best_fixed} {fixed[best_fixed]:.4f}: "
              f"{'holds' if iou['MoG oracle'] >= fixed[best_fixed] else 'DOES NOT hold'} "
              f"(oracle − best = {iou['MoG oracle'] - fixed[best_fixed]:+.4f})")
    if note:
        print("  (the oracle routes each question to the level its soft label prefers; with label_k=0 the label scores "
              "what each level returns at the retrieve depth, with label_k=1 — the paper — its top-1 entry only: see "
              "the 'top-1 labels' rows)")
    return out


def part1(args: argparse.Namespace, embedder: Any, tmp: Path) -> dict[str, Any]:
    if args.questions:
        qs = load_question_set(args.questions, args.corpora)
        labels = ["external"] * len(qs)
        origin = f"{args.questions} (corpora {args.corpora or 'corpora/ beside it'})"
    else:
        built, labels = synthetic_question_set(args.per_granularity, args.seed)
        folder = Path(args.save_questions) if args.save_questions else tmp / "questions"
        save_question_set(built, folder / "questions.csv")
        qs = load_question_set(folder / "questions.csv")  # read back: the Chroma format round trip
        if qs != built:
            raise SystemExit("the saved question set does not read back equal")
        origin = (f"SYNTHETIC, written to {folder} (excerpts of chosen granularity; question = template around "
                  f"the excerpt's rarest words; see the module docstring)")
    counts = Counter(labels)
    sizes = {cid: len(t) for cid, t in qs.corpora.items()}
    print(f"Part 1 — retrieval: {len(qs)} questions over {len(qs.corpora)} corpora {sizes}; {origin}")
    print("  questions per excerpt granularity: " + ", ".join(f"{g} {n}" for g, n in counts.items()))
    rows = retrieval_rows(args.fixed_levels)
    names = [n for n, _ in rows]
    configs = [c for _, c in rows]
    store = ChunkStore(path=tmp / "chroma-retrieval")
    cache = OutputCache(tmp / "cache-retrieval")
    t0 = time.perf_counter()
    cold = evaluate(qs, configs, embedder=embedder, retrieve=args.retrieve, store=store, cache=cache)
    cold_s = time.perf_counter() - t0
    print(f"\n  cold (empty store, empty cache), retrieve {args.retrieve}: {cold_s:.1f} s")
    print_table(names, cold)
    print("  (MoG's routed rows share one index: the first builds it, the others reuse it — index s ~0, "
          "0 embedded. recursive 50 cuts exactly MoG's level 1; its higher levels are merged pairs, "
          "so recursive 100..800 are close analogues only.)")
    shared = [n for n, r in zip(names, cold.results) if r.omega_units == "chunks" and r.texts_embedded == 0]
    if shared:
        print(f"  ({', '.join(shared)}: 0 embedded because an earlier row embedded the very same texts and the "
              "output cache holds them — recursive 50 is MoG's level 1)")
    print("\n  routing:")
    print_routing(names, cold)
    print("\n  IoU by excerpt granularity:")
    by_granularity = granularity_iou(names, cold, labels)
    print("\n  check:")
    check = oracle_check(names, cold)
    t0 = time.perf_counter()
    warm = evaluate(qs, configs, embedder=embedder, retrieve=args.retrieve, store=store, cache=cache)
    warm_s = time.perf_counter() - t0
    embedded = {n: r.texts_embedded for n, r in zip(names, warm.results)}
    nonzero = {n: e for n, e in embedded.items() if e}
    same = all(a.summary == b.summary for a, b in zip(cold.results, warm.results))
    print(f"\n  warm rerun (same store, same cache): {warm_s:.1f} s; texts embedded: "
          f"{'0 on every row' if not nonzero else nonzero}; scores identical to cold: {same}")
    for name, c, w in zip(names, cold.results, warm.results):
        print(f"    {name:22s} cold {c.seconds:7.2f} s  warm {w.seconds:6.2f} s  reused={w.reused}")
    print(f"  speed-up cold / warm: {cold_s / warm_s:.1f}x ({cold_s:.1f} s vs {warm_s:.1f} s)")
    check_k1 = None
    if args.retrieve != 1:
        # The depth the paper's top-1 labels describe; the store and cache are warm, so this is cheap.
        k1 = evaluate(qs, configs, embedder=embedder, retrieve=1, store=store, cache=cache)
        print("\n  the same check at retrieve 1 (warm store): IoU "
              + ", ".join(f"{n} {r.summary.iou_mean:.4f}" for n, r in zip(names, k1.results)))
        check_k1 = oracle_check(names, k1, note=False)
        check_k1["iou"] = {n: r.summary.iou_mean for n, r in zip(names, k1.results)}
    return {
        "questions": {"source": origin, "count": len(qs), "per_granularity": dict(counts), "corpora": sizes},
        "names": names,
        "cold": cold.to_json(),
        "cold_seconds": cold_s,
        "warm": warm.to_json(),
        "warm_seconds": warm_s,
        "warm_scores_identical": same,
        "iou_by_granularity": by_granularity,
        "oracle_check": check,
        "oracle_check_retrieve_1": check_k1,
    }


# --- part 2: index cost -----------------------------------------------------------------------


def cost_corpus(kchars: float) -> Document:
    """The English samples' paragraphs, cycled, up to about ``kchars`` thousand characters."""
    paragraphs: list[str] = []
    for name in ("narrative", "technical", "technical-pdf", "release-notes"):
        doc = load_sample(name)
        paragraphs += [doc.text[p.start : p.end] for p in doc.paragraphs]
    target = int(kchars * 1000)
    out: list[str] = []
    size, i = 0, 0
    while size < target:
        para = paragraphs[i % len(paragraphs)]
        out.append(para)
        size += len(para) + 2
        i += 1
    return Document.from_text("\n\n".join(out), source="cost.md", kind="md", language="en")


def _timed_index(config: ChunkerConfig, doc: Document, embedder: Any, scorer: Any, folder: Path) -> dict[str, Any]:
    """Document → index in a fresh store with a fresh output cache; what it took (chunking timed apart for chunkers)."""
    os.environ["CHUNKLAB_CACHE_DIR"] = str(folder / "cache")  # the context's cache: fresh too
    cache = default_cache()
    store = ChunkStore(path=folder / "chroma")
    counting = CountingEmbedder(embedder)
    context = ModelContext(scorer=scorer, embedder=counting)
    retriever = make_retriever(config, context=context)
    t0 = time.perf_counter()
    # A chunking is its retriever's finest units: cutting them first times the chunker alone.
    units = retriever.finest_units(doc)
    chunk_s = time.perf_counter() - t0
    index = make_retriever(config, context=context, chunkings=[units]).index(doc, store, counting, cache=cache)
    total = time.perf_counter() - t0
    return {"seconds": total, "chunk_seconds": chunk_s, "entries": index.entries, "texts_embedded": counting.texts}


def part2(args: argparse.Namespace, embedder: Any, tmp: Path) -> dict[str, Any]:
    from backend.models.scorer import load_scorer
    from backend.models.scoring import document_token_scores

    doc = cost_corpus(args.kchars)
    methods = [
        ("sentence", _config("sentence", chunk_size=256)),
        ("FreeChunker mean", _config("freechunker", encoder="mean")),
        ("FreeChunker exact", _config("freechunker", encoder="exact")),
        ("semantic", _config("semantic", breakpoint="percentile", amount=50.0)),
    ]
    scorer = None
    load_s = 0.0
    if not args.skip_ppl:
        methods.append(("ppl", _config("ppl")))
        t0 = time.perf_counter()
        scorer = load_scorer(None)
        load_s = time.perf_counter() - t0
        document_token_scores(doc.text[:500], scorer, cache=None)  # warm-up, not timed
    embedder.embed(["warm-up", doc.text[:500]])  # warm-up, not timed
    print(f"\nPart 2 — index cost: {len(doc.text):,} characters ({len(doc.sentences):,} sentences, "
          f"{len(doc.paragraphs):,} paragraphs; the English samples cycled), fresh store + fresh cache per "
          f"method and run, best of {args.repeat}; embedder "
          + (f"and language model {scorer.info.name} (loaded in {load_s:.1f} s) " if scorer is not None else "")
          + "loaded and warmed up before timing")
    results: dict[str, dict[str, Any]] = {}
    for name, config in methods:
        runs = [_timed_index(config, doc, embedder, scorer, tmp / f"cost-{len(results)}-{i}")
                for i in range(args.repeat)]
        results[name] = min(runs, key=lambda r: r["seconds"])
        results[name]["config"] = config.label
    base = results["sentence"]["seconds"]
    print(f"  {'method':18s} {'seconds':>8s} {'chunking s':>10s} {'entries':>8s} {'embedded':>8s} {'/ sentence':>10s}")
    for name, r in results.items():
        chunk = "—" if math.isnan(r["chunk_seconds"]) else f"{r['chunk_seconds']:.2f}"
        print(f"  {name:18s} {r['seconds']:8.2f} {chunk:>10s} {r['entries']:8d} {r['texts_embedded']:8d} "
              f"{r['seconds'] / base:9.2f}x")
    print("  (chunking s: the chunker alone — for semantic its sentence-window embedding, for ppl the LM "
          "scoring, for FreeChunker cutting its units; the rest is embedding the chunks and writing them. "
          "FreeChunker's seconds are units, windows and their three collections)")
    fc, sem = results["FreeChunker mean"]["seconds"], results["semantic"]["seconds"]
    checks = {
        "FreeChunker ≈ sentence (within 2x)": 0.5 <= fc / base <= 2.0,
        "sentence ≪ semantic (≥ 2x)": sem / base >= 2.0,
    }
    if "ppl" in results:
        checks["semantic < PPL"] = results["ppl"]["seconds"] > sem
    print("  paper's ordering FreeChunker ≈ traditional ≪ semantic < PPL (its Table 1, jina-embeddings-v2-small: "
          + ", ".join(f"{n} {t:.2f} s = {t / PAPER_SECONDS['traditional']:.2f}x" for n, t in PAPER_SECONDS.items())
          + "):")
    for what, ok in checks.items():
        print(f"    {what}: {'holds' if ok else 'does NOT hold'}")
    print(f"  overall: {'holds' if all(checks.values()) else 'does NOT hold'} here"
          + ("" if "ppl" in results else " (ppl skipped)"))
    exact = results["FreeChunker exact"]["seconds"]
    print(f"  FreeChunker exact / mean: {exact / fc:.2f}x ({exact:.2f} s vs {fc:.2f} s; "
          f"{results['FreeChunker exact']['texts_embedded']} vs {results['FreeChunker mean']['texts_embedded']} "
          f"texts embedded)")
    return {"characters": len(doc.text), "sentences": len(doc.sentences), "results": results,
            "ratios_vs_sentence": {n: r["seconds"] / base for n, r in results.items()},
            "ordering_checks": checks, "lm_load_seconds": load_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-granularity", type=int, default=50, help="synthetic questions per granularity")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--retrieve", type=int, default=5)
    parser.add_argument("--fixed-levels", default="1,2,3,4,5", help="MoG router=level:N rows ('' for none)")
    parser.add_argument("--questions", help="a Chroma-format questions.csv instead of the synthetic set")
    parser.add_argument("--corpora", help="its corpora folder (default: corpora/ beside the CSV)")
    parser.add_argument("--save-questions", help="write the synthetic set here instead of a temporary folder")
    parser.add_argument("--kchars", type=float, default=60, help="part-2 corpus size in thousands of characters")
    parser.add_argument("--repeat", type=int, default=1, help="part-2 runs per method (best kept)")
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--skip-ppl", action="store_true", help="part 2 without ppl (no language model)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args()
    args.fixed_levels = [int(x) for x in args.fixed_levels.split(",") if x.strip()]
    args.repeat = max(1, args.repeat)

    import torch

    from backend.models.embedder import load_embedder

    if args.threads > 0:
        torch.set_num_threads(args.threads)
        os.environ["CHUNKLAB_TORCH_THREADS"] = str(args.threads)  # the model loaders apply it
    t_all = time.perf_counter()
    out: dict[str, Any] = {"torch_threads": torch.get_num_threads(), "load_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-multi-") as tmp:
        tmp_path = Path(tmp)
        os.environ["CHUNKLAB_CACHE_DIR"] = str(tmp_path / "cache-default")  # never the user's cache
        t0 = time.perf_counter()
        embedder = load_embedder()
        print(f"embedder {embedder.info.name} on {embedder.info.device} (loaded in {time.perf_counter() - t0:.1f} s, "
              f"not counted); {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
        if not args.skip_retrieval:
            out["retrieval"] = part1(args, embedder, tmp_path)
        if not args.skip_index:
            out["index_cost"] = part2(args, embedder, tmp_path)
    out["wall_seconds"] = time.perf_counter() - t_all
    out["load_end"] = os.getloadavg()
    print(f"\ntotal wall time {out['wall_seconds']:.0f} s; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in out['load_end'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
        print(f"numbers written to {args.json}")


if __name__ == "__main__":
    main()
