"""Fixtures the retrieval tests share (a pytest plugin: ``tests/conftest.py`` names it in ``pytest_plugins``).

``embedder``: the bundled MiniLM on the CPU, loaded once per module; ``store``: an embedded Chroma in a
folder of the module's own. A module that needs another kind defines its own fixture of that name.
"""

from __future__ import annotations

import pytest

from backend.retrieval.store import ChunkStore

__all__ = ["embedder", "store"]


@pytest.fixture(scope="module")
def embedder():
    """The bundled embedder (all-MiniLM-L6-v2) on the CPU."""
    from backend.models.embedder import load_embedder

    return load_embedder(device="cpu")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """An embedded Chroma store in a fresh folder."""
    return ChunkStore(path=tmp_path_factory.mktemp("chroma"))
