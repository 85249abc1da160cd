"""Corpus runs in-process: the inputs of a folder and a zip, the rows, the skipped files, resuming, the aggregate."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from backend.chunking import ChunkerConfig
from backend.corpus.aggregate import aggregate_table, corpus_progress, disagreements, metric_values
from backend.corpus.engine import run_corpus
from backend.corpus.inputs import corpus_inputs
from backend.corpus.results import RESULTS, read_results
from backend.corpus.spec import CorpusSpec, parse_corpus_metrics, tag_configs
from backend.errors import InputError, ParameterError
from backend.models.cache import OutputCache
from backend.samples import SAMPLES_DIR

CONFIGS = tag_configs([ChunkerConfig.make("recursive", {"chunk_size": 80}), ChunkerConfig.make("sentence", {"chunk_size": 60})])


def _corpus(folder: Path) -> Path:
    (folder / "sub").mkdir(parents=True)
    text = (SAMPLES_DIR / "narrative_clockmaker.txt").read_text(encoding="utf-8")
    (folder / "a.txt").write_text(text[:1500], encoding="utf-8")
    (folder / "sub" / "b.md").write_text((SAMPLES_DIR / "technical_kestrel.md").read_text(encoding="utf-8")[:2000],
                                         encoding="utf-8")
    (folder / "c.txt").write_text(text[3000:4200], encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"not a pdf at all")
    (folder / "notes.xyz").write_text("x", encoding="utf-8")
    (folder / ".hidden.txt").write_text("never read", encoding="utf-8")
    return folder


def test_a_folder_lists_its_documents_and_the_files_no_loader_reads(tmp_path: Path) -> None:
    inputs = corpus_inputs(_corpus(tmp_path / "c"))
    assert [f.name for f in inputs.files] == ["a.txt", "broken.pdf", "c.txt", "sub/b.md"]
    assert [(s.name, s.reason.split(" (")[0]) for s in inputs.skipped] == [("notes.xyz", "unsupported format")]


def test_a_zip_is_extracted_and_a_member_outside_the_folder_is_refused(tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "c")
    z = tmp_path / "c.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(folder).as_posix())
        zf.writestr("__MACOSX/._a.txt", "resource fork")
    inputs = corpus_inputs(z, extract_to=tmp_path / "x")
    assert [f.name for f in inputs.files] == ["a.txt", "broken.pdf", "c.txt", "sub/b.md"]
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../evil.txt", "x")
    with pytest.raises(InputError, match="outside the folder"):
        corpus_inputs(bad, extract_to=tmp_path / "y")
    assert not (tmp_path / "evil.txt").exists()
    with pytest.raises(InputError, match="no such folder"):
        corpus_inputs(tmp_path / "missing")


def test_metrics_and_configurations_are_checked_before_any_document(tmp_path: Path) -> None:
    assert parse_corpus_metrics("retrieval,bc") == ("stats", "bc", "retrieval")
    with pytest.raises(ParameterError, match="unknown metric 'ppl'"):
        parse_corpus_metrics("bc,ppl")
    with pytest.raises(ParameterError, match="given twice"):
        tag_configs([CONFIGS[0].config, CONFIGS[0].config])
    with pytest.raises(ParameterError, match="unknown parameter"):
        tag_configs([ChunkerConfig.make("sentence", {"max_tokens": 5})])
    with pytest.raises(ParameterError, match="needs a question set"):
        CorpusSpec(configs=CONFIGS, metrics=("stats", "retrieval"))


def test_rows_per_document_and_configuration_skipped_files_and_a_resume_that_recomputes_nothing(tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "c")
    out = tmp_path / "out"
    cache = OutputCache(tmp_path / "cache")
    spec = CorpusSpec(configs=CONFIGS[:1], metrics=("stats", "ds"))
    from backend.corpus.engine import LocalEngine

    first = run_corpus(folder, spec, out, engine=LocalEngine(cache=cache))
    assert (first.documents, first.ran, first.resumed_rows) == (4, 4, 0)
    res = read_results(out)
    assert sorted((r["doc"], r["tag"]) for r in res.rows) == [("a.txt", "A"), ("c.txt", "A"), ("sub/b.md", "A")]
    assert {s["doc"]: s["error"].split(" (")[0] for s in res.skipped} == {
        "broken.pdf": "'broken.pdf' is not a PDF", "notes.xyz": "unsupported format"}
    assert first.counts["texts_embedded"] == sum(r["work"]["texts_embedded"] for r in res.rows) > 0
    for r in res.rows:
        assert r["ds"]["method"] == "exact" and r["ds"]["pairs_scored"] == r["chunks"] - 1
    # Again, with B added and an empty cache: only B runs (A's rows are not recomputed), and nothing is skipped twice.
    spec2 = CorpusSpec(configs=CONFIGS, metrics=("stats", "ds"))
    second = run_corpus(folder, spec2, out, engine=LocalEngine(cache=OutputCache(tmp_path / "cache2")))
    res2 = read_results(out)
    b_rows = [r for r in res2.rows if r["tag"] == "B"]
    assert second.resumed_rows == 3 and second.ran == 3
    assert second.counts["texts_embedded"] == sum(r["work"]["texts_embedded"] for r in b_rows)
    lines = (out / RESULTS).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6 and len(res2.skipped) == 2
    assert corpus_progress(res2, 4).line() == "3 of 4 documents done (6 rows); 2 files skipped"
    # Other settings into the same folder are refused, naming what to do.
    with pytest.raises(ParameterError, match="other settings"):
        run_corpus(folder, CorpusSpec(configs=CONFIGS, metrics=("stats",)), out)


def test_a_last_line_cut_by_a_kill_is_dropped_and_the_document_runs_again(tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "c")
    out = tmp_path / "out"
    spec = CorpusSpec(configs=CONFIGS[:1])
    run_corpus(folder, spec, out)
    lines = (out / RESULTS).read_text(encoding="utf-8").splitlines(keepends=True)
    (out / RESULTS).write_text("".join(lines[:-1]) + lines[-1][:20], encoding="utf-8")  # killed mid-write
    again = run_corpus(folder, spec, out)
    assert again.ran == 1 and again.resumed_rows == 2
    rows = [json.loads(x) for x in (out / RESULTS).read_text(encoding="utf-8").splitlines()]
    assert sorted(r["doc"] for r in rows) == ["a.txt", "c.txt", "sub/b.md"]


ROWS = [
    {"doc": d, "tag": t, "config": c, "label": c, "chunks": n, "mean_tokens": 100.0,
     "bc": {"estimate": v, "ci_low": v - h, "ci_high": v + h, "pairs_scored": 5 if h else 9, "pairs_total": 9,
            "method": "t" if h else "exact"},
     "retrieval": {"questions": 0, "recall": None}}
    for d, t, c, n, v, h in [
        ("d1", "A", "a", 4, 0.9, 0.0), ("d1", "B", "b", 6, 0.8, 0.0),
        ("d2", "A", "a", 5, 0.7, 0.1), ("d2", "B", "b", 7, 0.75, 0.0),
        ("d3", "A", "a", 6, 0.8, 0.0), ("d3", "B", "b", 8, 0.5, 0.0),
    ]
] + [{"doc": "d4", "tag": "A", "config": "a", "label": "a", "error": "boom"}]


def test_the_aggregate_is_a_t_interval_over_documents_widened_by_the_estimates() -> None:
    values = metric_values(ROWS)
    assert len(values) == 18 and set(values["metric"]) == {"chunks", "mean_tokens", "bc"}
    table = {(r["tag"], r["metric"]): r for r in aggregate_table(ROWS)}
    a = table[("A", "bc")]
    assert (a["documents"], a["estimated"]) == (3, 1)
    assert a["mean"] == pytest.approx(0.8) and a["std"] == pytest.approx(0.1)
    se = (0.1**2 / 3 + (0.1 / 1.959963984540054) ** 2 / 9) ** 0.5
    assert a["ci_high"] - a["mean"] == pytest.approx(4.3027 * se)
    b = table[("B", "bc")]
    assert b["ci_high"] - b["mean"] == pytest.approx(4.3027 * b["std"] / 3**0.5)
    assert (table[("A", "chunks")]["min"], table[("A", "chunks")]["median"], table[("A", "chunks")]["max"]) == (4, 5, 6)


def test_disagreements_rank_documents_by_their_spread_in_corpus_units() -> None:
    worst = disagreements(ROWS, "bc")
    assert [(d["doc"], d["best"], d["worst"]) for d in worst] == [("d3", "A", "B"), ("d1", "A", "B"), ("d2", "B", "A")]
    assert worst[0]["spread"] == pytest.approx(0.3) and worst[0]["best_overall"] == "A"
    assert worst[0]["values"] == {"A": 0.8, "B": 0.5}
    assert disagreements(ROWS, "iou") == []
