"""``tune DIR``: a tuning run over a folder, each trial's documents through the corpus engine (local and Ray).

The folder holds two sample documents (a story, a guide in ``notes/``); the questions are model-free ones
generated on each document (6 each: 4 tune, 2 held out per document); the family is recursive, 3 trials.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.cli.main import main
from backend.corpus.results import RESULTS
from backend.lab.tune import TuneRequest, check_request
from backend.samples import SAMPLES_DIR
from backend.tune import run as tune_run
from backend.tune.corpus_scoring import CORPUS_DIR, PER_DOCUMENT_NOTE, CorpusScorer, subset_folder
from backend.tune.result import read_plan

PER_DOCUMENT = 6


def _folder(root: Path) -> Path:
    (root / "notes").mkdir(parents=True)
    (root / "story.txt").write_text((SAMPLES_DIR / "narrative_clockmaker.txt").read_text(encoding="utf-8")[:2500],
                                    encoding="utf-8")
    guide = (SAMPLES_DIR / "technical_kestrel.md").read_text(encoding="utf-8")[:2500]
    (root / "notes" / "kestrel.md").write_text(guide, encoding="utf-8")
    return root


class RecordingScorer(CorpusScorer):
    """The real corpus scorer, recording every call: (configuration spec, question indices)."""

    calls: list[tuple[str, tuple[int, ...]]] = []

    def score(self, config, indices, progress=None):  # type: ignore[override]
        RecordingScorer.calls.append((config.spec, tuple(indices)))
        return super().score(config, indices, progress)


def _request(source: Path, out: Path, **changes) -> TuneRequest:
    fields = dict(sources=(str(source),), questions="generate:model-free", out=str(out), families=("recursive",),
                  trials=3, questions_per_document=PER_DOCUMENT)
    fields.update(changes)
    return check_request(TuneRequest(**fields))


def _results(out: Path) -> dict[str, str]:
    return {p.parent.name: p.read_text(encoding="utf-8") for p in sorted((out / CORPUS_DIR).glob(f"*/{RESULTS}"))}


@pytest.fixture(scope="module")
def dir_run(tmp_path_factory, embedder):
    """The folder tuned locally, then the same request again (a resume), with the calls of each."""
    root = tmp_path_factory.mktemp("tune-dir")
    source = _folder(root / "docs")
    out = root / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tune_run, "CorpusScorer", RecordingScorer)
        RecordingScorer.calls = []
        first = tune_run.run_tune(_request(source, out), embedder=embedder)
        first_calls = list(RecordingScorer.calls)
        written = _results(out)
        RecordingScorer.calls = []
        again = tune_run.run_tune(_request(source, out), embedder=embedder)
        again_calls = list(RecordingScorer.calls)
    return dict(root=root, source=source, out=out, first=first, first_calls=first_calls, written=written,
                again=again, again_calls=again_calls)


def test_a_folder_run_completes_with_a_pick_scored_per_document(dir_run):
    result = dir_run["first"]
    assert result.documents == ("kestrel.md", "story.txt")
    assert result.question_method == "model-free" and result.pick is not None
    assert len(result.trials) == 3 and all(t.state == "complete" for t in result.trials)
    assert len(result.tuning_questions) + len(result.held_out_questions) == 2 * PER_DOCUMENT
    assert PER_DOCUMENT_NOTE in result.warnings
    plan = read_plan(dir_run["out"])
    assert plan["engine"] == "local" and plan["retrieval"] == PER_DOCUMENT_NOTE
    assert (dir_run["out"] / "questions" / "questions.csv").is_file()  # saved: a resume asks the same
    # One corpus folder per distinct question subset, named by the digest of its indices.
    subsets = {idx for _, idx in dir_run["first_calls"]}
    assert set(dir_run["written"]) == {subset_folder(dir_run["out"], idx).name for idx in subsets}


def test_held_out_questions_never_reach_tuning_scoring(dir_run):
    result, calls = dir_run["first"], dir_run["first_calls"]
    held, tuning = set(result.held_out_questions), set(result.tuning_questions)
    first_held = next(i for i, (_, idx) in enumerate(calls) if set(idx) & held)
    assert all(set(idx) <= tuning for _, idx in calls[:first_held])
    assert all(set(idx) == held for _, idx in calls[first_held:])  # the answer: leaders and baseline only
    answered = [spec for spec, _ in calls[first_held:]]
    assert len(answered) == len(set(answered)) <= tune_run.LEADERS + 1
    assert {result.pick.spec, result.baseline.spec} <= set(answered)


def test_a_resume_rescores_nothing(dir_run):
    first, again = dir_run["first"], dir_run["again"]
    assert [(t.number, t.config, t.objective) for t in again.trials] == [
        (t.number, t.config, t.objective) for t in first.trials]
    assert again.pick == first.pick and again.pick_score == first.pick_score
    assert all(set(idx) == set(first.held_out_questions) for _, idx in dir_run["again_calls"])  # no trial again
    assert _results(dir_run["out"]) == dir_run["written"]  # every corpus folder read back, nothing appended


def test_on_ray_the_trials_objectives_are_the_local_ones(dir_run, local_ray, embedder):
    out = dir_run["root"] / "ray"
    on_ray = tune_run.run_tune(_request(dir_run["source"], out, engine="ray", trials=1), embedder=embedder)
    local = dir_run["first"].trials[:1]
    assert [(t.config, t.objective, t.chunks) for t in on_ray.trials] == [(t.config, t.objective, t.chunks)
                                                                          for t in local]
    assert read_plan(out)["engine"] == "ray"


@pytest.mark.parametrize(
    ("engine", "path", "message"),
    [
        ("ray", str(SAMPLES_DIR / "narrative_clockmaker.txt"), "a single document tunes with --engine local"),
        ("spark", "sample:narrative", "engine 'spark' is not available for tuning"),
    ],
)
def test_a_bad_engine_is_one_line_and_exit_2(engine, path, message, tmp_path, capsys):
    code = main(["tune", path, "--questions", "sample:narrative", "--out", str(tmp_path / "o"), "--engine", engine])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
