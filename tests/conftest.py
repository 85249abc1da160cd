"""Shared test setup: the repo root on sys.path, and a private data directory for caches."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Tests never touch the user's ~/.chunklab; caches live in a per-run folder, one per pytest-xdist worker
# (an embedded Chroma folder is not safe to open from two processes). The converted models and
# tokenizers are shared by every worker: they are written atomically, and converting the bundled
# GGUF costs about 20 s a process.
_SHARED = ROOT / ".pytest_cache" / "chunklab-data"
os.environ.setdefault("CHUNKLAB_DATA_DIR", str(_SHARED))
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER and os.environ["CHUNKLAB_DATA_DIR"] == str(_SHARED):  # the controller's default, inherited
    from tests.support.datadir import shared_models_data_dir

    os.environ["CHUNKLAB_DATA_DIR"] = str(shared_models_data_dir(_SHARED.with_name(f"chunklab-data-{_WORKER}")))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

pytest.register_assert_rewrite("tests.invariants")

pytest_plugins = ["tests.support.retrieval_fixtures"]


_DURATIONS = Path(__file__).with_name("durations.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the slowest files first, so that pytest-xdist's workers (``--dist loadfile``) finish together.

    ``tests/durations.json`` holds each file's seconds from a measured run (``scripts/test_durations.py``
    writes it); a file it does not know counts as fast. The order within a file is kept.
    """
    if not _DURATIONS.is_file():
        return
    seconds = json.loads(_DURATIONS.read_text(encoding="utf-8"))
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0), order[id(item)]))


@pytest.fixture(autouse=True)
def _end_the_tests_jobs():
    """Cancel and join the background jobs a test started and left running.

    A page test that ends while its job still runs would otherwise leave that job computing on the
    process's shared model while the next tests run (seen: a later test's timing of an embedder's
    batches counted the leftover job's batches). Jobs started by a module's fixture are left alone.
    """
    from backend.jobs import running_jobs

    before = {id(job) for job in running_jobs()}
    yield
    left = [job for job in running_jobs() if id(job) not in before]
    for job in left:
        job.cancel()
    for job in left:
        job.wait(120)
