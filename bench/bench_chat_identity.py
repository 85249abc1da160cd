"""What confirming the chat model's served identity costs: cached replies and answered requests.

Against Chunk Lab's scripted OpenAI-compatible chat server (tests/support/scripted_chat_server.py,
127.0.0.1, ``--delay`` seconds added to every answer, usage reported so the speed is measured).
Three ratios, each against a baseline measured in the same run:

- **cached replies**: ``--replies`` cache hits of :func:`backend.models.chat.cached_reply` through
  a :class:`RemoteChat` (its identity confirmed by the server at most every 10 s), against the same
  hits through a chat model whose identity is a constant (no server at all);
- **confirming at every hit** (the memo turned off), against the same baseline: what the 10 s
  memo saves;
- **answered requests**: ``--requests`` uncached :func:`backend.models.chat.chat` calls (the
  listing confirmed, each answer's ``model`` checked, the timeout sized from the measured speed),
  against the same requests sent with the bare ``openai`` client (one client for all; ``chat()``
  builds one per call, as it did before, which is most of the difference on a loaded machine).

Each is timed ``--repeat`` times, interleaved; the median is printed with the spread (min–max).

Run:  .venv/bin/python bench/bench_chat_identity.py [--quick] [--delay 0.05] [--replies 200] [--requests 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["CHUNKLAB_DATA_DIR"] = tempfile.mkdtemp(prefix="chunklab-bench-chat-")  # a rate store of its own

import backend.models.chat as chat_module  # noqa: E402
from backend.models.cache import OutputCache  # noqa: E402
from backend.models.chat import RemoteChat, cached_reply, chat  # noqa: E402
from tests.support.scripted_chat_server import start_scripted_server  # noqa: E402

MODEL = {"id": "bench-model.gguf", "object": "model", "meta": {"n_params": 134515008}}


class ConstantModel:
    """A chat model whose identity needs no server (the baseline of cache hits)."""

    fingerprint = "bench:constant"
    name = "constant"

    def complete(self, messages, *, max_tokens, temperature=0.0, progress=None):
        return "reply"


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question number {i}: say ok."}]


def _hits(model, cache: OutputCache, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        reply, hit = cached_reply(model, _messages(i), max_tokens=8, cache=cache)
        if not hit:
            raise SystemExit(f"reply {i} was not a cache hit")
    return time.perf_counter() - t0


def _fill(model, cache: OutputCache, n: int) -> None:
    for i in range(n):
        cached_reply(model, _messages(i), max_tokens=8, cache=cache)


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.4f} s ({min(xs):.4f}–{max(xs):.4f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.05, help="seconds added to every answer")
    parser.add_argument("--replies", type=int, default=200, help="cache hits timed per run")
    parser.add_argument("--requests", type=int, default=20, help="answered requests timed per run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="50 hits, 5 requests, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.replies, args.requests, args.repeat = 50, 5, 2

    import openai

    with start_scripted_server(reply=lambda m: "ok", models=[MODEL], answer_model="echo", delay=args.delay,
                               usage=lambda m, r: (12, 1)) as server, tempfile.TemporaryDirectory() as tmp:
        remote_cache, constant_cache = OutputCache(Path(tmp) / "remote"), OutputCache(Path(tmp) / "constant")
        remote = RemoteChat(server.url, MODEL["id"])
        _fill(remote, remote_cache, args.replies)
        _fill(ConstantModel(), constant_cache, args.replies)
        client = openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0)
        memo_age = chat_module.IDENTITY_MAX_AGE_S
        base, memo, every, ours, bare = [], [], [], [], []
        for _ in range(args.repeat):
            base.append(_hits(ConstantModel(), constant_cache, args.replies))
            memo.append(_hits(remote, remote_cache, args.replies))
            chat_module.IDENTITY_MAX_AGE_S = 0.0
            try:
                every.append(_hits(remote, remote_cache, args.replies))
            finally:
                chat_module.IDENTITY_MAX_AGE_S = memo_age
            t0 = time.perf_counter()
            for i in range(args.requests):
                chat(_messages(i), base_url=server.url, model=MODEL["id"], max_tokens=8)
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for i in range(args.requests):
                client.chat.completions.create(model=MODEL["id"], messages=_messages(i), max_tokens=8)
            bare.append(time.perf_counter() - t0)
        client.close()

    b = statistics.median(base)
    print(f"scripted server, delay {args.delay:g} s per answer; {args.replies} cached replies, "
          f"{args.requests} answered requests; median of {args.repeat} (min–max)")
    print(f"cached replies, constant identity (baseline): {_spread(base)}")
    print(f"cached replies, served identity (10 s memo):  {_spread(memo)}  ratio {statistics.median(memo) / b:.2f}")
    print(f"cached replies, confirmed at every hit:       {_spread(every)}  ratio {statistics.median(every) / b:.2f}")
    print(f"answered requests, bare openai client (baseline): {_spread(bare)}")
    print(f"answered requests, chat() (identity, checks, sized timeout): {_spread(ours)}  "
          f"ratio {statistics.median(ours) / statistics.median(bare):.2f}")


if __name__ == "__main__":
    main()
