"""``ppl --csv`` and ``theta-curve``: the CLI prints what the Meta-Chunking page shows, from the same lab call.

The model is the model-free ``FakeScorer`` (patched in), so these run in-process in a moment;
the bad-argument cases run the real ``python -m backend`` to check the one-line error and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.chunkers import ModelContext
from backend.cli.main import main
from backend.lab.ppl import PPLSettings, ppl_view, score_document
from backend.text.document import Document
from tests.backend.cli.test_cli_models import run_cli
from tests.support.patching import patch_everywhere
from tests.support.fake_scores import FakeScorer

TEXT = "Tea is hot. Rain fell on the roof. Stocks crashed today. We went home early. The night was cold and long."


@pytest.fixture
def doc_file(tmp_path: Path) -> Path:
    path = tmp_path / "tea.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.fixture
def fake_model(monkeypatch, tmp_path):
    """Every model the CLI loads is the FakeScorer; the output cache is a fresh folder."""
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    patch_everywhere(monkeypatch, "backend.models.scorer.load_scorer", lambda *_a, **_k: FakeScorer())


def _cli(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _page(path: Path, settings: PPLSettings):
    """What the page shows for these settings: the same lab call on the same scores."""
    doc = Document.from_text(path.read_text(encoding="utf-8"), source=path.name)
    return ppl_view(doc, score_document(doc, ModelContext(scorer=FakeScorer(), use_cache=False), ""), settings)


def test_ppl_csv_prints_the_pages_per_sentence_csv(doc_file, fake_model, capsys) -> None:
    out = _cli(capsys, "ppl", str(doc_file), "--csv", "--threshold", "0.3", "--rule", "paper", "--no-cache")
    assert out == _page(doc_file, PPLSettings(threshold=0.3, rule="paper")).values_csv()
    rows = out.splitlines()
    assert rows[0] == "index,start,end,tokens,nll_mean,ppl,nll,drop,boundary,chunk,text"
    assert [r.split(",")[:3] for r in rows[1:]] == [
        ["0", "0", "11"], ["1", "12", "34"], ["2", "35", "56"], ["3", "57", "76"], ["4", "77", "105"],
    ]
    # Without a θ: the chosen chunker's own default (ppl_combined's 0 with a target length).
    flags = ("--csv", "--target-length", "12", "--tokenizer", "words", "--no-cache")
    combined = _cli(capsys, "ppl", str(doc_file), *flags)
    assert combined == _page(doc_file, PPLSettings(target_length=12, tokenizer="words", threshold=0.0)).values_csv()


def test_ppl_without_csv_still_prints_the_scores(doc_file, fake_model, capsys) -> None:
    lines = _cli(capsys, "ppl", str(doc_file), "--no-cache").splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2, 3, 4]
    assert list(json.loads(lines[0])) == ["index", "start", "end", "text", "tokens", "nll_mean", "ppl"]


def test_theta_curve_prints_the_pages_curve_and_the_aimed_theta(doc_file, fake_model, capsys) -> None:
    data = json.loads(_cli(capsys, "theta-curve", str(doc_file), "--value", "ppl", "--aim", "10", "--no-cache"))
    view = _page(doc_file, PPLSettings(value="ppl"))
    assert data == view.curve_json(aim=10)
    assert data["thresholds"] == [float(t) for t in view.curve.thresholds]
    assert (data["sentences"], data["value"], data["chunks"][-1]) == (5, "ppl", 1)
    assert data["aim"]["threshold"] == view.aim(10)[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ppl", "{doc}", "--threshold", "0.3"), "error: --threshold: only with --csv"),
        (("ppl", "{doc}", "--csv", "--rule", "loose"), "argument --rule: ppl: rule must be one of reference, paper"),
        (("ppl", "{doc}", "--csv", "--threshold", "abc"), "argument --threshold: ppl: threshold must be float"),
        (("ppl", "{doc}", "--csv", "--target-length", "-3"), "target_length (-3) must be at least 0"),
        (("theta-curve", "{doc}", "--aim", "0"), "argument --aim: must be a positive number, got '0'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(doc_file, tmp_path, args, message) -> None:
    proc = run_cli(*(a.format(doc=doc_file) for a in args), cache_dir=tmp_path / "cache")
    stderr = proc.stderr.decode()
    assert proc.returncode == 2 and stderr.count("\n") == 1 and message in stderr, stderr
    assert proc.stdout == b""
