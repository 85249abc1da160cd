"""Shared test setup: the repo root on sys.path, and a private data directory for caches."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Tests never touch the user's ~/.chunklab; caches live in a per-run folder.
os.environ.setdefault("CHUNKLAB_DATA_DIR", str(ROOT / ".pytest_cache" / "chunklab-data"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

pytest.register_assert_rewrite("tests.invariants")

pytest_plugins = ["tests.support.retrieval_fixtures"]
