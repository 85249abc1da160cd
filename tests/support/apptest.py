"""What the AppTest page tests share: a checked run, the app opened on a page, waiting for a job, the files a
page's download buttons serve."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import streamlit.testing.v1.app_test as app_test
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.support.datadir import shared_models_data_dir

TIMEOUT = 120


def run(at: AppTest) -> AppTest:
    """One script run that must end without an exception."""
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def start_app() -> AppTest:
    """The app (``app.py``, as in a browser) on its first page, after two runs (the second settles the widget ids)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    run(at)
    return run(at)


def open_page(page: str, doc: Any = None, configs: Sequence[dict] | None = None) -> AppTest:
    """The app (``app.py``, as in a browser) switched to ``page``.

    Args:
        page: e.g. ``"pages/compare.py"``.
        doc: Made the current document when given.
        configs: Compare entries (``{"uid", "tag", "config"}``) to start with, when given.
    """
    at = start_app()
    if doc is not None:
        at.session_state["doc"] = doc
    if configs is not None:
        at.session_state["configs"] = list(configs)
        at.session_state["configs_next_uid"] = len(configs)
    at.switch_page(page)
    return run(at)


def wait_job(at: AppTest, key: str, timeout: float = 240) -> Any:
    """Rerun (as the progress fragment's timer does in a browser) until the job at ``key`` ends."""
    job = at.session_state[key]
    t0 = time.perf_counter()
    while job.running and time.perf_counter() - t0 < timeout:
        time.sleep(0.25)
        run(at)
    assert not job.running, f"{key} still running after {timeout}s"
    run(at)
    return job


def run_sample_benchmark(at: AppTest, sample: str, timeout: float = 300) -> Any:
    """On the Benchmark page: pick the bundled sample set ``sample``, run the benchmark, wait for its job."""
    at.segmented_control(key="bm_source").set_value("Bundled sample set")
    run(at)
    at.selectbox(key="bm_sample").set_value(sample)
    run(at)
    at.button(key="bm_run").click()
    run(at)
    return wait_job(at, "bm_job", timeout=timeout)


@contextlib.contextmanager
def isolated_lab(folder: Path) -> Iterator[Path]:
    """A fresh data directory (Chroma store, output cache) at ``folder`` sharing the converted models.

    The retrieval pages' tests run against their own store and cache, with no Chroma server,
    remote model or API configured, and without converting the bundled models again.
    """
    mp = pytest.MonkeyPatch()
    mp.setenv("CHUNKLAB_DATA_DIR", str(shared_models_data_dir(folder)))
    for name in (
        "CHUNKLAB_CACHE_DIR", "CHROMA_HOST", "CHROMA_PORT", "CHROMA_TIMEOUT", "CHUNKLAB_LM", "CHUNKLAB_EMBEDDER",
        "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL",
    ):
        mp.delenv(name, raising=False)
    try:
        yield folder
    finally:
        mp.undo()


class Downloads:
    """The files the download buttons of AppTest runs registered: ``(data or its callable, file name)`` by URL or
    deferred id (AppTest's media manager lives for one run, so it is recorded as it is filled)."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[Any, str | None]] = {}

    def of(self, button: Any) -> tuple[bytes, str | None]:
        """A download button's bytes (a callable's called, as a click would) and file name."""
        deferred = button.proto.deferred_file_id
        data, name = self.files[deferred or button.proto.url]
        data = data() if deferred else data
        return (data.encode("utf-8") if isinstance(data, str) else data), name


@contextlib.contextmanager
def recorded_downloads() -> Iterator[Downloads]:
    """While open, every AppTest run records what its download buttons would serve."""
    record = Downloads()

    class Recording(MediaFileManager):
        def add(self, path_or_data, mimetype, coordinates, file_name=None, is_for_static_download=False):
            url = super().add(path_or_data, mimetype, coordinates, file_name, is_for_static_download)
            record.files[url] = (path_or_data, file_name)
            return url

        def add_deferred(self, data_callable, mimetype, coordinates, file_name=None, *, element_id=""):
            file_id = super().add_deferred(data_callable, mimetype, coordinates, file_name, element_id=element_id)
            record.files[file_id] = (data_callable, file_name)
            return file_id

    mp = pytest.MonkeyPatch()
    mp.setattr(app_test, "MediaFileManager", Recording)
    try:
        yield record
    finally:
        mp.undo()
