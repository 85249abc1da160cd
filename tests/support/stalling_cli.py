"""``python -m backend`` with a stall at a chosen point, for tests that SIGKILL a run in the middle of its work.

Usage: ``python -m tests.support.stalling_cli MARKER WHAT [--embed-part N] -- CLI ARGS…``

``WHAT`` picks the stall: ``checkpoint`` (after a scoring pass stored its first checkpoint),
``embeddings-part`` (after the first part of a long embedding list was stored),
``upsert`` (after the first five chunks were written to Chroma) or ``publish`` (after a cache entry's temporary file is written, before ``os.replace`` publishes
it). There the process writes ``MARKER`` and sleeps until it is killed. ``--embed-part``
sets :data:`backend.models.embeddings.EMBED_PART` (a rerun must use the same value to reuse parts).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def _stall(marker: Path) -> None:
    marker.write_text(str(os.getpid()), encoding="utf-8")
    while True:
        time.sleep(1)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    own, cli = argv[:split], argv[split + 1 :]
    marker, what = Path(own[0]), own[1]
    if "--embed-part" in own:
        from backend.models import embeddings

        embeddings.EMBED_PART = int(own[own.index("--embed-part") + 1])
    from backend.models.cache import OutputCache

    if what == "publish":
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):  # noqa: ANN001
            if Path(src).name.startswith(".tmp-"):
                _stall(marker)
            return real_replace(src, dst, *args, **kwargs)

        os.replace = replace
    elif what == "upsert":
        from backend.retrieval import store

        store._MAX_UPSERT = 5  # several writes, so the kill lands between two
        real_call = store.ChunkStore._call

        def call(self, label, fn, *args, **kwargs):  # noqa: ANN001
            out = real_call(self, label, fn, *args, **kwargs)
            if label.startswith("writing to collection"):
                _stall(marker)
            return out

        store.ChunkStore._call = call
    else:
        kind = {"checkpoint": "token_nll_partial", "embeddings-part": "embeddings_part"}[what]
        real_put = OutputCache.put

        def put(self, key, value):  # noqa: ANN001
            real_put(self, key, value)
            if key.get("kind") == kind:
                _stall(marker)

        OutputCache.put = put
    from backend.cli.main import main as cli_main

    return cli_main(cli)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
