"""The report's Tuning section: verdict, pick with its interval, comparisons, tie, top trials, figures; escaped."""

from __future__ import annotations

from dataclasses import replace

from backend.chunking import ChunkerConfig
from backend.report.html import SECTIONS, report_html
from backend.report.summary import ConfigSummary, Summary
from backend.report.tuning import comparison_rows, pick_line, rests_on, top_trials, tuning_lines, tuning_section
from backend.text.document import Document
from tests.backend.report.test_report_html import parse
from tests.support.tune_rows import sample_result

PAYLOAD = "<script>alert(1)</script>"


def test_the_lines_say_the_pick_its_interval_each_comparison_and_the_tie() -> None:
    result = sample_result()
    assert pick_line(result) == ("Pick: sentence(chunk_overlap=0, chunk_size=300) · cl100k — held-out IoU "
                                 "40.0% [31.0, 49.0] (95%, 4 questions).")
    rows = comparison_rows(result)
    assert [(r["against"], r["difference"], r["verdict"]) for r in rows] == [
        ("runner-up", "+5.0 pts [-4.0, +14.0]", "not told apart (the interval contains 0)"),
        ("baseline", "+11.0 pts [+2.0, +20.0]", "better"),
    ]
    lines = tuning_lines(result)
    assert lines[0] == result.verdict
    assert any(line.startswith("Not told apart from the pick") and "ppl(" in line for line in lines)
    assert lines[-1] == "Warning: 4 held-out questions: a small set, wide intervals"
    assert rests_on(result).startswith("On the document <b>guide</b>.pdf, question set generate:model-free "
                                       "(model-free questions): 8 tuning questions, 4 held out (seed 0)")


def test_a_pick_that_does_not_beat_the_baseline_is_said_plainly() -> None:
    result = sample_result(beats=False)
    assert not result.beats_baseline
    lines = tuning_lines(result)
    assert lines[0] == "no configuration beats the baseline on the held-out questions"
    assert any(line.startswith("Against the baseline") and line.endswith("not told apart (the interval contains 0).")
               for line in lines)


def test_top_trials_are_the_best_complete_ones() -> None:
    assert [t.number for t in top_trials(sample_result().trials, 3)] == [3, 5, 0]


def test_the_section_escapes_names_and_draws_the_pareto_and_theta_figures() -> None:
    result = sample_result(documents=(f"{PAYLOAD}.pdf",))
    section = tuning_section(result)
    assert PAYLOAD not in section and "&lt;script&gt;alert(1)&lt;/script&gt;.pdf" in section
    page = parse(section)
    assert page.ids("section") == ["tuning"]
    assert [i for i in page.ids("div") if i.startswith("tuning-figure-")] == ["tuning-figure-1", "tuning-figure-2"]
    assert "Top trials on the tuning questions (5 of 5 complete trials, 6 trials in all)" in section


def test_a_run_with_no_complete_trial_says_so() -> None:
    result = replace(sample_result(), trials=(), pick=None, pick_score=None, vs_baseline=None, vs_runner_up=None,
                     tied=())
    section = tuning_section(result)
    assert "No pick: no trial completed." in section and "No trial completed." in section


def test_the_one_file_report_carries_the_section_after_the_others() -> None:
    doc = Document.from_text("One line. Another line.", source="d.txt")
    config = ChunkerConfig.make("recursive", {"chunk_size": 40})
    summary = Summary(doc.source, doc.id, (ConfigSummary("A", config, {}),), {})
    page = parse(report_html(summary, doc, {}, tuning=sample_result()))
    assert page.ids("section") == [sid for sid, _ in SECTIONS] + ["tuning"]
    without = parse(report_html(summary, doc, {}))
    assert without.ids("section") == [sid for sid, _ in SECTIONS]
