"""``python -m backend questions compare SET_A SET_B``: ρ per metric with an interval, the sets' methods, one-line errors."""

from __future__ import annotations

import json
import math

from backend.retrieval.questions import load_sample_question_set, save_question_set
from tests.backend.cli.test_cli import assert_one_line_error
from tests.support.cli import run_main

CONFIGS = ("--config", "fixed_token chunk_size=64", "--config", "recursive chunk_size=200",
           "--config", "fixed_token chunk_size=400")


def test_a_generated_set_against_the_hand_written_one(tmp_path) -> None:
    proc = run_main("questions", "compare", "sample:technical", "generate:model-free", *CONFIGS, "--n", "8",
                    "--draws", "300", "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    assert [(s["name"], s["method"]) for s in out["sets"]] == [
        ("sample:technical", "hand-written"), ("generate:model-free", "model-free")]
    assert out["sets"][0]["questions"] == 12 and out["sets"][1]["questions"] == 8
    assert out["corpora"] == ["technical_kestrel"] and out["retrieve"] == 5 and len(out["configs"]) == 3
    rows = {a["metric"]: a for a in out["agreement"]}
    assert set(rows) == {"recall", "precision", "precision_omega", "iou"}
    for row in rows.values():
        assert row["draws"] == 300 and row["questions"] == [12, 8] and row["configurations"] == 3
        if row["rho"] is not None:
            assert -1 <= row["low"] <= row["high"] <= 1 and -1 <= row["rho"] <= 1
    # 64, 200 and 400 tokens: IoU falls with chunk size under any sensible questions.
    assert rows["iou"]["rho"] == 1.0
    ious = [(c["iou"]["a"], c["iou"]["b"]) for c in out["configs"]]
    assert ious[0][0] > ious[2][0] and ious[0][1] > ious[2][1]


def test_text_output_names_both_sets_and_prints_each_metric(tmp_path) -> None:
    saved = tmp_path / "set"
    save_question_set(load_sample_question_set("technical"), saved / "questions.csv")  # states hand-written
    proc = run_main("questions", "compare", "sample:technical", str(saved / "questions.csv"), *CONFIGS,
                    "--draws", "50")
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    assert "A: sample:technical (12 questions, hand-written)" in text
    assert f"B: {saved / 'questions.csv'} (12 questions, hand-written)" in text
    for label in ("Recall", "Precision", "Precision-Ω", "IoU"):
        line = next(x for x in text.splitlines() if x.strip().startswith(label + " "))
        rho = float(line.split("ρ =")[1].split()[0])
        assert not math.isnan(rho) and "95% interval" in line


def test_sets_on_different_corpora_and_bad_arguments_are_one_line_errors(tmp_path) -> None:
    assert_one_line_error(run_main("questions", "compare", "sample:technical", "sample:narrative", *CONFIGS), 1,
                          "different corpora (only sample:technical has technical_kestrel; only sample:narrative has "
                          "narrative_clockmaker)")
    assert_one_line_error(run_main("questions", "compare", "generate:model-free", "sample:technical"), 2,
                          "set A is the trusted set")
    assert_one_line_error(run_main("questions", "compare", "sample:technical", "generate:oracle"), 2,
                          "unknown question method 'oracle'")
    assert_one_line_error(run_main("questions", "compare", "sample:technical", "sample:technical",
                                   "--config", "recursive"), 2, "at least 3 configurations")
    assert_one_line_error(run_main("questions", "compare", "sample:technical", str(tmp_path / "nope.csv"),
                                   *CONFIGS), 1, "no such file")
