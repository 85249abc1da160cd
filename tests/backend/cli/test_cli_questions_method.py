"""``python -m backend questions generate --method …`` in process (run_main): model-free end to end, and bad arguments."""

from __future__ import annotations

import json

from backend.samples import load_sample
from tests.backend.cli.test_cli import assert_one_line_error
from tests.support.cli import run_main as run_cli


def test_model_free_generation_writes_a_set_that_checks(tmp_path):
    out = tmp_path / "set"
    proc = run_cli("questions", "generate", "sample:technical-pdf", "--out", str(out), "--method", "model-free",
                   "--n", "6", data_dir=tmp_path / "data")
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads(proc.stdout)
    assert summary["method"] == "model-free" and summary["kept"] == 6 and summary["weak"] is True
    assert summary["model"] == "none (keyword template)" and "no embedder" in summary["filter_note"]
    err = proc.stderr.decode().strip().splitlines()
    assert err[-1].startswith("6 kept of 6 attempted · model-free questions from a passage and its neighbourhood")
    assert err[-1].endswith(" s")
    cid = summary["corpus_id"]
    assert (out / "corpora" / f"{cid}.md").read_text(encoding="utf-8") == load_sample("technical-pdf").text
    check = run_cli("questions", "check", "--questions", str(out / "questions.csv"), "--corpora", str(out / "corpora"),
                    data_dir=tmp_path / "data")
    assert check.returncode == 0, check.stderr.decode()
    assert (out / "questions.method").read_text(encoding="utf-8") == "model-free\n"  # the set states its method
    assert json.loads(check.stdout) == {"questions": 6, "corpora": {cid: 6}, "method": "model-free"}


def test_bad_method_arguments_exit_2_and_chat_without_an_api_exits_1(tmp_path):
    base = ("questions", "generate", "sample:narrative", "--out", str(tmp_path / "set"))
    proc = run_cli(*base, "--method", "oracle", data_dir=tmp_path / "data")
    assert proc.returncode == 2 and b"invalid choice: 'oracle'" in proc.stderr
    assert_one_line_error(run_cli(*base, "--local", "--method", "model-free", data_dir=tmp_path / "data"), 2,
                          "--local is --method bundled")
    assert_one_line_error(run_cli(*base, "--method", "chat", data_dir=tmp_path / "data"), 1, "no LLM configured")


def test_questions_on_a_file_with_trailing_spaces_evaluate_on_the_original_file(tmp_path):
    """Issue 35: the offsets index the loaded text (trailing spaces stripped); ``--corpora`` may name the original."""
    original = tmp_path / "orig" / "mills.md"
    original.parent.mkdir()
    original.write_text("".join(
        f"# Mill {i}   \n\nThe river turns wheel {i} near Carlisle{i}.  \nFarmers bring barley{i} and oats.\n\n"
        f"Merchants trade copper{i} and wool{i} at the market.\t\n\n" for i in range(6)
    ), encoding="utf-8")
    out, data = tmp_path / "set", tmp_path / "data"
    proc = run_cli("questions", "generate", str(original), "--out", str(out), "--method", "model-free", "--n", "4",
                   data_dir=data)
    assert proc.returncode == 0, proc.stderr.decode()
    csv_path = str(out / "questions.csv")
    proc = run_cli("eval", "--questions", csv_path, "--corpora", str(original.parent), "--chunker", "recursive",
                   "--param", "chunk_size=40", "--json", "--no-cache", data_dir=data)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["per_corpus"]["mills"]["questions"] == 4

    # A file that really differs: one line naming the corpus, both readings, the two texts and what to give.
    original.write_text(original.read_text(encoding="utf-8").replace("Mill", "Mull"), encoding="utf-8")
    line = assert_one_line_error(
        run_cli("questions", "check", "--questions", csv_path, "--corpora", str(original.parent), data_dir=data), 1,
        "content does not match corpus 'mills' as written or as loaded at [",
    )
    assert line.startswith("error: questions.csv row ") and "the loaded text has '# Mull" in line
    assert line.endswith("; use the corpus the questions were made on (corpora/ beside their CSV)")
