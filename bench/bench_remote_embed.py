"""Throughput of RemoteEmbedder against concurrency, on the scripted embeddings server delaying each answer.

The server is Chunk Lab's own embeddings test server (tests/support/embedding_server.py, the
bundled all-MiniLM-L6-v2 on this machine's CPU) with ``--delay`` seconds added to every answer,
as the network and a busy GPU server would add. It runs with ``memo``: an untimed first pass
embeds every text with the model, and the timed runs get the same vectors back from memory, so
they measure what concurrency is for (overlapping the waits) rather than this CPU. The ideal
speed-up at concurrency c is ``requests / ceil(requests / c)`` (rounds of c overlapping waits);
what is left is the client's own cost (JSON of 384 floats a text, HTTP, threads).

For each concurrency in ``--levels`` (1 first: the baseline of the ratios, measured in the same
run), ``embed`` sends ``--requests`` requests of ``--batch`` texts; each level is timed
``--repeat`` times, levels interleaved, and the median is reported with the spread (min–max).
Every level's vectors are checked to be identical to concurrency 1's, row for row.

Run:  .venv/bin/python bench/bench_remote_embed.py [--delay 0.1] [--requests 32] [--batch 16] [--repeat 3]
      .venv/bin/python bench/bench_remote_embed.py --quick     (8 requests, 2 runs: a few seconds)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from backend.models.remote_embedder import RemoteEmbedder  # noqa: E402
from tests.support.embedding_server import start_embedding_server  # noqa: E402


def _texts(n: int) -> list[str]:
    # Short distinct sentences: the server's share of a request stays small beside the delay.
    return [f"Passage {i} says where the chunk boundary {i % 7} should fall." for i in range(n)]


def _time(embedder: RemoteEmbedder, texts: list[str]) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    vectors = embedder.embed(texts)
    return time.perf_counter() - t0, vectors


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.1, help="seconds the server waits before each answer")
    parser.add_argument("--requests", type=int, default=32, help="requests per timing")
    parser.add_argument("--batch", type=int, default=16, help="texts per request")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="8 requests, 2 runs per level")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.repeat = 8, 2
    levels = sorted(set(args.levels) | {1})
    texts = _texts(args.requests * args.batch)

    times: dict[int, list[float]] = {c: [] for c in levels}
    with start_embedding_server(delay=args.delay, memo=True) as server:
        # A loaded CPU must not time out and retry; one connection per level, each learning the dimension once.
        embedders = {c: RemoteEmbedder(server.url, concurrency=c, batch=args.batch, timeout=600.0) for c in levels}
        model_s, baseline = _time(embedders[1], texts)  # untimed: the model embeds every text
        print(f"first pass (model + delay, concurrency 1): {model_s / args.requests * 1000:.0f} ms per request")
        for _ in range(args.repeat):
            for c in levels:
                elapsed, vectors = _time(embedders[c], texts)
                if not np.array_equal(vectors, baseline):
                    raise SystemExit(f"concurrency {c} gave different vectors from concurrency 1")
                times[c].append(elapsed)
        peak = server.peak_in_flight

    base = statistics.median(times[1])
    print(
        f"delay {args.delay:g} s per answer, {args.requests} requests x {args.batch} texts "
        f"({embedders[1].dimension} dimensions), median of {args.repeat} runs (levels interleaved); "
        f"vectors identical at every level; at most {peak} requests in flight"
    )
    print(f"{'concurrency':>11} | {'requests/s':>10} | {'texts/s':>8} | {'vs 1':>6} | {'ideal':>6} | spread (min-max s)")
    for c in levels:
        t = statistics.median(times[c])
        bound = args.requests / math.ceil(args.requests / c)
        print(
            f"{c:>11} | {args.requests / t:>10.2f} | {len(texts) / t:>8.1f} | {base / t:>5.2f}x | {bound:>5.1f}x "
            f"| {min(times[c]):.2f}-{max(times[c]):.2f}"
        )


if __name__ == "__main__":
    main()
