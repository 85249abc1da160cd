"""Throughput of RemoteScorer against concurrency, on the local test server delaying each answer.

The server is Chunk Lab's own OpenAI-compatible test server (tests/support/openai_compat_server.py,
the bundled SmolLM2 on this machine's CPU) with ``--delay`` seconds added to every answer, as
the network and a busy GPU server would add. It runs with ``memo``: an untimed first pass at
concurrency 1 computes every answer with the model, and the timed runs get the same answers
back without it, so they measure what concurrency is for (overlapping the waits) rather than
this CPU, whose model runs one request at a time. The ideal speed-up at concurrency c is
``requests / ceil(requests / c)`` (rounds of c overlapping waits); what is left is the
client's own cost (JSON, HTTP, threads).

For each concurrency in ``--levels`` (1 first: the baseline of the ratios, measured in the same
run), ``conditional_nll`` scores ``--requests`` requests of 8 short pairs; each level is timed
``--repeat`` times, levels interleaved, and the median is reported with the spread (min–max).
Every level's values are checked to be identical to concurrency 1's, in order.

``--scoring prompt_logprobs`` runs the server as one whose ``echo`` gives no prompt log-probs but
that has vLLM's ``prompt_logprobs`` extension: each scorer's first request is then answered
twice (echo, then the extension it keeps to).
Each timed scorer first sends one untimed request: a new scorer sends its first request alone,
until an answer shows which way the server gives prompt log-probs (a one-off cost per scorer,
not part of a long run's throughput). ``--quick`` is 8 requests at concurrency 1, 4 and 8,
timed once.

Run:  .venv/bin/python bench/bench_remote.py [--delay 0.2] [--requests 32] [--repeat 3] [--scoring vllm] [--quick]
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

from backend.models.remote import PAIRS_PER_REQUEST, RemoteScorer  # noqa: E402
from tests.support.openai_compat_server import start_server  # noqa: E402

WARM_UP = [("Warm.", " Up.")]


def _pairs(n: int) -> list[tuple[str, str]]:
    # Short pairs, each distinct: the model's share of a request stays small beside the delay.
    return [(f"Item {i}.", f" Note {i}.") for i in range(n)]


def _same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def _time(url: str, concurrency: int, pairs: list[tuple[str, str]]) -> tuple[float, list[float]]:
    scorer = RemoteScorer(url, concurrency=concurrency, timeout=600.0)  # a loaded CPU must not time out and retry
    scorer.conditional_nll(WARM_UP)  # untimed: the scorer learns how the server gives prompt log-probs
    t0 = time.perf_counter()
    values = scorer.conditional_nll(pairs)
    return time.perf_counter() - t0, values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the server waits before each answer")
    parser.add_argument("--requests", type=int, default=32, help=f"requests per timing ({PAIRS_PER_REQUEST} pairs each)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scoring", choices=("vllm", "prompt_logprobs"), default="vllm",
                        help="how the server gives prompt log-probs: echo (vLLM) or only the prompt_logprobs extension")
    parser.add_argument("--quick", action="store_true", help="8 requests, concurrency 1, 4 and 8, timed once")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.levels, args.repeat = 8, [1, 4, 8], 1
    levels = sorted(set(args.levels) | {1})
    pairs = _pairs(args.requests * PAIRS_PER_REQUEST)

    times: dict[int, list[float]] = {c: [] for c in levels}
    with start_server(delay=args.delay, memo=True, scoring=args.scoring) as server:
        model_s, baseline_values = _time(server.url, 1, pairs)  # untimed: the model computes every answer
        print(f"first pass (model + delay, concurrency 1): {model_s / args.requests * 1000:.0f} ms per request")
        for _ in range(args.repeat):
            for c in levels:
                elapsed, values = _time(server.url, c, pairs)
                if not _same(values, baseline_values):
                    raise SystemExit(f"concurrency {c} gave different values from concurrency 1")
                times[c].append(elapsed)

    base = statistics.median(times[1])
    print(
        f"server scoring {args.scoring!r}, delay {args.delay:g} s per answer, "
        f"{args.requests} requests x {PAIRS_PER_REQUEST} pairs, "
        f"median of {args.repeat} runs (levels interleaved); values identical at every level"
    )
    print(f"{'concurrency':>11} | {'requests/s':>10} | {'pairs/s':>8} | {'vs 1':>6} | {'ideal':>6} | spread (min-max s)")
    for c in levels:
        t = statistics.median(times[c])
        bound = args.requests / math.ceil(args.requests / c)  # rounds of c waits: 24 requests at 16 is 2 rounds
        print(
            f"{c:>11} | {args.requests / t:>10.2f} | {len(pairs) / t:>8.1f} | {base / t:>5.2f}x | {bound:>5.1f}x "
            f"| {min(times[c]):.2f}-{max(times[c]):.2f}"
        )


if __name__ == "__main__":
    main()
