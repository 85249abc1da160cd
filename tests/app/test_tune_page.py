"""The Tune page with ``AppTest``: its widgets, a finished run's folder rendered, "Use this" and "Use in your
pipeline", one-line errors, the Summary's Tuning section, and a saved session that brings the tuning result back.

The finished run is an output folder written as a run writes it (:mod:`tests.support.tune_rows`); a real run
in the browser is ``tests/app/test_e2e_tune_browser.py``'s.
"""

from __future__ import annotations

import pytest

from backend.report.session import session_path
from tests.support.apptest import isolated_lab, open_page, run, wait_job
from tests.support.tune_rows import sample_result, sample_trials, write_out

WIDGETS = ("tune_qsource", "tune_per_document", "tune_families", "tune_objective", "tune_secondary", "tune_budget", "tune_trials",
           "tune_constraints", "tune_seed", "tune_out", "tune_start", "tune_open_path", "tune_open_run")


@pytest.fixture(scope="module", autouse=True)
def lab_env(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("tune-data")) as data:
        yield data


def _widget(at, key: str):
    for kind in ("segmented_control", "multiselect", "selectbox", "text_input", "number_input", "text_area",
                 "button"):
        try:
            return getattr(at, kind)(key=key)
        except KeyError:
            continue
    raise KeyError(key)


def test_the_form_is_there_with_the_model_free_families_by_default() -> None:
    at = open_page("pages/tune.py")
    assert [t.value for t in at.title] == ["Tune"]
    for key in WIDGETS:
        assert _widget(at, key) is not None, key
    families = at.multiselect(key="tune_families")
    assert "recursive" in families.value and "ppl" in families.options
    assert at.selectbox(key="tune_objective").value == "iou"
    assert at.number_input(key="tune_per_document").value == 15  # generated questions: how many per document
    assert not at.error


def test_a_bad_constraint_is_one_line_and_starts_nothing() -> None:
    at = open_page("pages/tune.py")
    at.text_area(key="tune_constraints").set_value("tokens<3")
    at.button(key="tune_start").click()
    run(at)
    assert len(at.error) == 1 and "constraint" in at.error[0].value and "\n" not in at.error[0].value
    assert "tune_job" not in at.session_state


def test_a_finished_folder_shows_the_answer_and_use_this_adds_the_pick_to_compare(tmp_path) -> None:
    result = sample_result()
    out = write_out(tmp_path / "run", sample_trials(), result)
    at = open_page("pages/tune.py")
    at.text_input(key="tune_open_path").set_value(str(out))
    at.button(key="tune_open_run").click()
    run(at)
    assert not at.error
    text = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "Pick: sentence(chunk_overlap=0, chunk_size=300) · cl100k — held-out IoU 40.0% [31.0, 49.0]" in text
    assert "Not told apart from the pick" in text
    assert "semantic was not searched: needs an embedder: none is loaded" in text  # the plan's left-out family
    assert [s.value.replace("\\", "") for s in at.success] == [result.verdict]
    frames = [d.value for d in at.dataframe]
    comparisons = next(f for f in frames if "against" in f.columns)
    assert list(comparisons["against"]) == ["runner-up", "baseline"]
    trials = next(f for f in frames if "number" in f.columns)
    assert list(trials["number"]) == [0, 1, 2, 3, 4, 5]
    assert at.session_state["tune_result"] == result
    # "Use in your pipeline" for the pick: its spec and code, the run's document (a hostile name) only in code.
    panel = at.get_by_key("tune_pipe")
    spec, pip, plain = (c.value for c in panel.code[:3])
    assert spec == "sentence chunk_overlap=0 chunk_size=300" and "chunk-lab[core]" in pip
    assert "chunklab.load('<b>guide</b>.pdf')" in plain
    assert [b.key for b in panel.get("download_button")] == ["tune_pipe_snippet"]
    before = [e.config.spec for e in at.session_state["configs"]]
    at.button(key="tune_use").click()
    run(at)
    after = [e.config.spec for e in at.session_state["configs"]]
    assert after == before + ["sentence chunk_overlap=0 chunk_size=300"]
    assert any(t.value == "Compare chunkers" for t in at.title)
    at.switch_page("pages/summary.py")  # the Summary shows the session's tuning answer
    run(at)
    assert "Tuning" in [h.value for h in at.subheader]
    summary = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert result.verdict in summary and "held-out IoU 40.0% [31.0, 49.0]" in summary


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path) -> None:
    at = open_page("pages/tune.py")
    at.text_input(key="tune_open_path").set_value(str(tmp_path))
    at.button(key="tune_open_run").click()
    run(at)
    assert len(at.error) == 1 and "not a tuning run's folder" in at.error[0].value


def test_a_saved_session_keeps_the_tuning_result_and_the_tune_page_shows_it_again(tmp_path) -> None:
    result = sample_result()
    at = open_page("pages/tune.py")
    at.session_state["tune_result"] = result
    at.text_input(key="ses_name").set_value("tuned")
    run(at)
    at.button(key="ses_save").click()
    run(at)
    text = session_path("tuned").read_text(encoding="utf-8")
    fresh = open_page("pages/tune.py")  # a new session, showing another run's folder
    assert "tune_result" not in fresh.session_state
    other = write_out(tmp_path / "other", sample_trials(), sample_result(beats=False))
    fresh.text_input(key="tune_open_path").set_value(str(other))
    fresh.button(key="tune_open_run").click()
    run(fresh)
    assert [w.value for w in fresh.warning][0] == "no configuration beats the baseline on the held\\-out questions"
    gen = fresh.session_state["ses_gen"] if "ses_gen" in fresh.session_state else 0
    fresh.file_uploader(key=f"ses_open_{gen}").set_value(("tuned.json", text.encode(), "application/json"))
    run(fresh)
    assert not fresh.error, [e.value for e in fresh.error]
    assert fresh.session_state["tune_result"] == result
    run(fresh)
    text = " ".join(m.value for m in fresh.markdown).replace("\\", "")
    assert "held-out IoU 40.0% [31.0, 49.0]" in text  # the page shows the session's result, not the folder's
    assert [v.value.replace("\\", "") for v in fresh.success] == [result.verdict]


def test_a_real_run_ends_with_its_answer_and_start_again_resumes_it(tmp_path) -> None:
    at = open_page("pages/tune.py")
    at.multiselect(key="tune_families").set_value(["recursive"])
    at.number_input(key="tune_trials").set_value(2)
    at.text_input(key="tune_out").set_value(str(tmp_path / "run"))
    run(at)
    at.button(key="tune_start").click()
    run(at)
    job = wait_job(at, "tune_job")
    assert job.state == "done", job.error
    assert not at.info  # a fresh folder: nothing resumed
    text = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "Pick: recursive(" in text and at.session_state["tune_result"].pick is not None
    trials = next(d.value for d in at.dataframe if "number" in d.value.columns)
    assert len(trials) == 2

    at.button(key="tune_start").click()  # the same settings: the same folder, its trials not run again
    run(at)
    wait_job(at, "tune_job")
    assert [i.value.split(" from ")[0] for i in at.info] == ["Resumed: 2 trials"]
