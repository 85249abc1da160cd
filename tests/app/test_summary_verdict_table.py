"""The verdict agrees with the table: every number it cites is a cell of the table (beside the paired differences a
retrieval line rests on), every metric it calls missing is "not computed yet" there, and every "not computed yet" cell
is named (the rows and the table are one source)."""

from __future__ import annotations

import re

import pytest

from backend.chunking import ChunkerConfig
from backend.report.summary import METRIC_INFO, METRICS, NO_SET_ON_DOCUMENT, ConfigSummary, Summary, verdict
from components.summary import NOT_COMPUTED, QUALITY_COLUMNS, RETRIEVAL_COLUMNS, summary_frame

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?%?")
LABELS = {
    (METRIC_INFO[m].label if any(c.isascii() and c.isupper() for c in METRIC_INFO[m].label[1:])
     else METRIC_INFO[m].label[0].lower() + METRIC_INFO[m].label[1:]): m
    for m in METRICS
}
FOLLOW_CHUNKS = ("tokens_mean", "tokens_std", "seconds")
CONFIG = ChunkerConfig.make("recursive", {"chunk_size": 200, "chunk_overlap": 0})
STATS = {"chunks": 12.0, "tokens_mean": 48.5, "tokens_std": 7.25, "seconds": 0.031}


def _row(tag: str, chunked: bool = True, spread: float = 0.0, **values: float) -> ConfigSummary:
    """A row; with ``spread``, its retrieval values known on each of ten questions (± ``spread``, a per-row pattern)."""
    known = dict(STATS, chunks=STATS["chunks"] + ord(tag) - 65) if chunked else {}
    noise = [spread * ((3 * i + ord(tag)) % 5 - 2) for i in range(10)]
    scores = {m: tuple(values[m] + d for d in noise) for m in RETRIEVAL_COLUMNS if spread and m in values}
    return ConfigSummary(tag, CONFIG, {m: {**known, **values}.get(m) for m in METRICS}, scores=scores)


ALL = {"bc": 0.942, "cs": 1.25, "ds": 0.42, "recall": 0.81, "precision": 0.12, "iou": 0.068, "precision_omega": 0.3}
CASES = {
    "none computed": (_row("A"), _row("B"), _row("C", chunked=False)),
    "only DS": (_row("A", ds=0.42), _row("B", ds=0.644)),
    "BC but not CS (the demo)": (_row("A", bc=0.942, ds=0.42), _row("B", bc=0.951, cs=1.5, ds=0.644)),
    "all": (_row("A", **ALL), _row("B", **{m: v * 0.9 for m, v in ALL.items()}),
            _row("C", **{m: v * 1.1 for m, v in ALL.items()})),
    "ties": (_row("A", bc=0.9701, iou=0.05, recall=0.5), _row("B", bc=0.9699, iou=0.05, recall=0.5),
             _row("C", bc=0.5, iou=0.04, recall=0.4)),
    "all, question by question": (_row("A", spread=0.01, **ALL), _row("B", spread=0.01, **{m: v * 0.9 for m, v in ALL.items()}),
                                  _row("C", spread=0.01, **{m: v * 1.1 for m, v in ALL.items()})),
    "overlapping, question by question": (_row("A", spread=0.2, **ALL),
                                          _row("B", spread=0.2, **{m: v * 0.9 for m, v in ALL.items()})),
    "one config": (_row("A", bc=0.9, ds=0.2),),
    "a single chunk": (_row("A", chunks=1.0), _row("B", bc=0.9, cs=1.1, ds=0.3)),
}


def _missing_named(line: str) -> set[tuple[str, str]]:
    """``(tag, metric)`` of every cell the "Not computed yet" line names."""
    named = set()
    for part in line.removeprefix("Not computed yet: ").removesuffix(".").split("; "):
        part = part.removesuffix(f" ({NO_SET_ON_DOCUMENT})")
        labels, tags = part.split(" for ")
        metrics = [LABELS[label] for label in re.split(r", | and ", labels)]
        named |= {(t, m) for t in re.split(r", | and ", tags) for m in metrics}
    return named


@pytest.mark.parametrize("case", list(CASES))
def test_the_verdict_cites_only_the_table_and_names_exactly_what_it_lacks(case: str):
    summary = Summary("doc.pdf", "id", CASES[case])
    lines = verdict(summary)
    frame = summary_frame(summary)
    shown = {n for cell in frame[list(METRICS)].to_numpy().ravel() for n in NUMBER.findall(cell)}
    for line in lines:
        # Beside the cells, a retrieval line states the paired differences it rests on (not cells: points between two)
        # and over how many questions (the retrieval table's title).
        line = re.sub(r"differences? (from [A-Z]+: )?[^)]*\)|over these \d+ questions", "", line)
        for number in NUMBER.findall(line):
            assert number in shown, f"{case}: {number} in {line!r} is not in the table"
    last = [line for line in lines if line.startswith("Not computed yet: ")]
    named = _missing_named(last[0]) if last else set()
    for tag, metric in named:
        assert frame.loc[tag, metric] == NOT_COMPUTED, (case, tag, metric)
    for tag in frame.index:  # and every gap of the table is named (a single chunk has no BC, CS or DS to compute)
        for metric in METRICS:
            single = summary.row(tag).values["chunks"] == 1.0 and metric in ("bc", "cs", "ds")
            if frame.loc[tag, metric] == NOT_COMPUTED and metric not in FOLLOW_CHUNKS and not single:
                assert (tag, metric) in named, (case, tag, metric)


def test_the_demo_bug_bc_is_cited_and_never_called_missing():
    summary = Summary("doc.pdf", "id", CASES["BC but not CS (the demo)"])
    lines = verdict(summary)
    assert lines[0] == "B's boundaries are clearer (BC 0.951 vs 0.942 for A; higher is clearer)."
    assert lines[-1] == (
        f"Not computed yet: CS for A; recall, precision, IoU and precision-Ω for A and B ({NO_SET_ON_DOCUMENT})."
    )


def test_the_two_tables_hold_every_column_once():
    assert QUALITY_COLUMNS + RETRIEVAL_COLUMNS == METRICS
    frame = summary_frame(Summary("doc.pdf", "id", CASES["all"]), RETRIEVAL_COLUMNS)
    assert list(frame.columns) == ["configuration", *RETRIEVAL_COLUMNS]
    assert frame.loc["A", "iou"] == "6.8%"
