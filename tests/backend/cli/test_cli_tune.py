"""``python -m backend tune``: one-line errors (exit 2) for bad arguments, a run on a folder with generated questions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from backend.cli.main import main
from backend.samples import SAMPLES_DIR
from backend.tune.result import read_plan, read_trials
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--families", "recursive,nope"], "unknown family 'nope'"),
        (["--objective", "accuracy"], "objective"),
        (["--constraint", "mean_tokens<400x"], "mean_tokens<400x"),
        (["--budget", "ten minutes"], "ten minutes"),
        (["--questions", "generate:telepathy"], "unknown question method 'telepathy'"),
        (["--questions", "generate:model-free", "--questions-per-document", "0"], "questions per document (0)"),
        (["--questions", "generate:model-free", "--questions-per-document", "201"], "between 1 and 200"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(flags, message, tmp_path, capsys):
    args = ["tune", "sample:narrative", "--questions", "sample:narrative", "--out", str(tmp_path / "o"), *flags]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "trials.jsonl").exists()


def test_an_unreadable_question_csv_is_exit_1(tmp_path, capsys):
    code = main(["tune", "sample:narrative", "--questions", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o")])
    assert code == 1 and "no such question CSV" in capsys.readouterr().err


def test_a_folder_with_model_free_questions_tunes_and_resumes(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(SAMPLES_DIR / "narrative_clockmaker.txt", docs / "narrative.txt")
    shutil.copy(SAMPLES_DIR / "technical_kestrel.md", docs / "technical.md")
    out = tmp_path / "out"
    args = ["tune", str(docs), "--questions", "generate:model-free", "--families", "recursive", "--trials", "3",
            "--out", str(out), "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["documents"] == ["narrative.txt", "technical.md"] and result["question_method"] == "model-free"
    assert (out / "questions" / "questions.csv").is_file()  # saved: a resume uses the same questions
    plan = read_plan(out)
    corpora = {line.rsplit(",", 1)[-1] for line in (out / "questions" / "questions.csv").read_text().splitlines()[1:]}
    assert len(corpora) == 2  # one set over both documents, split per corpus
    assert any("model-free questions" in w for w in result["warnings"])
    assert len(result["trials"]) == 3 and result["pick"] is not None
    # Again with a larger cap: the same study goes on; the first three trials are not run again.
    assert main([*args[:-3], "--trials", "4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("On narrative.txt, technical.md, with generate:model-free (")
    assert "pick: " in text and "top trials (4 in all" in text
    assert [t.number for t in read_trials(out)] == [0, 1, 2, 3] and read_plan(out)["study"] == plan["study"]
    assert len((out / "trials.jsonl").read_text().splitlines()) == 4


def test_the_questions_per_document_are_made_saved_and_kept_on_resume(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["tune", "sample:narrative", "--questions", "generate:model-free", "--families", "recursive",
            "--trials", "1", "--out", str(out), "--json"]
    assert main([*args, "--questions-per-document", "6"]) == 0
    assert json.loads(capsys.readouterr().out)["question_set"] == "generate:model-free"
    assert len((out / "questions.csv").read_text().splitlines()) - 1 == 6
    assert (out / "questions.per_document").read_text().strip() == "6"
    # Another count in the same folder: one line, not the old questions silently.
    assert main([*args, "--questions-per-document", "9"]) == 2
    err = capsys.readouterr().err
    assert "holds questions generated with 6 per document, not 9" in err and len(err.strip().splitlines()) == 1
    assert len((out / "questions.csv").read_text().splitlines()) - 1 == 6


def test_a_killed_run_resumes_keeping_its_finished_trials(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["tune", "sample:narrative", "--questions", "sample:narrative", "--families", "recursive,fixed_token",
            "--out", str(out)]
    env = {**os.environ, "CHUNKLAB_TORCH_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "backend", *args, "--trials", "40"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(read_trials(out)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = read_trials(out)
    assert len(before) >= 2 and not (out / "result.json").exists()
    assert main([*args, "--trials", str(len(before) + 2), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    after = read_trials(out)
    assert after[: len(before)] == before  # kept as they were, not scored again
    assert len(after) == len(before) + 2 and len(result["trials"]) == len(after)
    assert len({t.number for t in after}) == len(after)
