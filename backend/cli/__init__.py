"""The command-line interface, ``python -m backend …``: one module per group of subcommands.

- ``main``: the parser, the document and model subcommands (chunk, compare, curve, cache…).
- ``ppl``: ``ppl`` (per-sentence scores, or the Meta-Chunking page's CSV) and ``theta-curve``.
- ``quality``: ``metrics`` (MoC's BC, CS, DS).
- ``retrieval``: ``eval``, ``questions``, ``index``, ``query`` (the retrieval lab).
- ``docs``: the docs' generated reference pages (every subcommand and option, the environment variables).
- ``common``: what they share (argument types, model flags, loading, progress on stderr).
"""
