"""The Compare page runs the model-backed configurations of different models side by side, one job each.

The bundled SmolLM2 is held busy by the test (its lock, as a long PPL pass holds it): the
semantic configuration's job (the embedder) must finish and its chunks show meanwhile, while
the PPL configuration's job waits, saying it is queued; releasing the model lets it finish.
Neither job is started twice.
"""

from __future__ import annotations

import time
import uuid

from backend.chunking import ConfigEntry
from backend.models.lm import load_lm
from backend.progress import QUEUED
from backend.text.document import Document
from components.keys import COMPARE, CONFIGS, NEXT_UID
from components.state import normalized_config
from tests.support.apptest import open_page, wait_job
from tests.support.apptest import run as checked_run


def _card(at, uid: int) -> str:
    return " ".join(c.value for c in at.get_by_key(f"cmp_card_{uid}").caption)


def test_a_semantic_chunking_shows_while_the_language_model_is_busy(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("CHUNKLAB_EMBEDDER", "CHUNKLAB_LM"):
        monkeypatch.delenv(name, raising=False)
    doc = Document.from_text(
        f"Side by side {uuid.uuid4().hex[:8]}. The lighthouse stood on the cliff. Its lamp burned whale oil. "
        "Stocks fell on Monday. Traders sold their shares.",
        source="side.txt",
    )
    lm = load_lm(None)  # the process's one SmolLM2: the page's job scores with this same model
    with lm.lock:
        at = open_page("pages/document.py", doc)
        at.session_state[CONFIGS] = [
            ConfigEntry(0, "A", normalized_config("ppl", {})), ConfigEntry(1, "B", normalized_config("semantic", {})),
        ]
        at.session_state[NEXT_UID] = 2
        at.switch_page("pages/compare.py")
        checked_run(at)
        lm_job = at.session_state[COMPARE.lm_job]
        embedder_job = at.session_state[COMPARE.group_job("embedder")]
        assert lm_job is not embedder_job
        panel = " ".join(c.value for c in at.caption)
        assert "side by side in the background" in panel
        wait_job(at, COMPARE.group_job("embedder"))
        assert embedder_job.state == "done", embedder_job.error
        assert lm_job.running  # the language model is still busy
        assert "chunks" in _card(at, 1) and "Waiting for" not in _card(at, 1)
        assert "Waiting for SmolLM2" in _card(at, 0)
        deadline = time.monotonic() + 60
        while lm_job.label != QUEUED and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lm_job.label == QUEUED
    wait_job(at, COMPARE.lm_job)
    assert lm_job.state == "done", lm_job.error
    assert "chunks" in _card(at, 0) and "chunks" in _card(at, 1)
    assert at.session_state[COMPARE.lm_job] is lm_job  # neither job was started again
    assert at.session_state[COMPARE.group_job("embedder")] is embedder_job
    assert lm_job.seconds > embedder_job.seconds
