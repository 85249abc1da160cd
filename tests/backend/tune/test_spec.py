"""A tuning run's knobs: objective, second objective, constraints and budget, with one-line errors (issue 36)."""

from __future__ import annotations

import pytest

from backend.errors import ParameterError
from backend.tune import types
from backend.tune.spec import (
    OBJECTIVES,
    SECONDARY,
    Constraint,
    check_objective,
    check_secondary,
    format_seconds,
    parse_budget,
    parse_constraint,
)


def _error(fn, *args) -> str:
    with pytest.raises(ParameterError) as err:
        fn(*args)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_objectives():
    assert OBJECTIVES is types.OBJECTIVES
    assert [check_objective(o) for o in OBJECTIVES] == ["iou", "recall", "precision", "precision_omega", "bc"]
    assert check_objective(" recall ") == "recall"
    assert _error(check_objective, "foo") == (
        "unknown objective 'foo'; choose one of iou, recall, precision, precision_omega, bc"
    )
    assert _error(check_objective, "mean_tokens").startswith("unknown objective 'mean_tokens'")


def test_secondary():
    assert SECONDARY == ("mean_tokens", "chunks", "index_cost")
    assert [check_secondary(s) for s in (None, "", "  ", "chunks", "index_cost")] == [
        None, None, None, "chunks", "index_cost"
    ]
    assert _error(check_secondary, "iou") == (
        "unknown secondary objective 'iou'; choose one of mean_tokens, chunks, index_cost"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mean_tokens<=400", Constraint("mean_tokens", "<=", 400.0, "mean_tokens<=400")),
        ("chunks >= 10", Constraint("chunks", ">=", 10.0, "chunks>=10")),
        ("max_tokens<512", Constraint("max_tokens", "<", 512.0, "max_tokens<512")),
        (" index_cost<=2e5 ", Constraint("index_cost", "<=", 200000.0, "index_cost<=200000")),
        ("chunks==12", Constraint("chunks", "==", 12.0, "chunks==12")),
        ("mean_tokens>99.5", Constraint("mean_tokens", ">", 99.5, "mean_tokens>99.5")),
    ],
)
def test_parse_constraint_and_round_trip(text, expected):
    parsed = parse_constraint(text)
    assert parsed == expected
    assert parse_constraint(parsed.text) == parsed


@pytest.mark.parametrize(
    ("op", "holds_at"),
    [("<=", (False, True, True)), ("<", (False, False, True)), (">=", (True, True, False)),
     (">", (True, False, False)), ("==", (False, True, False))],
)
def test_holds_for_each_operator(op, holds_at):
    constraint = parse_constraint(f"mean_tokens{op}400")
    assert tuple(constraint.holds({"mean_tokens": v, "chunks": 3}) for v in (401, 400, 399.5)) == holds_at
    assert parse_constraint("chunks==3").holds({"chunks": 3.0000000000001})
    with pytest.raises(KeyError):
        constraint.holds({"chunks": 3})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mean_tokens", "constraint 'mean_tokens' is not METRIC OP NUMBER: use e.g. mean_tokens<=400 "
                        "(operators <, >, <=, >=, ==)"),
        ("mean_tokens=400", "constraint 'mean_tokens=400' is not METRIC OP NUMBER"),
        ("<=400", "constraint '<=400' is not METRIC OP NUMBER"),
        ("tokens<=400", "unknown metric 'tokens' in constraint 'tokens<=400'; choose one of mean_tokens, "
                        "max_tokens, chunks, index_cost"),
        ("chunks>=ten", "constraint 'chunks>=ten': 'ten' is not a number"),
        ("chunks>=inf", "constraint 'chunks>=inf': 'inf' is not a finite number"),
        ("mean_tokens<=400x", "constraint 'mean_tokens<=400x': '400x' is not a number"),
    ],
)
def test_constraint_errors(text, message):
    assert _error(parse_constraint, text).startswith(message)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10m", 600.0), ("90s", 90.0), ("1h", 3600.0), ("1h30m", 5400.0), ("2.5m", 150.0), ("45", 45.0),
        ("0.5", 0.5), ("1h 5m 10s", 3910.0), ("10 min", 600.0), ("2H", 7200.0), ("24h", 86400.0), (" 3m ", 180.0),
    ],
)
def test_parse_budget(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ten", "budget 'ten' is not a duration: use 90s, 10m or 1h"),
        ("", "budget '' is not a duration: use 90s, 10m or 1h"),
        ("10ms", "budget '10ms' is not a duration: use 90s, 10m or 1h"),
        ("m", "budget 'm' is not a duration: use 90s, 10m or 1h"),
        ("nan", "budget 'nan' is not a duration: use 90s, 10m or 1h"),
        ("0", "budget '0' must be more than 0 seconds"),
        ("0m", "budget '0m' must be more than 0 seconds"),
        ("-5", "budget '-5' must be more than 0 seconds"),
        ("25h", "budget '25h' is over 24 h: use at most 24h"),
        ("24h1s", "budget '24h1s' is over 24 h: use at most 24h"),
    ],
)
def test_budget_errors(text, message):
    assert _error(parse_budget, text) == message


def test_format_seconds():
    assert [format_seconds(s) for s in (0.027, 1, 45, 59.4, 59.6, 250, 600, 3900, parse_budget("1h30m"))] == [
        "27 ms", "1 s", "45 s", "59 s", "1 min 0 s", "4 min 10 s", "10 min 0 s", "1 h 5 min", "1 h 30 min"
    ]
