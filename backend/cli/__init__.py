"""The command-line interface, ``python -m backend …``: one module per group of subcommands.

- ``main``: the parser, the document and model subcommands (chunk, compare, curve, cache…).
- ``ppl``: ``ppl`` (per-sentence scores, or the Meta-Chunking page's CSV) and ``theta-curve``.
- ``quality``: ``metrics`` (MoC's BC, CS, DS).
- ``retrieval``: ``eval``, ``questions``, ``index``, ``query`` (the retrieval lab).
- ``docs``: the docs' generated reference pages (every subcommand and option, the environment variables).
- ``common``: what they share (argument types, model flags, loading, progress on stderr).

Importing it in a core install (no pandas, plotly or optuna) exits with one line naming what to install.
"""

import importlib.util
import sys

# The command line's subcommands draw figures and tables (plotly, pandas) and tune (optuna), which a
# core install (``pip install "chunk-lab[core]"``: the chunklab library alone) leaves out. There it says
# so in one line instead of a traceback; the library needs none of them.
MISSING = tuple(name for name in ("pandas", "plotly", "optuna") if importlib.util.find_spec(name) is None)
if MISSING:
    print(
        f"error: the command line needs {', '.join(MISSING)}, which a core install leaves out: "
        'pip install "chunk-lab[app]" (the chunklab library works without them)',
        file=sys.stderr,
    )
    raise SystemExit(1)
