"""One background job per model group (``backend.lab.runs``): plans, signatures, side by side, and in turn.

The plans are pinned exactly; the timing tests run the bundled SmolLM2 and MiniLM. A job on
another model must finish while the language model is busy (its lock held by the test, as a
long PPL pass or a Quality scoring job holds it), and two jobs on one embedder must never run
its forward passes at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from backend.chunkers import make_chunker
from backend.lab.models import SessionModels
from backend.lab.runs import MODEL_GROUPS, model_group, plan_model_runs, runs_cover
from backend.models.chat import LocalChat
from backend.models.embedder import load_embedder
from backend.models.scorer import load_scorer
from backend.progress import QUEUED, Progress
from backend.text.document import Document
from tests.conftest import ROOT

TEXT = (
    "The lighthouse was built in 1851. Its lamp burned whale oil. Keepers climbed the steps at dusk. "
    "Bread is made from flour and water. The dough must rest. A hot oven gives the crust its colour."
)
DOC = Document.from_text(TEXT, source="runs.txt")
PPL = make_chunker("ppl", {"threshold": 0.0}).config
PPL_B = make_chunker("ppl", {"threshold": 0.5}).config
SEMANTIC = make_chunker("semantic").config
MOC = make_chunker("moc").config


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A private output cache, and no chat API: the local chat model is the default."""
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "CHUNKLAB_CHAT", "CHUNKLAB_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)


def _models(scorer=None) -> SessionModels:
    if scorer is not None:
        return SessionModels.of(scorer)
    return SessionModels("SmolLM2-test", "fingerprint-of-the-test", default=True)


def test_each_model_group_gets_its_own_plan_and_signature(cache) -> None:
    models = _models()
    runs = plan_model_runs(DOC, models, [SEMANTIC, PPL, MOC, PPL_B])
    assert MODEL_GROUPS == ("lm", "embedder", "chat")
    assert [model_group(c) for c in (PPL, SEMANTIC, MOC)] == ["lm", "embedder", "chat"]
    assert [(r.group, r.configs) for r in runs] == [("lm", (PPL, PPL_B)), ("embedder", (SEMANTIC,)), ("chat", (MOC,))]
    assert [r.plan.title for r in runs] == [
        "Running 2 configurations with SmolLM2-test (default)",
        "Running 1 configuration with all-MiniLM-L6-v2 (default)",
        "Running 1 configuration with the bundled chat model (default)",
    ]
    assert [r.plan.needs_lm for r in runs] == [True, False, False]  # only the language model's job loads it
    assert [r.plan.model for r in runs] == [
        "SmolLM2-test (default)", "all-MiniLM-L6-v2 (default)", "the bundled chat model (default)",
    ]
    assert len({r.plan.signature for r in runs}) == 3
    # A group's signature names its own configurations only: adding a semantic configuration
    # leaves the language model's job as it is (the page keeps it running).
    again = plan_model_runs(DOC, models, [PPL, PPL_B])
    assert [r.plan.signature for r in again] == [runs[0].plan.signature]
    more = plan_model_runs(DOC, models, [SEMANTIC, PPL, make_chunker("semantic_max").config, PPL_B])
    assert more[0].plan.signature == runs[0].plan.signature and more[1].plan.signature != runs[1].plan.signature


def test_runs_cover_only_the_configurations_of_the_jobs_own_group(cache) -> None:
    models = _models()
    lm_run, embedder_run = plan_model_runs(DOC, models, [PPL, SEMANTIC])
    other = Document.from_text(TEXT + " More.", source="other.txt")
    assert [runs_cover(lm_run.plan.signature, DOC, models, c) for c in (PPL, PPL_B, SEMANTIC)] == [True, False, False]
    assert [runs_cover(embedder_run.plan.signature, DOC, models, c) for c in (PPL, SEMANTIC)] == [False, True]
    assert runs_cover(lm_run.plan.signature, other, models, PPL) is False
    assert runs_cover(lm_run.plan.signature, DOC, SessionModels("another", "fp2"), PPL) is False
    assert runs_cover(("model-runs", DOC.id, models.models_key, (PPL,)), DOC, models, PPL) is False  # the old shape


