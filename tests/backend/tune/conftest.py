"""Shared fixtures of the tuner's tests: a small request on the bundled narrative sample, and a counted run.

The runs use the bundled sample, its hand-written question set (12 questions: 8 tune, 4 held out),
the model-free families recursive and fixed_token, the bundled MiniLM (loaded once per process) and
a few trials; embeddings come from the tests' output cache after the first run.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

from backend.lab.tune import TuneRequest, check_request
from backend.models.embeddings import load_text_embedder
from backend.tune import run as tune_run
from backend.tune.scoring import Scorer


@pytest.fixture(scope="session")
def embedder():
    return load_text_embedder(None)


@pytest.fixture
def tune_request(tmp_path: Path) -> Callable[..., TuneRequest]:
    def make(name: str, **changes: Any) -> TuneRequest:
        fields: dict[str, Any] = dict(sources=("sample:narrative",), questions="sample:narrative",
                                      out=str(tmp_path / name), families=("recursive", "fixed_token"), trials=4)
        fields.update(changes)
        return check_request(TuneRequest(**fields))
    return make


class CountingScorer(Scorer):
    """The real scorer, recording every call: (configuration spec, question indices)."""

    calls: list[tuple[str, tuple[int, ...]]] = []

    def score(self, config, indices, progress=None):  # type: ignore[override]
        CountingScorer.calls.append((config.spec, tuple(indices)))
        return super().score(config, indices, progress)


@pytest.fixture
def run_counted(monkeypatch: pytest.MonkeyPatch, embedder) -> Callable[..., Any]:
    """``run_counted(request, **kwargs)``: run_tune with the counting scorer; ``run_counted.calls`` its calls."""
    monkeypatch.setattr(tune_run, "Scorer", CountingScorer)

    def run(request: TuneRequest, **kwargs: Any) -> Any:
        CountingScorer.calls = []
        result = tune_run.run_tune(request, embedder=embedder, **kwargs)
        run.calls = list(CountingScorer.calls)  # type: ignore[attr-defined]
        return result

    return run


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of two CPUs for the module using it (its sockets under a short folder: AF_UNIX paths are short)."""
    import ray

    from backend.corpus.ray_engine import runtime_env

    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp, _node_ip_address="127.0.0.1",
             runtime_env=runtime_env(None), logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
