"""Pages offer to resume a scoring pass cut short, and the output cache's failures show one notice."""

from __future__ import annotations

import numpy as np
import pytest

from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from backend.text.document import Document
from tests.conftest import ROOT
from tests.support.apptest import TIMEOUT, open_page, run, wait_job

TEXT = "The cat sat on the mat. It was warm by the fire. Stock prices fell sharply on Monday. Gluons bind quarks."


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CHUNKLAB_LM", raising=False)
    monkeypatch.delenv("CHUNKLAB_DEMO", raising=False)
    return tmp_path / "cache"


def _leave_a_checkpoint(text: str, scored: int, tokens: int) -> None:
    """What an interrupted pass over ``text`` under the bundled model would leave (offsets made up)."""
    from backend.models.cache import default_cache
    from backend.models.identity import fingerprint_without_loading
    from backend.models.scoring import checkpoint_key

    nll = np.full(tokens, np.nan)
    nll[1:scored] = 1.0
    default_cache().put(checkpoint_key(fingerprint_without_loading(None), text, None), {
        "starts": np.arange(tokens, dtype=np.int64), "ends": np.arange(1, tokens + 1, dtype=np.int64),
        "nll": nll, "window": 8192, "scored": scored,
    })


def test_the_ppl_page_offers_to_resume_an_interrupted_pass(cache_dir):
    from backend.models.cache import default_cache
    from backend.models.identity import fingerprint_without_loading
    from backend.models.scoring import scoring_checkpoint

    doc = Document.from_text(TEXT, source="interrupted.txt")
    _leave_a_checkpoint(doc.text, 9, 41)
    at = open_page("pages/ppl.py", doc)
    assert "ppl_score_job" not in at.session_state  # not restarted alone
    notes = [i.value for i in at.info if "interrupted" in i.value]
    assert notes == ["Scoring was interrupted: 8 of 40 tokens already scored. Resume goes on from there."]
    button = at.button(key="ppl_score")
    assert button.label == "Resume"
    button.click()
    run(at)
    job = wait_job(at, "ppl_score_job")
    assert job.state == "done", job.error
    # These made-up offsets do not fit the text: the pass scored it all, and the checkpoint is gone.
    assert len(job.result.sentences) == 4
    assert scoring_checkpoint(default_cache(), fingerprint_without_loading(None), doc.text, None) is None
    assert not [i.value for i in at.info if "interrupted" in i.value]


def test_an_unwritable_cache_is_said_once_and_the_pages_keep_working(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # a cache folder under a file cannot be created, even by root
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("CHUNKLAB_LM", raising=False)
    monkeypatch.delenv("CHUNKLAB_DEMO", raising=False)

    at = run(AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT))
    toasts = [t.value for t in at.toast]
    assert len(toasts) == 1 and "cannot be written" in toasts[0] and "results are not cached" in toasts[0]
    run(at)
    assert not at.toast  # said once
    at.session_state["doc"] = Document.from_text(TEXT, source="uncached.txt")
    at.switch_page("pages/ppl.py")
    run(at)
    job = wait_job(at, "ppl_score_job")  # scored all the same
    assert job.state == "done", job.error
    assert len(job.result.sentences) == 4
    assert not at.toast  # said once

    at.switch_page("pages/models.py")
    run(at)
    assert not at.toast
    assert [w.value for w in at.warning if "cannot be written" in w.value]


class _DiesAfterOnePart:
    """The bundled embedder, cut off after its first part (as a killed indexing run would be)."""

    def __init__(self) -> None:
        from backend.models.embeddings import load_text_embedder

        self.inner = load_text_embedder(None)
        self.info = self.inner.info
        self.calls = 0

    def embed(self, texts, *, progress=None):
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("killed")
        return self.inner.embed(texts, progress=progress)


def test_the_retrieval_page_says_indexing_was_interrupted_and_search_resumes_it(tmp_path, monkeypatch):
    from backend.chunkers import run_chunker
    from backend.models import embeddings
    from backend.models.cache import default_cache
    from components.state import normalized_config
    from tests.support.apptest import isolated_lab

    monkeypatch.setattr(embeddings, "EMBED_PART", 4)
    text = (ROOT / "tests" / "data" / "retrieval" / "corpora" / "sourdough.txt").read_text(encoding="utf-8")
    doc = Document.from_text(text, source="sourdough.txt")
    config = normalized_config("recursive", {"chunk_size": 40})
    (tmp_path / "lab").mkdir()
    with isolated_lab(tmp_path / "lab"):
        texts = [c.text for c in run_chunker(doc, config).chunks]
        assert len(texts) > 4
        with pytest.raises(RuntimeError, match="killed"):
            embeddings.embed_texts(_DiesAfterOnePart(), texts, cache=default_cache())

        at = open_page("pages/retrieval.py", doc, [ConfigEntry(0, "A", config)])
        notes = [i.value for i in at.info if "interrupted" in i.value]
        assert notes == [f"Indexing was interrupted: 4 of {len(texts)} chunks already embedded. "
                         "Search resumes it from there."]
        at.text_input(key="ret_query").set_value("How often do you feed a starter kept in the fridge?")
        at.button(key="ret_search").click()
        run(at)
        job = wait_job(at, "ret_search_job")
        assert job.state == "done", job.error
        assert len(job.result.answers["A"].hits) == 5
        assert not [i.value for i in at.info if "interrupted" in i.value]
        assert embeddings.embedded_in_parts(default_cache(), _DiesAfterOnePart().info.fingerprint, texts) == 0


def test_the_compare_page_offers_to_resume_a_model_run_whose_scoring_was_interrupted(cache_dir):
    from components.state import normalized_config

    doc = Document.from_text("Resumed on Compare. " + TEXT, source="compare.txt")
    _leave_a_checkpoint(doc.text, 5, 30)
    at = open_page("pages/compare.py", doc, [ConfigEntry(0, "A", normalized_config("ppl", {}))])
    assert "cmp_lm_job" not in at.session_state  # not restarted alone
    assert [i.value for i in at.info if "interrupted" in i.value] == [
        "The model run was interrupted: 4 of 29 tokens already scored. Resume goes on from there."
    ]
    button = at.button(key="cmp_lm_run")
    assert button.label == "Resume"
    button.click()
    run(at)
    job = wait_job(at, "cmp_lm_job")
    assert job.state == "done", job.error
    assert [o.state for o in job.result] == ["done"]
