"""torch's CPU thread count for the models: 1 against 2 intra-op threads, alone and beside a second job.

Why it matters: torch's intra-op threads are one pool per process, set with
``torch.set_num_threads``; a job that runs beside another (a PPL pass beside a semantic
chunking, see ``backend.lab.runs``) shares it, and every thread beyond the free cores only
waits. This script measures what ``CHUNKLAB_TORCH_THREADS``'s default is chosen from
(``backend.config.torch_threads``), on the bundled models, in one process:

- ``lm``: one forward pass of SmolLM2-135M over ``--lm-tokens`` tokens of a bundled sample;
- ``embedder``: all-MiniLM-L6-v2 embedding ``--texts`` sentences of the same sample (one batch).

For each thread count (``--threads``, default 1 and 2) it times ``--passes`` passes of each
model, best of ``--repeat`` rounds (the thread counts take turns within each round):

1. alone: the model's passes with nothing else running in this process;
2. beside: the same passes while a second thread runs the other model without pause (what a
   job sees while another job computes);
3. both jobs: the wall time of the two models' passes run side by side in two threads, against
   the same passes run one after the other (the sum of 1's times) at the same thread count; and
   when the embedder's job is done: side by side, against behind the language model's job (as
   when one job ran every model-backed configuration of a page, one after the other).

and prints each time with its ratio to the 1-thread time measured in this run (above 1: slower
than 1 thread). The machine's load average is printed before and after: other processes on the
same cores change every number, so compare ratios of one run only. Nothing is asserted.

Run:  CHUNKLAB_TORCH_THREADS= .venv/bin/python bench/bench_threads.py [--quick] [--passes 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.models.embedder import load_embedder  # noqa: E402
from backend.models.lm import load_lm  # noqa: E402
from backend.samples import load_sample  # noqa: E402


def _workloads(lm_tokens: int, texts: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """One forward pass of each bundled model, as callables (models loaded here)."""
    import torch

    doc = load_sample("technical")
    lm = load_lm(None, "cpu")
    ids = lm.tokenizer(doc.text, add_special_tokens=False, return_tensors="pt")["input_ids"][:, :lm_tokens]
    embedder = load_embedder(None, "cpu")
    sentences = [s.strip() for s in doc.text.replace("\n", " ").split(". ") if s.strip()][:texts]

    def lm_pass() -> None:
        with lm.lock, torch.inference_mode():
            lm.model(ids, logits_to_keep=1)

    def embedder_pass() -> None:
        embedder.embed(sentences, batch_size=len(sentences))

    return lm_pass, embedder_pass


def _timed(fn: Callable[[], None], passes: int) -> float:
    started = time.perf_counter()
    for _ in range(passes):
        fn()
    return time.perf_counter() - started


def _beside(fn: Callable[[], None], other: Callable[[], None], passes: int) -> float:
    """Seconds of ``passes`` calls of ``fn`` while another thread calls ``other`` without pause."""
    stop = threading.Event()
    running = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            other()
            running.set()

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    running.wait()
    try:
        return _timed(fn, passes)
    finally:
        stop.set()
        worker.join()


def _side_by_side(first: Callable[[], None], second: Callable[[], None], passes: int) -> tuple[float, float]:
    """Wall seconds until ``passes`` calls of each, run in two threads at once, are done: (both, ``second``'s)."""
    ended: list[float] = []

    def run_second() -> None:
        _timed(second, passes)
        ended.append(time.perf_counter())

    worker = threading.Thread(target=run_second)
    started = time.perf_counter()
    worker.start()
    _timed(first, passes)
    worker.join()
    return time.perf_counter() - started, ended[0] - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2", help="intra-op thread counts to compare (the first is the baseline)")
    ap.add_argument("--passes", type=int, default=8, help="forward passes of each model per timing")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each timing is the best of them")
    ap.add_argument("--lm-tokens", type=int, default=512, help="tokens of one SmolLM2 forward pass")
    ap.add_argument("--texts", type=int, default=32, help="sentences of one MiniLM pass (one batch)")
    ap.add_argument("--quick", action="store_true", help="3 passes, 1 round, 256 tokens, 16 sentences (about a minute)")
    args = ap.parse_args()
    if args.quick:
        args.passes, args.repeat, args.lm_tokens, args.texts = 3, 1, 256, 16
    counts = [int(t) for t in args.threads.split(",") if t.strip()]

    import torch

    lm_pass, embedder_pass = _workloads(args.lm_tokens, args.texts)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"torch {torch.__version__}; {cores} cores; load average {os.getloadavg()[0]:.2f} (1 min)")
    print(f"SmolLM2 pass: {args.lm_tokens} tokens; MiniLM pass: {args.texts} sentences; "
          f"{args.passes} passes per timing, best of {args.repeat}")
    runs: dict[int, dict[str, list[float]]] = {n: {} for n in counts}
    for _ in range(args.repeat):  # the thread counts interleaved, so a change of load hits them alike
        for n in counts:
            torch.set_num_threads(n)
            lm_pass(), embedder_pass()  # warm: the first call at a thread count sizes its pool
            times = {
                "lm alone": _timed(lm_pass, args.passes),
                "embedder alone": _timed(embedder_pass, args.passes),
                "lm beside embedder": _beside(lm_pass, embedder_pass, args.passes),
                "embedder beside lm": _beside(embedder_pass, lm_pass, args.passes),
            }
            both, embedder_done = _side_by_side(lm_pass, embedder_pass, args.passes)
            times["both jobs side by side"] = both
            times["embedder job done, side by side"] = embedder_done
            for k, v in times.items():
                runs[n].setdefault(k, []).append(v)
    for name, pick in (("best", min), ("median", statistics.median))[: 1 if args.repeat == 1 else 2]:
        rows = {n: {k: pick(v) for k, v in runs[n].items()} for n in counts}
        for r in rows.values():
            r["both jobs one after the other"] = r["lm alone"] + r["embedder alone"]
            r["embedder job done, behind lm"] = r["both jobs one after the other"]  # one job: it waited for the lm
        base = rows[counts[0]]
        print(f"\n{f'seconds ({name} of {args.repeat})':32}"
              + "".join(f"{f'{n} thread' + ('s' if n > 1 else ''):>22}" for n in counts))
        for what in base:
            cells = "".join(f"{rows[n][what]:>10.2f} s ({rows[n][what] / base[what]:>5.2f}x)" for n in counts)
            print(f"{what:32}{cells}")
        for n in counts:
            r = rows[n]
            print(f"{n} thread{'s' if n > 1 else ''}: side by side / one after the other = "
                  f"{r['both jobs side by side'] / r['both jobs one after the other']:.2f}; "
                  f"the embedder's job done side by side / behind the lm's = "
                  f"{r['embedder job done, side by side'] / r['embedder job done, behind lm']:.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end; ratios are to {counts[0]} thread(s) in this run")


if __name__ == "__main__":
    main()
