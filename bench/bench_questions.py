"""Do offline question sets rank configurations as hand-written questions do? ρ per metric, and seconds per question.

The reference is every hand-written question bundled with the two samples that ship one
(narrative, technical): the 12 of each bundled set plus the 36 of each held-out set
(``assets/samples/questions/held_out/``, written by another author and never used to design a
method) — 96 questions over the two corpora, retrieved across both (the Chroma report's
setting: one collection per configuration over every corpus, MiniLM, 5 chunks).

Each offline method generates questions on the same two corpora, in the same run:

- **model-free** — :func:`backend.retrieval.modelfree.model_free_questions` (the passage's words
  and one from its neighbourhood; ``--n`` per corpus, ``--seeds`` seeds);
- **model-free-keywords** — the same method's earlier style (the passage's three words only);
- **bundled** — the bundled SmolLM2 (:func:`backend.retrieval.generation.generate_questions`,
  ``method="bundled"``, the report's prefilters; ``--bundled-n`` per corpus, seed 0;
  ``--skip-bundled`` leaves it out: it takes minutes per question set).

Every set runs the same benchmark (:func:`backend.retrieval.evaluate.evaluate`) over
:data:`backend.lab.agreement.DEFAULT_CONFIGS` (ten configurations), and the script prints, per
method and seed, Spearman's ρ between its order of the configurations and the reference's on
recall, IoU and precision-Ω, each with its 95% bootstrap interval over both sets' questions
(:func:`backend.retrieval.agreement.rank_agreement`), then each method's mean ρ over seeds and
its seconds per question, with the ratio to the bundled model's measured in the same run.
It prints the same against the held-out 72 alone. As a yardstick it also prints how far the two hand-written sets agree with each other (the
bundled 24 against the held-out 72): a method cannot be held to agree with hand-written
questions more than two hand-written sets agree among themselves.

Target (issue 37): ρ ≥ 0.8 on recall and on IoU.

Run:  .venv/bin/python bench/bench_questions.py [--n 72] [--seeds 0 1 2] [--bundled-n 12] [--skip-bundled]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402

from backend.chunkers import make_chunker  # noqa: E402
from backend.chunking import ChunkerConfig  # noqa: E402
from backend.config import quiet_hub_progress_bars  # noqa: E402
from backend.lab.agreement import DEFAULT_CONFIGS  # noqa: E402
from backend.models.embeddings import load_text_embedder  # noqa: E402
from backend.retrieval.agreement import rank_agreement  # noqa: E402
from backend.retrieval.evaluate import METRIC_LABELS, evaluate  # noqa: E402
from backend.retrieval.generation import generate_questions  # noqa: E402
from backend.retrieval.modelfree import model_free_questions  # noqa: E402
from backend.retrieval.questions import load_question_set, load_sample_question_set, merge_question_sets  # noqa: E402
from backend.retrieval.store import open_store  # noqa: E402
from backend.samples import QUESTIONS_DIR, SAMPLES_DIR  # noqa: E402

SAMPLES = ("narrative", "technical")
HELD_OUT = QUESTIONS_DIR / "held_out"
METRICS = ("recall", "iou", "precision_omega")
TARGET = 0.8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=72, help="model-free questions per corpus (default 72)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="model-free seeds (default 0 1 2)")
    parser.add_argument("--bundled-n", type=int, default=12, help="bundled-model questions per corpus (default 12)")
    parser.add_argument("--skip-bundled", action="store_true", help="leave the bundled model out (minutes per set)")
    parser.add_argument("--draws", type=int, default=2000, help="bootstrap draws per interval (default 2000)")
    parser.add_argument("--retrieve", type=int, default=5, help="chunks per question (default 5)")
    args = parser.parse_args()
    quiet_hub_progress_bars()
    embedder = load_text_embedder(None)
    store = open_store()
    configs = [make_chunker(*ChunkerConfig.parse(spec)).config for spec in DEFAULT_CONFIGS]

    bundled_hand = held_out = None
    for name in SAMPLES:
        bundled_hand = merge_question_sets(bundled_hand, load_sample_question_set(name))
        held_out = merge_question_sets(held_out, load_question_set(HELD_OUT / f"{name}.csv", SAMPLES_DIR))
    reference = merge_question_sets(bundled_hand, held_out)
    docs = [(cid, reference.document(cid)) for cid in reference.corpus_ids]

    def scores(qs):
        bench = evaluate(qs, configs, embedder=embedder, retrieve=args.retrieve, store=store)
        return {m: bench.matrix(m).T for m in METRICS}

    def agree(a, b, seed=0):
        return {m: rank_agreement(m, a[m], b[m], draws=args.draws, seed=seed) for m in METRICS}

    print(f"Reference: {len(reference)} hand-written questions ({len(bundled_hand)} bundled + {len(held_out)} held out) "
          f"on {', '.join(cid for cid, _ in docs)} · {embedder.info.name} · {args.retrieve} chunks per question, "
          f"retrieved across both corpora · {len(configs)} configurations")
    ref = scores(reference)
    held = scores(held_out)
    yardstick = agree(scores(bundled_hand), held)

    # method, seed, questions, seconds, agreement with the reference, with the held-out 72 alone
    rows: list[tuple[str, int, int, float, dict, dict]] = []
    for method, style in (("model-free", "context"), ("model-free-keywords", "keywords")):
        for seed in args.seeds:
            t0 = time.perf_counter()
            made = None
            for cid, doc in docs:
                got = model_free_questions(doc, n=args.n, corpus_id=cid, seed=seed, style=style)
                made = merge_question_sets(made, got.question_set())
            seconds = time.perf_counter() - t0
            mine = scores(made)
            rows.append((method, seed, len(made), seconds, agree(ref, mine, seed), agree(held, mine, seed)))
    if not args.skip_bundled:
        t0 = time.perf_counter()
        made = None
        for cid, doc in docs:
            got = generate_questions(doc, n=args.bundled_n, corpus_id=cid, method="bundled", embedder=embedder)
            made = merge_question_sets(made, got.question_set())
        seconds = time.perf_counter() - t0
        mine = scores(made)
        rows.append(("bundled", 0, len(made), seconds, agree(ref, mine), agree(held, mine)))

    print("\nmean score of each configuration under the reference (%):")
    for i, c in enumerate(configs):
        print(f"  {c.spec:<54}" + "".join(f"{METRIC_LABELS[m]} {100 * ref[m][i].mean():5.1f}   " for m in METRICS))

    def cells(ag: dict) -> str:
        return "".join(f"{ag[m].rho:+.2f} {ag[m].interval:<16}" for m in METRICS)

    head = "".join(f"{'ρ ' + METRIC_LABELS[m] + ' [95%]':<22}" for m in METRICS)
    print(f"\n{'set against the reference':<34}{'questions':>10}  {head}")
    print(f"{'(yardstick) bundled 24 vs held-out 72':<34}{'':>10}  {cells(yardstick)}")
    for method, seed, n, _, ag, _ in rows:
        print(f"{method + f' seed {seed}':<34}{n:>10}  {cells(ag)}")
    print(f"\n{'set against the held-out 72 alone':<34}{'questions':>10}  {head}")
    for method, seed, n, _, _, ag in rows:
        print(f"{method + f' seed {seed}':<34}{n:>10}  {cells(ag)}")

    print(f"\n{'method':<22}{'mean ρ ' + ' · '.join(METRIC_LABELS[m] for m in METRICS):<40}{'s/question':>12}"
          f"{'× faster than bundled':>24}   target ρ ≥ {TARGET} on recall and IoU")
    per_q = {}
    for method in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == method]
        per_q[method] = sum(r[3] for r in mine) / max(1, sum(r[2] for r in mine))
    for method in per_q:
        mine = [r for r in rows if r[0] == method]
        mean = {m: float(np.mean([r[4][m].rho for r in mine])) for m in METRICS}
        ratio = f"{per_q['bundled'] / per_q[method]:,.0f}×" if "bundled" in per_q else "n/a (--skip-bundled)"
        met = "met" if mean["recall"] >= TARGET and mean["iou"] >= TARGET else "missed"
        print(f"{method:<22}{' · '.join(f'{mean[m]:+.2f}' for m in METRICS):<40}{per_q[method]:>12.4f}"
              f"{ratio:>24}   {met}")


if __name__ == "__main__":
    main()
