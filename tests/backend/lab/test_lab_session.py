"""A session's settings both ways: written by their names in lab.settings, read back checked, old names understood;
the pages' state (the benchmark in its compact JSON, the Retrieval page) saved and read back checked."""

from __future__ import annotations

import json

import pytest

from backend.chunkers import make_chunker
from backend.errors import InputError
from backend.lab.session import (
    OpenedState,
    RetrievalState,
    SavedBenchmark,
    opened_settings,
    opened_state,
    settings_to_save,
    state_to_save,
)
from backend.report.session import DocRef, Session, parse_session, session_to_json
from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult, RetrievedChunk
from backend.retrieval.questions import load_sample_question_set
from backend.text.document import Document

DOC = Document.from_text("One sentence. Another one.", source="s.txt")


def test_settings_are_saved_by_name_and_refused_values_are_left_out() -> None:
    values = {
        "ppl": {"threshold": 1.32, "rule": "paper", "target_length": 0},
        "quality": {"K": 0.9, "metrics": ["bc", "ds"], "cs_rule": "loose"},  # a rule the setting refuses
        "nowhere": {"x": 1},
    }
    assert settings_to_save(values) == {
        "ppl": {"threshold": 1.32, "rule": "paper", "target_length": 0},
        "quality": {"K": 0.9, "metrics": ["bc", "ds"]},
    }


def test_a_saved_session_opens_with_the_same_settings() -> None:
    values = {"ppl": {"threshold": 1.32, "overlap": True}, "compare": {"hist_unit": "characters"}}
    text = session_to_json(Session.make(DocRef.of(DOC), [], {}, settings_to_save(values)))
    opened = opened_settings(parse_session(text).settings)
    assert opened.values == values and opened.questions is None and opened.notes == ()


def test_an_older_files_theta_is_read_as_threshold_and_bad_values_are_skipped() -> None:
    raw = {"ppl": {"theta": 0.25, "tokenizer": "no-such-tokenizer"}, "quality": {"K": "0.8", "delta": 2}}
    assert opened_settings(raw).values == {"ppl": {"threshold": 0.25}, "quality": {"delta": 2}}


def test_the_question_set_is_embedded_and_read_back() -> None:
    questions = load_sample_question_set("narrative")
    saved = settings_to_save({}, questions)
    assert set(saved) == {"questions"} and saved["questions"]["count"] == len(questions)
    assert opened_settings(saved).questions == questions
    too_large = {"questions": {"sha": saved["questions"]["sha"], "count": 12}}  # named by its hash only
    opened = opened_settings(too_large)
    assert opened.questions is None
    assert opened.notes == (
        f"the session's question set (12 questions, hash {saved['questions']['sha']}) was too large to embed: "
        "import it on the Benchmark page",
    )
    with pytest.raises(InputError, match="does not match its hash"):
        opened_settings({"questions": {**saved["questions"], "sha": "0" * 16}})


# --- the pages' state ----------------------------------------------------------------------------------


def _benchmark(questions, n: int = 2) -> Benchmark:
    """A two-configuration benchmark over the first ``n`` questions of ``questions`` (numbers made up, exact)."""
    configs = [make_chunker("recursive", {"chunk_size": 200}).config, make_chunker("sentence", {}).config]
    asked = questions.questions[:n]
    cid = asked[0].corpus_id
    results = []
    for k, config in enumerate(configs):
        rows = tuple(
            QuestionResult(
                j, q.corpus_id, q.question, recall=0.5 + k / 4, precision=0.125, precision_omega=0.25, iou=0.1 * (j + 1),
                retrieved=(
                    RetrievedChunk(cid, 10 * j, 10 * j + 40, j, 0.3125, tokens=9),
                    RetrievedChunk(cid, 100, 180, 7, 0.5, tokens=17, level=2, ranges=((100, 140), (150, 180))),
                ),
            )
            for j, q in enumerate(asked)
        )
        results.append(ConfigResult(
            config, MetricSummary.of(rows), {cid: MetricSummary.of(rows)}, rows, chunks=20 + k, chunk_tokens_mean=51.25,
            seconds=1.0 / 3, reused=bool(k), retrieved_tokens_mean=26.0, index_seconds=0.7, texts_embedded=3 - k,
            query_seconds=0.001,
        ))
    return Benchmark(tuple(results), "all-MiniLM-L6-v2", "f" * 16, 2, len(asked), (cid,), 2.5)


