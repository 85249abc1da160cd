"""The output folder's files: written whole, read back, a partial last line of trials.jsonl skipped."""

from __future__ import annotations

import json

import pytest

from backend.chunkers import make_chunker
from backend.errors import InputError
from backend.metrics.intervals import Interval
from backend.tune.result import (
    RESULT_FILE,
    TRIALS_FILE,
    append_trial,
    read_plan,
    read_result,
    read_trials,
    write_plan,
    write_result,
)
from backend.tune.types import TrialRow, TuneResult


def _row(n: int, size: int = 200) -> TrialRow:
    config = make_chunker("recursive", {"chunk_size": size, "chunk_overlap": 0}, "cl100k").config
    return TrialRow(n, config, "complete", 0.1 * n, Interval(0.1 * n, 0.0, 0.2, 8), 8, 10, 150.5, 1505, 1.25)


def test_nothing_written_yet_reads_as_nothing(tmp_path):
    assert read_trials(tmp_path) == () and read_result(tmp_path) is None and read_plan(tmp_path) is None


def test_trials_are_appended_and_a_partial_last_line_is_skipped(tmp_path):
    append_trial(tmp_path, _row(0))
    append_trial(tmp_path, _row(1, 256))
    with (tmp_path / TRIALS_FILE).open("a", encoding="utf-8") as f:
        f.write(json.dumps(_row(2).to_json())[:40])  # a kill while writing
    assert read_trials(tmp_path) == (_row(0), _row(1, 256))
    append_trial(tmp_path, _row(2, 512))  # the next append starts on a line of its own
    assert [r.number for r in read_trials(tmp_path)] == [0, 1, 2]
    assert read_trials(tmp_path)[2] == _row(2, 512)


def test_plan_and_result_round_trip(tmp_path):
    write_plan(tmp_path, {"study": "tune-1", "families": ["recursive"]})
    assert read_plan(tmp_path) == {"study": "tune-1", "families": ["recursive"]}
    base = _row(0).config
    result = TuneResult(("a.txt",), "sample:narrative", "hand-written", (1, 2), (0,), "iou", None, (), 0,
                        (_row(0),), base, Interval(0.1, 0.0, 0.2, 1), base, None, None, (), (), (), ("small",),
                        "verdict", 600.0, 12.5)
    write_result(tmp_path, result)
    assert read_result(tmp_path).to_json() == result.to_json()
    assert not list(tmp_path.glob("*.tmp"))


def test_a_file_that_is_not_a_result_is_one_line(tmp_path):
    (tmp_path / RESULT_FILE).write_text('{"documents": []}', encoding="utf-8")
    with pytest.raises(InputError, match="not a tuning result"):
        read_result(tmp_path)
    (tmp_path / RESULT_FILE).write_text("{", encoding="utf-8")
    with pytest.raises(InputError, match="not a tuning run's JSON"):
        read_result(tmp_path)
