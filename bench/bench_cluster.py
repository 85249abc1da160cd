"""Cost of ``cluster`` and ``semantic_max`` on a 300-page document, beside ``recursive`` on the same text.

The embedder is left out of the main timings (its cost is the same for any algorithm that
embeds the pieces, and is cached on reruns): the pieces get random unit vectors, so what is
timed is the splitting into pieces, the real-count band of allowed chunks, the dynamic
program and ``semantic_max``'s threshold search. ``--embed N`` also times the bundled
embedder on the first N pieces, to extrapolate a cold run. Each figure is the best of
``--repeat`` runs; ratios are against ``recursive`` at the same cap in the same run.

Run:  .venv/bin/python bench/bench_cluster.py [--pages 300] [--cap 400] [--repeat 3] [--embed 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.chunkers import make_chunker  # noqa: E402
from backend.chunkers.semantic import (  # noqa: E402
    DistanceCurve,
    allowed_windows,
    capped_threshold,
    cluster_segmentation,
    forced_cuts,
    piece_spans,
    semantic_spans,
)
from backend.text.document import Document  # noqa: E402
from backend.tokenizers import SpanCounter, get_tokenizer  # noqa: E402
from bench.bench_baselines import corpus  # noqa: E402

CHARS_PER_PAGE = 3000  # a dense PDF page of prose


def best(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--cap", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--embed", type=int, default=0, help="also time the bundled embedder on this many pieces")
    args = ap.parse_args()

    text = corpus(args.pages * CHARS_PER_PAGE / 1e6)
    doc = Document.from_text(text, source="bench.txt")
    tok = get_tokenizer("cl100k")
    print(f"text: {len(text):,} characters (~{args.pages} pages), {tok.count(text):,} cl100k tokens")

    t_rec, rec = best(lambda: make_chunker("recursive", {"chunk_size": args.cap}).chunk(doc), args.repeat)
    print(f"recursive {args.cap}: {t_rec:.2f} s, {len(rec)} chunks (baseline)")

    def pieces_step():
        counter = SpanCounter(tok, text)
        return counter, piece_spans(text, counter, 50)

    t_pieces, (counter, pieces) = best(pieces_step, args.repeat)
    n = len(pieces)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    t_allowed, allowed = best(lambda: allowed_windows(pieces, counter, args.cap), args.repeat)
    t_dp, segments = best(lambda: cluster_segmentation(vectors, allowed), args.repeat)
    total = t_pieces + t_allowed + t_dp
    print(f"cluster {args.cap}: {n:,} pieces, band {allowed.shape[1]}; pieces {t_pieces:.2f} s, "
          f"allowed-chunk band {t_allowed:.2f} s, DP {t_dp:.2f} s; total {total:.2f} s = "
          f"{total / t_rec:.1f}x recursive; {len(segments)} chunks")

    distances = 1.0 - np.einsum("ij,ij->i", vectors[:-1], vectors[1:]).astype(np.float64)

    def search():
        forced = forced_cuts(pieces, counter, args.cap)
        t = capped_threshold(pieces, distances, counter, args.cap, forced)
        curve = DistanceCurve(tuple(pieces), distances, distances, t, "cap", float(args.cap), forced)
        return semantic_spans(text, curve, counter, args.cap)

    t_search, spans = best(search, args.repeat)
    print(f"semantic_max {args.cap}: threshold search + spans {t_search:.2f} s = {t_search / t_rec:.1f}x recursive; "
          f"{len(spans)} chunks")

    if args.embed:
        from backend.models.embedder import load_embedder

        emb = load_embedder(None, "cpu")
        sample = [text[s:e] for s, e in pieces[: args.embed]]
        emb.embed(sample[:8])  # warm-up
        t_emb, _ = best(lambda: emb.embed(sample), 1)
        rate = len(sample) / t_emb
        print(f"embedder (MiniLM, cpu): {rate:.0f} pieces/s -> ~{n / rate:.0f} s to embed all {n:,} pieces once "
              f"(then cached)")


if __name__ == "__main__":
    main()