def test_a_benchmark_round_trips_through_its_compact_json() -> None:
    questions = load_sample_question_set("narrative")
    benchmark = _benchmark(questions)
    data = json.loads(json.dumps(benchmark.to_json(per_question=True)))
    assert data["question_list"] == [
        ["narrative_clockmaker", "What time had the clock above the shop shown for years?"],
        ["narrative_clockmaker", questions.questions[1].question],
    ]
    assert data["results"][1]["per_question"] == {
        "recall": [0.75, 0.75], "precision": [0.125, 0.125], "precision_omega": [0.25, 0.25], "iou": [0.1, 0.2],
        "retrieved": [
            [["narrative_clockmaker", 0, 40, 0, 0.3125, 9, 0, None],
             ["narrative_clockmaker", 100, 180, 7, 0.5, 17, 2, [[100, 140], [150, 180]]]],
            [["narrative_clockmaker", 10, 50, 1, 0.3125, 9, 0, None],
             ["narrative_clockmaker", 100, 180, 7, 0.5, 17, 2, [[100, 140], [150, 180]]]],
        ],
    }
    assert Benchmark.from_json(data) == benchmark
    assert "per_question" not in benchmark.to_json()["results"][0]  # the download's JSON is unchanged


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (lambda d: d["results"][0]["per_question"].update(iou=[0.1]),
         "f.json: the saved benchmark is damaged (configuration 1: iou is not a list of 2)"),
        (lambda d: d["results"][1]["config"].update(name="nope"), "f.json: the saved benchmark is damaged (unknown "),
        (lambda d: d.pop("retrieve"), "f.json: the saved benchmark is damaged ('retrieve' is missing)"),
        (lambda d: d["results"][0]["per_question"]["retrieved"][0][0].__setitem__(1, "0"),
         "f.json: the saved benchmark is damaged (configuration 1: question 1 is not an integer)"),
    ],
)
def test_a_damaged_benchmark_is_one_input_error(edit, line: str) -> None:
    data = json.loads(json.dumps(_benchmark(load_sample_question_set("narrative")).to_json(per_question=True)))
    edit(data)
    with pytest.raises(InputError) as info:
        Benchmark.from_json(data, "f.json")
    assert str(info.value).startswith(line) and "\n" not in str(info.value)


def test_the_pages_state_is_saved_and_opened_checked() -> None:
    questions = load_sample_question_set("narrative")
    saved = SavedBenchmark(_benchmark(questions, len(questions)), ("A", "C"), "sample:narrative", questions)
    retrieval = RetrievalState("When?", ((5, 20), (30, 41)), (2,), ("C",), ("A", "C"), True)
    state, notes = state_to_save(saved, retrieval)
    assert notes == () and state["benchmark"]["questions"] == {"sample": "narrative"}  # a bundled set: by name
    assert state["retrieval"] == {
        "query": "When?", "marks": [[5, 20], [30, 41]], "picks": [2], "picked": ["C"], "offered": ["A", "C"],
        "searched": True,
    }
    text = session_to_json(Session.make(DocRef.of(DOC), [], {}, {}, state))
    opened = opened_state(parse_session(text).state, text_length=41)
    assert opened == OpenedState(saved, retrieval)
    assert opened_state({}, 41) == OpenedState(None, None)
    other = SavedBenchmark(_benchmark(questions), ("A", "C"), "sample:narrative", questions)  # 2 of its 12 questions
    with pytest.raises(InputError, match="^session: the saved benchmark does not match its question set$"):
        opened_state(state_to_save(other, None)[0], 41)
    with pytest.raises(InputError, match="^s.json: the saved Retrieval page: the marks are not ranges of the document$"):
        opened_state(json.loads(json.dumps(state)), text_length=40, source="s.json")


def test_a_benchmark_of_an_imported_set_embeds_it_and_one_too_large_is_left_out_with_a_note() -> None:
    questions = load_sample_question_set("narrative")
    saved = SavedBenchmark(_benchmark(questions, len(questions)), ("A", "B"), "Import", questions)
    state, notes = state_to_save(saved, None)
    assert state["benchmark"]["questions"]["count"] == 12 and "csv" in state["benchmark"]["questions"]
    assert opened_state(json.loads(json.dumps(state)), 41).benchmark == saved
    state, notes = state_to_save(saved, None, limit=1000)
    assert state == {} and len(notes) == 1
    assert notes[0].startswith("the benchmark (0.0") and notes[0].endswith("MB) is over the 0 MB a session file holds")
