"""The ``reproduce`` subcommand of ``python -m backend``: a paper's table, rerun beside the paper's numbers.

Subcommand:
    reproduce chroma --data DIR [--out DIR] [--rows id,id…] [--embedder default|PATH] [--json]
        The Chroma report's all-MiniLM-L6-v2 table (8 configurations, 5 chunks retrieved per
        question) on a question set in the Chroma format (``DIR/questions_df.csv`` and
        ``DIR/corpora/<corpus_id>.md|.txt``): per row and metric (recall, precision, precision-Ω,
        IoU, in percent) ours, the paper's and the difference; then the standard deviations.
        ``--rows`` picks rows by id (``recursive-250-125``, ``tokentext-200-0``, ``cluster-250``…).
        Each finished row is kept in ``--out`` (default ``$CHUNKLAB_DATA_DIR/reproduce/chroma``),
        keyed by the question set's digest and the embedder's fingerprint: a rerun reads the rows
        done before (it says so on stderr) and computes only the others; Ctrl-C (exit 130) keeps
        the finished rows. ``--json`` prints one JSON document instead of the table. The work is
        :func:`backend.lab.reproduce.reproduce_chroma`.

Errors are one line on stderr: exit 1 for a missing folder, CSV or corpus, 2 for bad arguments
(an unknown row id: the message lists the ids).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from backend.cli.common import StderrProgress, write
from backend.config import quiet_hub_progress_bars
from backend.lab.reproduce import ROW_IDS, ChromaRequest, reproduce_chroma, reproduction_text

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("reproduce",)


def _ids(raw: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in raw.split(",") if x.strip())


def add_commands(sub: Any) -> None:
    """Register ``reproduce chroma`` on the ``python -m backend`` subparsers."""
    p = sub.add_parser("reproduce", help="rerun a paper's table on a question set, beside the paper's numbers")
    r_sub = p.add_subparsers(dest="reproduce_command", required=True, parser_class=type(p))
    p_chroma = r_sub.add_parser(
        "chroma", help="the Chroma report's all-MiniLM-L6-v2 table (5 retrieved): ours / paper / difference"
    )
    p_chroma.add_argument(
        "--data", required=True, metavar="DIR",
        help="a folder in the Chroma format: questions_df.csv (question, references, corpus_id) and "
             "corpora/<corpus_id>.md|.txt",
    )
    p_chroma.add_argument(
        "--out", type=Path, metavar="DIR",
        help="where finished rows are kept, one JSON file each, keyed by the question set and the embedder "
             "(default $CHUNKLAB_DATA_DIR/reproduce/chroma); a rerun reuses them",
    )
    p_chroma.add_argument(
        "--rows", metavar="ID,ID", default="",
        help=f"the rows to run, comma-separated (default all): {', '.join(ROW_IDS)}",
    )
    p_chroma.add_argument(
        "--embedder", default="default", metavar="default|PATH",
        help="the embedding model (default: CHUNKLAB_EMBEDDER or the bundled all-MiniLM-L6-v2, the paper's)",
    )
    p_chroma.add_argument("--json", action="store_true", help="print one JSON document instead of the table")


def run(args: argparse.Namespace) -> int:
    """Run ``reproduce chroma``; errors propagate to :func:`backend.cli.main.main` (one line, exit 1 or 2)."""
    request = ChromaRequest(
        data=args.data, out=str(args.out) if args.out else None, rows=_ids(args.rows), embedder=args.embedder
    )
    quiet_hub_progress_bars()
    with StderrProgress("reproducing") as line:
        result = reproduce_chroma(request, progress=line)
    if result.reused:
        print(f"resumed: {result.reused} of {len(result.rows)} rows were already done in {result.out} "
              "(read back, not computed)", file=sys.stderr)
    write(json.dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n" if args.json
          else reproduction_text(result))
    return 0
