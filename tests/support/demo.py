"""Demo mode for a test: ``CHUNKLAB_DEMO=1``, its own cache and data folders, and every model loader refusing."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.models.cache import DEMO_CACHE_DIR
from tests.support.patching import patch_everywhere

__all__ = ["demo_environment"]

_LOADERS = (
    "backend.models.scorer.load_scorer", "backend.models.lm.load_lm", "backend.models.scorer.load_lm",
    "backend.models.embedder.load_embedder",
)


_QUERIES = ("backend.models.lm.loaded_lm", "backend.models.embedder.loaded_embedder")


def _no_model(*args, **kwargs):
    raise AssertionError("demo mode loaded a model")


def _none_loaded(*args, **kwargs):
    return None


def demo_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Demo mode under ``tmp_path`` (cache and data folders of its own, no server or API named), models refused.

    Skips the test when no demo cache ships. Returns the data folder.
    """
    if not any(DEMO_CACHE_DIR.glob("*.entry")):
        pytest.skip("no shipped demo cache")
    monkeypatch.setenv("CHUNKLAB_DEMO", "1")
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    for name in ("CHUNKLAB_LM", "CHUNKLAB_EMBEDDER", "CHROMA_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for target in _LOADERS:
        patch_everywhere(monkeypatch, target, _no_model)
    # As in a fresh app process: a model that an earlier test loaded into this one is not there to reuse.
    for target in _QUERIES:
        patch_everywhere(monkeypatch, target, _none_loaded)
    return tmp_path / "data"
