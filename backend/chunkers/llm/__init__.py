"""Chunkers that ask a chat model where to cut: ``llm_split``, ``lumber`` and MoC's meta-chunker.

- ``chunkers``: the registered chunkers.
- ``moc``: the MoC meta-chunker's prompt, rule parsing and edit-distance span recovery.
- ``granularity``: MoC's pluggable granularity routers (default and trainable baseline).
"""
