"""A fresh data folder (``CHUNKLAB_DATA_DIR``) that shares the run's converted models and tokenizers.

A test that needs its own Chroma store, rate store or output cache still should not pay for converting the
bundled SmolLM2 GGUF again (about 20 s a process): its ``models`` and ``tokenizers`` are links to the run's.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_models_data_dir"]


def shared_models_data_dir(folder: Path) -> Path:
    """Make ``folder`` a data folder whose ``models`` and ``tokenizers`` are the current run's; return it."""
    shared = Path(os.environ["CHUNKLAB_DATA_DIR"]).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("models", "tokenizers"):
        (shared / sub).mkdir(parents=True, exist_ok=True)
        link = folder / sub
        if not link.exists():
            link.symlink_to(shared / sub, target_is_directory=True)
    return folder
