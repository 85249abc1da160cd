"""An edit's cost on the Edit page: click → statistics, click → BC, against scoring the edited chunking's BC cold.

The document (default the 36-page /usr/share/doc/libtasn1-doc/libtasn1.pdf; ``--quick`` the
bundled narrative sample) is cut by a recursive base (``--base``) whose BC is in the output
cache (a temporary folder, scored once first: the setup, reported but not compared). Then, for
``--edits`` clicks spread over the document, each in the middle of a chunk of the base (each
from the base, so each brings pairs not scored yet; a click is a toggle, as on the page: it
adds a cut there, or removes the cut its sentence start already is):

(a) click → statistics: :func:`backend.lab.edit.toggle_cut` on the base's spans, ``run_chunker``
    of the edited copy's ``manual`` configuration (the base re-run inside it, as the page does
    when its chunking cache misses) and :func:`backend.lab.edit_metrics.edit_stats`;
(b) click → BC: (a), then :func:`backend.lab.edit_metrics.plan_edit_quality` for
    ``[base, edited]``, its job (only the pairs of the new chunks: 5 for a cut added, 3 for one
    removed) with the bundled
    scorer, loaded before the clock starts as in a running app, and the plan again for the line.

The baseline is what the edit costs without per-pair reuse: the edited chunking's BC scored
from a cold cache (a fresh temporary folder; ``score_chunkings`` with the same scorer),
``--baseline-repeat`` times. Printed: medians, and the ratio baseline / (b).

Run:  .venv/bin/python bench/bench_edit.py [FILE] [--quick] [--base 'recursive chunk_size=200'] [--edits 5]
      [--baseline-repeat 1] [--device cpu|cuda]
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
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from backend.chunkers import run_chunker  # noqa: E402
from backend.chunking import ChunkerConfig, ConfigEntry  # noqa: E402
from backend.cli.common import load_input  # noqa: E402
from backend.lab.edit import EditState, edit_copy, toggle_cut  # noqa: E402
from backend.lab.edit_metrics import edit_stats, plan_edit_quality  # noqa: E402
from backend.lab.models import SessionModels  # noqa: E402
from backend.lab.quality import fold_scoring  # noqa: E402
from backend.metrics.scores import score_chunkings  # noqa: E402
from backend.models.cache import OutputCache  # noqa: E402
from backend.models.scorer import load_scorer  # noqa: E402
from backend.progress import Progress  # noqa: E402

PDF = "/usr/share/doc/libtasn1-doc/libtasn1.pdf"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=PDF, help=f"the document (default {PDF})")
    parser.add_argument("--quick", action="store_true", help="the bundled narrative sample instead")
    parser.add_argument("--base", default="recursive chunk_size=200", help="the base configuration")
    parser.add_argument("--edits", type=int, default=5, help="clicks timed (each adds one cut)")
    parser.add_argument("--baseline-repeat", type=int, default=1, help="cold-cache BC runs of the edited chunking")
    parser.add_argument("--device", default=None, help="where the scorer runs (default: CHUNKLAB_DEVICE, else auto)")
    args = parser.parse_args()

    doc = load_input("sample:narrative" if args.quick else args.file)
    name, params, tokenizer = ChunkerConfig.parse(args.base)
    base_config = ChunkerConfig.make(name, params, tokenizer)
    base = run_chunker(doc, base_config)
    spans = [(c.start, c.end) for c in base.chunks]
    print(f"{doc.source}: {len(doc.pages)} pages, {len(doc.text):,} characters; base {base_config.label}: "
          f"{len(base)} chunks")
    scorer = load_scorer(None, device=args.device)  # loaded, as in a running app
    models = SessionModels.of(scorer)
    print(f"scorer: {scorer.info.name} on {scorer.info.device}")

    with tempfile.TemporaryDirectory() as tmp:
        cache = OutputCache(Path(tmp) / "cache")
        t0 = time.perf_counter()
        score_chunkings([base], scorer=scorer, embedder=None, complete=False, window=None, cache=cache)
        print(f"setup: the base's BC scored into the cache in {_ms(time.perf_counter() - t0)} "
              f"({2 * len(base) - 1} passes)")
        base_entry = ConfigEntry(0, "A", base_config)
        state = EditState.of(edit_copy(base_config, doc))
        store: dict = {"doc": doc.id}
        stats_times, bc_times, lines, scored = [], [], [], []
        picks = [round((k + 0.5) * len(base) / args.edits) for k in range(args.edits)]
        edited = base
        for k in picks:
            chunk = base.chunks[min(k, len(base) - 1)]
            click = (chunk.start + chunk.end) // 2
            t0 = time.perf_counter()
            outcome = toggle_cut(state, doc, spans, click)
            edited = run_chunker(doc, outcome.state.config)
            stats = edit_stats(doc, base, edited)
            t_stats = time.perf_counter() - t0
            entry = ConfigEntry(1, "B", outcome.state.config)
            quality = plan_edit_quality(doc, base_entry, base, entry, edited, models, metrics=["bc"], window=None,
                                        store=store, cache=cache)
            if quality.job is not None:
                fold_scoring(quality.plan, quality.job.run(Progress()), store)
                quality = plan_edit_quality(doc, base_entry, base, entry, edited, models, metrics=["bc"],
                                            window=None, store=store, cache=cache)
            t_bc = time.perf_counter() - t0
            if not outcome.changed or quality.job is not None:
                raise SystemExit(f"click at {click}: {outcome.message}; job left: {quality.job is not None}")
            stats_times.append(t_stats)
            bc_times.append(t_bc)
            scored.append(quality.changed_pairs)
            lines.append(f"  click at {click:,}: {stats.summary.split(': ', 1)[1]}; {quality.line} "
                         f"({quality.changed_pairs} pairs scored) — stats {_ms(t_stats)}, BC {_ms(t_bc)}")
        print("\n".join(lines))

        cold_times = []
        for r in range(args.baseline_repeat):
            cold = OutputCache(Path(tmp) / f"cold{r}")
            t0 = time.perf_counter()
            score_chunkings([edited], scorer=scorer, embedder=None, complete=False, window=None, cache=cold)
            cold_times.append(time.perf_counter() - t0)

    stats_med, bc_med, cold_med = (statistics.median(x) for x in (stats_times, bc_times, cold_times))
    print(f"(a) click → statistics: median {_ms(stats_med)} over {len(stats_times)} clicks")
    print(f"(b) click → BC:         median {_ms(bc_med)} over {len(bc_times)} clicks "
          f"({min(scored)}–{max(scored)} pairs scored each)")
    print(f"baseline: BC of the edited chunking from a cold cache ({2 * len(edited) - 1} passes): median "
          f"{_ms(cold_med)} over {len(cold_times)} run(s)")
    print(f"ratio baseline / (b): {cold_med / bc_med:,.1f}x; baseline / (a): {cold_med / stats_med:,.0f}x")


if __name__ == "__main__":
    main()