def _wait_for(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_an_embedder_job_runs_while_the_language_model_is_busy(cache) -> None:
    # The language model's lock is held here, as a long PPL pass or a Quality scoring job holds it:
    # the embedder's job runs to its end meanwhile, the language model's job waits, saying so.
    scorer = load_scorer(None, "cpu")
    load_embedder(None, "cpu")
    lm_run, embedder_run = plan_model_runs(DOC, _models(scorer), [PPL, SEMANTIC])
    with scorer.lm.lock:
        lm_job = lm_run.plan.start()
        embedder_job = embedder_run.plan.start()
        assert embedder_job.wait(120), "the embedder's job waited for the language model"
        assert embedder_job.state == "done", embedder_job.error
        assert [(o.config, o.state) for o in embedder_job.result] == [(SEMANTIC, "done")]
        assert _wait_for(lambda: lm_job.label == QUEUED), lm_job.label
        assert lm_job.running
    assert lm_job.wait(120)
    assert lm_job.state == "done", lm_job.error
    assert [(o.config, o.state) for o in lm_job.result] == [(PPL, "done")]
    assert lm_job.seconds > embedder_job.seconds


def test_two_jobs_on_one_embedder_take_turns_batch_by_batch(cache, monkeypatch) -> None:
    embedder = load_embedder(None, "cpu")
    calls: list[tuple[str, float, float]] = []
    real = embedder._encode

    def recorded(batch):
        started = time.perf_counter()
        out = real(batch)
        time.sleep(0.01)  # long enough for the other job to be waiting at the lock
        calls.append((threading.current_thread().name, started, time.perf_counter()))
        return out

    monkeypatch.setattr(embedder, "_encode", recorded)
    labels: dict[str, list[str]] = {"first": [], "second": []}
    texts = [f"Sentence number {i} about lighthouses and bread." for i in range(12)]
    go = threading.Barrier(2)

    def job(name: str) -> None:
        progress = Progress(lambda f, eta, label: labels[name].append(label))
        go.wait()
        embedder.embed(texts, batch_size=1, progress=progress)

    threads = [threading.Thread(target=job, args=(n,), name=n) for n in labels]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(name for name, _, _ in calls) == ["first"] * 12 + ["second"] * 12
    spans = sorted((s, e) for _, s, e in calls)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:])), "two forward passes ran at once"
    assert QUEUED in labels["first"] + labels["second"]  # the waiting job's bar said so
    assert labels["first"][-1] == labels["second"][-1] == "12 / 12"


def test_the_bundled_chat_model_waits_its_turn_on_the_language_model(cache) -> None:
    # The local chat model is the scorer's SmolLM2: a chat job beside a scoring job takes turns with it.
    scorer = load_scorer(None, "cpu")
    chat = LocalChat(lm=scorer.lm)
    labels: list[str] = []
    replies: list[str] = []

    def ask() -> None:
        progress = Progress(lambda f, eta, label: labels.append(label))
        replies.append(chat.complete([{"role": "user", "content": "Say yes."}], max_tokens=2, progress=progress))

    worker = threading.Thread(target=ask)
    with scorer.lm.lock:
        worker.start()
        assert _wait_for(lambda: QUEUED in labels)
        assert replies == []
    worker.join(120)
    assert len(replies) == 1 and isinstance(replies[0], str)


_LOAD_BOTH = """
import threading, traceback
import PIL.Image  # as backend.jobs.start_job imports it first
from backend.models.embedder import load_embedder
from backend.models.scorer import load_scorer
errors = []
def run(fn):
    try:
        fn()
    except Exception:
        errors.append(traceback.format_exc(limit=1))
jobs = [threading.Thread(target=run, args=(lambda: load_scorer(None, "cpu"),)),
        threading.Thread(target=run, args=(lambda: load_embedder(None, "cpu").embed(["a lighthouse"]),))]
for job in jobs:
    job.start()
for job in jobs:
    job.join()
print(errors)
"""


def test_two_jobs_load_their_models_at_once_in_a_fresh_process() -> None:
    # Without LOADING_LOCK, one of two threads importing transformers together was handed a
    # partially initialized module about every other time ("cannot import name 'AutoModelForCausalLM'").
    out = subprocess.run(
        [sys.executable, "-c", _LOAD_BOTH], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "CHUNKLAB_TORCH_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
