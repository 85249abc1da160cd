"""Settings read from environment variables, with their defaults.

Every variable here is listed in the README.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["max_file_bytes", "data_dir", "DEFAULT_MAX_FILE_MB"]

DEFAULT_MAX_FILE_MB = 50.0


def max_file_bytes() -> int:
    """The upload size limit in bytes (``CHUNKLAB_MAX_FILE_MB``, default 50 MB)."""
    raw = os.environ.get("CHUNKLAB_MAX_FILE_MB", "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_MAX_FILE_MB
    except ValueError:
        mb = DEFAULT_MAX_FILE_MB
    if mb <= 0:
        mb = DEFAULT_MAX_FILE_MB
    return int(mb * 1024 * 1024)


def data_dir() -> Path:
    """Where Chunk Lab keeps caches and stores (``CHUNKLAB_DATA_DIR``, default ``~/.chunklab``)."""
    raw = os.environ.get("CHUNKLAB_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else Path.home() / ".chunklab"
    return path
