"""The Tune page's backend: the form's options and request, and the view of a run's output folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.errors import InputError, ParameterError
from backend.lab.tune_form import constraint_lines, document_source, form_options, tune_request
from backend.lab.tune_view import (
    check_tune_folder,
    finished_trials,
    left_out_sentence,
    left_out_sentences,
    result_view,
    tune_view,
)
from backend.loaders import load_document
from backend.retrieval.questions import load_question_set, load_sample_question_set
from backend.samples import load_sample
from backend.tune.types import OBJECTIVES, LeftOut
from tests.support.tune_rows import sample_result, sample_trials, write_out

DOC = load_sample("technical")


# --- the form ----------------------------------------------------------------------------------------------------


def test_the_defaults_leave_out_the_language_model_families_when_the_session_cannot_run_it() -> None:
    without = form_options(None, available={"embedder"})
    assert "recursive" in without.defaults and "semantic" in without.defaults
    assert "ppl" not in without.defaults and "ppl" in without.families
    assert "ppl: needs the language model, which this session has not loaded" in without.left_out_lines()
    with_lm = form_options(None, available={"lm", "embedder"})
    assert "ppl" in with_lm.defaults and with_lm.left_out == ()
    assert with_lm.objectives == OBJECTIVES and with_lm.secondary == ("mean_tokens", "chunks", "index_cost")
    assert without.family_help("ppl") == "ppl: needs the language model"
    assert without.family_help("recursive") == "recursive: no model"


def test_constraints_are_read_one_per_line() -> None:
    assert constraint_lines("mean_tokens<=400\n\n  chunks>=5 \n") == ("mean_tokens<=400", "chunks>=5")


def test_a_request_from_the_form_names_the_document_questions_and_a_resumable_folder() -> None:
    request = tune_request(DOC, question_source="generate", families=["recursive", "fixed_token"],
                           constraints="mean_tokens<=400\n", budget="1m", trials=4)
    assert request.questions == "generate:model-free" and request.families == ("recursive", "fixed_token")
    assert request.constraints == ("mean_tokens<=400",) and request.trials == 4 and request.budget == "1m"
    source = Path(request.sources[0])
    assert source.name == "technical_kestrel.md.txt" and load_document(source).id == DOC.id
    again = tune_request(DOC, question_source="generate", families=["recursive", "fixed_token"],
                         constraints="mean_tokens<=400", budget="1m", trials=4)
    assert again.out == request.out  # the same settings: the same folder, so a second Start resumes
    other = tune_request(DOC, question_source="generate", families=["recursive"], budget="1m", trials=4)
    assert other.out != request.out and Path(other.out).parent == Path(request.out).parent
    assert tune_request(DOC, out="/tmp/somewhere").out == "/tmp/somewhere"
    forty = tune_request(DOC, question_source="generate", families=["recursive", "fixed_token"],
                         constraints="mean_tokens<=400", budget="1m", trials=4, questions_per_document=40)
    assert forty.questions_per_document == 40 and forty.out != request.out  # another count: another folder
    assert document_source(DOC, "technical") == "sample:technical"


def test_the_session_and_bundled_question_sets_become_what_the_cli_takes() -> None:
    questions = load_sample_question_set("technical")
    request = tune_request(DOC, question_source="session", session_questions=questions, families=["recursive"])
    assert load_question_set(request.questions).questions == questions.questions
    assert tune_request(DOC, question_source="sample", sample_set="technical").questions == "sample:technical"


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"constraints": "tokens<3"}, "constraint"),
    ({"families": ["nope"]}, "unknown family 'nope'"),
    ({"families": ["manual"]}, "manual cannot be tuned"),
    ({"objective": "speed"}, "objective"),
    ({"budget": "soon"}, "budget"),
    ({"question_source": "session"}, "the session has no question set"),
    ({"question_source": "sample"}, "pick a bundled question set"),
    ({"questions_per_document": 0}, "questions per document"),
])
def test_bad_values_are_one_line_errors(kwargs, needle: str) -> None:
    with pytest.raises(ParameterError, match=needle) as e:
        tune_request(DOC, **kwargs)
    assert "\n" not in str(e.value)


def test_no_document_is_an_error() -> None:
    with pytest.raises(ParameterError, match="load a document first"):
        tune_request(None)


# --- the view ----------------------------------------------------------------------------------------------------


def test_a_running_folder_shows_its_trials_budget_and_front(tmp_path: Path) -> None:
    out = write_out(tmp_path / "run", sample_trials()[:4], plan={
        "documents": ["guide.pdf"], "question_set": "generate:model-free", "question_method": "model-free",
        "objective": "recall", "baseline": "recursive chunk_size=400 chunk_overlap=0",
        "budget_seconds": 120, "left_out": [{"family": "ppl", "reason": "needs the language model"}, "junk"],
    }, partial_line=True)
    view = tune_view(out, elapsed=30.0)
    assert not view.finished and [t.number for t in view.trials] == [0, 1, 2, 3]
    assert view.objective == "recall" and view.counts == {"complete": 4, "pruned": 0, "failed": 0}
    assert view.caption() == ("On guide.pdf, question set generate:model-free (model-free questions); objective "
                              "recall on the tuning questions · 4 trials so far (4 complete, 0 pruned, 0 failed).")
    assert view.budget_line() == "Budget: 30 s used of 120 s, 90 s left."
    assert view.left_out_lines() == ["ppl: needs the language model"]
    front = view.pareto("mean_tokens")
    assert [d.name for d in front.data][-2:] == ["Pareto front (3)", "baseline"]
    assert list(front.data[-1].x) == [350]  # the plan's baseline (trial 1 here), not trial 0
    assert view.theta() is None and view.pick is None and view.comparisons() == [] and view.verdict == ""
    assert list(view.trial_table()["number"]) == [0, 1, 2, 3]
    assert finished_trials(out) == 4


def test_a_finished_folder_shows_the_answer(tmp_path: Path) -> None:
    result = sample_result()
    out = write_out(tmp_path / "run", sample_trials()[:2], result)
    view = tune_view(out)
    assert view.finished and len(view.trials) == 6  # the result's trials, not the partial file's
    assert view.pick == result.pick and view.verdict == result.verdict
    assert view.pick_line().startswith("Pick: sentence(") and "40.0% [31.0, 49.0]" in view.pick_line()
    assert [r["against"] for r in view.comparisons()] == ["runner-up", "baseline"]
    assert view.tied_line().startswith("Not told apart from the pick")
    assert view.warnings == result.warnings and view.budget_line() == "Budget: 42 s used of 600 s, 558 s left."
    assert view.caption().startswith("On the document <b>guide</b>.pdf")
    assert view.theta() is not None
    assert "pick" in [d.name for d in view.pareto("chunks").data]
    assert result_view(result).pick_line() == view.pick_line()


def test_an_empty_or_bad_folder(tmp_path: Path) -> None:
    empty = tune_view(tmp_path / "not-yet")
    assert empty.trials == () and empty.result is None and empty.budget_line() == "Budget: 0 s used."
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "result.json").write_text(json.dumps({"trials": []}), encoding="utf-8")
    with pytest.raises(InputError, match="not a tuning result"):
        tune_view(tmp_path / "bad")
    assert check_tune_folder(str(tmp_path / "bad")) == tmp_path / "bad"
    with pytest.raises(InputError, match="not a tuning run's folder"):
        check_tune_folder(str(tmp_path))
    with pytest.raises(InputError, match="no such folder"):
        check_tune_folder(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="give the output folder"):
        check_tune_folder("  ")


# --- why families were left out, for the page's user ---------------------------------------------------------------


def test_a_family_over_the_budget_says_which_budget_would_include_it() -> None:
    from backend.tune.budget import model_left_out_reason

    item = LeftOut("ppl", model_left_out_reason(180, 410, 60))  # the CLI's: "one trial needs about 3 min …"
    text = left_out_sentence(item, budget_seconds=120)
    assert text.startswith("ppl was not searched: its first trial (one scoring pass over the documents at 410 "
                           "tokens/s, the rate measured on this machine) needs about 3 min, but only 60 s")
    assert text.endswith("A budget of at least 4m would include it.")  # 2 min + the 2 min the trial lacked
    assert left_out_sentence(item).endswith("A longer budget would include it.")
    hours = LeftOut("ppl", model_left_out_reason(2 * 3600, 410, 600))
    assert "at least 2h50m would include it" in left_out_sentence(hours, budget_seconds=3600)


def test_families_without_a_loaded_model_point_to_the_models_page_together() -> None:
    options = form_options(None, available={"embedder"})
    lines = left_out_sentences(options.left_out, ahead=True)
    assert len(lines) == 1 and "Load one on the Models page" in lines[0]
    assert lines[0].startswith("ppl, ") and " are not searched: each needs the language model" in lines[0]
    one = left_out_sentence(LeftOut("ppl", "needs the language model, which this session has not loaded"))
    assert one.startswith("ppl was not searched: it needs the language model, and this session has none loaded.")


def test_unmeasured_costs_and_unknown_reasons() -> None:
    from backend.tune.budget import plan_model_families
    from backend.tune.space import family_needs

    plan = plan_model_families(("ppl", "margin_sampling"), family_needs, 1000, None, 60.0)
    ppl, margin = left_out_sentences(plan.left_out)
    assert ppl.startswith("ppl was not searched by default: how fast the language model scores text")
    assert "Meta-Chunking page" in ppl and "pick it in Families" in ppl
    assert margin.startswith("margin_sampling was not searched by default: it calls the language model for every")
    assert left_out_sentence(LeftOut("x", "some new reason")) == "x was not searched: some new reason"


def test_a_run_view_says_its_left_out_families_with_its_budget(tmp_path: Path) -> None:
    view = tune_view(write_out(tmp_path / "run", sample_trials()[:2], sample_result()))
    assert view.left_out_sentences() == ["semantic was not searched: needs an embedder: none is loaded"]


def test_a_running_folder_says_how_many_questions_it_tunes_on_and_holds_out(tmp_path: Path) -> None:
    out = write_out(tmp_path / "run", sample_trials()[:1], plan={
        "documents": ["guide.pdf"], "question_set": "generate:model-free", "question_method": "model-free",
        "objective": "iou", "split": {"tuning": [0, 1, 3, 4], "held_out": [2, 5]},
    })
    assert tune_view(out).caption().startswith("On guide.pdf, question set generate:model-free (model-free "
                                               "questions: 4 tuning questions, 2 held out); objective IoU")
