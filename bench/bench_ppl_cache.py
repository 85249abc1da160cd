"""Wall time of ``python -m backend ppl`` on a sample: first run (model scores it) vs second (cache).

Both runs are whole processes (interpreter start, imports, document loading included) in a
fresh cache folder, so the ratio is what a user sees when rerunning the command. The target
is a second run at most 15 % of the first.

Run:  .venv/bin/python bench/bench_ppl_cache.py [--sample narrative] [--lm NAME|PATH] [--device cpu] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_ppl(args: list[str], env: dict[str, str]) -> tuple[float, list[dict]]:
    """Run the CLI once; its wall time and its records."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "backend", "ppl", *args], cwd=ROOT, env=env, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"ppl failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace').strip()}")
    return elapsed, [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="narrative", help="bundled sample name (default narrative)")
    parser.add_argument("--lm", help="model spec passed to --lm (default: the bundled SmolLM2)")
    parser.add_argument("--device", help="passed to --device")
    parser.add_argument("--repeat", type=int, default=3, help="cached runs to time (best is reported)")
    opts = parser.parse_args()

    extra = [f"sample:{opts.sample}"]
    if opts.lm:
        extra += ["--lm", opts.lm]
    if opts.device:
        extra += ["--device", opts.device]
    with tempfile.TemporaryDirectory(prefix="chunklab-bench-cache-") as tmp:
        env = {**os.environ, "CHUNKLAB_CACHE_DIR": tmp}
        first, records = run_ppl(extra, env)
        cached = []
        for _ in range(max(1, opts.repeat)):
            t, again = run_ppl(extra, env)
            if again != records:
                sys.exit("the cached run printed different records")
            cached.append(t)
    best = min(cached)
    tokens = sum(r["tokens"] for r in records)
    print(f"sample {opts.sample}: {len(records)} sentences, {tokens:,} scored tokens")
    print(f"first run (model):  {first:7.2f} s")
    print(f"cached run (best of {len(cached)}): {best:7.2f} s   runs: {', '.join(f'{t:.2f}' for t in cached)}")
    ratio = best / first
    print(f"ratio cached/first: {ratio:.1%}  (target <= 15%: {'met' if ratio <= 0.15 else 'NOT met'})")


if __name__ == "__main__":
    main()
