"""The ``chunklab`` facade: loading, chunking from a spec, evaluation and metrics, through the CLI's own functions."""

from __future__ import annotations

import json

import pytest

import chunklab
from backend.cli.main import main
from tests.conftest import ROOT

PDF = ROOT / "assets/samples/technical_kestrel.pdf"
MD = ROOT / "assets/samples/technical_kestrel.md"


def test_load_takes_a_path_bytes_or_a_string_and_chunks_index_the_loaded_text():
    from_path = chunklab.load(PDF)
    from_bytes = chunklab.load(PDF.read_bytes(), name="kestrel.pdf")
    assert from_bytes.text == from_path.text and len(from_path.pages) == 7
    chunking = chunklab.Chunker("recursive chunk_size=200").chunk(from_path)
    assert all(from_path.text[c.start : c.end] == c.text for c in chunking)
    assert [c.page for c in chunking] == sorted(c.page for c in chunking)
    assert chunking[-1].last_page == 7 and chunking.spans[0][0] == chunking[0].start
    raw = "  Keep   these\r\nspaces.  "  # from_text keeps the string as given: offsets index it
    assert chunklab.from_text(raw).text == raw
    pieces = chunklab.chunk(raw, "fixed_token chunk_size=3")
    assert "".join(pieces.texts) == raw and pieces[-1].end == len(raw)


def test_chunk_records_and_the_spec_round_trip():
    chunker = chunklab.chunker("sentence chunk_size=60 chunk_overlap=10 tokenizer=words")
    chunking = chunker.chunk(chunklab.load(MD))
    assert chunker.spec == "sentence chunk_overlap=10 chunk_size=60 tokenizer=words" == chunking.spec
    assert chunklab.Chunker(chunking.spec).chunk(chunking.document).spans == chunking.spans
    first = json.loads(chunking.to_jsonl().splitlines()[0])
    assert set(first) == {"index", "start", "end", "text", "tokens", "page", "last_page"}
    assert chunker.needs == () and chunklab.Chunker("ppl").needs == ("lm",)
    assert {c["name"] for c in chunklab.chunkers()} >= {"recursive", "ppl", "semantic", "manual"}


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: chunklab.Chunker("nope"), chunklab.ParameterError, "unknown chunker 'nope'"),
        (lambda: chunklab.Chunker("recursive chunk_size"), chunklab.ParameterError, "must look like key=value"),
        (lambda: chunklab.Chunker("recursive 'chunk_size=2"), chunklab.ParameterError, "quotation"),
        (lambda: chunklab.load(ROOT / "nothing.pdf"), chunklab.InputError, "no such file"),
        (lambda: chunklab.load(ROOT / "assets" / "samples"), chunklab.InputError, "'samples': Is a directory"),
        (lambda: chunklab.load(b"%PDF-1.4 broken", name="x.pdf"), chunklab.InputError, "x.pdf"),
        (lambda: chunklab.load(b"text"), TypeError, "needs name="),
        (lambda: chunklab.load(ROOT / "pyproject.toml"), chunklab.InputError, "toml"),
    ],
)
def test_bad_input_is_one_clear_error(call, error, message):
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_evaluate_and_metrics_give_the_cli_numbers(capsysbinary):
    chunker = chunklab.Chunker("recursive chunk_size=200")
    result = chunklab.evaluate(chunker, "sample:narrative")
    assert main(["eval", "--questions", "sample:narrative", "--chunker", "recursive", "--param", "chunk_size=200",
                 "--json"]) == 0
    cli = json.loads(capsysbinary.readouterr().out)
    metrics = ("recall_mean", "precision_mean", "precision_omega_mean", "iou_mean", "iou_std", "per_corpus", "chunks")
    assert {k: result.to_json()[k] for k in metrics} == {k: cli[k] for k in metrics}
    assert 0 < result.summary.recall_mean <= 1
    chunking = chunker.chunk(chunklab.load(ROOT / "assets/samples/narrative_clockmaker.txt"))
    report = chunklab.metrics(chunking, ["ds"], chunker=chunker)
    assert main(["metrics", "sample:narrative", "--chunker", "recursive", "--param", "chunk_size=200",
                 "--metrics", "ds"]) == 0
    cli = json.loads(capsysbinary.readouterr().out)
    assert report.to_json()["ds"] == pytest.approx(cli["ds"]) and report.values["ds"] == pytest.approx(cli["ds_mean"])
    with pytest.raises(chunklab.ParameterError, match="choose from bc, cs, ds"):
        chunklab.metrics(chunking, ["iou"])
